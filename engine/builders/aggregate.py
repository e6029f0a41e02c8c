"""Builders of aggregation steps: grouping, (windowed) aggregation of streams and tables, suppression.

Every stateful pass runs through the runtime's keyed operator (``ctx.runtime.keyed``): a
handler sees one key's records in input order and keeps its state in a dict. The handlers are plain classes so that tests can
drive them without Spark. Output rows carry the seq of the record that triggered them,
extended with an index (``seq + [i]``) when one record triggers several.

Timestamps follow Kafka Streams: an aggregate update has the largest timestamp of the
records that built it; a session update and a session delete have the session's end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.builders.context import BuildContext, Built, log_processing_error
from engine.builders.walker import builds
from engine.builders.windows import overlapping_sessions, time_windows_for
from engine.errors import EvaluationError, KsqlError, PlanError
from engine.expressions import coerce_value, compile_expression, infer_type
from engine.functions.udaf import Aggregator, aggregate_spec
from engine.plan import expr as E
from engine.plan.schema import PSEUDO_COLUMNS, WINDOW_BOUNDS, Column, LogicalSchema, Namespace
from engine.plan.steps import Formats, SelectExpression
from engine.plan.steps_aggregate import (
    PAIRED,
    StreamAggregate,
    StreamGroupBy,
    StreamGroupByKey,
    StreamWindowedAggregate,
    StreamWindowedAggregateV2,
    TableAggregate,
    TableGroupBy,
    TableSuppress,
    TableSuppressV2,
    WindowSpec,
    aggregate_schema,
    grouped_schema,
)
from engine.plan.types import SqlType
from engine.runtime import rows as R
from engine.runtime.keyed import KeyedInput, KeyedRecord

Row = dict[str, Any]


# --------------------------------------------------------------------------- aggregate calls


@dataclass
class AggregateCall:
    """One aggregate call, ready to run: its aggregator and compiled column arguments."""

    alias: str
    aggregator: Aggregator
    args: tuple[Callable[[Row], Any], ...]
    return_type: SqlType
    text: str

    def value(self, row: Row, query_id: str, where: str) -> Any:
        """The value ``add``/``undo`` take for ``row``: one column's value or a tuple."""
        values = []
        for fn in self.args:
            try:
                values.append(fn(row))
            except EvaluationError as exc:
                log_processing_error(query_id, where, str(exc))
                values.append(None)
        return values[0] if len(values) == 1 else tuple(values)


def compile_aggregate_calls(
    aggregations: Sequence[SelectExpression], columns: dict[str, SqlType], config: Any
) -> list[AggregateCall]:
    """Resolve each aggregate call against the grouped rows' columns."""
    out = []
    for a in aggregations:
        call = a.expression
        if not isinstance(call, E.FunctionCall):
            raise PlanError(f"Aggregation `{a.alias}` is not a function call: {call}.")
        arg_types = [infer_type(arg, columns) for arg in call.args]
        spec = aggregate_spec(call.name, arg_types, call.semantics)
        init_values = [compile_expression(arg, {})({}) for arg in call.args[spec.column_args:]]
        args: list[Callable[[Any], Any]] = []
        for arg, arg_type, param in zip(
            call.args[: spec.column_args], arg_types[: spec.column_args], spec.column_types, strict=True
        ):
            fn = compile_expression(arg, columns)
            if param is not None and arg_type is not None and arg_type != param:
                fn = _coerced(fn, arg_type, param)
            args.append(fn)
        out.append(
            AggregateCall(
                a.alias, spec.create(init_values, config), tuple(args), spec.return_type,
                E.format_sql(call),
            )
        )
    return out


def _coerced(fn: Callable[[Any], Any], source: SqlType, target: SqlType) -> Callable[[Any], Any]:
    def run(row: Any) -> Any:
        value = fn(row)
        return None if value is None else coerce_value(value, source, target)

    return run


