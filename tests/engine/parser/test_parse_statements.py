"""Statements of every kind parse into the expected AST."""

from __future__ import annotations

import decimal

import pytest

from engine.errors import ParseError
from engine.parser import ast, parse
from engine.plan import expr as E
from engine.plan import types as T


def one(text: str, **kwargs: object) -> ast.Statement:
    (parsed,) = parse(text, **kwargs)  # type: ignore[arg-type]
    return parsed.statement


def test_create_stream_with_elements_constraints_and_properties() -> None:
    stmt = one(
        "create stream clicks (user_id bigint key, `Page` varchar, hdrs array<struct<key string,"
        " value bytes>> headers, h bytes header('trace')) with (kafka_topic='clicks',"
        " partitions=2, wrap_single_value=false, 'value_format'='json', ratio=0.5);"
    )
    assert stmt == ast.CreateSource(
        kind="STREAM",
        name="CLICKS",
        elements=(
            ast.TableElement(name="USER_ID", type=T.BIGINT, constraint="KEY"),
            ast.TableElement(name="Page", type=T.STRING),
            ast.TableElement(
                name="HDRS",
                type=T.Array(T.Struct((T.Field("KEY", T.STRING), T.Field("VALUE", T.BYTES)))),
                constraint="HEADERS",
            ),
            ast.TableElement(name="H", type=T.BYTES, constraint="HEADER", header_key="trace"),
        ),
        properties={
            "KAFKA_TOPIC": "clicks",
            "PARTITIONS": 2,
            "WRAP_SINGLE_VALUE": False,
            "VALUE_FORMAT": "json",
            "RATIO": decimal.Decimal("0.5"),
        },
    )


def test_create_or_replace_source_table_if_not_exists() -> None:
    stmt = one("CREATE OR REPLACE SOURCE TABLE IF NOT EXISTS t (id INT PRIMARY KEY) WITH (a=1)")
    assert isinstance(stmt, ast.CreateSource)
    assert (stmt.kind, stmt.or_replace, stmt.is_source, stmt.if_not_exists) == (
        "TABLE",
        True,
        True,
        True,
    )
    assert stmt.elements[0].constraint == "PRIMARY KEY"


def test_create_stream_without_elements() -> None:
    stmt = one("CREATE STREAM s WITH (kafka_topic='s', format='AVRO');")
    assert stmt == ast.CreateSource(
        kind="STREAM", name="S", properties={"KAFKA_TOPIC": "s", "FORMAT": "AVRO"}
    )


def test_create_table_as_select_with_window_group_by_having_and_emit() -> None:
    stmt = one(
        "CREATE TABLE totals WITH (kafka_topic='out') AS SELECT region, COUNT(*) AS n "
        "FROM orders WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 10 SECONDS, RETENTION 2 DAYS, "
        "GRACE PERIOD 5 MILLISECONDS) WHERE amount > 10 GROUP BY region HAVING COUNT(*) > 1 "
        "EMIT FINAL;"
    )
    assert isinstance(stmt, ast.CreateAsSelect)
    assert stmt.kind == "TABLE" and stmt.properties == {"KAFKA_TOPIC": "out"}
    q = stmt.query
    assert q.select == (
        ast.SelectColumn(expr=E.ColumnRef("REGION")),
        ast.SelectColumn(expr=E.FunctionCall("COUNT", (), star=True), alias="N"),
    )
    assert q.window == ast.WindowExpr(
        kind="HOPPING", size_ms=60_000, advance_ms=10_000, retention_ms=172_800_000, grace_ms=5
    )
    assert q.where == E.Comparison(">", E.ColumnRef("AMOUNT"), E.Literal(10, T.INTEGER))
    assert q.group_by == (E.ColumnRef("REGION"),)
    assert q.having is not None and q.emit == "FINAL"


def test_tumbling_and_session_windows_convert_units_to_milliseconds() -> None:
    tumbling = one("SELECT * FROM s WINDOW TUMBLING (SIZE 2 HOURS) GROUP BY k;")
    session = one("SELECT * FROM s WINDOW SESSION (30 SECONDS, GRACE PERIOD 1 MINUTE) GROUP BY k;")
    assert isinstance(tumbling, ast.Query) and isinstance(session, ast.Query)
    assert tumbling.window == ast.WindowExpr(kind="TUMBLING", size_ms=7_200_000)
    assert session.window == ast.WindowExpr(kind="SESSION", gap_ms=30_000, grace_ms=60_000)


