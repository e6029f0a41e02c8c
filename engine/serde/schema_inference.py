"""Schema inference: the columns of a CREATE STREAM/TABLE read from a schema registry.

    schema = fetch_schema("mock://demo", "orders", is_key=False, schema_id=None)
    columns = infer_columns(schema, topic="orders", is_key=False, unwrapped=False)
    # (("ID", INTEGER), ("NAME", STRING), ...)

``fetch_schema`` reads the latest schema of ksqlDB's subject ``<topic>-key`` /
``<topic>-value``, or the schema with the given id (``KEY_SCHEMA_ID`` /
``VALUE_SCHEMA_ID``); ``infer_columns`` turns it into ``(name, SqlType)`` pairs with
ksqlDB's mapping (through Kafka Connect's types, as ksqlDB's translators do):

- AVRO: boolean, int, long, float/double (DOUBLE), string, bytes, enum (STRING), fixed
  (BYTES), the logical types decimal, date, time-millis, timestamp-millis; records are
  STRUCTs, arrays ARRAYs, maps MAP<STRING, V>; ``["null", T]`` is T.
- JSON_SR: Connect's JSON-schema conventions (``connect.type`` int32/int64/float64/bytes,
  the Decimal/Date/Time/Timestamp titles, ``oneOf`` null as optional); a plain ``integer``
  is BIGINT and a plain ``number`` DOUBLE; local ``$ref``s are followed.

A key is one column ``ROWKEY`` holding the whole schema (ksqlDB unwraps single keys), an
unwrapped value (``WRAP_SINGLE_VALUE=false``) one column ``ROWVAL``; a wrapped value's
record fields are the columns. Names are upper-cased as ksqlDB does for a subject's latest
schema, and kept as written when the statement names a schema id (the records are then
written with exactly that schema). Errors carry ksqlDB's messages.

This is the upper layer's helper: the planner calls it while planning a CREATE statement
and writes the columns into the plan, so a saved plan never reads the registry again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import AnalysisError
from engine.plan import types as T
from engine.serde.formats import AVRO, JSON_SR, PROTOBUF
from engine.serde.schema_text import SchemaTranslationError, parse_proto

SCHEMA_REGISTRY_URL = "ksql.schema.registry.url"
INFERRING_FORMATS = frozenset({AVRO, JSON_SR, PROTOBUF})
ROWKEY = "ROWKEY"
ROWVAL = "ROWVAL"
# The schema types the registry stores for each format.
_REGISTRY_TYPES = {AVRO: "AVRO", JSON_SR: "JSON", PROTOBUF: "PROTOBUF"}


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema read from the registry: its type (AVRO, JSON, PROTOBUF), text and id."""

    schema_type: str
    text: str
    schema_id: int | None = None
    # (import name, schema text) of every schema it references (PROTOBUF imports)
    imports: tuple[tuple[str, str], ...] = ()


def not_configured_message() -> str:
    """ksqlDB's error when a statement needs the registry and none is configured."""
    return (
        "KSQL is not configured to use a schema registry. To enable it, please set "
        + SCHEMA_REGISTRY_URL
    )


def fetch_schema(
    registry_url: str | None,
    topic: str | None,
    *,
    is_key: bool,
    schema_id: int | None,
    subject: str | None = None,
) -> RegisteredSchema:
    """The latest schema of ``subject`` (by default ``<topic>-key``/``-value``), or the one
    with ``schema_id`` (``topic`` None: a CREATE ... AS SELECT that names no KAFKA_TOPIC,
    which messages do not quote)."""
    if not registry_url:
        raise AnalysisError(not_configured_message())
    from engine.serde.registry import registry_client

    client = registry_client(registry_url)
    if subject is None and topic is not None:
        subject = f"{topic}-{'key' if is_key else 'value'}"
    try:
        if schema_id is not None:
            schema = client.get_schema(schema_id)
            found_id: int | None = schema_id
        else:
            registered = client.get_latest_version(str(subject))
            schema, found_id = registered.schema, registered.schema_id
    except Exception as exc:  # the client raises its own errors, or connection errors
        if _is_not_found(exc):
            raise AnalysisError(_not_found_message(topic, is_key, subject, schema_id)) from None
        raise AnalysisError(
            f"Cannot read the {'key' if is_key else 'value'} schema of topic '{topic}' from the "
            f"schema registry at {registry_url}: {_first_line(exc)}"
        ) from None
    imports: list[tuple[str, str]] = []
    for ref in schema.references or ():
        try:
            imports.append((str(ref.name), str(client.get_version(ref.subject, ref.version).schema.schema_str)))
        except Exception as exc:
            raise AnalysisError(
                f"Cannot read the schema '{ref.name}' that the {'key' if is_key else 'value'} schema of "
                f"topic '{topic}' references (subject {ref.subject}, version {ref.version}): {_first_line(exc)}"
            ) from None
    return RegisteredSchema(
        schema_type=str(schema.schema_type or "AVRO").upper(),
        text=str(schema.schema_str),
        schema_id=found_id,
        imports=tuple(imports),
    )


