"""Logical nodes of aggregate queries and how an analysed aggregation becomes them.

The chain is: FROM node -> (WHERE filter) -> GroupByNode -> AggregateNode -> (HAVING
filter) -> projection -> (SuppressNode for EMIT FINAL) -> sink.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engine.analysis.aggregate import AggregateAnalysis
from engine.errors import AnalysisError, TypeCheckError
from engine.expressions import infer_type
from engine.functions.registry import REGISTRY
from engine.functions.udaf import aggregate_spec
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.schema import Column, Namespace
from engine.plan.steps import Formats, WindowInfo
from engine.plan.steps_aggregate import WindowSpec, aggregate_schema, grouped_schema
from engine.planner import logical as L
from engine.serde.formats import FormatInfo, format_reason

_INTERMEDIATE_FORMAT = (
    "One of the functions used in the statement has an intermediate type that the value "
    "format can not handle. Please remove the function or change the format.\n"
    "Consider up-voting https://github.com/confluentinc/ksql/issues/3950, which will resolve this limitation"
)


@dataclass(frozen=True, kw_only=True)
class GroupByNode(L.LogicalNode):
    """Groups rows by key expressions; ``by_key`` when they are exactly the input's key."""

    input: L.LogicalNode
    keys: tuple[tuple[str, E.Expr], ...]
    by_key: bool
    internal_formats: Formats


@dataclass(frozen=True, kw_only=True)
class AggregateNode(L.LogicalNode):
    """Aggregates grouped rows into one column per aggregate call, optionally windowed."""

    input: GroupByNode
    aggregates: tuple[tuple[str, E.FunctionCall], ...]
    window_spec: WindowSpec | None
    internal_formats: Formats
    having: E.Expr | None = None


@dataclass(frozen=True, kw_only=True)
class SuppressNode(L.LogicalNode):
    """EMIT FINAL: holds each window's result back until the window closes."""

    input: L.LogicalNode
    grace_ms: int
    # the window store's retention (None: session windows, never expired before emission)
    retention_ms: int | None = None


def window_info(spec: WindowSpec | None) -> WindowInfo | None:
    """How the aggregate's output keys are windowed (what a later source reads)."""
    if spec is None:
        return None
    return WindowInfo(type=spec.type, size_ms=spec.size_ms if spec.type != "SESSION" else None)


def plan_aggregation(
    node: L.LogicalNode, aggregation: AggregateAnalysis, formats: Formats
) -> L.LogicalNode:
    """Group and aggregate (HAVING included); the caller projects (and suppresses) the result.

    HAVING runs inside the aggregation because a group that fails it becomes a delete only
    when its previous result passed, which needs the aggregate's state.
    """
    columns = node.columns()
    key_columns = []
    for name, expr in aggregation.group_by:
        t = infer_type(expr, columns)
        if t is None:
            raise TypeCheckError(
                f"Can't infer a type of null for the GROUP BY expression {E.format_sql(expr)}. "
                "Please explicitly cast it to a required type."
            )
        key_columns.append(Column(name, t, Namespace.KEY))
    source_keys = [c.name for c in node.schema.key]
    by_key = not node.is_table and [
        e.name if isinstance(e, E.ColumnRef) else None for _, e in aggregation.group_by
    ] == source_keys
    grouped = GroupByNode(
        schema=node.schema if by_key else grouped_schema(node.schema, key_columns, table=node.is_table),
        is_table=node.is_table,
        window=node.window,
        input=node,
        keys=tuple(aggregation.group_by),
        by_key=by_key,
        internal_formats=formats,
    )
    grouped_columns = grouped.columns()
    agg_columns = []
    aggregates = []
    for name, call in aggregation.aggregates:
        arg_types = [infer_type(a, grouped_columns) for a in call.args]
        spec = aggregate_spec(call.name, arg_types, call.semantics)
        agg_columns.append(Column(name, spec.return_type))
        _check_intermediate(name, spec.intermediate_type, formats)
        # The version of the overload it resolved to, not of the name: a new version of
        # SUM over DECIMAL leaves the plans of SUM over INTEGER as they were.
        settled = REGISTRY.settled_semantics(call.name, arg_types, call.semantics)
        aggregates.append((name, dataclasses.replace(call, semantics=settled)))
    window = aggregation.window
    out: L.LogicalNode = AggregateNode(
        schema=aggregate_schema(key_columns, agg_columns),
        is_table=True,
        window=window_info(window),
        input=grouped,
        aggregates=tuple(aggregates),
        window_spec=window,
        internal_formats=formats,
        having=aggregation.having,
    )
    return out


def _check_intermediate(name: str, intermediate: T.SqlType, formats: Formats) -> None:
    """ksqlDB stores each accumulator in the source's value format: refuse one it cannot hold
    (AVG's STRUCT or TOPK's ARRAY in DELIMITED or KAFKA)."""
    fmt = FormatInfo(formats.value_format, dict(formats.value_properties))
    reason = format_reason(fmt, [Column(name, intermediate)])
    if reason is not None:
        raise AnalysisError(f"{_INTERMEDIATE_FORMAT}\n{reason}")


def finish_aggregation(projected: L.LogicalNode, aggregation: AggregateAnalysis) -> L.LogicalNode:
    """Add EMIT FINAL's suppression after the projection."""
    if not aggregation.emit_final or aggregation.window is None:
        return projected
    return SuppressNode(
        schema=projected.schema, is_table=True, window=projected.window, input=projected,
        # ksqlDB's suppression closes windows at their end when no GRACE PERIOD is given
        grace_ms=aggregation.window.grace_ms or 0,
        retention_ms=aggregation.window.store_retention_ms,
    )


