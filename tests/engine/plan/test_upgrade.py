"""CREATE OR REPLACE over a running query: which changes replace its plan in place
(engine.plan.upgrade), with ksqlDB's messages for those refused."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import KsqlError, UpgradeError
from engine.facade.engine import KsqlEngine
from engine.plan import serde
from engine.plan.upgrade import validate_upgrade

ORDERS = (
    "CREATE STREAM ORDERS (ID INT KEY, ITEM STRING, PRICE DOUBLE, UNITS INT, AT BIGINT) "
    "WITH (kafka_topic='orders', value_format='JSON');"
    "CREATE TABLE ITEMS (ITEM STRING PRIMARY KEY, SHELF INT) WITH (kafka_topic='items', value_format='JSON');"
)


def engine_with(*statements: str) -> KsqlEngine:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("orders", 2))
    engine.create_topic(TopicInfo("items", 2))
    engine.execute_sql(ORDERS)
    for statement in statements:
        engine.execute_sql(statement)
    return engine


@pytest.mark.parametrize(("before", "after"), [
    # filters: changed, removed, added
    ("CREATE STREAM BIG AS SELECT * FROM ORDERS WHERE PRICE > 0 AND UNITS > 0;",
     "CREATE OR REPLACE STREAM BIG AS SELECT * FROM ORDERS WHERE UNITS > 0;"),
    ("CREATE STREAM BIG AS SELECT * FROM ORDERS WHERE UNITS > 0;",
     "CREATE OR REPLACE STREAM BIG AS SELECT * FROM ORDERS;"),
    ("CREATE STREAM BIG AS SELECT * FROM ORDERS;",
     "CREATE OR REPLACE STREAM BIG AS SELECT * FROM ORDERS WHERE ITEM <> 'pen';"),
    # projections: a changed expression, a column added at the end
    ("CREATE STREAM BIG AS SELECT ID, PRICE * UNITS AS TOTAL FROM ORDERS;",
     "CREATE OR REPLACE STREAM BIG AS SELECT ID, PRICE * UNITS * 2 AS TOTAL FROM ORDERS;"),
    ("CREATE STREAM BIG AS SELECT ID, ITEM FROM ORDERS;",
     "CREATE OR REPLACE STREAM BIG AS SELECT ID, ITEM, UCASE(ITEM) AS LOUD FROM ORDERS WHERE UNITS > 1;"),
    # re-keyed by the same expression, with a new filter
    ("CREATE STREAM BY_ITEM AS SELECT * FROM ORDERS PARTITION BY ITEM;",
     "CREATE OR REPLACE STREAM BY_ITEM AS SELECT * FROM ORDERS WHERE UNITS > 0 PARTITION BY ITEM;"),
    # an aggregate: a filter on a column the query reads already, a new HAVING, a new output column
    ("CREATE TABLE SOLD AS SELECT ID, COUNT(*) AS N, SUM(UNITS) AS U FROM ORDERS GROUP BY ID;",
     "CREATE OR REPLACE TABLE SOLD AS SELECT ID, COUNT(*) AS N, SUM(UNITS) AS U FROM ORDERS WHERE UNITS > 0 GROUP BY ID;"),
    ("CREATE TABLE SOLD AS SELECT ID, COUNT(*) AS N, SUM(UNITS) AS U FROM ORDERS GROUP BY ID;",
     "CREATE OR REPLACE TABLE SOLD AS SELECT ID, COUNT(*) AS N, SUM(UNITS) AS U FROM ORDERS GROUP BY ID HAVING SUM(UNITS) > 1;"),
    ("CREATE TABLE SOLD AS SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM;",
     "CREATE OR REPLACE TABLE SOLD AS SELECT ITEM, COUNT(*) AS N, COUNT(*) * 2 AS N2 FROM ORDERS GROUP BY ITEM;"),
])
def test_allowed_changes_replace_the_query_in_place_under_its_id(before: str, after: str) -> None:
    engine = engine_with(before)
    (query_id,) = engine.queries
    result = engine.execute_sql(after)[-1]
    assert result.query_id == query_id
    assert list(engine.queries) == [query_id]
    assert engine.queries[query_id] is result.plan.query
    assert engine.metastore.writers(result.plan.query.sink) == [query_id]


@pytest.mark.parametrize(("before", "after", "message"), [
    ("CREATE STREAM BY_PRICE AS SELECT * FROM ORDERS PARTITION BY PRICE * 2;",
     "CREATE OR REPLACE STREAM BY_PRICE AS SELECT * FROM ORDERS PARTITION BY PRICE * 3;",
     "Query is not upgradeable. Plan step of type StreamSelectKey must have matching keyExpressions. "
     "Values differ: [(PRICE * 2)] vs. [(PRICE * 3)]"),
    ("CREATE STREAM BIG AS SELECT * FROM ORDERS;",
     "CREATE OR REPLACE STREAM BIG WITH (timestamp='AT') AS SELECT * FROM ORDERS;",
     "Cannot upgrade data source: DataSource '`BIG`' has timestampColumn = Optional.empty which is not upgradeable to"),
    ("CREATE TABLE SOLD AS SELECT ID, COUNT(*) AS N FROM ORDERS GROUP BY ID;",
     "CREATE OR REPLACE TABLE SOLD AS SELECT ID, COUNT(*) AS N FROM ORDERS WHERE UNITS > 0 GROUP BY ID;",
     "Query is not upgradeable. Plan step of type StreamAggregate must have matching columns not part of "
     "aggregate. Values differ: [ID] vs. [ID, UNITS]"),
    ("CREATE TABLE SOLD AS SELECT ID, COUNT(*) AS N, SUM(UNITS) AS U FROM ORDERS GROUP BY ID;",
     "CREATE OR REPLACE TABLE SOLD AS SELECT ID, COUNT(*) AS N, MAX(UNITS) AS U FROM ORDERS GROUP BY ID;",
     "Query is not upgradeable. Plan step of type StreamAggregate must have matching aggregate functions. "
     "Values differ: [COUNT(*), SUM(UNITS)] vs. [COUNT(*), MAX(UNITS)]"),
    ("CREATE TABLE SOLD AS SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM;",
     "CREATE OR REPLACE TABLE SOLD AS SELECT UNITS, COUNT(*) AS N FROM ORDERS GROUP BY UNITS;",
     "Cannot upgrade data source: DataSource '`SOLD`' has schema = "),
    ("CREATE TABLE SOLD AS SELECT ID, COUNT(*) AS N FROM ORDERS WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY ID;",
     "CREATE OR REPLACE TABLE SOLD AS SELECT ID, COUNT(*) AS N FROM ORDERS WINDOW TUMBLING (SIZE 1 MINUTE) "
     "WHERE ID > 0 GROUP BY ID;",
     "Upgrades not yet supported for StreamWindowedAggregate"),
    ("CREATE STREAM SHELVED AS SELECT O.ITEM AS ITEM, O.UNITS, I.SHELF FROM ORDERS O "
     "JOIN ITEMS I ON O.ITEM = I.ITEM;",
     "CREATE OR REPLACE STREAM SHELVED AS SELECT O.ITEM AS ITEM, O.UNITS, I.SHELF FROM ORDERS O "
     "JOIN ITEMS I ON O.ITEM = I.ITEM WHERE O.UNITS > 0;",
     "Upgrades not yet supported for StreamTableJoin"),
    ("CREATE TABLE PER_SHELF AS SELECT SHELF, COUNT(*) AS N FROM ITEMS GROUP BY SHELF;",
     "CREATE OR REPLACE TABLE PER_SHELF AS SELECT SHELF, COUNT(*) AS N FROM ITEMS WHERE SHELF > 0 GROUP BY SHELF;",
     "Upgrades not yet supported for TableAggregate"),
])
def test_refused_changes_leave_the_query_and_the_sink_as_they_were(before: str, after: str, message: str) -> None:
    engine = engine_with(before)
    (query_id,) = engine.queries
    plan, source = engine.queries[query_id], engine.metastore.all()
    with pytest.raises(KsqlError) as raised:
        engine.execute_sql(after)
    assert message in str(raised.value)
    assert engine.queries == {query_id: plan}
    assert engine.metastore.all() == source


def test_a_new_step_below_the_projection_is_refused_with_ksqldbs_message() -> None:
    engine = engine_with("CREATE STREAM BIG AS SELECT * FROM ORDERS;")
    with pytest.raises(UpgradeError) as raised:
        engine.execute_sql("CREATE OR REPLACE STREAM BIG AS SELECT * FROM ORDERS PARTITION BY ID;")
    assert str(raised.value) == (
        "Query is not upgradeable. Cannot add a class io.confluent.ksql.execution.plan.StreamSelectKey step "
        "that is not in the original query plan."
    )


def test_a_join_in_place_of_a_re_keying_is_refused() -> None:
    engine = engine_with(
        "CREATE STREAM PLAIN WITH (kafka_topic='out') AS SELECT * FROM ORDERS PARTITION BY ITEM;",
        "CREATE STREAM JOINED WITH (kafka_topic='out') AS SELECT O.ITEM AS ITEM, O.UNITS, I.SHELF FROM ORDERS O "
        "JOIN ITEMS I ON O.ITEM = I.ITEM;",
    )
    plain, joined = engine.queries.values()
    with pytest.raises(UpgradeError) as raised:
        validate_upgrade(plain.root, joined.root)
    assert str(raised.value) == (
        "Query is not upgradeable. Plan step of type StreamSelectKey must have matching class. Values differ: "
        "class io.confluent.ksql.execution.plan.StreamSelectKey vs. class io.confluent.ksql.execution.plan.StreamTableJoin"
    )


def test_a_join_in_place_of_a_single_source_is_refused() -> None:
    engine = engine_with(
        "CREATE STREAM SOLD (ITEM STRING KEY, UNITS INT) WITH (kafka_topic='orders', value_format='JSON');",
        "CREATE STREAM PLAIN WITH (kafka_topic='out') AS SELECT ITEM, UNITS FROM SOLD;",
        "CREATE STREAM JOINED WITH (kafka_topic='out') AS SELECT S.ITEM AS ITEM, S.UNITS, I.SHELF FROM SOLD S "
        "JOIN ITEMS I ON S.ITEM = I.ITEM;",
    )
    plain, joined = engine.queries.values()
    with pytest.raises(UpgradeError) as raised:
        validate_upgrade(plain.root, joined.root)
    assert str(raised.value) == "Query is not upgradeable. Cannot change a non-join source into a join source."


def test_a_sink_two_queries_write_cannot_be_replaced() -> None:
    engine = engine_with("CREATE STREAM BIG AS SELECT * FROM ORDERS;", "INSERT INTO BIG SELECT * FROM ORDERS;")
    with pytest.raises(KsqlError) as raised:
        engine.execute_sql("CREATE OR REPLACE STREAM BIG AS SELECT * FROM ORDERS WHERE UNITS > 0;")
    assert str(raised.value) == (
        "REPLACE for sink BIG is not supported because there are multiple queries writing into it: "
        "[CSAS_BIG_0, INSERTQUERY_1]"
    )


def test_a_replacement_takes_no_new_query_id_live_or_replayed() -> None:
    statements = (
        "CREATE STREAM BIG AS SELECT * FROM ORDERS;",
        "CREATE OR REPLACE STREAM BIG AS SELECT * FROM ORDERS WHERE UNITS > 0;",
        "CREATE STREAM SMALL AS SELECT * FROM ORDERS WHERE UNITS < 0;",
    )
    live = engine_with(*statements)
    assert list(live.queries) == ["CSAS_BIG_0", "CSAS_SMALL_1"]
    replayed = engine_with()
    for plan in live.plans:
        if plan.query is not None:
            replayed.restore(serde.statement_plan_from_json(serde.to_json_value(plan)))
    assert replayed.queries == live.queries
    assert replayed.execute_sql("CREATE STREAM MORE AS SELECT * FROM ORDERS;")[-1].query_id == "CSAS_MORE_2"


def test_a_replaced_query_runs_its_new_plan() -> None:
    engine = engine_with("CREATE STREAM BIG AS SELECT ID, UNITS FROM ORDERS WHERE UNITS > 5;")
    engine.execute_sql("CREATE OR REPLACE STREAM BIG AS SELECT ID, UNITS, UNITS * 10 AS TENS FROM ORDERS WHERE UNITS > 1;")
    engine.execute_sql("INSERT INTO ORDERS (ID, ITEM, UNITS) VALUES (1, 'pen', 3);")
    (written,) = engine.run()["BIG"]
    assert (written.key, written.value) == (1, {"UNITS": 3, "TENS": 30})


BEYOND = "SET 'kspark.query.upgrades.beyond.ksqldb'='true';"
WINDOWED = "SELECT ID, COUNT(*) AS N FROM ORDERS WINDOW TUMBLING (SIZE 1 MINUTE{grace}) {where}GROUP BY ID{emit};"


@pytest.mark.parametrize(("before", "after"), [
    ("CREATE TABLE SOLD AS SELECT ID, COUNT(*) AS N FROM ORDERS GROUP BY ID;",
     "CREATE OR REPLACE TABLE SOLD AS SELECT ID, COUNT(*) AS N FROM ORDERS WHERE UNITS > 0 GROUP BY ID;"),
    ("CREATE TABLE SOLD AS " + WINDOWED.format(grace="", where="", emit=""),
     "CREATE OR REPLACE TABLE SOLD AS " + WINDOWED.format(grace="", where="WHERE UNITS > 0 ", emit="")),
    ("CREATE TABLE SOLD AS " + WINDOWED.format(grace=", GRACE PERIOD 1 SECOND", where="", emit=" EMIT FINAL"),
     "CREATE OR REPLACE TABLE SOLD AS "
     + WINDOWED.format(grace=", GRACE PERIOD 1 SECOND", where="WHERE ITEM <> 'pen' ", emit=" EMIT FINAL")),
])
def test_past_ksqldb_an_opt_in_lets_aggregates_change_their_filters(before: str, after: str) -> None:
    refused = engine_with(before)
    with pytest.raises(UpgradeError):
        refused.execute_sql(after)
    engine = engine_with(before)
    (query_id,) = engine.queries
    assert engine.execute_sql(BEYOND + after)[-1].query_id == query_id
    replayed = engine_with()  # a replayed log holds the plan, checked when it was written
    for plan in engine.plans:
        if plan.query is not None:
            replayed.restore(serde.statement_plan_from_json(serde.to_json_value(plan)))
    assert replayed.queries == engine.queries


@pytest.mark.parametrize(("before", "after", "message"), [
    ("CREATE TABLE SOLD AS " + WINDOWED.format(grace="", where="", emit=""),
     "CREATE OR REPLACE TABLE SOLD AS SELECT ID, COUNT(*) AS N FROM ORDERS WINDOW HOPPING (SIZE 1 MINUTE, "
     "ADVANCE BY 30 SECONDS) GROUP BY ID;",
     "Cannot upgrade data source"),
    ("CREATE TABLE SOLD AS " + WINDOWED.format(grace=", GRACE PERIOD 1 SECOND", where="", emit=" EMIT FINAL"),
     "CREATE OR REPLACE TABLE SOLD AS " + WINDOWED.format(grace=", GRACE PERIOD 2 SECONDS", where="", emit=" EMIT FINAL"),
     "Query is not upgradeable. Plan step of type TableSuppress must have matching grace."),
    ("CREATE TABLE SOLD AS SELECT ID, COUNT(*) AS N FROM ORDERS GROUP BY ID;",
     "CREATE OR REPLACE TABLE SOLD AS SELECT ID, COUNT(UNITS) AS N FROM ORDERS GROUP BY ID;",
     "Query is not upgradeable. Plan step of type StreamAggregate must have matching aggregate functions."),
])
def test_past_ksqldb_the_state_shaping_parts_still_stay(before: str, after: str, message: str) -> None:
    engine = engine_with(before)
    with pytest.raises(KsqlError) as raised:
        engine.execute_sql(BEYOND + after)
    assert message in str(raised.value)


def test_with_create_or_replace_turned_off_a_replacement_is_refused_as_ksqldb_refuses_it() -> None:
    engine = KsqlEngine({"ksql.create.or.replace.enabled": "false"})
    engine.create_topic(TopicInfo("orders", 2))
    engine.create_topic(TopicInfo("items", 2))
    engine.execute_sql(ORDERS + "CREATE STREAM BIG AS SELECT * FROM ORDERS;")
    with pytest.raises(KsqlError) as raised:
        engine.execute_sql("CREATE OR REPLACE STREAM BIG AS SELECT * FROM ORDERS WHERE UNITS > 0;")
    assert str(raised.value) == "Cannot add stream 'BIG': A stream with the same name already exists"
    assert list(engine.queries) == ["CSAS_BIG_0"]
