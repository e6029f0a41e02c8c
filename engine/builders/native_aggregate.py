"""Builders of the native grouping and aggregation steps (V2).

``streamGroupByKeyV2`` (grouping by the stream's own key) is a Spark filter.
``streamGroupByV2`` computes the grouping keys as Spark Columns in one ``select`` and drops
the records whose key is NULL, each with V1's processing-log entry (written by a Python
UDF that every record with a full key passes as NULL). ``streamAggregateV2`` computes a
running aggregate, one update per record, as window functions partitioned by the grouping
key and ordered by input position: COUNT, SUM and AVG of INT/BIGINT/DOUBLE, MIN/MAX of
INT/BIGINT over arguments with an exact Spark form, with HAVING turned into deletes as V1
does (a miss deletes the group's row only when its previous result passed).
``tableGroupByV2`` pairs each table change with the row it replaces (``lag`` over the table
key) and emits V1's retraction and addition rows; ``tableAggregateV2`` sums them with signs.
Window functions cannot run over a Structured Streaming DataFrame, so on the Kafka runtime
the stateful steps run V1's per-key handlers over the same rows in Spark's state store,
except ``streamAggregateV3`` without HAVING (grouped by key) and ``streamAggregateV4`` (by
task, in input order across groups, with HAVING too), whose running results per key are
computed over typed columns (``engine.runtime.running``).

A step with anything else (a key or argument with no Spark form, a key of another type than
BOOLEAN, INT, BIGINT or STRING, another aggregate function, a HAVING with no Spark form)
builds exactly as its V1 version, and ``kspark explain`` says why. Row semantics are V1's
(``aggregate.py``); ``tests/engine/builders/test_native_aggregate.py`` holds them to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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
    build_table_aggregate,
    build_table_group_by,
    stream_aggregate_forwarding_headers,
    table_aggregate_forwarding_headers,
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
    PAIRED,
    StreamAggregate,
    StreamGroupBy,
    TableAggregate,
    TableGroupBy,
    aggregate_schema,
    grouped_schema,
)
from engine.plan.steps_native import (
    StreamAggregateV2,
    StreamAggregateV3,
    StreamAggregateV4,
    StreamAggregateV5,
    StreamAggregateV6,
    StreamAggregateV7,
    StreamGroupByKeyV2,
    StreamGroupByV2,
    StreamGroupByV3,
    TableAggregateV2,
    TableAggregateV3,
    TableAggregateV4,
    TableAggregateV5,
    TableGroupByV2,
    TableGroupByV3,
)
from engine.plan.types import BaseType, SqlType
from engine.runtime import rows as R
from engine.runtime.adapter import RunningAggregates
from engine.runtime.convert import spark_type
from engine.runtime.running import (
    HAS_PREVIOUS,
    RunningCall,
    arg_column,
    has_column,
    previous_column,
    result_column,
)

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


GroupByStep = StreamGroupByV2 | StreamGroupByV3
TableGroupByStep = TableGroupByV2 | TableGroupByV3


def _grouping_keys(
    step: GroupByStep | TableGroupByStep, source: Built, level: int
) -> tuple[list[tuple[str, NativeExpression]], list[Column], str | None]:
    """Each grouping expression compiled at the compiler's ``level``, the key columns, and why
    the step cannot be native."""
    columns = source.expression_columns()
    users = frozenset(c.name for c in source.schema.columns)
    compiled = [
        (k.alias, compile_native(k.expression, columns, user_columns=users, level=level))
        for k in step.group_by_expressions
    ]
    key_cols, _ = _key_exprs(step.group_by_expressions, source)
    reason = next((f"{name}: {n.reason}" for name, n in compiled if not n.is_native), None)
    if reason is None:
        reason = next(
            (f"a {c.type} grouping key" for c in key_cols if c.type.base not in _KEY_TYPES), None
        )
    return compiled, key_cols, reason


@builds(StreamGroupByV2)
def build_stream_group_by_v2(step: StreamGroupByV2, *, source: Built, ctx: BuildContext) -> Built:
    return _stream_group_by(step, source, ctx, level=1)


@builds(StreamGroupByV3)
def build_stream_group_by_v3(step: StreamGroupByV3, *, source: Built, ctx: BuildContext) -> Built:
    """V2's stream group-by, its keys compiled with the native compiler's level 2."""
    return _stream_group_by(step, source, ctx, level=2)


def _stream_group_by(step: GroupByStep, source: Built, ctx: BuildContext, *, level: int) -> Built:
    compiled, key_cols, reason = _grouping_keys(step, source, level)
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
    for k in key_names:
        report_io(ExpressionReport(step.ctx, step.TYPE, k, f"{k} IS NOT NULL", NATIVE))
    return source.with_df(source.df.filter(keep))


@builds(TableGroupByV2)
def build_table_group_by_v2(step: TableGroupByV2, *, source: Built, ctx: BuildContext) -> Built:
    return _table_group_by(step, source, ctx, level=1)


@builds(TableGroupByV3)
def build_table_group_by_v3(step: TableGroupByV3, *, source: Built, ctx: BuildContext) -> Built:
    """V2's table group-by, its keys compiled with the native compiler's level 2."""
    return _table_group_by(step, source, ctx, level=2)


def _table_group_by(step: TableGroupByStep, source: Built, ctx: BuildContext, *, level: int) -> Built:
    compiled, key_cols, reason = _grouping_keys(step, source, level)
    if reason is None:
        reason = next(
            (f"a {c.type} table key" for c in source.schema.key if c.type.base not in _KEY_TYPES), None
        )
    if reason is None and source.df.isStreaming:
        reason = "a streaming query keeps each key's last row in Spark's state store"
    if reason is not None:
        _fallback_all(step.ctx, step.TYPE, compiled, reason)
        v1 = TableGroupBy(
            ctx=step.ctx, source=step.source, group_by_expressions=step.group_by_expressions,
            internal_formats=step.internal_formats,
        )
        return build_table_group_by(v1, source=source, ctx=ctx)
    _report_all(step.ctx, step.TYPE, compiled)

    schema = grouped_schema(source.schema, key_cols, table=True)
    values = [c.name for c in schema.value if c.name != PAIRED]
    # Each change of a table row, next to the row it replaces (the previous change of its key,
    # unless that was a delete): V1's handler remembers that row per table key.
    by_row = Window.partitionBy(*[F.col(R.spark_name(c.name)) for c in source.schema.key]).orderBy(F.col(R.SEQ))
    deleted = F.coalesce(F.col(R.DELETED), F.lit(False))
    new_keys = [(f"__key{i}", n.column) for i, (_, n) in enumerate(compiled) if n.column is not None]
    keyed = source.df.select("*", *[c.alias(k) for k, c in new_keys])
    old_exists = F.coalesce(F.lag(F.col(R.SEQ)).over(by_row).isNotNull() & ~F.lag(deleted).over(by_row), F.lit(False))
    paired_rows = keyed.select(
        "*",
        old_exists.alias("__old"),
        *[F.lag(F.col(k)).over(by_row).alias(f"__old{k}") for k, _ in new_keys],
        *[F.lag(F.col(R.spark_name(n))).over(by_row).alias(f"__oldv{j}") for j, n in enumerate(values)],
    )
    new_ok = ~deleted & _all([F.col(k).isNotNull() for k, _ in new_keys])
    old_ok = F.col("__old") & _all([F.col(f"__old{k}").isNotNull() for k, _ in new_keys])
    paired = new_ok & old_ok & _all([F.col(k) == F.col(f"__old{k}") for k, _ in new_keys])

    def change(keys: list[str], vals: list[str], sub: int, retract: bool, pair: SparkColumn) -> SparkColumn:
        return F.struct(
            *[F.col(k).alias(f"k{i}") for i, k in enumerate(keys)],
            *[F.col(v).alias(f"v{j}") for j, v in enumerate(vals)],
            F.lit(sub).cast("bigint").alias("sub"), F.lit(retract).alias("retract"), pair.alias("paired"),
        )

    retraction = change(
        [f"__old{k}" for k, _ in new_keys], [f"__oldv{j}" for j in range(len(values))], 0, True, paired
    )
    addition = change([k for k, _ in new_keys], [R.spark_name(n) for n in values], 1, False, F.lit(False))
    changes = paired_rows.select(
        "*", F.explode(F.array(F.when(old_ok, retraction), F.when(new_ok, addition))).alias("__g")
    ).filter(F.col("__g").isNotNull())
    out = [
        F.col(f"__g.k{i}").cast(spark_type(c.type)).alias(R.spark_name(c.name)) for i, c in enumerate(schema.key)
    ]
    out += [F.col(f"__g.v{j}").alias(R.spark_name(n)) for j, n in enumerate(values)]
    out.append(F.col("__g.paired").alias(R.spark_name(PAIRED)))
    for m in R.META_NAMES:
        if m == R.SEQ:
            sub = F.coalesce(F.col("__g.sub"), F.lit(0).cast("bigint"))  # never NULL: a non-null element type
            out.append(F.concat(F.col(R.SEQ), F.array(sub)).alias(R.SEQ))
        elif m == R.DELETED:
            out.append(F.col("__g.retract").alias(R.DELETED))
        else:
            out.append(F.col(m))
    internal = (("Aggregate-GroupBy-repartition", _describe(schema, step.internal_formats)),)
    return Built(changes.select(*out), schema, True, None, source.internal_schemas + internal)


def _all(conditions: Sequence[SparkColumn]) -> SparkColumn:
    out = conditions[0]
    for c in conditions[1:]:
        out = out & c
    return out


# --------------------------------------------------------------------------- aggregate


_SIGN = "__sign"  # a table aggregate's input: -1 for a retraction, 1 for an addition


def _aggregate_column(
    call: E.FunctionCall, columns: dict[str, SqlType], users: frozenset[str], *, signed: bool = False, level: int = 1
) -> tuple[NativeExpression, Any]:
    """The call's report and a function from a window spec to its running value (None if not native).

    ``signed``: the rows carry ``__sign`` and a retraction (-1) undoes what an addition added.
    ``level``: the native compiler's level the argument compiles with.
    """
    sql = E.format_sql(call)
    name = call.name.upper()
    sign = F.col(_SIGN) if signed else None

    def fallback(reason: str) -> tuple[NativeExpression, Any]:
        return NativeExpression(sql, None, reason), None

    if name not in ("COUNT", "SUM", "AVG", "MIN", "MAX"):
        return fallback(f"aggregate function {name} has no Spark form yet")
    if signed and name in ("MIN", "MAX"):
        return fallback(f"{name} cannot undo a retraction")
    arg_types = [infer_type(a, columns) for a in call.args]
    try:
        spec = aggregate_spec(call.name, arg_types, call.semantics)
    except KsqlError as exc:
        return fallback(f"not resolved here ({exc})")
    if spec.resolved.signature.since != 1:
        # The Spark forms below match the overloads as they behave since version 1
        # (engine.functions.registry); a later behaviour of one needs its own form.
        return fallback(f"version {spec.resolved.signature.since} of {name} has no Spark form yet")
    if spec.column_args != len(call.args) or len(call.args) > 1:
        return fallback(f"{name} with these arguments has no Spark form yet")
    if not call.args:  # COUNT(*)
        if sign is not None:
            return NativeExpression(sql, F.lit(1), NATIVE), lambda w: F.sum(sign).over(w)
        return NativeExpression(sql, F.lit(1), NATIVE), lambda w: F.count(F.lit(1)).over(w)
    arg = compile_native(call.args[0], columns, user_columns=users, level=level)
    if arg.column is None:
        return fallback(arg.reason)
    t, param = arg_types[0], spec.column_types[0]
    if param is not None and t != param:
        return fallback(f"converting the argument {t} to {param}")
    value = arg.column
    if name == "COUNT":
        return NativeExpression(sql, value, NATIVE), lambda w: _running_count(value, sign, w)
    if t is None:
        return fallback("an untyped argument")
    if name in ("SUM", "AVG"):
        if t.base not in _SUM_TYPES:
            return fallback(f"{name} of {t} has no Spark form yet")
        if name == "SUM":
            return NativeExpression(sql, value, NATIVE), lambda w: _running_sum(value, t, w, sign)

        def running_avg(w: Any, value: SparkColumn = value, t: SqlType = t) -> SparkColumn:
            # V1: float(wrapped sum) / count, 0.0 while no value has been counted
            count = _running_count(value, sign, w)
            total = _running_sum(value, t, w, sign).cast("double")
            return F.when(count == 0, F.lit(0.0)).otherwise(
                total / F.when(count == 0, F.lit(1)).otherwise(count).cast("double")
            )

        return NativeExpression(sql, value, NATIVE), running_avg
    if t.base not in _EXTREME_TYPES:
        return fallback(f"{name} of {t} has no Spark form yet")
    extreme = F.max if name == "MAX" else F.min
    return NativeExpression(sql, value, NATIVE), lambda w: extreme(value).over(w)


def _running_count(value: SparkColumn, sign: SparkColumn | None, w: Any) -> SparkColumn:
    """COUNT(x) so far: the non-NULL values added, less those retracted."""
    if sign is None:
        return F.count(value).over(w)
    return F.sum(F.when(value.isNotNull(), sign).otherwise(F.lit(0))).over(w)


def _running_sum(value: SparkColumn, t: SqlType, w: Any, sign: SparkColumn | None = None) -> SparkColumn:
    """SUM so far: DOUBLEs added (retractions subtracted) in input order from 0.0; integers
    summed exactly (BIGINT for INT values, DECIMAL(38,0) for BIGINT ones), then wrapped like
    Java's int/long."""
    if t.base is BaseType.DOUBLE:
        return F.coalesce(F.sum(_signed(value, sign)).over(w), F.lit(0.0))
    exact = "bigint" if t.base is BaseType.INTEGER else "decimal(38,0)"
    total = F.sum(_signed(value.cast(exact), sign)).over(w)
    return wrap_integral(F.coalesce(total, F.lit(0).cast(exact)), t)