def infer_columns(
    schema: RegisteredSchema,
    *,
    fmt: str,
    topic: str | None,
    is_key: bool,
    unwrapped: bool,
    keep_names: bool,
    full_name: str | None = None,
    schema_id: int | None = None,
) -> tuple[tuple[str, T.SqlType], ...]:
    """The columns ``schema`` stands for as a key or value in ``fmt``, ksqlDB's way.

    PROTOBUF only: ``full_name`` picks the message (``*_SCHEMA_FULL_NAME``; default the
    first); the schemas it imports come with it (``RegisteredSchema.imports``). ``schema_id``:
    the id the statement named, which the messages quote."""
    wanted = _REGISTRY_TYPES.get(fmt)
    if wanted is None:
        raise AnalysisError(f"{fmt} does not support schema inference.")
    # A registry that omits schemaType (Apicurio's Confluent API for some schemas) reads as
    # AVRO in confluent-kafka's client: only another explicit type is a mismatch; a schema
    # that is not of the format then fails its translation below.
    if schema.schema_type not in (wanted, "AVRO"):
        raise AnalysisError(_wrong_format_message(topic, is_key, wanted, schema.schema_type, schema_id))
    try:
        if fmt == AVRO:
            whole = avro_to_sql(_parse_json(schema.text), keep_names=keep_names)
        elif fmt == JSON_SR:
            whole = json_schema_to_sql(_parse_json(schema.text), keep_names=keep_names)
        else:
            whole = protobuf_to_sql(
                schema.text, keep_names=keep_names, full_name=full_name,
                imports=dict(schema.imports), is_key=is_key,
            )
    except _MessageNotFound:
        subject = f"{topic}-{'key' if is_key else 'value'}" if topic is not None else None
        raise AnalysisError(_not_found_message(topic, is_key, subject, schema_id)) from None
    except SchemaTranslationError as exc:
        raise AnalysisError(_incompatible_message(topic, is_key, schema.text, str(exc), schema_id)) from None
    if fmt == PROTOBUF:  # a message's fields are the columns, keys included
        if not isinstance(whole, T.Struct):
            raise AnalysisError(_incompatible_message(topic, is_key, schema.text, "Not a message", schema_id))
        if not is_key:
            _refuse_no_columns(whole, topic, schema.text, schema_id)
        return tuple((f.name, f.type) for f in whole.fields)
    if is_key:
        return ((ROWKEY, whole),)
    if unwrapped:
        return ((ROWVAL, whole),)
    if not isinstance(whole, T.Struct):
        raise AnalysisError(_incompatible_message(
            topic, is_key, schema.text,
            "Schema returned from schema registry is anonymous type. To use this schema with "
            "ksqlDB, set 'WRAP_SINGLE_VALUE=false' in the WITH clause properties.",
            schema_id,
        ))
    _refuse_no_columns(whole, topic, schema.text, schema_id)
    return tuple((f.name, f.type) for f in whole.fields)


def _refuse_no_columns(value: T.Struct, topic: str | None, schema_text: str, schema_id: int | None) -> None:
    """A value record or message without fields gives no columns: ksqlDB's schema translator
    refuses it (the schema it quotes is the record's column list, empty)."""
    if not value.fields:
        raise AnalysisError(_incompatible_message(
            topic, False, schema_text,
            "Schema does not include any columns with types that ksqlDB supports.\nschema: ", schema_id,
        ))


# ---------------------------------------------------------------------- AVRO


