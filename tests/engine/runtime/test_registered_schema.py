"""A sink written through the schema registered under its schema id (no Spark needed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema

from engine.errors import ExecutionError
from engine.plan.steps import Formats
from engine.records import TopicRecord
from engine.runtime.registered_schema import registered_conformer
from engine.serde.registry import forget_registry_client, registry_client

URL = "mock://test-registered-schema"


@pytest.fixture
def registry() -> Iterator[Any]:
    forget_registry_client(URL)
    yield registry_client(URL)
    forget_registry_client(URL)


def _value_formats(fmt: str, schema_id: int) -> Formats:
    return Formats(key_format="KAFKA", value_format=fmt, value_properties=(("schema_id", str(schema_id)),))


def _record(value: Any) -> TopicRecord:
    return TopicRecord("sink", 1, value, 5)


def test_avro_fields_the_columns_lack_get_their_default_or_null(registry: Any) -> None:
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "A", "type": "int"},
        {"name": "B", "type": ["null", "string"]},
        {"name": "C", "type": "long", "default": 7},
    ]}
    schema_id = registry.register_schema("sink-value", Schema(json.dumps(schema), "AVRO"))
    conform = registered_conformer(_value_formats("AVRO", schema_id), "sink", URL)
    assert conform is not None
    out = conform(_record({"A": 1}))
    assert (out.key, out.value, out.timestamp) == (1, {"A": 1, "B": None, "C": 7}, 5)
    assert conform(_record(None)).value is None  # a tombstone stays one


def test_a_required_avro_field_without_default_fails_the_sink_naming_it(registry: Any) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "A", "type": "int"}, {"name": "Z", "type": "double"}]}
    schema_id = registry.register_schema("sink-value", Schema(json.dumps(schema), "AVRO"))
    conform = registered_conformer(_value_formats("AVRO", schema_id), "sink", URL)
    assert conform is not None
    with pytest.raises(ExecutionError) as raised:
        conform(_record({"A": 1}))
    assert "Unable to serialize record for topic 'sink'" in str(raised.value)
    assert "'Z'" in str(raised.value)


def test_protobuf_fields_get_proto3_defaults_and_json_sr_properties_null(registry: Any) -> None:
    proto = 'syntax = "proto3"; message M { int32 A = 1; string S = 2; bool F = 3; }'
    proto_id = registry.register_schema("sink-value", Schema(proto, "PROTOBUF"))
    conform = registered_conformer(_value_formats("PROTOBUF", proto_id), "sink", URL)
    assert conform is not None
    assert conform(_record({"A": 2})).value == {"A": 2, "S": "", "F": False}

    json_schema = {"type": "object", "properties": {"A": {"type": "integer"}, "N": {"type": "string"}}}
    json_id = registry.register_schema("other-value", Schema(json.dumps(json_schema), "JSON"))
    conform = registered_conformer(_value_formats("JSON_SR", json_id), "sink", URL)
    assert conform is not None
    assert conform(_record({"A": 2})).value == {"A": 2, "N": None}


def test_no_schema_id_or_no_registry_leaves_records_alone(registry: Any) -> None:
    assert registered_conformer(Formats(key_format="KAFKA", value_format="AVRO"), "sink", URL) is None
    assert registered_conformer(_value_formats("AVRO", 1), "sink", None) is None
    assert registered_conformer(_value_formats("JSON", 1), "sink", URL) is None
