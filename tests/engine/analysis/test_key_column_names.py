"""The names and types ksqlDB gives key and value columns (no Spark): select aliases drawn
from one generator over the sources' own columns, grouping keys named by their select alias
(a join's columns included), and new key columns after PARTITION BY."""

from __future__ import annotations

import pytest

from engine.errors import KsqlError
from engine.facade.engine import KsqlEngine

ORDERS = (
    "CREATE STREAM ORDERS (ID INT KEY, ITEM STRING, QTY INT, KSQL_COL_0 INT, "
    "ADDR STRUCT<CITY STRING, ZIP_2 INT>) WITH (kafka_topic='o', format='JSON', partitions=1);"
)
ITEMS = (
    "CREATE TABLE ITEMS (ID INT PRIMARY KEY, ITEM STRING, PRICE INT) "
    "WITH (kafka_topic='i', format='JSON', partitions=1);"
)


def schema_of(sql: str) -> str:
    engine = KsqlEngine()
    engine.execute_sql(ORDERS)
    engine.execute_sql(ITEMS)
    [result] = engine.execute_sql(sql)
    return str(result.plan.command.schema)  # type: ignore[union-attr]


def error_of(sql: str) -> str:
    with pytest.raises(KsqlError) as caught:
        schema_of(sql)
    return str(caught.value)


def test_generated_names_skip_the_numbers_the_sources_columns_hold() -> None:
    assert schema_of("CREATE STREAM S AS SELECT ID, QTY + 1, UCASE(ITEM) FROM ORDERS;") == (
        "`ID` INTEGER KEY, `KSQL_COL_1` INTEGER, `KSQL_COL_2` STRING"
    )


def test_an_alias_does_not_hold_a_generated_name_so_both_names_clash() -> None:
    message = error_of("CREATE STREAM S AS SELECT ID, QTY + 1, ITEM AS KSQL_COL_1 FROM ORDERS;")
    assert message == "Duplicate value columns found in schema: `KSQL_COL_1` STRING"


def test_a_struct_field_with_a_numbered_name_is_named_after_its_stem() -> None:
    assert schema_of("CREATE STREAM S AS SELECT ID, ADDR->ZIP_2 FROM ORDERS;") == (
        "`ID` INTEGER KEY, `ZIP` INTEGER"
    )


def test_struct_fields_of_one_name_are_numbered_in_select_order() -> None:
    assert schema_of("CREATE STREAM S AS SELECT ID, ADDR->CITY, ADDR->CITY AS C, ADDR->CITY FROM ORDERS;") == (
        "`ID` INTEGER KEY, `CITY` STRING, `C` STRING, `CITY_1` STRING"
    )


def test_a_partition_by_struct_field_keeps_the_name_the_select_gives_it() -> None:
    assert schema_of("CREATE STREAM S AS SELECT ADDR->ZIP_2, ITEM FROM ORDERS PARTITION BY ADDR->ZIP_2;") == (
        "`ZIP` INTEGER KEY, `ITEM` STRING"
    )


def test_a_group_by_struct_field_is_keyed_by_the_field_stem() -> None:
    assert schema_of("CREATE TABLE T AS SELECT ADDR->ZIP_2, COUNT(*) AS N FROM ORDERS GROUP BY ADDR->ZIP_2;") == (
        "`ZIP` INTEGER KEY, `N` BIGINT"
    )


def test_a_join_aggregate_is_keyed_by_the_column_name_when_no_other_source_has_it() -> None:
    sql = "CREATE TABLE T AS SELECT O.QTY, COUNT(*) AS N FROM ORDERS O JOIN ITEMS I ON O.ID = I.ID GROUP BY O.QTY;"
    assert schema_of(sql) == "`QTY` INTEGER KEY, `N` BIGINT"


def test_a_join_aggregate_key_that_both_sources_have_is_prefixed_by_its_source() -> None:
    sql = "CREATE TABLE T AS SELECT I.ITEM, COUNT(*) AS N FROM ORDERS O JOIN ITEMS I ON O.ID = I.ID GROUP BY I.ITEM;"
    assert schema_of(sql) == "`I_ITEM` STRING KEY, `N` BIGINT"


def test_a_join_aggregate_of_several_keys_names_each_as_the_select_does() -> None:
    sql = (
        "CREATE TABLE T AS SELECT PRICE, O.ITEM, SUM(QTY) AS N FROM ORDERS O JOIN ITEMS I ON O.ID = I.ID "
        "GROUP BY O.ITEM, PRICE;"
    )
    assert schema_of(sql) == "`O_ITEM` STRING KEY, `PRICE` INTEGER KEY, `N` INTEGER"


def test_a_join_aggregate_generates_value_names_over_the_unprefixed_source_columns() -> None:
    sql = "CREATE TABLE T AS SELECT PRICE, COUNT(*) FROM ORDERS O JOIN ITEMS I ON O.ID = I.ID GROUP BY PRICE;"
    assert schema_of(sql) == "`PRICE` INTEGER KEY, `KSQL_COL_1` BIGINT"