_AVRO_PRIMITIVES: dict[str, T.SqlType] = {
    "boolean": T.BOOLEAN,
    "int": T.INTEGER,
    "long": T.BIGINT,
    "float": T.DOUBLE,
    "double": T.DOUBLE,
    "string": T.STRING,
    "bytes": T.BYTES,
}
_AVRO_LOGICAL: dict[tuple[str, str], T.SqlType] = {
    ("int", "date"): T.DATE,
    ("int", "time-millis"): T.TIME,
    ("long", "timestamp-millis"): T.TIMESTAMP,
}


def avro_to_sql(schema: Any, *, keep_names: bool = False) -> T.SqlType:
    """The SQL type of an Avro schema (parsed JSON), as ksqlDB's AVRO translator maps it."""
    return _Avro(keep_names).translate(schema, "")


class _Avro:
    def __init__(self, keep_names: bool) -> None:
        self.keep_names = keep_names
        self.named: dict[str, Any] = {}
        self.visiting: set[str] = set()

    def name(self, text: str) -> str:
        return text if self.keep_names else text.upper()

    def translate(self, schema: Any, namespace: str) -> T.SqlType:
        if isinstance(schema, str):
            return self._named_or_primitive(schema, namespace)
        if isinstance(schema, list):
            return self._union(schema, namespace)
        if not isinstance(schema, Mapping):
            raise SchemaTranslationError(f"Invalid Avro schema: {json.dumps(schema)}")
        kind = schema.get("type")
        if isinstance(kind, list | Mapping):
            return self.translate(kind, namespace)
        if not isinstance(kind, str):
            raise SchemaTranslationError(f"Avro schema without a type: {json.dumps(schema)}")
        logical = schema.get("logicalType")
        if logical == "decimal" and kind in ("bytes", "fixed"):
            self._remember(schema, namespace)
            return _decimal(schema.get("precision"), schema.get("scale", 0))
        if isinstance(logical, str) and (kind, logical) in _AVRO_LOGICAL:
            return _AVRO_LOGICAL[(kind, logical)]
        if kind == "record":
            return self._record(schema, namespace)
        if kind == "enum":
            self._remember(schema, namespace)
            return T.STRING
        if kind == "fixed":
            self._remember(schema, namespace)
            return T.BYTES
        if kind == "array":
            return T.Array(self.translate(schema.get("items"), namespace))
        if kind == "map":
            return T.Map(T.STRING, self.translate(schema.get("values"), namespace))
        return self._named_or_primitive(kind, namespace)

    def _named_or_primitive(self, name: str, namespace: str) -> T.SqlType:
        if name in _AVRO_PRIMITIVES:
            return _AVRO_PRIMITIVES[name]
        if name == "null":
            raise SchemaTranslationError("Avro type 'null' has no SQL type")
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        for candidate in (full, name):
            if candidate in self.visiting:
                raise SchemaTranslationError(f"Recursive Avro type '{candidate}' is not supported")
            if candidate in self.named:
                return self.translate(self.named[candidate], candidate.rpartition(".")[0])
        raise SchemaTranslationError(f"Unknown Avro type '{name}'")

    def _remember(self, schema: Mapping[str, Any], namespace: str) -> str:
        name = str(schema.get("name", ""))
        ns = schema.get("namespace", namespace) or ""
        full = name if "." in name or not ns else f"{ns}.{name}"
        if name:
            self.named[full] = schema
            self.named.setdefault(name.rpartition(".")[2], schema)
        return full

    def _record(self, schema: Mapping[str, Any], namespace: str) -> T.SqlType:
        full = self._remember(schema, namespace)
        inner_ns = full.rpartition(".")[0]
        self.visiting.add(full)
        try:
            fields = []
            for field in schema.get("fields") or ():
                if not isinstance(field, Mapping) or not isinstance(field.get("name"), str):
                    raise SchemaTranslationError(f"Invalid Avro field in record '{full}'")
                fields.append(T.Field(self.name(field["name"]), self.translate(field.get("type"), inner_ns)))
        finally:
            self.visiting.discard(full)
        return _struct(fields)

    def _union(self, members: list[Any], namespace: str) -> T.SqlType:
        others = [m for m in members if m != "null" and not (isinstance(m, Mapping) and m.get("type") == "null")]
        if not others:
            raise SchemaTranslationError("An Avro union of only 'null' has no SQL type")
        if len(others) == 1:
            return self.translate(others[0], namespace)
        # Connect turns a union of several types into a STRUCT with a field per member.
        fields = []
        for member in others:
            label = member if isinstance(member, str) else str(member.get("name") or member.get("type"))
            fields.append(T.Field(self.name(label.rpartition(".")[2]), self.translate(member, namespace)))
        return _struct(fields)


