"""A join's ``*``: the key, then each source's columns in source order (key columns, window
bounds, values), whichever join of an n-way join produced the key."""

from __future__ import annotations

from engine.data.records import TopicInfo
from engine.facade.engine import KsqlEngine


def _schema(engine: KsqlEngine, sql: str) -> str:
    (result,) = engine.execute_sql(sql)
    assert result.plan is not None and result.plan.command is not None
    return str(result.plan.command.schema)


def test_an_n_way_join_keyed_by_its_outer_join_lists_the_inner_key_in_source_order() -> None:
    engine = KsqlEngine()
    for topic in ("a", "b", "c"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(
        "CREATE STREAM A (K INT KEY, ID INT) WITH (kafka_topic='a', format='JSON');"
        "CREATE STREAM B (K INT KEY, ID INT) WITH (kafka_topic='b', format='JSON');"
        "CREATE STREAM C (K INT KEY, ID INT) WITH (kafka_topic='c', format='JSON');"
    )
    schema = _schema(
        engine,
        "CREATE STREAM ABC AS SELECT * FROM A JOIN B WITHIN 1 SECOND ON A.ID + 1 = B.ID "
        "JOIN C WITHIN 1 SECOND ON A.ID = C.ID;",
    )
    assert schema == (
        "`A_ID` INTEGER KEY, `A_K` INTEGER, `B_K` INTEGER, `B_ID` INTEGER, `C_K` INTEGER, `C_ID` INTEGER"
    )


def test_a_windowed_source_lists_its_key_then_its_window_bounds_then_its_values() -> None:
    engine = KsqlEngine()
    for topic in ("l", "r"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(
        "CREATE STREAM L (ID INT KEY, V BIGINT) WITH (kafka_topic='l', key_format='JSON', value_format='JSON',"
        " WINDOW_TYPE='TUMBLING', WINDOW_SIZE='2 SECONDS');"
        "CREATE STREAM R (ID INT KEY, V BIGINT) WITH (kafka_topic='r', key_format='JSON', value_format='JSON',"
        " WINDOW_TYPE='TUMBLING', WINDOW_SIZE='2 SECONDS');"
    )
    schema = _schema(engine, "CREATE STREAM LR AS SELECT * FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.ID;")
    assert schema == (
        "`L_ID` INTEGER KEY, `L_WINDOWSTART` BIGINT, `L_WINDOWEND` BIGINT, `L_V` BIGINT, "
        "`R_ID` INTEGER, `R_WINDOWSTART` BIGINT, `R_WINDOWEND` BIGINT, `R_V` BIGINT"
    )
