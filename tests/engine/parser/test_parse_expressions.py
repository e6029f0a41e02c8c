"""Expressions: precedence, literal typing, identifiers, constructors and lambdas."""

from __future__ import annotations

import decimal

import pytest

from engine.functions import REGISTRY
from engine.parser import parse_expression
from engine.plan import expr as E
from engine.plan import types as T

A, B, C = E.ColumnRef("A"), E.ColumnRef("B"), E.ColumnRef("C")


def lit(value: int) -> E.Literal:
    return E.Literal(value, T.INTEGER)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a OR b AND c", E.Logical("OR", A, E.Logical("AND", B, C))),
        ("NOT a AND b", E.Logical("AND", E.Not(A), B)),
        ("NOT a = b", E.Not(E.Comparison("=", A, B))),
        ("a + b * c", E.Arithmetic("+", A, E.Arithmetic("*", B, C))),
        ("a - b - c", E.Arithmetic("-", E.Arithmetic("-", A, B), C)),
        ("a % b / c", E.Arithmetic("/", E.Arithmetic("%", A, B), C)),
        ("-a * b", E.Arithmetic("*", E.Negate(A), B)),
        ("+a", A),
        ("a + 1 > b", E.Comparison(">", E.Arithmetic("+", A, lit(1)), B)),
        ("a != b", E.Comparison("<>", A, B)),
        ("a IS NOT NULL AND b IS NULL", E.Logical("AND", E.IsNull(A, True), E.IsNull(B))),
        ("a BETWEEN 1 AND 2 AND b", E.Logical("AND", E.Between(A, lit(1), lit(2)), B)),
        ("a NOT BETWEEN b AND c", E.Between(A, B, C, negated=True)),
        ("a IN (1, b)", E.In(A, (lit(1), B))),
        ("a NOT IN (b)", E.In(A, (B,), negated=True)),
        ("a LIKE b", E.Like(A, B)),
        ("a NOT LIKE 'x!%' ESCAPE '!'", E.Like(A, E.Literal("x!%", T.STRING), "!", True)),
        ("a IS DISTINCT FROM b", E.Comparison("IS DISTINCT FROM", A, B)),
        ("a IS NOT DISTINCT FROM b", E.Comparison("IS NOT DISTINCT FROM", A, B)),
        ("a || b", E.FunctionCall("CONCAT", (A, B))),
        ("a->b->c", E.Dereference(E.Dereference(A, "B"), "C")),
        ("a[1]->b", E.Dereference(E.Subscript(A, lit(1)), "B")),
        ("s.a[b + 1]", E.Subscript(E.ColumnRef("A", "S"), E.Arithmetic("+", B, lit(1)))),
    ],
)
def test_operator_precedence(text: str, expected: E.Expr) -> None:
    assert parse_expression(text) == expected


@pytest.mark.parametrize(
    ("text", "value", "sql_type"),
    [
        ("0", 0, T.INTEGER),
        ("2147483647", 2147483647, T.INTEGER),
        ("2147483648", 2147483648, T.BIGINT),
        ("-2147483648", -2147483648, T.INTEGER),
        ("-2147483649", -2147483649, T.BIGINT),
        ("-9223372036854775808", -(2**63), T.BIGINT),
        ("1.50", decimal.Decimal("1.50"), T.Decimal(3, 2)),
        ("0.05", decimal.Decimal("0.05"), T.Decimal(2, 2)),
        (".5", decimal.Decimal("0.5"), T.Decimal(1, 1)),
        ("-12.5", decimal.Decimal("-12.5"), T.Decimal(3, 1)),
        ("1.5E3", 1500.0, T.DOUBLE),
        ("2e-1", 0.2, T.DOUBLE),
        ("'it''s'", "it's", T.STRING),
        ("TRUE", True, T.BOOLEAN),
        ("false", False, T.BOOLEAN),
    ],
)
def test_literal_values_and_types(text: str, value: object, sql_type: T.SqlType) -> None:
    assert parse_expression(text) == E.Literal(value, sql_type)


def test_null_literal_has_no_type() -> None:
    assert parse_expression("null") == E.Literal(None, None)


def test_minus_directly_before_a_number_makes_a_negative_literal() -> None:
    assert parse_expression("- 3") == lit(-3)
    assert parse_expression("-(3)") == E.Negate(lit(3))
    assert parse_expression("1 -3") == E.Arithmetic("-", lit(1), lit(3))
    assert parse_expression("1 - -3") == E.Arithmetic("-", lit(1), lit(-3))


def test_identifiers_are_upper_cased_unless_quoted() -> None:
    assert parse_expression("myCol") == E.ColumnRef("MYCOL")
    assert parse_expression("`myCol`") == E.ColumnRef("myCol")
    assert parse_expression('"my col"') == E.ColumnRef("my col")
    assert parse_expression("`a``b`") == E.ColumnRef("a`b")
    assert parse_expression("`SELECT`") == E.ColumnRef("SELECT")
    assert parse_expression("1abc") == E.ColumnRef("1ABC")


def test_non_reserved_keywords_work_as_identifiers() -> None:
    assert parse_expression("key + timestamp") == E.Arithmetic(
        "+", E.ColumnRef("KEY"), E.ColumnRef("TIMESTAMP")
    )
    assert parse_expression("map") == E.ColumnRef("MAP")


def test_comments_are_ignored() -> None:
    assert parse_expression("a /* plus */ + -- one\n 1") == E.Arithmetic("+", A, lit(1))


