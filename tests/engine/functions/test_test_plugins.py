"""ksqlDB's test plugin functions: overload choice, NULL handling, STRUCTs and throwing calls."""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from typing import Any

import pytest

from engine.functions import REGISTRY, FunctionKind
from engine.plan import types as T
from engine.plan.types import SqlType

_A = T.Struct((T.Field("A", T.STRING),))


def call(name: str, types: Sequence[SqlType | None], *args: Any) -> Any:
    return REGISTRY.resolve(name, types).invoke(list(args))


def test_test_udf_prefers_the_exact_overload_then_the_cheapest_widening() -> None:
    assert call("TEST_UDF", [T.INTEGER, T.STRING], 3, "x") == "doStuffIntString"
    assert call("TEST_UDF", [T.BIGINT, T.STRING], 3, "x") == "doStuffLongString"
    assert call("TEST_UDF", [T.INTEGER, T.INTEGER, T.STRING], 1, 2, "x") == "doStuffLongLongString"
    assert call("TEST_UDF", [T.INTEGER] * 4, 1, 2, 3, 4) == "doStuffLongVarargs"


def test_test_udf_runs_with_null_literal_arguments() -> None:
    assert call("TEST_UDF", [T.BIGINT, None], 5, None) == "doStuffLongString"
    assert call("TEST_UDF", [T.BIGINT, T.BIGINT, None], 5, 6, None) == "doStuffLongLongString"


def test_test_udf_reads_and_builds_structs() -> None:
    assert call("TEST_UDF", [_A], {"A": "inside"}) == "inside"
    assert call("TEST_UDF", [_A], None) is None
    resolved = REGISTRY.resolve("TEST_UDF", [])
    assert resolved.return_type == _A
    assert resolved.invoke([]) == {"A": "foo"}
    assert call("TOSTRUCT", [T.STRING], "z") == {"A": "z"}


def test_bad_udf_throws_for_integers_and_for_true() -> None:
    with pytest.raises(RuntimeError):
        call("BAD_UDF", [T.INTEGER], 1)
    with pytest.raises(RuntimeError):
        call("BAD_UDF", [T.BOOLEAN], True)
    assert call("BAD_UDF", [T.BOOLEAN], False) == 0


def test_bad_udf_of_a_string_is_null_on_every_other_call_of_each_call_site() -> None:
    from pyspark import cloudpickle

    resolved = REGISTRY.resolve("BAD_UDF", [T.STRING])
    first, second = resolved.bound(), resolved.bound()
    assert [first([v]) for v in ("a", "b", "c", "d")] == [None, "b", None, "d"]
    assert second(["x"]) is None  # its own counter
    # A compiled expression carries its call site to each Spark task: the count starts there.
    shipped = resolved.bound()
    assert [cloudpickle.loads(cloudpickle.dumps(shipped))([v]) for v in ("a", "b")] == [None, None]


def test_a_compiled_expression_calls_a_stateful_function_through_its_own_instance() -> None:
    from engine.expressions import compile_expression
    from engine.plan import expr as E

    call_site = E.FunctionCall("BAD_UDF", (E.ColumnRef("S"),))
    fn, other = (compile_expression(call_site, {"S": T.STRING}) for _ in range(2))
    assert [fn({"S": v}) for v in ("a", "b", "c")] == [None, "b", None]
    assert other({"S": "z"}) is None


def test_test_udtf_gives_each_argument_as_java_text() -> None:
    assert REGISTRY.kind_of("TEST_UDTF") is FunctionKind.TABLE
    types = [T.INTEGER, T.BIGINT, T.DOUBLE, T.BOOLEAN, T.STRING, T.Decimal(20, 10), _A]
    values = [7, 8, 0.25, False, "s", decimal.Decimal("1.5000000000"), {"A": "q"}]
    expected = ["7", "8", "0.25", "false", "s", "1.5000000000", "Struct{A=q}"]
    assert call("TEST_UDTF", types, *values) == expected
    arrays = [T.Array(t) for t in types]
    assert call("TEST_UDTF", arrays, *[[v, None] for v in values]) == expected
    maps = [T.Map(T.STRING, t) for t in types]
    assert call("TEST_UDTF", maps, *[{"k": v} for v in values]) == expected
    bigint_keyed = [T.Map(T.BIGINT, T.INTEGER), *maps[1:]]
    assert call("TEST_UDTF", bigint_keyed, {5: 7}, *[{"k": v} for v in values[1:]]) == expected


