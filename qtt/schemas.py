"""The schemas a QTT case declares for its topics, registered before the case runs.

ksqlDB's QTT runner registers every topic's ``keySchema`` and ``valueSchema`` in its schema
registry (subjects ``<topic>-key`` and ``<topic>-value``, in the order the case lists them,
key first) before the first statement, so that a CREATE without columns can read them;
``keySchemaId``/``valueSchemaId`` give the id the schema gets. On the bounded runtime the
registry is confluent-kafka's in-process mock (``mock://qtt-<case id>-<hash>``, emptied before
each run, so ids start at 1 as in ksqlDB's runner); the engine reads it through
``KsqlEngine.schema_registry_url``, which is not part of the engine's config and so never
part of a saved plan.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import decimal
import hashlib
import json
import re
import struct
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from engine.data.records import TopicRecord
from qtt.model import QttCase, QttFormatError, TopicSpec

SCHEMA_REGISTRY_URL = "ksql.schema.registry.url"
JSON_SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#"
# The registry's schema type for each format a topic names.
_SCHEMA_TYPES = {
    "AVRO": "AVRO",
    "JSON": "JSON",
    "JSON_SR": "JSON",
    "PROTOBUF": "PROTOBUF",
    "PROTOBUF_NOSR": "PROTOBUF",
}


class RegistrationError(Exception):
    """A registry did not take a schema a case declares (the message names the subject)."""


def case_registry_url(case: QttCase) -> str:
    """The in-process registry of one case on the bounded runtime."""
    digest = hashlib.sha1(case.id.encode("utf-8")).hexdigest()[:12]
    return f"mock://qtt-{re.sub(r'[^A-Za-z0-9_.-]+', '_', case.id)[:60]}-{digest}"


def use_case_registry(engine: Any, case: QttCase, *, run: str | None = None) -> str | None:
    """Give a bounded engine its case's fresh in-process registry with the case's declared
    schemas registered (unless the case's properties name a registry of their own). An
    engine facade with ``register_case_schemas`` (the Kafka runtime's) registers them itself.

    ``run`` names one run of the case among others at the same time (replays of several
    saved versions of a case): each gets a registry of its own, which no other empties.

    Returns the URL of the fresh registry made here, for the caller to forget when the run
    is over; None when the registry is not the harness's own (or none was set)."""
    register = getattr(engine, "register_case_schemas", None)
    if register is not None:
        register(case)
        return None
    if not hasattr(engine, "schema_registry_url"):
        return None
    fresh: str | None = None
    if case.properties.get(SCHEMA_REGISTRY_URL):
        url = str(case.properties[SCHEMA_REGISTRY_URL])
    else:
        url = fresh = case_registry_url(case) + (f"-{run}" if run else "")
        from engine.serde.registry import forget_registry_client

        forget_registry_client(url)
    engine.schema_registry_url = url
    register_topic_schemas(runner_topics(case), url)
    return fresh


def close_engine(engine: Any, registry: str | None) -> None:
    """Close ``engine`` and forget ``registry``, the fresh registry ``use_case_registry`` made
    for its run (None: a registry the case names itself, which is not the run's to forget)."""
    from engine.serde.registry import forget_registry_client

    try:
        engine.close()
    finally:
        if registry is not None:
            forget_registry_client(registry)


# Formats whose topics get a registered schema from a statement's columns.
SCHEMA_REGISTRY_FORMATS = frozenset({"AVRO", "JSON_SR", "PROTOBUF"})
# Any text that could name one of them, in any case (a superset: PROTOBUF_NOSR matches too).
_REGISTRY_FORMAT_NAME = re.compile("|".join(sorted(SCHEMA_REGISTRY_FORMATS)), re.IGNORECASE)
DEFAULT_KEY_FORMAT = "ksql.persistence.default.format.key"
DEFAULT_VALUE_FORMAT = "ksql.persistence.default.format.value"
WRAP_SINGLE_VALUES = "ksql.persistence.wrap.single.values"
# Key formats that support both WRAP_SINGLES and UNWRAP_SINGLES, whose single key column ksqlDB
# unwraps (SerdeFeaturesFactory.getKeyWrapping): PROTOBUF supports wrapping only.
WRAPPABLE_KEY_FORMATS = frozenset({"JSON", "JSON_SR", "AVRO", "PROTOBUF_NOSR"})


def runner_topics(case: QttCase) -> tuple[TopicSpec, ...]:
    """The topics whose schemas ksqlDB's runner registers, in its order, so that ids match.

    Besides the declared topics, the runner derives a topic from each CREATE STREAM/TABLE
    with columns whose topic is not declared, with the schemas the columns make in a
    schema-registry format, and registers every topic's schemas (key, then value) in the
    iteration order of a Java ``HashMap`` keyed by topic name. A case whose statements derive
    no schema keeps its declared order.
    """
    declared = {t.name for t in case.topics}
    derived: list[TopicSpec] = []
    for text in case.statements:
        spec = _statement_topic(text, case.properties)
        if spec is not None and spec.name not in declared and all(d.name != spec.name for d in derived):
            derived.append(spec)
    if not derived:
        return case.topics
    others = {r.topic for r in (*case.inputs, *case.outputs)} - declared - {d.name for d in derived}
    return tuple(_java_hash_map_order([*case.topics, *derived], len(others)))


def _statement_topic(text: str, properties: Mapping[str, Any]) -> TopicSpec | None:
    """The topic a CREATE STREAM/TABLE with columns stands for, with its schemas (or None)."""
    from engine.errors import KsqlError
    from engine.parser import ast, parse
    from engine.plan.schema import Column, Namespace
    from engine.serde import FormatInfo, SerdeFeatures, key_serde, value_serde
    from engine.serde.formats import NULLABLE_REPRESENTATION

    defaults = (properties.get(DEFAULT_KEY_FORMAT), properties.get(DEFAULT_VALUE_FORMAT))
    if not _REGISTRY_FORMAT_NAME.search(" ".join([text, *map(str, defaults)])):
        return None  # no format that registers a schema can be named: not worth a parse
    try:
        parsed = parse(text)
    except KsqlError:
        return None
    stmt = parsed[0].statement if len(parsed) == 1 else None
    if not isinstance(stmt, ast.CreateSource) or not stmt.elements:
        return None
    props = {str(k).upper(): v for k, v in stmt.properties.items()}
    topic = props.get("KAFKA_TOPIC")
    fmt = props.get("FORMAT")
    key_fmt = str(props.get("KEY_FORMAT") or fmt or defaults[0] or "KAFKA")
    value_fmt = str(props.get("VALUE_FORMAT") or fmt or defaults[1] or "")
    if not isinstance(topic, str):
        return None
    keys = [Column(e.name, e.type, Namespace.KEY) for e in stmt.elements if e.constraint in ("KEY", "PRIMARY KEY")]
    values = [Column(e.name, e.type, Namespace.VALUE) for e in stmt.elements if e.constraint is None]
    schemas: dict[str, Any] = {}
    wrap_given = props.get("WRAP_SINGLE_VALUE")
    wrap = None if wrap_given is None else str(wrap_given).lower() == "true"
    if wrap is None and str(properties.get(WRAP_SINGLE_VALUES, "true")).lower() == "false" and len(values) == 1:
        wrap = False
    def info(fmt: str, side: str) -> Any:
        # The format's properties that shape the schema it makes: a PROTOBUF nullable representation.
        nullable = props.get(f"{side}_PROTOBUF_NULLABLE_REPRESENTATION")
        return FormatInfo(fmt, {NULLABLE_REPRESENTATION: str(nullable).upper()} if nullable is not None else {})

    try:
        if keys and key_fmt.upper() in SCHEMA_REGISTRY_FORMATS:
            schemas["key"] = _generated_schema(key_serde(info(key_fmt, "KEY"), keys))
        if values and value_fmt.upper() in SCHEMA_REGISTRY_FORMATS:
            features = SerdeFeatures(wrap_single_value=wrap)
            schemas["value"] = _generated_schema(value_serde(info(value_fmt, "VALUE"), values, features))
    except KsqlError:
        return None  # the statement is refused when it runs
    if not schemas:
        return None
    # ksqlDB's SerdeFeaturesFactory: a single key column of a format that can unwrap it is
    # unwrapped; a single value column follows WRAP_SINGLE_VALUE, else the property's config.
    key_features = ("UNWRAP_SINGLES",) if key_fmt.upper() in WRAPPABLE_KEY_FORMATS and len(keys) == 1 else ()
    value_features = () if wrap is None or len(values) != 1 else (("WRAP_SINGLES",) if wrap else ("UNWRAP_SINGLES",))
    return TopicSpec(
        name=topic, key_format=key_fmt.upper(), value_format=value_fmt.upper() or None,
        key_schema=schemas.get("key"), value_schema=schemas.get("value"),
        key_serde_features=key_features, value_serde_features=value_features,
    )


def _generated_schema(serde: Any) -> Any:
    """The schema kspark generates for a serde's columns: the engine's (``avro_schema``,
    ``json_schema``, and ksqlDB's proto3 text ``proto_schema`` for PROTOBUF)."""
    from engine.serde.protobuf import proto_schema
    from engine.serde.registry import avro_schema, json_schema

    fmt = serde.format.name
    if fmt == "AVRO":
        return avro_schema(serde)
    if fmt == "JSON_SR":
        return json_schema(serde)
    return proto_schema(serde.columns, serde.format)


def _java_hash_map_order(topics: Sequence[TopicSpec], others: int) -> list[TopicSpec]:
    """``topics`` in the iteration order of a Java HashMap from their names to them (inserted
    in this order, with ``others`` more keys that only count towards its size)."""
    size = 16
    while len(topics) + others > size * 3 // 4:
        size *= 2

    def bucket(name: str) -> int:
        h = 0
        data = name.encode("utf-16-be")  # String.hashCode runs over UTF-16 code units
        for i in range(0, len(data), 2):
            h = (31 * h + int.from_bytes(data[i : i + 2], "big")) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (size - 1)

    return sorted(topics, key=lambda t: bucket(t.name))  # stable: a bucket keeps insertion order


def declared_schemas(topics: tuple[TopicSpec, ...]) -> Iterator[tuple[str, str, str, int | None, Any]]:
    """Per declared schema, in registration order: subject, schema type, schema text, the
    id the case gives it (or None) and its references (or None)."""
    for topic in topics:
        for is_key in (True, False):
            schema = topic.key_schema if is_key else topic.value_schema
            if schema is None:
                continue
            fmt = (topic.key_format if is_key else topic.value_format) or _guess_format(schema)
            schema_type = _SCHEMA_TYPES.get(fmt.upper())
            if schema_type is None:
                raise QttFormatError(
                    f"Topic '{topic.name}' declares a {'key' if is_key else 'value'} schema, but its "
                    f"format {fmt} has no schema registry schema (expected one of "
                    f"{', '.join(sorted(_SCHEMA_TYPES))})."
                )
            text = schema if isinstance(schema, str) else json.dumps(schema)
            schema_id = topic.key_schema_id if is_key else topic.value_schema_id
            references = topic.key_schema_references if is_key else topic.value_schema_references
            yield f"{topic.name}-{'key' if is_key else 'value'}", schema_type, text, schema_id, references


def register_topic_schemas(topics: tuple[TopicSpec, ...], url: str) -> dict[str, int]:
    """Register the topics' declared schemas at ``url``; per subject, the id it got.

    On the in-process mock a declared id is the id the schema gets; a real registry
    assigns its own ids (``qtt rest`` maps the case's ids to them).
    """
    declared = list(declared_schemas(topics))
    if not declared:  # a client costs 0.15 s (an HTTP client with its TLS context): none needed
        return {}
    from confluent_kafka.schema_registry import Schema, SchemaReference

    from engine.serde.registry import registry_client

    client = registry_client(url)
    ids: dict[str, int] = {}
    for subject, schema_type, text, schema_id, references in declared:
        refs = []
        counter = getattr(getattr(client, "_store", None), "max_id", None)
        for ref in references or ():
            if not isinstance(ref, dict) or not isinstance(ref.get("name"), str):
                raise QttFormatError(f"A schema reference of subject {subject} has no name.")
            ref_text = ref.get("schema")
            ref_text = ref_text if isinstance(ref_text, str) else json.dumps(ref_text)
            ref_type = _SCHEMA_TYPES.get(str(ref.get("format", schema_type)).upper(), schema_type)
            client.register_schema(ref["name"], Schema(ref_text, ref_type))
            refs.append(SchemaReference(ref["name"], ref["name"], 1))
        if refs and counter is not None:
            # ksqlDB's runner counts only the topics' own schemas: a reference takes no id
            # of the sequence (it stays readable by subject and version).
            client._store.max_id = counter
        if schema_id is not None and url.startswith("mock://"):
            _next_mock_id(client, schema_id)
        if not url.startswith("mock://"):
            text = _explicit(schema_type, text)
        try:
            ids[subject] = int(client.register_schema(subject, Schema(text, schema_type, refs)))
        except Exception as exc:  # the client's SchemaRegistryError, or a connection error
            raise RegistrationError(
                f"The schema registry refused the {schema_type} schema of {subject}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}"
            ) from None
    return ids


def ksqldb_runner_ids(topics: tuple[TopicSpec, ...]) -> dict[str, int]:
    """Per declared subject, the id ksqlDB's runner's registry gives it: the declared id, or
    the next one of a counter from 1 (so a case's statements may name ids it never declared)."""
    ids: dict[str, int] = {}
    last = 0
    for subject, _type, _text, schema_id, _refs in declared_schemas(topics):
        last = schema_id if schema_id is not None else last + 1
        ids[subject] = last
    return ids


_SCHEMA_ID_PROPERTY = re.compile(r"\b((?:KEY|VALUE)_SCHEMA_ID\s*=\s*)(\d+)", re.IGNORECASE)


def with_registry_ids(statement: str, ids: Mapping[int, int]) -> str:
    """``statement`` with each KEY/VALUE_SCHEMA_ID the case names replaced by the id the
    real registry gave that schema (``ids``: the case's id -> the registry's)."""
    if not ids:
        return statement
    return _SCHEMA_ID_PROPERTY.sub(lambda m: m.group(1) + str(ids.get(int(m.group(2)), m.group(2))), statement)


def _next_mock_id(client: Any, schema_id: int) -> None:
    """Make the mock registry give ``schema_id`` to the next schema it registers."""
    store = getattr(client, "_store", None)
    if store is None or not hasattr(store, "max_id"):
        return
    store.max_id = schema_id - 1


def _explicit(schema_type: str, text: str) -> str:
    """The schema in a form a registry that guesses the type from the content (Apicurio)
    recognises: a JSON schema naming its draft. (Apicurio refuses a bare Avro primitive
    whatever its spelling: ``RegistrationError``.)"""
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if schema_type == "JSON" and isinstance(parsed, dict) and "$schema" not in parsed:
        return json.dumps({"$schema": JSON_SCHEMA_DRAFT, **parsed})
    return text


def _guess_format(schema: Any) -> str:
    if isinstance(schema, str) and "syntax" in schema and "message" in schema:
        return "PROTOBUF"
    if isinstance(schema, dict) and ("oneOf" in schema or "properties" in schema
                                     or schema.get("type") in ("object", "integer", "number")):
        return "JSON_SR"
    return "AVRO"


# ---------------------------------------------------------------------------- inputs


def schema_topics(case: QttCase) -> dict[str, TopicSpec]:
    """The topics whose schemas ksqlDB's test builder reads the case's inputs through, by
    lower-cased name: the declared ones, each with the schemas a CREATE statement with
    columns gives it where it declares none and that statement's serde features, and the
    topics only such statements name (TestCaseBuilderUtil.getAllTopics)."""
    topics = {t.name: t for t in case.topics}
    for text in case.statements:
        derived = _statement_topic(text, case.properties)
        if derived is None:
            continue
        declared = topics.get(derived.name)
        if declared is None:
            topics[derived.name] = derived
        else:
            topics[derived.name] = dataclasses.replace(
                declared,
                key_schema=declared.key_schema if declared.key_schema is not None else derived.key_schema,
                key_format=declared.key_format if declared.key_schema is not None else derived.key_format,
                value_schema=declared.value_schema if declared.value_schema is not None else derived.value_schema,
                value_format=declared.value_format if declared.value_schema is not None else derived.value_format,
                key_serde_features=derived.key_serde_features,
                value_serde_features=derived.value_serde_features,
            )
    return {name.lower(): t for name, t in topics.items()}


def inputs_through_topic_schemas(case: QttCase) -> list[TopicRecord]:
    """The case's input records as ksqlDB's RecordNode builds them with their topic's schema:
    where the topic has an AVRO or PROTOBUF schema and the key or value is an object, each
    top-level field that the schema (read as columns with the topic's serde features) types
    as BYTES and that the object gives as text, under the column's name in lower or upper
    case, is decoded from base64. Other records, and other fields, stay as they are."""
    topics = schema_topics(case)
    if not any(_bytes_schema(t.key_format, t.key_schema) or _bytes_schema(t.value_format, t.value_schema)
               for t in topics.values()):
        return list(case.inputs)
    out: list[TopicRecord] = []
    for i, record in enumerate(case.inputs):
        topic = topics.get(record.topic.lower())
        if topic is not None:
            where = f"Input record {i + 1} (topic '{record.topic}')"
            record = dataclasses.replace(
                record,
                key=_coerce_record(record.key, topic.key_format, topic.key_schema, topic.key_serde_features,
                                   is_key=True, where=where),
                value=_coerce_record(record.value, topic.value_format, topic.value_schema,
                                     topic.value_serde_features, is_key=False, where=where),
            )
        out.append(record)
    return out


def _schema_format(fmt: str | None, schema: Any) -> str:
    return (fmt or _guess_format(schema)).upper()


def _bytes_schema(fmt: str | None, schema: Any) -> bool:
    """Whether a topic's key or value schema is one whose BYTES fields ksqlDB decodes."""
    return schema is not None and _schema_format(fmt, schema) in ("AVRO", "PROTOBUF", "PROTOBUF_NOSR")


def _coerce_record(data: Any, fmt: str | None, schema: Any, features: Sequence[str], *,
                   is_key: bool, where: str) -> Any:
    if not isinstance(data, dict) or not _bytes_schema(fmt, schema):
        return data
    from engine.plan import types as T

    out = dict(data)
    for name, sql_type in _schema_columns(schema, _schema_format(fmt, schema), features, is_key=is_key):
        lower, upper = name.lower(), name.upper()
        field = lower if lower in out else upper
        value = out.get(field)
        if sql_type != T.BYTES or not isinstance(value, str):
            continue
        try:
            out[field] = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise QttFormatError(
                f"{where}: field '{field}' is BYTES in the topic's schema, so its text must be base64, "
                f"but '{value}' is not."
            ) from None
    return out


def _avro_json(schema: Any) -> Any:
    """An Avro schema a case declares: JSON, or JSON text, or a bare primitive's name."""
    if not isinstance(schema, str):
        return schema
    try:
        return json.loads(schema)
    except ValueError:
        return schema


def _schema_columns(schema: Any, fmt: str, features: Sequence[str], *, is_key: bool) -> list[tuple[str, Any]]:
    """The columns a registered schema stands for, as ksqlDB's schema translator's toColumns
    reads them: the schema wrapped in one field (ROWKEY or ROWVAL) with UNWRAP_SINGLES, then
    the fields of the struct it must be."""
    from engine.errors import KsqlError
    from engine.plan import types as T
    from engine.serde.schema_inference import avro_to_sql, protobuf_to_sql
    from engine.serde.schema_text import SchemaTranslationError

    text = schema if isinstance(schema, str) else json.dumps(schema)
    try:
        if fmt == "AVRO":
            whole = avro_to_sql(_avro_json(schema))
        else:
            whole = protobuf_to_sql(text, is_key=is_key)
    except (KsqlError, SchemaTranslationError, ValueError):
        # A schema kspark cannot read on its own (one importing its references, say): its
        # fields stay as they are; registering or using it reports any problem.
        return []
    if "UNWRAP_SINGLES" in features:
        return [("ROWKEY" if is_key else "ROWVAL", whole)]
    if not isinstance(whole, T.Struct):
        if is_key:
            raise QttFormatError("Key schemas are always unwrapped.")
        raise QttFormatError(
            "Schema returned from schema registry is anonymous type. To use this schema with ksqlDB, "
            "set 'WRAP_SINGLE_VALUE=false' in the WITH clause properties."
        )
    return [(f.name, f.type) for f in whole.fields]


def inputs_through_declared_schemas(
    records: Sequence[TopicRecord], topics: tuple[TopicSpec, ...]
) -> list[TopicRecord]:
    """The input records as a topic's declared value schema writes them: a field the schema
    declares as a 32-bit float (protobuf and Avro ``float``, JSON_SR ``connect.type`` float32)
    keeps only single precision, so 1.1234 reads back as 1.1233999729156494, as in ksqlDB's
    runner, which serializes its inputs with the registered schema."""
    floats: dict[str, frozenset[str]] = {}
    for topic in topics:
        if topic.value_schema is not None:
            names = single_precision_fields(topic.value_schema)
            if names:
                floats[topic.name] = names
    if not floats:
        return list(records)
    out: list[TopicRecord] = []
    for record in records:
        wanted = floats.get(record.topic)
        if wanted and isinstance(record.value, dict):
            value = {k: _single(v) if str(k).upper() in wanted else v for k, v in record.value.items()}
            record = dataclasses.replace(record, value=value)
        out.append(record)
    return out


def single_precision_fields(schema: Any) -> frozenset[str]:
    """The upper-cased names of the top-level fields a declared schema types as 32-bit floats
    (or arrays of them); empty when the schema cannot be read that way."""
    if isinstance(schema, str) and "message" in schema and "syntax" in schema:
        return _protobuf_floats(schema)
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError:
            return frozenset()
    if not isinstance(schema, dict):
        return frozenset()
    if isinstance(schema.get("fields"), list):
        return frozenset(
            str(f.get("name", "")).upper()
            for f in schema["fields"]
            if isinstance(f, dict) and _avro_is_float(f.get("type"))
        )
    properties = schema.get("properties")
    if isinstance(properties, dict):
        return frozenset(str(k).upper() for k, v in properties.items() if _json_is_float(v))
    return frozenset()


def _single(v: Any) -> Any:
    if isinstance(v, list):
        return [_single(x) for x in v]
    if isinstance(v, bool) or not isinstance(v, int | float | decimal.Decimal):
        return v
    try:
        return struct.unpack("<f", struct.pack("<f", float(v)))[0]
    except OverflowError:
        return v  # out of float range: the schema's serializer refuses it, the engine reports it


def _avro_is_float(t: Any) -> bool:
    if t == "float":
        return True
    if isinstance(t, list):
        return any(_avro_is_float(m) for m in t if m != "null")
    if isinstance(t, dict):
        return t.get("type") == "float" or (t.get("type") == "array" and _avro_is_float(t.get("items")))
    return False


def _json_is_float(node: Any) -> bool:
    if not isinstance(node, dict):
        return False
    if node.get("connect.type") == "float32":
        return True
    members = node.get("oneOf") or node.get("anyOf")
    if isinstance(members, list):
        return any(_json_is_float(m) for m in members)
    return node.get("type") == "array" and _json_is_float(node.get("items"))


def _protobuf_floats(text: str) -> frozenset[str]:
    try:
        from proto_schema_parser import ast as P
        from proto_schema_parser.parser import Parser

        parsed = Parser().parse(text)
    except Exception:  # an unparsable schema: registering it reports the problem
        return frozenset()
    message = next((el for el in parsed.file_elements if isinstance(el, P.Message)), None)
    if message is None:
        return frozenset()
    return frozenset(
        el.name.upper() for el in message.elements if isinstance(el, P.Field) and el.type == "float"
    )
