"""``base->*`` in a select list: one column per field of the struct, named by the field."""

from __future__ import annotations

import pytest

from engine.analysis.statement_text import format_create_as_select
from engine.data.records import TopicInfo
from engine.errors import AnalysisError
from engine.facade.engine import KsqlEngine
from engine.parser import ast, parse


@pytest.fixture
def engine() -> KsqlEngine:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("users"))
    engine.execute_sql(
        "CREATE STREAM USERS (ID INT KEY, ADDR STRUCT<STREET STRING, GEO STRUCT<LAT DOUBLE, LON DOUBLE>>, N INT)"
        " WITH (kafka_topic='users', format='JSON');"
    )
    return engine


def test_a_struct_all_expands_to_its_fields_and_a_nested_one_to_its_own(engine: KsqlEngine) -> None:
    (result,) = engine.execute_sql("CREATE STREAM FLAT AS SELECT ID, ADDR->*, ADDR->GEO->* FROM USERS;")
    assert result.plan is not None and result.plan.command is not None
    assert str(result.plan.command.schema) == (
        "`ID` INTEGER KEY, `STREET` STRING, `GEO` STRUCT<`LAT` DOUBLE, `LON` DOUBLE>, `LAT` DOUBLE, `LON` DOUBLE"
    )


def test_a_struct_all_in_an_aggregate_selects_the_fields_of_a_grouped_struct(engine: KsqlEngine) -> None:
    (result,) = engine.execute_sql(
        "CREATE TABLE BY_GEO AS SELECT ADDR->GEO, ADDR->GEO->*, COUNT(*) AS C FROM USERS GROUP BY ADDR->GEO;"
    )
    assert result.plan is not None and result.plan.command is not None
    assert str(result.plan.command.schema) == (
        "`GEO` STRUCT<`LAT` DOUBLE, `LON` DOUBLE> KEY, `LAT` DOUBLE, `LON` DOUBLE, `C` BIGINT"
    )


def test_a_struct_all_of_a_column_that_is_no_struct_is_refused(engine: KsqlEngine) -> None:
    with pytest.raises(AnalysisError, match=r"^Column N is not a STRUCT type\.$"):
        engine.execute_sql("CREATE STREAM BAD AS SELECT ID, N->* FROM USERS;")


def test_the_printed_statement_keeps_a_struct_all_as_written() -> None:
    (parsed,) = parse("CREATE STREAM FLAT AS SELECT ID, ADDR->GEO->*, N FROM USERS;")
    assert isinstance(parsed.statement, ast.CreateAsSelect)
    text = format_create_as_select(parsed.statement, lambda _: ["ID", "ADDR", "N"], [])
    assert "  USERS.ADDR->GEO->*,\n  USERS.N N\n" in text