def test_test_udtf_of_one_value_keeps_its_type_and_decimals_widen() -> None:
    assert REGISTRY.resolve("TEST_UDTF", [T.INTEGER]).return_type == T.INTEGER
    assert REGISTRY.resolve("TEST_UDTF", [_A]).return_type == _A
    assert REGISTRY.resolve("TEST_UDTF", [T.Decimal(20, 10)]).return_type == T.Decimal(30, 10)
    assert call("TEST_UDTF", [T.STRING], "one") == ["one"]


def test_table_test_functions_throw_on_null_or_true() -> None:
    with pytest.raises(RuntimeError):
        call("TEST_UDTF", [T.INTEGER], None)
    with pytest.raises(RuntimeError):
        call("THROWING_UDTF", [T.BOOLEAN], True)
    assert call("THROWING_UDTF", [T.BOOLEAN], False) == [False]


def test_bad_udf_of_an_integer_is_declared_to_return_a_string() -> None:
    assert REGISTRY.resolve("BAD_UDF", [T.INTEGER]).return_type == T.STRING
    assert REGISTRY.resolve("BAD_UDF", [T.INTEGER], 1).return_type == T.INTEGER  # saved plans


def test_when_condition_and_when_result_fail_when_evaluated_eagerly() -> None:
    assert call("WHENCONDITION", [T.BOOLEAN, T.BOOLEAN], False, True) is False
    assert call("WHENRESULT", [T.INTEGER, T.BOOLEAN], 7, True) == 7
    with pytest.raises(RuntimeError, match="When condition in case is not running lazily!"):
        call("WHENCONDITION", [T.BOOLEAN, T.BOOLEAN], True, False)
    with pytest.raises(RuntimeError, match="Then expression in case is not running lazily!"):
        call("WHENRESULT", [T.INTEGER, T.BOOLEAN], 1, False)


def _fold(name: str, types: Sequence[SqlType], values: Sequence[Any], init: Sequence[Any] = ()) -> Any:
    from engine.functions.udaf import aggregate_spec

    agg = aggregate_spec(name, list(types)).create(init)
    acc = agg.initial()
    for v in values:
        acc = agg.add(acc, v)
    return agg.result(acc)


def test_var_arg_sums_its_bigint_and_the_lengths_of_its_strings() -> None:
    rows = [(1, "ab", None), (None, "c", "dd")]
    assert _fold("VAR_ARG", [T.BIGINT, T.STRING, T.STRING], rows) == 1 + 2 + 1 + 2
    assert _fold("VAR_ARG", [T.BIGINT], [4, None, 5]) == 9


def test_test_udaf_sums_string_lengths_from_its_init_string() -> None:
    assert _fold("TEST_UDAF", [T.STRING, T.STRING], ["abc", "", "de"], ["xy"]) == 2 + 3 + 2
    with pytest.raises(RuntimeError, match="does not take NULL"):
        _fold("TEST_UDAF", [T.STRING, T.STRING], [None], ["xy"])


def test_test_udaf_of_an_unhandled_type_fails_like_its_generic_overload() -> None:
    from engine.errors import TypeCheckError
    from engine.functions.udaf import aggregate_spec

    assert aggregate_spec("TEST_UDAF", [T.INTEGER]).return_type == T.BIGINT  # exact overload
    spec = aggregate_spec("TEST_UDAF", [T.Decimal(4, 2)])
    assert spec.return_type == T.Decimal(4, 2)
    with pytest.raises(TypeCheckError, match=r"Type DECIMAL\(4, 2\) is not handled."):
        spec.create()


def test_generic_var_arg_takes_any_type_as_its_second_column() -> None:
    rows = [(1, "x", True), (2, None, False), (3, "y", None), (4, "z", False)]
    assert _fold("GENERIC_VAR_ARG", [T.INTEGER, T.STRING, T.BOOLEAN], rows) == [1, 4]
