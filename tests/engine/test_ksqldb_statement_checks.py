"""Statement checks ksqlDB makes outside its analyzer, in kspark's words and ksqlDB's: the
topic-create injector's WITH-clause checks, INSERT VALUES' target and value checks, the join
planner's partition count check and the format properties' checks (no Spark, no broker).

Each case is a statement and the text ksqlDB's message holds for it; ``parity/errors.md``
lists which of ksqlDB's message sites these cases show.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from confluent_kafka.schema_registry import Schema

from engine.data.records import TopicInfo
from engine.errors import KsqlError
from engine.facade.engine import KsqlEngine
from engine.serde.registry import forget_registry_client, registry_client

SOURCES = """
CREATE STREAM RIDES (ID STRING KEY, KM INT, PRICE DECIMAL(4, 2)) WITH (kafka_topic='rides', value_format='JSON');
CREATE STREAM PINGS (ID STRING KEY, KM INT) WITH (kafka_topic='pings', value_format='JSON');
CREATE TABLE RIDERS (ID STRING PRIMARY KEY, AGE INT) WITH (kafka_topic='riders', value_format='JSON');
CREATE TABLE BIKES (ID STRING PRIMARY KEY, RIDER STRING) WITH (kafka_topic='bikes', value_format='JSON');
CREATE STREAM LOG_VIEW (ID STRING KEY, MSG STRING) WITH (kafka_topic='default_ksql_processing_log', value_format='JSON');
CREATE STREAM SCHEMAS_VIEW (ID STRING KEY, MSG STRING) WITH (kafka_topic='_schemas', value_format='JSON');
"""
# (topic, partitions): PINGS and BIKES have more partitions than the others.
TOPICS = (("rides", 1), ("pings", 4), ("riders", 1), ("bikes", 4), ("default_ksql_processing_log", 1), ("_schemas", 1))

CLEANUP_POLICY = (
    "Invalid config variable in the WITH clause: CLEANUP_POLICY.\n"
    "The CLEANUP_POLICY config is automatically inferred based on the type of source (STREAM or TABLE).\n"
    "Users can't set the CLEANUP_POLICY config manually."
)
RETENTION = "Invalid config variable in the WITH clause: RETENTION_MS. Non-windowed tables do not support retention."

# (statement, the text ksqlDB's message holds)
CASES = [
    # the topic-create injector
    ("CREATE STREAM X (ID STRING KEY, KM INT) WITH (kafka_topic='rides', value_format='JSON', cleanup_policy='compact');",
     CLEANUP_POLICY),
    ("CREATE TABLE X WITH (cleanup_policy='delete') AS SELECT ID, COUNT(*) AS N FROM RIDES GROUP BY ID;", CLEANUP_POLICY),
    ("CREATE TABLE X (ID STRING PRIMARY KEY, KM INT) WITH (kafka_topic='fresh', partitions=1, value_format='JSON', "
     "retention_ms=5000);", RETENTION),
    ("CREATE TABLE X WITH (retention_ms=5000) AS SELECT ID, COUNT(*) AS N FROM RIDES GROUP BY ID;", RETENTION),
    # format properties
    ("CREATE STREAM X (ID STRING KEY, KM INT) WITH (kafka_topic='rides', value_format='JSON', "
     "value_protobuf_nullable_representation='OPTIONAL');",
     "Property VALUE_PROTOBUF_NULLABLE_REPRESENTATION can only be enabled with protobuf format"),
    ("CREATE STREAM X WITH (key_format='JSON', key_protobuf_nullable_representation='WRAPPER') AS SELECT * FROM RIDES;",
     "Property KEY_PROTOBUF_NULLABLE_REPRESENTATION can only be enabled with protobuf format"),
    # joins read inputs of as many partitions (not a foreign-key join)
    ("CREATE STREAM X AS SELECT * FROM RIDES R JOIN PINGS P WITHIN 1 MINUTE ON R.ID = P.ID;",
     "Can't join R with P since the number of partitions don't match. R partitions = 1; P partitions = 4. "
     "Please repartition either one so that the number of partitions match."),
    ("CREATE STREAM X AS SELECT * FROM RIDES JOIN PINGS WITHIN 1 MINUTE ON RIDES.KM = PINGS.KM;",
     "Can't join RIDES with PINGS since the number of partitions don't match. RIDES partitions = 1; "
     "PINGS partitions = 4."),
    ("CREATE STREAM X AS SELECT * FROM PINGS P JOIN RIDES R WITHIN 1 MINUTE ON P.ID = R.ID "
     "JOIN RIDERS ON RIDERS.ID = P.ID;",
     "Can't join P with R since the number of partitions don't match. P partitions = 4; R partitions = 1."),
    ("CREATE STREAM X AS SELECT * FROM RIDES R JOIN RIDERS ON R.ID = RIDERS.ID JOIN PINGS P WITHIN 1 MINUTE "
     "ON R.ID = P.ID;",
     "Can't join R with P since the number of partitions don't match. R partitions = 1; P partitions = 4."),
    # a type neither built in nor created by CREATE TYPE in the same text
    ("CREATE STREAM X (ID STRING KEY, A MONEY) WITH (kafka_topic='rides', value_format='JSON');",
     "Failed to prepare statement: Cannot resolve unknown type: MONEY"),
    ("CREATE STREAM X (ID STRING KEY, A ARRAY<STRUCT<B MONEY>>) WITH (kafka_topic='rides', value_format='JSON');",
     "Failed to prepare statement: Cannot resolve unknown type: MONEY"),
    ("CREATE STREAM X AS SELECT ID, CAST(KM AS MONEY) AS C FROM RIDES;",
     "Failed to prepare statement: Cannot resolve unknown type: MONEY"),
    ("ALTER STREAM RIDES ADD COLUMN Z MONEY;", "Failed to prepare statement: Cannot resolve unknown type: MONEY"),
    # header columns: a HEADERS column takes every header, a HEADER('k') column one
    ("CREATE STREAM X (ID STRING KEY, H ARRAY<STRUCT<KEY STRING, VALUE BYTES>> HEADERS, A BYTES HEADER('a')) "
     "WITH (kafka_topic='rides', value_format='JSON');", "Schema already contains a HEADERS column."),
    ("CREATE STREAM X (ID STRING KEY, A BYTES HEADER('a'), B BYTES HEADER('a')) "
     "WITH (kafka_topic='rides', value_format='JSON');", "Schema already contains a HEADER('a') column."),
    # INSERT VALUES
    ("INSERT INTO LOG_VIEW (ID, MSG) VALUES ('a', 'b');",
     "Cannot insert values into read-only topic: default_ksql_processing_log"),
    ("INSERT INTO SCHEMAS_VIEW (ID, MSG) VALUES ('a', 'b');", "Cannot insert values into read-only topic: _schemas"),
    ("SET 'ksql.insert.into.values.enabled'='false'; INSERT INTO RIDES (ID, KM) VALUES ('a', 1);",
     "The server has disabled INSERT INTO ... VALUES functionality. To enable it, restart your ksqlDB server "
     "with 'ksql.insert.into.values.enabled'=true"),
    ("INSERT INTO RIDES (ID, PRICE) VALUES ('a', 1.456);",
     "Expected type DECIMAL(4, 2) for field `PRICE` but got DECIMAL(1.456)"),
]

# Statements near the refused ones that ksqlDB accepts.
ACCEPTED = [
    "CREATE STREAM X (ID STRING KEY, KM INT) WITH (kafka_topic='fresh', partitions=1, value_format='JSON', "
    "retention_ms=5000);",
    "CREATE STREAM X WITH (retention_ms=5000) AS SELECT * FROM RIDES;",
    "CREATE TABLE X WITH (retention_ms=5000) AS SELECT ID, COUNT(*) AS N FROM RIDES WINDOW TUMBLING (SIZE 1 MINUTE) "
    "GROUP BY ID;",
    "CREATE STREAM X WITH (value_format='PROTOBUF', value_protobuf_nullable_representation='OPTIONAL') "
    "AS SELECT * FROM RIDES;",
    "CREATE STREAM X AS SELECT * FROM RIDES JOIN RIDERS ON RIDES.ID = RIDERS.ID;",
    # a foreign-key join reads its inputs without co-partitioning them
    "CREATE TABLE X AS SELECT * FROM BIKES JOIN RIDERS ON BIKES.RIDER = RIDERS.ID;",
    "CREATE STREAM X (ID STRING KEY, A VARCHAR, B DECIMAL(3, 1), M MAP<STRING, ARRAY<INT>>) "
    "WITH (kafka_topic='rides', value_format='JSON');",
    # a HEADER('k') column before the HEADERS column is accepted, as in ksqlDB
    "CREATE STREAM X (ID STRING KEY, A BYTES HEADER('a'), H ARRAY<STRUCT<KEY STRING, VALUE BYTES>> HEADERS) "
    "WITH (kafka_topic='rides', value_format='JSON');",
    "CREATE STREAM X (ID STRING KEY, A BYTES HEADER('a'), B BYTES HEADER('b')) WITH (kafka_topic='rides', "
    "value_format='JSON');",
    "INSERT INTO RIDES (ID, PRICE) VALUES ('a', 1.450);",
    "INSERT INTO RIDES (ID, PRICE) VALUES ('a', 12);",
]

Factory = Callable[[], KsqlEngine]


@pytest.fixture(scope="module")
def engine_factory() -> Factory:
    def make() -> KsqlEngine:
        engine = KsqlEngine()
        for topic, partitions in TOPICS:
            engine.create_topic(TopicInfo(topic, partitions=partitions))
        engine.execute_sql(SOURCES)
        return engine

    return make


@pytest.mark.parametrize(("statement", "message"), CASES, ids=[s[:70] for s, _ in CASES])
def test_statement_raises_ksqldb_message(engine_factory: Factory, statement: str, message: str) -> None:
    engine = engine_factory()
    with pytest.raises(KsqlError) as caught:
        engine.execute_sql(statement)
    assert message in str(caught.value)


@pytest.mark.parametrize("statement", ACCEPTED, ids=[s[:70] for s in ACCEPTED])
def test_statement_near_a_refused_one_is_accepted(engine_factory: Factory, statement: str) -> None:
    engine = engine_factory()
    results = engine.execute_sql(statement)
    assert [r.statement_text for r in results] == [statement]


def test_a_registered_key_schema_of_several_columns_is_refused(engine_factory: Factory) -> None:
    """A PROTOBUF key message's fields are key columns: ksqlDB infers one key column only."""
    url = f"mock://statement-checks-{uuid.uuid4()}"
    try:
        registry_client(url).register_schema(
            "pairs-key", Schema('syntax = "proto3"; message K { string a = 1; int32 b = 2; }', "PROTOBUF")
        )
        engine = engine_factory()
        engine.schema_registry_url = url
        engine.create_topic(TopicInfo("pairs"))
        with pytest.raises(KsqlError) as caught:
            engine.execute_sql("CREATE STREAM PAIRS (V INT) WITH (kafka_topic='pairs', key_format='PROTOBUF', "
                               "value_format='JSON');")
        assert str(caught.value).startswith(
            "The key schema for topic: pairs contains multiple columns, which is not supported by ksqlDB at "
            "this time.\nSchema:"
        )
        registry_client(url).register_schema(
            "single-key", Schema('syntax = "proto3"; message K { string a = 1; }', "PROTOBUF")
        )
        engine.create_topic(TopicInfo("single"))
        engine.execute_sql("CREATE STREAM SINGLE (V INT) WITH (kafka_topic='single', key_format='PROTOBUF', "
                           "value_format='JSON');")
        assert [c.name for c in engine.metastore.get("SINGLE").schema.key] == ["A"]
    finally:
        forget_registry_client(url)


