"""Builders of the native source and sink steps (V2): Kafka bytes read and written by Spark.

A V2 source asks the runtime for the topic's records as Kafka bytes
(``Runtime.read_topic_bytes``) and decodes them with Spark's own functions: ``from_json``
for JSON (every field read as its JSON text, then converted with ksqlDB's coercions),
binary arithmetic for the KAFKA format, UTF-8 validation. A V2 sink encodes with
``to_json`` and binary functions and hands the runtime Kafka bytes (``Built.encoded``).

Exactness comes first. Each record's native reading is checked for everything Spark would
read differently from the V1 Python serdes: a field whose text ksqlDB coerces (a numeric
string, a fractional number for an INT, a number for a STRING, ...), a field whose name
differs only in case, a value that is not a JSON object, invalid UTF-8, a KAFKA value of the
wrong length, a null or negative timestamp, a DOUBLE that is not finite. Such a record goes
to Python: an Arrow Python UDF, called with NULL for every other record, runs the V1 serdes
on its bytes, and its result (or, when the record cannot be read, its absence and a
processing-log entry) replaces the native one. The UDF is the only Python in the step's
physical plan, and it does per-record work only for those records.

The native path covers the formats and types below (``native_reason`` says why a step
falls back); a step outside them builds exactly as its V1 version does, through the V1
Python serdes:

- keys: none, KAFKA (INT, BIGINT, STRING), JSON (BOOLEAN, INT, BIGINT, DOUBLE, STRING);
- values: NONE, JSON (wrapped or unwrapped; the same types), KAFKA (INT, BIGINT, STRING);
- non-windowed topics; a timestamp column of type BIGINT or none.

One difference from V1 is deliberate: text after a complete JSON value (``{"A":1} x``) is
ignored, as ksqlDB's Jackson reader ignores it; V1's Python parser drops such a record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from engine.builders.context import BuildContext, Built, log_processing_error
from engine.builders.formats import serdes_for
from engine.builders.native import ExpressionReport, report_io
from engine.builders.native_forms import native_reason
from engine.builders.sinks import build_stream_sink, build_table_sink
from engine.builders.sources import (
    build_stream_source,
    build_table_source,
    invalid_timestamp,
    timestamp_extractor,
)
from engine.builders.walker import builds
from engine.errors import KsqlError, SchemaRegistryUnavailableError
from engine.plan import steps as S
from engine.plan import types as T
from engine.plan.schema import Column, LogicalSchema, Namespace
from engine.plan.steps_native import (
    StreamSinkV2,
    StreamSinkV3,
    StreamSinkV4,
    StreamSinkV5,
    StreamSourceV2,
    StreamSourceV3,
    StreamSourceV4,
    StreamSourceV5,
    StreamSourceV6,
    TableSinkV2,
    TableSinkV3,
    TableSinkV4,
    TableSinkV5,
    TableSourceV2,
    TableSourceV3,
    TableSourceV4,
)
from engine.runtime import processing_log
from engine.runtime import rows as R
from engine.runtime.adapter import TopicCodec
from engine.runtime.convert import spark_type
from engine.serde import RecordSerde
from engine.serde.formats import deserialization_failure

_KAFKA_WIDTH = {T.BaseType.INTEGER: 4, T.BaseType.BIGINT: 8}
_RANGES = {T.BaseType.INTEGER: (T.INT_MIN, T.INT_MAX), T.BaseType.BIGINT: (T.BIGINT_MIN, T.BIGINT_MAX)}
# Text Spark and ksqlDB read alike for each type; other non-null text goes to Python.
_INTEGER_TEXT = r"^[+-]?[0-9]+$"
_DOUBLE_TEXT = r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
# A STRING field's text from a JSON string token is exact; from a fractional number (Jackson
# re-prints it), an object or an array (nested numbers) it may not be: those go to Python.
# A string that looks like one of them goes too (Python gives it the same value).
_STRING_SUSPECT = r'^(["\[{]|-?[0-9]+[.eE])'
_FIELD = "__v"  # the field an unwrapped JSON value is read as


SourceStep = StreamSourceV2 | TableSourceV2
SinkStep = StreamSinkV2 | TableSinkV2
AnySourceStep = (
    SourceStep | StreamSourceV3 | TableSourceV3 | StreamSourceV4 | StreamSourceV5 | StreamSourceV6 | TableSourceV4
)
AnySinkStep = SinkStep | StreamSinkV3 | TableSinkV3 | StreamSinkV4 | TableSinkV4 | StreamSinkV5 | TableSinkV5


# --------------------------------------------------------------------------- what is native


def _report(step: S.Step, schema_columns: Sequence[Column], reason: str | None) -> None:
    how = "native" if reason is None else f"fallback: {reason}"
    for c in schema_columns:
        if c.namespace is not Namespace.HEADERS:
            report_io(ExpressionReport(step.ctx, step.TYPE, c.name, f"{c.namespace.value} {c.type}", how))


# --------------------------------------------------------------------------- decoding


@dataclass(frozen=True)
class _Read:
    """A column's native value and whether this record needs Python to read it exactly."""

    value: SparkColumn
    python: SparkColumn


