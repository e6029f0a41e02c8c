"""PROTOBUF and PROTOBUF_NOSR records as Kafka bytes: ksqlDB's proto3 schema for the columns,
Confluent's framing (magic byte, schema id, message indexes), round trips per type, and the
bytes held against confluent-kafka's own ProtobufSerializer/ProtobufDeserializer.

Against confluent-kafka's in-process mock registry; ``tests/engine/runtime/test_kafka_registry.py``
runs PROTOBUF through the real registry and broker.
"""

from __future__ import annotations

import decimal
import re
import struct
import uuid
import warnings
from typing import Any

import pytest

from engine.errors import RecordSerdeError
from engine.plan import types as T
from engine.plan.schema import Column, Namespace
from engine.serde import FormatInfo, SerdeFeatures, key_serde, value_serde
from engine.serde.protobuf import (
    ProtoCodec,
    decode_message_indexes,
    encode_message_indexes,
    proto_schema,
)
from engine.serde.registry import WireSerde, registry_client, split_header, wire_serde
from engine.serde.schema_inference import protobuf_to_sql

COLUMNS = (
    Column("ID", T.parse_type("BIGINT")),
    Column("QTY", T.parse_type("INT")),
    Column("NAME", T.parse_type("STRING")),
    Column("OK", T.parse_type("BOOLEAN")),
    Column("RATE", T.parse_type("DOUBLE")),
    Column("PRICE", T.parse_type("DECIMAL(6, 2)")),
    Column("TAGS", T.parse_type("ARRAY<STRING>")),
    Column("ATTRS", T.parse_type("MAP<STRING, INT>")),
    Column("ADDRESS", T.parse_type("STRUCT<STREET STRING, ZIP INT, GEO STRUCT<LAT DOUBLE>>")),
    Column("LINES", T.parse_type("ARRAY<STRUCT<SKU STRING, N BIGINT>>")),
    Column("AT", T.parse_type("TIMESTAMP")),
    Column("DAY", T.parse_type("DATE")),
    Column("TOD", T.parse_type("TIME")),
    Column("RAW", T.parse_type("BYTES")),
)
RECORD: dict[str, Any] = {
    "ID": 7, "QTY": -3, "NAME": "widget", "OK": True, "RATE": 0.25, "PRICE": decimal.Decimal("-12.50"),
    "TAGS": ["a", "b"], "ATTRS": {"x": 1, "y": -2}, "ADDRESS": {"STREET": "Main", "ZIP": 12345, "GEO": {"LAT": 1.5}},
    "LINES": [{"SKU": "s1", "N": 2}, {"SKU": "s2", "N": 3}], "AT": -1500, "DAY": 19000, "TOD": 3723004,
    "RAW": "AQI=",
}
NULLS = {c.name: None for c in COLUMNS}


def _url() -> str:
    return f"mock://{uuid.uuid4().hex}"


def _value(fmt: str, topic: str, url: str | None, columns: tuple[Column, ...] = COLUMNS,
           properties: dict[str, str] | None = None) -> WireSerde:
    serde = wire_serde(value_serde(FormatInfo(fmt, properties or {}), columns, SerdeFeatures()), topic, url)
    assert isinstance(serde, WireSerde)
    return serde


def _confluent() -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from confluent_kafka.schema_registry.protobuf import (
            ProtobufDeserializer,
            ProtobufSerializer,
        )
    return ProtobufSerializer, ProtobufDeserializer


def _context(topic: str) -> Any:
    from confluent_kafka.serialization import MessageField, SerializationContext

    return SerializationContext(topic, MessageField.VALUE)


# ---------------------------------------------------------------------- the schema


def test_the_schema_is_ksqldbs_proto3_message_of_the_columns() -> None:
    text = proto_schema(COLUMNS[:3], FormatInfo("PROTOBUF", {}))
    assert text == (
        'syntax = "proto3";\n\nmessage ConnectDefault1 {\n  int64 ID = 1;\n  int32 QTY = 2;\n'
        "  string NAME = 3;\n}\n"
    )


def test_the_schema_maps_every_type_as_ksqldb_and_reads_back_as_the_columns() -> None:
    text = proto_schema(COLUMNS, FormatInfo("PROTOBUF", {}))
    assert 'import "confluent/type/decimal.proto";' in text
    assert "confluent.type.Decimal PRICE = 6 [(confluent.field_meta)" in text
    assert 'key: "precision", value: "6"' in text and 'key: "scale", value: "2"' in text
    assert "repeated string TAGS = 7;" in text
    assert "map<string, int32> ATTRS = 8;" in text
    assert "ConnectDefault2 ADDRESS = 9;" in text and "message ConnectDefault3 {" in text
    assert "google.protobuf.Timestamp AT = 11;" in text
    assert "google.type.Date DAY = 12;" in text and "google.type.TimeOfDay TOD = 13;" in text
    inferred = protobuf_to_sql(text, keep_names=True)
    assert isinstance(inferred, T.Struct)
    assert [(f.name, f.type) for f in inferred.fields] == [(c.name, c.type) for c in COLUMNS]


