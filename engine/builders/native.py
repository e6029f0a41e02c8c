"""Builders of the native stateless steps (V2, V3): expressions run as Spark Columns.

The V2 filters and selects compile with the native compiler's level 1, the V3 ones
(``streamFilterV3``, ``tableFilterV4``, ``streamSelectV3``, ``tableSelectV3``) with level 2;
everything else is the same builder.

Each expression is compiled by ``engine.expressions.native``. Those with an exact Spark
form become Columns in one ``select`` / ``filter``; the others (each with the reason the
compiler gave) are evaluated together by the Python evaluator in one ``mapInArrow`` pass
before it, into temporary columns the ``select`` then reads. A step whose expressions are
all native has no Python in its physical plan. Row semantics are those of the V1 builders
in ``stateless.py``: a deleted row (table delete, stream null value) projects to NULL
values, a stream filter drops it, a table filter turns a non-matching row into a delete.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from engine.builders.context import BuildContext, Built, log_processing_error
from engine.builders.stateless import projection_schema
from engine.builders.walker import builds
from engine.errors import EvaluationError
from engine.expressions import compile_expression, infer_type
from engine.expressions.native import NativeExpression, compile_native
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.schema import Column, LogicalSchema
from engine.plan.steps import SelectExpression
from engine.plan.steps_native import (
    StreamFilterV2,
    StreamFilterV3,
    StreamSelectV2,
    StreamSelectV3,
    TableFilterV2,
    TableFilterV4,
    TableSelectV2,
    TableSelectV3,
)
from engine.plan.types import SqlType
from engine.runtime import rows as R
from engine.runtime.convert import spark_type


@dataclass(frozen=True)
class ExpressionReport:
    """How one expression of a step runs: its name in the step, its SQL, native or why not."""

    step_ctx: str
    step_type: str
    name: str
    sql: str
    how: str


_REPORTS: ContextVar[list[ExpressionReport] | None] = ContextVar("native_reports", default=None)


@contextmanager
def collecting_reports() -> Iterator[list[ExpressionReport]]:
    """Collect an ``ExpressionReport`` per expression the V2 builders compile in the block."""
    reports: list[ExpressionReport] = []
    token = _REPORTS.set(reports)
    try:
        yield reports
    finally:
        _REPORTS.reset(token)


def _report(step_ctx: str, step_type: str, name: str, compiled: NativeExpression) -> None:
    report_io(ExpressionReport(step_ctx, step_type, name, compiled.sql, compiled.report()))


def report_io(report: ExpressionReport) -> None:
    """Record how one expression or column of a step runs (when reports are being collected)."""
    reports = _REPORTS.get()
    if reports is not None:
        reports.append(report)


def _not_deleted() -> SparkColumn:
    return ~F.coalesce(F.col(R.DELETED), F.lit(False))


def _fallback_name(i: int) -> str:
    return f"__fallback_{i}"


def _with_python_columns(
    source: Built, fallbacks: Sequence[tuple[str, E.Expr, SqlType]], ctx: BuildContext, where: str
) -> DataFrame:
    """``source.df`` plus one column per fallback expression, evaluated in Python.

    Deleted rows get NULL (their expressions are never evaluated, as in V1); a record
    whose evaluation fails gets NULL and a processing-log entry.
    """
    columns = source.expression_columns()
    compiled = [(name, compile_expression(expr, columns)) for name, expr, _ in fallbacks]
    wide = LogicalSchema(source.schema.columns + tuple(Column(n, t) for n, _, t in fallbacks))
    query_id = ctx.query_id

    def evaluate(row: dict[str, Any]) -> list[dict[str, Any]]:
        out = dict(row)
        for name, fn in compiled:
            value = None
            if not row[R.DELETED]:
                try:
                    value = fn(row)
                except EvaluationError as exc:
                    log_processing_error(query_id, where, str(exc))
            out[name] = value
        return [out]

    return R.map_rows(source.df, input_schema=source.schema, output_schema=wide, fn=evaluate, name=where)


def _value_columns(
    step_ctx: str,
    step_type: str,
    selects: Sequence[SelectExpression],
    source: Built,
    ctx: BuildContext,
    level: int,
) -> tuple[DataFrame, list[SparkColumn]]:
    """The input DataFrame (with any Python-evaluated columns) and one Column per select,
    compiled with the native compiler's ``level``."""
    columns = source.expression_columns()
    users = frozenset(c.name for c in source.schema.columns)
    compiled: list[tuple[SelectExpression, NativeExpression]] = []
    for s in selects:
        native = compile_native(s.expression, columns, user_columns=users, level=level)
        _report(step_ctx, step_type, s.alias, native)
        compiled.append((s, native))
    fallbacks = [
        (_fallback_name(i), s.expression, _type(s.expression, columns))
        for i, (s, native) in enumerate(compiled)
        if native.column is None
    ]
    df = _with_python_columns(source, fallbacks, ctx, step_ctx) if fallbacks else source.df
    values = []
    for i, (_, native) in enumerate(compiled):
        value = native.column if native.column is not None else F.col(R.spark_name(_fallback_name(i)))
        values.append(value)
    return df, values


