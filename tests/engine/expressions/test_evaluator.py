from __future__ import annotations

import datetime as dt
from decimal import Decimal as D
from typing import Any

import pytest

from engine.errors import EvaluationError, InternalError
from engine.expressions import compile_expression
from engine.plan import types as T
from engine.plan.expr import (
    Arithmetic,
    Between,
    Case,
    Cast,
    ColumnRef,
    Comparison,
    CreateArray,
    CreateMap,
    CreateStruct,
    Dereference,
    Expr,
    FunctionCall,
    In,
    IsNull,
    Lambda,
    LambdaVariable,
    Like,
    Literal,
    Logical,
    MapEntry,
    Negate,
    Not,
    StructField,
    Subscript,
    WhenClause,
)

COLUMNS = {
    "I": T.INTEGER,
    "J": T.INTEGER,
    "L": T.BIGINT,
    "D": T.DOUBLE,
    "E": T.Decimal(4, 2),
    "F": T.Decimal(4, 2),
    "S": T.STRING,
    "P": T.STRING,
    "B": T.BOOLEAN,
    "TS": T.TIMESTAMP,
    "DT": T.DATE,
    "ROWTIME": T.BIGINT,
    "ARR": T.Array(T.INTEGER),
    "M": T.Map(T.STRING, T.INTEGER),
    "ST": T.Struct((T.Field("A", T.INTEGER), T.Field("N", T.STRING))),
}


def col(name: str) -> ColumnRef:
    return ColumnRef(name)


def lit(value: Any, sql_type: T.SqlType | None = None) -> Literal:
    if sql_type is None and value is not None:
        sql_type = {bool: T.BOOLEAN, int: T.INTEGER, float: T.DOUBLE, str: T.STRING}[type(value)]
    if isinstance(value, D) and sql_type is None:
        raise AssertionError("give decimals a type")
    return Literal(value, sql_type)


def run(expr: Expr, **row: Any) -> Any:
    return compile_expression(expr, COLUMNS)(row)


def test_integer_addition_wraps_like_java_int() -> None:
    assert run(Arithmetic("+", col("I"), lit(1)), I=2**31 - 1) == -(2**31)


def test_bigint_multiplication_wraps_like_java_long() -> None:
    assert run(Arithmetic("*", col("L"), lit(2)), L=2**62) == -(2**63)


def test_integer_division_truncates_toward_zero() -> None:
    assert run(Arithmetic("/", col("I"), lit(2)), I=-7) == -3


def test_integer_modulo_takes_the_sign_of_the_dividend() -> None:
    assert run(Arithmetic("%", col("I"), lit(3)), I=-7) == -1
    assert run(Arithmetic("%", col("I"), lit(-3)), I=7) == 1


def test_integer_division_by_zero_is_an_evaluation_error_naming_the_expression() -> None:
    with pytest.raises(EvaluationError, match=r"\(I / 0\)"):
        run(Arithmetic("/", col("I"), lit(0)), I=5)


def test_double_division_by_zero_is_infinity() -> None:
    assert run(Arithmetic("/", col("D"), lit(0.0)), D=1.0) == float("inf")
    assert run(Arithmetic("/", col("D"), lit(0.0)), D=-1.0) == float("-inf")


def test_arithmetic_with_null_operand_is_null() -> None:
    assert run(Arithmetic("+", col("I"), lit(1))) is None


def test_decimal_addition_keeps_the_result_scale() -> None:
    assert run(Arithmetic("+", col("E"), col("F")), E=D("10.01"), F=D("5.10")) == D("15.11")


def test_decimal_division_rounds_half_up_to_the_result_scale() -> None:
    result = run(Arithmetic("/", col("E"), col("F")), E=D("2.00"), F=D("3.00"))
    assert result == D("0.6666667")
    assert result.as_tuple().exponent == -7


def test_decimal_division_by_zero_is_an_evaluation_error() -> None:
    with pytest.raises(EvaluationError):
        run(Arithmetic("/", col("E"), col("F")), E=D("1.00"), F=D("0.00"))