def _read_text(raw: SparkColumn, t: T.SqlType) -> _Read:
    """A column from its JSON text (NULL: absent or JSON null), with ksqlDB's coercions."""
    base = t.base
    present = raw.isNotNull()
    if base is T.BaseType.STRING:
        return _Read(raw, present & raw.rlike(_STRING_SUSPECT))
    if base is T.BaseType.BOOLEAN:
        low = F.lower(raw)
        ok = low.isin("true", "false")
        return _Read(F.when(ok, low == F.lit("true")), present & ~ok)
    if base in _RANGES:
        number, fits = integer_text(raw, t)
        return _Read(F.when(fits, number).cast(spark_type(t)), present & ~fits)
    ok = raw.rlike(_DOUBLE_TEXT)
    return _Read(F.when(ok, raw.try_cast("double")), present & ~ok)


def integer_text(text: SparkColumn, t: T.SqlType) -> tuple[SparkColumn, SparkColumn]:
    """The number an INT or BIGINT column's text reads as (a BIGINT) and whether it is one
    that fits ``t``'s range (never NULL). ``try_cast`` gives NULL beyond BIGINT's range; the
    pattern refuses what Spark's cast accepts but ksqlDB does not (surrounding white space)."""
    low_bound, high_bound = _RANGES[t.base]
    number = F.when(text.rlike(_INTEGER_TEXT), text.try_cast("bigint"))
    return number, F.coalesce(number.between(low_bound, high_bound), F.lit(False))


def _read_kafka(data: SparkColumn, t: T.SqlType) -> _Read:
    """A KAFKA-format column from its bytes (INT / BIGINT big-endian, UTF-8 STRING)."""
    present = data.isNotNull()
    if t.base is T.BaseType.STRING:
        ok = F.is_valid_utf8(data.cast("string"))
        return _Read(F.when(ok, data.cast("string")), present & ~ok)
    width = _KAFKA_WIDTH[t.base]
    ok = F.octet_length(data) == width
    if width == 8:
        signed = F.conv(F.hex(data), 16, -10).try_cast("bigint")  # a negative base reads two's complement
    else:
        unsigned = F.conv(F.hex(data), 16, 10).try_cast("bigint")
        signed = F.when(unsigned >= F.lit(2**31), unsigned - F.lit(2**32)).otherwise(unsigned)
    return _Read(F.when(ok, signed).cast(spark_type(t)), present & ~F.coalesce(ok, F.lit(False)))


def _read_json(data: SparkColumn, serde: RecordSerde, parsed_name: str) -> tuple[SparkColumn, dict[str, _Read]]:
    """A JSON key or value parsed once (each field as its JSON text, to be added to the rows
    as ``parsed_name``), and each column read from it with whether the record needs Python."""
    text = data.cast("string")
    columns = serde.columns
    parsed = F.col(parsed_name)
    valid = F.is_valid_utf8(text)
    trimmed_null = F.trim(text) == F.lit("null")
    if not serde.wrapped:
        (column,) = columns
        parse = F.from_json(F.concat(F.lit('{"' + _FIELD + '":'), text, F.lit("}")), f"`{_FIELD}` string")
        read = _read_text(parsed.getField(_FIELD), column.type)
        unreadable = parsed.getField(_FIELD).isNull() & ~trimmed_null
        return parse, {column.name: _Read(read.value, read.python | unreadable | ~valid)}
    parse = F.from_json(text, ST.StructType([ST.StructField(c.name, ST.StringType()) for c in columns]))
    reads = {c.name: _read_text(parsed.getField(c.name), c.type) for c in columns}
    any_missing = F.lit(False)
    for c in columns:
        any_missing = any_missing | parsed.getField(c.name).isNull()
    # Only a record with a missing field can be unreadable (not a JSON object) or name a
    # column in another case: list its keys then.
    keys = F.when(any_missing, F.json_object_keys(text))
    names = F.array(*[F.lit(c.name) for c in columns])
    other_case = F.exists(keys, lambda k: ~F.array_contains(names, k) & F.array_contains(names, F.upper(k)))
    unreadable = any_missing & ((keys.isNull() & ~trimmed_null) | F.coalesce(other_case, F.lit(False)))
    python = unreadable | ~valid
    return parse, {name: _Read(r.value, r.python | python) for name, r in reads.items()}


