"""Builders of the native grouping and aggregation steps (V2).

``streamGroupByKeyV2`` (grouping by the stream's own key) is a Spark filter.
``streamGroupByV2`` computes the grouping keys as Spark Columns in one ``select`` and drops
the records whose key is NULL, each with V1's processing-log entry (written by a Python
UDF that every record with a full key passes as NULL). ``streamAggregateV2`` computes a
running aggregate, one update per record, as window functions partitioned by the grouping
key and ordered by input position: COUNT, SUM and AVG of INT/BIGINT/DOUBLE, MIN/MAX of INT/BIGINT
over arguments with an exact Spark form, with HAVING turned into deletes as V1 does (a miss
deletes the group's row only when its previous result passed). Window functions cannot run
over a Structured Streaming DataFrame, so on the Kafka runtime the aggregate runs V1's
per-key handler over the same rows; Spark's state store keeps its state.

A step with anything else (a key or argument with no Spark form, a key of another type than
BOOLEAN, INT, BIGINT or STRING,
another aggregate function, a HAVING with no Spark form) builds exactly as its V1 version,
and ``kspark explain`` says why. Row semantics are V1's (``aggregate.py``), the reference
``tests/engine/builders/test_native_aggregate.py`` holds them to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from engine.builders.aggregate import (
    _describe,
    _key_exprs,
    build_stream_aggregate,
    build_stream_group_by,
)
from engine.builders.context import BuildContext, Built, log_processing_error
from engine.builders.native import ExpressionReport, report_io
from engine.builders.walker import builds
from engine.errors import KsqlError, PlanError
from engine.expressions import infer_type
from engine.expressions.native import NATIVE, NativeExpression, compile_native, wrap_integral
from engine.functions.udaf import aggregate_spec
from engine.plan import expr as E
from engine.plan.schema import PSEUDO_COLUMNS, Column, LogicalSchema
from engine.plan.steps_aggregate import (
    StreamAggregate,
    StreamGroupBy,
    aggregate_schema,
    grouped_schema,
)
from engine.plan.steps_native import StreamAggregateV2, StreamGroupByKeyV2, StreamGroupByV2
from engine.plan.types import BaseType, SqlType
from engine.runtime import rows as R
from engine.runtime.convert import spark_type

# Grouping key types whose Spark grouping equals V1's grouping by Python value (a DOUBLE key
# would group NaN and -0.0 differently).
_KEY_TYPES = frozenset({BaseType.BOOLEAN, BaseType.INTEGER, BaseType.BIGINT, BaseType.STRING})
_SUM_TYPES = frozenset({BaseType.INTEGER, BaseType.BIGINT, BaseType.DOUBLE})
# MIN/MAX of a DOUBLE differ on NaN (Java's compareTo against Spark's NaN ordering).
_EXTREME_TYPES = frozenset({BaseType.INTEGER, BaseType.BIGINT})


def _not_deleted() -> SparkColumn:
    return ~F.coalesce(F.col(R.DELETED), F.lit(False))


def _fallback_all(
    step_ctx: str, step_type: str, compiled: Sequence[tuple[str, NativeExpression]], reason: str
) -> None:
    """Report every expression of a step that builds as its V1 version."""
    for name, native in compiled:
        how = native.report() if not native.is_native else f"fallback: the step runs in Python ({reason})"
        report_io(ExpressionReport(step_ctx, step_type, name, native.sql, how))


def _report_all(step_ctx: str, step_type: str, compiled: Sequence[tuple[str, NativeExpression]]) -> None:
    for name, native in compiled:
        report_io(ExpressionReport(step_ctx, step_type, name, native.sql, native.report()))


# --------------------------------------------------------------------------- group by


def _null_key_logger(query_id: str, where: str) -> Any:
    """A Python UDF that writes V1's processing-log entry for each message it gets."""

    def log(message: str | None) -> bool | None:
        if message is not None:
            log_processing_error(query_id, where, message)
        return None

    return F.udf(log, ST.BooleanType(), useArrow=True).asNondeterministic()


