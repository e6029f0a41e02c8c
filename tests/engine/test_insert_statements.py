"""INSERT statements and source tables as ksqlDB checks them (no Spark, no broker): an INSERT INTO's
own query id (``WITH (QUERY_ID=...)``), an INSERT VALUES value that reads a column, and CREATE
SOURCE with source-table materialization disabled, refused in ksqlDB's words."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import KsqlError
from engine.facade.engine import KsqlEngine

SOURCES = """
CREATE STREAM PINGS (ID STRING KEY, KM INT) WITH (kafka_topic='pings', value_format='JSON');
CREATE STREAM ALL_PINGS AS SELECT * FROM PINGS;
"""


@pytest.fixture
def engine() -> KsqlEngine:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("pings"))
    engine.execute_sql(SOURCES)
    return engine


def test_an_insert_runs_under_the_query_id_it_names_upper_cased(engine: KsqlEngine) -> None:
    [result] = engine.execute_sql("INSERT INTO ALL_PINGS WITH (QUERY_ID='my_pings_2') SELECT * FROM PINGS;")
    assert result.query_id == "MY_PINGS_2"
    assert "MY_PINGS_2" in engine.queries
    [generated] = engine.execute_sql("INSERT INTO ALL_PINGS SELECT * FROM PINGS;")
    assert generated.query_id is not None and generated.query_id.startswith("INSERTQUERY_")


@pytest.mark.parametrize(
    ("query_id", "message"),
    [
        ("csas_mine", "Query IDs must not start with a reserved query ID prefix (INSERTQUERY_, CTAS_, CSAS_, CST_). "
                      "Got 'CSAS_MINE'."),
        ("InsertQuery_7", "Query IDs must not start with a reserved query ID prefix (INSERTQUERY_, CTAS_, CSAS_, "
                          "CST_). Got 'INSERTQUERY_7'."),
        ("my-pings", "Query IDs may contain only alphanumeric characters and '_'. Got: 'MY-PINGS'"),
        ("", "Query IDs may contain only alphanumeric characters and '_'. Got: ''"),
    ],
)
def test_a_query_id_ksqldb_would_not_generate_is_refused(engine: KsqlEngine, query_id: str, message: str) -> None:
    with pytest.raises(KsqlError) as refused:
        engine.execute_sql(f"INSERT INTO ALL_PINGS WITH (QUERY_ID='{query_id}') SELECT * FROM PINGS;")
    assert str(refused.value) == message
    assert not any(q.startswith("INSERT") or q.startswith("MY") for q in engine.queries)


def test_a_query_id_already_running_is_refused(engine: KsqlEngine) -> None:
    engine.execute_sql("INSERT INTO ALL_PINGS WITH (QUERY_ID='twice') SELECT * FROM PINGS;")
    with pytest.raises(KsqlError) as refused:
        engine.execute_sql("INSERT INTO ALL_PINGS WITH (QUERY_ID='TWICE') SELECT * FROM PINGS;")
    assert str(refused.value) == "Query ID 'TWICE' already exists."


def test_source_tables_and_streams_are_refused_with_their_materialization_disabled(engine: KsqlEngine) -> None:
    engine.create_topic(TopicInfo("users"))
    created = "CREATE SOURCE TABLE USERS (ID STRING PRIMARY KEY, NAME STRING) WITH (kafka_topic='users', value_format='JSON');"
    engine.execute_sql("SET 'ksql.source.table.materialization.enabled'='false';")
    for statement in (created, created.replace("SOURCE TABLE USERS (ID STRING PRIMARY KEY", "SOURCE STREAM USERS (ID STRING KEY")):
        with pytest.raises(KsqlError) as refused:
            engine.execute_sql(statement)
        assert str(refused.value) == "Cannot execute command because source table materialization is disabled."
    assert engine.metastore.get("USERS") is None
    engine.execute_sql("CREATE TABLE USERS (ID STRING PRIMARY KEY, NAME STRING) WITH (kafka_topic='users', value_format='JSON');")
    engine.execute_sql("UNSET 'ksql.source.table.materialization.enabled';")
    engine.execute_sql("DROP TABLE USERS;")
    engine.execute_sql(created)
    assert engine.metastore.get("USERS") is not None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ("'a', KM", "Unsupported column reference in insert value: KM"),
        ("'a', KM + 1", "Unsupported column reference in insert value: (KM + 1)"),
        ("ID, 1", "Unsupported column reference in insert value: ID"),
    ],
)
def test_insert_values_refuses_a_value_that_reads_a_column(engine: KsqlEngine, values: str, message: str) -> None:
    with pytest.raises(KsqlError) as refused:
        engine.execute_sql(f"INSERT INTO PINGS (ID, KM) VALUES ({values});")
    assert str(refused.value) == message


TYPED = (
    "CREATE STREAM TYPED (ID STRING KEY, I INT, B BIGINT, D DOUBLE, DE DECIMAL(4, 2), S STRING, BO BOOLEAN, "
    "T TIMESTAMP, BT BYTES, L ARRAY<BIGINT>, M MAP<STRING, DOUBLE>, ST STRUCT<X INT, Y STRING>) "
    "WITH (kafka_topic='typed', value_format='JSON');"
)


def _typed_engine() -> KsqlEngine:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("typed"))
    engine.execute_sql(TYPED)
    return engine


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("I", "1.5", "Expected type INTEGER for field `I` but got DECIMAL(1.5)"),
        ("I", "3000000000", "Expected type INTEGER for field `I` but got BIGINT(3000000000)"),
        ("B", "2.0E0", "Expected type BIGINT for field `B` but got DOUBLE(2.0)"),
        ("DE", "1.5E0", "Expected type DECIMAL(4, 2) for field `DE` but got DOUBLE(1.5)"),
        ("S", "1", "Expected type STRING for field `S` but got INTEGER(1)"),
        ("S", "true", "Expected type STRING for field `S` but got BOOLEAN(true)"),
        ("BO", "'true'", "Expected type BOOLEAN for field `BO` but got STRING(true)"),
        ("I", "'1'", "Expected type INTEGER for field `I` but got STRING(1)"),
        ("T", "5", "Expected type TIMESTAMP for field `T` but got INTEGER(5)"),
        ("L", "ARRAY['a']", "Expected type ARRAY<BIGINT> for field `L` but got ARRAY([a])"),
        ("M", "MAP('a' := 'b')", "Expected type MAP<STRING, DOUBLE> for field `M` but got MAP"),
        ("ST", "STRUCT(X := 'one')", "Expected type STRUCT<`X` INTEGER, `Y` STRING> for field `ST` but got STRUCT"),
    ],
)
def test_insert_values_coerces_only_as_ksqldbs_strict_coercer_does(column: str, value: str, message: str) -> None:
    engine = _typed_engine()
    with pytest.raises(KsqlError) as refused:
        engine.execute_sql(f"INSERT INTO TYPED (ID, {column}) VALUES ('k', {value});")
    assert str(refused.value).startswith(message)
    assert not engine.store.records.get("typed")


def test_insert_values_takes_nulls_inside_structs_arrays_and_maps() -> None:
    engine = _typed_engine()
    engine.execute_sql("INSERT INTO TYPED (ID, L, M, ST) VALUES ('k', ARRAY[1, NULL], MAP('a' := 1, 'b' := NULL), "
                       "STRUCT(X := NULL, Y := 'y'));")
    [stored] = engine.store.records["typed"]
    value = stored.record.value
    assert value["L"] == [1, None] and value["M"] == {"a": 1.0, "b": None} and value["ST"] == {"X": None, "Y": "y"}


def test_insert_values_widens_numbers_and_reads_text_as_times_and_bytes() -> None:
    engine = _typed_engine()
    engine.execute_sql(
        "INSERT INTO TYPED (ID, B, D, DE, T, BT, L, M, ST) VALUES ('k', 1, 2, 3, '2020-01-01T00:00:00', 'AQI=', "
        "ARRAY[1, 2], MAP('a' := 1), STRUCT(X := 1, Z := 'dropped'));"
    )
    [stored] = engine.store.records["typed"]
    value = stored.record.value
    assert value["B"] == 1 and value["D"] == 2.0 and str(value["DE"]) == "3.00"
    assert value["T"] == 1577836800000 and value["BT"] == "AQI="
    assert value["L"] == [1, 2] and value["M"] == {"a": 1.0} and value["ST"] == {"X": 1, "Y": None}