def _read_part(data: SparkColumn, serde: RecordSerde, parsed_name: str) -> tuple[SparkColumn | None, dict[str, _Read]]:
    """The columns of a record's key or value from its bytes (none for no columns), and the
    parse to add as ``parsed_name`` first (None: nothing to parse)."""
    if not serde.columns:
        return None, {}
    if serde.format.name == "KAFKA":
        (column,) = serde.columns
        return None, {column.name: _read_kafka(data, column.type)}
    return _read_json(data, serde, parsed_name)


def _any(flags: Sequence[SparkColumn]) -> SparkColumn:
    out = F.lit(False)
    for flag in flags:
        out = out | F.coalesce(flag, F.lit(False))
    return out


def _python_source_reader(
    step: AnySourceStep, codec: TopicCodec, is_table: bool, ctx: BuildContext
) -> Callable[[Any], Any]:
    """The V1 serdes over one record's bytes: its columns and ROWTIME, or None to skip it."""
    schema = step.source_schema
    key_names = [c.name for c in schema.key]
    value_names = [c.name for c in schema.value]
    extract_ts = timestamp_extractor(step.timestamp_column, schema)
    ts_column = step.timestamp_column
    query_id, where, topic = ctx.query_id, step.ctx, step.topic

    def read(record: Any) -> Any:
        if record is None:
            return None
        place = f"partition {record['partition']} offset {record['offset']}"
        row: dict[str, Any] = {}
        try:
            key_row = codec.key.deserialize(codec.key.from_bytes(record["key"])) if key_names else None
        except KsqlError as exc:
            log_processing_error(query_id, where, deserialization_failure(codec.key.format.name, "key", topic, exc),
                                 type=processing_log.DESERIALIZATION, target="key", topic=topic, record=record["key"],
                                 cause=[f"{exc} ({place})"])
            return None
        key_row = key_row or {}
        for n in key_names:
            row[n] = key_row.get(n)
        if is_table and key_names and all(row[n] is None for n in key_names):
            return None
        deleted = record["value"] is None
        value_row: dict[str, Any] = {}
        if not deleted:
            try:
                value_row = codec.value.deserialize(codec.value.from_bytes(record["value"])) or {}
            except KsqlError as exc:
                log_processing_error(query_id, where,
                                     deserialization_failure(codec.value.format.name, "value", topic, exc),
                                     type=processing_log.DESERIALIZATION, target="value", topic=topic,
                                     record=record["value"], cause=[f"{exc} ({place})"])
                return None
        for n in value_names:
            row[n] = value_row.get(n)
        rowtime = record["ts"]
        if extract_ts is not None and not deleted:
            try:
                rowtime = extract_ts(row)
            except Exception as exc:  # noqa: BLE001 - any parse failure skips the record, as in V1
                log_processing_error(query_id, where, f"Failed to extract the timestamp of {place}: {exc}")
                invalid_timestamp(ts_column, str(exc))
                return None
            if rowtime is None:
                invalid_timestamp(ts_column, "the timestamp column's value is null")
            if rowtime is None or rowtime < 0:
                log_processing_error(query_id, where, f"The timestamp of {place} is null or negative.")
                return None
        return {**{R.spark_name(n): v for n, v in row.items()}, R.ROWTIME: rowtime}

    return read


def _named(key: str) -> Callable[[SparkColumn], SparkColumn]:
    """A one-argument predicate for ``F.filter``: the header is named ``key``."""
    return lambda h: h.getField("KEY") == F.lit(key)


def _header_columns(schema: LogicalSchema) -> dict[str, SparkColumn]:
    out: dict[str, SparkColumn] = {}
    headers = F.col(R.HEADERS)
    for c in schema.headers:
        if c.header_key is None:
            out[c.name] = headers.cast(spark_type(c.type))
        else:
            matches = F.filter(headers, _named(c.header_key))
            out[c.name] = F.try_element_at(matches, F.lit(-1)).getField("VALUE")
    return out


