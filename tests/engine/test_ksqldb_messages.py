"""Statements ksqlDB refuses or accepts with its own words and shapes (no Spark, no broker).

LIMIT: a signed integer (a fraction and a word refused at parse, a negative refused by the
query's kind, never in a persistent query); the server's parse error shapes (ksqlDB's
"Syntax Error" and "Failed to prepare statement"); foreign-key joins of windowed tables;
a push query aggregating without GROUP BY.
"""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import AnalysisError, KsqlError, ParseError
from engine.facade.engine import KsqlEngine
from engine.parser import ast, parse
from engine.server.errors import statement_failure
from engine.server.pull import PullQueryError, plan_pull_query

SOURCES = """
CREATE STREAM TRIPS (ID STRING KEY, KM DOUBLE, CITY STRING) WITH (kafka_topic='trips', value_format='JSON');
CREATE TABLE DRIVERS (ID STRING PRIMARY KEY, NAME STRING, CAR STRING) WITH (kafka_topic='drivers', value_format='JSON');
CREATE TABLE CARS (ID STRING PRIMARY KEY, MODEL STRING) WITH (kafka_topic='cars', value_format='JSON');
CREATE TABLE W_DRIVERS (ID STRING PRIMARY KEY, CAR STRING) WITH (kafka_topic='w_drivers', value_format='JSON',
    window_type='TUMBLING', window_size='1 MINUTE');
CREATE TABLE W_CARS (ID STRING PRIMARY KEY, MODEL STRING) WITH (kafka_topic='w_cars', value_format='JSON',
    window_type='TUMBLING', window_size='1 MINUTE');
"""


@pytest.fixture
def engine() -> KsqlEngine:
    engine = KsqlEngine()
    for topic in ("trips", "drivers", "cars", "w_drivers", "w_cars"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(SOURCES)
    return engine


def _query(text: str) -> ast.Query:
    (parsed,) = parse(text)
    assert isinstance(parsed.statement, ast.Query)
    return parsed.statement


def _failure(text: str) -> str:
    try:
        parse(text)
    except KsqlError as exc:
        return statement_failure(exc, text)
    raise AssertionError(f"{text} parsed")


# ---------------------------------------------------------------------------- LIMIT


def test_limit_takes_a_signed_integer() -> None:
    assert _query("SELECT * FROM TRIPS EMIT CHANGES LIMIT 4;").limit == 4
    assert _query("SELECT * FROM TRIPS LIMIT -2;").limit == -2
    assert _query("SELECT KM - 1 AS K FROM TRIPS LIMIT 1;").limit == 1


def test_a_fractional_limit_fails_to_prepare_with_its_position() -> None:
    with pytest.raises(ParseError) as caught:
        parse("SELECT * FROM TRIPS LIMIT 0.5;")
    assert not caught.value.syntax and caught.value.reason == "Value must be integer for command: LIMIT"
    assert (caught.value.line, caught.value.column) == (1, 27)
    assert _failure("SELECT * FROM TRIPS LIMIT 0.5;") == (
        "Failed to prepare statement: Value must be integer for command: LIMIT (line 1:27)"
    )


def test_a_word_as_limit_is_a_syntax_error_in_ksqldb_shape() -> None:
    message = _failure("SELECT * FROM TRIPS LIMIT many;")
    assert message.startswith("line 1:27: Syntax Error\n\nStatement: SELECT * FROM TRIPS LIMIT many;\n")
    assert "at or near 'many'" in message  # kspark's own detail follows


def test_a_negative_limit_is_refused_by_pull_queries(engine: KsqlEngine) -> None:
    with pytest.raises(PullQueryError, match="Pull queries don't support negative integers in the LIMIT clause"):
        plan_pull_query(engine.metastore, _query("SELECT * FROM DRIVERS LIMIT -1;"), "SELECT ...", {})


def test_a_negative_limit_is_refused_by_push_queries(engine: KsqlEngine) -> None:
    text = "SELECT * FROM TRIPS EMIT CHANGES LIMIT -3;"
    with pytest.raises(KsqlError, match="LIMIT must not be negative, got -3"):
        engine.plan_transient_query(_query(text), text)


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("CREATE STREAM LONG_TRIPS AS SELECT * FROM TRIPS WHERE KM > 10 LIMIT 3;",
         "CREATE STREAM AS SELECT statements don't support LIMIT clause."),
        ("CREATE TABLE PER_CITY AS SELECT CITY, COUNT(*) AS N FROM TRIPS GROUP BY CITY LIMIT 1;",
         "CREATE TABLE AS SELECT statements don't support LIMIT clause."),
        ("INSERT INTO TRIPS SELECT * FROM TRIPS LIMIT 2;", "INSERT INTO statements don't support LIMIT clause."),
    ],
)
def test_persistent_queries_refuse_limit(engine: KsqlEngine, statement: str, message: str) -> None:
    with pytest.raises(AnalysisError) as caught:
        engine.execute_sql(statement)
    assert str(caught.value) == message