def _type(expr: E.Expr, columns: dict[str, SqlType]) -> SqlType:
    return infer_type(expr, columns) or T.STRING


_Select = StreamSelectV2 | TableSelectV2 | StreamSelectV3 | TableSelectV3
_Filter = StreamFilterV2 | TableFilterV2 | StreamFilterV3 | TableFilterV4


def _build_select(step: _Select, source: Built, ctx: BuildContext, level: int) -> Built:
    schema = projection_schema(source, step.key_column_names, step.select_expressions, step.ctx)
    df, values = _value_columns(step.ctx, step.TYPE, step.select_expressions, source, ctx, level)
    keys = [
        F.col(R.spark_name(old.name)).alias(R.spark_name(new))
        for new, old in zip(step.key_column_names, source.schema.key, strict=True)
    ]
    live = _not_deleted()
    projected = [
        F.when(live, value).cast(spark_type(c.type)).alias(R.spark_name(c.name))
        for value, c in zip(values, schema.value, strict=True)
    ]
    meta = [F.col(m) for m in R.META_NAMES]
    return source.with_df(df.select(*keys, *projected, *meta), schema)


@builds(StreamSelectV2)
def build_stream_select_v2(step: StreamSelectV2, *, source: Built, ctx: BuildContext) -> Built:
    return _build_select(step, source, ctx, level=1)


@builds(TableSelectV2)
def build_table_select_v2(step: TableSelectV2, *, source: Built, ctx: BuildContext) -> Built:
    return _build_select(step, source, ctx, level=1)


@builds(StreamSelectV3)
def build_stream_select_v3(step: StreamSelectV3, *, source: Built, ctx: BuildContext) -> Built:
    return _build_select(step, source, ctx, level=2)


@builds(TableSelectV3)
def build_table_select_v3(step: TableSelectV3, *, source: Built, ctx: BuildContext) -> Built:
    return _build_select(step, source, ctx, level=2)


def _predicate(step: _Filter, source: Built, ctx: BuildContext, level: int) -> tuple[DataFrame, SparkColumn]:
    where = SelectExpression(alias="WHERE", expression=step.predicate)
    df, (value,) = _value_columns(step.ctx, step.TYPE, [where], source, ctx, level)
    return df, F.coalesce(value, F.lit(False))


def _source_columns(source: Built) -> list[SparkColumn]:
    return [F.col(R.spark_name(c.name)) for c in source.schema.columns] + [F.col(m) for m in R.META_NAMES]


def _filter_stream(step: StreamFilterV2 | StreamFilterV3, source: Built, ctx: BuildContext, level: int) -> Built:
    df, holds = _predicate(step, source, ctx, level)
    return source.with_df(df.filter(_not_deleted() & holds).select(*_source_columns(source)))


@builds(StreamFilterV2)
def build_stream_filter_v2(step: StreamFilterV2, *, source: Built, ctx: BuildContext) -> Built:
    return _filter_stream(step, source, ctx, level=1)


@builds(StreamFilterV3)
def build_stream_filter_v3(step: StreamFilterV3, *, source: Built, ctx: BuildContext) -> Built:
    return _filter_stream(step, source, ctx, level=2)


@builds(TableFilterV2)
def build_table_filter_v2(step: TableFilterV2, *, source: Built, ctx: BuildContext) -> Built:
    return _filter_table(step, source, ctx, level=1)


@builds(TableFilterV4)
def build_table_filter_v4(step: TableFilterV4, *, source: Built, ctx: BuildContext) -> Built:
    return _filter_table(step, source, ctx, level=2)


def _filter_table(step: TableFilterV2 | TableFilterV4, source: Built, ctx: BuildContext, level: int) -> Built:
    df, holds = _predicate(step, source, ctx, level)
    keep = ~_not_deleted() | holds
    value_names = {c.name for c in source.schema.value}
    out = []
    for c in source.schema.columns:
        column = F.col(R.spark_name(c.name))
        if c.name in value_names:
            column = F.when(keep, column)
        out.append(column.alias(R.spark_name(c.name)))
    for m in R.META_NAMES:
        column = F.col(m)
        if m == R.DELETED:
            column = F.when(keep, column).otherwise(F.lit(True))
        out.append(column.alias(m))
    return source.with_df(df.select(*out))
