"""Which WHERE clauses of a pull query ksqlDB serves by key lookup, range scan or table scan,
and what it refuses (engine.server.pull_where), on a metastore of the project's own tables."""

from __future__ import annotations

from typing import Any

import pytest

from engine.analysis.query import Scope
from engine.facade.engine import KsqlEngine
from engine.parser import parse
from engine.plan import expr as X
from engine.server.pull import PullQueryError, plan_pull_query
from engine.server.pull_where import disjuncts, rewrite, where_access

OFF = {"ksql.query.pull.table.scan.enabled": False}


@pytest.fixture(scope="module")
def engine() -> KsqlEngine:
    engine = KsqlEngine()
    engine.execute_sql(
        "CREATE STREAM CLICKS (USER STRING KEY, PAGE INT) WITH (kafka_topic='clicks', value_format='JSON', partitions=1);"
        "CREATE TABLE BY_USER AS SELECT USER, COUNT(*) AS N, MAX(PAGE) AS TOP FROM CLICKS GROUP BY USER;"
        "CREATE TABLE BY_PAGE AS SELECT PAGE, COUNT(*) AS N FROM CLICKS GROUP BY PAGE;"
        "CREATE TABLE BY_BOTH WITH (key_format='JSON') AS SELECT USER, PAGE, COUNT(*) AS N FROM CLICKS GROUP BY USER, PAGE;"
        "CREATE TABLE PER_MINUTE AS SELECT USER, COUNT(*) AS N FROM CLICKS WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY USER;"
    )
    return engine


def _access(engine: KsqlEngine, text: str, **properties: Any) -> Any:
    [parsed] = parse(text)
    query = parsed.statement
    source = engine.metastore.get(query.from_.name)
    scope = Scope.of_source(source, source.name)
    where = scope.resolve(query.where, clause="WHERE") if query.where is not None else None
    return where_access(where, source, properties)


def _expr(text: str) -> X.Expr:
    from engine.parser.parser import parse_expression

    return parse_expression(text)


def test_in_and_between_are_rewritten_and_the_where_put_in_disjunctive_normal_form() -> None:
    shown = [X.format_sql(d) for d in disjuncts(rewrite(_expr("K IN (1, 2) AND V BETWEEN 3 AND 4")))]
    assert shown == ["((K = 1) AND ((V >= 3) AND (V <= 4)))", "((K = 2) AND ((V >= 3) AND (V <= 4)))"]
    # NOT goes down to the comparisons (De Morgan) and stays on them
    shown = [X.format_sql(d) for d in disjuncts(rewrite(_expr("NOT (K = 1 AND V = 2)")))]
    assert shown == ["(NOT (K = 1))", "(NOT (V = 2))"]


@pytest.mark.parametrize(
    ("text", "kind", "keys"),
    [
        ("SELECT * FROM BY_USER WHERE USER = 'a';", "KEY_LOOKUP", (("a",),)),
        ("SELECT * FROM BY_USER WHERE USER = 'a' OR USER = 'b';", "KEY_LOOKUP", (("a",), ("b",))),
        ("SELECT * FROM BY_USER WHERE USER IN ('a', 'b') AND N > 1;", "KEY_LOOKUP", (("a",), ("b",))),
        ("SELECT * FROM BY_USER WHERE USER > 'a';", "RANGE_SCAN", None),
        ("SELECT * FROM BY_USER WHERE 'm' >= USER AND N > 1;", "RANGE_SCAN", None),
        ("SELECT * FROM BY_USER WHERE USER LIKE 'a%';", "TABLE_SCAN", None),
        ("SELECT * FROM BY_USER WHERE USER > 'a' OR USER = 'b';", "TABLE_SCAN", None),
        ("SELECT * FROM BY_PAGE WHERE PAGE = 7;", "KEY_LOOKUP", ((7,),)),
        ("SELECT * FROM BY_PAGE WHERE PAGE > 7;", "TABLE_SCAN", None),  # a range scan needs a STRING or BYTES key
        ("SELECT * FROM BY_BOTH WHERE USER = 'a' AND PAGE = 2;", "KEY_LOOKUP", (("a", 2),)),
        ("SELECT * FROM BY_BOTH WHERE USER = 'a';", "TABLE_SCAN", None),
        ("SELECT * FROM PER_MINUTE WHERE USER = 'a' AND WINDOWSTART >= 0;", "KEY_LOOKUP", (("a",),)),
        ("SELECT * FROM PER_MINUTE WHERE USER > 'a';", "TABLE_SCAN", None),  # no range scans on windowed tables
        ("SELECT * FROM BY_USER;", "TABLE_SCAN", None),
    ],
)
def test_the_access_ksqldb_picks(engine, text, kind, keys) -> None:
    access = _access(engine, text)
    assert (access.kind, access.keys) == (kind, keys)


