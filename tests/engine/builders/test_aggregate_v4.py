"""``streamAggregateV4``: V3 whose Kafka-runtime form runs by task (input order across a
task's groups) and runs a HAVING natively too (the state store gives each record the group's
results before it; HAVING is a Spark expression over both). Bounded runs build it exactly as
V3."""

from __future__ import annotations

import re

import pytest

from engine.data.records import TopicInfo, TopicRecord
from engine.facade.engine import KsqlEngine
from engine.plan import steps_native as N
from engine.plan.steps import walk_steps
from qtt.plans.normalise import normalise_physical_plan
from qtt.plans.record import streaming_plans

# The aggregate versions before headers were forwarded (tests/engine/builders/conftest.py).
pytestmark = pytest.mark.usefixtures("plans_the_aggregates_without_headers")

SOURCE = "CREATE STREAM S (ID BIGINT KEY, NAME STRING, V INT) WITH (kafka_topic='s', value_format='JSON');"
HAVING = "CREATE TABLE OUT AS SELECT NAME, SUM(V) AS T, COUNT(*) AS C FROM S GROUP BY NAME HAVING SUM(V) > 3;"
PLAIN = "CREATE TABLE OUT AS SELECT NAME, SUM(V) AS T FROM S GROUP BY NAME;"
# n0 passes, fails (a delete), fails again (nothing), passes again; n1 never passes.
VALUES = [("n0", 5), ("n1", 1), ("n0", -4), ("n0", 1), ("n1", 1), ("n0", 9), ("n1", -3)]
RECORDS = [TopicRecord("s", i, {"NAME": name, "V": v}, 100 + i) for i, (name, v) in enumerate(VALUES)]


def _engine(statement: str) -> KsqlEngine:
    engine = KsqlEngine()
    for topic in ("s", "OUT"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(SOURCE + statement)
    return engine


def _aggregate_type(engine: KsqlEngine) -> str:
    (query,) = engine.query_order()
    return next(s.TYPE for s in walk_steps(query.root) if s.TYPE.startswith("streamAggregate"))


def _run(engine: KsqlEngine) -> tuple[list[tuple[object, object, int]], str]:
    for record in RECORDS:
        engine.store.append(record)
    out = engine.run()["OUT"]
    (report,) = engine.query_reports.values()
    return [(r.key, r.value, r.timestamp) for r in out], normalise_physical_plan(report.physical_plan)


def test_the_planner_plans_v4_for_an_aggregate_with_or_without_having() -> None:
    assert _aggregate_type(_engine(HAVING)) == "streamAggregateV4"
    assert _aggregate_type(_engine(PLAIN)) == "streamAggregateV4"


def test_the_bounded_runtime_builds_v4_exactly_as_v3(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    got = _run(_engine(HAVING))
    assert got[0] == [
        ("n0", {"T": 5, "C": 1}, 100),
        ("n0", None, 102),
        ("n0", {"T": 11, "C": 4}, 105),
    ]
    monkeypatch.setattr(N, "StreamAggregateV6", N.StreamAggregateV3)
    v3 = _engine(HAVING)
    assert _aggregate_type(v3) == "streamAggregateV3"
    assert _run(v3) == got


def test_on_kafka_v4_evaluates_having_in_spark_where_v3_runs_v1s_handler(
    spark, monkeypatch: pytest.MonkeyPatch
) -> None:
    (v4,) = streaming_plans(_engine(HAVING)).values()
    assert (
        "RunningAggregateTaskProcessor (SUM, COUNT; groups by NAME; each record with its group's previous results); "
        "grouped by __task = hash mod 1; state: groups MapState<g binary, b binary>"
    ) in v4
    assert "StreamAggregateHandler" not in v4
    # HAVING SUM(V) > 3 over the results before each record, then over its own
    having = r"coalesce\(\(KSQL_AGG_VARIABLE_0#e\d+ > cast\(3 as int\)\), false\)"
    assert re.search(rf"\(__has_prev#e\d+ AND coalesce\({having}, false\)\) AS __passed_before", v4)
    assert re.search(rf"coalesce\({having}, false\) AS __passed#", v4)
    monkeypatch.setattr(N, "StreamAggregateV6", N.StreamAggregateV3)
    (v3,) = streaming_plans(_engine(HAVING)).values()
    assert "StreamAggregateHandler" in v3 and "RunningAggregate" not in v3