# ---------------------------------------------------------------------- JSON_SR


_CONNECT_INTEGERS: dict[str, T.SqlType] = {
    "int8": T.INTEGER, "int16": T.INTEGER, "int32": T.INTEGER, "int64": T.BIGINT,
}
_CONNECT_TITLES: dict[str, T.SqlType] = {
    "org.apache.kafka.connect.data.Date": T.DATE,
    "org.apache.kafka.connect.data.Time": T.TIME,
    "org.apache.kafka.connect.data.Timestamp": T.TIMESTAMP,
}
_DECIMAL_TITLE = "org.apache.kafka.connect.data.Decimal"


def json_schema_to_sql(schema: Any, *, keep_names: bool = False) -> T.SqlType:
    """The SQL type of a JSON schema (parsed), as ksqlDB's JSON_SR translator maps it."""
    root = schema if isinstance(schema, Mapping) else {}

    def resolve(node: Mapping[str, Any], depth: int) -> Mapping[str, Any]:
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node
        if not ref.startswith("#/") or depth > 32:
            raise SchemaTranslationError(f"JSON schema reference '{ref}' is not supported")
        target: Any = root
        for part in ref[2:].split("/"):
            if not isinstance(target, Mapping) or part not in target:
                raise SchemaTranslationError(f"JSON schema reference '{ref}' does not resolve")
            target = target[part]
        if not isinstance(target, Mapping):
            raise SchemaTranslationError(f"JSON schema reference '{ref}' does not resolve")
        return resolve(target, depth + 1)

    def name(text: str) -> str:
        return text if keep_names else text.upper()

    def translate(node: Any, depth: int = 0) -> T.SqlType:
        if node is True or node == {}:
            raise SchemaTranslationError("A JSON schema that accepts anything has no SQL type")
        if not isinstance(node, Mapping):
            raise SchemaTranslationError(f"Invalid JSON schema: {json.dumps(node)}")
        if depth > 64:
            raise SchemaTranslationError("Recursive JSON schemas are not supported")
        node = resolve(node, 0)
        for key in ("oneOf", "anyOf"):
            if key in node:
                return choice(node[key], depth)
        kind = node.get("type")
        if isinstance(kind, list):
            return choice([{**node, "type": k} for k in kind], depth)
        if kind is None and "properties" in node:
            kind = "object"
        if kind is None and "enum" in node:
            kind = "string"
        connect = node.get("connect.type")
        title = node.get("title")
        if kind == "boolean":
            return T.BOOLEAN
        if kind == "integer":
            if isinstance(title, str) and title in _CONNECT_TITLES:
                return _CONNECT_TITLES[title]
            return _CONNECT_INTEGERS.get(str(connect), T.BIGINT)
        if kind == "number":
            if title == _DECIMAL_TITLE:
                params = node.get("connect.parameters") or {}
                return _decimal(params.get("connect.decimal.precision"), params.get("scale", 0))
            return T.DOUBLE
        if kind == "string":
            if title == _DECIMAL_TITLE:
                params = node.get("connect.parameters") or {}
                return _decimal(params.get("connect.decimal.precision"), params.get("scale", 0))
            return T.BYTES if connect == "bytes" else T.STRING
        if kind == "array":
            return T.Array(translate(node.get("items"), depth + 1))
        if kind == "object":
            additional = node.get("additionalProperties")
            if connect == "map" or ("properties" not in node and isinstance(additional, Mapping)):
                return T.Map(T.STRING, translate(additional, depth + 1))
            props = node.get("properties") or {}
            if not isinstance(props, Mapping):
                raise SchemaTranslationError("JSON schema 'properties' must be an object")
            ordered = sorted(
                enumerate(props.items()),
                key=lambda p: (p[1][1].get("connect.index", p[0]) if isinstance(p[1][1], Mapping) else p[0], p[0]),
            )
            return _struct([T.Field(name(k), translate(v, depth + 1)) for _, (k, v) in ordered])
        if kind == "null":
            raise SchemaTranslationError("JSON schema type 'null' has no SQL type")
        raise SchemaTranslationError(f"JSON schema type {json.dumps(kind)} is not supported")

    def choice(members: Any, depth: int) -> T.SqlType:
        if not isinstance(members, list):
            raise SchemaTranslationError("JSON schema 'oneOf' must be a list")
        others = [m for m in members if not (isinstance(m, Mapping) and m.get("type") == "null")]
        if len(others) == 1:
            return translate(others[0], depth + 1)
        if not others:
            raise SchemaTranslationError("JSON schema type 'null' has no SQL type")
        raise SchemaTranslationError("JSON schema unions of several types are not supported")

    return translate(schema)