@pytest.mark.parametrize(("representation", "expected"), [
    ("WRAPPER", "google.protobuf.Int64Value ID = 1;"),
    ("OPTIONAL", "optional int64 ID = 1;"),
])
def test_a_nullable_representation_makes_primitives_nullable(representation: str, expected: str) -> None:
    text = proto_schema(COLUMNS, FormatInfo("PROTOBUF", {"nullable_representation": representation}))
    assert expected in text
    assert "repeated string TAGS = 7;" in text  # arrays, maps and messages stay as they are


def test_schema_full_name_names_the_message_and_its_package() -> None:
    text = proto_schema(COLUMNS[:1], FormatInfo("PROTOBUF", {"schema_full_name": "com.acme.Order"}))
    assert "package com.acme;" in text and "message Order {" in text


# ---------------------------------------------------------------------- round trips


@pytest.mark.parametrize("representation", [None, "WRAPPER", "OPTIONAL"])
def test_every_type_round_trips_in_confluent_framing(representation: str | None) -> None:
    url = _url()
    props = {"nullable_representation": representation} if representation else {}
    serde = _value("PROTOBUF", "orders", url, properties=props)
    data = serde.to_bytes(RECORD)
    assert data is not None
    schema_id, rest = split_header(data, "value")
    assert rest[:1] == b"\x00"  # the first message: a single 0 byte of message indexes
    assert registry_client(url).get_latest_version("orders-value").schema_id == schema_id
    assert serde.from_bytes(data) == RECORD


def test_nulls_read_as_protobuf_defaults_without_a_nullable_representation() -> None:
    serde = _value("PROTOBUF", "t", _url())
    back = serde.from_bytes(serde.to_bytes(NULLS))
    assert (back["ID"], back["NAME"], back["OK"], back["TAGS"], back["ATTRS"]) == (0, "", False, [], {})
    assert (back["PRICE"], back["ADDRESS"], back["AT"]) == (None, None, None)
    read = serde.inner.deserialize(back)
    assert read is not None and read["ID"] == 0  # what the engine reads, as ksqlDB


@pytest.mark.parametrize("representation", ["WRAPPER", "OPTIONAL"])
def test_nulls_stay_null_with_a_nullable_representation(representation: str) -> None:
    serde = _value("PROTOBUF", "t", _url(), properties={"nullable_representation": representation})
    back = serde.from_bytes(serde.to_bytes(NULLS))
    repeated = ("TAGS", "ATTRS", "LINES")  # protobuf has no NULL array or map: they read empty
    assert {k: v for k, v in back.items() if k not in repeated} == {k: None for k in NULLS if k not in repeated}
    assert [back[k] for k in repeated] == [[], {}, []]


def test_nested_nulls_and_decimal_scales() -> None:
    serde = _value("PROTOBUF", "t", _url())
    record = {**RECORD, "ADDRESS": {"STREET": "x", "ZIP": None, "GEO": None}, "PRICE": decimal.Decimal("0.05")}
    back = serde.from_bytes(serde.to_bytes(record))
    assert back["ADDRESS"] == {"STREET": "x", "ZIP": 0, "GEO": None}
    assert str(back["PRICE"]) == "0.05"


def test_a_field_written_by_another_case_of_its_column_name_takes_the_columns_decimal_type() -> None:
    columns = (Column("PRICE", T.parse_type("DECIMAL(6, 2)")),)
    serde = _value("PROTOBUF_NOSR", "t", None, columns)
    data = serde.to_bytes({"price": decimal.Decimal("1.5")})
    assert data == b"\n\x08\n\x02\x00\x96\x10\x06\x18\x02"  # unscaled 150, precision 6, scale 2
    back = serde.from_bytes(data)
    assert str(back["PRICE"]) == "1.50"


UNTYPED = """
syntax = "proto3";
import "confluent/type/decimal.proto";
message M { confluent.type.Decimal p = 1; Inner s = 2; }
message Inner { int32 a = 1; }
"""


def test_a_decimal_field_without_a_decimal_column_keeps_the_values_own_scale() -> None:
    codec = ProtoCodec.from_text(UNTYPED)
    data = codec.encode({"p": decimal.Decimal("1.25")}, (), "value")
    assert data == b"\n\x05\n\x01}\x18\x02"  # unscaled 125, scale 2, no precision
    assert codec.decode(data, "value") == {"p": decimal.Decimal("1.25"), "s": None}


