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


def _check(engine: KsqlEngine, text: str) -> None:
    from engine.analysis.query import Scope
    from engine.server.pull_where import check_scalable_push

    [parsed] = parse(text)
    query = parsed.statement
    source = engine.metastore.get(query.from_.name)
    where = Scope.of_source(source, source.name).resolve(query.where, clause="WHERE") if query.where else None
    check_scalable_push(query, source, where)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * FROM DOUBLED EMIT CHANGES;",
        "SELECT ID, V2 FROM DOUBLED WHERE V2 > 1 OR ID = 'a' EMIT CHANGES;",  # table scans are on for them
        "SELECT * FROM DOUBLED WHERE ID LIKE 'a%' EMIT CHANGES;",
    ],
)
def test_a_scalable_push_query_takes_what_its_pull_style_plan_takes(engine, text) -> None:
    _check(engine, text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT *, V2 AS AGAIN FROM DOUBLED EMIT CHANGES;",
         "Scalable push queries only support wildcards in the projects if they are the only expression"),
        ("SELECT * FROM DOUBLED WHERE V2 IS NULL EMIT CHANGES;",
         "Unsupported expression in WHERE clause: (V2 IS NULL).  See https://cnfl.io/queries for more info."),
        ("SELECT * FROM DOUBLED WHERE NOT (ID = 'a') EMIT CHANGES;", "Unsupported expression in WHERE clause: (NOT (ID = 'a'))"),
    ],
)
def test_a_scalable_push_query_is_refused_as_ksqldb_refuses_it(engine, text, message) -> None:
    from engine.server.pull_where import PullQueryError

    with pytest.raises(PullQueryError) as refused:
        _check(engine, text)
    assert message in str(refused.value)