def _build_native_source(step: SourceStep, ctx: BuildContext, *, is_table: bool) -> Built:
    schema = step.source_schema
    codec = TopicCodec(*serdes_for(step.formats, schema.columns))
    raw = ctx.runtime.read_topic_bytes(step.topic, codec)
    deleted = F.col("__value").isNull()
    key_parse, key_reads = _read_part(F.col("__key"), codec.key, "__key_fields")
    value_parse, value_reads = _read_part(F.col("__value"), codec.value, "__value_fields")
    reads = {**key_reads, **value_reads}
    parses = [p.alias(n) for p, n in ((key_parse, "__key_fields"), (value_parse, "__value_fields")) if p is not None]
    if parses:
        raw = raw.select("*", *parses)
    # Each column's native value once, before the Python pass reads the flags.
    reads = {name: _Read(F.col(f"__n{i}"), r.python) for i, (name, r) in enumerate(reads.items())}
    raw = raw.select("*", *[r.value.alias(f"__n{i}") for i, r in enumerate({**key_reads, **value_reads}.values())])
    value_names = {c.name for c in schema.value}
    rowtime = F.col("__ts")
    python_flags = [
        (r.python & ~deleted) if name in value_names else r.python for name, r in reads.items()
    ]
    if step.timestamp_column is not None:
        column = schema.find(step.timestamp_column.column)
        if column is not None:
            native_ts = reads[column.name].value
            rowtime = F.when(deleted, rowtime).otherwise(native_ts)
            python_flags.append(~deleted & (native_ts.isNull() | (native_ts < 0)))
    needs_python = _any(python_flags)
    user_fields = [ST.StructField(R.spark_name(c.name), spark_type(c.type)) for c in schema.key + schema.value]
    python_type = ST.StructType([*user_fields, ST.StructField(R.ROWTIME, ST.LongType())])
    reader = _python_source_reader(step, codec, is_table, ctx)
    python_read = F.udf(reader, python_type, useArrow=True).asNondeterministic()
    record = F.struct(
        F.col("__key").alias("key"), F.col("__value").alias("value"), F.col("__ts").alias("ts"),
        F.col("__partition").alias("partition"), F.col("__offset").alias("offset"),
    )
    staged = raw.select("*", needs_python.alias("__python"))
    staged = staged.select("*", python_read(F.when(F.col("__python"), record)).alias("__read"))
    if is_table and schema.key:
        staged = staged.filter(~F.col("__python") & _any([reads[c.name].value.isNotNull() for c in schema.key])
                               | F.col("__python") & F.col("__read").isNotNull())
    else:
        staged = staged.filter(~F.col("__python") | F.col("__read").isNotNull())

    def pick(name: str, native: SparkColumn) -> SparkColumn:
        return F.when(F.col("__python"), F.col("__read").getField(name)).otherwise(native)

    natives = {name: r.value for name, r in reads.items()}
    out = source_columns(schema, natives, pick, deleted, rowtime)
    return Built(df=staged.select(*out), schema=schema, is_table=is_table)


def source_columns(
    schema: LogicalSchema,
    natives: Mapping[str, SparkColumn],
    pick: Callable[[str, SparkColumn], SparkColumn],
    deleted: SparkColumn,
    rowtime: SparkColumn,
) -> list[SparkColumn]:
    """A native source's output columns: each key and value column's native value (a value
    column NULL in a delete) and ROWTIME, as ``pick`` chooses between it and the Python
    reading; header columns; the row metadata."""
    out: list[SparkColumn] = []
    headers = _header_columns(schema)
    for c in schema.columns:
        if c.namespace is Namespace.HEADERS:
            value = headers[c.name]
        elif c.namespace is Namespace.VALUE:
            value = pick(R.spark_name(c.name), F.when(~deleted, natives[c.name]))
        else:
            value = pick(R.spark_name(c.name), natives[c.name])
        out.append(value.cast(spark_type(c.type)).alias(R.spark_name(c.name)))
    meta = {
        R.SEQ: F.col(R.SEQ),
        R.ROWTIME: pick(R.ROWTIME, rowtime),
        R.ROWPARTITION: F.col("__partition"),
        R.ROWOFFSET: F.col("__offset"),
        R.HEADERS: F.col(R.HEADERS),
        R.DELETED: deleted,
        R.WINDOWSTART: F.lit(None).cast("bigint"),
        R.WINDOWEND: F.lit(None).cast("bigint"),
    }
    out.extend(meta[f.name].cast(f.dataType).alias(f.name) for f in R.META_FIELDS)
    return out