def test_a_message_field_without_a_struct_column_is_filled_by_its_own_field_names() -> None:
    codec = ProtoCodec.from_text(UNTYPED)
    data = codec.encode({"S": {"A": 3}}, (), "value")
    assert data == b"\x12\x02\x08\x03"
    assert codec.decode(data, "value") == {"p": None, "s": {"a": 3}}


def test_protobuf_nosr_is_the_bare_payload_and_needs_no_registry() -> None:
    serde = _value("PROTOBUF_NOSR", "t", None)
    data = serde.to_bytes(RECORD)
    with_registry = _value("PROTOBUF", "t", _url()).to_bytes(RECORD)
    assert data is not None and with_registry is not None
    assert data == with_registry[6:]
    assert serde.from_bytes(data) == RECORD


def test_a_key_is_a_message_under_topic_key() -> None:
    url = _url()
    columns = (Column("K", T.parse_type("STRING"), Namespace.KEY),)
    serde = wire_serde(key_serde(FormatInfo("PROTOBUF", {}), columns), "orders", url)
    data = serde.to_bytes({"K": "k1"})
    assert registry_client(url).get_subjects() == ["orders-key"]
    assert serde.from_bytes(data) == {"K": "k1"}


# ---------------------------------------------------------------------- against confluent-kafka


def test_bytes_equal_confluent_kafkas_protobuf_serializer() -> None:
    serializer_class, deserializer_class = _confluent()
    serde = _value("PROTOBUF", "orders", _url())
    data = serde.to_bytes(RECORD)
    assert data is not None
    message_class = serde._writer_codec().message_class
    message = message_class()
    message.ParseFromString(data[6:])
    serializer = serializer_class(message_class, registry_client(_url()), {"use.deprecated.format": False})
    theirs = serializer(message, _context("orders"))
    assert theirs[:6] == data[:6]  # magic byte, schema id (both registries give 1), message index
    # The order of a map's entries on the wire is not fixed by protobuf (the Python runtime
    # writes a parsed map in its own hash order): the payloads compare as messages, and
    # byte for byte in protobuf's deterministic form.
    other = message_class()
    other.ParseFromString(theirs[6:])
    assert other == message
    assert other.SerializeToString(deterministic=True) == message.SerializeToString(deterministic=True)
    read = deserializer_class(message_class, {"use.deprecated.format": False})(data, _context("orders"))
    assert read.NAME == "widget" and read.ADDRESS.GEO.LAT == 1.5 and list(read.TAGS) == ["a", "b"]


def test_a_registered_schemas_second_message_is_written_and_read_with_its_indexes() -> None:
    serializer_class, _ = _confluent()
    url = _url()
    from confluent_kafka.schema_registry import Schema

    text = ('syntax = "proto3";\npackage shop;\nmessage Other { string X = 1; }\n'
            "message Order { string NAME = 1; int64 N = 2; Other O = 3; }\n")
    schema_id = registry_client(url).register_schema("any-value", Schema(text, "PROTOBUF"))
    columns = (Column("NAME", T.STRING), Column("N", T.BIGINT))
    serde = _value("PROTOBUF", "orders", url, columns,
                   {"schema_id": str(schema_id), "schema_full_name": "shop.Order"})
    data = serde.to_bytes({"NAME": "a", "N": 5})
    assert data is not None
    assert data[:7] == b"\x00" + struct.pack(">i", schema_id) + b"\x02\x02"  # one index: 1
    assert serde.from_bytes(data) == {"NAME": "a", "N": 5, "O": None}
    message_class = serde._writer_codec().message_class
    message = message_class(NAME="a", N=5)
    confluent = serializer_class(message_class, registry_client(_url()), {"use.deprecated.format": False})(
        message, _context("orders"))
    assert confluent[5:] == data[5:]


def test_message_indexes_follow_confluents_zigzag_encoding() -> None:
    assert encode_message_indexes([0]) == b"\x00"
    assert encode_message_indexes([1]) == b"\x02\x02"
    assert encode_message_indexes([2, 0, 70]) == b"\x06\x04\x00\x8c\x01"
    for indexes in ([0], [1], [2, 0, 70]):
        assert decode_message_indexes(encode_message_indexes(indexes) + b"rest", "value") == (tuple(indexes), b"rest")


def test_at_most_100_message_indexes_are_read() -> None:
    hundred = encode_message_indexes([3] * 100)
    assert decode_message_indexes(hundred + b"rest", "value") == ((3,) * 100, b"rest")
    with pytest.raises(RecordSerdeError, match=r"^The value bytes have an invalid protobuf message index count 101\.$"):
        decode_message_indexes(encode_message_indexes([3] * 101) + b"rest", "value")
    with pytest.raises(RecordSerdeError, match=r"^The key bytes have an invalid protobuf message index count -1\.$"):
        decode_message_indexes(b"\x01rest", "key")


