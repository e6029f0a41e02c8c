"""ksqlDB's planning rules that conformance cases hold the planner to (no Spark needed)."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import KsqlError
from engine.facade.engine import KsqlEngine

_INTERMEDIATE = (
    "One of the functions used in the statement has an intermediate type that the value "
    "format can not handle. Please remove the function or change the format."
)


def _engine(value_format: str) -> KsqlEngine:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("t"))
    engine.execute_sql(
        "CREATE STREAM S (ID STRING KEY, NAME STRING, V INTEGER, D DATE, TM TIME, TS TIMESTAMP) "
        f"WITH (kafka_topic='t', value_format='{value_format}');"
    )
    return engine


@pytest.mark.parametrize(
    "call", ["AVG(V)", "TOPK(V, 3)", "COLLECT_LIST(V)", "CORRELATION(V, V)"]
)
def test_an_aggregate_whose_accumulator_delimited_cannot_hold_is_refused(call: str) -> None:
    with pytest.raises(KsqlError) as raised:
        _engine("DELIMITED").execute_sql(f"CREATE TABLE O AS SELECT ID, {call} AS A FROM S GROUP BY ID;")
    assert str(raised.value).startswith(_INTERMEDIATE)


def test_aggregates_with_primitive_accumulators_run_on_delimited() -> None:
    (result,) = _engine("DELIMITED").execute_sql(
        "CREATE TABLE O AS SELECT ID, COUNT(*) AS C, SUM(V) AS T, MAX(V) AS M FROM S GROUP BY ID;"
    )
    assert str(result.plan.command.schema) == "`ID` STRING KEY, `C` BIGINT, `T` INTEGER, `M` INTEGER"


def test_avg_runs_on_json() -> None:
    (result,) = _engine("JSON").execute_sql("CREATE TABLE O AS SELECT ID, AVG(V) AS A FROM S GROUP BY ID;")
    assert str(result.plan.command.schema) == "`ID` STRING KEY, `A` DOUBLE"


def _error(sql: str, value_format: str = "JSON") -> str:
    with pytest.raises(KsqlError) as raised:
        _engine(value_format).execute_sql(sql)
    return str(raised.value)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("CREATE STREAM O AS SELECT ID, V FROM S WHERE V >= 'x';",
         "Error in WHERE expression: Cannot compare V (INTEGER) to 'x' (STRING) with GREATER_THAN_OR_EQUAL."),
        ("CREATE TABLE O AS SELECT ID, COUNT(*) AS C FROM S WHERE V > 'x' GROUP BY ID;",
         "Error in WHERE expression: Cannot compare V (INTEGER) to 'x' (STRING) with GREATER_THAN."),
        ("CREATE TABLE O AS SELECT ID, SUM(V) AS T FROM S GROUP BY ID HAVING SUM(V) > '100';",
         "Error in HAVING expression: Cannot compare SUM(V) (INTEGER) to '100' (STRING) with GREATER_THAN."),
        ("CREATE STREAM O AS SELECT ID, CAST(NAME AS ARRAY<INTEGER>) AS A FROM S;",
         "Invalid Select: Cast of STRING to ARRAY<INTEGER> is not supported"),
    ],
)
def test_type_errors_name_their_clause(sql: str, message: str) -> None:
    assert message in _error(sql)


def test_an_unknown_function_is_named_before_the_group_by_rules() -> None:
    assert "Can't find any functions with the name 'NO_SUCH_FN'" in _error(
        "CREATE TABLE O AS SELECT NAME, NO_SUCH_FN(V) AS X FROM S GROUP BY NAME;"
    )


def test_an_aggregate_without_group_by_names_the_ungrouped_columns_first() -> None:
    assert "Non-aggregate SELECT expression(s) not part of GROUP BY: NAME" in _error(
        "CREATE TABLE O AS SELECT NAME, COUNT(*) AS C FROM S;"
    )
    assert (
        "does not support aggregate function [COUNT(ROWTIME)] without a GROUP BY clause."
        in _error("CREATE TABLE O AS SELECT COUNT(*) AS C FROM S;")
    )


def test_only_the_missing_grouping_expressions_are_listed() -> None:
    assert "must include the grouping expression ID in its projection (eg, SELECT ID...)." in _error(
        "CREATE TABLE O AS SELECT NAME, COUNT(*) AS C FROM S GROUP BY ID, NAME;"
    )


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        ("CREATE STREAM O AS SELECT ID, ROWTIME FROM S;", "ROWTIME"),
        ("CREATE STREAM O AS SELECT ID, S.ROWPARTITION AS ROWPARTITION FROM S;", "ROWPARTITION"),
        ("CREATE TABLE O AS SELECT ID, WINDOWSTART, COUNT(*) AS C FROM S GROUP BY WINDOWSTART;", "WINDOWSTART"),
    ],
)
def test_a_persistent_query_may_not_select_a_reserved_column_under_its_name(sql: str, name: str) -> None:
    assert f"Reserved column name in select: `{name}`. Please remove or alias the column." in _error(sql)


def test_aliasing_another_column_to_a_reserved_name_keeps_the_alias_error() -> None:
    assert "`ROWTIME` is a reserved column name. You cannot use it as an alias for a column." in _error(
        "CREATE STREAM O AS SELECT ID, V AS ROWTIME FROM S;"
    )


def test_a_windowed_aggregate_selects_its_window_bounds() -> None:
    (result,) = _engine("JSON").execute_sql(
        "CREATE TABLE O AS SELECT ID, WINDOWSTART AS WS, WINDOWEND, COUNT(*) AS C FROM S "
        "WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY ID;"
    )
    assert "`WINDOWEND` BIGINT" in str(result.plan.command.schema)


def test_window_bounds_in_having_are_named_in_order() -> None:
    assert "Window bounds column WINDOWSTART can only be used in the SELECT clause" in _error(
        "CREATE TABLE O AS SELECT ID, COUNT(*) AS C FROM S WINDOW TUMBLING (SIZE 1 SECOND) "
        "GROUP BY ID HAVING WINDOWSTART > 1 AND MIN(WINDOWEND) < 5;"
    )


def test_table_functions_refuse_a_table_source() -> None:
    engine = _engine("JSON")
    engine.create_topic(TopicInfo("u"))
    engine.execute_sql("CREATE TABLE U (ID STRING PRIMARY KEY, A ARRAY<INTEGER>) WITH (kafka_topic='u', value_format='JSON');")
    with pytest.raises(KsqlError, match="Table source is not supported with table functions"):
        engine.execute_sql("CREATE STREAM O AS SELECT ID, EXPLODE(A) AS X FROM U;")


def test_an_unknown_qualifier_of_star_is_not_a_source_name() -> None:
    assert "'NOPE' is not a valid stream/table name or alias." in _error("CREATE STREAM O AS SELECT NOPE.* FROM S;")


def test_table_functions_refuse_aggregation() -> None:
    engine = _engine("JSON")
    engine.create_topic(TopicInfo("w"))
    engine.execute_sql("CREATE STREAM W (ID STRING KEY, A ARRAY<INTEGER>) WITH (kafka_topic='w', value_format='JSON');")
    with pytest.raises(KsqlError, match="Table functions cannot be used with aggregations."):
        engine.execute_sql("CREATE TABLE O AS SELECT ID, EXPLODE(A) AS X, COUNT(*) AS C FROM W GROUP BY ID;")


def test_create_or_replace_source_is_refused_even_without_an_existing_source() -> None:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("t"))
    with pytest.raises(KsqlError) as raised:
        engine.execute_sql(
            "CREATE OR REPLACE SOURCE STREAM IN1 (K STRING KEY, V STRING) "
            "WITH (kafka_topic='t', value_format='JSON');"
        )
    assert "Cannot add stream 'IN1': CREATE OR REPLACE is not supported on source streams." in str(raised.value)


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ("value_format='DELIMITED', value_delimiter='<~>'", "Invalid delimiter value: '<~>'."),
        ("value_format='DELIMITED', value_delimiter=''", "Delimiter cannot be empty"),
        ("value_format='JSON', value_delimiter='|'", "JSON does not support the following configs: [delimiter]"),
    ],
)
def test_value_delimiter_is_checked_before_the_columns(props: str, message: str) -> None:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("t"))
    with pytest.raises(KsqlError) as raised:
        engine.execute_sql(f"CREATE STREAM S WITH (kafka_topic='t', {props});")
    assert message in str(raised.value)


def test_a_valid_value_delimiter_still_plans() -> None:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("t"))
    (result,) = engine.execute_sql(
        "CREATE STREAM S (K STRING KEY, V STRING) WITH (kafka_topic='t', value_format='DELIMITED', value_delimiter='TAB');"
    )
    assert result.plan.command.formats.value_properties == (("delimiter", "TAB"),)


def test_a_windowed_aggregate_over_a_join_cannot_select_window_bounds() -> None:
    engine = _engine("JSON")
    engine.create_topic(TopicInfo("b"))
    engine.execute_sql("CREATE TABLE B (ID STRING PRIMARY KEY, X STRING) WITH (kafka_topic='b', value_format='JSON');")
    with pytest.raises(KsqlError, match="SELECT column 'WINDOWSTART' cannot be resolved."):
        engine.execute_sql(
            "CREATE TABLE C AS SELECT S.ID, COUNT(*) AS N, WINDOWSTART AS WS FROM S JOIN B ON S.ID = B.ID "
            "WINDOW TUMBLING (SIZE 10 MILLISECONDS) GROUP BY S.ID;"
        )


@pytest.mark.parametrize("criteria", ["NOPE.ID = ID", "S.ID = NOPE.ID"])
def test_an_unknown_qualifier_in_join_criteria_is_named_before_ambiguity(criteria: str) -> None:
    engine = _engine("JSON")
    engine.create_topic(TopicInfo("b"))
    engine.execute_sql("CREATE TABLE B (ID STRING PRIMARY KEY, X STRING) WITH (kafka_topic='b', value_format='JSON');")
    with pytest.raises(KsqlError, match="Failed to prepare statement: 'NOPE' is not a valid stream/table name or alias."):
        engine.execute_sql(f"CREATE STREAM C AS SELECT S.ID, X FROM S JOIN B ON {criteria};")


def test_insert_values_into_a_name_that_differs_in_case_gets_a_quoting_hint() -> None:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("t"))
    engine.execute_sql("""CREATE STREAM "low" (ID INT KEY, V STRING) WITH (kafka_topic='t', value_format='JSON');""")
    engine.execute_sql("CREATE STREAM UP (ID INT KEY, V STRING) WITH (kafka_topic='t', value_format='JSON');")
    with pytest.raises(KsqlError) as raised:
        engine.execute_sql("INSERT INTO low (ID, V) VALUES (1, 'a');")
    assert str(raised.value) == (
        "Cannot insert values into an unknown stream/table: `LOW`\n"
        'Did you mean "low"? Hint: wrap the source name in double quotes to make it case-sensitive.'
    )
    with pytest.raises(KsqlError) as raised:
        engine.execute_sql("""INSERT INTO "up" (ID, V) VALUES (1, 'a');""")
    assert str(raised.value) == (
        "Cannot insert values into an unknown stream/table: `up`\n"
        "Did you mean UP? Hint: try removing double quotes from the source name."
    )
    with pytest.raises(KsqlError, match="^Cannot insert values into an unknown stream/table: `NOPE`$"):
        engine.execute_sql("INSERT INTO NOPE (ID, V) VALUES (1, 'a');")


def test_missing_key_columns_are_listed_as_a_sentence() -> None:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("t"))
    engine.execute_sql(
        "CREATE STREAM M (K1 INT KEY, K2 INT KEY, V STRING) WITH (kafka_topic='t', format='JSON');"
    )
    with pytest.raises(KsqlError) as raised:
        engine.execute_sql("CREATE STREAM O AS SELECT K1, V FROM M;")
    assert "must include the key columns K1 and K2 in its projection (eg, SELECT K1, K2...)." in str(raised.value)
