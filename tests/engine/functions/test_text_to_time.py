"""A STRING argument fits a DATE, TIME or TIMESTAMP parameter when nothing fits without it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from engine.errors import TypeCheckError
from engine.expressions.evaluator import compile_typed
from engine.functions.registry import FunctionRegistry, Signature
from engine.parser.parser import parse_expression
from engine.plan import types as T


def _impl(*args: Any) -> Any:
    return args


def _registry() -> FunctionRegistry:
    registry = FunctionRegistry()
    for t in (T.DATE, T.TIMESTAMP, T.STRING):
        registry.register(Signature("TOP", (t, t), t, _impl, variadic=True))
    registry.register(Signature("AT", (T.DATE,), T.DATE, _impl))
    registry.register(Signature("AT", (T.TIME,), T.TIME, _impl))
    return registry


def test_text_fits_a_temporal_parameter_of_a_variadic_function() -> None:
    resolved = _registry().resolve("TOP", [T.DATE, None, T.STRING])
    assert resolved.return_type == T.DATE
    assert resolved.param_types == (T.DATE, None, T.DATE)


def test_text_alone_still_picks_the_string_overload() -> None:
    assert _registry().resolve("TOP", [T.STRING, T.STRING]).return_type == T.STRING


def test_text_that_fits_several_temporal_overloads_is_ambiguous() -> None:
    with pytest.raises(TypeCheckError, match="ambiguous method parameters"):
        _registry().resolve("AT", [T.STRING])


def test_other_types_do_not_fit_a_temporal_parameter() -> None:
    with pytest.raises(TypeCheckError, match=r"does not accept parameters \(DATE, INTEGER\)"):
        _registry().resolve("TOP", [T.DATE, T.INTEGER])


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        ("GREATEST", dt.date(2022, 6, 14)),
        ("LEAST", dt.date(2022, 6, 1)),
    ],
)
def test_greatest_and_least_compare_dates_with_a_date_text(call: str, expected: dt.date) -> None:
    expr = parse_expression(f"{call}(D, NULL, '2022-06-14')")
    fn, sql_type = compile_typed(expr, {"D": T.DATE})
    assert sql_type == T.DATE
    assert fn({"D": dt.date(2022, 6, 1)}) == expected


def test_greatest_of_timestamps_and_a_timestamp_text() -> None:
    expr = parse_expression("GREATEST(TS, '2022-06-14T10:00:00')")
    fn, sql_type = compile_typed(expr, {"TS": T.TIMESTAMP})
    assert sql_type == T.TIMESTAMP
    assert fn({"TS": dt.datetime(2022, 6, 14, 9)}) == dt.datetime(2022, 6, 14, 10)


def test_messages_name_built_in_functions_in_lower_case_as_ksqldb_declares_them() -> None:
    with pytest.raises(TypeCheckError) as raised:
        compile_typed(parse_expression("GREATEST(N, 'x')"), {"N": T.INTEGER})
    assert str(raised.value).startswith("Function 'greatest' does not accept parameters (INTEGER, STRING).")
    with pytest.raises(TypeCheckError) as raised:
        compile_typed(parse_expression("Least(N, B)"), {"N": T.INTEGER, "B": T.BIGINT})
    assert str(raised.value).startswith(
        "Function 'least' cannot be resolved due to ambiguous method parameters (INTEGER, BIGINT)."
    )


def test_messages_name_ksqldb_test_plugins_in_upper_case() -> None:
    from engine.functions.udaf import aggregate_spec

    with pytest.raises(TypeCheckError, match=r"^Function 'MULTI_ARG' does not accept parameters"):
        aggregate_spec("multi_arg", [T.BIGINT, T.STRING])