def test_joins_nest_to_the_left_with_types_and_within() -> None:
    stmt = one(
        "SELECT * FROM a AS x LEFT OUTER JOIN b y WITHIN (1 SECOND, 2 HOURS) ON x.id = y.id "
        "FULL OUTER JOIN c WITHIN 1 HOUR GRACE PERIOD 5 MINUTES ON x.id = c.id "
        "JOIN d ON x.id = d.id RIGHT JOIN e ON x.id = e.id;"
    )
    assert isinstance(stmt, ast.Query)
    rel = stmt.from_
    assert isinstance(rel, ast.Join) and rel.join_type == "RIGHT"
    assert rel.right == ast.AliasedSource(name="E")
    inner = rel.left
    assert isinstance(inner, ast.Join) and inner.join_type == "INNER" and inner.within is None
    full = inner.left
    assert isinstance(full, ast.Join) and full.join_type == "FULL"
    assert full.within == ast.WithinExpr(before_ms=3_600_000, after_ms=3_600_000, grace_ms=300_000)
    left = full.left
    assert isinstance(left, ast.Join) and left.join_type == "LEFT"
    assert left.left == ast.AliasedSource(name="A", alias="X")
    assert left.right == ast.AliasedSource(name="B", alias="Y")
    assert left.within == ast.WithinExpr(before_ms=1000, after_ms=7_200_000)
    assert left.criteria == E.Comparison("=", E.ColumnRef("ID", "X"), E.ColumnRef("ID", "Y"))


def test_bare_outer_join_is_full() -> None:
    stmt = one("SELECT * FROM a OUTER JOIN b ON a.k = b.k;")
    assert isinstance(stmt, ast.Query) and isinstance(stmt.from_, ast.Join)
    assert stmt.from_.join_type == "FULL"


def test_emit_and_partition_are_not_taken_as_relation_aliases() -> None:
    stmt = one("SELECT * FROM s PARTITION BY a, b EMIT CHANGES LIMIT 5;")
    assert isinstance(stmt, ast.Query)
    assert stmt.from_ == ast.AliasedSource(name="S")
    assert stmt.partition_by == (E.ColumnRef("A"), E.ColumnRef("B"))
    assert stmt.emit == "CHANGES" and stmt.limit == 5


def test_parenthesised_group_by_list() -> None:
    stmt = one("SELECT a, b, COUNT(*) FROM s GROUP BY (a, b);")
    assert isinstance(stmt, ast.Query)
    assert stmt.group_by == (E.ColumnRef("A"), E.ColumnRef("B"))


def test_select_star_qualified_star_and_alias_without_as() -> None:
    stmt = one("SELECT *, s.*, ABS(x) total FROM s;")
    assert isinstance(stmt, ast.Query)
    assert stmt.select[:2] == (ast.AllColumns(), ast.AllColumns(source="S"))
    total = stmt.select[2]
    assert isinstance(total, ast.SelectColumn) and total.alias == "TOTAL"
    # the call's version is the planner's business (tests/engine/parser/test_parse_roundtrip.py)
    assert isinstance(total.expr, E.FunctionCall) and (total.expr.name, total.expr.args) == ("ABS", (E.ColumnRef("X"),))


def test_insert_into_select_with_properties() -> None:
    stmt = one("INSERT INTO sink WITH (query_id='q1') SELECT * FROM src;")
    assert isinstance(stmt, ast.InsertInto)
    assert stmt.target == "SINK" and stmt.properties == {"QUERY_ID": "q1"}
    assert stmt.query.from_ == ast.AliasedSource(name="SRC")


def test_insert_values_with_and_without_columns() -> None:
    with_cols = one("INSERT INTO t (k, `v`) VALUES ('a', -1.5);")
    without = one("INSERT INTO t VALUES (1, NULL, ARRAY[1]);")
    assert with_cols == ast.InsertValues(
        target="T",
        columns=("K", "v"),
        values=(E.Literal("a", T.STRING), E.Literal(decimal.Decimal("-1.5"), T.Decimal(2, 1))),
    )
    assert isinstance(without, ast.InsertValues) and without.columns is None
    assert without.values[1] == E.Literal(None, None)


def test_drop_source_variants() -> None:
    assert one("DROP STREAM s;") == ast.DropSource(kind="STREAM", name="S")
    assert one("drop table if exists t delete topic") == ast.DropSource(
        kind="TABLE", name="T", if_exists=True, delete_topic=True
    )


