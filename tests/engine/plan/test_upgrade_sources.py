"""The source steps' upgrade checks (engine.plan.upgrade) for tables and windowed sources: a new
plan over a source the old one did not read is refused with ksqlDB's messages."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import UpgradeError
from engine.facade.engine import KsqlEngine
from engine.plan.upgrade import validate_upgrade

SOURCES = (
    "CREATE TABLE ITEMS (ITEM STRING PRIMARY KEY, SHELF STRING, PRICE INT) WITH (kafka_topic='items', value_format='JSON');"
    "CREATE TABLE SHELVES (SHELF STRING PRIMARY KEY, ROOM STRING) WITH (kafka_topic='shelves', value_format='JSON');"
    "CREATE TABLE W_ITEMS (ITEM STRING PRIMARY KEY, SHELF STRING) WITH (kafka_topic='w_items', value_format='JSON', "
    "window_type='TUMBLING', window_size='1 MINUTE');"
    "CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING) WITH (kafka_topic='orders', value_format='JSON');"
    "CREATE STREAM W_ORDERS (ID STRING KEY, ITEM STRING) WITH (kafka_topic='w_orders', value_format='JSON', "
    "window_type='TUMBLING', window_size='1 MINUTE');"
)
# Each query writes the same topic, as a CREATE OR REPLACE of one sink would.
QUERIES = {
    "PLAIN": "CREATE TABLE PLAIN WITH (kafka_topic='out') AS SELECT * FROM ITEMS;",
    "JOINED": "CREATE TABLE JOINED WITH (kafka_topic='out') AS SELECT I.ITEM AS ITEM, I.SHELF, S.ROOM FROM ITEMS I "
              "JOIN SHELVES S ON I.SHELF = S.SHELF;",
    "FROM_STREAM": "CREATE TABLE FROM_STREAM WITH (kafka_topic='out') AS SELECT ITEM, COUNT(*) AS N FROM ORDERS "
                   "GROUP BY ITEM;",
    "WINDOWED": "CREATE TABLE WINDOWED WITH (kafka_topic='out') AS SELECT * FROM W_ITEMS;",
    "S_PLAIN": "CREATE STREAM S_PLAIN WITH (kafka_topic='s_out') AS SELECT * FROM ORDERS;",
    "S_WINDOWED": "CREATE STREAM S_WINDOWED WITH (kafka_topic='s_out') AS SELECT * FROM W_ORDERS;",
}


@pytest.fixture(scope="module")
def queries() -> dict[str, object]:
    engine = KsqlEngine()
    for topic in ("items", "shelves", "w_items", "orders", "w_orders"):
        engine.create_topic(TopicInfo(topic, 1))
    engine.execute_sql(SOURCES + "".join(QUERIES.values()))
    return {q.sink: q for q in engine.queries.values()}


@pytest.mark.parametrize(
    ("before", "after", "message"),
    [
        ("PLAIN", "JOINED", "Query is not upgradeable. Cannot change a non-join source into a join source."),
        ("PLAIN", "FROM_STREAM", "Query is not upgradeable. Cannot add a class io.confluent.ksql.execution.plan."
                                 "StreamAggregate step that is not in the original query plan."),
        ("PLAIN", "WINDOWED", "Query is not upgradeable. The root source node of the upgrade tree must be TableSource, "
                              "but was class io.confluent.ksql.execution.plan.WindowedTableSource"),
        ("S_PLAIN", "S_WINDOWED", "Query is not upgradeable. The root source node of the upgrade tree must be "
                                  "StreamSource, but was class io.confluent.ksql.execution.plan.WindowedStreamSource"),
    ],
)
def test_a_plan_over_another_source_is_not_an_upgrade(queries, before: str, after: str, message: str) -> None:
    with pytest.raises(UpgradeError) as refused:
        validate_upgrade(queries[before].root, queries[after].root)
    assert str(refused.value) == message