def test_range_scans_can_be_turned_off(engine) -> None:
    access = _access(engine, "SELECT * FROM BY_USER WHERE USER > 'a';", **{"ksql.query.pull.range.scan.enabled": False})
    assert access.kind == "TABLE_SCAN"


@pytest.mark.parametrize(
    ("text", "properties", "message"),
    [
        ("SELECT * FROM BY_USER WHERE N > 1;", OFF, "WHERE clause missing key column for disjunct: (N > 1).  See "
                                                     "https://cnfl.io/queries for more info.\nAdd EMIT CHANGES"),
        ("SELECT * FROM BY_USER;", OFF, "Missing WHERE clause.  See https://cnfl.io/queries for more info."),
        ("SELECT * FROM BY_BOTH WHERE USER = 'a';", OFF,
         "Multi-column sources must specify every key in the WHERE clause. Specified: [`USER`] Expected: "
         "[`USER` STRING KEY, `PAGE` INTEGER KEY]"),
        ("SELECT * FROM BY_USER WHERE USER = N;", OFF,
         "A comparison must be between a key column and a resolvable expression"),
        ("SELECT * FROM BY_USER WHERE UCASE(USER) = 'A';", OFF, "A comparison must directly reference a key column"),
        ("SELECT * FROM BY_USER WHERE USER <> 'a';", OFF,
         "Bound on key columns '[`USER` STRING KEY]' must currently be '='"),
        ("SELECT * FROM BY_USER WHERE USER > 'a' OR USER = 'b';", OFF,
         "Query requires table scan to be enabled. Table scans can be enabled by setting "
         "ksql.query.pull.table.scan.enabled=true"),
        ("SELECT * FROM BY_PAGE WHERE PAGE > 7;", OFF, "Query requires table scan to be enabled."),
        # refused whether or not table scans are enabled
        ("SELECT * FROM BY_USER WHERE N IS NULL;", {}, "Unsupported expression in WHERE clause: (N IS NULL).  See"),
        ("SELECT * FROM BY_USER WHERE USER NOT IN ('a');", {}, "Unsupported expression in WHERE clause: (NOT (USER = 'a'))"),
        ("SELECT * FROM PER_MINUTE WHERE USER = 'a' AND WINDOWSTART <> 1;", {},
         "Unsupported `WINDOWSTART` bounds: NOT_EQUAL.  See https://cnfl.io/queries for more info."),
        ("SELECT * FROM BY_USER WHERE N LIKE 'a%';", {},
         "The column type for Like condition must be VARCHAR. The column type is BIGINT"),
        ("SELECT * FROM BY_PAGE WHERE PAGE = 3000000000;", {},
         "'3000000000' can not be converted to the type of the key column: PAGE INTEGER KEY"),
        ("SELECT * FROM BY_USER WHERE USER = CAST(NULL AS STRING);", {},
         "Primary key columns can not be NULL: (USER = CAST(null AS STRING))"),
    ],
)
def test_refusals_read_as_ksqldbs(engine, text, properties, message) -> None:
    with pytest.raises(PullQueryError) as refused:
        _access(engine, text, **properties)
    assert message in str(refused.value)


