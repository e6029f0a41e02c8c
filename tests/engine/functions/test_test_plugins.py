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
