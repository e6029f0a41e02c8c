"""The scalar and table functions that ksqlDB's own test suite installs as UDF plugins.

ksqlDB's query translation tests use them to exercise UDF plumbing: overload resolution
(exact matches before implicit casts, variadic overloads last), NULL literal arguments,
STRUCT parameters and results, table functions over every type, and functions that throw.
Their behaviour here is what those tests observe; they are not ksqlDB's documented
functions. ``BAD_UDF``'s STRING overload (NULL every other call) keeps a counter per call site,
as ksqlDB keeps one per UDF instance (``scalar(..., stateful=True)``); it starts afresh in
each Spark task, so it counts as ksqlDB's does over one partition in one run.
"""

from __future__ import annotations

from typing import Any

from engine.expressions.cast import java_string
from engine.functions.registry import scalar, table_function
from engine.plan import types as T

_STRUCT_A = T.Struct((T.Field("A", T.STRING),))
_DECIMAL = T.Decimal(30, 10)  # ksqlDB's test UDTF declares its DECIMAL result so


class TestFunctionError(RuntimeError):
    """What a test plugin function throws, as its Java original does."""


def _required(value: Any, name: str) -> Any:
    # The Java originals take primitives or build immutable lists: NULL fails the call.
    if value is None:
        raise TestFunctionError(f"{name} does not take NULL.")
    return value


# --------------------------------------------------------------------------- TEST_UDF


@scalar("TEST_UDF", params=[T.INTEGER, T.STRING], returns=T.STRING, null_propagating=False)
def test_udf_int_string(a: Any, b: Any) -> str:
    """Test UDF: names the overload chosen for (INTEGER, STRING)."""
    return "doStuffIntString"


@scalar("TEST_UDF", params=[T.BIGINT, T.STRING], returns=T.STRING, null_propagating=False)
def test_udf_long_string(a: Any, b: Any) -> str:
    """Test UDF: names the overload chosen for (BIGINT, STRING)."""
    return "doStuffLongString"


@scalar(
    "TEST_UDF", params=[T.BIGINT, T.BIGINT, T.STRING], returns=T.STRING, null_propagating=False
)
def test_udf_long_long_string(a: Any, b: Any, c: Any) -> str:
    """Test UDF: names the overload chosen for (BIGINT, BIGINT, STRING)."""
    return "doStuffLongLongString"


@scalar("TEST_UDF", params=[T.BIGINT], returns=T.STRING, variadic=True, null_propagating=False)
def test_udf_long_varargs(*values: Any) -> str:
    """Test UDF: names the overload chosen for (BIGINT...)."""
    return "doStuffLongVarargs"


@scalar("TEST_UDF", params=[_STRUCT_A], returns=T.STRING)
def test_udf_struct(value: dict[str, Any]) -> Any:
    """Test UDF: the field A of a STRUCT<A STRING>."""
    return value.get("A")


@scalar("TEST_UDF", params=[], returns=_STRUCT_A)
def test_udf_struct_result() -> dict[str, Any]:
    """Test UDF: the STRUCT<A STRING> {A: 'foo'}."""
    return {"A": "foo"}


@scalar("TOSTRUCT", params=[T.STRING], returns=_STRUCT_A, null_propagating=False)
def to_struct(value: Any) -> dict[str, Any]:
    """Test UDF: a STRUCT<A STRING> holding the argument."""
    return {"A": value}


# --------------------------------------------------------------------------- BAD_UDF


@scalar("BAD_UDF", params=[T.INTEGER], returns=T.INTEGER, null_propagating=False, until=1)
def bad_udf_int(value: Any) -> int:
    """Test UDF: always throws."""
    raise TestFunctionError("BAD_UDF(INTEGER) always throws.")


@scalar("BAD_UDF", params=[T.INTEGER], returns=T.STRING, null_propagating=False, since=2)
def bad_udf_int_string(value: Any) -> str:
    """Test UDF: always throws; declared to return a STRING, as ksqlDB's is."""
    raise TestFunctionError("BAD_UDF(INTEGER) always throws.")


# --------------------------------------------------------------------------- CASE laziness