def test_a_refusal_says_all_a_pull_querys_where_needs(engine) -> None:
    with pytest.raises(PullQueryError) as refused:
        _access(engine, "SELECT * FROM BY_USER WHERE N > 1;", **OFF)
    assert str(refused.value) == (
        "WHERE clause missing key column for disjunct: (N > 1).  See https://cnfl.io/queries for more info.\n"
        "Add EMIT CHANGES if you intended to issue a push query.\n"
        "Pull queries require a WHERE clause that:\n"
        " - includes a key equality expression, e.g. `SELECT * FROM X WHERE <key-column> = Y;`.\n"
        " - in the case of a multi-column key, is a conjunction of equality expressions that cover all key columns.\n"
        " - to support range expressions, e.g.,  SELECT * FROM X WHERE <key-column> < Y;`, range scans need to be enabled by setting ksql.query.pull.range.scan.enabled=true\n"
        "If more flexible queries are needed, , table scans can be enabled by setting ksql.query.pull.table.scan.enabled=true."
    )


def test_a_windowed_refusal_names_the_window_bounds_it_supports(engine) -> None:
    with pytest.raises(PullQueryError) as refused:
        _access(engine, "SELECT * FROM PER_MINUTE WHERE N > 1;", **OFF)
    assert (
        "\n - (optionally) limits the time bounds of the windowed table.\n\t Bounds on [`WINDOWSTART`, `WINDOWEND`] "
        "are supported\n\t Supported operators are [EQUAL, GREATER_THAN, GREATER_THAN_OR_EQUAL, LESS_THAN, "
        "LESS_THAN_OR_EQUAL]\nIf more flexible queries are needed"
    ) in str(refused.value)


def test_the_pull_query_planner_refuses_as_the_where_rules_say(engine) -> None:
    [parsed] = parse("SELECT * FROM BY_USER WHERE N > 1;")
    with pytest.raises(PullQueryError, match="WHERE clause missing key column"):
        plan_pull_query(engine.metastore, parsed.statement, parsed.text, OFF)
    [parsed] = parse("SELECT * FROM BY_USER WHERE USER = 'a' OR USER = 'b';")
    assert plan_pull_query(engine.metastore, parsed.statement, parsed.text, OFF).lookup_keys == [("a",), ("b",)]


def test_a_star_beside_other_items_is_refused_in_a_pull_query(engine) -> None:
    [parsed] = parse("SELECT *, N AS AGAIN FROM BY_USER WHERE USER = 'a';")
    with pytest.raises(PullQueryError, match="Pull queries only support wildcards in the projects if they are the only "
                                             "expression"):
        plan_pull_query(engine.metastore, parsed.statement, parsed.text, {})


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("WINDOWSTART > 1 AND WINDOWSTART >= 2", "Duplicate `WINDOWSTART` bounds on: GREATER_THAN."),
        ("WINDOWEND < 5 AND 3 > WINDOWEND", "Duplicate `WINDOWEND` bounds on: LESS_THAN."),
        ("WINDOWSTART = 1 AND WINDOWSTART = 2", "Duplicate `WINDOWSTART` bounds on: EQUAL."),
        ("WINDOWSTART = 1 AND WINDOWSTART > 0", "`(WINDOWSTART > 0)` cannot be combined with other `WINDOWSTART` bounds."),
        ("WINDOWEND <= 9 AND WINDOWEND = '1970-01-01T00:00:01'",
         "`(WINDOWEND = 1000)` cannot be combined with other `WINDOWEND` bounds."),
        ("WINDOWSTART > 1.5", "Window bounds must resolve to an INT, BIGINT, or STRING containing a datetime."),
        ("WINDOWSTART > 'yesterday'", "Failed to parse timestamp 'yesterday': "),
    ],
)
def test_window_bounds_are_checked_as_ksqldb_extracts_them(engine, where, message) -> None:
    with pytest.raises(PullQueryError) as refused:
        _access(engine, f"SELECT * FROM PER_MINUTE WHERE USER = 'a' AND {where};")
    assert message in str(refused.value)
    if "Failed to parse" not in message:  # a bound's refusal says what a windowed WHERE may hold
        assert "Bounds on [`WINDOWSTART`, `WINDOWEND`] are supported" in str(refused.value)


