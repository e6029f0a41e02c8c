"""A sink topic written with a schema the registry already holds (KEY/VALUE_SCHEMA_ID), on
the bounded runtime.

ksqlDB serialises such a sink's rows with the registered schema: a field of that schema the
query's columns do not give is written as its default (AVRO ``default``), as null (an
optional field: an AVRO union with null, a JSON_SR property not ``required``) or as
proto3's default value (PROTOBUF); a required field without a default makes the query fail
("Unable to serialize record"). A reader of the topic (ksqlDB's test runner, a consumer
with the registered schema) sees those fields. The Kafka runtime writes through the
registered schema's serializer itself (``engine.serde.registry``); the bounded runtime keeps
records in QTT form, so its sinks pass their records through ``registered_conformer``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import AnalysisError, ExecutionError
from engine.plan import types as T
from engine.plan.steps import Formats
from engine.records import TopicRecord

SCHEMA_ID = "schema_id"
REGISTERED_FORMATS = frozenset({"AVRO", "JSON_SR", "PROTOBUF"})
_MISSING = object()
# proto3's default values of the scalar types, in QTT form.
_PROTOBUF_DEFAULTS: dict[T.SqlType, Any] = {
    T.STRING: "", T.INTEGER: 0, T.BIGINT: 0, T.DOUBLE: 0.0, T.BOOLEAN: False,
}


@dataclass(frozen=True, slots=True)
class RegisteredField:
    """A field of a registered record schema: what a record that lacks it gets."""

    name: str
    type_text: str
    default: Any = _MISSING  # _MISSING: required, the record cannot be written without it


def registered_conformer(
    formats: Formats, topic: str, registry_url: str | None
) -> Callable[[TopicRecord], TopicRecord] | None:
    """What a sink's records become when written through the schemas registered under its
    formats' schema ids (None when neither names one or no registry is configured)."""
    if not registry_url:
        return None
    sides: list[RegisteredRecord | None] = []
    for is_key, fmt, props in (
        (True, formats.key_format, formats.key_properties), (False, formats.value_format, formats.value_properties)
    ):
        schema_id = dict(props).get(SCHEMA_ID)
        if schema_id is None or fmt.upper() not in REGISTERED_FORMATS or not str(schema_id).isdigit():
            sides.append(None)
            continue
        fields = registered_fields(registry_url, topic, int(schema_id), is_key=is_key)
        sides.append(RegisteredRecord(topic, fmt.upper(), int(schema_id), fields))
    key, value = sides
    if key is None and value is None:
        return None

    def conform(record: TopicRecord) -> TopicRecord:
        return dataclasses.replace(
            record,
            key=key.conform(record.key) if key is not None else record.key,
            value=value.conform(record.value) if value is not None else record.value,
        )

    return conform


def registered_fields(registry_url: str, topic: str, schema_id: int, *, is_key: bool) -> tuple[RegisteredField, ...]:
    """The top-level fields of the record schema registered under ``schema_id``."""
    from engine.serde.schema_inference import (
        SchemaTranslationError,
        fetch_schema,
        json_schema_to_sql,
        protobuf_to_sql,
    )

    schema = fetch_schema(registry_url, topic, is_key=is_key, schema_id=schema_id)
    try:
        if schema.schema_type == "AVRO":
            return _avro_fields(json.loads(schema.text))
        if schema.schema_type == "JSON":
            parsed = json.loads(schema.text)
            required = set(parsed.get("required", ())) if isinstance(parsed, Mapping) else set()
            struct = json_schema_to_sql(parsed, keep_names=True)
            return tuple(
                RegisteredField(f.name, str(f.type), _MISSING if f.name in required else None)
                for f in _fields(struct)
            )
        struct = protobuf_to_sql(schema.text, keep_names=True, imports=dict(schema.imports), is_key=is_key)
        return tuple(
            RegisteredField(f.name, str(f.type), _PROTOBUF_DEFAULTS.get(f.type)) for f in _fields(struct)
        )
    except (ValueError, SchemaTranslationError) as exc:
        raise AnalysisError(f"The schema with id {schema_id} of topic '{topic}' cannot be read: {exc}") from None


def _fields(struct: T.SqlType) -> tuple[T.Field, ...]:
    return struct.fields if isinstance(struct, T.Struct) else ()


def _avro_fields(schema: Any) -> tuple[RegisteredField, ...]:
    if not isinstance(schema, Mapping) or schema.get("type") != "record":
        return ()
    out = []
    for field in schema.get("fields", ()):
        kind = field.get("type")
        if "default" in field:
            default = field["default"]
        elif kind == "null" or (isinstance(kind, list) and "null" in kind):
            default = None
        else:
            default = _MISSING
        out.append(RegisteredField(str(field["name"]), json.dumps(kind), default))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class RegisteredRecord:
    """A record key or value schema registered under ``schema_id`` (see the module)."""

    topic: str
    format: str
    schema_id: int
    fields: tuple[RegisteredField, ...]

    def conform(self, record: Any) -> Any:
        """The record as the registered schema writes it: missing fields filled or refused."""
        if not isinstance(record, dict):
            return record
        given = {str(k).upper() for k in record}
        out = dict(record)
        for field in self.fields:
            if field.name in record or field.name.upper() in given:
                continue
            if field.default is _MISSING:
                raise ExecutionError(
                    f"Exception caught in process: Unable to serialize record for topic '{self.topic}': "
                    f"the {self.format} schema registered with id {self.schema_id} requires the field "
                    f"'{field.name}' ({field.type_text}), which the query's columns do not give and which has "
                    "no default."
                )
            out[field.name] = field.default
        return out
