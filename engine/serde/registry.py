"""Schema-registry wire formats: AVRO, JSON_SR and PROTOBUF records in Confluent framing
(and PROTOBUF_NOSR's bare protobuf payload).

    serde = wire_serde(value_serde(fmt, columns, features), "orders", "http://127.0.0.1:8081/apis/ccompat/v7")
    data = serde.to_bytes({"ID": 1, "NAME": "a"})   # b'\\x00' + 4-byte schema id + Avro binary
    serde.from_bytes(data)                          # {"ID": 1, "NAME": "a"}

A ``WireSerde`` wraps the QTT-form serde of a topic's key or value (``engine.serde``) and
adds the Kafka bytes: the Confluent header (magic byte 0, the big-endian schema id) and the
record in the format's binary or text encoding. The schema is the one ksqlDB generates from
the columns (``avro_schema``, ``json_schema``), registered under ksqlDB's subject names
``<topic>-key`` and ``<topic>-value``; a format with ``SCHEMA_ID`` writes with that
registered schema instead. The registry is any Confluent-compatible API (the Apicurio of
``engine.components.registry``), or confluent-kafka's in-process mock for ``mock://NAME``
URLs, whose schemas live as long as the process.

This is a runtime concern: builders keep the QTT form and never call it, so saved plans
replay unchanged; the Kafka runtime wraps its codecs when ``ksql.schema.registry.url`` is
set. AVRO uses confluent-kafka's ``AvroSerializer``/``AvroDeserializer``; JSON_SR writes
the project's exact JSON text (decimals keep their digits) behind the header of the
schema it registers with confluent-kafka's client. PROTOBUF registers ksqlDB's proto3 text
(``engine.serde.protobuf``) and writes the header, the message indexes and the payload as
confluent-kafka's ``ProtobufSerializer`` does; it reads a record with the schema its header
names (the message its indexes name). PROTOBUF_NOSR needs no registry.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import struct
import threading
from collections.abc import Mapping
from typing import Any

from engine.errors import RecordSerdeError, SchemaRegistryUnavailableError
from engine.plan import types as T
from engine.serde.base import RecordSerde
from engine.serde.coerce import fit_decimal
from engine.serde.formats import (
    AVRO,
    JSON_SR,
    JSON_SR_WITHOUT_HEADER,
    PROTOBUF,
    PROTOBUF_NOSR,
    SCHEMA_FULL_NAME,
    SCHEMA_ID,
)

AVRO_NAMESPACE = "io.confluent.ksql.avro_schemas"
AVRO_RECORD = "KsqlDataSourceSchema"
WIRE_FORMATS = frozenset({AVRO, JSON_SR, PROTOBUF, PROTOBUF_NOSR})
JSON_SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#"
_MAGIC = 0
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DATE = dt.date(1970, 1, 1)

_AVRO_PRIMITIVES: dict[T.BaseType, Any] = {
    T.BaseType.BOOLEAN: "boolean",
    T.BaseType.INTEGER: "int",
    T.BaseType.BIGINT: "long",
    T.BaseType.DOUBLE: "double",
    T.BaseType.STRING: "string",
    T.BaseType.BYTES: "bytes",
    T.BaseType.DATE: {"type": "int", "logicalType": "date"},
    T.BaseType.TIME: {"type": "int", "logicalType": "time-millis"},
    T.BaseType.TIMESTAMP: {"type": "long", "logicalType": "timestamp-millis"},
}
_JSON_PRIMITIVES: dict[T.BaseType, dict[str, Any]] = {
    T.BaseType.BOOLEAN: {"type": "boolean"},
    T.BaseType.INTEGER: {"type": "integer", "connect.type": "int32"},
    T.BaseType.BIGINT: {"type": "integer", "connect.type": "int64"},
    T.BaseType.DOUBLE: {"type": "number", "connect.type": "float64"},
    T.BaseType.STRING: {"type": "string"},
    T.BaseType.BYTES: {"type": "string", "connect.type": "bytes"},
    T.BaseType.DATE: {"type": "integer", "connect.type": "int32", "title": "org.apache.kafka.connect.data.Date"},
    T.BaseType.TIME: {"type": "integer", "connect.type": "int32", "title": "org.apache.kafka.connect.data.Time"},
    T.BaseType.TIMESTAMP: {"type": "integer", "connect.type": "int64",
                           "title": "org.apache.kafka.connect.data.Timestamp"},
}


# ---------------------------------------------------------------------- schemas


def avro_schema(serde: RecordSerde) -> dict[str, Any] | list[Any] | str:
    """The Avro schema ksqlDB generates for a key or value serde's columns.

    A wrapped record is ``io.confluent.ksql.avro_schemas.KsqlDataSourceSchema`` (or the
    format's ``SCHEMA_FULL_NAME``) with every field optional (``["null", T]``, default
    null); a nested STRUCT is a record named after its path (``KsqlDataSourceSchema_ADDRESS``),
    a DECIMAL is ``bytes`` with the ``decimal`` logical type, a MAP (STRING keys) an Avro map.
    An unwrapped single column is its optional type alone.
    """
    full_name = serde.format.get(SCHEMA_FULL_NAME) or f"{AVRO_NAMESPACE}.{AVRO_RECORD}"
    namespace, _, name = full_name.rpartition(".")
    if not serde.wrapped:
        column = serde.columns[0]
        return _optional(_avro_type(column.type, name))
    fields = [
        {"name": c.name, "type": _optional(_avro_type(c.type, f"{name}_{c.name}")), "default": None}
        for c in serde.columns
    ]
    record: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
    if namespace:
        record["namespace"] = namespace
    return record


def _optional(schema: Any) -> list[Any]:
    return ["null", schema]


def _avro_type(t: T.SqlType, name: str) -> Any:
    if isinstance(t, T.Decimal):
        return {"type": "bytes", "logicalType": "decimal", "precision": t.precision, "scale": t.scale,
                "connect.parameters": {"connect.decimal.precision": str(t.precision)}}
    if isinstance(t, T.Array):
        return {"type": "array", "items": _optional(_avro_type(t.item, name))}
    if isinstance(t, T.Map):
        return {"type": "map", "values": _optional(_avro_type(t.value, f"{name}_MapValue"))}
    if isinstance(t, T.Struct):
        return {
            "type": "record",
            "name": name,
            "fields": [
                {"name": f.name, "type": _optional(_avro_type(f.type, f"{name}_{f.name}")), "default": None}
                for f in t.fields
            ],
        }
    return _AVRO_PRIMITIVES[t.base]


def json_schema(serde: RecordSerde) -> dict[str, Any]:
    """The JSON schema ksqlDB generates for a key or value serde's columns (Connect's
    JSON-schema conventions: optional fields as ``oneOf`` null, ``connect.index``). An
    unwrapped single column names its draft (``$schema``): a registry that guesses the
    schema type from the content (Apicurio) refuses ``{"oneOf": ...}`` as JSON otherwise."""
    if not serde.wrapped:
        return {"$schema": JSON_SCHEMA_DRAFT, **_json_optional(_json_type(serde.columns[0].type))}
    return {
        "type": "object",
        "properties": {
            c.name: {**_json_optional(_json_type(c.type)), "connect.index": i}
            for i, c in enumerate(serde.columns)
        },
    }


def _json_optional(schema: dict[str, Any]) -> dict[str, Any]:
    return {"oneOf": [{"type": "null"}, schema]}


def _json_type(t: T.SqlType) -> dict[str, Any]:
    if isinstance(t, T.Decimal):
        return {"type": "number", "title": "org.apache.kafka.connect.data.Decimal",
                "connect.parameters": {"scale": str(t.scale), "connect.decimal.precision": str(t.precision)}}
    if isinstance(t, T.Array):
        return {"type": "array", "items": _json_optional(_json_type(t.item))}
    if isinstance(t, T.Map):
        return {"type": "object", "additionalProperties": _json_optional(_json_type(t.value)),
                "connect.type": "map"}
    if isinstance(t, T.Struct):
        return {"type": "object", "properties": {
            f.name: {**_json_optional(_json_type(f.type)), "connect.index": i}
            for i, f in enumerate(t.fields)
        }}
    return dict(_JSON_PRIMITIVES[t.base])


# ---------------------------------------------------------------------- QTT form <-> Avro datum


def _to_avro(t: T.SqlType, v: Any, where: str) -> Any:
    """A column's QTT-form value as the datum fastavro writes."""
    if v is None:
        return None
    try:
        if isinstance(t, T.Decimal):
            return fit_decimal(decimal.Decimal(str(v)), t)  # half-up, as ksqlDB rescales
        if isinstance(t, T.Array):
            return [_to_avro(t.item, x, where) for x in v]
        if isinstance(t, T.Map):
            return {str(k): _to_avro(t.value, x, where) for k, x in v.items()}
        if isinstance(t, T.Struct):
            upper = {str(k).upper(): x for k, x in v.items()}
            return {f.name: _to_avro(f.type, v.get(f.name, upper.get(f.name.upper())), where) for f in t.fields}
        if t.base is T.BaseType.DOUBLE:
            return float(v)
        if t.base is T.BaseType.BYTES:
            return base64.b64decode(v) if isinstance(v, str) else bytes(v)
        if t.base in (T.BaseType.INTEGER, T.BaseType.BIGINT, T.BaseType.DATE, T.BaseType.TIME,
                      T.BaseType.TIMESTAMP):
            return int(v)
    except (TypeError, ValueError, AttributeError, decimal.InvalidOperation) as exc:
        raise RecordSerdeError(f"Cannot write {where} as {t}: {v!r} ({exc}).") from None
    return v