def test_a_given_schema_id_0_is_written_in_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    # No registry hands out id 0, so the schema it names is stubbed: the header must still
    # carry the id as given.
    columns = (Column("QTY", T.INTEGER),)
    serde = _value("PROTOBUF", "t", _url(), columns, {"schema_id": "0"})
    codec = ProtoCodec.from_text(proto_schema(columns, FormatInfo("PROTOBUF", {})))
    monkeypatch.setattr(serde, "_registered_codec", lambda schema_id, full_name=None, writing=False: codec)
    data = serde.to_bytes({"QTY": 3})
    assert data == b"\x00" + struct.pack(">i", 0) + b"\x00" + b"\x08\x03"
    assert serde.from_bytes(data) == {"QTY": 3}


# ---------------------------------------------------------------------- errors


def test_bad_bytes_are_a_clear_error_naming_the_value() -> None:
    serde = _value("PROTOBUF", "t", _url())
    data = serde.to_bytes(RECORD)
    assert data is not None
    with pytest.raises(RecordSerdeError, match="PROTOBUF value bytes do not start with the schema registry header"):
        serde.from_bytes(b"\x01garbage")
    with pytest.raises(RecordSerdeError, match=r"PROTOBUF value .*not a valid protobuf ConnectDefault1 message"):
        serde.from_bytes(data[:6] + b"\xff\xff\xff")
    with pytest.raises(RecordSerdeError, match="message indexes \\[5\\]"):
        serde.from_bytes(data[:5] + b"\x02\x0a" + data[6:])
    with pytest.raises(RecordSerdeError, match="Cannot read the PROTOBUF value schema with id 999"):
        serde.from_bytes(b"\x00" + struct.pack(">i", 999) + b"\x00")
    nosr = _value("PROTOBUF_NOSR", "t", None)
    with pytest.raises(RecordSerdeError, match="PROTOBUF_NOSR value bytes are not a valid protobuf"):
        nosr.from_bytes(b"\x0a\xff")


def test_a_value_of_the_wrong_type_names_the_field() -> None:
    serde = _value("PROTOBUF", "t", _url())
    with pytest.raises(RecordSerdeError, match="PROTOBUF value field QTY"):
        serde.to_bytes({**RECORD, "QTY": "many"})
    assert serde.from_bytes(serde.to_bytes({"NOPE": 1, "ID": 2}))["ID"] == 2  # unknown fields are dropped


def test_a_boolean_is_not_written_to_an_integer_field() -> None:
    """In the words of ksqlDB's KsqlConnectSerializer, with its hint."""
    serde = _value("PROTOBUF_NOSR", "t", None)
    hint = "Hint: You probably forgot to add VALUE_SCHEMA_ID when creating the source."
    with pytest.raises(
        RecordSerdeError,
        match=r"^Error serializing message to topic: t\. Cannot write the PROTOBUF_NOSR value field ID: True "
              r"\(a boolean is not an integer\)\.\n" + re.escape(hint) + "$",
    ):
        serde.to_bytes({**RECORD, "ID": True})
    assert serde.from_bytes(serde.to_bytes({**RECORD, "ID": 1})) == {**RECORD, "ID": 1}


def test_a_schema_with_an_unknown_type_is_refused_clearly() -> None:
    with pytest.raises(RecordSerdeError, match="unknown type 'Missing'"):
        ProtoCodec.from_text('syntax = "proto3"; message M { Missing x = 1; }')
    with pytest.raises(RecordSerdeError, match="has no message 'a.B'"):
        ProtoCodec.from_text('syntax = "proto3"; message M { int32 x = 1; }', full_name="a.B")
    with pytest.raises(RecordSerdeError, match="Invalid protobuf schema"):
        ProtoCodec.from_text("syntax = proto3 message {")


def test_the_serde_pickles_to_workers() -> None:
    import pickle

    serde = _value("PROTOBUF_NOSR", "t", None)
    copy = pickle.loads(pickle.dumps(serde))
    assert copy.from_bytes(serde.to_bytes(RECORD)) == RECORD


@pytest.mark.parametrize("fmt", ["AVRO", "PROTOBUF"])
def test_a_schema_id_the_registry_does_not_know_fails_the_write_in_ksqldbs_words(fmt: str) -> None:
    serde = _value(fmt, "t", _url(), properties={"schema_id": "999"})
    with pytest.raises(RecordSerdeError) as caught:
        serde.to_bytes(RECORD)
    assert str(caught.value) == "Failed to fetch schema for serialization from Schema Registry using schema id: 999"
