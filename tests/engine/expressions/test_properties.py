"""Property tests: three-valued logic and Java integer arithmetic against references."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import EvaluationError
from engine.expressions import compile_expression
from engine.plan import types as T
from engine.plan.expr import Arithmetic, ColumnRef, Logical, Not

BOOLS = st.sampled_from([True, False, None])
INTS = st.integers(min_value=T.INT_MIN, max_value=T.INT_MAX)
LONGS = st.integers(min_value=T.BIGINT_MIN, max_value=T.BIGINT_MAX)
OPS = st.sampled_from(["+", "-", "*", "/", "%"])

# SQL truth tables, written out rather than derived.
AND_TABLE = {
    (True, True): True, (True, False): False, (True, None): None,
    (False, True): False, (False, False): False, (False, None): False,
    (None, True): None, (None, False): False, (None, None): None,
}
OR_TABLE = {
    (True, True): True, (True, False): True, (True, None): True,
    (False, True): True, (False, False): False, (False, None): None,
    (None, True): True, (None, False): None, (None, None): None,
}
NOT_TABLE = {True: False, False: True, None: None}

BOOL_COLUMNS = {"A": T.BOOLEAN, "B": T.BOOLEAN}
AND = compile_expression(Logical("AND", ColumnRef("A"), ColumnRef("B")), BOOL_COLUMNS)
OR = compile_expression(Logical("OR", ColumnRef("A"), ColumnRef("B")), BOOL_COLUMNS)
NOT = compile_expression(Not(ColumnRef("A")), BOOL_COLUMNS)


@given(BOOLS, BOOLS)
def test_and_or_follow_sql_truth_tables(a: bool | None, b: bool | None) -> None:
    row = {"A": a, "B": b}
    assert AND(row) is AND_TABLE[(a, b)]
    assert OR(row) is OR_TABLE[(a, b)]


@given(BOOLS)
def test_not_follows_sql_truth_table(a: bool | None) -> None:
    assert NOT({"A": a}) is NOT_TABLE[a]


@given(BOOLS, BOOLS)
def test_de_morgan_holds_under_three_valued_logic(a: bool | None, b: bool | None) -> None:
    row = {"A": a, "B": b}
    not_and = compile_expression(
        Not(Logical("AND", ColumnRef("A"), ColumnRef("B"))), BOOL_COLUMNS
    )
    or_nots = compile_expression(
        Logical("OR", Not(ColumnRef("A")), Not(ColumnRef("B"))), BOOL_COLUMNS
    )
    assert not_and(row) is or_nots(row)


def java_reference(op: str, a: int, b: int, bits: int) -> int | None:
    """Big-int arithmetic, then Java's truncating division and two's complement wrap."""
    if op in "/%" and b == 0:
        return None
    if op == "+":
        exact = a + b
    elif op == "-":
        exact = a - b
    elif op == "*":
        exact = a * b
    else:
        quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        exact = quotient if op == "/" else a - b * quotient
    half = 2 ** (bits - 1)
    return (exact + half) % (2 * half) - half


def evaluate(op: str, sql_type: T.SqlType, a: int, b: int) -> Any:
    fn = compile_expression(
        Arithmetic(op, ColumnRef("X"), ColumnRef("Y")), {"X": sql_type, "Y": sql_type}
    )
    try:
        return fn({"X": a, "Y": b})
    except EvaluationError:
        return None


@given(OPS, INTS, INTS)
def test_integer_arithmetic_matches_java_int(op: str, a: int, b: int) -> None:
    assert evaluate(op, T.INTEGER, a, b) == java_reference(op, a, b, 32)


@given(OPS, LONGS, LONGS)
def test_bigint_arithmetic_matches_java_long(op: str, a: int, b: int) -> None:
    assert evaluate(op, T.BIGINT, a, b) == java_reference(op, a, b, 64)


@given(st.sampled_from(["/", "%"]), INTS)
def test_integer_division_or_modulo_by_zero_raises(op: str, a: int) -> None:
    fn = compile_expression(
        Arithmetic(op, ColumnRef("X"), ColumnRef("Y")), {"X": T.INTEGER, "Y": T.INTEGER}
    )
    with pytest.raises(EvaluationError, match="by zero"):
        fn({"X": a, "Y": 0})
