"""Analysis and planning of aggregate queries (no Spark): key layout, names, steps and errors."""

from __future__ import annotations

import pytest

from engine.errors import KsqlError
from engine.facade.engine import KsqlEngine
from engine.plan import steps_native as N
from engine.plan.steps import walk_steps
from engine.plan.steps_aggregate import StreamWindowedAggregateV2, TableSuppressV2

STREAM = "CREATE STREAM ORDERS (ID INT KEY, ITEM STRING, QTY INT, ADDR STRUCT<CITY STRING>) WITH (kafka_topic='o', value_format='JSON', partitions=1);"
TABLE = "CREATE TABLE STOCK (SKU STRING PRIMARY KEY, SHELF STRING, QTY INT) WITH (kafka_topic='t', value_format='JSON', partitions=1);"


def plan(sql: str, *setup: str) -> object:
    engine = KsqlEngine()
    for s in setup or (STREAM, TABLE):
        engine.execute_sql(s)
    [result] = engine.execute_sql(sql)
    return result.plan


def schema_of(sql: str) -> str:
    return str(plan(sql).command.schema)  # type: ignore[attr-defined]


def step_types(sql: str) -> list[type]:
    return [type(s) for s in walk_steps(plan(sql).query.root)]  # type: ignore[attr-defined]


def test_group_by_a_column_keys_the_table_by_that_column() -> None:
    assert schema_of("CREATE TABLE T AS SELECT ITEM, COUNT(*) FROM ORDERS GROUP BY ITEM;") == (
        "`ITEM` STRING KEY, `KSQL_COL_0` BIGINT"
    )


def test_the_projection_alias_names_the_key_column() -> None:
    assert schema_of("CREATE TABLE T AS SELECT LEN(ITEM) AS L, SUM(QTY) AS Q FROM ORDERS GROUP BY LEN(ITEM);") == (
        "`L` INTEGER KEY, `Q` INTEGER"
    )


def test_several_grouping_expressions_give_key_columns_in_group_by_order() -> None:
    schema = schema_of(
        "CREATE TABLE T WITH (KEY_FORMAT='JSON') AS SELECT ADDR->CITY, ITEM, QTY * 2, COUNT(*) "
        "FROM ORDERS GROUP BY ITEM, ADDR->CITY, QTY * 2;"
    )
    assert schema == "`ITEM` STRING KEY, `CITY` STRING KEY, `KSQL_COL_0` INTEGER KEY, `KSQL_COL_1` BIGINT"


def test_grouping_by_the_existing_key_does_not_repartition() -> None:
    types = step_types("CREATE TABLE T AS SELECT ID, COUNT(*) FROM ORDERS GROUP BY ID;")
    assert N.StreamGroupByKeyV2 in types and N.StreamGroupByV2 not in types and N.StreamAggregateV6 in types


def test_a_table_source_groups_and_aggregates_with_table_steps() -> None:
    types = step_types("CREATE TABLE T AS SELECT SHELF, SUM(QTY) FROM STOCK GROUP BY SHELF;")
    assert N.TableGroupByV2 in types and N.TableAggregateV4 in types


def test_windowed_aggregation_with_emit_final_is_suppressed_and_windowed() -> None:
    p = plan(
        "CREATE TABLE T AS SELECT ITEM, COUNT(*) FROM ORDERS "
        "WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 5 SECONDS, GRACE PERIOD 1 SECOND) GROUP BY ITEM EMIT FINAL;"
    )
    steps = walk_steps(p.query.root)  # type: ignore[attr-defined]
    [agg] = [s for s in steps if isinstance(s, StreamWindowedAggregateV2)]
    [sup] = [s for s in steps if isinstance(s, TableSuppressV2)]
    assert (agg.window.size_ms, agg.window.advance_ms, agg.window.grace_ms) == (10_000, 5_000, 1_000)
    assert sup.grace_ms == 1_000
    assert sup.retention_ms == 11_000  # the window store keeps a window for its size plus grace
    assert p.command.window_info.type == "HOPPING"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("window", "retention"),
    [
        ("TUMBLING (SIZE 10 SECONDS, RETENTION 1 MINUTE, GRACE PERIOD 2 SECONDS)", 60_000),
        ("TUMBLING (SIZE 10 SECONDS)", 24 * 60 * 60 * 1000),  # size plus the default grace
        ("SESSION (10 SECONDS, GRACE PERIOD 2 SECONDS)", None),
    ],
)
def test_emit_final_plans_the_window_stores_retention(window: str, retention: int | None) -> None:
    p = plan(f"CREATE TABLE T AS SELECT ITEM, COUNT(*) FROM ORDERS WINDOW {window} GROUP BY ITEM EMIT FINAL;")
    [sup] = [s for s in walk_steps(p.query.root) if isinstance(s, TableSuppressV2)]  # type: ignore[attr-defined]
    assert sup.retention_ms == retention


