"""A bounded run registers the schemas of its CREATE ... AS SELECT sinks, as ksqlDB does."""

from __future__ import annotations

import json
import uuid

from engine.data.records import TopicInfo, TopicRecord
from engine.facade.engine import KsqlEngine
from engine.serde.registry import forget_registry_client, registry_client


def test_a_create_as_sink_in_a_registry_format_registers_its_key_and_value_schemas() -> None:
    url = f"mock://test-sink-schemas-{uuid.uuid4()}"
    engine = KsqlEngine()
    engine.schema_registry_url = url
    try:
        engine.create_topic(TopicInfo("in"))
        engine.execute_sql(
            "CREATE STREAM S (ID INT KEY, V STRING) WITH (kafka_topic='in', value_format='JSON');"
            "CREATE STREAM OUT WITH (key_format='AVRO', value_format='PROTOBUF') AS SELECT * FROM S;"
            "CREATE STREAM COPY WITH (kafka_topic='copy', value_format='JSON') AS SELECT * FROM S;"
        )
        engine.produce([TopicRecord("in", 1, {"V": "a"}, 0)])
        engine.run()
        client = registry_client(url)
        key = client.get_latest_version("OUT-key").schema
        assert (key.schema_type, json.loads(key.schema_str)) == ("AVRO", ["null", "int"])
        value = client.get_latest_version("OUT-value").schema
        assert value.schema_type == "PROTOBUF" and "string V = 1;" in value.schema_str
        assert client.get_subjects() == ["OUT-key", "OUT-value"]  # JSON and KAFKA register nothing
    finally:
        engine.close()
        forget_registry_client(url)