# ---------------------------------------------------------------------- PROTOBUF


_PROTOBUF_SCALARS: dict[str, T.SqlType] = {
    "double": T.DOUBLE, "float": T.DOUBLE,
    "int32": T.INTEGER, "sint32": T.INTEGER, "sfixed32": T.INTEGER,
    "int64": T.BIGINT, "sint64": T.BIGINT, "sfixed64": T.BIGINT,
    # unsigned 32-bit values do not fit an INT (Connect widens them)
    "uint32": T.BIGINT, "fixed32": T.BIGINT, "uint64": T.BIGINT, "fixed64": T.BIGINT,
    "bool": T.BOOLEAN, "string": T.STRING, "bytes": T.BYTES,
}
_PROTOBUF_WELL_KNOWN: dict[str, T.SqlType] = {
    "google.protobuf.BoolValue": T.BOOLEAN,
    "google.protobuf.Int32Value": T.INTEGER,
    "google.protobuf.UInt32Value": T.BIGINT,
    "google.protobuf.Int64Value": T.BIGINT,
    "google.protobuf.UInt64Value": T.BIGINT,
    "google.protobuf.FloatValue": T.DOUBLE,
    "google.protobuf.DoubleValue": T.DOUBLE,
    "google.protobuf.StringValue": T.STRING,
    "google.protobuf.BytesValue": T.BYTES,
    "google.protobuf.Timestamp": T.TIMESTAMP,
    "google.type.Date": T.DATE,
    "google.type.TimeOfDay": T.TIME,
}
_PROTOBUF_DECIMAL = "confluent.type.Decimal"


def protobuf_type_names(text: str) -> list[str]:
    """The full names of a protobuf schema's top-level messages and enums, in order (what
    ksqlDB counts as the schema's definitions)."""
    from proto_schema_parser import ast as P

    parsed = parse_proto(text)
    package = next((el.name for el in parsed.file_elements if isinstance(el, P.Package)), "")
    return [
        f"{package}.{el.name}" if package else el.name
        for el in parsed.file_elements
        if isinstance(el, P.Message | P.Enum)
    ]


def multiple_definitions_message(is_key: bool, names: list[str]) -> str:
    """ksqlDB's text when a PROTOBUF schema defines several types and the statement names none."""
    listed = "\n".join(f"- {n}" for n in names)
    side = "KEY" if is_key else "VALUE"
    return (
        f"{'Key' if is_key else 'Value'} schema has multiple schema definitions. \n\n{listed}\n\n"
        f"Please specify a schema full name in the WITH clause using {side}_SCHEMA_FULL_NAME"
    )