def test_having_is_planned_inside_the_aggregate() -> None:
    p = plan("CREATE TABLE T AS SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM HAVING SUM(QTY) > 3;")
    [agg] = [s for s in walk_steps(p.query.root) if isinstance(s, N.StreamAggregateV6)]  # type: ignore[attr-defined]
    assert agg.having is not None
    assert [a.alias for a in agg.aggregation_functions] == ["KSQL_AGG_VARIABLE_0", "KSQL_AGG_VARIABLE_1"]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("CREATE TABLE T AS SELECT ITEM, QTY, COUNT(*) FROM ORDERS GROUP BY ITEM;",
         "Non-aggregate SELECT expression(s) not part of GROUP BY: QTY"),
        ("CREATE TABLE T AS SELECT COUNT(*) FROM ORDERS GROUP BY ITEM;",
         "must include the grouping expression ITEM in its projection"),
        ("CREATE TABLE T AS SELECT ITEM, ITEM AS I2, COUNT(*) FROM ORDERS GROUP BY ITEM;",
         "The projection contains a key column more than once: `ITEM` and `I2`."),
        ("CREATE TABLE T AS SELECT ITEM FROM ORDERS GROUP BY ITEM;",
         "GROUP BY requires aggregate functions in either the SELECT or HAVING clause."),
        ("CREATE TABLE T AS SELECT ITEM, COUNT(*) FROM ORDERS GROUP BY ITEM, ITEM;",
         "Duplicate GROUP BY expression"),
        ("CREATE TABLE T AS SELECT SUM(QTY), COUNT(*) FROM ORDERS GROUP BY SUM(QTY);",
         "GROUP BY does not support aggregate functions: SUM is an aggregate function."),
        ("CREATE TABLE T AS SELECT ITEM, COUNT(*) FROM ORDERS GROUP BY ITEM HAVING QTY > 1;",
         "Non-aggregate HAVING expression not part of GROUP BY: QTY"),
        ("CREATE STREAM T AS SELECT ITEM, COUNT(*) FROM ORDERS GROUP BY ITEM;",
         "Your SELECT query produces a TABLE"),
        ("CREATE TABLE T AS SELECT ITEM, COUNT(*) FROM ORDERS GROUP BY ITEM EMIT FINAL;",
         "EMIT FINAL is only supported for windowed aggregations."),
        ("CREATE TABLE T AS SELECT SHELF, MAX(QTY) FROM STOCK GROUP BY SHELF;",
         "MAX cannot be applied to a table source"),
        ("CREATE TABLE T AS SELECT ITEM, WINDOWSTART, COUNT(*) FROM ORDERS GROUP BY ITEM;",
         "WINDOWSTART"),
        ("CREATE TABLE T AS SELECT ITEM, COUNT(*) FROM ORDERS WINDOW TUMBLING (SIZE 1 SECOND) "
         "GROUP BY ITEM, WINDOWSTART;", "can only be used in the SELECT clause of windowed aggregations"),
    ],
)
def test_invalid_aggregations_raise_ksqldb_errors(sql: str, message: str) -> None:
    with pytest.raises(KsqlError) as info:
        plan(sql)
    assert message in str(info.value)
