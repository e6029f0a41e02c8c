from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import EvaluationError, TypeCheckError
from engine.functions import REGISTRY, FunctionKind
from engine.plan import types as T
from engine.plan.types import SqlType


def rows(name: str, types: Sequence[SqlType], *args: Any) -> Any:
    return REGISTRY.resolve(name, types).invoke(list(args))


def test_explode_and_cube_explode_are_table_functions() -> None:
    assert REGISTRY.kind_of("EXPLODE") is FunctionKind.TABLE
    assert REGISTRY.kind_of("CUBE_EXPLODE") is FunctionKind.TABLE


def test_explode_gives_one_row_per_element() -> None:
    assert rows("EXPLODE", [T.Array(T.BIGINT)], [7, None, 9]) == [7, None, 9]
    assert REGISTRY.resolve("EXPLODE", [T.Array(T.Decimal(6, 2))]).return_type == T.Decimal(6, 2)


def test_explode_has_ksqldbs_array_of_decimal_overload_beside_the_generic_one() -> None:
    described = sorted(s.describe() for s in REGISTRY.signatures("EXPLODE"))
    assert described == ["EXPLODE(ARRAY<DECIMAL>)", "EXPLODE(ARRAY<T>)"]
    resolved = REGISTRY.resolve("EXPLODE", [T.Array(T.Decimal(6, 2))])
    assert resolved.signature.params[0] != REGISTRY.resolve("EXPLODE", [T.Array(T.INTEGER)]).signature.params[0]
    assert resolved.return_type == T.Decimal(6, 2)
    assert resolved.invoke([None]) == []
    # A NULL literal takes the DECIMAL overload (fewer generics), typed as before.
    assert REGISTRY.resolve("EXPLODE", [None]).return_type == T.STRING


def test_a_call_no_overload_takes_lists_ksqldbs_alternatives_as_its_udf_index_prints_them() -> None:
    with pytest.raises(TypeCheckError) as raised:
        REGISTRY.resolve("EXPLODE", [T.Map(T.STRING, T.INTEGER)])
    assert str(raised.value) == (
        "Function 'explode' does not accept parameters (MAP<STRING, INTEGER>).\n"
        "Valid alternatives are:\n"
        "explode(ARRAY<DECIMAL> input)\n"
        "explode(ARRAY<T> list)\n"
        "For detailed information on a function run: DESCRIBE FUNCTION <Function-Name>;"
    )


def test_explode_of_null_or_empty_gives_no_rows() -> None:
    assert rows("EXPLODE", [T.Array(T.STRING)], None) == []
    assert rows("EXPLODE", [T.Array(T.STRING)], []) == []


def test_explode_does_not_accept_maps() -> None:
    with pytest.raises(Exception, match="does not accept parameters"):
        REGISTRY.resolve("EXPLODE", [T.Map(T.STRING, T.INTEGER)])


def test_cube_explode_gives_every_combination_of_kept_and_null() -> None:
    result = rows("CUBE_EXPLODE", [T.Array(T.STRING)], ["x", "y"])
    assert result == [[None, None], [None, "y"], ["x", None], ["x", "y"]]
    assert REGISTRY.resolve("CUBE_EXPLODE", [T.Array(T.STRING)]).return_type == T.Array(T.STRING)


def test_cube_explode_does_not_repeat_rows_for_null_elements() -> None:
    result = rows("CUBE_EXPLODE", [T.Array(T.INTEGER)], [1, None])
    assert result == [[None, None], [1, None]]


def test_cube_explode_of_null_gives_no_rows() -> None:
    assert rows("CUBE_EXPLODE", [T.Array(T.INTEGER)], None) == []
    assert rows("CUBE_EXPLODE", [T.Array(T.INTEGER)], []) == [[]]


@given(st.lists(st.integers(), max_size=6, unique=True))
def test_cube_explode_of_distinct_values_has_two_to_the_n_distinct_rows(values: list[int]) -> None:
    result = rows("CUBE_EXPLODE", [T.Array(T.INTEGER)], values)
    assert len(result) == 2 ** len(values)
    assert len({tuple(r) for r in result}) == len(result)


def test_cube_explode_of_more_than_twenty_elements_fails_as_ksqldbs_from_version_2():
    with pytest.raises(EvaluationError) as raised:
        rows("CUBE_EXPLODE", [T.Array(T.INTEGER)], list(range(21)))
    assert str(raised.value) == "cube_explode: too many columns (21); max is 20"
    assert len(rows("CUBE_EXPLODE", [T.Array(T.INTEGER)], [None] * 20)) == 1
    assert REGISTRY.current_semantics("CUBE_EXPLODE") == 2
