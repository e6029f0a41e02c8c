"""Edges of literal parsing, implicit widening, type merging and DOUBLE arithmetic that the
planned cases do not reach (found by the mutation check)."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from engine.errors import TypeCheckError
from engine.expressions import infer_type
from engine.expressions.cast import (
    make_cast,
    make_coercion,
    numeric_type_of_text,
    parse_boolean_exact,
)
from engine.expressions.coercion import common_type, merge_types
from engine.expressions.operators import _double_div, _double_mod, comparable, comparison_key_type
from engine.plan import types as T
from engine.plan.expr import ColumnRef, Literal, Negate


def test_boolean_text_outside_the_accepted_words_is_an_error() -> None:
    assert parse_boolean_exact(" Yes ") is True
    with pytest.raises(ValueError, match='invalid input syntax for type BOOLEAN: "maybe"'):
        parse_boolean_exact("maybe")


def test_whole_numbers_as_text_are_integer_then_bigint() -> None:
    assert numeric_type_of_text("5") == T.INTEGER
    assert numeric_type_of_text("3000000000") == T.BIGINT


def test_a_date_casts_to_a_timestamp_at_midnight() -> None:
    assert make_cast(T.DATE, T.TIMESTAMP)(dt.date(2020, 1, 2)) == dt.datetime(2020, 1, 2)


def test_an_array_and_a_scalar_have_no_common_type() -> None:
    assert merge_types(T.INTEGER, T.Array(T.INTEGER)) is None
    assert merge_types(T.Array(T.INTEGER), T.Array(T.BIGINT)) == T.Array(T.BIGINT)


def test_maps_merge_key_and_value_types_or_have_none() -> None:
    assert merge_types(T.Map(T.STRING, T.INTEGER), T.Map(T.STRING, T.BIGINT)) == T.Map(
        T.STRING, T.BIGINT
    )
    assert merge_types(T.Map(T.INTEGER, T.STRING), T.Map(T.BOOLEAN, T.STRING)) is None
    assert merge_types(T.Map(T.STRING, T.INTEGER), T.Map(T.STRING, T.BOOLEAN)) is None


def test_double_division_and_modulo_by_zero_or_infinity_follow_java() -> None:
    assert math.isnan(_double_div(0.0, 0.0))
    assert _double_div(1.0, -0.0) == -math.inf
    assert math.isnan(_double_mod(math.inf, 2.0))
    assert math.isnan(_double_mod(1.0, 0.0))


def test_times_compare_with_times_and_strings_only() -> None:
    assert comparable("<", T.TIME, T.TIME)
    assert comparable("=", T.TIME, T.STRING)
    assert not comparable("<", T.TIME, T.INTEGER)


def test_a_comparison_with_an_unknown_side_has_no_key_type() -> None:
    assert comparison_key_type(None, T.DATE) is None
    assert comparison_key_type(T.DATE, None) is None
    assert comparison_key_type(T.DATE, T.TIMESTAMP) == T.TIMESTAMP


def test_unary_minus_of_a_string_is_a_type_error() -> None:
    with pytest.raises(TypeCheckError, match="unary minus"):
        infer_type(Negate(Literal("a", T.STRING)), {})


def test_text_that_is_no_timestamp_has_no_common_type_with_a_timestamp() -> None:
    ts = (ColumnRef("TS"), T.TIMESTAMP)
    assert common_type([ts, (Literal("2020-01-01T00:00:00", T.STRING), T.STRING)]) == T.TIMESTAMP
    with pytest.raises(TypeCheckError, match="invalid input syntax for type TIMESTAMP"):
        common_type([ts, (Literal("not a time", T.STRING), T.STRING)])


def test_implicit_conversion_of_text_to_a_number_parses_it() -> None:
    assert make_coercion(T.STRING, T.INTEGER)("12") == 12


def test_implicit_conversion_between_unrelated_types_keeps_the_value() -> None:
    assert make_coercion(T.INTEGER, T.BOOLEAN)(5) == 5
