"""The custom aggregate functions that ksqlDB's own test suite installs as UDAF plugins.

ksqlDB's query translation tests use them to exercise UDAF plumbing: multi-column
arguments, literal init arguments (including variadic ones), variadic column arguments and
table aggregation. Their behaviour here is what those tests observe.
"""

from __future__ import annotations

from typing import Any

from engine.errors import TypeCheckError
from engine.functions.lib_aggregate import SumAggregator
from engine.functions.lib_test_plugins import TestFunctionError
from engine.functions.registry import ANY, REGISTRY, Generic, aggregate
from engine.functions.udaf import BaseAggregator, wrap_long
from engine.plan import types as T

_T = Generic("T")
_U = Generic("U")
_B = Generic("B")


def _columns_of(value: Any) -> tuple[Any, ...]:
    # A call with a single column argument passes the bare value, not a tuple.
    return value if isinstance(value, tuple) else (value,)


# --------------------------------------------------------------------------- TEST_UDAF


@aggregate("TEST_UDAF", params=[T.BIGINT], returns=T.BIGINT, supports_undo=True)
def test_udaf_bigint() -> SumAggregator:
    """Sums BIGINT values."""
    return SumAggregator(0, wrap_long)


@aggregate("TEST_UDAF", params=[T.INTEGER], returns=T.BIGINT, supports_undo=True)
def test_udaf_int() -> SumAggregator:
    """Sums INT values into a BIGINT."""
    return SumAggregator(0, wrap_long)


@aggregate("TEST_UDAF", params=[T.DOUBLE], returns=T.DOUBLE)
def test_udaf_double() -> SumAggregator:
    """Sums DOUBLE values."""
    return SumAggregator(0.0, float)


_AB = T.Struct((T.Field("A", T.INTEGER), T.Field("B", T.INTEGER)))


