"""Builders of ``streamSinkV4`` and ``tableSinkV4``: sinks that write a registered schema's
every field; and of ``streamSinkV5`` and ``tableSinkV5``, which build as V4 and put a windowed
record in the partition of its key without the window (``Built.base_key_partitions``: the
runtimes place the records, ``engine.data.partitioner``).

A CREATE ... AS SELECT that names KEY/VALUE_SCHEMA_ID writes its records with that
registered schema, whose fields may go on past the sink's columns (the planner checks that
they start with them). ksqlDB fills the fields the sink has no column for as the schema says:

- AVRO: the field's ``default``; else null when its type is a union with ``null``; else the
  record cannot be written, and the query stops ("Unable to serialize record");
- PROTOBUF: proto3's default for the field's type (``""``, ``0``, ``false``, an empty list or
  map; null for a message), or null under a ``nullable_representation``;
- JSON_SR: null.

The sink is ``tableSinkV3``/``streamSinkV3`` otherwise. The schema is read from the registry
when the query is built (``BuildContext.schema_registry_url``), so a run needs the registry
its statements were planned against. Registry formats have no native form, so such a sink
serialises in Python as the V1 sink does, and adds the fields to each record it writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.builders import native_io_v3
from engine.builders.context import BuildContext, Built
from engine.builders.native_forms import native_reason
from engine.builders.native_io import _report
from engine.builders.sinks import build_python_sink
from engine.builders.walker import builds
from engine.errors import AnalysisError, ExecutionError, SinkSerializationFailure
from engine.plan import steps as S
from engine.plan import types as T
from engine.plan.schema import Column, Namespace
from engine.plan.steps_native import StreamSinkV4, StreamSinkV5, TableSinkV4, TableSinkV5
from engine.serde.formats import (
    AVRO,
    JSON_SR,
    NULLABLE_REPRESENTATION,
    PROTOBUF,
    SCHEMA_FULL_NAME,
    SCHEMA_ID,
    SUBJECT_NAME,
)

_PROTO3_DEFAULTS: dict[T.BaseType, Any] = {
    T.BaseType.STRING: "",
    T.BaseType.INTEGER: 0,
    T.BaseType.BIGINT: 0,
    T.BaseType.DOUBLE: 0.0,
    T.BaseType.BOOLEAN: False,
}

# The sink versions built here: V4, and V5, which builds as V4 and places windowed records.
RegisteredSinkStep = StreamSinkV4 | TableSinkV4 | StreamSinkV5 | TableSinkV5


@dataclass(frozen=True)
class ExtraField:
    """A field of a registered schema that a sink has no column for: what it is written as,
    or ``required`` when the schema gives it nothing (the record cannot be written)."""

    name: str
    fill: Any = None
    required: bool = False


@dataclass(frozen=True)
class RegisteredExtras:
    """The fields a key or value gets from its registered schema, and where they come from."""

    what: str  # "key" or "value"
    schema_id: int
    fields: tuple[ExtraField, ...]

    def apply(self, data: Any) -> Any:
        """``data`` (a serialised key or value in QTT form) with the extra fields; raises
        ``SinkSerializationFailure`` for a required one. A null (a tombstone) stays null."""
        if not isinstance(data, dict):
            return data
        for f in self.fields:
            if f.required:
                raise SinkSerializationFailure(  # kspark's words, then ksqlDB's (its AvroSRSchemaDataTranslator)
                    f"Unable to serialize record: field '{f.name}' of the registered {self.what} schema "
                    f"(id {self.schema_id}) is required, has no default, and the sink has no column for it.\n"
                    f"Missing default value for required Avro field: [{f.name}]. "
                    "This field appears in Avro schema in Schema Registry"
                )
        return {**data, **{f.name: f.fill for f in self.fields}}


def extra_fields(fmt: str, properties: dict[str, str], schema_text: str, registered: Sequence[tuple[str, T.SqlType]],
                 columns: int) -> tuple[ExtraField, ...]:
    """The fields of a registered schema after a sink's first ``columns`` (``registered``: the
    schema's columns as the planner inferred them, ``schema_text``: the schema as registered)."""
    extras = registered[columns:]
    if fmt == AVRO:
        declared = _avro_fields(schema_text)
        return tuple(_avro_extra(name, declared.get(name, {})) for name, _ in extras)
    if fmt == PROTOBUF and NULLABLE_REPRESENTATION not in properties:
        return tuple(ExtraField(name, _proto3_default(t)) for name, t in extras)
    return tuple(ExtraField(name) for name, _ in extras)  # JSON_SR, nullable PROTOBUF: null


