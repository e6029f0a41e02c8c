"""Builders of stateless steps: filters, projections, re-keying and table functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.builders.context import BuildContext, Built, log_processing_error
from engine.builders.joins import hashable
from engine.builders.walker import builds
from engine.errors import EvaluationError, PlanError
from engine.expressions import compile_expression, infer_type
from engine.functions import REGISTRY
from engine.plan import expr as E
from engine.plan.schema import Column, LogicalSchema, Namespace
from engine.plan.steps import (
    SelectExpression,
    StreamFilter,
    StreamFlatMap,
    StreamSelect,
    StreamSelectKey,
    TableFilter,
    TableFilterV3,
    TableSelect,
)
from engine.plan.types import SqlType
from engine.runtime import rows as R
from engine.runtime.keyed import KeyedInput, KeyedRecord

Evaluator = Callable[[dict[str, Any]], Any]


def _typed(expr: E.Expr, columns: dict[str, SqlType], where: str) -> SqlType:
    t = infer_type(expr, columns)
    if t is None:
        raise PlanError(f"Step {where}: cannot infer a type for the expression {E.format_sql(expr)}.")
    return t


def _compile_all(
    selects: Sequence[SelectExpression], columns: dict[str, SqlType]
) -> list[tuple[str, Evaluator, str]]:
    return [
        (s.alias, compile_expression(s.expression, columns), E.format_sql(s.expression))
        for s in selects
    ]


def _evaluate(fn: Evaluator, row: dict[str, Any], query_id: str, ctx: str) -> Any:
    try:
        return fn(row)
    except EvaluationError as exc:
        log_processing_error(query_id, ctx, str(exc))
        return None


def _predicate(step: StreamFilter | TableFilter | TableFilterV3, source: Built, ctx: BuildContext) -> Callable[[dict[str, Any]], bool]:
    fn = compile_expression(step.predicate, source.expression_columns())
    query_id, where = ctx.query_id, step.ctx

    def holds(row: dict[str, Any]) -> bool:
        return _evaluate(fn, row, query_id, where) is True

    return holds


@builds(StreamFilter)
def build_stream_filter(step: StreamFilter, *, source: Built, ctx: BuildContext) -> Built:
    holds = _predicate(step, source, ctx)

    def keep(row: dict[str, Any]) -> list[dict[str, Any]]:
        return [row] if not row[R.DELETED] and holds(row) else []

    df = R.map_rows(source.df, input_schema=source.schema, output_schema=source.schema, fn=keep, name=step.ctx)
    return source.with_df(df)


def _as_delete(row: dict[str, Any], value_names: Sequence[str]) -> dict[str, Any]:
    """``row`` as the delete of its key: flagged deleted, its value columns NULL."""
    return {**row, R.DELETED: True, **dict.fromkeys(value_names)}


@builds(TableFilter)
def build_table_filter(step: TableFilter, *, source: Built, ctx: BuildContext) -> Built:
    holds = _predicate(step, source, ctx)
    value_names = [c.name for c in source.schema.value]

    def keep_or_delete(row: dict[str, Any]) -> list[dict[str, Any]]:
        if row[R.DELETED] or holds(row):
            return [row]
        return [_as_delete(row, value_names)]

    df = R.map_rows(
        source.df, input_schema=source.schema, output_schema=source.schema, fn=keep_or_delete, name=step.ctx
    )
    return source.with_df(df)


@dataclass(frozen=True)
class MatchedBeforeHandler:
    """Per table key: a row that misses the predicate deletes the key's row only when the
    key's last row matched (``tableFilterV3``)."""

    holds: Callable[[dict[str, Any]], bool]
    value_names: tuple[str, ...]

    def process(self, state: dict[str, Any], record: KeyedRecord) -> list[dict[str, Any]]:
        row = record.row
        matched_before = state.get("matched", False)
        matches = not row[R.DELETED] and self.holds(row)
        state["matched"] = matches
        if matches:
            return [row]
        if not matched_before:
            return []
        return [_as_delete(row, self.value_names)]