def protobuf_to_sql(
    text: str,
    *,
    keep_names: bool = False,
    full_name: str | None = None,
    imports: Mapping[str, str] | None = None,
    is_key: bool = False,
) -> T.SqlType:
    """The STRUCT of a protobuf schema's message (the first, or ``full_name``), as ksqlDB's
    PROTOBUF translator maps it: scalars, enums (STRING), nested and imported messages
    (STRUCT), ``repeated`` (ARRAY), ``map`` (MAP), the wrappers and well-known types, and
    ``confluent.type.Decimal`` with its precision and scale."""
    from proto_schema_parser import ast as P

    messages: dict[str, Any] = {}
    enums: set[str] = set()

    def collect(elements: Any, scope: str) -> list[str]:
        found = []
        for el in elements:
            if isinstance(el, P.Message):
                name = f"{scope}.{el.name}" if scope else el.name
                messages[name] = el
                found.append(name)
                collect(el.elements, name)
            elif isinstance(el, P.Enum):
                enums.add(f"{scope}.{el.name}" if scope else el.name)
        return found

    main = parse_proto(text)
    package = next((el.name for el in main.file_elements if isinstance(el, P.Package)), "")
    top = collect(main.file_elements, package)
    for imported_text in (imports or {}).values():
        imported = parse_proto(imported_text)
        imported_package = next((el.name for el in imported.file_elements if isinstance(el, P.Package)), "")
        collect(imported.file_elements, imported_package)
    if not top:
        raise SchemaTranslationError("The protobuf schema defines no message")
    if full_name:
        wanted = full_name.lstrip(".")
        chosen = wanted if wanted in messages else (f"{package}.{wanted}" if package else None)
        if chosen not in messages:
            raise _MessageNotFound(full_name)
    else:
        chosen = top[0]

    def name(text: str) -> str:
        return text if keep_names else text.upper()

    def resolve(type_name: str, scope: str) -> str | None:
        if type_name.startswith("."):
            return type_name[1:] if type_name[1:] in messages or type_name[1:] in enums else None
        parts = scope.split(".") if scope else []
        while True:
            candidate = ".".join([*parts, type_name]) if parts else type_name
            if candidate in messages or candidate in enums:
                return candidate
            if not parts:
                return None
            parts.pop()

    def scalar(type_name: str, field: Any, scope: str, visiting: frozenset[str]) -> T.SqlType:
        if type_name in _PROTOBUF_SCALARS:
            return _PROTOBUF_SCALARS[type_name]
        plain = type_name.lstrip(".")
        if plain in _PROTOBUF_WELL_KNOWN:
            return _PROTOBUF_WELL_KNOWN[plain]
        if plain == _PROTOBUF_DECIMAL:
            params = _decimal_params(field)
            return _decimal(params.get("precision", 64), params.get("scale", 0))
        resolved = resolve(type_name, scope)
        if resolved is None:
            raise SchemaTranslationError(f"Unknown protobuf type '{type_name}'")
        if resolved in enums:
            return T.STRING
        return message(resolved, visiting)

    def message(full: str, visiting: frozenset[str]) -> T.Struct:
        if full in visiting:
            raise SchemaTranslationError(f"Recursive protobuf message '{full}' is not supported")
        fields: list[T.Field] = []
        oneofs = 0
        for el in messages[full].elements:
            if isinstance(el, P.MapField):
                key = scalar(el.key_type, el, full, visiting | {full})
                value = scalar(el.value_type, el, full, visiting | {full})
                fields.append(T.Field(name(el.name), T.Map(key, value)))
            elif isinstance(el, P.Field):
                t = scalar(el.type, el, full, visiting | {full})
                if el.cardinality is not None and el.cardinality.name == "REPEATED":
                    t = T.Array(t)
                fields.append(T.Field(name(el.name), t))
            elif isinstance(el, P.OneOf):
                members = [T.Field(name(f.name), scalar(f.type, f, full, visiting | {full}))
                           for f in el.elements if isinstance(f, P.Field)]
                fields.append(T.Field(name(f"{el.name}_{oneofs}"), _struct(members)))
                oneofs += 1
        return _struct(fields)

    del is_key  # keys and values map alike: a message's fields are the columns
    return message(str(chosen), frozenset())


class _MessageNotFound(SchemaTranslationError):
    """A ``*_SCHEMA_FULL_NAME`` names no message of the schema."""