def test_decimal_modulo_takes_the_sign_of_the_dividend_and_zero_is_an_evaluation_error() -> None:
    assert run(Arithmetic("%", col("E"), col("F")), E=D("7.50"), F=D("2.00")) == D("1.50")
    assert run(Arithmetic("%", col("E"), col("F")), E=D("-7.50"), F=D("2.00")) == D("-1.50")
    with pytest.raises(EvaluationError, match=r"\(E % F\)"):
        run(Arithmetic("%", col("E"), col("F")), E=D("1.00"), F=D("0.00"))


def test_decimal_plus_integer_widens_the_integer() -> None:
    assert run(Arithmetic("+", col("E"), col("I")), E=D("10.01"), I=5) == D("15.01")


def test_decimal_plus_double_is_a_double() -> None:
    assert run(Arithmetic("+", col("E"), col("D")), E=D("1.5"), D=0.25) == 1.75


def test_string_plus_string_concatenates() -> None:
    assert run(Arithmetic("+", col("S"), lit("h")), S="ste") == "steh"


def test_negate_wraps_integer_minimum() -> None:
    assert run(Negate(col("I")), I=-(2**31)) == -(2**31)


def test_comparison_with_null_is_false_as_in_ksqldb() -> None:
    assert run(Comparison("=", col("I"), lit(1))) is False
    assert run(Comparison("<>", col("I"), lit(1))) is False


def test_is_distinct_from_treats_nulls_as_values() -> None:
    distinct = Comparison("IS DISTINCT FROM", col("I"), col("J"))
    assert run(distinct) is False
    assert run(distinct, I=1) is True
    assert run(distinct, I=1, J=1) is False
    assert run(Comparison("IS NOT DISTINCT FROM", col("I"), col("J"))) is True


def test_double_equals_decimal_literal_compares_as_doubles() -> None:
    assert run(Comparison("=", col("D"), lit(D("1.1"), T.Decimal(2, 1))), D=1.1) is True


def test_decimals_of_different_scale_compare_by_value() -> None:
    assert run(Comparison("=", col("E"), lit(D("1.200"), T.Decimal(4, 3))), E=D("1.20")) is True


def test_rowtime_compares_with_a_timestamp_string() -> None:
    expr = Comparison(">", col("ROWTIME"), lit("2018-01-01T00:00:00.001"))
    assert run(expr, ROWTIME=1514764800002) is True
    assert run(expr, ROWTIME=1514764800001) is False


def test_rowtime_compares_with_a_partial_timestamp_string_with_zone() -> None:
    assert run(Comparison(">=", col("ROWTIME"), lit("2018")), ROWTIME=1514764800000) is True
    expr = Comparison(">", col("ROWTIME"), lit("2019-01-01T00:00:00+0100"))
    assert run(expr, ROWTIME=1546297200001) is True


def test_timestamp_compares_with_string_and_date() -> None:
    ts = dt.datetime(2020, 5, 1, 12, 0)
    assert run(Comparison(">", col("TS"), lit("2020-05-01T11:59:59")), TS=ts) is True
    assert run(Comparison(">", col("TS"), col("DT")), TS=ts, DT=dt.date(2020, 5, 1)) is True


def test_date_compares_with_string() -> None:
    assert run(Comparison(">", col("DT"), lit("1970-01-11")), DT=dt.date(1970, 1, 12)) is True


def test_array_and_struct_equality() -> None:
    assert run(Comparison("=", col("ARR"), CreateArray((lit(1), lit(2)))), ARR=[1, 2]) is True
    struct = CreateStruct((StructField("A", lit(1)), StructField("N", lit("x"))))
    assert run(Comparison("=", col("ST"), struct), ST={"A": 1, "N": "x"}) is True


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), (1, False), (2, True), (3, True), (4, True), (5, False)],
)
def test_between_is_inclusive_and_false_on_null(value: int | None, expected: bool) -> None:
    assert run(Between(col("I"), lit(2), lit(4)), I=value) is expected