@scalar("WHENCONDITION", params=[T.BOOLEAN, T.BOOLEAN], returns=T.BOOLEAN, null_propagating=False)
def when_condition(value: Any, should_be_evaluated: Any) -> bool:
    """Test UDF: the first argument, or an error when the second is false (a CASE condition
    evaluated that should not have been)."""
    if not _required(should_be_evaluated, "WhenCondition"):
        raise TestFunctionError("When condition in case is not running lazily!")
    return bool(_required(value, "WhenCondition"))


@scalar("WHENRESULT", params=[T.INTEGER, T.BOOLEAN], returns=T.INTEGER, null_propagating=False)
def when_result(value: Any, should_be_evaluated: Any) -> int:
    """Test UDF: the first argument, or an error when the second is false (a CASE result
    evaluated that should not have been)."""
    if not _required(should_be_evaluated, "WhenResult"):
        raise TestFunctionError("Then expression in case is not running lazily!")
    return int(_required(value, "WhenResult"))


@scalar("BAD_UDF", params=[T.BOOLEAN], returns=T.INTEGER, null_propagating=False)
def bad_udf_boolean(value: Any) -> int:
    """Test UDF: throws when the argument is true, else 0."""
    if value:
        raise TestFunctionError("BAD_UDF(BOOLEAN) throws on true.")
    return 0


@scalar("BAD_UDF", params=[T.STRING], returns=T.STRING, null_propagating=False, stateful=True)
class BadUdfString:
    """Test UDF: NULL on every other call of a call site, starting with the first; else the argument."""

    def __init__(self) -> None:
        self.calls = 0  # ksqlDB's per-instance counter

    def __call__(self, value: Any) -> Any:
        self.calls += 1
        return None if self.calls % 2 == 1 else value


# --------------------------------------------------------------------------- TEST_UDTF

_SCALARS = (T.INTEGER, T.BIGINT, T.DOUBLE, T.BOOLEAN, T.STRING, T.Decimal(20, 10), _STRUCT_A)


def _texts(values: tuple[Any, ...], types: tuple[T.SqlType, ...]) -> list[str]:
    return [java_string(_required(v, "TEST_UDTF"), t) for v, t in zip(values, types, strict=True)]


@table_function("TEST_UDTF", params=list(_SCALARS), returns=T.STRING)
def test_udtf_standard(*values: Any) -> list[str]:
    """Test UDTF: each argument as text, one row each."""
    return _texts(values, _SCALARS)


@table_function("TEST_UDTF", params=[T.Array(t) for t in _SCALARS], returns=T.STRING)
def test_udtf_arrays(*arrays: Any) -> list[str]:
    """Test UDTF: the first element of each array as text, one row each."""
    return _texts(tuple(_required(a, "TEST_UDTF")[0] for a in arrays), _SCALARS)


@table_function("TEST_UDTF", params=[T.Map(T.STRING, t) for t in _SCALARS], returns=T.STRING)
def test_udtf_maps(*maps: Any) -> list[str]:
    """Test UDTF: the first value of each map as text, one row each."""
    firsts = tuple(next(iter(_required(m, "TEST_UDTF").values())) for m in maps)
    return _texts(firsts, _SCALARS)


@table_function(
    "TEST_UDTF",
    params=[T.Map(T.BIGINT, T.INTEGER), *[T.Map(T.STRING, t) for t in _SCALARS[1:]]],
    returns=T.STRING,
)
def test_udtf_maps_bigint_key(*maps: Any) -> list[str]:
    """Test UDTF: as the maps overload, the first map keyed by BIGINT."""
    return test_udtf_maps(*maps)


def _single(value: Any) -> list[Any]:
    return [_required(value, "TEST_UDTF")]


for _type in (T.INTEGER, T.BIGINT, T.DOUBLE, T.BOOLEAN, T.STRING, _STRUCT_A):
    table_function("TEST_UDTF", params=[_type], returns=_type)(_single)
table_function("TEST_UDTF", params=[T.Decimal(20, 10)], returns=_DECIMAL)(_single)


@table_function("THROWING_UDTF", params=[T.BOOLEAN], returns=T.BOOLEAN)
def throwing_udtf(value: Any) -> list[Any]:
    """Test UDTF: throws when the argument is true, else one row holding it."""
    if value:
        raise TestFunctionError("THROWING_UDTF throws on true.")
    return [value]