def _decimal_params(field: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    for option in getattr(field, "options", None) or ():
        if "field_meta" not in str(getattr(option, "name", "")):
            continue
        for literal_field in getattr(option.value, "elements", None) or ():
            if getattr(literal_field, "name", None) != "params":
                continue
            params = literal_field.value if isinstance(literal_field.value, list) else [literal_field.value]
            for param in params:
                kv = {f.name: f.value for f in getattr(param, "elements", None) or ()}
                if "key" in kv and "value" in kv:
                    out[str(kv["key"])] = str(kv["value"])
    return out


# ---------------------------------------------------------------------- helpers


def _decimal(precision: Any, scale: Any) -> T.SqlType:
    try:
        p, s = int(str(precision)), int(str(scale if scale is not None else 0))
        return T.Decimal(p, s)
    except Exception:
        raise SchemaTranslationError(
            f"Invalid decimal precision {precision!r} or scale {scale!r}"
        ) from None


def _struct(fields: list[T.Field]) -> T.Struct:
    try:
        return T.Struct(tuple(fields))
    except Exception as exc:
        raise SchemaTranslationError(str(exc)) from None


def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        # Avro allows a bare primitive name as the whole schema.
        stripped = text.strip()
        if stripped.isidentifier():
            return stripped
        raise SchemaTranslationError(f"The schema is not valid JSON: {text[:200]}") from None


def _is_not_found(exc: BaseException) -> bool:
    status = getattr(exc, "http_status_code", None)
    code = getattr(exc, "error_code", None)
    return status == 404 or code in (40401, 40402, 40403)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


# ksqlDB's links in its schema registry messages (DocumentationLinks).
_SR_DOCS = "https://docs.confluent.io/current/schema-registry/docs/"
_NOT_FOUND_CAUSES = (
    "- Messages on the topic have not been serialized using a Confluent Schema Registry supported serializer\n"
    f"\t-> See {_SR_DOCS}serializer-formatter.html\n"
    "- The schema is registered on a different instance of the Schema Registry\n"
    f"\t-> Use the REST API to list available subjects\t{_SR_DOCS}api.html#get--subjects\n"
    "- You do not have permissions to access the Schema Registry.\n"
    f"\t-> See {_SR_DOCS}security.html"
)


def _not_found_message(topic: str | None, is_key: bool, subject: str | None, schema_id: int | None) -> str:
    """ksqlDB's text when the registry has no schema for the subject (or the id)."""
    schema_id_line = f"Schema Id: {schema_id}\n" if schema_id is not None else ""
    if topic is None or subject is None:  # ksqlDB quotes the id as Java prints an Optional
        return (
            f"Schema for message {'keys' if is_key else 'values'} on schema id'{schema_id} does not exist "
            f"in the Schema Registry.\n{schema_id_line}Possible causes include:\n"
            f"- Schema Id Optional[{schema_id}]\n" + _NOT_FOUND_CAUSES
        )
    return (
        f"Schema for message {'keys' if is_key else 'values'} on topic '{topic}' does not exist "
        f"in the Schema Registry.\nSubject: {subject}\n{schema_id_line}"
        "Possible causes include:\n"
        "- The topic itself does not exist\n"
        "\t-> Use SHOW TOPICS; to check\n"
        "- Messages on the topic are not serialized using a format Schema Registry supports\n"
        f"\t-> Use PRINT '{topic}' FROM BEGINNING; to verify\n" + _NOT_FOUND_CAUSES
    )


def _source_text(topic: str | None, schema_id: int | None) -> str:
    parts = ([f"topic: {topic}"] if topic is not None else []) + (
        [f"schema id: {schema_id}"] if schema_id is not None else []
    )
    return ", ".join(parts)


def _incompatible_message(topic: str | None, is_key: bool, schema_text: str, reason: str, schema_id: int | None = None) -> str:
    """ksqlDB's text when a registered schema has no columns ksqlDB can read from it."""
    return (
        f"Unable to verify if the {'key' if is_key else 'value'} schema for {_source_text(topic, schema_id)} is "
        f"compatible with ksqlDB.\nReason: {reason}\n\n"
        "Please see https://github.com/confluentinc/ksql/issues/ to see if this particular reason is already known.\n"
        "If not, please log a new issue, including this full error message.\n"
        f"Schema:{schema_text}"
    )


def _wrong_format_message(topic: str | None, is_key: bool, expected: str, actual: str, schema_id: int | None) -> str:
    """ksqlDB's text when the registered schema is of another type than the format reads."""
    return (
        f"{'Key' if is_key else 'Value'} schema is not in the expected format. You may want to set "
        f"{'KEY_FORMAT' if is_key else 'VALUE_FORMAT'} to '{actual}'.\n{_source_text(topic, schema_id)}\n"
        f"expected format: {expected}\nactual format from Schema Registry: {actual}"
    )


def multiple_key_columns_message(topic: str | None, schema_id: int | None, schema_text: str) -> str:
    """ksqlDB's text when a registered key schema stands for several key columns."""
    return (
        f"The key schema for {_source_text(topic, schema_id)} contains multiple columns, which is not "
        f"supported by ksqlDB at this time.\nSchema:{schema_text}"
    )


