"""Builders of the step versions kept for ksqlDB's saved plans (``engine.plan.steps_ksqldb``).

Frozen like every builder: a saved plan replays with the same behaviour.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, cast

from engine.builders.aggregate import (
    TableAggregateHandler,
    TableGroupByHandler,
    _aggregate,
    _describe,
)
from engine.builders.context import BuildContext, Built, log_processing_error
from engine.builders.walker import builds
from engine.errors import EvaluationError, PlanError
from engine.expressions import compile_expression, infer_type
from engine.expressions.cast import java_string
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.schema import Column, Namespace
from engine.plan.steps_aggregate import PAIRED, grouped_schema
from engine.plan.steps_ksqldb import (
    JOINED_KEY_SEPARATOR,
    StreamGroupByJoinedKey,
    TableAggregateTwoUpdates,
    TableGroupByJoinedKey,
)
from engine.runtime import rows as R
from engine.runtime.keyed import KeyedInput, KeyedRecord

Row = dict[str, Any]


class _NullGroupValue(Exception):
    """A grouping value was null: the row leaves the grouping (logged by the caller)."""


def joined_key(
    exprs: Sequence[E.Expr], source: Built, query_id: str, where: str
) -> Callable[[Row], str | None]:
    """``fn(row)``: the texts of the grouping values joined with ``|+|``, None when one is null.

    A grouping value that cannot be evaluated is logged and counts as null, as ksqlDB did.
    """
    columns = source.expression_columns()
    compiled: list[tuple[Callable[[Row], Any], T.SqlType | None]] = []
    for expr in exprs:
        if infer_type(expr, columns) is None:
            raise PlanError(f"Cannot infer a type for the GROUP BY expression {E.format_sql(expr)}.")
        compiled.append((compile_expression(expr, columns), infer_type(expr, columns)))

    def key(row: Row) -> str | None:
        parts = []
        for index, (fn, sql_type) in enumerate(compiled):
            try:
                value = fn(row)
            except EvaluationError as exc:
                log_processing_error(query_id, where, str(exc))
                value = None
            if value is None:
                log_processing_error(
                    query_id, where,
                    f"Group-by column with index {index} resolved to null. "
                    "The source row will be excluded from the table.",
                )
                return None
            parts.append(java_string(value, sql_type))
        return JOINED_KEY_SEPARATOR.join(parts)

    return key


@builds(StreamGroupByJoinedKey)
def build_stream_group_by_joined_key(
    step: StreamGroupByJoinedKey, *, source: Built, ctx: BuildContext
) -> Built:
    key = joined_key(step.group_by_expressions, source, ctx.query_id, step.ctx)
    schema = grouped_schema(source.schema, [Column(step.key_name, T.STRING, Namespace.KEY)], table=False)
    value_names = [c.name for c in schema.value]
    name = step.key_name

    def rekey(row: Row) -> list[Row]:
        if row[R.DELETED]:
            return []  # a stream record with a null value does not aggregate
        value = key(row)
        if value is None:
            return []
        out: Row = {name: value}
        for n in value_names:
            out[n] = row.get(n)
        for m in R.META_NAMES:
            out[m] = row[m]
        return [out]

    df = R.map_rows(source.df, input_schema=source.schema, output_schema=schema, fn=rekey, name=step.ctx)
    internal = (("Aggregate-GroupBy-repartition", _describe(schema, step.internal_formats)),)
    return Built(df, schema, False, source.window, source.internal_schemas + internal)


@builds(TableGroupByJoinedKey)
def build_table_group_by_joined_key(
    step: TableGroupByJoinedKey, *, source: Built, ctx: BuildContext
) -> Built:
    key = joined_key(step.group_by_expressions, source, ctx.query_id, step.ctx)
    schema = grouped_schema(source.schema, [Column(step.key_name, T.STRING, Namespace.KEY)], table=True)
    handler = TableGroupByHandler(
        [(step.key_name, key)], [c.name for c in schema.value if c.name != PAIRED], ctx.query_id, step.ctx
    )
    table_keys = [c.name for c in source.schema.key]
    df = ctx.runtime.keyed(
        [KeyedInput(source.df, source.schema, 0, lambda row: tuple(row[k] for k in table_keys))],
        handler=handler, output_schema=schema, name=step.ctx,
    )
    internal = (("Aggregate-GroupBy-repartition", _describe(schema, step.internal_formats)),)
    return Built(df, schema, True, None, source.internal_schemas + internal)


class TableAggregateTwoUpdatesHandler(TableAggregateHandler):
    """A retraction paired with an addition to the same group emits its own result first.

    Kafka Streams before KIP-904 sent a table row's change to the aggregate as two records
    (the old row, then the new one); each updated the group and emitted its result.
    """

    def process(self, state: dict[str, Any], record: KeyedRecord) -> list[Row]:
        row = record.row
        if row[R.DELETED] and row.get(PAIRED):
            record = replace(record, row={**row, PAIRED: False})
        return super().process(state, record)


@builds(TableAggregateTwoUpdates)
def build_table_aggregate_two_updates(
    step: TableAggregateTwoUpdates, *, source: Built, ctx: BuildContext
) -> Built:
    # The aggregate's shape is tableAggregateV1's; only the handler differs.
    return _aggregate(cast(Any, step), source, ctx, TableAggregateTwoUpdatesHandler)
