"""Statements ksqlDB refuses, or accepts, that kspark once got wrong (no Spark, no broker):
header columns and inserts, windowed sources without a key, PARTITION BY NULL."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import AnalysisError, ParseError
from engine.facade.engine import KsqlEngine

SOURCES = """
CREATE STREAM SIGNED (ID STRING KEY, SIG BYTES HEADER('sig'), N INT) WITH (kafka_topic='signed', value_format='JSON');
CREATE STREAM PLAIN (ID STRING KEY, SIG BYTES, N INT) WITH (kafka_topic='plain', value_format='JSON');
"""


@pytest.fixture
def engine() -> KsqlEngine:
    engine = KsqlEngine()
    for topic in ("signed", "plain", "w"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(SOURCES)
    return engine


def test_insert_values_without_a_column_list_implies_the_header_columns(engine: KsqlEngine) -> None:
    with pytest.raises(AnalysisError, match=r"^Cannot insert into HEADER columns: SIG$"):
        engine.execute_sql("INSERT INTO SIGNED VALUES ('a', NULL, 1);")
    engine.execute_sql("INSERT INTO SIGNED (ID, N) VALUES ('a', 1);")  # the other columns may be given


def test_insert_into_select_refuses_a_target_with_header_columns(engine: KsqlEngine) -> None:
    with pytest.raises(AnalysisError, match=r"^Cannot insert into SIGNED because it has header columns$"):
        engine.execute_sql("INSERT INTO SIGNED SELECT * FROM PLAIN;")


def test_a_windowed_source_needs_a_key_column(engine: KsqlEngine) -> None:
    with pytest.raises(AnalysisError, match=r"^Windowed sources require a key column\.$"):
        engine.execute_sql(
            "CREATE STREAM W (N INT) WITH (kafka_topic='w', value_format='JSON', window_type='SESSION');"
        )
    engine.execute_sql(
        "CREATE STREAM W (K INT KEY, N INT) WITH (kafka_topic='w', value_format='JSON', window_type='SESSION');"
    )


def test_partition_by_null_leaves_the_stream_without_key_columns(engine: KsqlEngine) -> None:
    engine.execute_sql(
        "CREATE STREAM KEYLESS WITH (key_format='NONE') AS SELECT * FROM PLAIN PARTITION BY NULL;"
    )
    schema = engine.metastore.get("KEYLESS").schema  # type: ignore[union-attr]
    assert str(schema) == "`SIG` BYTES, `N` INTEGER, `ID` STRING"


def test_a_statement_refused_as_it_is_built_names_line_and_column_as_ksqldb_does(engine: KsqlEngine) -> None:
    with pytest.raises(ParseError) as err:
        engine.execute_sql("CREATE TABLE T (ID INT KEY, V INT) WITH (kafka_topic='w', value_format='JSON');")
    assert str(err.value) == (
        "Line: 1, Col: 17: Column `ID` is a 'KEY' column: please use 'PRIMARY KEY' for tables.\n"
        "Tables have PRIMARY KEYs, which are unique and NON NULL.\n"
        "Streams have KEYs, which have no uniqueness or NON NULL constraints."
    )
    with pytest.raises(ParseError, match=r"^line 1:1: "):  # the grammar's own errors keep theirs
        engine.execute_sql("SELEC 1;")


NEW_PLANNER = {"ksql.new.query.planner.enabled": "true"}


def test_the_new_query_planner_drops_a_key_the_projection_leaves_out() -> None:
    engine = KsqlEngine(NEW_PLANNER)
    engine.create_topic(TopicInfo("p"))
    engine.execute_sql("CREATE STREAM P (ID INT KEY, NAME STRING) WITH (kafka_topic='p', value_format='JSON');")
    engine.execute_sql("CREATE STREAM NAMES AS SELECT NAME FROM P;")
    assert str(engine.metastore.get("NAMES").schema) == "`NAME` STRING"  # type: ignore[union-attr]
    with pytest.raises(AnalysisError, match="Key missing from projection"):
        KsqlEngine().execute_sql(
            "CREATE STREAM P (ID INT KEY, NAME STRING) WITH (kafka_topic='p', value_format='JSON', partitions=1);"
            "CREATE STREAM NAMES AS SELECT NAME FROM P;"
        )


def test_the_new_query_planner_orders_key_columns_as_the_projection_does() -> None:
    engine = KsqlEngine(NEW_PLANNER)
    engine.create_topic(TopicInfo("p"))
    engine.execute_sql("CREATE STREAM P (A INT KEY, B INT KEY, V STRING) WITH (kafka_topic='p', format='JSON');")
    engine.execute_sql("CREATE STREAM BA AS SELECT B, A, V FROM P;")
    assert str(engine.metastore.get("BA").schema) == "`B` INTEGER KEY, `A` INTEGER KEY, `V` STRING"  # type: ignore[union-attr]


def test_insert_values_fills_a_struct_field_left_out_with_the_registered_schema_default() -> None:
    import json
    import uuid

    from confluent_kafka.schema_registry import Schema

    from engine.serde.registry import registry_client

    url = f"mock://{uuid.uuid4().hex}"
    vote = {"type": "record", "name": "Vote", "fields": [
        {"name": "NUM", "type": "long", "default": 10}, {"name": "EMAIL", "type": "string"}]}
    schema = {"type": "record", "name": "Row", "fields": [{"name": "ID", "type": "string"}, {"name": "VOTE", "type": vote}]}
    schema_id = registry_client(url).register_schema("votes-value", Schema(json.dumps(schema), "AVRO"))
    engine = KsqlEngine()
    engine.schema_registry_url = url
    engine.create_topic(TopicInfo("votes"))
    engine.execute_sql(f"CREATE STREAM VOTES WITH (kafka_topic='votes', value_format='AVRO', value_schema_id={schema_id});")
    engine.execute_sql("INSERT INTO VOTES (ID, VOTE) VALUES ('a', STRUCT(EMAIL:='x@y'));")
    (record,) = [r.record for r in engine.store.read("votes")]
    assert record.value == {"ID": "a", "VOTE": {"NUM": 10, "EMAIL": "x@y"}}
