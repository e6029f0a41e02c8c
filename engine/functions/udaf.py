"""Aggregate functions (UDAFs): the aggregator protocol and helpers shared by the library.

An aggregate function is registered with ``@aggregate`` (see ``engine.functions.registry``)
on a factory that takes the call's literal init arguments and returns an ``Aggregator``.
The aggregator is a stateless strategy; the accumulator it manages is plain picklable data
(numbers, strings, lists, dicts, tuples, ``decimal.Decimal``, dates), because it lives in
Spark's state store.

Value convention: ``add`` and ``undo`` receive the aggregated column's value when the
function aggregates one column, and a tuple of the column values otherwise (an empty tuple
for ``COUNT(*)``/``COUNT()``).

Typical use by the aggregation step builder::

    spec = aggregate_spec("TOPK", [T.INTEGER, T.INTEGER])
    aggregator = spec.create(init_args=[3], config=props)
    acc = aggregator.initial()
    acc = aggregator.add(acc, 42)
    aggregator.result(acc)

This module imports no pyspark and nothing from the upper layer.
"""

from __future__ import annotations

import decimal
import math
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from engine.errors import AnalysisError, EvaluationError, InternalError, TypeCheckError
from engine.functions.registry import REGISTRY, FunctionKind, ResolvedFunction
from engine.plan import types as T
from engine.plan.types import SqlType


@runtime_checkable
class Aggregator(Protocol):
    """Stateless strategy object; the accumulator it manages is plain picklable data."""

    supports_undo: bool

    def initial(self) -> Any:
        """The accumulator of an empty group."""

    def add(self, acc: Any, value: Any) -> Any:
        """Fold one value (a tuple for several aggregated columns) into the accumulator."""

    def undo(self, acc: Any, value: Any) -> Any:
        """Retract a value added earlier (table aggregation); only when ``supports_undo``."""

    def merge(self, a: Any, b: Any) -> Any:
        """Merge two accumulators (session windows); ``a`` holds the earlier records."""

    def result(self, acc: Any) -> Any:
        """The output value of the accumulator."""


class BaseAggregator:
    """Defaults for aggregators that cannot retract: ``undo`` is a bug to call."""

    supports_undo: bool = False

    def undo(self, acc: Any, value: Any) -> Any:
        raise InternalError(
            f"Aggregator {type(self).__name__} cannot undo a value; the planner must reject "
            "table aggregations with it. This is a bug in kspark."
        )


class AggregateSpec(NamedTuple):
    """An aggregate call resolved: the overload, how many leading arguments are columns,
    and the types of the trailing literal init arguments."""

    resolved: ResolvedFunction
    column_args: int
    init_param_types: tuple[SqlType | None, ...]

    @property
    def name(self) -> str:
        return self.resolved.name

    @property
    def return_type(self) -> SqlType:
        return self.resolved.return_type

    @property
    def column_types(self) -> tuple[SqlType | None, ...]:
        """The types the aggregated column arguments are coerced to before ``add``."""
        return self.resolved.param_types[: self.column_args]

    @property
    def supports_undo(self) -> bool:
        """Whether ksqlDB allows the function on a table source (a TableUdaf)."""
        info = self.resolved.signature.aggregate
        return bool(info and info.supports_undo)

    @property
    def intermediate_type(self) -> SqlType:
        """The SQL type of the accumulator as ksqlDB stores it (formats must support it)."""
        info = self.resolved.signature.aggregate
        spec = info.intermediate if info is not None else None
        if spec is None:
            return self.return_type
        if isinstance(spec, SqlType):
            return spec
        return spec(list(self.column_types))

    def create(
        self, init_args: Sequence[Any] = (), config: Mapping[str, Any] | None = None
    ) -> Aggregator:
        """Build the aggregator from the evaluated literal init arguments."""
        if len(init_args) != len(self.init_param_types):
            raise InternalError(
                f"{self.name} takes {len(self.init_param_types)} init argument(s), got "
                f"{len(init_args)}. This is a bug in kspark."
            )
        impl = self.resolved.signature.impl
        return impl(*init_args, config=config, arg_types=self.column_types)  # type: ignore[no-any-return]