def output_row(
    keys: Row, results: Row, *, seq: Sequence[int], ts: int, partition: int | None,
    deleted: bool = False, window: tuple[int, int] | None = None, headers: Sequence[Any] = (),
) -> Row:
    """An aggregate output row with its meta columns (``headers``: the record's headers)."""
    row = dict(keys)
    row.update(results)
    row.update(
        {
            R.SEQ: list(seq),
            R.ROWTIME: ts,
            R.ROWPARTITION: partition,
            R.ROWOFFSET: None,
            R.HEADERS: list(headers),
            R.DELETED: deleted,
            R.WINDOWSTART: window[0] if window else None,
            R.WINDOWEND: window[1] if window else None,
        }
    )
    return row


class _Aggregating:
    """Shared parts of the aggregation handlers."""

    def __init__(
        self, key_names: Sequence[str], calls: Sequence[AggregateCall], query_id: str, where: str,
        *, having: Callable[[Row], Any] | None = None, forward_headers: bool = False,
    ) -> None:
        self.key_names = tuple(key_names)
        self.calls = list(calls)
        self.query_id = query_id
        self.where = where
        self.having = having
        self.forward_headers = forward_headers

    def headers(self, row: Row) -> Sequence[Any]:
        """The headers an output row triggered by ``row`` carries: ``row``'s own when the step
        forwards them (as Kafka Streams does), else none."""
        return (row.get(R.HEADERS) or ()) if self.forward_headers else ()

    def gate(self, row: Row, passed_before: bool) -> tuple[list[Row], bool]:
        """Apply HAVING: a miss deletes the group's row, but only if its last result passed."""
        if self.having is None:
            return [row], True
        try:
            ok = self.having(row) is True
        except EvaluationError as exc:
            log_processing_error(self.query_id, self.where, str(exc))
            ok = False
        if ok:
            return [row], True
        if not passed_before:
            return [], False
        deleted = dict(row)
        deleted.update(self.empty([c.alias for c in self.calls]))
        deleted[R.DELETED] = True
        return [deleted], False

    def initial(self) -> list[Any]:
        return [c.aggregator.initial() for c in self.calls]

    def add(self, accs: list[Any], row: Row) -> list[Any]:
        return [self._apply(c, c.aggregator.add, acc, row) for c, acc in zip(self.calls, accs, strict=True)]

    def undo(self, accs: list[Any], row: Row) -> list[Any]:
        return [self._apply(c, c.aggregator.undo, acc, row) for c, acc in zip(self.calls, accs, strict=True)]

    def merge(self, a: list[Any], b: list[Any]) -> list[Any]:
        return [c.aggregator.merge(x, y) for c, x, y in zip(self.calls, a, b, strict=True)]

    def _apply(self, call: AggregateCall, op: Callable[[Any, Any], Any], acc: Any, row: Row) -> Any:
        try:
            return op(acc, call.value(row, self.query_id, self.where))
        except KsqlError as exc:
            log_processing_error(self.query_id, self.where, f"{call.text} failed: {exc}")
            return acc

    def results(self, accs: list[Any]) -> Row:
        out = {}
        for c, acc in zip(self.calls, accs, strict=True):
            try:
                out[c.alias] = c.aggregator.result(acc)
            except KsqlError as exc:
                log_processing_error(self.query_id, self.where, f"{c.text} failed: {exc}")
                out[c.alias] = None
        return out

    def keys(self, row: Row) -> Row:
        return {k: row[k] for k in self.key_names}

    @staticmethod
    def empty(names: Sequence[str]) -> Row:
        return dict.fromkeys(names)


# --------------------------------------------------------------------------- handlers


class StreamAggregateHandler(_Aggregating):
    """Aggregates one group's stream records; every record emits the group's new result."""

    def process(self, state: dict[str, Any], record: KeyedRecord) -> list[Row]:
        row = record.row
        accs = state.get("accs")
        ts = row[R.ROWTIME]
        if accs is None:
            accs = self.initial()
        else:
            ts = max(ts, state["ts"])
        accs = self.add(accs, row)
        state["accs"], state["ts"] = accs, ts
        out, state["passed"] = self.gate(
            output_row(
                self.keys(row), self.results(accs), seq=record.seq, ts=ts, partition=row[R.ROWPARTITION],
                headers=self.headers(row),
            ),
            state.get("passed", False),
        )
        return out