def test_window_bounds_of_each_disjunct_are_their_own(engine) -> None:
    access = _access(engine, "SELECT * FROM PER_MINUTE WHERE (USER = 'a' AND WINDOWSTART > 1) OR "
                             "(USER = 'b' AND WINDOWSTART > 2 AND WINDOWEND < '2020-01-01');")
    assert (access.kind, access.keys) == ("KEY_LOOKUP", (("a",), ("b",)))
    # a table scan extracts no bounds, as ksqlDB's extracts none
    assert _access(engine, "SELECT * FROM PER_MINUTE WHERE N > 1 AND WINDOWSTART > 1 AND WINDOWSTART > 2;").kind == \
        "TABLE_SCAN"


def test_a_table_pull_query_filters_with_the_rewritten_where(engine) -> None:
    """ksqlDB evaluates the WHERE as its rewrite leaves it: a NOT before a LIKE is dropped there."""
    [parsed] = parse("SELECT * FROM BY_USER WHERE USER NOT LIKE 'a%';")
    plan = plan_pull_query(engine.metastore, parsed.statement, parsed.text, {})
    assert plan.predicate({"USER": "ab", "N": 1, "TOP": 1}) is True
    assert plan.predicate({"USER": "b", "N": 1, "TOP": 1}) is False
    [parsed] = parse("SELECT * FROM BY_USER WHERE USER IN ('a', 'b') AND N BETWEEN 1 AND 2;")
    plan = plan_pull_query(engine.metastore, parsed.statement, parsed.text, {})
    assert [plan.predicate({"USER": u, "N": n, "TOP": 1}) for u, n in (("a", 1), ("b", 3), ("c", 1))] == \
        [True, False, False]


@pytest.mark.parametrize(
    ("where", "key_range", "found"),
    [
        ("USER > 'b'", (">=", "b"), ["c", "d"]),
        ("USER >= 'b' AND USER < 'd'", (">=", "b"), ["b", "c"]),  # the first bound of the key makes the range
        ("USER <= 'b'", ("<=", "b"), ["a", "b"]),
        ("USER BETWEEN 'b' AND 'c'", (">=", "b"), ["b", "c"]),
        # the key on the right: ksqlDB takes the operator as written, so 'c' >= USER reads the
        # store from 'c' on, and its WHERE leaves 'c' alone
        ("'c' >= USER", (">=", "c"), ["c"]),
    ],
)
def test_a_range_scan_reads_the_key_range_ksqldb_reads(engine, where, key_range, found) -> None:
    from engine.server.pull import _in_range

    access = _access(engine, f"SELECT * FROM BY_USER WHERE {where};")
    assert (access.kind, access.range) == ("RANGE_SCAN", key_range)
    [parsed] = parse(f"SELECT * FROM BY_USER WHERE {where};")
    plan = plan_pull_query(engine.metastore, parsed.statement, parsed.text, {})
    assert plan.key_range == ("USER", *key_range)
    rows = [{"USER": user, "N": 1, "TOP": 1} for user in "abcd"]
    assert [r["USER"] for r in rows if _in_range(r, plan.key_range) and plan.predicate(r) is True] == found
    # a table scan has no key range
    [parsed] = parse("SELECT * FROM BY_USER WHERE USER > 'b' OR USER = 'a';")
    assert plan_pull_query(engine.metastore, parsed.statement, parsed.text, {}).key_range is None
