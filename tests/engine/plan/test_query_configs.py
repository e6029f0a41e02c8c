"""ksqlDB's expression configs recorded on a plan's expressions, and how they evaluate."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import EvaluationError
from engine.expressions import compile_expression
from engine.expressions.cast import make_cast
from engine.parser.parser import parse_expression
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.query_configs import with_query_configs

COLUMNS = {"N": T.INTEGER, "S": T.STRING, "XS": T.Array(T.INTEGER), "D": T.Decimal(4, 2)}


def _marked(text: str, **config: str) -> E.Expr:
    return with_query_configs(parse_expression(text), {k.replace("_", "."): v for k, v in config.items()})


def test_configs_at_their_defaults_leave_the_expressions_as_planned() -> None:
    expr = parse_expression("CAST(N AS STRING)")
    assert with_query_configs(expr, {}) is expr
    assert with_query_configs(expr, {"ksql.cast.strings.preserve.nulls": "true"}) is expr
    assert E.to_json(expr) == E.to_json(E.from_json(E.to_json(expr)))
    assert "null_text" not in E.to_json(expr) and "error_null" not in E.to_json(expr)


def test_cast_strings_preserve_nulls_false_marks_every_cast_and_round_trips() -> None:
    expr = with_query_configs(
        parse_expression("CONCAT(CAST(N AS STRING), CAST(CAST(S AS INTEGER) AS STRING))"),
        {"ksql.cast.strings.preserve.nulls": "false"},
    )
    casts = [n for n in E.walk(expr) if isinstance(n, E.Cast)]
    assert len(casts) == 3 and all(c.null_text and c.error_null for c in casts)
    assert E.from_json(E.to_json(expr)) == expr


@pytest.mark.parametrize(
    ("source", "value", "expected"),
    [
        (T.INTEGER, None, "null"),
        (T.BIGINT, None, "null"),
        (T.BOOLEAN, None, "null"),
        (T.DOUBLE, None, "null"),
        (T.Array(T.INTEGER), None, "null"),
        (T.Map(T.STRING, T.INTEGER), None, "null"),
        (T.Struct((T.Field("A", T.INTEGER),)), None, "null"),
        (T.INTEGER, 7, "7"),
        (T.Array(T.INTEGER), [1, None], "[1, null]"),
        # String.valueOf only where ksqlDB's CastEvaluator uses it: these formatters keep NULL.
        (T.Decimal(4, 2), None, None),
        (T.TIMESTAMP, None, None),
        (T.DATE, None, None),
        (T.TIME, None, None),
        (T.STRING, None, None),
    ],
)
def test_cast_strings_preserve_nulls_false_casts_a_null_to_the_text_null_as_string_value_of(
    source: T.SqlType, value: Any, expected: Any
) -> None:
    assert make_cast(source, T.STRING, 3, null_text=True)(value) == expected
    assert make_cast(source, T.STRING, 3)(value) == (None if value is None else expected)


def test_cast_strings_preserve_nulls_false_reaches_the_elements_of_a_collection_cast() -> None:
    cast = make_cast(T.Array(T.INTEGER), T.Array(T.STRING), 3, null_text=True)
    assert cast([1, None]) == ["1", "null"]
    assert cast(None) is None  # the collection itself is not String.valueOf'd


def test_cast_strings_preserve_nulls_false_evaluates_a_null_column_to_the_text_null() -> None:
    fn = compile_expression(_marked("CAST(N AS STRING)", ksql_cast_strings_preserve_nulls="false"), COLUMNS)
    assert fn({"N": None}) == "null"
    assert compile_expression(parse_expression("CAST(N AS STRING)"), COLUMNS)({"N": None}) is None


def test_nested_error_set_null_false_fails_the_whole_expression_not_only_the_failing_call() -> None:
    text = "COALESCE(CAST(S AS INTEGER), -1)"
    lenient = compile_expression(parse_expression(text), COLUMNS)
    assert lenient({"S": "abc"}) == -1  # true: only the cast is NULL
    strict = compile_expression(_marked(text, ksql_nested_error_set_null="false"), COLUMNS)
    with pytest.raises(EvaluationError):
        strict({"S": "abc"})  # false: the step sets the whole item to NULL
    assert strict({"S": "5"}) == 5
    calls = [n for n in E.walk(_marked(text, ksql_nested_error_set_null="false")) if isinstance(n, E.FunctionCall)]
    assert calls and all(not c.error_null for c in calls)


def test_nested_error_set_null_false_fails_the_expression_on_a_failing_function_argument() -> None:
    text = "COALESCE(STRINGTOTIMESTAMP(S, 'yyyy'), 0)"
    assert compile_expression(parse_expression(text), COLUMNS)({"S": "abc"}) == 0
    strict = compile_expression(_marked(text, ksql_nested_error_set_null="false"), COLUMNS)
    with pytest.raises(EvaluationError, match="Failed to parse timestamp"):
        strict({"S": "abc"})