class _StructSum(BaseAggregator):
    """Sums the A and B fields of STRUCT<A INT, B INT> values."""

    def initial(self) -> tuple[int, int]:
        return (0, 0)

    def add(self, acc: tuple[int, int], value: Any) -> tuple[int, int]:
        if value is None:
            return acc
        return (acc[0] + (value.get("A") or 0), acc[1] + (value.get("B") or 0))

    def merge(self, a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
        return (a[0] + b[0], a[1] + b[1])

    def result(self, acc: tuple[int, int]) -> dict[str, int]:
        return {"A": acc[0], "B": acc[1]}


@aggregate("TEST_UDAF", params=[_T], returns=_T)
def test_udaf_generic(*, arg_types: Any = None) -> SumAggregator:
    """Sums numbers of the argument's type; reached only by types without their own overload,
    which ksqlDB's test UDAF does not handle."""
    raise TypeCheckError(f"Type {arg_types[0] if arg_types else None} is not handled.")


class _StringLengthSum(BaseAggregator):
    """Starts from the length of an init string; each row adds its string's length."""

    def __init__(self, start: str) -> None:
        self.start = len(start)

    def initial(self) -> int:
        return self.start

    def add(self, acc: int, value: Any) -> int:
        if value is None:  # the Java original calls length() on it
            raise TestFunctionError("TEST_UDAF(STRING, STRING) does not take NULL.")
        return wrap_long(acc + len(value))

    def merge(self, a: int, b: int) -> int:
        return wrap_long(a + b)

    def result(self, acc: int) -> int:
        return acc


@aggregate("TEST_UDAF", params=[T.STRING, T.STRING], returns=T.BIGINT, init_params=1)
def test_udaf_string_lengths(initial: str) -> _StringLengthSum:
    """Sums string lengths, from the length of the init string."""
    return _StringLengthSum(initial)


@aggregate("TEST_UDAF", params=[_AB], returns=_AB)
def test_udaf_struct() -> _StructSum:
    """Sums the fields of STRUCT<A INT, B INT> values."""
    return _StructSum()


# --------------------------------------------------------------------------- init-arg UDAFs


class _LengthSum(BaseAggregator):
    """Starts from a number given by the init arguments; each row adds its integers and the
    lengths of its strings (NULL counts 0). A session merge adds the two sums, so the start
    counts twice, as in ksqlDB's test UDAFs (``keep_both_starts``; version 1 counted it once)."""

    def __init__(self, start: int, *, keep_both_starts: bool = True) -> None:
        self.start = start
        self.keep_both_starts = keep_both_starts

    def initial(self) -> int:
        return self.start

    def add(self, acc: int, value: Any) -> int:
        for v in _columns_of(value):
            if isinstance(v, str):
                acc += len(v)
            elif v is not None:
                acc += v
        return acc

    def merge(self, a: int, b: int) -> int:
        return a + b if self.keep_both_starts else a + b - self.start

    def result(self, acc: int) -> int:
        return acc


def _start(number: int, *texts: str) -> int:
    return number + sum(len(t) for t in texts if t is not None)


for _name, _columns in (
    ("MULTI_ARG", [T.BIGINT, T.STRING]),
    ("FOUR_ARG", [T.BIGINT, T.STRING, T.STRING, T.STRING]),
    ("FIVE_ARG", [T.BIGINT, T.STRING, T.STRING, T.STRING, T.INTEGER]),
):
    for _both, _versions in ((False, {"until": 1}), (True, {"since": 2})):
        aggregate(
            _name,
            params=[*_columns, T.INTEGER, T.STRING],
            returns=T.BIGINT,
            init_params=2,
            variadic=True,
            description="Test UDAF: sums integers and string lengths, from an init value.",
            **_versions,
        )(lambda number, *texts, b=_both: _LengthSum(_start(number, *texts), keep_both_starts=b))

MID_VAR_ARG_MAX_STRINGS = 8
for _strings in range(MID_VAR_ARG_MAX_STRINGS + 1):
    # ksqlDB allows a variadic parameter in the middle; one overload per count stands in.
    for _both, _versions in ((False, {"until": 1}), (True, {"since": 2})):
        aggregate(
            "MID_VAR_ARG",
            params=[T.BIGINT, *[T.STRING] * _strings, T.INTEGER, T.INTEGER],
            returns=T.BIGINT,
            init_params=2,
            description="Test UDAF: sums integers and string lengths, from the sum of two ints.",
            **_versions,
        )(lambda a, b, both=_both: _LengthSum(a + b, keep_both_starts=both))


# --------------------------------------------------------------------------- variadic columns


class _CollectFirstIfComplete(BaseAggregator):
    """Collects the first column of every row whose columns are all non-NULL."""

    def initial(self) -> list[Any]:
        return []

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        values = _columns_of(value)
        return acc if any(v is None for v in values) else acc + [values[0]]

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return a + b

    def result(self, acc: list[Any]) -> list[Any]:
        return list(acc)


@aggregate("GENERIC_VAR_ARG", params=[_T, _B, _U], returns=T.Array(_T), variadic=True)
def generic_var_arg() -> _CollectFirstIfComplete:
    """Test UDAF: collects the first column of rows without NULLs."""
    return _CollectFirstIfComplete()


@aggregate("OBJ_COL_ARG", params=[T.INTEGER, ANY], returns=T.Array(T.INTEGER), variadic=True)
def obj_col_arg() -> _CollectFirstIfComplete:
    """Test UDAF: collects the first column of rows without NULLs; the rest take any type."""
    return _CollectFirstIfComplete()


@aggregate("VAR_ARG", params=[T.BIGINT, T.STRING], returns=T.BIGINT, variadic=True)
def var_arg() -> _LengthSum:
    """Test UDAF: sums a BIGINT column and the lengths of any number of STRING columns."""
    return _LengthSum(0)


REGISTRY.declare_upper_case(
    "TEST_UDAF", "MULTI_ARG", "MID_VAR_ARG", "GENERIC_VAR_ARG", "OBJ_COL_ARG", "VAR_ARG"
)