def _avro_fields(text: str) -> dict[str, dict[str, Any]]:
    schema = json.loads(text)
    if not isinstance(schema, dict) or schema.get("type") != "record":
        return {}
    return {str(f.get("name")): f for f in schema.get("fields", ()) if isinstance(f, dict)}


def _avro_extra(name: str, field: dict[str, Any]) -> ExtraField:
    if "default" in field:
        return ExtraField(name, field["default"])
    kind = field.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return ExtraField(name)
    return ExtraField(name, required=True)


def _proto3_default(t: T.SqlType) -> Any:
    if t.base is T.BaseType.ARRAY:
        return []
    if t.base is T.BaseType.MAP:
        return {}
    return _PROTO3_DEFAULTS.get(t.base)


def registered_extras(step: RegisteredSinkStep, columns: Sequence[Column],
                      ctx: BuildContext) -> list[RegisteredExtras]:
    """The key and value fields ``step`` writes from its registered schemas (none when its
    formats name no schema id, or the schemas have no field past the sink's columns)."""
    from engine.serde.schema_inference import fetch_schema, infer_columns

    f = step.formats
    out = []
    for what, fmt, props, features in (("key", f.key_format, f.key_properties, ()),
                                      ("value", f.value_format, f.value_properties, f.value_features)):
        properties = dict(props)
        subject = properties.get(SUBJECT_NAME) if SCHEMA_ID not in properties else None
        if (SCHEMA_ID not in properties and subject is None) or fmt not in (AVRO, JSON_SR, PROTOBUF):
            continue
        named_id = int(properties[SCHEMA_ID]) if subject is None else None
        namespace = Namespace.KEY if what == "key" else Namespace.VALUE
        mine = [c for c in columns if c.namespace is namespace]
        try:
            # ksqlDB's PROTOBUF serde writes with the latest schema of a subjectName it is given
            # no schema id with (ProtobufSerdeFactory), as with that schema's id.
            schema = fetch_schema(ctx.schema_registry_url(), step.topic, is_key=what == "key", schema_id=named_id,
                                  subject=subject)
            registered = infer_columns(
                schema, fmt=fmt, topic=step.topic, is_key=what == "key", unwrapped="UNWRAP_SINGLES" in features,
                keep_names=True, full_name=properties.get(SCHEMA_FULL_NAME),
            )
        except AnalysisError as exc:
            where = f"under id {named_id}" if named_id is not None else f"as the latest of subject {subject}"
            raise ExecutionError(
                f"Step {step.ctx} ({step.TYPE}) writes with the {what} schema registered {where}, "
                f"which cannot be read: {exc}"
            ) from None
        fields = extra_fields(fmt, properties, schema.text, registered, len(mine))
        if fields:
            out.append(RegisteredExtras(what, named_id if named_id is not None else schema.schema_id or 0, fields))
    return out


def _sink(step: RegisteredSinkStep, source: Built, ctx: BuildContext, *, is_table: bool) -> Built:
    extras = registered_extras(step, source.schema.columns, ctx)
    if not extras:
        return native_io_v3._sink(step, source, ctx, is_table=is_table)
    reason = native_reason(step.formats, source.schema, step.timestamp_column, windowed=source.window is not None)
    _report(step, list(source.schema.columns), reason or "a registered schema's extra fields are written in Python")
    key_extras = next((e for e in extras if e.what == "key"), None)
    value_extras = next((e for e in extras if e.what == "value"), None)

    def conform(key: Any, value: Any) -> tuple[Any, Any]:
        return (key if key_extras is None else key_extras.apply(key),
                value if value_extras is None else value_extras.apply(value))

    v1 = S.TableSink if is_table else S.StreamSink
    legacy = v1(ctx=step.ctx, source=step.source, topic=step.topic, formats=step.formats,
                timestamp_column=step.timestamp_column)
    return build_python_sink(legacy, source, ctx, conform)


@builds(StreamSinkV4)
def build_stream_sink_v4(step: StreamSinkV4, *, source: Built, ctx: BuildContext) -> Built:
    return _sink(step, source, ctx, is_table=False)


@builds(TableSinkV4)
def build_table_sink_v4(step: TableSinkV4, *, source: Built, ctx: BuildContext) -> Built:
    return _sink(step, source, ctx, is_table=True)


@builds(StreamSinkV5)
def build_stream_sink_v5(step: StreamSinkV5, *, source: Built, ctx: BuildContext) -> Built:
    return replace(_sink(step, source, ctx, is_table=False), base_key_partitions=source.window is not None)


@builds(TableSinkV5)
def build_table_sink_v5(step: TableSinkV5, *, source: Built, ctx: BuildContext) -> Built:
    return replace(_sink(step, source, ctx, is_table=True), base_key_partitions=source.window is not None)