@builds(StreamGroupByV2)
def build_stream_group_by_v2(step: StreamGroupByV2, *, source: Built, ctx: BuildContext) -> Built:
    columns = source.expression_columns()
    users = frozenset(c.name for c in source.schema.columns)
    compiled = [
        (k.alias, compile_native(k.expression, columns, user_columns=users)) for k in step.group_by_expressions
    ]
    key_cols, _ = _key_exprs(step.group_by_expressions, source)
    reason = next((f"{name}: {n.reason}" for name, n in compiled if not n.is_native), None)
    if reason is None:
        reason = next(
            (f"a {c.type} grouping key" for c in key_cols if c.type.base not in _KEY_TYPES), None
        )
    if reason is not None:
        _fallback_all(step.ctx, step.TYPE, compiled, reason)
        v1 = StreamGroupBy(
            ctx=step.ctx, source=step.source, group_by_expressions=step.group_by_expressions,
            internal_formats=step.internal_formats,
        )
        return build_stream_group_by(v1, source=source, ctx=ctx)
    _report_all(step.ctx, step.TYPE, compiled)

    schema = grouped_schema(source.schema, key_cols, table=False)
    keys = [(f"__key{i}", n.column) for i, (_, n) in enumerate(compiled) if n.column is not None]
    # V1 logs the first NULL grouping column of a record, then drops the record.
    message = F.coalesce(*[
        F.when(F.col(k).isNull(), F.lit(
            f"Group-by column {name} resolved to null. The source row will be excluded from the table."
        ))
        for (k, _), (name, _) in zip(keys, compiled, strict=True)
    ])
    logger = _null_key_logger(ctx.query_id, step.ctx)
    # A stream record with a null value does not aggregate (and is not logged).
    df = source.df.filter(_not_deleted()).select("*", *[c.alias(k) for k, c in keys])
    df = df.select("*", logger(message).alias("__logged"))  # a projection: filters stay above it
    df = df.filter(F.col("__logged").isNull() & _all([F.col(k).isNotNull() for k, _ in keys]))
    out = [
        F.col(k).cast(spark_type(c.type)).alias(R.spark_name(c.name))
        for (k, _), c in zip(keys, schema.key, strict=True)
    ]
    out += [F.col(R.spark_name(c.name)) for c in schema.value]
    out += [F.col(m) for m in R.META_NAMES]
    internal = (("Aggregate-GroupBy-repartition", _describe(schema, step.internal_formats)),)
    return Built(df.select(*out), schema, False, source.window, source.internal_schemas + internal)


@builds(StreamGroupByKeyV2)
def build_stream_group_by_key_v2(step: StreamGroupByKeyV2, *, source: Built, ctx: BuildContext) -> Built:
    key_names = [c.name for c in source.schema.key]
    if not key_names:
        raise PlanError(f"Step {step.ctx}: cannot group a stream without key columns by its key.")
    # As V1: records with a null value or a null key column are dropped without a log entry.
    keep = _not_deleted() & _all([F.col(R.spark_name(k)).isNotNull() for k in key_names])
    return source.with_df(source.df.filter(keep))


def _all(conditions: Sequence[SparkColumn]) -> SparkColumn:
    out = conditions[0]
    for c in conditions[1:]:
        out = out & c
    return out


# --------------------------------------------------------------------------- aggregate


def _aggregate_column(
    call: E.FunctionCall, columns: dict[str, SqlType], users: frozenset[str]
) -> tuple[NativeExpression, Any]:
    """The call's report and a function from a window spec to its running value (None if not native)."""
    sql = E.format_sql(call)
    name = call.name.upper()

    def fallback(reason: str) -> tuple[NativeExpression, Any]:
        return NativeExpression(sql, None, reason), None

    if name not in ("COUNT", "SUM", "AVG", "MIN", "MAX"):
        return fallback(f"aggregate function {name} has no Spark form yet")
    arg_types = [infer_type(a, columns) for a in call.args]
    try:
        spec = aggregate_spec(call.name, arg_types)
    except KsqlError as exc:
        return fallback(f"not resolved here ({exc})")
    if spec.column_args != len(call.args) or len(call.args) > 1:
        return fallback(f"{name} with these arguments has no Spark form yet")
    if not call.args:  # COUNT(*)
        return NativeExpression(sql, F.lit(1), NATIVE), lambda w: F.count(F.lit(1)).over(w)
    arg = compile_native(call.args[0], columns, user_columns=users)
    if arg.column is None:
        return fallback(arg.reason)
    t, param = arg_types[0], spec.column_types[0]
    if param is not None and t != param:
        return fallback(f"converting the argument {t} to {param}")
    value = arg.column
    if name == "COUNT":
        return NativeExpression(sql, value, NATIVE), lambda w: F.count(value).over(w)
    if t is None:
        return fallback("an untyped argument")
    if name in ("SUM", "AVG"):
        if t.base not in _SUM_TYPES:
            return fallback(f"{name} of {t} has no Spark form yet")
        if name == "SUM":
            return NativeExpression(sql, value, NATIVE), lambda w: _running_sum(value, t, w)

        def running_avg(w: Any, value: SparkColumn = value, t: SqlType = t) -> SparkColumn:
            # V1: float(wrapped sum) / count, 0.0 while no value has been counted
            count = F.count(value).over(w)
            total = _running_sum(value, t, w).cast("double")
            return F.when(count == 0, F.lit(0.0)).otherwise(
                total / F.when(count == 0, F.lit(1)).otherwise(count).cast("double")
            )

        return NativeExpression(sql, value, NATIVE), running_avg
    if t.base not in _EXTREME_TYPES:
        return fallback(f"{name} of {t} has no Spark form yet")
    extreme = F.max if name == "MAX" else F.min
    return NativeExpression(sql, value, NATIVE), lambda w: extreme(value).over(w)


def _running_sum(value: SparkColumn, t: SqlType, w: Any) -> SparkColumn:
    """SUM so far: DOUBLEs added in input order from 0.0; integers summed exactly (BIGINT for
    INT values, DECIMAL(38,0) for BIGINT ones), then wrapped like Java's int/long."""
    if t.base is BaseType.DOUBLE:
        return F.coalesce(F.sum(value).over(w), F.lit(0.0))
    exact = "bigint" if t.base is BaseType.INTEGER else "decimal(38,0)"
    return wrap_integral(F.coalesce(F.sum(value.cast(exact)).over(w), F.lit(0).cast(exact)), t)


