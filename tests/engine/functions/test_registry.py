from __future__ import annotations

from typing import Any

import pytest

from engine.errors import TypeCheckError, UnknownFunctionError
from engine.functions.registry import FunctionRegistry, Generic, LambdaType, Signature
from engine.plan import types as T

_T = Generic("T")
_U = Generic("U")


def _impl(*args: Any) -> Any:
    return args


def make_registry() -> FunctionRegistry:
    registry = FunctionRegistry()
    for params, returns in [
        ((T.INTEGER,), T.INTEGER),
        ((T.BIGINT,), T.BIGINT),
        ((T.Decimal(1000, 0),), T.STRING),
        ((T.DOUBLE,), T.DOUBLE),
    ]:
        registry.register(Signature("NUM", params, returns, _impl))
    for t in (T.INTEGER, T.BIGINT, T.DOUBLE, T.STRING):
        registry.register(Signature("BIG", (t, t), t, _impl, variadic=True))
    registry.register(Signature("FIRST", (T.Array(_T),), _T, _impl))
    registry.register(
        Signature("MAPPED", (T.Array(_T), LambdaType((_T,), _U)), T.Array(_U), _impl)
    )
    registry.register(Signature("LEN", (T.STRING,), T.INTEGER, _impl))
    registry.register(Signature("LEN", (T.BYTES,), T.INTEGER, _impl))
    return registry


def test_exact_overload_wins() -> None:
    assert make_registry().resolve("num", [T.BIGINT]).return_type == T.BIGINT


def test_any_decimal_parameter_takes_the_argument_decimal_as_is() -> None:
    resolved = make_registry().resolve("NUM", [T.Decimal(4, 2)])
    assert resolved.param_types == (T.Decimal(4, 2),)


def test_shortest_widening_wins_when_casts_are_needed() -> None:
    registry = FunctionRegistry()
    registry.register(Signature("F", (T.DOUBLE,), T.DOUBLE, _impl))
    registry.register(Signature("F", (T.BIGINT,), T.BIGINT, _impl))
    resolved = registry.resolve("F", [T.INTEGER])
    assert resolved.return_type == T.BIGINT
    assert resolved.param_types == (T.BIGINT,)


def _tied_from_version_2() -> FunctionRegistry:
    registry = FunctionRegistry()
    registry.register(Signature("R", (T.DOUBLE, T.INTEGER), T.DOUBLE, _impl))
    registry.register(Signature("R", (T.Decimal(1000, 0), T.INTEGER), T.STRING, _impl))
    registry.register(Signature("R", (T.STRING,), T.STRING, _impl, variadic=True))
    registry.declare_ksqldb_ties("R", since=2)
    return registry


def test_from_its_declared_version_casts_rank_overloads_as_ksqldb_does_with_no_cost() -> None:
    # ksqlDB's UdfIndex ranks the overloads a call fits with casts by their shape only
    # (variadic or not, parameter count, generics), never by how far a cast widens.
    registry = _tied_from_version_2()
    assert registry.current_semantics("R") == 2
    with pytest.raises(
        TypeCheckError,
        match=r"^Function 'r' cannot be resolved due to ambiguous method parameters \(INTEGER, INTEGER\)\.",
    ):
        registry.resolve("R", [T.INTEGER, T.INTEGER])
    # Version 1 keeps the cheapest widening (INTEGER -> DECIMAL) for saved plans.
    assert registry.resolve("R", [T.INTEGER, T.INTEGER], 1).return_type == T.STRING
    # Exact fits still win, and a call no cast ties settles on the version it had.
    assert registry.resolve("R", [T.DOUBLE, T.INTEGER], 2).return_type == T.DOUBLE
    assert registry.settled_semantics("R", [T.DOUBLE, T.INTEGER], 2) == 1
    # A non-variadic fit needing casts beats a variadic one (none here), and the ambiguous
    # message lists the calls as ksqlDB's does.
    with pytest.raises(TypeCheckError, match="Use CAST\\(\\) to explicitly cast your parameters"):
        registry.resolve("R", [T.BIGINT, None])


def test_variadic_overloads_that_all_need_casts_are_ambiguous() -> None:
    with pytest.raises(TypeCheckError, match=r"ambiguous method parameters \(INTEGER, BIGINT\)"):
        make_registry().resolve("BIG", [T.INTEGER, T.BIGINT])


def test_null_arguments_matching_several_overloads_are_ambiguous() -> None:
    with pytest.raises(TypeCheckError) as raised:
        make_registry().resolve("LEN", [None])
    assert str(raised.value) == (
        "Function 'len' cannot be resolved due to ambiguous method parameters (null).\n"
        "Use CAST() to explicitly cast your parameters to one of the supported function calls.\n"
        "Valid function calls are:\nLEN(STRING)\nLEN(BYTES)\n"
        "For detailed information on a function run: DESCRIBE FUNCTION <Function-Name>;"
    )


