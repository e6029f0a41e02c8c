"""Array and map functions.

Elements are compared with Java ``equals`` semantics: lists and maps compare by content
(maps ignoring order) and NULL equals NULL, so ``ARRAY_DISTINCT`` of ``[NULL, NULL]`` is
``[NULL]``. Set-like functions keep the order of first appearance.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from engine.data.java_double import java_double_to_string
from engine.data.values import format_double
from engine.errors import EvaluationError
from engine.functions.java_hash import java_map_order
from engine.functions.lib_string import to_units
from engine.functions.registry import REGISTRY, Generic, scalar
from engine.functions.udaf import wrap_int, wrap_long
from engine.plan import types as T
from engine.plan.types import SqlType

_T = Generic("T")
_K = Generic("K")
_V = Generic("V")
ARRAY_T = T.Array(_T)
MAP_KV = T.Map(_K, _V)


def equality_key(value: Any) -> Hashable:
    """A hashable stand-in for a value such that equal keys mean Java-equal values."""
    if isinstance(value, list):
        return ("array", tuple(equality_key(v) for v in value))
    if isinstance(value, dict):
        return ("map", frozenset((equality_key(k), equality_key(v)) for k, v in value.items()))
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, bool):
        return ("bool", value)
    return value


def _distinct(values: Sequence[Any]) -> list[Any]:
    seen: set[Hashable] = set()
    out: list[Any] = []
    for v in values:
        key = equality_key(v)
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def java_text(value: Any, double_text: Callable[[float], str] = format_double) -> str:
    """``String.valueOf`` of an engine value, as ARRAY_JOIN prints elements (a DOUBLE with
    ``double_text``: the JDK's digits from ARRAY_JOIN's version 3, the shortest text before)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return double_text(value)
    return str(value)


# --------------------------------------------------------------------------- arrays


@scalar("ARRAY_CONTAINS", params=[ARRAY_T, _T], returns=T.BOOLEAN, null_propagating=False)
def array_contains(array: list[Any] | None, value: Any) -> bool:
    """Whether the array has an element equal to the value (NULL finds NULL elements)."""
    if array is None:
        return False
    key = equality_key(value)
    return any(equality_key(v) == key for v in array)


@scalar("ARRAY_DISTINCT", params=[ARRAY_T], returns=ARRAY_T)
def array_distinct(array: list[Any]) -> list[Any]:
    """The distinct elements, in order of first appearance."""
    return _distinct(array)


@scalar("ARRAY_EXCEPT", params=[ARRAY_T, ARRAY_T], returns=ARRAY_T)
def array_except(left: list[Any], right: list[Any]) -> list[Any]:
    """Distinct elements of the first array that are not in the second."""
    exclude = {equality_key(v) for v in right}
    return [v for v in _distinct(left) if equality_key(v) not in exclude]


@scalar("ARRAY_INTERSECT", params=[ARRAY_T, ARRAY_T], returns=ARRAY_T)
def array_intersect(left: list[Any], right: list[Any]) -> list[Any]:
    """Distinct elements of the first array that are also in the second."""
    keep = {equality_key(v) for v in right}
    return [v for v in _distinct(left) if equality_key(v) in keep]


@scalar("ARRAY_UNION", params=[ARRAY_T, ARRAY_T], returns=ARRAY_T)
def array_union(left: list[Any], right: list[Any]) -> list[Any]:
    """Distinct elements of both arrays, first array first."""
    return _distinct([*left, *right])


@scalar("ARRAY_CONCAT", params=[ARRAY_T, ARRAY_T], returns=ARRAY_T, null_propagating=False)
def array_concat(left: list[Any] | None, right: list[Any] | None) -> list[Any] | None:
    """Both arrays one after the other; a NULL array counts as empty unless both are NULL."""
    if left is None and right is None:
        return None
    return [*(left or []), *(right or [])]


@scalar("ARRAY_JOIN", params=[ARRAY_T], returns=T.STRING, until=1)
def array_join(array: list[Any]) -> str:
    """The elements as text joined with commas."""
    return ",".join(java_text(v) for v in array)


# ksqlDB's ARRAY_JOIN joins these element types; another one fails, naming the Java class of
# the element.
_JOINED = frozenset({T.BaseType.BOOLEAN, T.BaseType.INTEGER, T.BaseType.BIGINT, T.BaseType.DOUBLE,
                     T.BaseType.DECIMAL, T.BaseType.STRING})