@builds(StreamAggregateV2)
def build_stream_aggregate_v2(step: StreamAggregateV2, *, source: Built, ctx: BuildContext) -> Built:
    columns = source.expression_columns()
    users = frozenset(c.name for c in source.schema.columns)
    calls: list[tuple[str, NativeExpression]] = []
    runners = []
    for a in step.aggregation_functions:
        assert isinstance(a.expression, E.FunctionCall)  # the step checks it
        report, run = _aggregate_column(a.expression, columns, users)
        calls.append((a.alias, report))
        runners.append(run)
    key_cols = [source.schema.find(k) for k in step.key_column_names]
    reason = next((f"{name}: {n.reason}" for name, n in calls if not n.is_native), None)
    if reason is None and any(c is None or c.type.base not in _KEY_TYPES for c in key_cols):
        reason = "a grouping key of a type Spark groups differently"
    having: NativeExpression | None = None
    schema: LogicalSchema | None = None
    if reason is None:
        result_types = [_result_type(a.expression, columns) for a in step.aggregation_functions]
        schema = aggregate_schema(
            [c for c in key_cols if c is not None],
            [Column(a.alias, t) for a, t in zip(step.aggregation_functions, result_types, strict=True)],
        )
        if step.having is not None:
            having_columns = dict(PSEUDO_COLUMNS)
            having_columns.update(schema.types())
            having = compile_native(step.having, having_columns, user_columns=frozenset(schema.types()))
            calls.append(("HAVING", having))
            if having.column is None:
                reason = f"HAVING: {having.reason}"
    if reason is None and source.df.isStreaming:
        reason = "a streaming query keeps per-key state in Spark's state store"
    if reason is not None or schema is None:
        _fallback_all(step.ctx, step.TYPE, calls, reason or "")
        v1 = StreamAggregate(
            ctx=step.ctx, source=step.source, key_column_names=step.key_column_names,
            aggregation_functions=step.aggregation_functions, internal_formats=step.internal_formats,
            having=step.having,
        )
        return build_stream_aggregate(v1, source=source, ctx=ctx)
    _report_all(step.ctx, step.TYPE, calls)
    df = _running(source.df, step, schema, runners, having)
    internal = (("Aggregate-Aggregate-Materialize", _describe(schema, step.internal_formats)),)
    return Built(df, schema, True, None, source.internal_schemas + internal)


def _result_type(call: E.Expr, columns: dict[str, SqlType]) -> SqlType:
    assert isinstance(call, E.FunctionCall)
    spec = aggregate_spec(call.name, [infer_type(a, columns) for a in call.args])
    return spec.return_type


def _running(
    df: DataFrame, step: StreamAggregateV2, schema: LogicalSchema, runners: Sequence[Any],
    having: NativeExpression | None,
) -> DataFrame:
    """One output row per input record: the group's results so far, in V1's row shape."""
    keys = [F.col(R.spark_name(k)) for k in step.key_column_names]
    ordered = Window.partitionBy(*keys).orderBy(F.col(R.SEQ))
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    live = df.filter(_not_deleted() & _all([k.isNotNull() for k in keys]))
    results = [
        run(running).cast(spark_type(c.type)).alias(R.spark_name(c.name))
        for run, c in zip(runners, schema.value, strict=True)
    ]
    meta = {
        R.SEQ: F.col(R.SEQ),
        R.ROWTIME: F.max(F.col(R.ROWTIME)).over(running),
        R.ROWPARTITION: F.col(R.ROWPARTITION),
        R.ROWOFFSET: F.lit(None),
        R.HEADERS: F.array(),
        R.DELETED: F.lit(False),
        R.WINDOWSTART: F.lit(None),
        R.WINDOWEND: F.lit(None),
    }
    out = live.select(
        *[k.alias(R.spark_name(c.name)) for k, c in zip(keys, schema.key, strict=True)],
        *results,
        *[meta[f.name].cast(f.dataType).alias(f.name) for f in R.META_FIELDS],
    )
    if having is None or having.column is None:
        return out
    # HAVING: a miss emits a delete (NULL results) only when the group's last result passed.
    passed = F.coalesce(having.column, F.lit(False))
    gated = out.select("*", passed.alias("__passed"))
    gated = gated.select("*", F.lag(F.col("__passed"), 1, False).over(ordered).alias("__passed_before"))
    gated = gated.filter(F.col("__passed") | F.col("__passed_before"))
    ok = F.col("__passed")
    columns = [F.col(R.spark_name(c.name)) for c in schema.key]
    columns += [F.when(ok, F.col(R.spark_name(c.name))).alias(R.spark_name(c.name)) for c in schema.value]
    columns += [
        (~ok).alias(R.DELETED) if m == R.DELETED else F.col(m) for m in R.META_NAMES
    ]
    return gated.select(*columns)