def test_no_match_lists_the_alternatives() -> None:
    with pytest.raises(TypeCheckError) as info:
        make_registry().resolve("LEN", [T.INTEGER])
    assert "Function 'len' does not accept parameters (INTEGER)." in str(info.value)
    assert "LEN(STRING)" in str(info.value)


def test_unknown_function() -> None:
    with pytest.raises(UnknownFunctionError, match="'NOPE'"):
        make_registry().resolve("nope", [])


def test_generics_bind_from_arguments() -> None:
    resolved = make_registry().resolve("FIRST", [T.Array(T.STRING)])
    assert resolved.return_type == T.STRING


def test_lambda_parameters_bind_then_result_binds() -> None:
    registry = make_registry()
    pending = LambdaType((None,), None)
    assert registry.lambda_param_types("MAPPED", [T.Array(T.INTEGER), pending], 1) == (T.INTEGER,)
    full = LambdaType((T.INTEGER,), T.DOUBLE)
    assert registry.resolve("MAPPED", [T.Array(T.INTEGER), full]).return_type == T.Array(T.DOUBLE)


def _versioned() -> FunctionRegistry:
    registry = FunctionRegistry()
    registry.register(Signature("FIX", (T.INTEGER,), T.INTEGER, lambda x: x, until=1))
    registry.register(Signature("FIX", (T.INTEGER,), T.INTEGER, lambda x: -x, since=2))
    registry.register(Signature("FIX", (T.STRING,), T.STRING, lambda x: x))
    return registry


def test_a_call_resolves_among_the_overloads_of_its_version() -> None:
    registry = _versioned()
    assert registry.current_semantics("fix") == 2
    assert registry.current_semantics("unknown") == 1
    assert registry.resolve("FIX", [T.INTEGER], 1).invoke([3]) == 3
    assert registry.resolve("FIX", [T.INTEGER], 2).invoke([3]) == -3
    assert registry.resolve("FIX", [T.INTEGER]).invoke([3]) == -3
    # An overload no version replaced serves every version.
    assert registry.resolve("FIX", [T.STRING], 1).invoke(["a"]) == "a"
    assert registry.resolve("FIX", [T.STRING], 2).invoke(["a"]) == "a"


def test_a_call_settles_on_the_lowest_version_resolving_to_the_same_overload() -> None:
    registry = _versioned()
    assert registry.settled_semantics("FIX", [T.INTEGER], 2) == 2  # its overload changed in 2
    assert registry.settled_semantics("FIX", [T.STRING], 2) == 1  # unchanged since 1
    assert registry.settled_semantics("FIX", [T.STRING], 1) == 1
    # A version that resolves the call to nothing is passed over.
    registry.register(Signature("FIX", (T.BOOLEAN,), T.BOOLEAN, lambda x: x, since=2))
    assert registry.settled_semantics("FIX", [T.BOOLEAN], 2) == 2


def test_the_current_version_lists_each_overload_once() -> None:
    assert [s.describe() for s in _versioned().signatures("FIX")] == ["FIX(INTEGER)", "FIX(STRING)"]


def test_overloads_of_one_version_cannot_be_registered_twice() -> None:
    registry = _versioned()
    with pytest.raises(TypeError, match=r"FIX\(INTEGER\) is registered twice"):
        registry.register(Signature("FIX", (T.INTEGER,), T.INTEGER, _impl, since=2))


def test_a_version_newer_than_the_engine_knows_is_refused_not_run_as_the_current_one() -> None:
    with pytest.raises(TypeCheckError, match=r"'fix' was planned with version 3 .* up to 2"):
        _versioned().resolve("FIX", [T.INTEGER], 3)


def test_an_internal_function_resolves_but_is_not_listed() -> None:
    from engine.functions import REGISTRY

    assert "KSQL_NON_AGGREGATE_VALUE" not in REGISTRY.names() and "COUNT" in REGISTRY.names()
    assert REGISTRY.resolve("KSQL_NON_AGGREGATE_VALUE", [T.INTEGER]).return_type == T.INTEGER


def test_the_non_aggregate_value_is_the_row_last_added_or_retracted() -> None:
    from engine.functions.lib_aggregate import LastAppliedAggregator

    agg = LastAppliedAggregator()
    acc = agg.add(agg.add(agg.initial(), 1), 5)
    assert agg.result(acc) == 5 and agg.result(agg.undo(acc, 1)) == 1