def test_not_between_is_true_on_null_as_in_ksqldb() -> None:
    assert run(Between(col("I"), lit(2), lit(4), negated=True)) is True


def test_in_matches_and_ignores_null_items() -> None:
    expr = In(col("I"), (lit(None), lit(1), lit(2)))
    assert run(expr, I=2) is True
    assert run(expr, I=3) is False
    assert run(expr) is False
    assert run(In(col("I"), (lit(1),), negated=True), I=3) is True


def test_in_converts_string_literals_to_the_value_type() -> None:
    assert run(In(col("I"), (lit("7"),)), I=7) is True


@pytest.mark.parametrize(
    ("value", "pattern", "expected"),
    [
        ("barfoobaz", "%foo%", True),
        ("foo", "f_o", True),
        ("fooo", "f_o", False),
        ("Foo", "foo", False),
        ("a.b", "a.b", True),
        ("axb", "a.b", False),
        ("line\nbreak", "line%", True),
    ],
)
def test_like_wildcards_are_whole_string_and_case_sensitive(
    value: str, pattern: str, expected: bool
) -> None:
    assert run(Like(col("S"), lit(pattern)), S=value) is expected
    assert run(Like(col("S"), col("P")), S=value, P=pattern) is expected


def test_like_escape_makes_wildcards_literal() -> None:
    expr = Like(col("S"), col("P"), escape="!")
    assert run(expr, S="%", P="!%") is True
    assert run(expr, S="x", P="!%") is False


def test_like_pattern_ending_with_its_escape_character_fails_each_record() -> None:
    message = "LIKE pattern must not end with escape character"
    for pattern in (lit("ab!"), col("P")):
        expr = Like(col("S"), pattern, escape="!")
        with pytest.raises(EvaluationError, match=f"^{message}$"):
            run(expr, S="ab", P="ab!")
    # an escaped escape character is a literal one
    assert run(Like(col("S"), lit("ab!!"), escape="!"), S="ab!") is True


def test_like_on_null_is_false_and_not_like_true() -> None:
    assert run(Like(col("S"), lit("%"))) is False
    assert run(Like(col("S"), lit("%"), negated=True)) is True


def test_is_null_and_is_not_null() -> None:
    assert run(IsNull(col("S"))) is True
    assert run(IsNull(col("S"), negated=True), S="x") is True


def test_searched_case_takes_the_first_true_branch() -> None:
    expr = Case(
        None,
        (
            WhenClause(Comparison("<", col("I"), lit(0)), lit("neg")),
            WhenClause(Comparison("<", col("I"), lit(10)), lit("small")),
        ),
        lit("big"),
    )
    assert run(expr, I=-1) == "neg"
    assert run(expr, I=5) == "small"
    assert run(expr, I=50) == "big"
    assert run(expr) == "big"  # NULL comparisons are false


def test_case_without_else_is_null() -> None:
    expr = Case(None, (WhenClause(col("B"), col("D")), WhenClause(Not(col("B")), col("D"))))
    assert run(expr, B=True, D=1.5) == 1.5
    assert run(expr) is None


def test_simple_case_compares_the_operand() -> None:
    expr = Case(col("I"), (WhenClause(lit(1), lit("one")), WhenClause(lit(2), lit("two"))))
    assert run(expr, I=2) == "two"
    assert run(expr, I=3) is None


def test_struct_dereference_and_null_struct() -> None:
    assert run(Dereference(col("ST"), "A"), ST={"A": 4, "N": None}) == 4
    assert run(Dereference(col("ST"), "A")) is None


@pytest.mark.parametrize(
    ("index", "expected"), [(1, 10), (3, 30), (-1, 30), (-3, 10), (0, None), (4, None), (-4, None)]
)
def test_array_index_is_one_based_and_negative_from_the_end(index: int, expected: Any) -> None:
    assert run(Subscript(col("ARR"), lit(index)), ARR=[10, 20, 30]) == expected