class TimeWindowedAggregateHandler(_Aggregating):
    """Tumbling and hopping windows: updates every open window holding the record, drops late ones."""

    def __init__(self, *args: Any, window: WindowSpec, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.size = window.size_ms or 0
        self.advance = window.advance_ms or self.size
        self.grace = window.effective_grace_ms

    def process(self, state: dict[str, Any], record: KeyedRecord) -> list[Row]:
        row = record.row
        ts = row[R.ROWTIME]
        close = record.stream_time - self.grace
        windows: dict[int, tuple[list[Any], int, bool]] = state.setdefault("windows", {})
        out = []
        for i, (start, end) in enumerate(time_windows_for(ts, self.size, self.advance)):
            if end <= close:
                log_processing_error(
                    self.query_id, self.where,
                    f"Skipping a record for the expired window [{start}, {end}).",
                )
                continue
            accs, wts, passed = windows.get(start, (None, ts, False))
            if accs is None:
                accs, wts = self.initial(), ts
            else:
                wts = max(ts, wts)
            accs = self.add(accs, row)
            emitted, passed = self.gate(
                output_row(
                    self.keys(row), self.results(accs), seq=(*record.seq, i), ts=wts,
                    partition=row[R.ROWPARTITION], window=(start, end), headers=self.headers(row),
                ),
                passed,
            )
            windows[start] = (accs, wts, passed)
            out.extend(emitted)
        for start in [s for s in windows if s + self.size <= close]:
            del windows[start]
        return out


class SessionAggregateHandler(_Aggregating):
    """Session windows: a record merges the sessions within the gap; merged-away ones are deleted."""

    def __init__(self, *args: Any, window: WindowSpec, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gap = window.gap_ms or 0
        self.grace = window.effective_grace_ms

    def process(self, state: dict[str, Any], record: KeyedRecord) -> list[Row]:
        row = record.row
        ts = row[R.ROWTIME]
        close = record.stream_time - self.grace
        sessions: list[tuple[int, int, list[Any], bool]] = state.setdefault("sessions", [])
        hits = overlapping_sessions(sessions, ts, self.gap)
        start, end = ts, ts
        accs = self.initial()
        for i in hits:
            s_start, s_end, s_accs, _ = sessions[i]
            accs = self.merge(accs, s_accs)
            start, end = min(start, s_start), max(end, s_end)
        if end < close:
            log_processing_error(
                self.query_id, self.where, f"Skipping a record for the expired session [{start}, {end}]."
            )
            return []
        out: list[Row] = []
        keys = self.keys(row)
        partition = row[R.ROWPARTITION]
        if (start, end) != (ts, ts):
            for i in hits:
                s_start, s_end, _, s_passed = sessions[i]
                if not s_passed:
                    continue
                out.append(
                    output_row(
                        keys, self.empty([c.alias for c in self.calls]), seq=(*record.seq, len(out)),
                        ts=s_end, partition=partition, deleted=True, window=(s_start, s_end),
                        headers=self.headers(row),
                    )
                )
        for i in sorted(hits, reverse=True):
            del sessions[i]
        accs = self.add(accs, row)
        emitted, passed = self.gate(
            output_row(
                keys, self.results(accs), seq=(*record.seq, len(out)), ts=end,
                partition=partition, window=(start, end), headers=self.headers(row),
            ),
            False,
        )
        sessions.append((start, end, accs, passed))
        out.extend(emitted)
        state["sessions"] = [s for s in sessions if s[1] >= close]
        return out


class TableGroupByHandler:
    """First pass of a table aggregation, keyed by the table's key: remembers each row.

    A change emits a retraction of the old row to its old group (``__deleted``) and an
    addition of the new row to its new group; when both groups are the same, the
    retraction is marked ``__paired`` so that the aggregate emits once.
    """

    def __init__(
        self, keys: Sequence[tuple[str, Callable[[Row], Any]]], value_names: Sequence[str],
        query_id: str, where: str,
    ) -> None:
        self.keys = list(keys)
        self.value_names = tuple(value_names)
        self.query_id = query_id
        self.where = where

    def group_key(self, row: Row) -> Row | None:
        out = {}
        for name, fn in self.keys:
            try:
                value = fn(row)
            except EvaluationError as exc:
                log_processing_error(self.query_id, self.where, str(exc))
                value = None
            if value is None:
                return None
            out[name] = value
        return out

    def _grouped(self, key: Row, values: Row, record: KeyedRecord, *, sub: int, retract: bool, paired: bool) -> Row:
        out = dict(key)
        for n in self.value_names:
            if n not in out:
                out[n] = values.get(n)
        for m in R.META_NAMES:
            out[m] = record.row.get(m)
        out[R.SEQ] = [*record.seq, sub]
        out[R.DELETED] = retract
        out[PAIRED] = paired
        return out

    def process(self, state: dict[str, Any], record: KeyedRecord) -> list[Row]:
        row = record.row
        old = state.get("old")
        deleted = bool(row[R.DELETED])
        old_key = self.group_key(old) if old is not None else None
        new_key = None if deleted else self.group_key(row)
        state["old"] = None if deleted else row
        out: list[Row] = []
        if old is not None and old_key is not None:
            out.append(
                self._grouped(old_key, old, record, sub=0, retract=True, paired=new_key == old_key)
            )
        if new_key is not None:
            out.append(self._grouped(new_key, row, record, sub=1, retract=False, paired=False))
        return out


class TableAggregateHandler(_Aggregating):
    """Second pass of a table aggregation, keyed by group: undo retractions, add additions."""

    def process(self, state: dict[str, Any], record: KeyedRecord) -> list[Row]:
        row = record.row
        accs = state.get("accs")
        ts = row[R.ROWTIME]
        if row[R.DELETED]:
            if accs is None:
                return []
            accs = self.undo(accs, row)
            ts = max(ts, state["ts"])
        elif accs is None:
            accs = self.add(self.initial(), row)
        else:
            accs = self.add(accs, row)
            ts = max(ts, state["ts"])
        state["accs"], state["ts"] = accs, ts
        if row[R.DELETED] and row.get(PAIRED):
            return []
        out, state["passed"] = self.gate(
            output_row(
                self.keys(row), self.results(accs), seq=record.seq, ts=ts, partition=row[R.ROWPARTITION],
                headers=self.headers(row),
            ),
            state.get("passed", False),
        )
        return out


# --------------------------------------------------------------------------- builders


def _describe(schema: LogicalSchema, formats: Formats) -> str:
    columns = ", ".join(str(c) for c in schema.columns if c.name != PAIRED)
    return f"{columns} (key format {formats.key_format}, value format {formats.value_format})"


def _key_exprs(
    keys: Sequence[SelectExpression], source: Built
) -> tuple[list[Column], list[tuple[str, Callable[[Any], Any]]]]:
    columns = source.expression_columns()
    cols: list[Column] = []
    compiled: list[tuple[str, Callable[[Any], Any]]] = []
    for k in keys:
        t = infer_type(k.expression, columns)
        if t is None:
            raise PlanError(f"Cannot infer a type for the GROUP BY expression {E.format_sql(k.expression)}.")
        cols.append(Column(k.alias, t, Namespace.KEY))
        compiled.append((k.alias, compile_expression(k.expression, columns)))
    return cols, compiled


@builds(StreamGroupBy)
def build_stream_group_by(step: StreamGroupBy, *, source: Built, ctx: BuildContext) -> Built:
    key_cols, compiled = _key_exprs(step.group_by_expressions, source)
    schema = grouped_schema(source.schema, key_cols, table=False)
    value_names = [c.name for c in schema.value]
    query_id, where = ctx.query_id, step.ctx

    def rekey(row: Row) -> list[Row]:
        if row[R.DELETED]:
            return []  # a stream record with a null value does not aggregate
        out: Row = {}
        for name, fn in compiled:
            try:
                out[name] = fn(row)
            except EvaluationError as exc:
                log_processing_error(query_id, where, str(exc))
                out[name] = None
            if out[name] is None:
                log_processing_error(
                    query_id, where,
                    f"Group-by column {name} resolved to null. The source row will be excluded from the table.",
                )
                return []
        for n in value_names:
            out[n] = row.get(n)
        for m in R.META_NAMES:
            out[m] = row[m]
        return [out]

    df = R.map_rows(source.df, input_schema=source.schema, output_schema=schema, fn=rekey, name=step.ctx)
    internal = (("Aggregate-GroupBy-repartition", _describe(schema, step.internal_formats)),)
    return Built(df, schema, False, source.window, source.internal_schemas + internal)


@builds(StreamGroupByKey)
def build_stream_group_by_key(step: StreamGroupByKey, *, source: Built, ctx: BuildContext) -> Built:
    key_names = [c.name for c in source.schema.key]
    if not key_names:
        raise PlanError(f"Step {step.ctx}: cannot group a stream without key columns by its key.")

    def keep(row: Row) -> list[Row]:
        return [] if row[R.DELETED] or any(row[k] is None for k in key_names) else [row]

    df = R.map_rows(source.df, input_schema=source.schema, output_schema=source.schema, fn=keep, name=step.ctx)
    return source.with_df(df)


@builds(TableGroupBy)
def build_table_group_by(step: TableGroupBy, *, source: Built, ctx: BuildContext) -> Built:
    key_cols, compiled = _key_exprs(step.group_by_expressions, source)
    schema = grouped_schema(source.schema, key_cols, table=True)
    handler = TableGroupByHandler(
        compiled, [c.name for c in schema.value if c.name != PAIRED], ctx.query_id, step.ctx
    )
    table_keys = [c.name for c in source.schema.key]
    df = ctx.runtime.keyed(
        [KeyedInput(source.df, source.schema, 0, lambda row: tuple(row[k] for k in table_keys))],
        handler=handler, output_schema=schema, name=step.ctx,
    )
    internal = (("Aggregate-GroupBy-repartition", _describe(schema, step.internal_formats)),)
    return Built(df, schema, True, None, source.internal_schemas + internal)


def _aggregate(
    step: StreamAggregate | StreamWindowedAggregate | StreamWindowedAggregateV2 | TableAggregate,
    source: Built, ctx: BuildContext, make: Callable[..., Any], *, forward_headers: bool = False,
) -> Built:
    key_cols = [source.schema.find(k) for k in step.key_column_names]
    if any(c is None for c in key_cols):
        raise PlanError(
            f"Step {step.ctx}: key columns {', '.join(step.key_column_names)} are not all in its input."
        )
    calls = compile_aggregate_calls(step.aggregation_functions, source.expression_columns(), ctx.config)
    schema = aggregate_schema(
        [c for c in key_cols if c is not None], [Column(c.alias, c.return_type) for c in calls]
    )
    having = None
    if step.having is not None:
        columns = dict(PSEUDO_COLUMNS)
        if isinstance(step, StreamWindowedAggregate | StreamWindowedAggregateV2):
            columns.update(WINDOW_BOUNDS)
        columns.update(schema.types())
        having = compile_expression(step.having, columns)
    handler = make(
        step.key_column_names, calls, ctx.query_id, step.ctx, having=having, forward_headers=forward_headers
    )
    names = step.key_column_names

    def group_key(row: Row) -> tuple[Any, ...] | None:
        key = tuple(row[k] for k in names)
        return None if any(v is None for v in key) else key

    df = ctx.runtime.keyed(
        [KeyedInput(source.df, source.schema, 0, group_key)],
        handler=handler, output_schema=schema, name=step.ctx,
    )
    window = None
    if isinstance(step, StreamWindowedAggregate | StreamWindowedAggregateV2):
        from engine.plan.steps import WindowInfo

        w = step.window
        window = WindowInfo(type=w.type, size_ms=w.size_ms if w.type != "SESSION" else None)
    internal = (("Aggregate-Aggregate-Materialize", _describe(schema, step.internal_formats)),)
    return Built(df, schema, True, window, source.internal_schemas + internal)


@builds(StreamAggregate)
def build_stream_aggregate(step: StreamAggregate, *, source: Built, ctx: BuildContext) -> Built:
    return _aggregate(step, source, ctx, StreamAggregateHandler)


def stream_aggregate_forwarding_headers(step: StreamAggregate, *, source: Built, ctx: BuildContext) -> Built:
    """``streamAggregateV1``'s build, each output record carrying the headers of the input
    record that triggered it (how the native versions that forward headers fall back)."""
    return _aggregate(step, source, ctx, StreamAggregateHandler, forward_headers=True)


@builds(StreamWindowedAggregate)
def build_stream_windowed_aggregate(
    step: StreamWindowedAggregate, *, source: Built, ctx: BuildContext
) -> Built:
    return _windowed_aggregate(step, source, ctx, forward_headers=False)


@builds(StreamWindowedAggregateV2)
def build_stream_windowed_aggregate_v2(
    step: StreamWindowedAggregateV2, *, source: Built, ctx: BuildContext
) -> Built:
    """V1, each output record carrying the headers of the input record that triggered it."""
    return _windowed_aggregate(step, source, ctx, forward_headers=True)


def _windowed_aggregate(
    step: StreamWindowedAggregate | StreamWindowedAggregateV2, source: Built, ctx: BuildContext, *,
    forward_headers: bool,
) -> Built:
    cls = SessionAggregateHandler if step.window.type == "SESSION" else TimeWindowedAggregateHandler

    def make(*args: Any, **kwargs: Any) -> Any:
        return cls(*args, window=step.window, **kwargs)

    return _aggregate(step, source, ctx, make, forward_headers=forward_headers)


@builds(TableAggregate)
def build_table_aggregate(step: TableAggregate, *, source: Built, ctx: BuildContext) -> Built:
    return _aggregate(step, source, ctx, TableAggregateHandler)


def table_aggregate_forwarding_headers(step: TableAggregate, *, source: Built, ctx: BuildContext) -> Built:
    """``tableAggregateV1``'s build, each output record carrying the headers of the input
    record that triggered it (how the native versions that forward headers fall back)."""
    return _aggregate(step, source, ctx, TableAggregateHandler, forward_headers=True)


@builds(TableSuppress)
def build_table_suppress(step: TableSuppress, *, source: Built, ctx: BuildContext) -> Built:
    if source.window is None:
        raise PlanError(f"Step {step.ctx}: EMIT FINAL needs a windowed input.")
    df = ctx.runtime.suppress(source.df, source.schema, step.grace_ms, name=step.ctx)
    internal = (("Suppress-buffer", _describe(source.schema, Formats(key_format="KAFKA", value_format="JSON"))),)
    return Built(df, source.schema, True, source.window, source.internal_schemas + internal)


@builds(TableSuppressV2)
def build_table_suppress_v2(step: TableSuppressV2, *, source: Built, ctx: BuildContext) -> Built:
    if source.window is None:
        raise PlanError(f"Step {step.ctx}: EMIT FINAL needs a windowed input.")
    df = ctx.runtime.suppress(
        source.df, source.schema, step.grace_ms, name=step.ctx, retention_ms=step.retention_ms
    )
    internal = (("Suppress-buffer", _describe(source.schema, Formats(key_format="KAFKA", value_format="JSON"))),)
    return Built(df, source.schema, True, source.window, source.internal_schemas + internal)