def _signed(value: SparkColumn, sign: SparkColumn | None) -> SparkColumn:
    return value if sign is None else F.when(sign < 0, -value).otherwise(value)


@dataclass
class _AggregatePlan:
    """How an aggregate step runs natively; ``reason`` says why it cannot (then V1 builds it)."""

    calls: list[tuple[str, NativeExpression]]
    runners: list[Any]
    schema: LogicalSchema | None = None
    having: NativeExpression | None = None
    reason: str | None = None


_STATE_STORE = "a streaming query keeps per-key state in Spark's state store"


def _plan_aggregate(
    step: _AnyStreamAggregate | _AnyTableAggregate, source: Built, *, signed: bool,
    streaming_reason: str | None = _STATE_STORE, level: int = 1,
) -> _AggregatePlan:
    """How the step runs natively, its arguments and HAVING compiled at the native compiler's
    ``level``; on a streaming source ``streaming_reason`` (if any) says why it cannot."""
    columns = source.expression_columns()
    users = frozenset(c.name for c in source.schema.columns)
    plan = _AggregatePlan([], [])
    for a in step.aggregation_functions:
        assert isinstance(a.expression, E.FunctionCall)  # the step checks it
        report, run = _aggregate_column(a.expression, columns, users, signed=signed, level=level)
        plan.calls.append((a.alias, report))
        plan.runners.append(run)
    key_cols = [source.schema.find(k) for k in step.key_column_names]
    plan.reason = next((f"{name}: {n.reason}" for name, n in plan.calls if not n.is_native), None)
    if plan.reason is None and any(c is None or c.type.base not in _KEY_TYPES for c in key_cols):
        plan.reason = "a grouping key of a type Spark groups differently"
    if plan.reason is None:
        result_types = [_result_type(a.expression, columns) for a in step.aggregation_functions]
        plan.schema = aggregate_schema(
            [c for c in key_cols if c is not None],
            [Column(a.alias, t) for a, t in zip(step.aggregation_functions, result_types, strict=True)],
        )
        if step.having is not None:
            having_columns = dict(PSEUDO_COLUMNS)
            having_columns.update(plan.schema.types())
            plan.having = compile_native(
                step.having, having_columns, user_columns=frozenset(plan.schema.types()), level=level
            )
            plan.calls.append(("HAVING", plan.having))
            if plan.having.column is None:
                plan.reason = f"HAVING: {plan.having.reason}"
    if plan.reason is None and source.df.isStreaming:
        plan.reason = streaming_reason
    if plan.reason is not None:
        _fallback_all(step.ctx, step.TYPE, plan.calls, plan.reason)
    else:
        _report_all(step.ctx, step.TYPE, plan.calls)
    return plan