def test_a_registered_protobuf_schema_of_several_definitions_needs_a_full_name(engine_factory: Factory) -> None:
    url = f"mock://statement-checks-{uuid.uuid4()}"
    proto = 'syntax = "proto3"; package shop; message Order { int32 id = 1; } enum Kind { A = 0; }'
    try:
        registry_client(url).register_schema("orders-value", Schema(proto, "PROTOBUF"))
        engine = engine_factory()
        engine.schema_registry_url = url
        engine.create_topic(TopicInfo("orders"))
        with pytest.raises(KsqlError) as caught:
            engine.execute_sql("CREATE STREAM ORDERS WITH (kafka_topic='orders', value_format='PROTOBUF');")
        assert str(caught.value).startswith(
            "Value schema has multiple schema definitions. \n\n- shop.Order\n- shop.Kind\n\n"
            "Please specify a schema full name in the WITH clause using VALUE_SCHEMA_FULL_NAME"
        )
        engine.execute_sql("CREATE STREAM ORDERS WITH (kafka_topic='orders', value_format='PROTOBUF', "
                           "value_schema_full_name='shop.Order');")
        assert [c.name for c in engine.metastore.get("ORDERS").schema.columns] == ["ID"]
    finally:
        forget_registry_client(url)


def test_a_sink_schema_id_without_a_sink_topic_is_quoted_by_its_id(engine_factory: Factory) -> None:
    """ksqlDB's messages for a CREATE ... AS SELECT's schema id name the topic only when the
    statement names KAFKA_TOPIC."""
    url = f"mock://statement-checks-{uuid.uuid4()}"
    try:
        json_id = registry_client(url).register_schema("other-value", Schema('{"type": "object"}', "JSON"))
        engine = engine_factory()
        engine.schema_registry_url = url
        with pytest.raises(KsqlError) as caught:
            engine.execute_sql("CREATE STREAM X WITH (value_format='AVRO', value_schema_id=99) AS SELECT * FROM RIDES;")
        assert str(caught.value).startswith(
            "Schema for message values on schema id'99 does not exist in the Schema Registry.\n"
            "Schema Id: 99\nPossible causes include:\n- Schema Id Optional[99]\n"
            "- Messages on the topic have not been serialized using a Confluent Schema Registry supported serializer"
        )
        with pytest.raises(KsqlError) as caught:
            engine.execute_sql(
                f"CREATE STREAM X WITH (value_format='AVRO', value_schema_id={json_id}) AS SELECT * FROM RIDES;"
            )
        assert str(caught.value).startswith(
            "Value schema is not in the expected format. You may want to set VALUE_FORMAT to 'JSON'.\n"
            f"schema id: {json_id}\nexpected format: AVRO\nactual format from Schema Registry: JSON"
        )
        with pytest.raises(KsqlError) as caught:
            engine.execute_sql(
                f"CREATE STREAM X WITH (kafka_topic='x', value_format='AVRO', value_schema_id={json_id}) "
                "AS SELECT * FROM RIDES;"
            )
        assert f"\ntopic: x, schema id: {json_id}\n" in str(caught.value)
    finally:
        forget_registry_client(url)