_JAVA_CLASSES = {
    T.BaseType.STRUCT: "org.apache.kafka.connect.data.Struct",
    T.BaseType.ARRAY: "java.util.ArrayList",
    T.BaseType.MAP: "java.util.HashMap",
    T.BaseType.BYTES: "java.nio.HeapByteBuffer",
    T.BaseType.TIMESTAMP: "java.sql.Timestamp",
    T.BaseType.DATE: "java.sql.Date",
    T.BaseType.TIME: "java.sql.Time",
}


def _joined(
    array: list[Any],
    delimiter: str,
    arg_types: Sequence[SqlType | None],
    double_text: Callable[[float], str] = format_double,
) -> str:
    item = arg_types[0].item if arg_types and isinstance(arg_types[0], T.Array) else None
    if item is not None and item.base not in _JOINED and any(v is not None for v in array):
        raise EvaluationError(
            f"error: hit element of type {_JAVA_CLASSES.get(item.base, item.base.value)} "
            "which is currently not supported"
        )
    return delimiter.join(java_text(v, double_text) for v in array)


@scalar("ARRAY_JOIN", params=[ARRAY_T], returns=T.STRING, since=2, until=2, typed=True)
def array_join_primitives(array: list[Any], *, arg_types: Sequence[SqlType | None] = ()) -> str:
    """The numbers, booleans or strings joined with commas; other elements fail."""
    return _joined(array, ",", arg_types)


@scalar("ARRAY_JOIN", params=[ARRAY_T, T.STRING], returns=T.STRING, null_propagating=False, until=1)
def array_join_with(array: list[Any] | None, delimiter: str | None) -> str | None:
    """The elements as text joined with a delimiter (NULL delimiter: none)."""
    if array is None:
        return None
    return (delimiter or "").join(java_text(v) for v in array)


@scalar(
    "ARRAY_JOIN", params=[ARRAY_T, T.STRING], returns=T.STRING, null_propagating=False, since=2,
    until=2, typed=True,
)
def array_join_primitives_with(
    array: list[Any] | None, delimiter: str | None, *, arg_types: Sequence[SqlType | None] = ()
) -> str | None:
    """The numbers, booleans or strings joined with a delimiter; other elements fail.

    A NULL delimiter joins them with none."""
    if array is None:
        return None
    return _joined(array, delimiter or "", arg_types)


@scalar("ARRAY_JOIN", params=[ARRAY_T], returns=T.STRING, since=3, typed=True)
def array_join_jdk_doubles(array: list[Any], *, arg_types: Sequence[SqlType | None] = ()) -> str:
    """The numbers, booleans or strings joined with commas, a DOUBLE as Java's Double.toString
    writes it; other elements fail."""
    return _joined(array, ",", arg_types, java_double_to_string)


@scalar(
    "ARRAY_JOIN", params=[ARRAY_T, T.STRING], returns=T.STRING, null_propagating=False, since=3,
    typed=True,
)
def array_join_jdk_doubles_with(
    array: list[Any] | None, delimiter: str | None, *, arg_types: Sequence[SqlType | None] = ()
) -> str | None:
    """The numbers, booleans or strings joined with a delimiter, a DOUBLE as Java's
    Double.toString writes it; other elements fail. A NULL delimiter joins them with none."""
    if array is None:
        return None
    return _joined(array, delimiter or "", arg_types, java_double_to_string)


@scalar("ARRAY_LENGTH", params=[ARRAY_T], returns=T.INTEGER)
def array_length(array: list[Any]) -> int:
    """The number of elements."""
    return len(array)


def _comparable(array: list[Any], name: str) -> list[Any]:
    present = [v for v in array if v is not None]
    if any(isinstance(v, list | dict) for v in present):
        raise EvaluationError(
            f"{name} supports arrays of primitive values only, not of {present[0]!r}."
        )
    return present


@scalar("ARRAY_MAX", params=[ARRAY_T], returns=_T)
def array_max(array: list[Any]) -> Any:
    """The largest non-NULL element, or NULL when there is none."""
    present = _comparable(array, "ARRAY_MAX")
    return max(present) if present else None


@scalar("ARRAY_MIN", params=[ARRAY_T], returns=_T)
def array_min(array: list[Any]) -> Any:
    """The smallest non-NULL element, or NULL when there is none."""
    present = _comparable(array, "ARRAY_MIN")
    return min(present) if present else None


@scalar("ARRAY_POSITION", params=[ARRAY_T, _T], returns=T.INTEGER, null_propagating=False)
def array_position(array: list[Any] | None, value: Any) -> int:
    """The 1-based position of the first element equal to the value, or 0."""
    if array is None:
        return 0
    key = equality_key(value)
    for i, v in enumerate(array, start=1):
        if equality_key(v) == key:
            return i
    return 0