@builds(StreamAggregateV2)
def build_stream_aggregate_v2(step: StreamAggregateV2, *, source: Built, ctx: BuildContext) -> Built:
    plan = _plan_aggregate(step, source, signed=False)
    if plan.reason is not None or plan.schema is None:
        return _as_v1(step, source, ctx)
    return _stream_aggregate(step, source, _running(_live(step, source), step.key_column_names, plan), plan)


_AnyStreamAggregate = (
    StreamAggregateV2 | StreamAggregateV3 | StreamAggregateV4 | StreamAggregateV5 | StreamAggregateV6
    | StreamAggregateV7
)
_AnyTableAggregate = TableAggregateV2 | TableAggregateV3 | TableAggregateV4 | TableAggregateV5
# The versions whose output records carry the headers of the record that triggered them.
_FORWARDING_HEADERS = (StreamAggregateV6, StreamAggregateV7, TableAggregateV4, TableAggregateV5)


def _as_v1(step: _AnyStreamAggregate, source: Built, ctx: BuildContext) -> Built:
    """The step built exactly as its V1 version (``streamAggregateV1``), forwarding headers
    for the versions that do."""
    v1 = StreamAggregate(
        ctx=step.ctx, source=step.source, key_column_names=step.key_column_names,
        aggregation_functions=step.aggregation_functions, internal_formats=step.internal_formats,
        having=step.having,
    )
    if isinstance(step, _FORWARDING_HEADERS):
        return stream_aggregate_forwarding_headers(v1, source=source, ctx=ctx)
    return build_stream_aggregate(v1, source=source, ctx=ctx)