@builds(TableFilterV3)
def build_table_filter_v3(step: TableFilterV3, *, source: Built, ctx: BuildContext) -> Built:
    holds = _predicate(step, source, ctx)
    names = [c.name for c in source.schema.key]
    if source.window is not None:
        names += [R.WINDOWSTART, R.WINDOWEND]

    def table_key(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(hashable(row[n]) for n in names)

    handler = MatchedBeforeHandler(holds, tuple(c.name for c in source.schema.value))
    df = ctx.runtime.keyed(
        [KeyedInput(source.df, source.schema, 0, table_key)],
        handler=handler, output_schema=source.schema, name=step.ctx,
    )
    return source.with_df(df)


def projection_schema(
    source: Built, key_names: Sequence[str], selects: Sequence[SelectExpression], where: str
) -> LogicalSchema:
    """Output schema of a projection: renamed key columns, then the typed select columns."""
    source_keys = source.schema.key
    if len(key_names) != len(source_keys):
        raise PlanError(
            f"Step {where} names {len(key_names)} key column(s) but its input has {len(source_keys)}."
        )
    columns = source.expression_columns()
    out = [Column(n, c.type, Namespace.KEY) for n, c in zip(key_names, source_keys, strict=True)]
    out += [Column(s.alias, _typed(s.expression, columns, where)) for s in selects]
    return LogicalSchema(tuple(out))


def _build_select(step: StreamSelect | TableSelect, source: Built, ctx: BuildContext) -> Built:
    schema = projection_schema(source, step.key_column_names, step.select_expressions, step.ctx)
    compiled = _compile_all(step.select_expressions, source.expression_columns())
    key_pairs = list(zip(step.key_column_names, [c.name for c in source.schema.key], strict=True))
    query_id, where = ctx.query_id, step.ctx

    def project(row: dict[str, Any]) -> list[dict[str, Any]]:
        out = {new: row[old] for new, old in key_pairs}
        for m in R.META_NAMES:
            out[m] = row[m]
        if row[R.DELETED]:  # a delete (table) or a null value (stream) stays one
            for alias, _, _ in compiled:
                out[alias] = None
            return [out]
        for alias, fn, _ in compiled:
            out[alias] = _evaluate(fn, row, query_id, where)
        return [out]

    df = R.map_rows(source.df, input_schema=source.schema, output_schema=schema, fn=project, name=step.ctx)
    return source.with_df(df, schema)


@builds(StreamSelect)
def build_stream_select(step: StreamSelect, *, source: Built, ctx: BuildContext) -> Built:
    return _build_select(step, source, ctx)


@builds(TableSelect)
def build_table_select(step: TableSelect, *, source: Built, ctx: BuildContext) -> Built:
    return _build_select(step, source, ctx)


def select_key_schema(source: Built, keys: Sequence[SelectExpression], where: str) -> LogicalSchema:
    """PARTITION BY output: the new key columns, then the old value and key columns as values."""
    columns = source.expression_columns()
    key_cols = [Column(k.alias, _typed(k.expression, columns, where), Namespace.KEY) for k in keys]
    taken = {c.name for c in key_cols}
    values = [
        Column(c.name, c.type)
        for c in (*source.schema.value, *source.schema.key)
        if c.name not in taken and c.namespace is not Namespace.HEADERS
    ]
    return LogicalSchema(tuple(key_cols + values))


@builds(StreamSelectKey)
def build_stream_select_key(step: StreamSelectKey, *, source: Built, ctx: BuildContext) -> Built:
    schema = select_key_schema(source, step.key_expressions, step.ctx)
    compiled = _compile_all(step.key_expressions, source.expression_columns())
    value_names = [c.name for c in schema.value]
    query_id, where = ctx.query_id, step.ctx

    def rekey(row: dict[str, Any]) -> list[dict[str, Any]]:
        out = {alias: _evaluate(fn, row, query_id, where) for alias, fn, _ in compiled}
        for n in value_names:
            out[n] = row.get(n)
        for m in R.META_NAMES:
            out[m] = row[m]
        return [out]

    df = R.map_rows(source.df, input_schema=source.schema, output_schema=schema, fn=rekey, name=step.ctx)
    return source.with_df(df, schema)


@builds(StreamFlatMap)
def build_stream_flat_map(step: StreamFlatMap, *, source: Built, ctx: BuildContext) -> Built:
    columns = source.expression_columns()
    resolved = []
    for tf in step.table_functions:
        call = tf.expression
        if not isinstance(call, E.FunctionCall):
            raise PlanError(f"Step {step.ctx}: table function column {tf.alias} is not a function call.")
        arg_types = [infer_type(a, columns) for a in call.args]
        fn = REGISTRY.resolve(call.name, arg_types, call.semantics)
        args = [compile_expression(a, columns) for a in call.args]
        resolved.append((tf.alias, fn, args))
    schema = LogicalSchema(
        source.schema.columns + tuple(Column(alias, fn.return_type) for alias, fn, _ in resolved)
    )
    query_id, where = ctx.query_id, step.ctx

    def explode(row: dict[str, Any]) -> list[dict[str, Any]]:
        if row[R.DELETED]:
            return []
        results = []
        for _, fn, args in resolved:
            try:
                values = fn.invoke([a(row) for a in args])
            except Exception as exc:  # noqa: BLE001 - a failing function skips its output
                log_processing_error(query_id, where, f"Table function {fn.name} failed: {exc}")
                values = None
            results.append(values or [])
        count = max((len(v) for v in results), default=0)
        out = []
        for i in range(count):
            produced = dict(row)
            produced[R.SEQ] = list(row[R.SEQ]) + [i]
            for (alias, _, _), values in zip(resolved, results, strict=True):
                produced[alias] = values[i] if i < len(values) else None
            out.append(produced)
        return out

    df = R.map_rows(source.df, input_schema=source.schema, output_schema=schema, fn=explode, name=step.ctx)
    return source.with_df(df, schema)
