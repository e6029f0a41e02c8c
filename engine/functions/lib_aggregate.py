"""The built-in aggregate functions of ksqlDB, with its null, overflow and type rules.

Accumulators are immutable plain data: every ``add``/``undo``/``merge`` returns a new one.
NULL inputs are skipped unless stated; integral sums wrap like Java ``int``/``long``; a
DECIMAL sum that outgrows its column's precision raises ksqlDB's "Numeric field overflow".
Functions that ksqlDB implements as TableUdaf (COUNT, SUM, AVG, COLLECT_LIST, HISTOGRAM,
STDDEV_SAMP, CORRELATION, SUM_LIST, ATTR) support ``undo``; the others cannot aggregate a table.
"""

from __future__ import annotations

import decimal
import fractions
import math
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.errors import AnalysisError, EvaluationError, FunctionFailure, InternalError
from engine.functions.java_hash import hll_cardinality, hll_register, murmur_hash_object
from engine.functions.lib_math import ANY_DECIMAL
from engine.functions.registry import REGISTRY, Generic, aggregate
from engine.functions.udaf import (
    BaseAggregator,
    config_int,
    ensure_decimal_fits,
    java_div,
    java_sqrt,
    next_sequence,
    sort_key,
    wrap_int,
    wrap_long,
)
from engine.plan import types as T
from engine.plan.types import SqlType

_T = Generic("T")
ArgTypes = Sequence[SqlType | None] | None


def _first_arg(args: Sequence[SqlType | None]) -> SqlType:
    return args[0] if args and args[0] is not None else T.Decimal(10, 0)


def _array_of_first(args: Sequence[SqlType | None]) -> SqlType:
    return T.Array(_first_arg(args))


def _decimal_type(arg_types: ArgTypes, fn: str) -> T.Decimal:
    if not arg_types or not isinstance(arg_types[0], T.Decimal):
        raise InternalError(
            f"{fn} over DECIMAL needs the column type; build it with "
            "aggregate_spec(...).create(). This is a bug in kspark."
        )
    return arg_types[0]


def _positive(n: int, fn: str, what: str) -> int:
    if n is None or n <= 0:
        raise AnalysisError(f"{fn}'s {what} must be a positive integer literal, got {n}.")
    return n


# --------------------------------------------------------------------------- COUNT


class CountAggregator(BaseAggregator):
    """COUNT(col): the number of non-NULL values; COUNT(*) counts every row."""

    supports_undo = True

    def __init__(self, *, star: bool) -> None:
        self.star = star

    def initial(self) -> int:
        return 0

    def _counts(self, value: Any) -> bool:
        return self.star or value is not None

    def add(self, acc: int, value: Any) -> int:
        return acc + 1 if self._counts(value) else acc

    def undo(self, acc: int, value: Any) -> int:
        return acc - 1 if self._counts(value) else acc

    def merge(self, a: int, b: int) -> int:
        return a + b

    def result(self, acc: int) -> int:
        return acc


@aggregate("COUNT", params=[], returns=T.BIGINT, supports_undo=True)
def count_star() -> CountAggregator:
    """Count the rows (COUNT(*) and COUNT())."""
    return CountAggregator(star=True)


@aggregate("COUNT", params=[_T], returns=T.BIGINT, supports_undo=True)
def count_column() -> CountAggregator:
    """Count the non-NULL values of a column."""
    return CountAggregator(star=False)


# --------------------------------------------------------------------------- SUM


class SumAggregator(BaseAggregator):
    """SUM over INT/BIGINT (Java overflow wraps) or DOUBLE; starts at zero, skips NULL."""

    supports_undo = True

    def __init__(self, zero: Any, wrap: Callable[[Any], Any]) -> None:
        self.zero = zero
        self.wrap = wrap

    def initial(self) -> Any:
        return self.zero

    def add(self, acc: Any, value: Any) -> Any:
        return acc if value is None else self.wrap(acc + value)

    def undo(self, acc: Any, value: Any) -> Any:
        return acc if value is None else self.wrap(acc - value)

    def merge(self, a: Any, b: Any) -> Any:
        return self.wrap(a + b)

    def result(self, acc: Any) -> Any:
        return acc


