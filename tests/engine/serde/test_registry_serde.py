"""Schema-registry wire serdes (AVRO, JSON_SR): framing, ksqlDB's schema naming, round trips.

Against confluent-kafka's in-process mock registry here; ``test_registry_serde_real`` holds
the same serdes against the real registry (Apicurio's Confluent API).
"""

from __future__ import annotations

import decimal
import json
import pickle
import struct
import uuid

import pytest

from engine.errors import RecordSerdeError
from engine.plan import types as T
from engine.plan.schema import Column, Namespace
from engine.serde import FormatInfo, SerdeFeatures, key_serde, value_serde
from engine.serde.registry import WireSerde, registry_client, split_header, wire_serde

COLUMNS = (
    Column("ID", T.parse_type("BIGINT")),
    Column("NAME", T.parse_type("STRING")),
    Column("PRICE", T.parse_type("DECIMAL(6, 2)")),
    Column("TAGS", T.parse_type("ARRAY<STRING>")),
    Column("ATTRS", T.parse_type("MAP<STRING, INT>")),
    Column("ADDRESS", T.parse_type("STRUCT<STREET STRING, ZIP INT>")),
    Column("AT", T.parse_type("TIMESTAMP")),
    Column("DAY", T.parse_type("DATE")),
    Column("RAW", T.parse_type("BYTES")),
)
RECORD = {
    "ID": 7, "NAME": "widget", "PRICE": decimal.Decimal("12.50"), "TAGS": ["a", None], "ATTRS": {"x": 1},
    "ADDRESS": {"STREET": "Main", "ZIP": 12345}, "AT": 1700000000123, "DAY": 19000, "RAW": "AQI=",
}


def _url() -> str:
    return f"mock://{uuid.uuid4().hex}"


def _value(fmt: str, topic: str, url: str, columns: tuple[Column, ...] = COLUMNS,
           properties: dict[str, str] | None = None) -> WireSerde:
    serde = wire_serde(value_serde(FormatInfo(fmt, properties or {}), columns, SerdeFeatures()), topic, url)
    assert isinstance(serde, WireSerde)
    return serde


def test_avro_round_trip_in_confluent_framing_registers_under_topic_value() -> None:
    url = _url()
    serde = _value("AVRO", "orders", url)
    data = serde.to_bytes(RECORD)
    assert data is not None
    schema_id, _ = split_header(data, "value")
    client = registry_client(url)
    assert client.get_subjects() == ["orders-value"]
    assert client.get_latest_version("orders-value").schema_id == schema_id
    assert serde.from_bytes(data) == RECORD


def test_avro_decimals_are_rescaled_half_up_as_ksqldb_rescales_them() -> None:
    columns = (Column("STEPS", T.parse_type("ARRAY<DECIMAL(3, 1)>")), Column("P", T.parse_type("DECIMAL(3, 1)")))
    serde = _value("AVRO", "t", _url(), columns)
    data = serde.to_bytes({"STEPS": [0.25, 1.25, "-1.25"], "P": 2.35})
    assert serde.from_bytes(data) == {
        "STEPS": [decimal.Decimal("0.3"), decimal.Decimal("1.3"), decimal.Decimal("-1.3")], "P": decimal.Decimal("2.4"),
    }
    with pytest.raises(RecordSerdeError, match="Cannot write P as DECIMAL"):
        serde.to_bytes({"STEPS": None, "P": 123.4})


def test_avro_schema_uses_ksqldb_names_optional_fields_and_decimal_bytes() -> None:
    schema = json.loads(_value("AVRO", "t", _url()).schema_text())
    assert (schema["namespace"], schema["name"]) == ("io.confluent.ksql.avro_schemas", "KsqlDataSourceSchema")
    fields = {f["name"]: f for f in schema["fields"]}
    assert list(fields) == [c.name for c in COLUMNS]
    assert all(f["type"][0] == "null" and f["default"] is None for f in fields.values())
    price = fields["PRICE"]["type"][1]
    assert (price["type"], price["logicalType"], price["precision"], price["scale"]) == ("bytes", "decimal", 6, 2)
    assert fields["ADDRESS"]["type"][1]["name"] == "KsqlDataSourceSchema_ADDRESS"
    assert fields["ATTRS"]["type"][1]["type"] == "map"
    assert fields["AT"]["type"][1] == {"type": "long", "logicalType": "timestamp-millis"}