def aggregate_spec(
    name: str, arg_types: Sequence[SqlType | None], semantics: int | None = None
) -> AggregateSpec:
    """Resolve an aggregate call; ``arg_types`` covers columns then literal init arguments.
    ``semantics``: the version of the function's behaviour the call was planned with."""
    if REGISTRY.kind_of(name) is not FunctionKind.AGGREGATE:
        if REGISTRY.kind_of(name) is None:
            REGISTRY.signatures(name)  # raises the unknown-function error
        raise TypeCheckError(f"Function '{name.upper()}' is not an aggregate function.")
    resolved = REGISTRY.resolve(name, arg_types, semantics)
    info = resolved.signature.aggregate
    init = info.init_params if info is not None else 0
    columns = len(arg_types) if init == 0 else len(resolved.signature.params) - init
    return AggregateSpec(resolved, columns, tuple(resolved.param_types[columns:]))


def table_aggregation_error(names: Sequence[str]) -> AnalysisError:
    """ksqlDB's error for aggregate functions that cannot aggregate a table source."""
    unique = list(dict.fromkeys(n.upper() for n in names))
    if len(unique) == 1:
        listed, noun = unique[0], "function"
    else:
        listed, noun = ", ".join(unique[:-1]) + " and " + unique[-1], "functions"
    return AnalysisError(
        f"The aggregation {noun} {listed} cannot be applied to a table source, "
        "only to a stream source."
    )


# --------------------------------------------------------------------------- helpers


def wrap_int(x: int) -> int:
    """Java ``int`` overflow: wrap into 32 bits."""
    return (x + 2**31) % 2**32 - 2**31


def wrap_long(x: int) -> int:
    """Java ``long`` overflow: wrap into 64 bits."""
    return (x + 2**63) % 2**64 - 2**63


def wrapper_for(t: SqlType | None) -> Any:
    """The overflow behaviour of integral sums of type ``t`` (identity for other types)."""
    if t is not None and t.base is T.BaseType.INTEGER:
        return wrap_int
    if t is not None and t.base is T.BaseType.BIGINT:
        return wrap_long
    return lambda x: x


EXACT = decimal.Context(prec=2000, Emax=999_999, Emin=-999_999)


def ensure_decimal_fits(value: decimal.Decimal, precision: int, scale: int) -> decimal.Decimal:
    """Rescale ``value`` to ``scale``; raise ksqlDB's overflow error if it needs more digits."""
    scaled = value.quantize(decimal.Decimal((0, (1,), -scale)), context=EXACT)
    limit = decimal.Decimal(10) ** (precision - scale)
    if abs(scaled) >= limit:
        raise EvaluationError(
            f"Numeric field overflow: A field with precision {precision} and scale {scale} "
            f"must round to an absolute value less than 10^{precision - scale}. Got {value}"
        )
    return scaled


def java_div(a: float, b: float) -> float:
    """Java double division: never raises, answers NaN or an infinity."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def java_sqrt(x: float) -> float:
    """``Math.sqrt``: NaN for negative input instead of an exception."""
    return math.nan if x < 0 or math.isnan(x) else math.sqrt(x)


def sort_key(value: Any) -> Any:
    """Key ordering values as Java's ``compareTo`` does (strings by UTF-16 unit, signed
    bytes, NaN above every double)."""
    if isinstance(value, str):
        return value.encode("utf-16-be")
    if isinstance(value, bytes):
        return bytes(b ^ 0x80 for b in value)
    if isinstance(value, float):
        return (math.isnan(value), 0.0 if math.isnan(value) else value)
    return value


_sequence_lock = threading.Lock()
_sequence_state = {"last": 0}


def next_sequence() -> int:
    """A strictly increasing number per process, seeded from the clock so that it keeps
    increasing across restarts: orders records for EARLIEST/LATEST_BY_OFFSET merges."""
    with _sequence_lock:
        now = time.time_ns()
        seq = max(_sequence_state["last"] + 1, now)
        _sequence_state["last"] = seq
        return seq


def config_int(config: Mapping[str, Any] | None, key: str, default: int) -> int:
    """An integer setting from the query's properties, or the default."""
    if not config or key not in config or config[key] is None:
        return default
    raw = config[key]
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise AnalysisError(f"Property '{key}' must be an integer, got '{raw}'.") from None


__all__ = [
    "AggregateSpec",
    "Aggregator",
    "BaseAggregator",
    "aggregate_spec",
    "config_int",
    "ensure_decimal_fits",
    "java_div",
    "java_sqrt",
    "next_sequence",
    "sort_key",
    "table_aggregation_error",
    "wrap_int",
    "wrap_long",
    "wrapper_for",
]
