"""ksqlDB's planning rules that conformance cases hold the planner to (no Spark needed)."""

from __future__ import annotations

import pytest

from engine.engine import KsqlEngine
from engine.errors import KsqlError
from engine.records import TopicInfo

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