def _live(step: _AnyStreamAggregate, source: Built) -> DataFrame:
    """The records an aggregate counts: not deletes, with a full grouping key."""
    keys = [F.col(R.spark_name(k)) for k in step.key_column_names]
    return source.df.filter(_not_deleted() & _all([k.isNotNull() for k in keys]))


def _stream_aggregate(step: _AnyStreamAggregate, source: Built, df: DataFrame, plan: _AggregatePlan) -> Built:
    assert plan.schema is not None
    internal = (("Aggregate-Aggregate-Materialize", _describe(plan.schema, step.internal_formats)),)
    return Built(df, plan.schema, True, None, source.internal_schemas + internal)


@builds(StreamAggregateV3)
def build_stream_aggregate_v3(step: StreamAggregateV3, *, source: Built, ctx: BuildContext) -> Built:
    """V2 on the bounded runtime; on the Kafka runtime (without HAVING) each key's running
    results are computed a micro-batch at a time over typed columns (``engine.runtime.running``)
    where V2 ran V1's per-record handlers over pickled rows."""
    having = None if step.having is None else "HAVING on a streaming query runs in V1's per-record handler"
    return _running_aggregate(step, source, ctx, streaming_reason=having)


@builds(StreamAggregateV4)
def build_stream_aggregate_v4(step: StreamAggregateV4, *, source: Built, ctx: BuildContext) -> Built:
    """V3, with two differences on the Kafka runtime: a task's records come out in input
    order across its groups (V3's come out a group at a time), and a HAVING runs natively
    too: the state store gives each record the group's results before it, and HAVING is
    evaluated in Spark on both (bounded runs build exactly as V3, whose window functions
    compare each result with the one before). HAVING reads only the results and the key:
    analysis refuses any other column there."""
    return _running_aggregate(step, source, ctx, streaming_reason=None)