class DecimalSumAggregator(BaseAggregator):
    """SUM over DECIMAL(p, s): exact, raising "Numeric field overflow" beyond p digits."""

    supports_undo = True

    def __init__(self, precision: int, scale: int) -> None:
        self.precision = precision
        self.scale = scale

    def _fit(self, x: decimal.Decimal) -> decimal.Decimal:
        return ensure_decimal_fits(x, self.precision, self.scale)

    def initial(self) -> decimal.Decimal:
        return self._fit(decimal.Decimal(0))

    def add(self, acc: decimal.Decimal, value: Any) -> decimal.Decimal:
        return acc if value is None else self._fit(acc + decimal.Decimal(value))

    def undo(self, acc: decimal.Decimal, value: Any) -> decimal.Decimal:
        return acc if value is None else self._fit(acc - decimal.Decimal(value))

    def merge(self, a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
        return self._fit(a + b)

    def result(self, acc: decimal.Decimal) -> decimal.Decimal:
        return acc


@aggregate("SUM", params=[T.INTEGER], returns=T.INTEGER, supports_undo=True)
def sum_int() -> SumAggregator:
    """Sum of INT values (wraps on overflow like ksqlDB)."""
    return SumAggregator(0, wrap_int)


@aggregate("SUM", params=[T.BIGINT], returns=T.BIGINT, supports_undo=True)
def sum_bigint() -> SumAggregator:
    """Sum of BIGINT values (wraps on overflow like ksqlDB)."""
    return SumAggregator(0, wrap_long)


@aggregate("SUM", params=[T.DOUBLE], returns=T.DOUBLE, supports_undo=True)
def sum_double() -> SumAggregator:
    """Sum of DOUBLE values."""
    return SumAggregator(0.0, float)


class StoppingDecimalSumAggregator(DecimalSumAggregator):
    """SUM over DECIMAL(p, s) from version 2: a sum beyond p digits stops the query, as
    ksqlDB's does (its KsqlFunctionException ends the stream thread)."""

    def _fit(self, x: decimal.Decimal) -> decimal.Decimal:
        try:
            return super()._fit(x)
        except EvaluationError as exc:
            raise FunctionFailure(f"SUM over DECIMAL({self.precision}, {self.scale}): {exc}") from None


@aggregate("SUM", params=[ANY_DECIMAL], returns=_first_arg, supports_undo=True, until=1)
def sum_decimal(*, arg_types: ArgTypes = None) -> DecimalSumAggregator:
    """Sum of DECIMAL values, in the column's own precision and scale (version 1: a sum
    that overflows is logged, and the record left out of the sum)."""
    d = _decimal_type(arg_types, "SUM")
    return DecimalSumAggregator(d.precision, d.scale)


@aggregate("SUM", params=[ANY_DECIMAL], returns=_first_arg, supports_undo=True, since=2)
def sum_decimal_stopping(*, arg_types: ArgTypes = None) -> DecimalSumAggregator:
    """Sum of DECIMAL values, in the column's own precision and scale; a sum that overflows
    stops the query."""
    d = _decimal_type(arg_types, "SUM")
    return StoppingDecimalSumAggregator(d.precision, d.scale)


class SumListAggregator(SumAggregator):
    """SUM_LIST: the sum of every non-NULL element of every list.

    As ksqlDB's: each list is summed on its own, from zero, element after element (a plain
    left fold: Python's ``sum`` compensates float rounding from 3.12 on), then added to or
    taken from the running sum.
    """

    def _list_sum(self, value: Sequence[Any]) -> Any:
        total = self.zero
        for v in value:
            if v is not None:
                total = self.wrap(total + v)
        return total

    def add(self, acc: Any, value: Any) -> Any:
        return acc if value is None else self.wrap(acc + self._list_sum(value))

    def undo(self, acc: Any, value: Any) -> Any:
        return acc if value is None else self.wrap(acc - self._list_sum(value))


@aggregate("SUM_LIST", params=[T.Array(T.INTEGER)], returns=T.INTEGER, supports_undo=True)
def sum_list_int() -> SumListAggregator:
    """Sum of the elements of INT lists."""
    return SumListAggregator(0, wrap_int)


@aggregate("SUM_LIST", params=[T.Array(T.BIGINT)], returns=T.BIGINT, supports_undo=True)
def sum_list_bigint() -> SumListAggregator:
    """Sum of the elements of BIGINT lists."""
    return SumListAggregator(0, wrap_long)


@aggregate("SUM_LIST", params=[T.Array(T.DOUBLE)], returns=T.DOUBLE, supports_undo=True)
def sum_list_double() -> SumListAggregator:
    """Sum of the elements of DOUBLE lists."""
    return SumListAggregator(0.0, float)


# --------------------------------------------------------------------------- AVG


class AvgAggregator(BaseAggregator):
    """AVG: (sum, count) of the non-NULL values; 0.0 for an empty group, as ksqlDB."""

    supports_undo = True

    def __init__(self, zero: Any, wrap: Callable[[Any], Any]) -> None:
        self.zero = zero
        self.wrap = wrap

    def initial(self) -> tuple[Any, int]:
        return (self.zero, 0)

    def add(self, acc: tuple[Any, int], value: Any) -> tuple[Any, int]:
        return acc if value is None else (self.wrap(acc[0] + value), acc[1] + 1)

    def undo(self, acc: tuple[Any, int], value: Any) -> tuple[Any, int]:
        return acc if value is None else (self.wrap(acc[0] - value), acc[1] - 1)

    def merge(self, a: tuple[Any, int], b: tuple[Any, int]) -> tuple[Any, int]:
        return (self.wrap(a[0] + b[0]), a[1] + b[1])

    def result(self, acc: tuple[Any, int]) -> float:
        total, count = acc
        return 0.0 if count == 0 else float(total) / count


def _avg_intermediate(sum_type: SqlType) -> SqlType:
    return T.Struct((T.Field("SUM", sum_type), T.Field("COUNT", T.BIGINT)))


for _t, _zero, _wrap in (
    (T.INTEGER, 0, wrap_int),
    (T.BIGINT, 0, wrap_long),
    (T.DOUBLE, 0.0, float),
):
    aggregate(
        "AVG",
        params=[_t],
        returns=T.DOUBLE,
        supports_undo=True,
        intermediate=_avg_intermediate(_t),
        description="The average of the non-NULL values.",
    )(lambda z=_zero, w=_wrap: AvgAggregator(z, w))


# --------------------------------------------------------------------------- MIN / MAX


class ExtremeAggregator(BaseAggregator):
    """MIN/MAX of the non-NULL values (NULL for none), ordered like Java's compareTo."""

    def __init__(self, *, largest: bool) -> None:
        self.largest = largest

    def initial(self) -> Any:
        return None

    def _better(self, candidate: Any, current: Any) -> bool:
        a, b = sort_key(candidate), sort_key(current)
        return bool(a > b) if self.largest else bool(a < b)

    def add(self, acc: Any, value: Any) -> Any:
        if value is None:
            return acc
        if acc is None or self._better(value, acc):
            return value
        return acc

    def merge(self, a: Any, b: Any) -> Any:
        return self.add(a, b)

    def result(self, acc: Any) -> Any:
        return acc


_COMPARABLE: tuple[SqlType, ...] = (
    T.INTEGER,
    T.BIGINT,
    T.DOUBLE,
    ANY_DECIMAL,
    T.STRING,
    T.BYTES,
    T.DATE,
    T.TIME,
    T.TIMESTAMP,
)


def _same_type(t: SqlType) -> Any:
    return _first_arg if t is ANY_DECIMAL else t


for _name, _largest in (("MIN", False), ("MAX", True)):
    for _cmp in _COMPARABLE:
        aggregate(
            _name,
            params=[_cmp],
            returns=_same_type(_cmp),
            description=f"The {'largest' if _largest else 'smallest'} non-NULL value.",
        )(lambda big=_largest: ExtremeAggregator(largest=big))


# --------------------------------------------------------------------------- COUNT_DISTINCT


def freeze(value: Any) -> Any:
    """A hashable stand-in for a value, equal exactly when the values are equal."""
    if isinstance(value, list):
        return ("a", tuple(freeze(v) for v in value))
    if isinstance(value, dict):
        return ("m", frozenset((freeze(k), freeze(v)) for k, v in value.items()))
    return value


class CountDistinctAggregator(BaseAggregator):
    """COUNT_DISTINCT: the number of distinct non-NULL values (exact; ksqlDB estimates)."""

    def initial(self) -> dict[Any, None]:
        return {}

    def add(self, acc: dict[Any, None], value: Any) -> dict[Any, None]:
        if value is None:
            return acc
        key = freeze(value)
        return acc if key in acc else {**acc, key: None}

    def merge(self, a: dict[Any, None], b: dict[Any, None]) -> dict[Any, None]:
        return {**a, **b}

    def result(self, acc: dict[Any, None]) -> int:
        return len(acc)


@aggregate("COUNT_DISTINCT", params=[_T], returns=T.BIGINT, intermediate=T.Array(T.BIGINT), until=1)
def count_distinct() -> CountDistinctAggregator:
    """The exact number of distinct non-NULL values (version 1, kept for saved plans)."""
    return CountDistinctAggregator()


COUNT_DISTINCT_LOG2M = 14  # ksqlDB's 2^14 registers


class HyperLogLogAggregator(BaseAggregator):
    """COUNT_DISTINCT as ksqlDB estimates it: a HyperLogLog of 2^14 registers fed with the
    MurmurHash of each non-NULL value (``engine.functions.java_hash``); acc maps the
    registers set to their rank, and a merge keeps the greater rank of each register."""

    def __init__(self, value_type: SqlType | None) -> None:
        self.value_type = value_type

    def initial(self) -> dict[int, int]:
        return {}

    def add(self, acc: dict[int, int], value: Any) -> dict[int, int]:
        if value is None:
            return acc
        index, rank = hll_register(murmur_hash_object(value, self.value_type), COUNT_DISTINCT_LOG2M)
        if acc.get(index, 0) >= rank:
            return acc
        return {**acc, index: rank}

    def merge(self, a: dict[int, int], b: dict[int, int]) -> dict[int, int]:
        out = dict(a)
        for index, rank in b.items():
            if out.get(index, 0) < rank:
                out[index] = rank
        return out

    def result(self, acc: dict[int, int]) -> int:
        return hll_cardinality(acc, COUNT_DISTINCT_LOG2M)


@aggregate("COUNT_DISTINCT", params=[_T], returns=T.BIGINT, intermediate=T.Array(T.BIGINT), since=2)
def count_distinct_estimate(*, arg_types: ArgTypes = None) -> HyperLogLogAggregator:
    """The number of distinct non-NULL values, estimated by ksqlDB's HyperLogLog.

    2^14 registers: exact for few values, within about 1% beyond.
    """
    return HyperLogLogAggregator(arg_types[0] if arg_types else None)


# --------------------------------------------------------------------------- COLLECT_LIST / SET

COLLECT_LIST_LIMIT = "ksql.functions.collect_list.limit"
COLLECT_SET_LIMIT = "ksql.functions.collect_set.limit"
DEFAULT_COLLECT_LIMIT = 1000


class CollectListAggregator(BaseAggregator):
    """COLLECT_LIST: every value, NULLs included, in arrival order, up to ``limit``."""

    supports_undo = True

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def initial(self) -> list[Any]:
        return []

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        return acc + [value] if len(acc) < self.limit else acc

    def undo(self, acc: list[Any], value: Any) -> list[Any]:
        # ksqlDB removes the last equal value: the one actually inserted is not tracked.
        for i in range(len(acc) - 1, -1, -1):
            if acc[i] == value:
                return acc[:i] + acc[i + 1 :]
        return acc

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return (a + b)[: self.limit]

    def result(self, acc: list[Any]) -> list[Any]:
        return list(acc)


class CollectSetAggregator(BaseAggregator):
    """COLLECT_SET: distinct values, NULL included, in first-seen order, up to ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def initial(self) -> list[Any]:
        return []

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        if len(acc) >= self.limit or value in acc:
            return acc
        return acc + [value]

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        out = a
        for v in b:
            out = self.add(out, v)
        return out

    def result(self, acc: list[Any]) -> list[Any]:
        return list(acc)


@aggregate("COLLECT_LIST", params=[_T], returns=T.Array(_T), supports_undo=True, until=1)
def collect_list(*, config: Mapping[str, Any] | None = None) -> CollectListAggregator:
    """All values of the group as an array (limit: ksql.functions.collect_list.limit, 1000
    when unset: version 1, kept for saved plans)."""
    return CollectListAggregator(config_int(config, COLLECT_LIST_LIMIT, DEFAULT_COLLECT_LIMIT))


@aggregate("COLLECT_SET", params=[_T], returns=T.Array(_T), until=1)
def collect_set(*, config: Mapping[str, Any] | None = None) -> CollectSetAggregator:
    """The distinct values of the group as an array (limit: ksql.functions.collect_set.limit,
    1000 when unset: version 1, kept for saved plans)."""
    return CollectSetAggregator(config_int(config, COLLECT_SET_LIMIT, DEFAULT_COLLECT_LIMIT))


def _collect_limit(config: Mapping[str, Any] | None, key: str) -> int:
    """ksqlDB's Collect limit: unlimited unless set, and a negative setting is unlimited too."""
    limit = config_int(config, key, -1)
    return UNLIMITED_COLLECT if limit < 0 else limit


UNLIMITED_COLLECT = 2**31 - 1  # Java's Integer.MAX_VALUE, ksqlDB's "no limit"


@aggregate("COLLECT_LIST", params=[_T], returns=T.Array(_T), supports_undo=True, since=2)
def collect_list_unlimited(*, config: Mapping[str, Any] | None = None) -> CollectListAggregator:
    """All values of the group as an array, NULLs included, in arrival order (at most
    ksql.functions.collect_list.limit values when set)."""
    return CollectListAggregator(_collect_limit(config, COLLECT_LIST_LIMIT))


@aggregate("COLLECT_SET", params=[_T], returns=T.Array(_T), since=2)
def collect_set_unlimited(*, config: Mapping[str, Any] | None = None) -> CollectSetAggregator:
    """The distinct values of the group as an array, in first-seen order (at most
    ksql.functions.collect_set.limit values when set)."""
    return CollectSetAggregator(_collect_limit(config, COLLECT_SET_LIMIT))


# --------------------------------------------------------------------------- ATTR


def java_equality_key(value: Any) -> Any:
    """A hashable key equal exactly when Java's ``Objects.equals`` holds for the values: as
    ``freeze``, but a double compares by its bits (NaN equals NaN, 0.0 is not -0.0)."""
    if isinstance(value, float):
        return ("d", struct.pack(">d", math.nan if math.isnan(value) else value))
    if isinstance(value, list):
        return ("a", tuple(java_equality_key(v) for v in value))
    if isinstance(value, dict):
        return ("m", frozenset((java_equality_key(k), java_equality_key(v)) for k, v in value.items()))
    return value


_AttrAcc = tuple[tuple[Any, int], ...]  # (value, count) in first-seen order


class AttrAggregator(BaseAggregator):
    """ATTR: the group's one value, or NULL when it holds more than one distinct value.

    As ksqlDB's: every value counts, NULL included; a retraction lowers its value's count
    (never below zero) and keeps the entry; the result is the value of the one entry with a
    positive count, NULL when there is no such entry or several.
    """

    supports_undo = True

    def initial(self) -> _AttrAcc:
        return ()

    @staticmethod
    def _update(acc: _AttrAcc, value: Any, count: int) -> _AttrAcc:
        key = java_equality_key(value)
        for i, (seen, seen_count) in enumerate(acc):
            if java_equality_key(seen) == key:
                return acc[:i] + ((seen, max(0, seen_count + count)),) + acc[i + 1:]
        return acc + ((value, count),) if count > 0 else acc

    def add(self, acc: _AttrAcc, value: Any) -> _AttrAcc:
        return self._update(acc, value, 1)

    def undo(self, acc: _AttrAcc, value: Any) -> _AttrAcc:
        return self._update(acc, value, -1)

    def merge(self, a: _AttrAcc, b: _AttrAcc) -> _AttrAcc:
        out = a
        for value, count in b:
            out = self._update(out, value, count)
        return out

    def result(self, acc: _AttrAcc) -> Any:
        present = [value for value, count in acc if count > 0]
        return present[0] if len(present) == 1 else None


def _attr_intermediate(args: Sequence[SqlType | None]) -> SqlType:
    value = args[0] if args and args[0] is not None else T.STRING
    return T.Array(T.Struct((T.Field("VALUE", value), T.Field("COUNT", T.INTEGER))))


@aggregate("ATTR", params=[_T], returns=_T, supports_undo=True, intermediate=_attr_intermediate)
def attr() -> AttrAggregator:
    """The group's single value; NULL if the group holds several distinct values."""
    return AttrAggregator()


# --------------------------------------------------------------------------- HISTOGRAM

HISTOGRAM_LIMIT = 1000


class HistogramAggregator(BaseAggregator):
    """HISTOGRAM: occurrences per non-NULL string; at most 1000 distinct strings."""

    supports_undo = True

    def initial(self) -> dict[str, int]:
        return {}

    def _bump(self, acc: dict[str, int], key: str, by: int) -> dict[str, int]:
        if key not in acc and len(acc) >= HISTOGRAM_LIMIT:
            return acc
        return {**acc, key: acc.get(key, 0) + by}

    def add(self, acc: dict[str, int], value: Any) -> dict[str, int]:
        return acc if value is None else self._bump(acc, value, 1)

    def undo(self, acc: dict[str, int], value: Any) -> dict[str, int]:
        if value is None or value not in acc:
            return acc
        if acc[value] <= 1:
            return {k: v for k, v in acc.items() if k != value}
        return {**acc, value: acc[value] - 1}

    def merge(self, a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
        out = a
        for k, v in b.items():
            out = self._bump(out, k, v)
        return out

    def result(self, acc: dict[str, int]) -> dict[str, int]:
        return dict(acc)


@aggregate("HISTOGRAM", params=[T.STRING], returns=T.Map(T.STRING, T.BIGINT), supports_undo=True)
def histogram() -> HistogramAggregator:
    """How many times each string occurs."""
    return HistogramAggregator()


# --------------------------------------------------------------------------- EARLIEST / LATEST


class ByOffsetAggregator(BaseAggregator):
    """EARLIEST/LATEST_BY_OFFSET of one value: acc is None or (sequence, value).

    The sequence orders records across accumulators when session windows merge.
    """

    def __init__(self, *, latest: bool, ignore_nulls: bool) -> None:
        self.latest = latest
        self.ignore_nulls = ignore_nulls

    def initial(self) -> tuple[int, Any] | None:
        return None

    def add(self, acc: tuple[int, Any] | None, value: Any) -> tuple[int, Any] | None:
        if value is None and self.ignore_nulls:
            return acc
        if acc is not None and not self.latest:
            return acc
        return (next_sequence(), value)

    def merge(self, a: tuple[int, Any] | None, b: tuple[int, Any] | None) -> tuple[int, Any] | None:
        if a is None or b is None:
            return b if a is None else a
        if self.latest:
            return a if a[0] >= b[0] else b
        return a if a[0] <= b[0] else b

    def result(self, acc: tuple[int, Any] | None) -> Any:
        return None if acc is None else acc[1]


class ByOffsetNAggregator(BaseAggregator):
    """EARLIEST/LATEST_BY_OFFSET keeping ``n`` values: acc is [(sequence, value), ...].

    ``merge_keeps_oldest``: a session-window merge keeps the ``n`` oldest of both sides, as
    ksqlDB's LATEST_BY_OFFSET(col, N) does (its merge sorts by sequence and takes the first
    N); version 1 of LATEST kept the newest.
    """

    def __init__(
        self, n: int, *, latest: bool, ignore_nulls: bool, merge_keeps_oldest: bool = False
    ) -> None:
        self.n = n
        self.latest = latest
        self.ignore_nulls = ignore_nulls
        self.merge_keeps_oldest = merge_keeps_oldest

    def initial(self) -> list[tuple[int, Any]]:
        return []

    def _keep(self, entries: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        return entries[-self.n :] if self.latest else entries[: self.n]

    def add(self, acc: list[tuple[int, Any]], value: Any) -> list[tuple[int, Any]]:
        if value is None and self.ignore_nulls:
            return acc
        if not self.latest and len(acc) >= self.n:
            return acc
        return self._keep(acc + [(next_sequence(), value)])

    def merge(self, a: list[tuple[int, Any]], b: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
        merged = sorted(a + b, key=lambda e: e[0])
        return merged[: self.n] if self.merge_keeps_oldest else self._keep(merged)

    def result(self, acc: list[tuple[int, Any]]) -> list[Any]:
        return [v for _, v in acc]


def _by_offset_intermediate(many: bool) -> Callable[[Sequence[SqlType | None]], SqlType]:
    def rule(args: Sequence[SqlType | None]) -> SqlType:
        entry = T.Struct(
            (T.Field("SEQ", T.BIGINT), T.Field("VAL", args[0] if args[0] is not None else T.STRING))
        )
        return T.Array(entry) if many else entry

    return rule


def _register_by_offset(name: str, latest: bool) -> None:
    verb = "latest" if latest else "earliest"
    single, many = _by_offset_intermediate(False), _by_offset_intermediate(True)

    @aggregate(name, params=[_T], returns=_T, intermediate=single)
    def one() -> ByOffsetAggregator:
        return ByOffsetAggregator(latest=latest, ignore_nulls=True)

    @aggregate(name, params=[_T, T.BOOLEAN], returns=_T, init_params=1, intermediate=single)
    def one_nulls(ignore_nulls: bool) -> ByOffsetAggregator:
        return ByOffsetAggregator(latest=latest, ignore_nulls=bool(ignore_nulls))

    # LATEST's N overloads changed in version 2 (a merge keeps the oldest N); EARLIEST's did not.
    versions: tuple[tuple[int, int | None], ...] = ((1, 1), (2, None)) if latest else ((1, None),)
    for since, until in versions:
        oldest = since >= 2

        @aggregate(
            name, params=[_T, T.INTEGER], returns=T.Array(_T), init_params=1, intermediate=many,
            since=since, until=until, description=f"The N {verb} non-NULL values by offset.",
        )
        def n(count: int, oldest: bool = oldest) -> ByOffsetNAggregator:
            return ByOffsetNAggregator(
                _n_by_offset(count), latest=latest, ignore_nulls=True, merge_keeps_oldest=oldest
            )

        @aggregate(
            name,
            params=[_T, T.INTEGER, T.BOOLEAN],
            returns=T.Array(_T),
            init_params=2,
            intermediate=many,
            since=since,
            until=until,
            description=f"The N {verb} values by offset, NULLs ignored or not.",
        )
        def n_nulls(count: int, ignore_nulls: bool, oldest: bool = oldest) -> ByOffsetNAggregator:
            return ByOffsetNAggregator(
                _n_by_offset(count), latest=latest, ignore_nulls=bool(ignore_nulls),
                merge_keeps_oldest=oldest,
            )

    one.__doc__ = f"The {verb} non-NULL value by offset."
    one_nulls.__doc__ = f"The {verb} value by offset, NULLs ignored or not."


def _n_by_offset(count: int) -> int:
    """ksqlDB's factory refuses N below 1; the statement fails with its factory's message."""
    if count is None or count <= 0:
        raise AnalysisError("Failed to invoke UDAF factory method")
    return count


_register_by_offset("LATEST_BY_OFFSET", latest=True)
_register_by_offset("EARLIEST_BY_OFFSET", latest=False)


# --------------------------------------------------------------------------- non-aggregate columns


class LastAppliedAggregator(BaseAggregator):
    """The value of the row last added to or retracted from the group.

    What a ksqlDB table aggregate keeps in a non-aggregate column: its aggregator and its undo
    aggregator both copy the row they apply (a grouping column's value is the group's own).
    """

    supports_undo = True

    def initial(self) -> Any:
        return None

    def add(self, acc: Any, value: Any) -> Any:
        return value

    def undo(self, acc: Any, value: Any) -> Any:
        return value

    def merge(self, a: Any, b: Any) -> Any:
        return b

    def result(self, acc: Any) -> Any:
        return acc


NON_AGGREGATE_VALUE = "KSQL_NON_AGGREGATE_VALUE"


@aggregate(NON_AGGREGATE_VALUE, params=[_T], returns=_T, supports_undo=True)
def non_aggregate_value() -> LastAppliedAggregator:
    """Internal: a table aggregate's non-aggregate column, as ksqlDB's plans keep it."""
    return LastAppliedAggregator()


REGISTRY.declare_internal(NON_AGGREGATE_VALUE)


# --------------------------------------------------------------------------- TOPK / TOPKDISTINCT

TOPK_MAX_EXTRA_COLUMNS = 5


class TopKAggregator(BaseAggregator):
    """TOPK: the ``k`` largest non-NULL values, descending; earlier ties first.

    With extra columns the value is a tuple (sort value, col0, col1, ...) and the result a
    list of ``{"sort_col": ..., "col0": ..., ...}`` structs.
    """

    def __init__(self, k: int, *, extra_columns: int = 0, distinct: bool = False) -> None:
        self.k = k
        self.extra = extra_columns
        self.distinct = distinct

    def initial(self) -> list[Any]:
        return []

    def _sort_value(self, entry: Any) -> Any:
        return entry[0] if self.extra else entry

    def _insert(self, acc: list[Any], entry: Any) -> list[Any]:
        key = sort_key(self._sort_value(entry))
        if self.distinct and any(sort_key(self._sort_value(e)) == key for e in acc):
            return acc
        pos = len(acc)
        while pos > 0 and sort_key(self._sort_value(acc[pos - 1])) < key:
            pos -= 1
        if pos >= self.k:
            return acc
        return (acc[:pos] + [entry] + acc[pos:])[: self.k]

    def add(self, acc: list[Any], value: Any) -> list[Any]:
        entry = list(value) if self.extra else value
        if self._sort_value(entry) is None:
            return acc
        return self._insert(acc, entry)

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        out = a
        for entry in b:
            out = self._insert(out, entry)
        return out

    def result(self, acc: list[Any]) -> list[Any]:
        if not self.extra:
            return list(acc)
        names = ["sort_col"] + [f"col{i}" for i in range(self.extra)]
        return [dict(zip(names, entry, strict=True)) for entry in acc]


def _topk_struct_return(args: Sequence[SqlType | None]) -> SqlType:
    columns = args[:-1]
    fields = [T.Field("sort_col", columns[0] or T.STRING)]
    fields += [T.Field(f"col{i}", t or T.STRING) for i, t in enumerate(columns[1:])]
    return T.Array(T.Struct(tuple(fields)))


# ksqlDB's TOPK sorts INTEGER, BIGINT, DOUBLE or STRING values only (a DECIMAL reaches the
# DOUBLE overload through a cast); version 1 also took the other comparable types.
_TOPK_SORTABLE = (T.INTEGER, T.BIGINT, T.DOUBLE, T.STRING)


def _register_topk() -> None:
    for t in _COMPARABLE:
        plain_return = _array_of_first if t is ANY_DECIMAL else T.Array(t)
        until = None if t in _TOPK_SORTABLE else 1
        aggregate(
            "TOPK",
            params=[t, T.INTEGER],
            returns=plain_return,
            init_params=1,
            description="The K largest non-NULL values, descending.",
            until=until,
        )(lambda k: TopKAggregator(_positive(k, "TOPK", "K")))
        aggregate(
            "TOPKDISTINCT",
            params=[t, T.INTEGER],
            returns=plain_return,
            init_params=1,
            description="The K largest distinct non-NULL values, descending.",
        )(lambda k: TopKAggregator(_positive(k, "TOPKDISTINCT", "K"), distinct=True))
        for extra in range(1, TOPK_MAX_EXTRA_COLUMNS + 1):
            aggregate(
                "TOPK",
                params=[t, *[Generic(f"C{i}") for i in range(extra)], T.INTEGER],
                returns=_topk_struct_return,
                init_params=1,
                description="The rows with the K largest sort values, as structs.",
                until=until,
            )(lambda k, e=extra: TopKAggregator(_positive(k, "TOPK", "K"), extra_columns=e))


_register_topk()
# Version 2 of TOPK: without the overloads ksqlDB lacks, and its ranking of overloads.
REGISTRY.declare_ksqldb_ties("TOPK", since=2)


# --------------------------------------------------------------------------- STDDEV_SAMP


class StddevSampAggregator(BaseAggregator):
    """Sample standard deviation of the non-NULL values; 0.0 for fewer than two values.

    acc is (count, sum, sum of squares, count of non-finite doubles). Sums are exact (ints,
    or Fractions of the doubles), so retractions and merges leave no rounding residue.
    """

    supports_undo = True

    def initial(self) -> tuple[int, Any, Any, int]:
        return (0, 0, 0, 0)

    def _step(
        self, acc: tuple[int, Any, Any, int], value: Any, sign: int
    ) -> tuple[int, Any, Any, int]:
        if value is None:
            return acc
        count, total, squares, non_finite = acc
        if isinstance(value, float):
            if not math.isfinite(value):
                return (count + sign, total, squares, non_finite + sign)
            value = fractions.Fraction(value)
        return (count + sign, total + sign * value, squares + sign * value * value, non_finite)

    def add(self, acc: tuple[int, Any, Any, int], value: Any) -> tuple[int, Any, Any, int]:
        return self._step(acc, value, 1)

    def undo(self, acc: tuple[int, Any, Any, int], value: Any) -> tuple[int, Any, Any, int]:
        return self._step(acc, value, -1)

    def merge(
        self, a: tuple[int, Any, Any, int], b: tuple[int, Any, Any, int]
    ) -> tuple[int, Any, Any, int]:
        return (a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3])

    def result(self, acc: tuple[int, Any, Any, int]) -> float:
        count, total, squares, non_finite = acc
        if count < 2:
            return 0.0
        if non_finite:
            return math.nan
        variance = fractions.Fraction(count * squares - total * total) / (count * (count - 1))
        return java_sqrt(float(variance))


def _stddev_intermediate(sum_type: SqlType) -> T.Struct:
    return T.Struct((T.Field("SUM", sum_type), T.Field("COUNT", T.BIGINT), T.Field("M2", T.DOUBLE)))


for _name in ("STDDEV_SAMP", "STDDEV_SAMPLE"):
    for _num in (T.INTEGER, T.BIGINT, T.DOUBLE):
        aggregate(
            _name,
            params=[_num],
            returns=T.DOUBLE,
            supports_undo=True,
            intermediate=_stddev_intermediate(_num),
            description="The sample standard deviation of the non-NULL values.",
            until=1,
        )(StddevSampAggregator)


def _java_long_div(a: int, b: int) -> int:
    """Java's integral ``/``: truncates towards zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


_StddevAcc = tuple[int, Any, float]  # (count, sum, M2)


class YoungsCramerAggregator(BaseAggregator):
    """ksqlDB's STDDEV_SAMP and STDDEV_SAMPLE: the Youngs-Cramer update of (count, sum, M2),
    in Java's arithmetic step for step, so results agree to the last bit.

    The sum has the column's type and wraps like a Java ``int``/``long``; the delta of a new
    value is ``value * (count + 1) - (sum + value)``, its (count, sum + value) part in the sum's
    type. ``variance``: STDDEV_SAMP returns M2 / (count - 1) itself (ksqlDB's STDDEV_SAMP
    does; STDDEV_SAMPLE, added after, takes the square root). Fewer than two values give 0.0.
    A session-window merge divides the integral sums by the counts in integers for
    STDDEV_SAMP (``integral_merge``) and in doubles for STDDEV_SAMPLE, as each does.
    """

    supports_undo = True

    def __init__(self, sum_type: SqlType, *, variance: bool) -> None:
        base = sum_type.base
        self.wrap = wrap_int if base is T.BaseType.INTEGER else wrap_long if base is T.BaseType.BIGINT else None
        self.variance = variance

    def _plus(self, a: Any, b: Any) -> Any:
        return self.wrap(a + b) if self.wrap is not None else a + b

    def _delta(self, acc: _StddevAcc, value: Any) -> float:
        count, total, _ = acc
        if self.wrap is None:
            return float(value) * (count + 1) - (total + float(value))
        # int * long is a long; (int sum + int value) wraps in the sum's type first.
        return float(wrap_long(wrap_long(value * (count + 1)) - self._plus(total, value)))

    def initial(self) -> _StddevAcc:
        return (0, 0 if self.wrap is not None else 0.0, 0.0)

    def add(self, acc: _StddevAcc, value: Any) -> _StddevAcc:
        if value is None:
            return acc
        if self.wrap is None:
            value = float(value)
        count, total, m2 = acc
        new_count = count + 1
        if new_count - 1 > 0:
            delta = self._delta(acc, value)
            step = delta * delta / (new_count * (new_count - 1))
        else:
            step = 0.0
        return (new_count, self._plus(value, total), step + m2)

    def undo(self, acc: _StddevAcc, value: Any) -> _StddevAcc:
        if value is None:
            return acc
        if self.wrap is None:
            value = float(value)
        count, total, m2 = acc
        new_count = count - 1
        if new_count > 0:
            delta = self._delta(acc, value)
            step = delta * delta / (new_count * (new_count + 1))
        else:
            step = 0.0
        return (new_count, self._plus(total, -value), m2 - step)

    def merge(self, a: _StddevAcc, b: _StddevAcc) -> _StddevAcc:
        count_a, sum_a, m2_a = a
        count_b, sum_b, m2_b = b
        new_count = count_a + count_b
        if count_a == 0 or count_b == 0:
            m2 = m2_a + m2_b
        else:
            if self.wrap is not None and self.variance:
                inner = float(_java_long_div(sum_a, count_a) - _java_long_div(sum_b, count_b))
            else:
                inner = float(sum_a) / float(count_a) - float(sum_b) / float(count_b)
            m2 = m2_a + m2_b + count_a * count_b * inner * inner / new_count
        return (new_count, self._plus(sum_a, sum_b), m2)

    def result(self, acc: _StddevAcc) -> float:
        count, _, m2 = acc
        if count < 2:
            return 0.0
        variance = m2 / (count - 1)
        return variance if self.variance else java_sqrt(variance)


for _name, _variance in (("STDDEV_SAMP", True), ("STDDEV_SAMPLE", False)):
    for _num in (T.INTEGER, T.BIGINT, T.DOUBLE):
        aggregate(
            _name,
            params=[_num],
            returns=T.DOUBLE,
            supports_undo=True,
            intermediate=_stddev_intermediate(_num),
            description=(
                "The sample variance of the non-NULL values (ksqlDB's STDDEV_SAMP)." if _variance
                else "The sample standard deviation of the non-NULL values."
            ),
            since=2,
        )(lambda t=_num, v=_variance: YoungsCramerAggregator(t, variance=v))


# --------------------------------------------------------------------------- CORRELATION

_CorrAcc = tuple[int, float, float, float, float, float]


class CorrelationAggregator(BaseAggregator):
    """Pearson correlation of (x, y) pairs with neither NULL; NaN below two distinct points.

    acc is (count, sum x, sum y, sum x², sum y², sum xy), in doubles as ksqlDB keeps it.
    """

    supports_undo = True

    def initial(self) -> _CorrAcc:
        return (0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def _step(self, acc: _CorrAcc, value: Any, sign: int) -> _CorrAcc:
        x, y = value
        if x is None or y is None:
            return acc
        x, y = float(x), float(y)
        n, sx, sy, sxx, syy, sxy = acc
        return (
            n + sign,
            sx + sign * x,
            sy + sign * y,
            sxx + sign * x * x,
            syy + sign * y * y,
            sxy + sign * x * y,
        )

    def add(self, acc: _CorrAcc, value: Any) -> _CorrAcc:
        return self._step(acc, value, 1)

    def undo(self, acc: _CorrAcc, value: Any) -> _CorrAcc:
        return self._step(acc, value, -1)

    def merge(self, a: _CorrAcc, b: _CorrAcc) -> _CorrAcc:
        return (a[0] + b[0], *(float(p + q) for p, q in zip(a[1:], b[1:], strict=True)))  # type: ignore[return-value]

    def result(self, acc: _CorrAcc) -> float:
        n, sx, sy, sxx, syy, sxy = acc
        if n == 0:
            return math.nan
        numerator = n * sxy - sx * sy
        spread = (n * sxx - sx * sx) * (n * syy - sy * sy)
        return java_div(numerator, java_sqrt(spread))


_CORRELATION_STATE = T.Struct(
    tuple(
        T.Field(f, T.BIGINT if f == "COUNT" else T.DOUBLE)
        for f in ("COUNT", "X_SUM", "Y_SUM", "X_SQUARED_SUM", "Y_SQUARED_SUM", "XY_SUM")
    )
)


def correlation() -> CorrelationAggregator:
    """The Pearson correlation coefficient of two columns."""
    return CorrelationAggregator()


# ksqlDB has one overload per numeric type, each turning its values into doubles first.
for _num in (T.DOUBLE, T.INTEGER, T.BIGINT):
    aggregate(
        "CORRELATION",
        params=[_num, _num],
        returns=T.DOUBLE,
        supports_undo=True,
        intermediate=_CORRELATION_STATE,
    )(correlation)

# CORRELATION(INTEGER, BIGINT) fits the BIGINT and the DOUBLE overload only through casts:
# ambiguous in ksqlDB (version 1 took the BIGINT one).
REGISTRY.declare_ksqldb_ties("CORRELATION", since=2)
