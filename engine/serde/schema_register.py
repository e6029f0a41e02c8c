"""Schema registration: the schemas a CREATE statement's topic gets in the schema registry
when the statement runs, as ksqlDB's ``SchemaRegisterInjector`` registers them.

    register_schemas("http://127.0.0.1:8081/apis/ccompat/v7", "orders", formats, columns,
                     create_as_select=True)

For the key and the value of the topic, in that order, when its format keeps schemas in the
registry (AVRO, JSON_SR, PROTOBUF) and the statement names no schema id for it: the schema
generated from the columns (the one the Kafka runtime writes records with, ``WireSerde``) is
registered under ``<topic>-key`` / ``<topic>-value``. A CREATE ... AS SELECT registers it
always (a new version when the subject holds another schema, which the registry's
compatibility rules may refuse); a CREATE STREAM/TABLE only when the subject has no schema yet
(ksqlDB asks the registry for the subject's latest version first). Errors carry ksqlDB's
messages: the registry's refusal ("Could not register schema for topic: ..."), a failure to ask
for the latest version ("Could not get latest schema for subject ..."), and an AVRO column name
that Avro does not allow ("Schema is not compatible with Avro: ...").

This is the upper layer's helper: the engine calls it while it runs a new statement, never when
it replays a saved plan, so replays and restarts need no registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.errors import AnalysisError
from engine.plan import types as T
from engine.plan.schema import Column, Namespace
from engine.plan.steps import Formats
from engine.serde.formats import AVRO, JSON_SR, PROTOBUF, SCHEMA_ID

# The formats whose schemas ksqlDB registers, and the schema type the registry stores.
_SCHEMA_TYPES = {AVRO: "AVRO", JSON_SR: "JSON", PROTOBUF: "PROTOBUF"}
COULD_NOT_REGISTER = "Could not register schema for topic: "


def register_schemas(
    registry_url: str, topic: str, formats: Formats, columns: Sequence[Column], *, create_as_select: bool
) -> None:
    """Register the key and the value schema of ``topic`` (see the module's text)."""
    from confluent_kafka.schema_registry import Schema

    from engine.builders.formats import serdes_for
    from engine.serde.registry import WireSerde, registry_client

    client = registry_client(registry_url)
    key, value = serdes_for(formats, columns)
    for serde, properties in ((key, formats.key_properties), (value, formats.value_properties)):
        schema_type = _SCHEMA_TYPES.get(serde.format.name)
        if schema_type is None or SCHEMA_ID in dict(properties):
            continue
        if serde.is_key and not any(c.namespace is Namespace.KEY for c in columns):
            continue
        wire = WireSerde(serde, topic, registry_url)
        if not create_as_select and _subject_exists(client, wire.subject):
            continue
        if schema_type == "AVRO":
            _check_avro_names(serde.columns, named=serde.wrapped)
        _register(client, wire.subject, Schema(wire.schema_text(), schema_type))


def _register(client: Any, subject: str, schema: Any) -> None:
    try:
        client.register_schema(subject, schema)
    except Exception as exc:  # the client's SchemaRegistryError, or a transport error
        # ksqlDB's SchemaRegistryUtil words the registry's refusal, and its injector words it again.
        raise AnalysisError(f"{COULD_NOT_REGISTER}{COULD_NOT_REGISTER}{_reason(exc)}") from None


def _subject_exists(client: Any, subject: str) -> bool:
    try:
        client.get_latest_version(subject)
    except Exception as exc:
        status, code = getattr(exc, "http_status_code", None), getattr(exc, "error_code", None)
        if status == 404 or code in (40401, 40402, 40403):
            return False
        raise AnalysisError(
            f"Could not get latest schema for subject {subject}\nCaused by: {_reason(exc)}"
        ) from None
    return True


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _check_avro_names(columns: Sequence[Column], *, named: bool) -> None:
    """Refuse a column (``named``: a wrapped record's) or struct field name that is no Avro
    name, as Avro's parser words it."""

    def check(name: str, sql_type: T.SqlType) -> None:
        problem = _avro_name_problem(name)
        if problem:
            raise AnalysisError(f"{COULD_NOT_REGISTER}Schema is not compatible with Avro: {problem}")
        for field in _struct_fields(sql_type):
            check(field.name, field.type)

    for column in columns:
        if named:
            check(column.name, column.type)
        else:
            for field in _struct_fields(column.type):
                check(field.name, field.type)


def _struct_fields(sql_type: T.SqlType) -> tuple[T.Field, ...]:
    if isinstance(sql_type, T.Struct):
        return sql_type.fields
    if isinstance(sql_type, T.Array):
        return _struct_fields(sql_type.item)
    if isinstance(sql_type, T.Map):
        return _struct_fields(sql_type.value)
    return ()


def _avro_name_problem(name: str) -> str:
    """Avro's ``Schema.validateName``: a letter or ``_``, then letters, digits or ``_``."""
    if not name:
        return "Empty name"
    if not (name[0].isalpha() or name[0] == "_"):
        return f"Illegal initial character: {name}"
    if any(not (c.isalnum() or c == "_") for c in name[1:]):
        return f"Illegal character in: {name}"
    return ""


def check_insert_key_schema(registry_url: str, source: str, topic: str, formats: Formats,
                            columns: Sequence[Column]) -> None:
    """Refuse an INSERT VALUES whose key schema would not be the registered one, as ksqlDB's
    ``InsertValuesExecutor`` does for a key format of the registry: the latest schema of
    ``<topic>-key`` must stand for the same key columns (names and types) as the schema the
    insert writes with, so that equal keys keep the same bytes (and partition)."""
    from engine.builders.formats import serdes_for
    from engine.serde.registry import WireSerde, registry_client
    from engine.serde.schema_inference import RegisteredSchema, infer_columns

    key, _ = serdes_for(formats, columns)
    schema_type = _SCHEMA_TYPES.get(key.format.name)
    if schema_type is None or not key.columns:
        return
    wire = WireSerde(key, topic, registry_url)
    subject = wire.subject
    try:
        latest = registry_client(registry_url).get_latest_version(subject)
    except Exception as exc:
        status, code = getattr(exc, "http_status_code", None), getattr(exc, "error_code", None)
        if status == 404 or code in (40401, 40402, 40403):
            raise AnalysisError(
                f"Failed to fetch key schema ({subject}). Please check if schema exists in Schema "
                "Registry and/or check connection with Schema Registry."
            ) from None
        raise AnalysisError(
            "Could not determine that insert values operations is safe; operation potentially "
            "overrides existing key schema in schema registry."
        ) from None
    full_name = dict(formats.key_properties).get("schema_full_name")

    def columns_of(text: str, schema_type_of: str) -> tuple[tuple[str, T.SqlType], ...]:
        return infer_columns(RegisteredSchema(schema_type_of, text), fmt=key.format.name, topic=topic, is_key=True,
                             unwrapped=not key.wrapped, keep_names=False,
                             full_name=None if full_name is None else str(full_name))

    generated = columns_of(wire.schema_text(), schema_type)
    try:
        existing = columns_of(str(latest.schema.schema_str), str(latest.schema.schema_type or schema_type).upper())
    except AnalysisError:
        existing = ()
    if existing != generated:
        shown = ", ".join(f"`{name}` {sql_type}" for name, sql_type in existing)
        ours = ", ".join(f"`{c.name}` {c.type}" for c in key.columns)
        raise AnalysisError(
            f"Cannot INSERT VALUES into data source {source}. ksqlDB generated schema would overwrite "
            f"existing key schema.\n\tExisting Schema: [{shown}]\n\tksqlDB Generated: [{ours}]"
        )


def check_insert_value_subject(registry_url: str, topic: str, formats: Formats) -> None:
    """A PROTOBUF value without a schema id: ksqlDB's INSERT VALUES writes with the latest schema
    of ``<topic>-value`` and refuses the insert when the registry has none (``SerdeUtils``)."""
    from engine.serde.registry import registry_client

    if formats.value_format != PROTOBUF or SCHEMA_ID in dict(formats.value_properties):
        return
    subject = f"{topic}-value"
    try:
        registry_client(registry_url).get_latest_version(subject)
    except Exception:
        raise AnalysisError(
            f"Failed to fetch schema for serialization from Schema Registry using schema subject: {subject}"
        ) from None
