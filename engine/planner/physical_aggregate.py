"""Physical rules of aggregate queries: group by, aggregate and suppress steps.

Query-context ids follow ksqlDB's: ``Aggregate/GroupBy``, ``Aggregate/Aggregate``,
``Suppress``.
"""

from __future__ import annotations

from engine.expressions.native_levels import level_2_forms
from engine.plan import steps as S
from engine.plan import steps_aggregate as A
from engine.plan import steps_native as N
from engine.plan.schema import PSEUDO_COLUMNS
from engine.plan.types import SqlType
from engine.planner.logical_aggregate import AggregateNode, GroupByNode, SuppressNode
from engine.planner.physical import native_chosen, rule, to_steps


@rule(GroupByNode)
def _group_by(node: GroupByNode) -> S.Step:
    source = to_steps(node.input)
    keys = tuple(S.SelectExpression(alias=a, expression=e) for a, e in node.keys)
    # Level 2 of the native compiler runs some grouping expression in Spark: the V3 versions.
    level_2 = native_chosen() and level_2_forms([e for _, e in node.keys], node.input.columns())
    if node.input.is_table:
        table_group_by = (N.TableGroupByV3 if level_2 else N.TableGroupByV2) if native_chosen() else A.TableGroupBy
        return table_group_by(
            ctx="Aggregate/GroupBy", source=source, group_by_expressions=keys,
            internal_formats=node.internal_formats,
        )
    if node.by_key:
        by_key = N.StreamGroupByKeyV2 if native_chosen() else A.StreamGroupByKey
        return by_key(ctx="Aggregate/GroupBy", source=source, internal_formats=node.internal_formats)
    group_by = (N.StreamGroupByV3 if level_2 else N.StreamGroupByV2) if native_chosen() else A.StreamGroupBy
    return group_by(
        ctx="Aggregate/GroupBy", source=source, group_by_expressions=keys,
        internal_formats=node.internal_formats,
    )


@rule(AggregateNode)
def _aggregate(node: AggregateNode) -> S.Step:
    common = dict(
        ctx="Aggregate/Aggregate",
        source=to_steps(node.input),
        key_column_names=tuple(c.name for c in node.schema.key),
        aggregation_functions=tuple(
            S.SelectExpression(alias=a, expression=c) for a, c in node.aggregates
        ),
        internal_formats=node.internal_formats,
        having=node.having,
    )
    if node.input.is_table:
        if native_chosen():
            # The versions whose output records carry the triggering record's headers.
            table_aggregate = N.TableAggregateV5 if _aggregate_level_2(node) else N.TableAggregateV4
            return table_aggregate(**common)  # type: ignore[arg-type]
        return A.TableAggregate(**common)  # type: ignore[arg-type]
    if node.window_spec is not None:
        return A.StreamWindowedAggregateV2(window=node.window_spec, **common)  # type: ignore[arg-type]
    if native_chosen():
        stream_aggregate = N.StreamAggregateV7 if _aggregate_level_2(node) else N.StreamAggregateV6
        return stream_aggregate(**common)  # type: ignore[arg-type]
    return A.StreamAggregate(**common)  # type: ignore[arg-type]


def _aggregate_level_2(node: AggregateNode) -> bool:
    """Whether level 2 of the native compiler runs an argument or the HAVING in Spark (over
    the grouped rows and over the results, as the builders compile them)."""
    arguments = [arg for _, call in node.aggregates for arg in call.args]
    if level_2_forms(arguments, node.input.columns()):
        return True
    if node.having is None:
        return False
    results: dict[str, SqlType] = dict(PSEUDO_COLUMNS)
    results.update(node.schema.types())
    return bool(level_2_forms([node.having], results))


@rule(SuppressNode)
def _suppress(node: SuppressNode) -> S.Step:
    return A.TableSuppressV2(
        ctx="Suppress", source=to_steps(node.input), grace_ms=node.grace_ms,
        retention_ms=node.retention_ms,
    )
