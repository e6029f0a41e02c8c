"""``streamSourceV4``: V3's source read in partition order, for queries of filters and
projections only (the bounded runtime builds it exactly as V3; on Kafka its ``__seq`` is made
in Spark, without V3's Python pass)."""

from __future__ import annotations

import dataclasses

import pytest

from engine.builders.context import BuildContext
from engine.builders.walker import build
from engine.data.records import TopicInfo, TopicRecord
from engine.errors import PlanError
from engine.facade.engine import KsqlEngine
from engine.plan import steps_native as N
from engine.plan.steps import Step, walk_steps
from engine.planner import physical
from qtt.plans.normalise import normalise_physical_plan
from qtt.plans.record import streaming_plans

SOURCE = "CREATE STREAM S (ID BIGINT KEY, NAME STRING, V INT) WITH (kafka_topic='s', value_format='JSON');"
STATELESS = "CREATE STREAM OUT AS SELECT ID, UCASE(NAME) AS N, V * 2 AS W FROM S WHERE V > 1;"
GROUPED = "CREATE TABLE OUT AS SELECT NAME, COUNT(*) AS C FROM S GROUP BY NAME;"
RECORDS = [TopicRecord("s", i, {"NAME": f"n{i % 3}", "V": i}, 100 + i) for i in range(8)]


def _engine(statement: str) -> KsqlEngine:
    engine = KsqlEngine()
    for topic in ("s", "OUT"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(SOURCE + statement)
    return engine


def _as_v4(step: Step) -> Step:
    """``step`` with every stream source V3 under it replaced by V4 (whatever reads it)."""
    if isinstance(step, N.StreamSourceV3):
        return N.StreamSourceV4(**{f.name: getattr(step, f.name) for f in dataclasses.fields(step)})
    return dataclasses.replace(step, **{name: _as_v4(child) for name, child in step.inputs().items()})


def _run(engine: KsqlEngine) -> tuple[list[tuple[object, object]], str]:
    for record in RECORDS:
        engine.store.append(record)
    out = engine.run()["OUT"]
    (report,) = engine.query_reports.values()
    return [(r.key, r.value) for r in out], normalise_physical_plan(report.physical_plan)


def test_the_bounded_runtime_builds_v4_exactly_as_v3(spark, monkeypatch: pytest.MonkeyPatch) -> None:
    v4 = _engine(STATELESS)
    assert "streamSourceV4" in {s.TYPE for s in walk_steps(v4.query_order()[0].root)}
    got = _run(v4)
    monkeypatch.setattr(physical, "_in_partition_order", lambda step: step)
    v3 = _engine(STATELESS)
    assert "streamSourceV3" in {s.TYPE for s in walk_steps(v3.query_order()[0].root)}
    assert got == _run(v3)
    assert got[0][0] == (2, {"N": "N2", "W": 4})


def test_a_v4_source_under_a_stateful_step_is_refused_before_anything_is_built(spark) -> None:
    engine = _engine(GROUPED)
    (query,) = engine.query_order()
    root = _as_v4(query.root)
    with pytest.raises(PlanError, match=(
        r"Step KsqlTopic/Source \(streamSourceV4\) feeds step Aggregate/GroupBy \(streamGroupByV2\), which needs "
        r"its records in input order across partitions: plan streamSourceV3 for this query\."
    )):
        build(root, BuildContext(runtime=engine.runtime(), query_id=query.query_id))


def test_on_kafka_v4_reads_without_a_python_pass_and_v3_with_one(spark) -> None:
    v4 = streaming_plans(_engine(STATELESS))
    v3 = streaming_plans(_engine(GROUPED))
    (v4_plan,) = v4.values()
    (v3_plan,) = v3.values()
    assert "MapInArrow" not in v4_plan and "Sequence_" not in v4_plan
    assert "Sequence_" in v3_plan