def test_avro_schema_full_name_renames_the_record() -> None:
    serde = _value("AVRO", "t", _url(), properties={"schema_full_name": "com.acme.Order"})
    schema = json.loads(serde.schema_text())
    assert (schema["namespace"], schema["name"]) == ("com.acme", "Order")
    assert schema["fields"][5]["type"][1]["name"] == "Order_ADDRESS"


def test_avro_single_key_is_unwrapped_under_topic_key() -> None:
    url = _url()
    serde = wire_serde(key_serde(FormatInfo("AVRO", {}), (Column("K", T.STRING, Namespace.KEY),)), "users", url)
    assert isinstance(serde, WireSerde)
    assert json.loads(serde.schema_text()) == ["null", "string"]
    data = serde.to_bytes("alice")
    assert serde.from_bytes(data) == "alice"
    assert registry_client(url).get_subjects() == ["users-key"]


def test_avro_with_a_given_schema_id_writes_with_that_schema() -> None:
    url = _url()
    first = _value("AVRO", "a", url)
    schema_id, _ = split_header(first.to_bytes(RECORD) or b"", "value")
    second = _value("AVRO", "b", url, properties={"schema_id": str(schema_id)})
    data = second.to_bytes(RECORD)
    assert split_header(data or b"", "value")[0] == schema_id
    assert second.from_bytes(data) == RECORD
    assert registry_client(url).get_subjects() == ["a-value"]  # nothing registered for b


def test_json_sr_frames_json_text_behind_the_registered_schema_id() -> None:
    url = _url()
    serde = _value("JSON_SR", "events", url)
    record = {**RECORD, "PRICE": 12.5}
    data = serde.to_bytes(record)
    schema_id, payload = split_header(data or b"", "value")
    assert registry_client(url).get_latest_version("events-value").schema_id == schema_id
    assert json.loads(payload) == record
    assert serde.from_bytes(data) == record
    schema = json.loads(serde.schema_text())
    assert schema["properties"]["ID"]["oneOf"][0] == {"type": "null"}
    assert schema["properties"]["ADDRESS"]["connect.index"] == 5


def test_json_sr_registers_its_schema_once_and_frames_later_records_with_that_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = _url()
    serde = _value("JSON_SR", "events", url)
    record = {**RECORD, "PRICE": 12.5}
    schema_id, _ = split_header(serde.to_bytes(record) or b"", "value")

    def unreachable(*args: object, **kwargs: object) -> int:
        raise ConnectionError("the registry is down")

    monkeypatch.setattr(registry_client(url), "register_schema", unreachable)
    again = serde.to_bytes({**record, "ID": 8})
    assert split_header(again or b"", "value")[0] == schema_id


def test_nulls_stay_null_and_tombstones_have_no_bytes() -> None:
    serde = _value("AVRO", "n", _url())
    assert serde.to_bytes(None) is None and serde.from_bytes(None) is None
    empty = {c.name: None for c in COLUMNS}
    assert serde.from_bytes(serde.to_bytes(empty)) == empty


def test_bytes_without_the_header_are_a_clear_error() -> None:
    serde = _value("AVRO", "bad", _url())
    with pytest.raises(RecordSerdeError, match="do not start with the schema registry header"):
        serde.from_bytes(b'{"ID": 1}')


def test_a_value_of_the_wrong_type_names_the_column() -> None:
    serde = _value("AVRO", "bad", _url())
    with pytest.raises(RecordSerdeError, match="ID"):
        serde.to_bytes({**RECORD, "ID": "not a number"})


def test_the_serde_pickles_to_workers_with_its_topic_and_registry() -> None:
    url = _url()
    serde = _value("AVRO", "p", url)
    data = serde.to_bytes(RECORD)
    copy = pickle.loads(pickle.dumps(serde))
    assert (copy.topic, copy.registry_url, copy.subject) == ("p", url, "p-value")
    assert copy.from_bytes(data) == RECORD


def test_formats_without_a_wire_serde_and_no_registry_are_unchanged() -> None:
    serde = value_serde(FormatInfo("JSON", {}), COLUMNS, SerdeFeatures())
    assert wire_serde(serde, "t", "mock://x") is serde
    avro = value_serde(FormatInfo("AVRO", {}), COLUMNS, SerdeFeatures())
    assert wire_serde(avro, "t", None) is avro


def test_a_serde_without_columns_gets_no_wire_serde() -> None:
    # A stream without key columns has no key to frame, whatever its key format.
    for fmt in ("AVRO", "PROTOBUF_NOSR"):
        serde = key_serde(FormatInfo(fmt, {}), ())
        assert wire_serde(serde, "t", "mock://x") is serde


