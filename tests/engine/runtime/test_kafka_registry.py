"""Persistent queries over AVRO and JSON_SR topics in the schema registry's wire format
(a real broker, a real registry, ``ksql.schema.registry.url``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from engine.hosting.application import StreamingApplication
from engine.kafka.admin import TopicAdmin
from engine.kafka.consume import read_topic
from engine.kafka.produce import ProducerRecord, RecordProducer
from engine.plan import types as T
from engine.plan.schema import Column
from engine.serde import FormatInfo, SerdeFeatures, value_serde
from engine.serde.registry import registry_client, split_header, wire_serde

pytestmark = pytest.mark.usefixtures("spark")


def _run_statements(bootstrap: str, url: str, tmp_path: Path, statements: str) -> StreamingApplication:
    """Run ``statements`` (from the earliest offsets, with the registry) until caught up; the
    stopped application."""
    app = StreamingApplication(bootstrap, tmp_path / "state")
    app.load()
    app.submit(f"""
        SET 'auto.offset.reset'='earliest';
        SET 'ksql.schema.registry.url'='{url}';
        {statements}
    """)
    try:
        app.run_until_caught_up()
    finally:
        app.stop()
    return app


@pytest.mark.parametrize("fmt", ["AVRO", "JSON_SR"])
def test_a_query_reads_and_writes_the_registry_wire_format(
    fmt: str, kafka_broker: Any, schema_registry: Any, tmp_path: Path
) -> None:
    bootstrap, url = kafka_broker.bootstrap_servers, schema_registry.url
    source, sink = f"orders_{uuid.uuid4().hex[:8]}", f"OUT_{uuid.uuid4().hex[:8]}"
    TopicAdmin(bootstrap).create_topic(source, 1)
    columns = (Column("NAME", T.parse_type("STRING")), Column("PRICE", T.parse_type("DECIMAL(6, 2)")))
    writer = wire_serde(value_serde(FormatInfo(fmt, {}), columns, SerdeFeatures()), source, url)
    producer = RecordProducer(bootstrap)
    for i, (name, price) in enumerate([("a", "1.25"), ("b", "20.00")]):
        producer.send(source, ProducerRecord(key=None, value=writer.to_bytes({"NAME": name, "PRICE": price}),
                                             timestamp=1000 + i))
    producer.flush()

    _run_statements(bootstrap, url, tmp_path, f"""
        CREATE STREAM ORDERS (NAME STRING, PRICE DECIMAL(6, 2)) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='{fmt}');
        CREATE STREAM {sink} WITH (KAFKA_TOPIC='{sink}') AS
            SELECT UCASE(NAME) AS NAME, PRICE * 2 AS DOUBLED FROM ORDERS;
    """)

    out_columns = (Column("NAME", T.parse_type("STRING")), Column("DOUBLED", T.parse_type("DECIMAL(7, 2)")))
    reader = wire_serde(value_serde(FormatInfo(fmt, {}), out_columns, SerdeFeatures()), sink, url)
    records = list(read_topic(bootstrap, sink))
    values = [reader.from_bytes(r.value) for r in records]
    assert [(v["NAME"], str(v["DOUBLED"])) for v in values] == [("A", "2.50"), ("B", "40.00")]
    latest = registry_client(url).get_latest_version(f"{sink}-value")
    assert {split_header(r.value or b"", "value")[0] for r in records} == {latest.schema_id}


@pytest.mark.parametrize("fmt", ["PROTOBUF", "PROTOBUF_NOSR"])
def test_a_query_reads_and_writes_protobuf_records(
    fmt: str, kafka_broker: Any, schema_registry: Any, tmp_path: Path
) -> None:
    """Binary protobuf through the real registry (PROTOBUF: Confluent framing with the message
    indexes, the schema with its well-known imports registered on Apicurio; PROTOBUF_NOSR:
    the bare payload), nested structs, arrays, maps, decimals and timestamps included."""
    bootstrap, url = kafka_broker.bootstrap_servers, schema_registry.url
    source, sink = f"pb_{uuid.uuid4().hex[:8]}", f"PB_OUT_{uuid.uuid4().hex[:8]}"
    TopicAdmin(bootstrap).create_topic(source, 1)
    columns = (
        Column("NAME", T.parse_type("STRING")), Column("PRICE", T.parse_type("DECIMAL(6, 2)")),
        Column("ADDR", T.parse_type("STRUCT<CITY STRING, ZIP INT>")), Column("TAGS", T.parse_type("ARRAY<STRING>")),
        Column("ATTRS", T.parse_type("MAP<STRING, BIGINT>")), Column("AT", T.parse_type("TIMESTAMP")),
    )
    writer = wire_serde(value_serde(FormatInfo(fmt, {}), columns, SerdeFeatures()), source, url)
    producer = RecordProducer(bootstrap)
    rows = [("a", "1.25", "lyon", 1700000000123), ("b", "20.00", "nice", 0)]
    for i, (name, price, city, at) in enumerate(rows):
        value = {"NAME": name, "PRICE": price, "ADDR": {"CITY": city, "ZIP": i}, "TAGS": [name, "t"],
                 "ATTRS": {"k": i}, "AT": at}
        producer.send(source, ProducerRecord(key=None, value=writer.to_bytes(value), timestamp=1000 + i))
    producer.send(source, ProducerRecord(key=None, value=b"\x00\x00\x00\x00\x07not protobuf", timestamp=1002))
    producer.flush()
    columns_sql = "NAME STRING, PRICE DECIMAL(6, 2), ADDR STRUCT<CITY STRING, ZIP INT>, " \
                  "TAGS ARRAY<STRING>, ATTRS MAP<STRING, BIGINT>, AT TIMESTAMP"

    _run_statements(bootstrap, url, tmp_path, f"""
        CREATE STREAM ORDERS ({columns_sql}) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='{fmt}');
        CREATE STREAM {sink} WITH (KAFKA_TOPIC='{sink}') AS
            SELECT UCASE(NAME) AS NAME, PRICE * 2 AS DOUBLED, ADDR->CITY AS CITY, ADDR, TAGS[1] AS FIRST,
                   ATTRS, AT FROM ORDERS;
    """)

    out_columns = (
        Column("NAME", T.parse_type("STRING")), Column("DOUBLED", T.parse_type("DECIMAL(7, 2)")),
        Column("CITY", T.parse_type("STRING")), Column("ADDR", T.parse_type("STRUCT<CITY STRING, ZIP INT>")),
        Column("FIRST", T.parse_type("STRING")), Column("ATTRS", T.parse_type("MAP<STRING, BIGINT>")),
        Column("AT", T.parse_type("TIMESTAMP")),
    )
    reader = wire_serde(value_serde(FormatInfo(fmt, {}), out_columns, SerdeFeatures()), sink, url)
    records = list(read_topic(bootstrap, sink))
    values = [reader.from_bytes(r.value) for r in records]
    assert [(v["NAME"], str(v["DOUBLED"]), v["CITY"], v["ADDR"], v["FIRST"], v["ATTRS"], v["AT"]) for v in values] == [
        ("A", "2.50", "lyon", {"CITY": "lyon", "ZIP": 0}, "a", {"k": 0}, 1700000000123),
        ("B", "40.00", "nice", {"CITY": "nice", "ZIP": 1}, "b", {"k": 1}, 0),
    ]
    if fmt == "PROTOBUF":
        latest = registry_client(url).get_latest_version(f"{sink}-value")
        assert {split_header(r.value or b"", "value")[0] for r in records} == {latest.schema_id}
        assert "google.protobuf.Timestamp AT" in latest.schema.schema_str


@pytest.mark.parametrize("fmt", ["AVRO", "JSON_SR"])
def test_a_sink_with_a_schema_id_writes_the_registered_schemas_extra_fields(
    fmt: str, kafka_broker: Any, schema_registry: Any, tmp_path: Path
) -> None:
    """``streamSinkV4`` on Kafka: the registered schema's fields past the sink's columns are
    written (AVRO: the default, else null when nullable; JSON_SR: null) under that schema id."""
    import json

    from confluent_kafka.schema_registry import Schema

    bootstrap, url = kafka_broker.bootstrap_servers, schema_registry.url
    source, sink = f"stock_{uuid.uuid4().hex[:8]}", f"LOW_{uuid.uuid4().hex[:8]}"
    TopicAdmin(bootstrap).create_topic(source, 1)
    if fmt == "AVRO":
        text, kind = json.dumps({"type": "record", "name": "Low", "fields": [
            {"name": "QTY", "type": ["null", "long"], "default": None},
            {"name": "reorder", "type": "int", "default": 50},
            {"name": "supplier", "type": ["null", "string"]},
        ]}), "AVRO"
        expected = {"QTY": 3, "reorder": 50, "supplier": None}
    else:
        text, kind = json.dumps({"type": "object", "properties": {
            "QTY": {"type": "integer"}, "supplier": {"type": "string"}}}), "JSON"
        expected = {"QTY": 3, "supplier": None}
    schema_id = registry_client(url).register_schema(f"{sink}-value", Schema(text, kind))
    producer = RecordProducer(bootstrap)
    producer.send(source, ProducerRecord(key=b"a", value=b'{"QTY": 3}', timestamp=1000))
    producer.flush()

    app = _run_statements(bootstrap, url, tmp_path, f"""
        CREATE STREAM STOCK (SKU STRING KEY, QTY BIGINT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE STREAM {sink} WITH (KAFKA_TOPIC='{sink}', VALUE_FORMAT='{fmt}', VALUE_SCHEMA_ID={schema_id}) AS
            SELECT SKU, QTY FROM STOCK;
    """)
    (query,) = app.engine.queries.values()
    assert query.root.TYPE == "streamSinkV4"

    reader = wire_serde(value_serde(FormatInfo(fmt, {}), (Column("QTY", T.BIGINT),), SerdeFeatures()), sink, url)
    (record,) = list(read_topic(bootstrap, sink))
    assert split_header(record.value or b"", "value")[0] == schema_id
    assert reader.read_as_written(record.value) == expected
