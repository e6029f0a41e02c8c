"""A CREATE ... AS SELECT printed as ksqlDB prints the statement it plans."""

from __future__ import annotations

from engine.analysis.statement_text import format_create_as_select
from engine.parser import ast, parse

COLUMNS = {
    "ORDERS": ["ID", "ITEM", "QTY", "ROWTIME"],
    "SHIPMENTS": ["ID", "ORDER_ID", "ROWTIME"],
}


def _text(sql: str, aliases: list[str] | None = None) -> str:
    (parsed,) = parse(sql)
    stmt = parsed.statement
    assert isinstance(stmt, ast.CreateAsSelect)
    return format_create_as_select(stmt, lambda name: COLUMNS.get(name, []), aliases or [])


def test_columns_are_qualified_items_named_and_emit_changes_added() -> None:
    text = _text(
        "create table totals with (key_format='kafka', partitions=2) as "
        "select item, qty * 2, count(*) from orders where qty > 0 group by item;",
        ["ITEM", "KSQL_COL_0", "KSQL_COL_1"],
    )
    assert text == (
        "CREATE TABLE TOTALS WITH (KEY_FORMAT='kafka', PARTITIONS=2) AS SELECT\n"
        "  ORDERS.ITEM ITEM,\n"
        "  (ORDERS.QTY * 2) KSQL_COL_0,\n"
        "  COUNT(*) KSQL_COL_1\n"
        "FROM ORDERS ORDERS\n"
        "WHERE (ORDERS.QTY > 0)\n"
        "GROUP BY ORDERS.ITEM\n"
        "EMIT CHANGES"
    )


def test_a_join_names_its_type_window_and_grace_and_keeps_the_query_aliases() -> None:
    text = _text(
        "create stream late as select o.id, s.order_id as oid from orders o "
        "left join shipments s within (1 minute, 30 seconds) grace period 2 seconds on o.id = s.order_id;",
        ["O_ID", "OID"],
    )
    assert text == (
        "CREATE STREAM LATE AS SELECT\n"
        "  O.ID O_ID,\n"
        "  S.ORDER_ID OID\n"
        "FROM ORDERS O\n"
        "LEFT OUTER JOIN SHIPMENTS S WITHIN (1 MINUTES, 30 SECONDS) GRACE PERIOD 2 SECONDS ON ((O.ID = S.ORDER_ID))\n"
        "EMIT CHANGES"
    )


def test_an_unqualified_column_two_sources_have_stays_unqualified() -> None:
    text = _text("create stream j as select id from orders join shipments within 5 seconds on orders.id = shipments.id;")
    assert "  ID ID\n" in text and "WITHIN 5 SECONDS ON ((ORDERS.ID = SHIPMENTS.ID))" in text


def test_windows_print_their_durations_in_the_largest_unit_and_emit_final_stays() -> None:
    text = _text(
        "create table w as select item, count(*) as n from orders "
        "window hopping (size 2 hours, advance by 90 seconds, grace period 1500 milliseconds) "
        "group by item emit final;",
        ["ITEM", "N"],
    )
    assert "WINDOW HOPPING ( SIZE 2 HOURS , ADVANCE BY 90 SECONDS , GRACE PERIOD 1500 MILLISECONDS ) \n" in text
    assert text.endswith("GROUP BY ORDERS.ITEM\nEMIT FINAL")
    session = _text("create table s as select item, count(*) as n from orders window session (1 day) group by item;")
    assert "WINDOW SESSION ( 1 DAYS ) \n" in session


def test_a_star_prints_as_it_is_and_partition_by_is_qualified() -> None:
    assert _text("create stream p as select * from orders partition by item;") == (
        "CREATE STREAM P AS SELECT *\nFROM ORDERS ORDERS\nPARTITION BY ORDERS.ITEM\nEMIT CHANGES"
    )
    mixed = _text("create stream m as select orders.*, qty + 1 as more from orders;")
    assert mixed.startswith("CREATE STREAM M AS SELECT\n  ORDERS.*,\n  (ORDERS.QTY + 1) MORE\nFROM")
