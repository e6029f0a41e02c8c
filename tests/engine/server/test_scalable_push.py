"""Which push queries ksqlDB answers as scalable push queries (engine.server.service)."""

from __future__ import annotations

import pytest

from engine.facade.engine import KsqlEngine
from engine.parser import parse
from engine.server.service import is_scalable_push_query

V2 = {"ksql.query.push.v2.enabled": "true"}


@pytest.fixture(scope="module")
def engine() -> KsqlEngine:
    engine = KsqlEngine()
    engine.execute_sql(
        "CREATE STREAM RAW (ID STRING KEY, V INT) WITH (kafka_topic='raw', value_format='JSON', partitions=1);"
        "CREATE STREAM DOUBLED AS SELECT ID, V * 2 AS V2 FROM RAW;"
    )
    return engine


@pytest.mark.parametrize(
    ("text", "config", "scalable"),
    [
        ("SELECT * FROM DOUBLED EMIT CHANGES;", V2, True),
        ("SELECT ID FROM DOUBLED WHERE V2 > 1 EMIT CHANGES;", {**V2, "auto.offset.reset": "latest"}, True),
        ("SELECT * FROM DOUBLED EMIT CHANGES;", {}, False),
        ("SELECT * FROM DOUBLED EMIT CHANGES;", {**V2, "auto.offset.reset": "earliest"}, False),
        ("SELECT * FROM RAW EMIT CHANGES;", V2, False),  # no persistent query writes it
        ("SELECT ID, ROWOFFSET FROM DOUBLED EMIT CHANGES;", V2, False),
        ("SELECT * FROM DOUBLED WHERE ROWPARTITION = 0 EMIT CHANGES;", V2, False),
        ("SELECT ID, COUNT(*) FROM DOUBLED GROUP BY ID EMIT CHANGES;", V2, False),
        ("SELECT * FROM DOUBLED PARTITION BY V2 EMIT CHANGES;", V2, False),
        ("SELECT * FROM DOUBLED;", V2, False),
    ],
)
def test_scalable_push_queries_are_those_ksqldb_serves_from_a_persistent_query(engine, text, config, scalable) -> None:
    [parsed] = parse(text)
    assert is_scalable_push_query(parsed.statement, engine.metastore, config) is scalable