def test_map_lookup_of_missing_key_is_null() -> None:
    assert run(Subscript(col("M"), lit("a")), M={"a": 1}) == 1
    assert run(Subscript(col("M"), lit("b")), M={"a": 1}) is None


def test_array_constructor_coerces_to_the_common_type() -> None:
    expr = CreateArray((lit(None), lit(10), lit("2e1"), col("I"), col("L")))
    assert run(expr, I=30, L=40) == [None, 10, 20, 30, 40]


def test_map_constructor_converts_literals_to_the_common_types() -> None:
    expr = CreateMap((MapEntry(col("S"), col("B")), MapEntry(lit(10), lit("no"))))
    assert run(expr, S="a", B=True) == {"a": True, "10": False}


def test_array_of_structs_merges_fields() -> None:
    first = CreateStruct((StructField("X", col("I")), StructField("Y", col("L"))))
    second = CreateStruct((StructField("Y", col("I")), StructField("Z", col("L"))))
    result = run(CreateArray((lit(None), first, second)), I=1, L=2)
    assert result == [None, {"X": 1, "Y": 2, "Z": None}, {"X": None, "Y": 1, "Z": 2}]


def test_function_call_coerces_arguments_to_parameter_types() -> None:
    # ABS has INTEGER, BIGINT, DECIMAL and DOUBLE overloads; a DOUBLE column picks DOUBLE.
    assert run(FunctionCall("ABS", (col("D"),)), D=-2.5) == 2.5
    assert run(FunctionCall("ABS", (col("E"),)), E=D("-1.25")) == D("1.25")


def test_lambda_arguments_become_python_callables() -> None:
    body = Arithmetic("+", LambdaVariable("X"), col("I"))
    expr = FunctionCall("TRANSFORM", (col("ARR"), Lambda(("X",), body)))
    assert run(expr, ARR=[1, 2], I=10) == [11, 12]


def test_cast_of_bad_input_yields_null_as_ksqldb_does() -> None:
    assert run(Cast(col("S"), T.INTEGER), S="abc") is None


def test_failing_function_call_yields_null_for_that_call_only() -> None:
    items = CreateArray((Cast(col("S"), T.INTEGER), FunctionCall("LEN", (col("S"),))))
    assert run(items, S="abc") == [None, 3]


def test_null_inside_a_lambda_body_fails_the_whole_lambda_call() -> None:
    body = Arithmetic("+", LambdaVariable("X"), lit(5))
    expr = FunctionCall("TRANSFORM", (col("ARR"), Lambda(("X",), body)))
    assert run(expr, ARR=[1, None]) is None
    assert run(expr, ARR=[1, 2]) == [6, 7]


def test_constant_subtrees_are_folded_at_compile_time() -> None:
    fn = compile_expression(Arithmetic("*", lit(6), Arithmetic("+", lit(3), lit(4))), COLUMNS)
    assert fn({}) == 42


def test_constant_subtree_that_fails_still_fails_per_record() -> None:
    fn = compile_expression(Arithmetic("/", lit(1), lit(0)), COLUMNS)
    with pytest.raises(EvaluationError):
        fn({})


def test_qualified_column_is_an_internal_error() -> None:
    with pytest.raises(InternalError):
        compile_expression(ColumnRef("I", source="T"), COLUMNS)


def test_logical_and_or_short_circuit_with_nulls() -> None:
    assert run(Logical("AND", col("B"), lit(False))) is False
    assert run(Logical("OR", col("B"), lit(True))) is True
    assert run(Logical("AND", col("B"), lit(True))) is None


def test_comparison_with_null_inside_a_lambda_is_false_not_a_failure() -> None:
    body = Comparison(">", LambdaVariable("X"), lit(5))
    expr = FunctionCall("FILTER", (col("ARR"), Lambda(("X",), body)))
    assert run(expr, ARR=[5, None, 7]) == [7]
