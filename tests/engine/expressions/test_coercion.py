"""Common types of expression lists (ksqlDB's CoercionUtil): what widens, what converts, what fails."""

from __future__ import annotations

import pytest

from engine.errors import TypeCheckError
from engine.expressions.coercion import common_type, merge_types
from engine.plan import types as T
from engine.plan.expr import ColumnRef, Literal


def test_a_non_string_literal_converts_to_a_string_target() -> None:
    items = [(Literal("a", T.STRING), T.STRING), (Literal(1, T.INTEGER), T.INTEGER)]
    assert common_type(items) == T.STRING


def test_a_non_string_column_does_not_convert_to_a_string_target() -> None:
    items = [(Literal("a", T.STRING), T.STRING), (ColumnRef("I"), T.INTEGER)]
    with pytest.raises(TypeCheckError) as info:
        common_type(items)
    assert str(info.value).startswith("operator does not exist: STRING = INTEGER (I)")


def test_a_string_literal_converts_to_the_numeric_type_its_text_has() -> None:
    items = [(ColumnRef("I"), T.INTEGER), (Literal("1.5", T.STRING), T.STRING)]
    assert common_type(items) == T.Decimal(11, 1)


def test_collections_merge_element_wise_and_different_kinds_do_not_merge() -> None:
    assert merge_types(T.Map(T.STRING, T.INTEGER), T.Map(T.STRING, T.BIGINT)) == T.Map(T.STRING, T.BIGINT)
    assert merge_types(T.Array(T.INTEGER), T.Map(T.STRING, T.INTEGER)) is None
    assert merge_types(T.STRING, T.Map(T.STRING, T.INTEGER)) is None
    items = [(ColumnRef("A"), T.Array(T.INTEGER)), (ColumnRef("M"), T.Map(T.STRING, T.INTEGER))]
    with pytest.raises(TypeCheckError, match="operator does not exist"):
        common_type(items)
