"""Steps of aggregations: grouping, aggregating (plain or windowed) and suppressing.

A query ``SELECT .. FROM s GROUP BY ..`` plans as ``streamGroupByV1`` (or
``streamGroupByKeyV1`` when it groups by the existing key, or ``tableGroupByV1`` on a
table) feeding ``streamAggregateV1`` / ``streamWindowedAggregateV1`` /
``tableAggregateV1``; ``EMIT FINAL`` adds ``tableSuppressV2`` (``tableSuppressV1`` in older plans). Aggregate results are
named ``KSQL_AGG_VARIABLE_n``; the key columns keep the grouping names.

This module imports no pyspark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar

from engine.errors import PlanError
from engine.plan import types as T
from engine.plan.constraints import NOT_NEGATIVE
from engine.plan.expr import Expr, FunctionCall
from engine.plan.schema import Column, LogicalSchema, Namespace
from engine.plan.steps import (
    WINDOW_TYPES,
    Formats,
    SelectExpression,
    Step,
    WindowType,
    register_step,
    step_dataclass,
)

DEFAULT_GRACE_MS = 24 * 60 * 60 * 1000  # Kafka Streams' default window maintain time


@step_dataclass
class WindowSpec:
    """The window of an aggregation: type, sizes in milliseconds, grace and retention."""

    type: WindowType
    size_ms: int | None = None
    advance_ms: int | None = None
    gap_ms: int | None = None
    grace_ms: Annotated[int, NOT_NEGATIVE] | None = None
    retention_ms: int | None = None

    def __post_init__(self) -> None:
        if self.type not in WINDOW_TYPES:
            raise PlanError(f"Window type must be TUMBLING, HOPPING or SESSION, got '{self.type}'.")
        if self.type == "SESSION":
            if self.gap_ms is None or self.gap_ms <= 0:
                raise PlanError(f"A SESSION window needs a positive gap, got {self.gap_ms}.")
        elif self.size_ms is None or self.size_ms <= 0:
            raise PlanError(f"A {self.type} window needs a positive size, got {self.size_ms}.")
        if self.type == "HOPPING":
            if self.advance_ms is None or not 0 < self.advance_ms <= (self.size_ms or 0):
                raise PlanError(
                    f"A HOPPING window needs an advance between 1 ms and its size "
                    f"{self.size_ms} ms, got {self.advance_ms}."
                )
        if self.grace_ms is not None and self.grace_ms < 0:
            raise PlanError(f"A window grace period cannot be negative, got {self.grace_ms}.")

    @property
    def effective_grace_ms(self) -> int:
        """The grace period, defaulting as Kafka Streams does: one day minus the size or gap."""
        if self.grace_ms is not None:
            return self.grace_ms
        span = self.gap_ms if self.type == "SESSION" else self.size_ms
        return max(DEFAULT_GRACE_MS - (span or 0), 0)

    @property
    def store_retention_ms(self) -> int | None:
        """How long a time window stays in Kafka Streams' window store: its RETENTION, else its
        size plus its (effective) grace period. None for session windows."""
        if self.type == "SESSION" or self.size_ms is None:
            return None
        if self.retention_ms is not None:
            return self.retention_ms
        return self.size_ms + self.effective_grace_ms


def _check_aggregations(wire: str, keys: tuple[str, ...], aggs: tuple[SelectExpression, ...]) -> None:
    seen = set(keys)
    for a in aggs:
        if not isinstance(a.expression, FunctionCall):
            raise PlanError(
                f"Step {wire}: aggregation `{a.alias}` must be a function call, got {a.expression}."
            )
        if a.alias in seen:
            raise PlanError(f"Step {wire} has the output column `{a.alias}` twice.")
        seen.add(a.alias)


def _check_keys(wire: str, keys: tuple[SelectExpression, ...]) -> None:
    if not keys:
        raise PlanError(f"Step {wire} needs at least one grouping expression.")
    names = [k.alias for k in keys]
    if len(set(names)) != len(names):
        raise PlanError(f"Step {wire} has duplicate grouping names: {', '.join(names)}.")


@register_step
@step_dataclass
class StreamGroupBy(Step):
    """Re-keys a stream by grouping expressions (repartition); null keys are dropped."""

    TYPE: ClassVar[str] = "streamGroupByV1"
    source: Step
    group_by_expressions: tuple[SelectExpression, ...]
    internal_formats: Formats

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_keys(self.TYPE, self.group_by_expressions)


@register_step
@step_dataclass
class StreamGroupByKey(Step):
    """Groups a stream by its existing key: no repartition."""

    TYPE: ClassVar[str] = "streamGroupByKeyV1"
    source: Step
    internal_formats: Formats


@register_step
@step_dataclass
class TableGroupBy(Step):
    """Re-keys a table: each change retracts the old row from its group and adds the new one."""

    TYPE: ClassVar[str] = "tableGroupByV1"
    source: Step
    group_by_expressions: tuple[SelectExpression, ...]
    internal_formats: Formats

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_keys(self.TYPE, self.group_by_expressions)


@register_step
@step_dataclass
class StreamAggregate(Step):
    """Aggregates a grouped stream: one update per input record (HAVING turns misses into deletes)."""

    TYPE: ClassVar[str] = "streamAggregateV1"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class StreamWindowedAggregate(Step):
    """Aggregates a grouped stream per time or session window; late records are dropped."""

    TYPE: ClassVar[str] = "streamWindowedAggregateV1"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    window: WindowSpec
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class StreamWindowedAggregateV2(Step):
    """``streamWindowedAggregateV1`` whose output records carry the headers of the input record
    that triggered them, as Kafka Streams forwards them (V1's carry none)."""

    TYPE: ClassVar[str] = "streamWindowedAggregateV2"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    window: WindowSpec
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class TableAggregate(Step):
    """Aggregates a grouped table: retractions undo, additions add, one update per change."""

    TYPE: ClassVar[str] = "tableAggregateV1"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class TableSuppress(Step):
    """EMIT FINAL: one result per window, emitted when stream time passes its end plus grace."""

    TYPE: ClassVar[str] = "tableSuppressV1"
    source: Step
    grace_ms: Annotated[int, NOT_NEGATIVE]

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        if self.grace_ms < 0:
            raise PlanError(f"Step {self.TYPE}: grace period cannot be negative, got {self.grace_ms}.")


@register_step
@step_dataclass
class TableSuppressV2(Step):
    """EMIT FINAL as Kafka Streams' emit-on-window-close runs it: expired windows are not emitted."""

    # ksqlDB plans EMIT FINAL of a time window with KIP-825's emit strategy: a window is
    # emitted when stream time passes its end plus grace, read from the window store, which
    # no longer holds windows that started more than the store's retention before stream
    # time. ``retention_ms`` is that retention (the window's RETENTION, else its size plus
    # grace); None: windows never expire (session windows, whose store keeps them).
    TYPE: ClassVar[str] = "tableSuppressV2"
    source: Step
    grace_ms: Annotated[int, NOT_NEGATIVE]
    retention_ms: Annotated[int, NOT_NEGATIVE] | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        if self.grace_ms < 0:
            raise PlanError(f"Step {self.TYPE}: grace period cannot be negative, got {self.grace_ms}.")
        if self.retention_ms is not None and self.retention_ms < 0:
            raise PlanError(f"Step {self.TYPE}: retention cannot be negative, got {self.retention_ms}.")


# --------------------------------------------------------------------- schemas

PAIRED = "__paired"
"""Column of a grouped table: a retraction immediately followed by an addition to the same
group (the aggregate applies both and emits once, as Kafka Streams does since KIP-904)."""


def grouped_schema(source: LogicalSchema, keys: Sequence[Column], *, table: bool) -> LogicalSchema:
    """A grouping's output: the grouping key columns, then the source's other columns as values
    (its value and header columns, then its key columns)."""
    taken = {k.name for k in keys}
    values = [Column(c.name, c.type) for c in (*source.value, *source.key) if c.name not in taken]
    extra = [Column(PAIRED, T.BOOLEAN)] if table else []
    return LogicalSchema(tuple(Column(k.name, k.type, Namespace.KEY) for k in keys) + tuple(values + extra))


def aggregate_schema(keys: Sequence[Column], aggregates: Sequence[Column]) -> LogicalSchema:
    """An aggregation's output: the grouping key columns, then one column per aggregate call."""
    return LogicalSchema(
        tuple(Column(k.name, k.type, Namespace.KEY) for k in keys)
        + tuple(Column(a.name, a.type) for a in aggregates)
    )