# ---------------------------------------------------------------------------- syntax errors on the server


def test_a_clause_out_of_the_grammar_is_ksqldb_syntax_error_then_kspark_detail() -> None:
    text = "SELECT * FROM TRIPS SORT BY KM;"  # SORT is taken as an alias, BY is off the grammar
    message = _failure(text)
    assert message.startswith(f"line 1:26: Syntax Error\n\nStatement: {text}\n")
    assert "Syntax error at or near 'BY'" in message


def test_a_missing_token_on_the_server_follows_the_statement_once() -> None:
    text = "SELECT * FROM TRIPS WHERE (KM > 1;"
    message = _failure(text)
    assert message.startswith(f"line 1:34: Syntax Error\n\nStatement: {text}\nmissing ')' at ';'\n")
    assert message.count("Syntax Error") == 1


def test_an_unknown_statement_keeps_its_syntax_error_words() -> None:
    message = _failure("RUN SCRIPT 'x.sql';")
    assert message.startswith("line 1:1: Syntax Error\nUnknown statement 'RUN'")
    assert "Statement:" not in message


def test_other_errors_pass_unchanged() -> None:
    assert statement_failure(AnalysisError("Pull queries don't support X.\nAdd EMIT CHANGES"), "t") == (
        "Pull queries don't support X.\nAdd EMIT CHANGES"
    )


def test_an_undefined_variable_fails_to_prepare() -> None:
    assert _failure("SELECT * FROM ${missing};").startswith(
        "Failed to prepare statement: Variable 'missing' is not defined"
    )


# ---------------------------------------------------------------------------- joins and aggregates


def test_a_foreign_key_join_of_windowed_tables_is_refused_with_ksqldb_message(engine: KsqlEngine) -> None:
    text = "SELECT * FROM W_DRIVERS D JOIN W_CARS C ON D.CAR = C.ID EMIT CHANGES;"
    with pytest.raises(AnalysisError, match=r"^Foreign-key table-table joins are not supported on windowed tables\.$"):
        engine.plan_transient_query(_query(text), text)
    plain = "SELECT * FROM DRIVERS D JOIN CARS C ON D.CAR = C.ID EMIT CHANGES;"
    engine.plan_transient_query(_query(plain), plain)  # not windowed: planned


def test_a_push_query_aggregates_a_stream_without_group_by(engine: KsqlEngine) -> None:
    text = "SELECT COUNT(*) AS TRIPS, SUM(KM) AS KM FROM TRIPS WHERE KM > 1 EMIT CHANGES LIMIT 2;"
    plan = engine.plan_transient_query(_query(text), text)
    assert str(plan.schema) == "`TRIPS` BIGINT, `KM` DOUBLE"  # the constant key is not shown
    assert plan.is_table and plan.limit == 2


def test_a_persistent_query_still_needs_group_by_for_aggregates(engine: KsqlEngine) -> None:
    with pytest.raises(AnalysisError, match=r"does not support aggregate function \[COUNT\(ROWTIME\)\] without a GROUP BY"):
        engine.execute_sql("CREATE TABLE ALL_TRIPS AS SELECT COUNT(*) AS N FROM TRIPS;")


# ---------------------------------------------------------------------------- pull query headers