def test_create_and_drop_type_and_custom_type_resolution() -> None:
    parsed = parse(
        "CREATE TYPE address AS STRUCT<street STRING, zip INT>;"
        "CREATE STREAM s (home ADDRESS, other PHONE) WITH (kafka_topic='s');"
        "DROP TYPE IF EXISTS address;"
    )
    create_type, create_stream, drop_type = (p.statement for p in parsed)
    address = T.Struct((T.Field("STREET", T.STRING), T.Field("ZIP", T.INTEGER)))
    assert create_type == ast.CreateType(name="ADDRESS", type=address)
    assert isinstance(create_stream, ast.CreateSource)
    assert create_stream.elements[0].type == address
    assert create_stream.elements[1].type == ast.TypeReference("PHONE")
    assert drop_type == ast.DropType(name="ADDRESS", if_exists=True)


def test_custom_types_can_come_from_the_caller() -> None:
    stmt = one("SELECT CAST(x AS money) FROM s;", types={"MONEY": T.Decimal(10, 2)})
    assert isinstance(stmt, ast.Query)
    first = stmt.select[0]
    assert isinstance(first, ast.SelectColumn)
    assert isinstance(first.expr, E.Cast)
    assert (first.expr.operand, first.expr.type) == (E.ColumnRef("X"), T.Decimal(10, 2))


def test_set_unset_define_undefine_terminate() -> None:
    parsed = [
        p.statement
        for p in parse(
            "SET 'auto.offset.reset'='earliest'; UNSET 'auto.offset.reset';"
            "DEFINE topic = 'orders'; UNDEFINE topic; TERMINATE CSAS_X_1; TERMINATE ALL;"
        )
    ]
    assert parsed == [
        ast.SetProperty(name="auto.offset.reset", value="earliest"),
        ast.UnsetProperty(name="auto.offset.reset"),
        ast.DefineVariable(name="TOPIC", value="orders"),
        ast.UndefineVariable(name="TOPIC"),
        ast.TerminateQuery(query_id="CSAS_X_1"),
        ast.TerminateQuery(query_id="ALL"),
    ]


def test_define_substitutes_variables_in_later_statements() -> None:
    parsed = parse(
        "DEFINE name = 'Orders'; CREATE STREAM ${name} WITH (kafka_topic='${name}_t');"
        "SELECT ${col} AS ${alias} FROM x;",
        variables={"col": "5", "alias": "price"},
    )
    create = parsed[1].statement
    assert isinstance(create, ast.CreateSource)
    assert create.name == "ORDERS" and create.properties == {"KAFKA_TOPIC": "Orders_t"}
    query = parsed[2].statement
    assert isinstance(query, ast.Query)
    assert query.select == (ast.SelectColumn(expr=E.Literal(5, T.INTEGER), alias="PRICE"),)


def test_a_variable_in_a_literals_place_stands_for_a_literal_as_ksqldbs_grammar_reads_it() -> None:
    """A bare ``${col}`` in an expression is a literal in ksqlDB's grammar (tried before a column
    reference): a value that is no quoted string, boolean or number is refused there."""
    with pytest.raises(ParseError, match=r"^Illegal argument at Line: 1, Col: 8\.$"):
        parse("SELECT ${col} FROM x;", variables={"col": "price"})


def test_alter_source_adds_columns() -> None:
    stmt = one("ALTER STREAM s ADD COLUMN a INT, ADD b STRING;")
    assert stmt == ast.AlterSource(
        kind="STREAM",
        name="S",
        columns=(
            ast.TableElement(name="A", type=T.INTEGER),
            ast.TableElement(name="B", type=T.STRING),
        ),
    )


def test_assert_topic_and_schema() -> None:
    topic = one("ASSERT NOT EXISTS TOPIC 'orders' WITH (partitions=3) TIMEOUT 5 SECONDS;")
    schema = one("ASSERT SCHEMA SUBJECT 'orders-value' ID 4;")
    assert topic == ast.AssertStatement(
        kind="TOPIC", target="orders", exists=False, properties={"PARTITIONS": 3}, timeout_ms=5000
    )
    assert schema == ast.AssertStatement(kind="SCHEMA", target="orders-value", schema_id=4)