@builds(StreamAggregateV5)
def build_stream_aggregate_v5(step: StreamAggregateV5, *, source: Built, ctx: BuildContext) -> Built:
    """V4, its arguments and HAVING compiled with the native compiler's level 2."""
    return _running_aggregate(step, source, ctx, streaming_reason=None, level=2)


@builds(StreamAggregateV6)
def build_stream_aggregate_v6(step: StreamAggregateV6, *, source: Built, ctx: BuildContext) -> Built:
    """V4, each output record carrying the headers of the input record that triggered it."""
    return _running_aggregate(step, source, ctx, streaming_reason=None)


@builds(StreamAggregateV7)
def build_stream_aggregate_v7(step: StreamAggregateV7, *, source: Built, ctx: BuildContext) -> Built:
    """V5, each output record carrying the headers of the input record that triggered it."""
    return _running_aggregate(step, source, ctx, streaming_reason=None, level=2)


def _running_aggregate(
    step: StreamAggregateV3 | StreamAggregateV4 | StreamAggregateV5 | StreamAggregateV6 | StreamAggregateV7,
    source: Built, ctx: BuildContext, *,
    streaming_reason: str | None, level: int = 1,
) -> Built:
    """Window functions on the bounded runtime, the runtime's running aggregates on Kafka,
    or V1's handler (when ``streaming_reason`` or the plan gives a reason)."""
    if streaming_reason is None and not isinstance(ctx.runtime, RunningAggregates):
        streaming_reason = "this runtime keeps no running aggregates"
    plan = _plan_aggregate(step, source, signed=False, streaming_reason=streaming_reason, level=level)
    if plan.reason is not None or plan.schema is None:
        return _as_v1(step, source, ctx)
    live = _live(step, source)
    headers = isinstance(step, _FORWARDING_HEADERS)
    if not source.df.isStreaming:
        return _stream_aggregate(step, source, _running(live, step.key_column_names, plan, headers=headers), plan)
    assert isinstance(ctx.runtime, RunningAggregates)
    return _stream_aggregate(step, source, _running_in_state_store(step, source, live, plan, ctx.runtime), plan)