def test_select_star_on_a_table_shows_keys_then_headers_then_values_in_its_header() -> None:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("badges"))
    engine.execute_sql(
        "CREATE SOURCE TABLE BADGES (LABEL STRING, ID INT PRIMARY KEY, SIG BYTES HEADER('sig'), LEVEL INT) "
        "WITH (kafka_topic='badges', value_format='JSON');"
    )
    star = plan_pull_query(engine.metastore, _query("SELECT * FROM BADGES;"), "SELECT * FROM BADGES;", {})
    assert [c.name for c in star.columns] == ["ID", "LABEL", "SIG", "LEVEL"]  # the rows' order
    assert star.header is not None
    assert ", ".join(map(str, star.header)) == (
        "`ID` INTEGER KEY, `SIG` BYTES HEADER('sig'), `LABEL` STRING, `LEVEL` INTEGER"
    )
    listed = plan_pull_query(engine.metastore, _query("SELECT LEVEL, ID FROM BADGES;"), "t", {})
    assert listed.header is None  # a select list keeps its own order


# ------------------------------------------------------- errors placed at the node they are about


def test_an_unresolved_join_column_is_placed_at_its_reference_in_the_script(engine: KsqlEngine) -> None:
    sql = "\n\nCREATE STREAM X AS SELECT * FROM TRIPS T\n  JOIN DRIVERS D ON T.DRIVER = D.ID;"
    with pytest.raises(AnalysisError) as info:
        engine.execute_sql(sql, first_line=7)
    assert str(info.value) == "Line: 10, Col: 21: JOIN ON column 'T.DRIVER' cannot be resolved."
    assert (info.value.line, info.value.column) == (10, 21)
    assert info.value.reason == "JOIN ON column 'T.DRIVER' cannot be resolved."


def test_an_ambiguous_column_names_each_source_once_by_its_alias(engine: KsqlEngine) -> None:
    sql = "CREATE STREAM X AS SELECT NAME,\n  KM, ID FROM TRIPS T JOIN DRIVERS D ON T.CITY = D.ID;"
    with pytest.raises(AnalysisError) as info:
        engine.execute_sql(sql)
    assert str(info.value) == (  # found as ksqlDB prepares the statement, so it says so
        "Exception while preparing statement: Line: 2, Col: 7: Column 'ID' is ambiguous. Could be D.ID or T.ID."
    )


def test_a_select_column_that_resolves_nowhere_is_placed_at_it(engine: KsqlEngine) -> None:
    with pytest.raises(AnalysisError) as info:
        engine.execute_sql("CREATE STREAM X AS SELECT ID,\n    NOPE FROM TRIPS;")
    assert str(info.value).startswith("Line: 2, Col: 5: ")
    assert "NOPE" in info.value.reason


def test_a_statement_run_alone_is_placed_in_the_request_it_came_from() -> None:
    (first, second) = parse("SET 'a'='b';  SELECT X\nFROM S;")
    error = AnalysisError("about X", node=object())
    error.at(1, 8)  # as the second statement's own text places it
    second.relocate(error)
    assert (error.line, error.column, str(error)) == (1, 22, "Line: 1, Col: 22: about X")
    error.at(2, 1)
    second.relocate(error)
    assert (error.line, error.column) == (2, 1)


@pytest.mark.parametrize(
    ("statement", "column"),
    [
        ("CREATE STREAM X AS SELECT CITY AS A, KM * 2 AS A FROM TRIPS;", "`A` DOUBLE"),
        ("CREATE TABLE X AS SELECT CITY AS C, COUNT(*) AS C FROM TRIPS GROUP BY CITY;", "`C` BIGINT"),
    ],
)
def test_a_name_given_twice_in_the_projection_is_the_schema_error_with_the_columns_type(
    engine: KsqlEngine, statement: str, column: str
) -> None:
    with pytest.raises(AnalysisError) as info:
        engine.execute_sql(statement)
    assert str(info.value) == f"Duplicate value columns found in schema: {column}"


def test_insert_into_an_unknown_target_is_placed_at_the_target(engine: KsqlEngine) -> None:
    with pytest.raises(AnalysisError) as info:
        engine.execute_sql("INSERT INTO\n   NOWHERE SELECT * FROM TRIPS;", first_line=2)
    assert str(info.value) == "Line: 3, Col: 4: Source `NOWHERE` does not exist."