@scalar("ARRAY_REMOVE", params=[ARRAY_T, _T], returns=ARRAY_T, null_propagating=False)
def array_remove(array: list[Any] | None, value: Any) -> list[Any] | None:
    """The array without the elements equal to the value (NULL removes NULL elements)."""
    if array is None:
        return None
    key = equality_key(value)
    return [v for v in array if equality_key(v) != key]


def _sorted(array: list[Any], descending: bool) -> list[Any]:
    present = _comparable(array, "ARRAY_SORT")
    nulls = [None] * (len(array) - len(present))
    return sorted(present, reverse=descending) + nulls


@scalar("ARRAY_SORT", params=[ARRAY_T], returns=ARRAY_T)
def array_sort(array: list[Any]) -> list[Any]:
    """The elements in ascending order, NULLs last."""
    return _sorted(array, descending=False)


@scalar("ARRAY_SORT", params=[ARRAY_T, T.STRING], returns=ARRAY_T)
def array_sort_direction(array: list[Any], direction: str) -> list[Any] | None:
    """The elements in 'ASC' or 'DESC' order, NULLs last; another direction gives NULL."""
    upper = direction.upper()
    if upper not in ("ASC", "DESC"):
        return None
    return _sorted(array, descending=upper == "DESC")


@scalar("SLICE", params=[ARRAY_T, T.INTEGER, T.INTEGER], returns=ARRAY_T, null_propagating=False)
def slice_array(array: list[Any] | None, start: int | None, end: int | None) -> list[Any] | None:
    """Elements ``start`` to ``end``, 1-based and inclusive; out of range gives NULL."""
    if array is None:
        return None
    first = 0 if start is None else start - 1
    last = len(array) if end is None else end
    if first < 0 or last > len(array) or first > last:
        return None
    return array[first:last]


def _series(start: int, end: int, step: int) -> list[int]:
    if step == 0:
        raise EvaluationError("GENERATE_SERIES step cannot be zero.")
    if (end - start) * step < 0:
        raise EvaluationError(
            f"GENERATE_SERIES step {step} moves away from the end {end}; "
            f"expected a step with the sign of {end} - {start}."
        )
    return list(range(start, end + (1 if step > 0 else -1), step))


for _t in (T.INTEGER, T.BIGINT):
    scalar(
        "GENERATE_SERIES",
        params=[_t, _t],
        returns=T.Array(_t),
        description="The integers from start to end inclusive, counting up or down by one.",
        until=2,
    )(lambda start, end: _series(start, end, 1 if end >= start else -1))
    scalar(
        "GENERATE_SERIES",
        params=[_t, _t, _t],
        returns=T.Array(_t),
        description="The integers from start towards end inclusive, in steps of step.",
        # ksqlDB's step is an INTEGER: GENERATE_SERIES(BIGINT, BIGINT, BIGINT) is version 1's.
        until=2 if _t is T.INTEGER else 1,
    )(_series)

scalar(
    "GENERATE_SERIES",
    params=[T.BIGINT, T.BIGINT, T.INTEGER],
    returns=T.Array(T.BIGINT),
    description="The integers from start towards end inclusive, in steps of an INTEGER step.",
    until=2,
)(_series)
# Version 2 of GENERATE_SERIES: without the BIGINT step, and ksqlDB's ranking of overloads.
REGISTRY.declare_ksqldb_ties("GENERATE_SERIES", since=2)


def _java_series(start: int, end: int, step: int, *, wrap: Callable[[int], int]) -> list[int]:
    """ksqlDB's GENERATE_SERIES body in Java arithmetic: the difference, the values and the
    element count wrap like ``int`` (``wrap_int``) or ``long`` (``wrap_long``) do, and a count
    that wraps below zero is ArrayList's error (the call is NULL)."""
    if step == 0:
        raise EvaluationError("GENERATE_SERIES step cannot be zero")
    diff = wrap(end - start)
    if (diff > 0 and step < 0) or (diff < 0 and step > 0):
        raise EvaluationError("GENERATE_SERIES step has wrong sign")
    quotient = abs(diff) // abs(step) * (1 if (diff < 0) == (step < 0) else -1)
    size = wrap_int(1 + quotient)  # int arithmetic, or 1 + (int) (diff / step) for longs
    if size < 0:
        raise EvaluationError(f"Illegal Capacity: {size}")
    out: list[int] = []
    value = start
    for _ in range(size):
        out.append(value)
        value = wrap(value + step)
    return out