def _running_call(
    call: E.FunctionCall, value: SparkColumn, columns: Mapping[str, SqlType]
) -> tuple[RunningCall, SparkColumn, SparkColumn]:
    """A native call's running form, its argument as a value that is never NULL, and whether
    the argument is present (a call ``_aggregate_column`` accepted: COUNT, SUM, AVG, MIN or
    MAX of INT, BIGINT or DOUBLE, with one argument or none; ``value`` is the argument as
    ``_aggregate_column`` compiled it)."""
    name = call.name.upper()
    if not call.args:
        return RunningCall(name, False, 0), F.lit(0).cast("bigint"), F.lit(True)
    t = infer_type(call.args[0], columns)
    assert t is not None
    bits = 0 if name == "COUNT" else {BaseType.INTEGER: 32, BaseType.BIGINT: 64}.get(t.base, 0)
    if name == "COUNT":
        as_number = F.lit(0).cast("bigint")
    elif bits == 0:
        as_number = F.coalesce(value.cast("double"), F.lit(0.0))
    else:
        as_number = F.coalesce(value.cast("bigint"), F.lit(0).cast("bigint"))
    return RunningCall(name, True, bits), as_number, value.isNotNull()


def _running_in_state_store(
    step: StreamAggregateV3 | StreamAggregateV4 | StreamAggregateV5 | StreamAggregateV6 | StreamAggregateV7,
    source: Built, live: DataFrame, plan: _AggregatePlan, runtime: RunningAggregates,
) -> DataFrame:
    """``_running``'s rows from the runtime's per-key state instead of window functions:
    grouped by key for V3, by task for V4 (in input order across groups). ``plan.calls``
    holds the aggregate calls, then the HAVING if there is one: only V4 has one here."""
    schema = plan.schema
    assert schema is not None
    key_names = [R.spark_name(k) for k in step.key_column_names]
    calls: list[RunningCall] = []
    inputs = [F.col(k) for k in key_names]
    columns = source.expression_columns()
    aggregates = plan.calls[: len(step.aggregation_functions)]
    for i, (a, (_, compiled)) in enumerate(zip(step.aggregation_functions, aggregates, strict=True)):
        assert isinstance(a.expression, E.FunctionCall) and compiled.column is not None
        call, value, present = _running_call(a.expression, compiled.column, columns)
        calls.append(call)
        inputs += [value.alias(arg_column(i)), present.alias(has_column(i))]
    inputs += [F.col(R.SEQ), F.col(R.ROWTIME), F.col(R.ROWPARTITION)]
    headers = isinstance(step, _FORWARDING_HEADERS)
    if headers:
        inputs.append(F.col(R.HEADERS))
    key_fields = [live.schema[k] for k in key_names]
    result_fields = [ST.StructField(result_column(i), spark_type(c.type)) for i, c in enumerate(schema.value)]
    meta = {f.name: f for f in R.META_FIELDS}
    fields = [*key_fields, *result_fields, meta[R.SEQ], meta[R.ROWTIME], meta[R.ROWPARTITION]]
    if headers:
        fields.append(meta[R.HEADERS])
    having = plan.having
    if having is not None:
        fields += [ST.StructField(previous_column(i), f.dataType) for i, f in enumerate(result_fields)]
        fields.append(ST.StructField(HAS_PREVIOUS, ST.BooleanType()))
    if isinstance(step, StreamAggregateV4 | StreamAggregateV5 | StreamAggregateV6 | StreamAggregateV7):
        running = runtime.running_aggregate_by_task(
            live.select(*inputs), key_columns=key_names, calls=calls, output=ST.StructType(fields),
            name=step.ctx, previous=having is not None,
        )
    else:
        running = runtime.running_aggregate(
            live.select(*inputs), key_columns=key_names, calls=calls, output=ST.StructType(fields), name=step.ctx
        )
    constants = {
        R.ROWOFFSET: F.lit(None), R.DELETED: F.lit(False), R.WINDOWSTART: F.lit(None), R.WINDOWEND: F.lit(None),
    }
    if not headers:
        constants[R.HEADERS] = F.array()
    keys = [F.col(k).alias(R.spark_name(c.name)) for k, c in zip(key_names, schema.key, strict=True)]
    metas = [
        (F.col(f.name) if f.name not in constants else constants[f.name]).cast(f.dataType).alias(f.name)
        for f in R.META_FIELDS
    ]
    values = [R.spark_name(c.name) for c in schema.value]
    if having is None or having.column is None:
        return running.select(*keys, *[F.col(result_column(i)).alias(v) for i, v in enumerate(values)], *metas)
    # HAVING on both sides of each update: first over the results before the record (as the
    # value columns), then over its own; a miss deletes only when the results before passed.
    current = [f"__current{i}" for i in range(len(values))]
    before = running.select(
        *keys, *[F.col(previous_column(i)).alias(v) for i, v in enumerate(values)],
        *[F.col(result_column(i)).alias(c) for i, c in enumerate(current)], F.col(HAS_PREVIOUS), *metas,
    ).select("*", (F.col(HAS_PREVIOUS) & F.coalesce(having.column, F.lit(False))).alias("__passed_before"))
    after = before.select(
        *[F.col(R.spark_name(c.name)) for c in schema.key],
        *[F.col(c).alias(v) for c, v in zip(current, values, strict=True)],
        *[F.col(m) for m in R.META_NAMES], F.col("__passed_before"),
    ).select("*", F.coalesce(having.column, F.lit(False)).alias("__passed"))
    gated = after.filter(F.col("__passed") | F.col("__passed_before"))
    return gated.select(*_having_columns(schema, F.col("__passed")))