def test_header_is_magic_byte_and_big_endian_id() -> None:
    assert split_header(b"\x00" + struct.pack(">i", 258) + b"x", "value") == (258, b"x")


def test_a_registry_clients_error_is_quoted_by_its_first_line_cut_to_300_characters() -> None:
    from engine.serde.registry import _message

    assert _message(ValueError("Subject not found\n  at line 2")) == "Subject not found"
    assert _message(KeyError()) == "KeyError"
    cut = _message(RuntimeError("x" * 400))
    assert cut == "x" * 297 + "..." and len(cut) == 300


def test_avro_writes_fields_past_the_columns_that_the_given_schema_has_and_reads_them_back_as_written() -> None:
    url = _url()
    schema = {"type": "record", "name": "Low", "fields": [
        {"name": "QTY", "type": ["null", "int"], "default": None},
        {"name": "reorder", "type": "int", "default": 50},
        {"name": "supplier", "type": ["null", "string"], "default": None},
    ]}
    from confluent_kafka.schema_registry import Schema

    schema_id = registry_client(url).register_schema("stock-value", Schema(json.dumps(schema), "AVRO"))
    serde = _value("AVRO", "low", url, (Column("QTY", T.INTEGER),), properties={"schema_id": str(schema_id)})
    data = serde.to_bytes({"QTY": 3, "reorder": 20, "supplier": None, "ignored": "x"})
    assert serde.from_bytes(data) == {"QTY": 3}  # a query reading the topic sees its columns
    assert serde.read_as_written(data) == {"QTY": 3, "reorder": 20, "supplier": None}
    assert serde.read_as_written(serde.to_bytes({"QTY": 4})) == {"QTY": 4, "reorder": 50, "supplier": None}


def test_an_in_process_registry_client_loads_no_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    import ssl

    from engine.serde.registry import forget_registry_client

    def refuse(*_args: object, **_kwargs: object) -> ssl.SSLContext:
        raise AssertionError("a mock:// registry client loaded a CA bundle")

    monkeypatch.setattr(ssl, "create_default_context", refuse)
    url = f"mock://no-ca-{uuid.uuid4().hex}"
    try:
        client = registry_client(url)
        assert client is registry_client(url)  # one client per URL and process
        assert client.get_subjects() == []
    finally:
        forget_registry_client(url)


def test_a_forgotten_in_process_registry_starts_empty_again() -> None:
    from confluent_kafka.schema_registry import Schema

    from engine.serde.registry import forget_registry_client

    url = f"mock://forgotten-{uuid.uuid4().hex}"
    first = registry_client(url)
    first.register_schema("t-value", Schema('{"type": "string"}', "AVRO"))
    assert first.get_subjects() == ["t-value"]
    forget_registry_client(url)
    try:
        again = registry_client(url)
        assert again is not first
        assert again.get_subjects() == []
    finally:
        forget_registry_client(url)


def test_null_fields_of_a_registered_avro_record_take_their_defaults_at_every_depth() -> None:
    from engine.serde.registry import with_avro_defaults

    inner = {"type": "record", "name": "Vote", "namespace": "com.acme", "fields": [
        {"name": "num", "type": "long", "default": 10}, {"name": "email", "type": "string"}]}
    schema = {"type": "record", "name": "Row", "namespace": "com.acme", "fields": [
        {"name": "ID", "type": "string"},
        {"name": "VOTE", "type": inner},
        {"name": "MAYBE", "type": ["null", "Vote"], "default": None},
        {"name": "MANY", "type": {"type": "array", "items": "Vote"}, "default": []},
        {"name": "BY_NAME", "type": {"type": "map", "values": "com.acme.Vote"}},
        {"name": "LEVEL", "type": "int", "default": 3},
    ]}
    value = {"ID": "a", "VOTE": {"EMAIL": "x@y", "NUM": None}, "MAYBE": None,
             "MANY": [{"email": "z", "num": None}], "BY_NAME": {"k": {"email": "w"}}, "LEVEL": None}
    filled = with_avro_defaults(value, schema)
    assert filled == {"ID": "a", "VOTE": {"EMAIL": "x@y", "NUM": 10}, "MAYBE": None,
                      "MANY": [{"email": "z", "num": 10}], "BY_NAME": {"k": {"email": "w", "num": 10}},
                      "LEVEL": 3}
    assert value["LEVEL"] is None  # the caller's row is left as it was
    assert with_avro_defaults(None, schema) is None