def source_or_v1(
    step: AnySourceStep, ctx: BuildContext, *, is_table: bool, native: Callable[..., Built], level: int = 1
) -> Built:
    """A native source built by ``native(step, ctx, is_table=...)``, or exactly as its V1
    version when its formats or columns have no native form at the step version's format
    ``level`` (``engine.builders.native_forms``); how each column runs is reported."""
    reason = native_reason(step.formats, step.source_schema, step.timestamp_column, level=level)
    _report(step, step.source_schema.columns, reason)
    if reason is not None:
        fields: dict[str, Any] = dict(
            ctx=step.ctx, topic=step.topic, formats=step.formats, source_schema=step.source_schema,
            timestamp_column=step.timestamp_column,
        )
        if is_table:
            return build_table_source(S.TableSource(**fields), ctx=ctx)
        return build_stream_source(S.StreamSource(**fields), ctx=ctx)
    return native(step, ctx, is_table=is_table)


def _source(step: SourceStep, ctx: BuildContext, *, is_table: bool) -> Built:
    return source_or_v1(step, ctx, is_table=is_table, native=_build_native_source)


@builds(StreamSourceV2)
def build_stream_source_v2(step: StreamSourceV2, *, ctx: BuildContext) -> Built:
    return _source(step, ctx, is_table=False)


@builds(TableSourceV2)
def build_table_source_v2(step: TableSourceV2, *, ctx: BuildContext) -> Built:
    return _source(step, ctx, is_table=True)


# --------------------------------------------------------------------------- encoding


def _json_text(column: SparkColumn) -> SparkColumn:
    """The JSON text of one value (``to_json`` writes objects only: wrap it, then cut)."""
    wrapped = F.to_json(F.struct(column.alias(_FIELD)), {"ignoreNullFields": "false"})
    start = len('{"' + _FIELD + '":') + 1
    return wrapped.substr(F.lit(start), F.length(wrapped) - F.lit(start))


def _write_part(serde: RecordSerde, row: dict[str, SparkColumn]) -> tuple[SparkColumn, SparkColumn]:
    """A key's or value's bytes, and whether the record needs Python to write them exactly."""
    doubles = [row[c.name] for c in serde.columns if c.type.base is T.BaseType.DOUBLE]
    python = _any([F.isnan(d) | (F.abs(d) == F.lit(float("inf"))) for d in doubles])
    return _part_bytes(serde, row), python


def _part_bytes(serde: RecordSerde, row: dict[str, SparkColumn]) -> SparkColumn:
    """A key's or value's bytes, written by Spark."""
    columns = serde.columns
    if serde.format.name == "KAFKA":
        (column,) = columns
        value = row[column.name]
        if column.type.base is T.BaseType.STRING:
            return F.encode(value, "UTF-8")
        width = _KAFKA_WIDTH[column.type.base]
        bits = value.cast("bigint")
        if width == 4:
            bits = bits.bitwiseAND(F.lit(0xFFFFFFFF))
        return F.unhex(F.lpad(F.hex(bits), 2 * width, "0"))
    if serde.wrapped:
        text = F.to_json(F.struct(*[row[c.name].alias(c.name) for c in columns]), {"ignoreNullFields": "false"})
    else:
        (column,) = columns
        text = _json_text(row[column.name])
    return F.encode(text, "UTF-8")


def _python_sink_writer(step: SinkStep, codec: TopicCodec, ctx: BuildContext, schema: LogicalSchema) -> Any:
    key_names = [c.name for c in schema.key]
    value_names = [c.name for c in schema.value]
    query_id, where, topic = ctx.query_id, step.ctx, step.topic

    def write(record: Any) -> Any:
        if record is None:
            return None
        row = {n: record[R.spark_name(n)] for n in key_names + value_names}
        try:
            key_row = {n: row[n] for n in key_names}
            key = None
            if any(v is not None for v in key_row.values()):
                key = codec.key.to_bytes(codec.key.serialize(key_row))
            value = None
            if not record[R.DELETED]:
                value = codec.value.to_bytes(codec.value.serialize({n: row[n] for n in value_names}))
        except SchemaRegistryUnavailableError:
            raise  # the query fails and restarts: no record is skipped
        except KsqlError as exc:
            log_processing_error(query_id, where, f"Failed to serialise the record: {exc}",
                                 type=processing_log.SERIALIZATION, topic=topic)
            return None
        return {"key": key, "value": value}

    return write


