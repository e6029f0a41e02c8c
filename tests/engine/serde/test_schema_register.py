"""Schema registration when a CREATE statement runs: what ksqlDB's SchemaRegisterInjector
registers, and its errors in ksqlDB's words."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.schema_registry import Schema

from engine.errors import KsqlError
from engine.facade.engine import KsqlEngine
from engine.serde.registry import forget_registry_client, registry_client

SOURCE = "CREATE STREAM RIDES (ID STRING KEY, PRICE INT) WITH (kafka_topic='rides', value_format='JSON', partitions=1);"


@pytest.fixture
def registry() -> Iterator[str]:
    url = f"mock://schema-register-{uuid.uuid4()}"
    yield url
    forget_registry_client(url)


def _engine(url: str) -> KsqlEngine:
    engine = KsqlEngine()
    engine.schema_registry_url = url
    engine.execute_sql(SOURCE)
    return engine


def _subjects(url: str) -> list[str]:
    return sorted(registry_client(url).get_subjects())


def test_create_as_select_registers_its_sink_schemas(registry: str) -> None:
    engine = _engine(registry)
    engine.execute_sql("CREATE STREAM PRICED WITH (key_format='AVRO', value_format='AVRO') AS SELECT * FROM RIDES;")
    assert _subjects(registry) == ["PRICED-key", "PRICED-value"]
    value = json.loads(registry_client(registry).get_latest_version("PRICED-value").schema.schema_str)
    assert [f["name"] for f in value["fields"]] == ["PRICE"]


def test_create_source_registers_only_a_subject_without_a_schema(registry: str) -> None:
    client = registry_client(registry)
    kept = client.register_schema("taken-value", Schema('{"type": "record", "name": "R", "fields": []}', "AVRO"))
    engine = _engine(registry)
    engine.execute_sql("CREATE STREAM TAKEN (ID STRING KEY, V INT) WITH (kafka_topic='taken', value_format='AVRO', "
                       "partitions=1);")
    engine.execute_sql("CREATE STREAM FRESH (ID STRING KEY, V INT) WITH (kafka_topic='fresh', value_format='JSON_SR', "
                       "partitions=1);")
    assert _subjects(registry) == ["fresh-value", "taken-value"]
    assert client.get_latest_version("taken-value").schema_id == kept


def test_a_column_name_avro_does_not_allow_is_refused_when_its_schema_would_be_registered(registry: str) -> None:
    engine = _engine(registry)
    with pytest.raises(KsqlError) as caught:
        engine.execute_sql("CREATE STREAM ODD WITH (value_format='AVRO') AS SELECT ID, PRICE AS `PRICE-EUR` FROM RIDES;")
    assert str(caught.value) == (
        "Could not register schema for topic: Schema is not compatible with Avro: Illegal character in: PRICE-EUR"
    )
    with pytest.raises(KsqlError, match="Schema is not compatible with Avro: Illegal initial character: 1ST"):
        engine.execute_sql("CREATE STREAM ODD2 WITH (value_format='AVRO') AS SELECT ID, PRICE AS `1ST` FROM RIDES;")
    assert _subjects(registry) == []


def _dead_registry() -> str:
    """A URL on this machine where nothing listens (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_a_registry_that_does_not_answer_fails_the_statement_in_ksqldbs_words() -> None:
    url = _dead_registry()
    try:
        engine = _engine(url)
        with pytest.raises(KsqlError) as caught:
            engine.execute_sql("CREATE STREAM S (ID STRING KEY, V INT) WITH (kafka_topic='s', value_format='AVRO', "
                               "partitions=1);")
        assert str(caught.value).startswith("Could not get latest schema for subject s-value\nCaused by: ")
        with pytest.raises(KsqlError) as caught:
            engine.execute_sql("CREATE STREAM PRICED WITH (value_format='AVRO') AS SELECT * FROM RIDES;")
        assert str(caught.value).startswith(
            "Could not register schema for topic: Could not register schema for topic: "
        )
        assert engine.metastore.get("S") is None and engine.metastore.get("PRICED") is None
    finally:
        forget_registry_client(url)


KEYED = ("CREATE STREAM KEYED (ID STRING KEY, V INT) WITH (kafka_topic='keyed', key_format='AVRO', "
         "value_format='JSON', partitions=1);")
INSERT = "INSERT INTO KEYED (ID, V) VALUES ('a', 1);"


def test_insert_values_writes_with_the_registered_key_schema(registry: str) -> None:
    engine = _engine(registry)
    engine.execute_sql(KEYED)
    engine.execute_sql(INSERT)
    assert len(engine.store.read("keyed")) == 1


def test_insert_values_refuses_a_key_schema_it_would_overwrite(registry: str) -> None:
    engine = _engine(registry)
    engine.execute_sql(KEYED)
    registry_client(registry).register_schema("keyed-key", Schema('"int"', "AVRO"))
    with pytest.raises(KsqlError) as caught:
        engine.execute_sql(INSERT)
    assert str(caught.value).startswith(
        "Cannot INSERT VALUES into data source KEYED. ksqlDB generated schema would overwrite existing key "
        "schema.\n\tExisting Schema: [`ROWKEY` INTEGER]\n\tksqlDB Generated: [`ID` STRING]"
    )


def test_insert_values_needs_the_key_schema_and_a_registry_that_answers(registry: str) -> None:
    engine = _engine(registry)
    engine.execute_sql(KEYED)
    registry_client(registry).delete_subject("keyed-key", permanent=True)
    with pytest.raises(KsqlError) as caught:
        engine.execute_sql(INSERT)
    assert str(caught.value) == (
        "Failed to fetch key schema (keyed-key). Please check if schema exists in Schema Registry and/or check "
        "connection with Schema Registry."
    )
    engine.schema_registry_url = dead = _dead_registry()
    try:
        with pytest.raises(KsqlError) as caught:
            engine.execute_sql(INSERT)
        assert str(caught.value) == (
            "Could not determine that insert values operations is safe; operation potentially overrides "
            "existing key schema in schema registry."
        )
    finally:
        forget_registry_client(dead)


def test_insert_values_into_a_protobuf_value_needs_its_subjects_schema(registry: str) -> None:
    engine = _engine(registry)
    engine.execute_sql("CREATE STREAM PROTO (ID STRING KEY, V INT) WITH (kafka_topic='proto', value_format='PROTOBUF', "
                       "partitions=1);")
    engine.execute_sql("INSERT INTO PROTO (ID, V) VALUES ('a', 1);")
    registry_client(registry).delete_subject("proto-value", permanent=True)
    with pytest.raises(KsqlError) as caught:
        engine.execute_sql("INSERT INTO PROTO (ID, V) VALUES ('a', 2);")
    assert str(caught.value) == (
        "Failed to fetch schema for serialization from Schema Registry using schema subject: proto-value"
    )