@builds(TableAggregateV2)
def build_table_aggregate_v2(step: TableAggregateV2, *, source: Built, ctx: BuildContext) -> Built:
    return _table_aggregate(step, source, ctx, level=1)


@builds(TableAggregateV3)
def build_table_aggregate_v3(step: TableAggregateV3, *, source: Built, ctx: BuildContext) -> Built:
    """V2, its arguments and HAVING compiled with the native compiler's level 2."""
    return _table_aggregate(step, source, ctx, level=2)


@builds(TableAggregateV4)
def build_table_aggregate_v4(step: TableAggregateV4, *, source: Built, ctx: BuildContext) -> Built:
    """V2, each output record carrying the headers of the input record that triggered it."""
    return _table_aggregate(step, source, ctx, level=1)


@builds(TableAggregateV5)
def build_table_aggregate_v5(step: TableAggregateV5, *, source: Built, ctx: BuildContext) -> Built:
    """V3, each output record carrying the headers of the input record that triggered it."""
    return _table_aggregate(step, source, ctx, level=2)


def _table_aggregate(step: _AnyTableAggregate, source: Built, ctx: BuildContext, *, level: int) -> Built:
    plan = _plan_aggregate(step, source, signed=True, level=level)
    if plan.reason is not None or plan.schema is None:
        v1 = TableAggregate(
            ctx=step.ctx, source=step.source, key_column_names=step.key_column_names,
            aggregation_functions=step.aggregation_functions, internal_formats=step.internal_formats,
            having=step.having,
        )
        if isinstance(step, _FORWARDING_HEADERS):
            return table_aggregate_forwarding_headers(v1, source=source, ctx=ctx)
        return build_table_aggregate(v1, source=source, ctx=ctx)
    keys = [F.col(R.spark_name(k)) for k in step.key_column_names]
    running = Window.partitionBy(*keys).orderBy(F.col(R.SEQ)).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    deleted = F.coalesce(F.col(R.DELETED), F.lit(False))
    signed = source.df.filter(_all([k.isNotNull() for k in keys])).select(
        "*",
        F.when(deleted, F.lit(-1)).otherwise(F.lit(1)).alias(_SIGN),
        # V1 ignores a retraction that reaches a group before any addition (it has no state)
        F.max(F.when(~deleted, F.lit(1))).over(running).alias("__seen"),
    )
    live = signed.filter(F.col("__seen").isNotNull())
    # A retraction paired with an addition to the same group changes the state, emits nothing.
    paired = deleted & F.coalesce(F.col(R.spark_name(PAIRED)), F.lit(False))
    df = _running(live, step.key_column_names, plan, emits=~paired, headers=isinstance(step, _FORWARDING_HEADERS))
    internal = (("Aggregate-Aggregate-Materialize", _describe(plan.schema, step.internal_formats)),)
    return Built(df, plan.schema, True, None, source.internal_schemas + internal)