def test_test_script_asserts_need_the_test_flag() -> None:
    text = "ASSERT VALUES out (k, v) VALUES ('a', 1); ASSERT NULL VALUES out (k) KEY ('b');"
    values, tombstone = (p.statement for p in parse(text, test_statements=True))
    assert values == ast.AssertStatement(
        kind="VALUES",
        target="OUT",
        columns=("K", "V"),
        values=(E.Literal("a", T.STRING), E.Literal(1, T.INTEGER)),
    )
    assert isinstance(tombstone, ast.AssertStatement) and tombstone.kind == "TOMBSTONE"


@pytest.mark.parametrize(
    ("text", "kind", "target"),
    [
        ("SHOW STREAMS", "LIST STREAMS", None),
        ("list tables extended", "LIST TABLES EXTENDED", None),
        ("SHOW ALL TOPICS", "LIST ALL TOPICS", None),
        ("SHOW QUERIES", "LIST QUERIES", None),
        ("DESCRIBE orders", "DESCRIBE", "ORDERS"),
        ("DESCRIBE orders EXTENDED", "DESCRIBE EXTENDED", "ORDERS"),
        ("DESCRIBE FUNCTION concat", "DESCRIBE FUNCTION", "CONCAT"),
        ("DESCRIBE STREAMS", "DESCRIBE STREAMS", None),
        ("EXPLAIN CSAS_OUT_0", "EXPLAIN", "CSAS_OUT_0"),
    ],
)
def test_informational_statements(text: str, kind: str, target: str | None) -> None:
    stmt = one(text)
    assert isinstance(stmt, ast.Informational)
    assert (stmt.kind, stmt.target) == (kind, target)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PRINT 'orders'", ast.PrintTopic(topic="orders")),
        ("print orders from beginning", ast.PrintTopic(topic="ORDERS", from_beginning=True)),
        (
            "PRINT 'a-b' FROM BEGINNING INTERVAL 3 LIMIT 10",
            ast.PrintTopic(topic="a-b", from_beginning=True, interval=3, limit=10),
        ),
        ("PRINT `Mixed` LIMIT 2 SAMPLE 2", ast.PrintTopic(topic="Mixed", interval=2, limit=2)),
    ],
)
def test_print_keeps_its_topic_start_interval_and_limit(text: str, expected: ast.PrintTopic) -> None:
    assert one(text) == expected


def test_print_interval_must_be_a_positive_whole_number() -> None:
    with pytest.raises(ParseError) as zero:
        one("PRINT 't' INTERVAL 0")
    assert zero.value.reason == "INTERVAL must be greater than one, but was: 0" and zero.value.line == 1
    with pytest.raises(ParseError, match="whole number"):
        one("PRINT 't' LIMIT 1.5")


def test_explain_of_a_statement_keeps_the_statement() -> None:
    stmt = one("EXPLAIN SELECT * FROM s;")
    assert isinstance(stmt, ast.Informational)
    assert isinstance(stmt.statement, ast.Query)
    assert stmt.target == "SELECT * FROM s"


def test_multiple_statements_keep_text_and_positions() -> None:
    text = "-- setup\nCREATE STREAM a (x INT) WITH (kafka_topic='a');\n  /* two */ SELECT x\nFROM a"
    first, second = parse(text)
    assert first.text == "CREATE STREAM a (x INT) WITH (kafka_topic='a');"
    assert (first.line, first.column) == (2, 1)
    assert second.text == "SELECT x\nFROM a;"
    assert (second.line, second.column) == (3, 13)


def test_semicolons_inside_strings_and_comments_do_not_split() -> None:
    parsed = parse("SELECT 'a;b' FROM s -- c;d\n; /* x; */ SELECT `c;` FROM s;")
    assert len(parsed) == 2


def test_blank_text_and_comment_only_text_give_no_statements() -> None:
    assert parse("  \n-- nothing here;\n/* nor; here */ ") == []


def test_location_of_column_references_and_sources() -> None:
    (parsed,) = parse("SELECT a,\n  b.c FROM src s;")
    stmt = parsed.statement
    assert isinstance(stmt, ast.Query)
    first, second = (item.expr for item in stmt.select)  # type: ignore[union-attr]
    assert parsed.location_of(first) == (1, 8)
    assert parsed.location_of(second) == (2, 3)
    assert parsed.location_of(stmt.from_) == (2, 12)
    assert parsed.location_of(E.ColumnRef("A")) is None
