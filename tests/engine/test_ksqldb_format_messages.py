"""CREATE statements whose formats ksqlDB refuses, refused in its words (no Spark, no broker).

Each case is a statement and the whole text of ksqlDB's message for it: the format properties
(``fullSchemaName`` and the older VALUE_AVRO_SCHEMA_FULL_NAME) and what a format's serde
cannot carry. ``parity/errors.md`` lists which of ksqlDB's message sites these cases show.
"""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import KsqlError
from engine.facade.engine import KsqlEngine

SOURCE = (
    "CREATE STREAM RIDES (ID STRING KEY, KM INT, CITY STRING) "
    "WITH (kafka_topic='rides', value_format='JSON');"
)

# (statement, ksqlDB's message)
CASES = [
    ("CREATE STREAM Y (KM INT) WITH (kafka_topic='rides', value_format='AVRO', "
     "value_avro_schema_full_name='a.B', value_schema_full_name='a.C');",
     "Cannot supply both 'VALUE_AVRO_SCHEMA_FULL_NAME' and 'VALUE_SCHEMA_FULL_NAME' properties. "
     "Please only set 'VALUE_SCHEMA_FULL_NAME'."),
    ("CREATE STREAM Y (KM INT) WITH (kafka_topic='rides', value_format='AVRO', value_schema_full_name='');",
     "fullSchemaName cannot be empty. Format configuration: {fullSchemaName=}"),
    ("CREATE STREAM Y WITH (kafka_topic='out', value_format='PROTOBUF', value_schema_full_name=' ') "
     "AS SELECT * FROM RIDES;",  # the WITH clause's strings come trimmed, as ksqlDB's definitions give them
     "fullSchemaName cannot be empty. Format configuration: {fullSchemaName=}"),
    ("CREATE STREAM Y (KM INT) WITH (kafka_topic='rides', value_format='JSON', value_schema_full_name='a.C');",
     "JSON does not support the following configs: [fullSchemaName]"),
    ("CREATE STREAM Y (ID INT KEY, KM INT) WITH (kafka_topic='rides', value_format='JSON', "
     "key_schema_full_name='a.C');",
     "KAFKA does not support the following configs: [fullSchemaName]"),
    ("CREATE STREAM Y (KM INT, M MAP<INT, STRING>) WITH (kafka_topic='rides', value_format='AVRO');",
     "Value format does not support schema.\nformat: AVRO\n"
     "schema: Persistence{columns=[`KM` INTEGER, `M` MAP<INTEGER, STRING>], features=[]}\n"
     "reason: Avro only supports MAPs with STRING keys"),
]


def _engine() -> KsqlEngine:
    engine = KsqlEngine()
    for topic in ("rides", "out"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(SOURCE)
    return engine


@pytest.mark.parametrize(("statement", "message"), CASES, ids=[m[:50] for _, m in CASES])
def test_a_format_ksqldb_refuses_is_refused_with_its_message(statement: str, message: str) -> None:
    engine = _engine()
    try:
        with pytest.raises(KsqlError) as caught:
            engine.execute_sql(statement)
        assert str(caught.value) == message
    finally:
        engine.close()


def test_the_older_avro_full_name_names_the_value_schema() -> None:
    engine = _engine()
    try:
        engine.execute_sql(
            "CREATE STREAM Y WITH (kafka_topic='out', value_format='AVRO', "
            "value_avro_schema_full_name='x.Ride') AS SELECT * FROM RIDES;"
        )
        sink = engine.metastore.get("Y")
        assert sink is not None
        assert dict(sink.formats.value_properties)["schema_full_name"] == "x.Ride"
    finally:
        engine.close()