# Version 3: Java's arithmetic (ksqlDB's int and long overflow) and its messages.
for _t, _wrap in ((T.INTEGER, wrap_int), (T.BIGINT, wrap_long)):
    scalar(
        "GENERATE_SERIES",
        params=[_t, _t],
        returns=T.Array(_t),
        description="The integers from start to end inclusive, counting up or down by one.",
        since=3,
    )(lambda start, end, w=_wrap: _java_series(start, end, 1 if w(end - start) > 0 else -1, wrap=w))
    scalar(
        "GENERATE_SERIES",
        params=[_t, _t, T.INTEGER],
        returns=T.Array(_t),
        description=(
            "The integers from start towards end inclusive, in steps of step."
            if _t is T.INTEGER
            else "The integers from start towards end inclusive, in steps of an INTEGER step."
        ),
        since=3,
    )(lambda start, end, step, w=_wrap: _java_series(start, end, step, wrap=w))


# --------------------------------------------------------------------------- maps


def _entries_type(args: Sequence[SqlType | None]) -> SqlType:
    value = args[0].value if isinstance(args[0], T.Map) else T.STRING
    return T.Array(T.Struct((T.Field("K", T.STRING), T.Field("V", value))))


@scalar("ENTRIES", params=[T.Map(T.STRING, _V), T.BOOLEAN], returns=_entries_type, until=1)
def entries(value: dict[str, Any], sort: bool) -> list[dict[str, Any]]:
    """The map as an array of ``STRUCT<K, V>``, sorted by key when asked (version 1).

    Kept for saved plans: unsorted entries come in the map's own order.
    """
    items = sorted(value.items(), key=lambda kv: kv[0]) if sort else list(value.items())
    return [{"K": k, "V": v} for k, v in items]


@scalar("MAP_KEYS", params=[MAP_KV], returns=T.Array(_K), until=1)
def map_keys(value: dict[Any, Any]) -> list[Any]:
    """The keys of a map (version 1, kept for saved plans: in the map's own order)."""
    return list(value.keys())


@scalar("MAP_VALUES", params=[MAP_KV], returns=T.Array(_V), until=1)
def map_values(value: dict[Any, Any]) -> list[Any]:
    """The values of a map (version 1, kept for saved plans: in the map's own order)."""
    return list(value.values())


# Version 2: in the order ksqlDB's Java bodies walk the map (its HashMap's), and ENTRIES
# sorts keys as Java's String.compareTo does (by UTF-16 code units).


@scalar("ENTRIES", params=[T.Map(T.STRING, _V), T.BOOLEAN], returns=_entries_type, since=2, typed=True)
def entries_java_order(
    value: dict[str, Any], sort: bool, *, arg_types: Sequence[SqlType | None] = ()
) -> list[dict[str, Any]]:
    """The map as an array of ``STRUCT<K, V>``, sorted by key or in Java's HashMap order."""
    items = java_map_order(value, arg_types[0] if arg_types else None)
    if sort:
        items = sorted(items, key=lambda kv: to_units(kv[0]))
    return [{"K": k, "V": v} for k, v in items]


@scalar("MAP_KEYS", params=[MAP_KV], returns=T.Array(_K), since=2, typed=True)
def map_keys_java_order(
    value: dict[Any, Any], *, arg_types: Sequence[SqlType | None] = ()
) -> list[Any]:
    """The keys of a map, in Java's HashMap order."""
    return [k for k, _ in java_map_order(value, arg_types[0] if arg_types else None)]


@scalar("MAP_VALUES", params=[MAP_KV], returns=T.Array(_V), since=2, typed=True)
def map_values_java_order(
    value: dict[Any, Any], *, arg_types: Sequence[SqlType | None] = ()
) -> list[Any]:
    """The values of a map, in Java's HashMap order of their keys."""
    return [v for _, v in java_map_order(value, arg_types[0] if arg_types else None)]


@scalar("MAP_UNION", params=[MAP_KV, MAP_KV], returns=MAP_KV, null_propagating=False)
def map_union(left: dict[Any, Any] | None, right: dict[Any, Any] | None) -> dict[Any, Any] | None:
    """Both maps merged, the second winning on equal keys; NULL counts as empty unless both are."""
    if left is None and right is None:
        return None
    return {**(left or {}), **(right or {})}


@scalar("AS_MAP", params=[T.Array(T.STRING), ARRAY_T], returns=T.Map(T.STRING, _T))
def as_map(keys: list[str], values: list[Any]) -> dict[str, Any]:
    """A map pairing each key with the value at the same position (NULL when missing)."""
    return {k: values[i] if i < len(values) else None for i, k in enumerate(keys)}