def test_case_forms() -> None:
    searched = parse_expression("CASE WHEN a THEN 1 WHEN b THEN 2 END")
    simple = parse_expression("case a when 1 then 'x' else 'y' end")
    assert searched == E.Case(None, (E.WhenClause(A, lit(1)), E.WhenClause(B, lit(2))))
    assert simple == E.Case(
        A, (E.WhenClause(lit(1), E.Literal("x", T.STRING)),), E.Literal("y", T.STRING)
    )


@pytest.mark.parametrize(
    ("text", "sql_type"),
    [
        ("INT", T.INTEGER),
        ("varchar", T.STRING),
        ("DECIMAL(4, 2)", T.Decimal(4, 2)),
        ("ARRAY<MAP<STRING, BIGINT>>", T.Array(T.Map(T.STRING, T.BIGINT))),
        ("STRUCT<a INT, `b` DATE>", T.Struct((T.Field("A", T.INTEGER), T.Field("b", T.DATE)))),
        ("STRUCT<>", T.Struct(())),
        ("TIMESTAMP", T.TIMESTAMP),
    ],
)
def test_cast_to_every_kind_of_type(text: str, sql_type: T.SqlType) -> None:
    parsed = parse_expression(f"CAST(a AS {text})")
    assert isinstance(parsed, E.Cast) and (parsed.operand, parsed.type) == (A, sql_type)


def test_constructors() -> None:
    assert parse_expression("ARRAY[1, a]") == E.CreateArray((lit(1), A))
    assert parse_expression("ARRAY[]") == E.CreateArray(())
    assert parse_expression("MAP('k' := a)") == E.CreateMap(
        (E.MapEntry(E.Literal("k", T.STRING), A),)
    )
    assert parse_expression("STRUCT(x := 1, `y` := b)") == E.CreateStruct(
        (E.StructField("X", lit(1)), E.StructField("y", B))
    )


def test_function_calls_star_and_no_arguments() -> None:
    assert parse_expression("count(*)") == E.FunctionCall("COUNT", (), star=True)
    assert parse_expression("now()") == E.FunctionCall("NOW", ())
    assert parse_expression("f(a, 1)") == E.FunctionCall("F", (A, lit(1)))


def test_calls_record_the_current_version_of_the_function() -> None:
    assert parse_expression("log(a)") == E.FunctionCall("LOG", (A,), semantics=3)
    assert parse_expression("ln(a)") == E.FunctionCall("LN", (A,), semantics=1)


def test_casts_record_the_version_of_cast_that_last_changed_their_target_type() -> None:
    assert parse_expression("CAST(a AS DATE)") == E.Cast(A, T.DATE, semantics=2)
    assert parse_expression("CAST(a AS INT)") == E.Cast(A, T.INTEGER)


@pytest.mark.parametrize("unit", ["SECONDS", "seconds", "second", "DAY", "MILLISECONDS"])
def test_time_units_as_first_argument_become_interval_units(unit: str) -> None:
    canonical = unit.upper().rstrip("S") + "S"
    assert parse_expression(f"TIMESTAMPADD({unit}, 1, a)") == E.FunctionCall(
        "TIMESTAMPADD", (E.IntervalUnit(canonical), lit(1), A),
        semantics=REGISTRY.current_semantics("TIMESTAMPADD"),
    )


def test_unit_named_columns_stay_columns_outside_interval_functions() -> None:
    assert parse_expression("ABS(second)") == E.FunctionCall(
        "ABS", (E.ColumnRef("SECOND"),), semantics=REGISTRY.current_semantics("ABS"))
    assert parse_expression("DATEADD(date, 1, b)").args[0] == E.ColumnRef("DATE")  # type: ignore[attr-defined]


def test_lambdas_bind_their_parameters() -> None:
    one_param = parse_expression("TRANSFORM(a, x => x + b)")
    parened = parse_expression("FILTER(a, (x) => x > 1)")
    two = parse_expression("REDUCE(a, 0, (s, x) => s + x)")
    x = E.LambdaVariable("X")
    assert one_param == E.FunctionCall("TRANSFORM", (A, E.Lambda(("X",), E.Arithmetic("+", x, B))))
    assert parened == E.FunctionCall("FILTER", (A, E.Lambda(("X",), E.Comparison(">", x, lit(1)))))
    assert two == E.FunctionCall(
        "REDUCE", (A, lit(0), E.Lambda(("S", "X"), E.Arithmetic("+", E.LambdaVariable("S"), x))),
        semantics=REGISTRY.current_semantics("REDUCE"),  # a new call: the current version of REDUCE
    )


def test_nested_lambdas_see_outer_parameters_and_shadow_them() -> None:
    nested = parse_expression("TRANSFORM(a, x => FILTER(x, y => y > x))")
    inner = nested.args[1].body.args[1]  # type: ignore[attr-defined]
    assert inner == E.Lambda(
        ("Y",), E.Comparison(">", E.LambdaVariable("Y"), E.LambdaVariable("X"))
    )
    shadow = parse_expression("TRANSFORM(a, x => TRANSFORM(x, x => x))")
    assert shadow.args[1].body.args[1] == E.Lambda(("X",), E.LambdaVariable("X"))  # type: ignore[attr-defined]
    assert shadow.args[1].body.args[0] == E.LambdaVariable("X")  # type: ignore[attr-defined]


def test_qualified_column_with_struct_dereference() -> None:
    assert parse_expression("t.s->f") == E.Dereference(E.ColumnRef("S", "T"), "F")
