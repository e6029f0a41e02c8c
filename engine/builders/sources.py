"""Builders of source steps: raw topic records -> typed stream or table rows."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from engine.builders.context import BuildContext, Built, log_processing_error
from engine.builders.formats import serdes_for
from engine.builders.walker import builds
from engine.data.values import timestamp_to_millis
from engine.errors import KsqlError, QueryFailure
from engine.plan import types as T
from engine.plan.schema import Column, LogicalSchema, Namespace
from engine.plan.steps import (
    StreamSource,
    TableSource,
    TimestampColumn,
    WindowedStreamSource,
    WindowedTableSource,
    WindowInfo,
)
from engine.runtime import processing_log
from engine.runtime import rows as R
from engine.runtime.adapter import TopicCodec
from engine.serde.formats import deserialization_failure

SourceStep = StreamSource | TableSource | WindowedStreamSource | WindowedTableSource


def timestamp_extractor(
    column: TimestampColumn | None, schema: LogicalSchema
) -> Callable[[dict[str, Any]], int | None] | None:
    """A function giving a row's ROWTIME from its TIMESTAMP column, or None to keep the record time."""
    if column is None:
        return None
    col = schema.find(column.column)
    if col is None:
        return None
    name, base = col.name, col.type.base
    if base is T.BaseType.TIMESTAMP:
        return lambda row: None if row[name] is None else timestamp_to_millis(row[name])
    if base is T.BaseType.STRING:
        from engine.functions import REGISTRY

        parse = REGISTRY.resolve("STRINGTOTIMESTAMP", [T.STRING, T.STRING])
        pattern = column.format or "yyyy-MM-dd'T'HH:mm:ss.SSS"
        return lambda row: parse.invoke([row[name], pattern])
    return lambda row: row[name]


def invalid_timestamp(column: TimestampColumn | None, cause: str) -> None:
    """Raise ``QueryFailure`` where the source's timestamp column stops the query on a record
    whose timestamp cannot be extracted (ksqlDB's ``ksql.timestamp.throw.on.invalid=true``);
    otherwise return, and the caller logs and skips the record."""
    if column is not None and column.throw_on_invalid:
        raise QueryFailure(f"Failed to extract timestamp from row: {cause}")


def _build_source(step: SourceStep, ctx: BuildContext, *, is_table: bool, window: WindowInfo | None) -> Built:
    schema = step.source_schema
    key_serde, value_serde = serdes_for(step.formats, schema.columns)
    key_names = [c.name for c in schema.key]
    value_names = [c.name for c in schema.columns if c.namespace is Namespace.VALUE]
    header_columns: list[Column] = list(schema.headers)
    extract_ts = timestamp_extractor(step.timestamp_column, schema)
    ts_column = step.timestamp_column
    query_id, where, topic = ctx.query_id, step.ctx, step.topic

    def failed(serde: Any, target: str, exc: KsqlError) -> None:
        log_processing_error(query_id, where, deserialization_failure(serde.format.name, target, topic, exc),
                             type=processing_log.DESERIALIZATION, target=target, topic=topic, cause=[str(exc)])

    def deserialize(raw: dict[str, Any]) -> list[dict[str, Any]]:
        key_data = pickle.loads(raw["__key"])
        value_data = pickle.loads(raw["__value"])
        row: dict[str, Any] = {}
        try:
            key_row = key_serde.deserialize(key_data) if key_names else None
        except KsqlError as exc:
            failed(key_serde, "key", exc)
            return []
        key_row = key_row or {}
        for n in key_names:
            row[n] = key_row.get(n)
        if is_table and key_names and all(row[n] is None for n in key_names):
            return []  # a table row needs a key
        deleted = value_data is None  # a tombstone: a table delete, or a stream's null value
        if not deleted:
            try:
                value_row = value_serde.deserialize(value_data) or {}
            except KsqlError as exc:
                failed(value_serde, "value", exc)
                return []
            for n in value_names:
                row[n] = value_row.get(n)
        else:
            for n in value_names:
                row[n] = None
        headers = raw[R.HEADERS] or []
        for c in header_columns:
            if c.header_key is None:
                row[c.name] = [{"KEY": h["KEY"], "VALUE": h["VALUE"]} for h in headers]
            else:
                matches = [h["VALUE"] for h in headers if h["KEY"] == c.header_key]
                row[c.name] = matches[-1] if matches else None
        rowtime = raw["__ts"]
        if extract_ts is not None and not deleted:
            try:
                rowtime = extract_ts(row)
            except Exception as exc:  # noqa: BLE001 - any parse failure skips the record
                log_processing_error(query_id, where, f"Failed to extract the timestamp: {exc}")
                invalid_timestamp(ts_column, str(exc))
                return []
            if rowtime is None:
                invalid_timestamp(ts_column, "the timestamp column's value is null")
            if rowtime is None or rowtime < 0:
                log_processing_error(query_id, where, "The record's timestamp is null or negative.")
                return []
        row.update(
            {
                R.SEQ: raw[R.SEQ],
                R.ROWTIME: rowtime,
                R.ROWPARTITION: raw["__partition"],
                R.ROWOFFSET: raw["__offset"],
                R.HEADERS: headers,
                R.DELETED: deleted,
                R.WINDOWSTART: raw["__wstart"] if window is not None else None,
                R.WINDOWEND: raw["__wend"] if window is not None else None,
            }
        )
        return [row]

    window_type = None if window is None else ("SESSION" if window.type == "SESSION" else "TIME")
    codec = TopicCodec(key_serde, value_serde, window_type, window.size_ms if window else None)
    raw = ctx.runtime.read_topic(step.topic, codec)
    df = R.map_rows(
        raw,
        input_schema=None,
        output_schema=schema,
        fn=deserialize,
        name=step.ctx,
        input_fields=[f.name for f in R.RAW_FIELDS],
    )
    return Built(df=df, schema=schema, is_table=is_table, window=window)


@builds(StreamSource)
def build_stream_source(step: StreamSource, *, ctx: BuildContext) -> Built:
    return _build_source(step, ctx, is_table=False, window=None)


@builds(WindowedStreamSource)
def build_windowed_stream_source(step: WindowedStreamSource, *, ctx: BuildContext) -> Built:
    return _build_source(step, ctx, is_table=False, window=step.window_info)


@builds(TableSource)
def build_table_source(step: TableSource, *, ctx: BuildContext) -> Built:
    return _build_source(step, ctx, is_table=True, window=None)


@builds(WindowedTableSource)
def build_windowed_table_source(step: WindowedTableSource, *, ctx: BuildContext) -> Built:
    return _build_source(step, ctx, is_table=True, window=step.window_info)