def _result_type(call: E.Expr, columns: dict[str, SqlType]) -> SqlType:
    assert isinstance(call, E.FunctionCall)
    spec = aggregate_spec(call.name, [infer_type(a, columns) for a in call.args], call.semantics)
    return spec.return_type


def _running(
    live: DataFrame, key_names: Sequence[str], plan: _AggregatePlan, *, emits: SparkColumn | None = None,
    headers: bool = False,
) -> DataFrame:
    """One output row per input row (where ``emits``): the group's results so far, in V1's row
    shape, carrying the input row's headers when ``headers``."""
    schema, having = plan.schema, plan.having
    assert schema is not None
    keys = [F.col(R.spark_name(k)) for k in key_names]
    ordered = Window.partitionBy(*keys).orderBy(F.col(R.SEQ))
    running = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    results = [
        run(running).cast(spark_type(c.type)).alias(R.spark_name(c.name))
        for run, c in zip(plan.runners, schema.value, strict=True)
    ]
    meta = {
        R.SEQ: F.col(R.SEQ),
        R.ROWTIME: F.max(F.col(R.ROWTIME)).over(running),
        R.ROWPARTITION: F.col(R.ROWPARTITION),
        R.ROWOFFSET: F.lit(None),
        R.HEADERS: F.col(R.HEADERS) if headers else F.array(),
        R.DELETED: F.lit(False),
        R.WINDOWSTART: F.lit(None),
        R.WINDOWEND: F.lit(None),
    }
    selected = [
        *[k.alias(R.spark_name(c.name)) for k, c in zip(keys, schema.key, strict=True)],
        *results,
        *[meta[f.name].cast(f.dataType).alias(f.name) for f in R.META_FIELDS],
    ]
    if emits is None:
        out = live.select(*selected)
    else:
        out = live.select(*selected, emits.alias("__emits")).filter(F.col("__emits")).drop("__emits")
    if having is None or having.column is None:
        return out
    # HAVING: a miss emits a delete (NULL results) only when the group's last result passed.
    passed = F.coalesce(having.column, F.lit(False))
    gated = out.select("*", passed.alias("__passed"))
    gated = gated.select("*", F.lag(F.col("__passed"), 1, False).over(ordered).alias("__passed_before"))
    gated = gated.filter(F.col("__passed") | F.col("__passed_before"))
    return gated.select(*_having_columns(schema, F.col("__passed")))


def _having_columns(schema: LogicalSchema, ok: SparkColumn) -> list[SparkColumn]:
    """An aggregate's row after HAVING: its results where ``ok``, a delete (NULL results) where not."""
    columns = [F.col(R.spark_name(c.name)) for c in schema.key]
    columns += [F.when(ok, F.col(R.spark_name(c.name))).alias(R.spark_name(c.name)) for c in schema.value]
    columns += [
        (~ok).alias(R.DELETED) if m == R.DELETED else F.col(m) for m in R.META_NAMES
    ]
    return columns