def _from_avro(t: T.SqlType, v: Any) -> Any:
    """A datum fastavro read as the column's QTT form."""
    if v is None:
        return None
    if isinstance(t, T.Decimal):
        return v  # a decimal.Decimal with the schema's scale, as JSON_SR reads decimals
    if isinstance(t, T.Array):
        return [_from_avro(t.item, x) for x in v]
    if isinstance(t, T.Map):
        return {k: _from_avro(t.value, x) for k, x in v.items()}
    if isinstance(t, T.Struct):
        upper = {str(k).upper(): x for k, x in v.items()}
        return {f.name: _from_avro(f.type, upper.get(f.name.upper())) for f in t.fields}
    if isinstance(v, dt.datetime):
        moment = v if v.tzinfo else v.replace(tzinfo=dt.UTC)
        return (moment - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(v, dt.date):
        return (v - _EPOCH_DATE).days
    if isinstance(v, dt.time):
        return ((v.hour * 60 + v.minute) * 60 + v.second) * 1000 + v.microsecond // 1000
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    return v


# ---------------------------------------------------------------------- the serde


_CLIENTS: dict[str, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def registry_client(url: str) -> Any:
    """One confluent-kafka ``SchemaRegistryClient`` per URL and process (``mock://NAME``:
    the in-process mock, shared by every serde of the process naming it)."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    with _CLIENTS_LOCK:
        client = _CLIENTS.get(url)
        if client is None:
            from engine.kafka.security import registry_security_for

            # ksql.schema.registry.basic.auth.* and ssl.* (engine.kafka.security.configure)
            conf: dict[str, Any] = {"url": url, **registry_security_for(url).client_config()}
            if url.startswith("mock://"):
                # The in-process registry opens no connection: no CA bundle to load (loading
                # certifi's is a noticeable cost, and QTT makes a client per case with a registry).
                conf["ssl.ca.location"] = False
            client = SchemaRegistryClient.new_client(conf)
            _CLIENTS[url] = client
        return client


def forget_registry_client(url: str) -> None:
    """Drop the process's client for ``url``: a ``mock://`` registry starts empty again."""
    with _CLIENTS_LOCK:
        _CLIENTS.pop(url, None)


def split_header(data: bytes, what: str) -> tuple[int, bytes]:
    """The schema id and the payload of Confluent-framed bytes."""
    if len(data) < 5 or data[0] != _MAGIC:
        raise RecordSerdeError(
            f"The {what} bytes do not start with the schema registry header "
            "(magic byte 0 and a 4-byte schema id)."
        )
    return int(struct.unpack(">i", data[1:5])[0]), data[5:]


class WireSerde(RecordSerde):
    """A QTT-form serde of AVRO, JSON_SR or PROTOBUF with the registry's wire format for its
    bytes (PROTOBUF_NOSR: the bare protobuf payload, no registry)."""

    def __init__(self, inner: RecordSerde, topic: str, registry_url: str | None,
                 registry_security: tuple[tuple[str, str], ...] | None = None) -> None:
        super().__init__(inner.format, inner.columns, inner.wrapped, inner.is_key)
        if registry_security and registry_url:  # unpickled in a Spark worker: the driver's settings
            from engine.kafka.security import RegistrySecurity, use_registry_security

            use_registry_security(registry_url, RegistrySecurity(registry_security))
        if inner.format.name not in WIRE_FORMATS:
            raise RecordSerdeError(
                f"{inner.format.name} has no schema-registry wire serde: expected one of "
                f"{', '.join(sorted(WIRE_FORMATS))}."
            )
        self.inner = inner
        self.topic = topic
        self.registry_url = registry_url
        self._serializer: Any = None
        self._deserializer: Any = None
        self._schema_id: int | None = None
        self._proto: Any = None  # the ProtoCodec this serde writes with
        self._proto_readers: dict[int, Any] = {}  # schema id -> the ProtoCodec of that schema

    def __reduce__(self) -> tuple[Any, ...]:
        from engine.kafka.security import registry_security_for

        security = registry_security_for(self.registry_url).items if self.registry_url else ()
        return (type(self), (self.inner, self.topic, self.registry_url, security or None))

    @property
    def subject(self) -> str:
        """ksqlDB's subject for this topic's key or value."""
        return f"{self.topic}-{'key' if self.is_key else 'value'}"

    def deserialize(self, data: Any) -> dict[str, Any] | None:
        return self.inner.deserialize(data)

    def serialize(self, row: Mapping[str, Any] | None) -> Any:
        return self.inner.serialize(row)

    def schema_text(self) -> str:
        """The schema this serde registers, as the registry stores it."""
        if self.format.name in (PROTOBUF, PROTOBUF_NOSR):
            from engine.serde.protobuf import proto_schema

            return proto_schema(self.columns, self.format)
        schema = avro_schema(self) if self.format.name == AVRO else json_schema(self)
        return json.dumps(schema, separators=(",", ":"))

    def to_bytes(self, data: Any) -> bytes | None:
        """The record's Kafka bytes; a record this format cannot write raises
        ``RecordSerdeError`` in the words of ksqlDB's serializer (``KsqlConnectSerializer``)."""
        if data is None:
            return None
        try:
            if self.format.name == AVRO:
                return self._avro_bytes(data)
            if self.format.name in (PROTOBUF, PROTOBUF_NOSR):
                return self._protobuf_bytes(data)
            return self._json_bytes(data)
        except SchemaFetchError:
            raise  # ksqlDB meets it when it makes the serializer, not in it
        except RecordSerdeError as exc:
            raise RecordSerdeError(serialization_error(self.topic, str(exc))) from None

    def from_bytes(self, data: bytes | None, *, as_written: bool = False) -> Any:
        if data is None:
            return None
        if self.format.name == PROTOBUF_NOSR:
            return self._writer_codec().decode(bytes(data), self.what)
        if self.format.name == JSON_SR and (len(data) < 5 or data[0] != _MAGIC):
            raise RecordSerdeError(JSON_SR_WITHOUT_HEADER)
        schema_id, payload = split_header(data, self.what)
        if self.format.name == PROTOBUF:
            return self._protobuf_record(schema_id, payload)
        if self.format.name == JSON_SR:
            try:
                return json.loads(payload.decode("utf-8"), parse_float=decimal.Decimal)
            except (UnicodeDecodeError, ValueError) as exc:
                raise RecordSerdeError(f"The {self.what} bytes are not valid JSON: {exc}.") from None
        from confluent_kafka.serialization import MessageField, SerializationContext

        if self._deserializer is None:
            from confluent_kafka.schema_registry.avro import AvroDeserializer

            self._deserializer = AvroDeserializer(self._client())
        field = MessageField.KEY if self.is_key else MessageField.VALUE
        try:
            datum = self._deserializer(data, SerializationContext(self.topic, field))
        except Exception as exc:  # fastavro and the client raise many kinds
            raise RecordSerdeError(
                f"Cannot read the {self.what} with schema id {schema_id}: {_message(exc)}"
            ) from None
        if not self.wrapped:
            return _from_avro(self.columns[0].type, datum)
        if not isinstance(datum, dict):
            raise RecordSerdeError(f"The {self.what} with schema id {schema_id} is not a record.")
        upper = {str(k).upper(): v for k, v in datum.items()}
        record = {c.name: _from_avro(c.type, datum.get(c.name, upper.get(c.name.upper())))
                  for c in self.columns}
        if as_written:  # the fields of the writer's schema that no column reads, as Avro gave them
            names = {c.name.upper() for c in self.columns}
            record.update({str(k): v for k, v in datum.items() if str(k).upper() not in names})
        return record

    def read_as_written(self, data: bytes | None) -> Any:
        """``from_bytes``, keeping the fields of the writer's schema that no column reads (a
        sink that wrote a registered schema's extra fields, as a consumer of the topic sees
        them). JSON_SR and PROTOBUF records already come back with every field."""
        return self.from_bytes(data, as_written=True)

    # -- helpers -------------------------------------------------------------------------

    def _client(self) -> Any:
        if not self.registry_url:
            raise RecordSerdeError(
                f"The {self.what} needs a schema registry: set ksql.schema.registry.url."
            )
        return registry_client(self.registry_url)

    def _avro_bytes(self, data: Any) -> bytes:
        from confluent_kafka.serialization import MessageField, SerializationContext

        if self._serializer is None:
            from confluent_kafka.schema_registry.avro import AvroSerializer

            client = self._client()
            given = self.format.get(SCHEMA_ID)
            if given is not None:
                self._serializer = _GivenSchemaAvroWriter(client, int(given), self.what)
            else:
                self._serializer = AvroSerializer(client, self.schema_text(),
                                                  conf={"auto.register.schemas": True})
        if self.wrapped:
            if not isinstance(data, dict):
                raise RecordSerdeError(f"Cannot write the {self.what}: expected an object, got {data!r}.")
            upper = {str(k).upper(): v for k, v in data.items()}
            datum: Any = {c.name: _to_avro(c.type, data.get(c.name, upper.get(c.name.upper())), c.name)
                          for c in self.columns}
            # Fields past the columns (a sink writing a registered schema's extra fields,
            # ``engine.builders.registered_sink``) go as they are: Avro writes those its schema has.
            names = {c.name.upper() for c in self.columns}
            datum.update({k: v for k, v in data.items() if str(k).upper() not in names})
        else:
            datum = _to_avro(self.columns[0].type, data, self.columns[0].name)
        field = MessageField.KEY if self.is_key else MessageField.VALUE
        try:
            out = self._serializer(datum, SerializationContext(self.topic, field))
        except Exception as exc:
            _raise_if_unavailable(exc, f"Cannot write the {self.what} to {self.subject}")
            raise RecordSerdeError(f"Cannot write the {self.what} to {self.subject}: {_message(exc)}") from None
        return bytes(out)

    def _json_bytes(self, data: Any) -> bytes:
        from engine.serde.coerce import json_text

        if self._schema_id is None:
            given = self.format.get(SCHEMA_ID)
            if given is not None:
                self._schema_id = int(given)
            else:
                from confluent_kafka.schema_registry import Schema

                try:
                    self._schema_id = int(self._client().register_schema(
                        self.subject, Schema(self.schema_text(), "JSON")))
                except Exception as exc:
                    _raise_if_unavailable(exc, f"Cannot register the {self.what} schema under {self.subject}")
                    raise RecordSerdeError(
                        f"Cannot register the {self.what} schema under {self.subject}: {_message(exc)}"
                    ) from None
        return bytes([_MAGIC]) + struct.pack(">i", self._schema_id) + json_text(data).encode("utf-8")


    def _writer_codec(self) -> Any:
        """The PROTOBUF codec this serde writes with: the schema registered under the format's
        schema id, else the one generated from the columns (registered on first use)."""
        if self._proto is not None:
            return self._proto
        from engine.serde.protobuf import ProtoCodec

        full_name = self.format.get(SCHEMA_FULL_NAME)
        given = self.format.get(SCHEMA_ID)
        if self.format.name == PROTOBUF and given is not None:
            self._schema_id = int(given)
            self._proto = self._registered_codec(int(given), full_name, writing=True)
            return self._proto
        text = self.schema_text()
        self._proto = ProtoCodec.from_text(text, full_name=full_name)
        if self.format.name == PROTOBUF:
            from confluent_kafka.schema_registry import Schema

            try:
                self._schema_id = int(self._client().register_schema(
                    self.subject, Schema(text, "PROTOBUF")))
            except Exception as exc:
                self._proto = None
                _raise_if_unavailable(exc, f"Cannot register the {self.what} schema under {self.subject}")
                raise RecordSerdeError(
                    f"Cannot register the {self.what} schema under {self.subject}: {_message(exc)}"
                ) from None
        return self._proto

    def _registered_codec(self, schema_id: int, full_name: str | None = None, *, writing: bool = False) -> Any:
        """The PROTOBUF codec of the schema registered under ``schema_id`` (with the files it
        references), cached per id."""
        codec = self._proto_readers.get(schema_id)
        if codec is not None and full_name is None:
            return codec
        from engine.serde.protobuf import ProtoCodec

        client = self._client()
        try:
            schema = client.get_schema(schema_id)
            imports = {str(ref.name): str(client.get_version(ref.subject, ref.version).schema.schema_str)
                       for ref in schema.references or ()}
        except Exception as exc:
            if writing:
                raise SchemaFetchError(fetch_for_serialization_error(schema_id)) from None
            raise RecordSerdeError(
                f"Cannot read the {self.what} schema with id {schema_id}: {_message(exc)}"
            ) from None
        if str(schema.schema_type or "").upper() != PROTOBUF:
            raise RecordSerdeError(
                f"The {self.what} schema with id {schema_id} is a {schema.schema_type} schema, not PROTOBUF."
            )
        try:
            codec = ProtoCodec.from_text(str(schema.schema_str), full_name=full_name, imports=imports)
        except RecordSerdeError as exc:
            raise RecordSerdeError(f"Cannot read the {self.what} schema with id {schema_id}: {exc}") from None
        if full_name is None:
            self._proto_readers[schema_id] = codec
        return codec

    def _protobuf_bytes(self, data: Any) -> bytes:
        from engine.serde.protobuf import encode_message_indexes

        codec = self._writer_codec()
        payload = codec.encode(data, self.columns, self.what)
        if self.format.name == PROTOBUF_NOSR:
            return payload
        header = bytes([_MAGIC]) + struct.pack(">i", int(self._schema_id or 0))
        return header + encode_message_indexes(codec.indexes) + payload

    def _protobuf_record(self, schema_id: int, payload: bytes) -> Any:
        from engine.serde.protobuf import decode_message_indexes

        indexes, body = decode_message_indexes(payload, self.what)
        codec = self._registered_codec(schema_id)
        message_class = codec.class_for(indexes)
        if message_class is None:
            raise RecordSerdeError(
                f"The {self.what} bytes name the message indexes {list(indexes)}, which the schema with id "
                f"{schema_id} does not define."
            )
        try:
            return codec.decode(body, self.what, message_class)
        except RecordSerdeError as exc:
            raise RecordSerdeError(f"Cannot read the {self.what} with schema id {schema_id}: {exc}") from None


class _GivenSchemaAvroWriter:
    """Writes Avro with a schema already registered under ``schema_id`` (KEY/VALUE_SCHEMA_ID):
    the header names that id whatever the subject."""

    def __init__(self, client: Any, schema_id: int, what: str) -> None:
        import fastavro

        try:
            text = client.get_schema(schema_id).schema_str
        except Exception:
            raise SchemaFetchError(fetch_for_serialization_error(schema_id)) from None
        self.schema = fastavro.parse_schema(json.loads(text))
        self.header = bytes([_MAGIC]) + struct.pack(">i", schema_id)

    def __call__(self, datum: Any, context: Any) -> bytes:
        import io

        import fastavro

        out = io.BytesIO()
        out.write(self.header)
        fastavro.schemaless_writer(out, self.schema, datum)
        return out.getvalue()


def with_avro_defaults(value: Any, schema: Any) -> Any:
    """``value`` (QTT form) with each null field of an Avro record that the schema gives a
    non-null ``default`` set to that default, in nested records, arrays and maps too.

    ksqlDB writes a record with a registered schema through Kafka Connect's ``Struct``, whose
    ``get`` answers a null field with the field's default: INSERT VALUES into a source with
    VALUE_SCHEMA_ID writes the default of a STRUCT field the statement leaves out. Field names
    match exactly, else ignoring case (as the serde's columns do); a type named again by its
    name is the record declared with it (fastavro's ``expand_schema``).
    """
    from fastavro.schema import expand_schema

    return _filled(value, expand_schema(schema))


def _filled(value: Any, schema: Any) -> Any:
    if value is None:
        return None
    if isinstance(schema, list):  # a union: the one branch the value can be
        branches = [b for b in schema if b != "null"]
        return _filled(value, branches[0]) if len(branches) == 1 else value
    if not isinstance(schema, dict):
        return value
    kind = schema.get("type")
    if isinstance(kind, dict | list):
        return _filled(value, kind)
    if kind == "array" and isinstance(value, list):
        return [_filled(v, schema.get("items")) for v in value]
    if kind == "map" and isinstance(value, dict):
        return {k: _filled(v, schema.get("values")) for k, v in value.items()}
    if kind != "record" or not isinstance(value, dict):
        return value
    out = dict(value)
    upper = {str(k).upper(): k for k in value}
    for field in schema.get("fields", ()):
        name = str(field.get("name"))
        key = name if name in value else upper.get(name.upper(), name)
        current = out.get(key)
        if current is None and field.get("default") is not None:
            out[key] = field["default"]
        elif current is not None:
            out[key] = _filled(current, field.get("type"))
    return out


class SchemaFetchError(RecordSerdeError):
    """The registered schema a format's SCHEMA_ID names could not be read to write a record."""


def fetch_for_serialization_error(schema_id: int) -> str:
    """ksqlDB's text (SerdeUtils) when the schema a KEY/VALUE_SCHEMA_ID names cannot be read."""
    return f"Failed to fetch schema for serialization from Schema Registry using schema id: {schema_id}"


def serialization_error(topic: str, reason: str) -> str:
    """ksqlDB's text for a record its AVRO, JSON_SR or PROTOBUF serializer cannot write."""
    return (f"Error serializing message to topic: {topic}. {reason}\n"
            "Hint: You probably forgot to add VALUE_SCHEMA_ID when creating the source.")


def wire_serde(serde: RecordSerde, topic: str, registry_url: str | None) -> RecordSerde:
    """``serde`` with the registry's wire format when its format has one and a registry is
    configured (PROTOBUF_NOSR: always, it needs none); ``serde`` itself otherwise."""
    if not serde.columns or serde.format.name not in WIRE_FORMATS:
        return serde
    if registry_url or serde.format.name == PROTOBUF_NOSR:
        return WireSerde(serde, topic, registry_url)
    return serde


def _raise_if_unavailable(exc: BaseException, what: str) -> None:
    """Raise ``SchemaRegistryUnavailableError`` when ``exc`` says the registry did not answer
    (a transport error: refused, reset, timed out; or a 5xx), not that the record is wrong."""
    import httpx
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    cause: BaseException | None = exc
    while cause is not None:
        status = getattr(cause, "http_status_code", None) if isinstance(cause, SchemaRegistryError) else None
        if isinstance(cause, httpx.TransportError | ConnectionError | TimeoutError) or (
                isinstance(status, int) and status >= 500):
            raise SchemaRegistryUnavailableError(
                f"{what}: the schema registry did not answer: {_message(exc)}") from None
        cause = cause.__cause__ or cause.__context__


def _message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    first = text.splitlines()[0]
    return first if len(first) <= 300 else first[:297] + "..."