def _build_native_sink(step: SinkStep, source: Built, ctx: BuildContext) -> Built:
    schema = source.schema
    codec = TopicCodec(*serdes_for(step.formats, schema.columns))
    row = {c.name: F.col(R.spark_name(c.name)) for c in schema.columns}
    deleted = F.coalesce(F.col(R.DELETED), F.lit(False))
    key_bytes, key_python = _write_part(codec.key, row) if schema.key else (F.lit(None).cast("binary"), F.lit(False))
    any_key = _any([row[c.name].isNotNull() for c in schema.key])
    key_bytes = F.when(any_key, key_bytes)
    if codec.value.columns:
        value_bytes, value_python = _write_part(codec.value, row)
    else:  # no value columns: what V1 writes for an empty row (JSON: {}; NONE: nothing)
        empty = codec.value.to_bytes(codec.value.serialize({}))
        value_bytes = F.lit(None if empty is None else bytearray(empty)).cast("binary")
        value_python = F.lit(False)
    value_bytes = F.when(~deleted, value_bytes)
    needs_python = (any_key & key_python) | (~deleted & value_python)
    python_type = ST.StructType([ST.StructField("key", ST.BinaryType()), ST.StructField("value", ST.BinaryType())])
    writer = F.udf(_python_sink_writer(step, codec, ctx, schema), python_type, useArrow=True).asNondeterministic()
    record = F.struct(*[F.col(R.spark_name(c.name)) for c in schema.key + schema.value], F.col(R.DELETED))
    staged = source.df.select("*", needs_python.alias("__python"))
    staged = staged.select("*", writer(F.when(F.col("__python"), record)).alias("__written"))
    staged = staged.filter(~F.col("__python") | F.col("__written").isNotNull())
    ts = F.col(R.ROWTIME)
    if step.timestamp_column is not None:
        column = schema.find(step.timestamp_column.column)
        if column is not None:
            ts = F.when(deleted, ts).otherwise(row[column.name].cast("bigint"))
    python = F.col("__python")
    out = staged.select(
        F.col(R.SEQ),
        F.when(python, F.col("__written").getField("key")).otherwise(key_bytes).alias("__key"),
        F.when(python, F.col("__written").getField("value")).otherwise(value_bytes).alias("__value"),
        ts.alias("__ts"),
        F.col(R.ROWPARTITION).alias("__partition"),
        F.lit(None).cast("bigint").alias("__offset"),
        F.col(R.HEADERS),
        F.lit(None).cast("bigint").alias("__wstart"),
        F.lit(None).cast("bigint").alias("__wend"),
    )
    return Built(df=out, schema=schema, is_table=source.is_table, window=source.window,
                 internal_schemas=source.internal_schemas, codec=codec)


def sink_or_v1(
    step: AnySinkStep, source: Built, ctx: BuildContext, *, is_table: bool, native: Callable[..., Built]
) -> Built:
    """A native sink built by ``native(step, source, ctx)``, or exactly as its V1 version when
    its formats or columns have no native form; how each column runs is reported."""
    reason = native_reason(step.formats, source.schema, step.timestamp_column, windowed=source.window is not None)
    _report(step, [c for c in source.schema.columns if c.namespace is not Namespace.HEADERS], reason)
    if reason is not None:
        v1 = S.TableSink if is_table else S.StreamSink
        legacy = v1(ctx=step.ctx, source=step.source, topic=step.topic, formats=step.formats,
                    timestamp_column=step.timestamp_column)
        builder = build_table_sink if is_table else build_stream_sink
        return builder(legacy, source=source, ctx=ctx)
    return native(step, source, ctx)


def _sink(step: SinkStep, source: Built, ctx: BuildContext, *, is_table: bool) -> Built:
    return sink_or_v1(step, source, ctx, is_table=is_table, native=_build_native_sink)


@builds(StreamSinkV2)
def build_stream_sink_v2(step: StreamSinkV2, *, source: Built, ctx: BuildContext) -> Built:
    return _sink(step, source, ctx, is_table=False)


@builds(TableSinkV2)
def build_table_sink_v2(step: TableSinkV2, *, source: Built, ctx: BuildContext) -> Built:
    return _sink(step, source, ctx, is_table=True)
