"""Native step versions: saved plans keep their steps and replay unchanged; new plans get the newest."""

from __future__ import annotations

import re
from pathlib import Path

from engine.data.records import TopicInfo
from engine.facade.engine import KsqlEngine, topics_declared_by
from engine.plan.steps import walk_steps
from qtt.plans import codec
from qtt.plans.layout import PLAN_FILE, SPEC_FILE, saved_versions
from qtt.plans.replay import replay

ROOT = Path(__file__).resolve().parents[3] / "planned_cases"
CASE = ROOT / "filter_comparison_and_boolean_logic"


def _released(release: str):
    return next(v for v in saved_versions(CASE) if v.name.startswith(f"{release}_"))


def _released_0_2_0():
    return _released("0.2.0")


def test_a_plan_saved_before_native_steps_replays_with_its_python_builders_unchanged(spark):
    version = _released_0_2_0()
    saved_plan = (version.path / PLAN_FILE).read_text(encoding="utf-8")
    assert '"streamFilterV1"' in saved_plan and '"streamSelectV1"' in saved_plan
    result = replay(version)  # outputs, schemas and the physical plan (MapInArrow) compared
    assert result.ok, result.render()
    physical = next((version.path / "physical_plans").iterdir()).read_text(encoding="utf-8")
    assert "MapInArrow" in physical


def _planned_today(properties: dict[str, str]) -> list[str]:
    return _planned_today_in(CASE, properties)


def _planned_today_in(case: Path, properties: dict[str, str]) -> list[str]:
    spec = codec.read_json(saved_versions(case)[0].path / SPEC_FILE)
    text = "\n".join(spec["testCase"]["statements"])
    engine = KsqlEngine(properties)
    for topic, partitions in topics_declared_by(text):
        engine.create_topic(TopicInfo(topic, partitions=partitions))
    results = engine.execute_sql(text)
    query = next(r.plan.query for r in results if r.plan is not None and r.plan.query is not None)
    return [s.TYPE for s in walk_steps(query.root)]


def test_the_same_sql_planned_today_gets_the_native_versions():
    native = ["streamSourceV4", "streamFilterV2", "streamSelectV2", "streamSinkV3"]
    assert _planned_today({}) == native
    assert _planned_today({"kspark.native.steps": "true"}) == native


def test_with_the_property_off_the_planner_still_plans_the_python_versions():
    types = _planned_today({"kspark.native.steps": "false"})
    assert types == ["streamSourceV1", "streamFilterV1", "streamSelectV1", "streamSinkV1"]


def test_a_plan_saved_with_the_v2_source_and_sink_replays_with_their_builders_unchanged(spark):
    # Released 0.4.0 planned the V2 source and sink; today's planner plans V3 (above). The
    # saved version still builds with the V2 builders: its outputs, schemas and physical
    # plan (with V2's per-record fallback UDF) are compared.
    version = _released("0.4.0")
    saved_plan = (version.path / PLAN_FILE).read_text(encoding="utf-8")
    assert '"streamSourceV2"' in saved_plan and '"streamSinkV2"' in saved_plan
    assert '"streamSourceV3"' not in saved_plan
    result = replay(version)
    assert result.ok, result.render()
    physical = next((version.path / "physical_plans").iterdir()).read_text(encoding="utf-8")
    assert "ArrowEvalPython [read(" in physical  # V2's reader UDF (V3's is read_batch)


def test_a_plan_saved_with_the_v3_source_replays_with_its_python_sequencer_on_kafka(spark):
    # Released 0.5.0 planned the V3 source; today's planner plans V4 for this filter and
    # projection (above). The saved version still builds with V3: its streaming plan, with the
    # Python pass that orders the records across partitions, is compared and still equal.
    version = _released("0.5.0")
    saved_plan = (version.path / PLAN_FILE).read_text(encoding="utf-8")
    assert '"streamSourceV3"' in saved_plan and '"streamSourceV4"' not in saved_plan
    result = replay(version)
    assert result.ok, result.render()
    streaming = next((version.path / "streaming_plans").iterdir()).read_text(encoding="utf-8")
    assert "Sequence_" in streaming


def test_a_having_saved_with_streamaggregatev3_replays_with_v1s_handler_on_kafka(spark):
    # Released 0.6.0 planned streamAggregateV3, which runs a HAVING in V1's handler on Kafka;
    # 0.8.0 re-recorded the case with streamAggregateV4 (by task, HAVING in Spark). The older version
    # still builds with V3: its streaming plan, with V1's handler, is compared and still equal.
    case = ROOT / "aggregates_having_deletes_a_group_that_stops_matching_and_only_once_it_had_matched"
    older, newer = (next(v for v in saved_versions(case) if v.name.startswith(f"{r}_")) for r in ("0.6.0", "0.8.0"))
    assert '"streamAggregateV3"' in (older.path / PLAN_FILE).read_text(encoding="utf-8")
    assert '"streamAggregateV4"' in (newer.path / PLAN_FILE).read_text(encoding="utf-8")
    result = replay(older)
    assert result.ok, result.render()
    streaming = next((older.path / "streaming_plans").iterdir()).read_text(encoding="utf-8")
    assert "StreamAggregateHandler" in streaming and "RunningAggregate" not in streaming
    streaming = next((newer.path / "streaming_plans").iterdir()).read_text(encoding="utf-8")
    assert "RunningAggregateTaskProcessor (SUM; groups by ITEM; each record with its group's previous" in streaming


MATHS = ROOT / "functions_math_functions"
_FALLBACK_COLUMN = re.compile(r"__c_5f5f66616c6c6261636b5f(3[0-9])")  # __fallback_<i>, hex-named


def _python_evaluated(physical: str) -> set[int]:
    """Which select expressions (by position) a physical plan evaluates in Python."""
    return {int(bytes.fromhex(m)) for m in _FALLBACK_COLUMN.findall(physical)}


def test_a_plan_saved_with_the_level_1_compiler_replays_its_python_rounding_while_today_plans_level_2(spark):
    # Released 0.7.0 planned streamSelectV2, whose compiler (level 1) evaluates ABS(N),
    # ROUND(X), FLOOR(X), CEIL(X) and ROUND(X, 1) in Python (a MapInArrow pass before the
    # projection). The saved version replays with that builder, its physical plan unchanged;
    # the same SQL planned today gets streamSelectV3, whose compiler (level 2) runs ROUND(X),
    # FLOOR(X) and CEIL(X) in Spark.
    versions = saved_versions(MATHS)
    old = next(v for v in versions if v.name.startswith("0.7.0_"))
    assert '"streamSelectV2"' in (old.path / PLAN_FILE).read_text(encoding="utf-8")
    result = replay(old)
    assert result.ok, result.render()
    assert _python_evaluated(next((old.path / "physical_plans").iterdir()).read_text(encoding="utf-8")) == {0, 1, 2, 3, 4}

    assert _planned_today_in(MATHS, {}) == ["streamSourceV4", "streamSelectV3", "streamSinkV3"]
    latest = versions[-1]
    assert '"streamSelectV3"' in (latest.path / PLAN_FILE).read_text(encoding="utf-8")
    today = next((latest.path / "physical_plans").iterdir()).read_text(encoding="utf-8")
    assert _python_evaluated(today) == {0, 4}  # ABS of an INTEGER and ROUND(X, 1) stay in Python
    assert "FLOOR(X#" in today


def test_a_windowed_sink_saved_with_tablesinkv3_replays_unchanged_while_today_plans_v5(spark):
    # Released 0.5.0 planned tableSinkV3 for this windowed count: on Kafka the producer hashes
    # the whole windowed key. 0.11.0 re-recorded it with tableSinkV5, whose records also carry
    # the key's bytes without the window (``partitionKey``), which place them. The older
    # version still builds with V3: its streaming plan, without that column, is compared.
    case = ROOT / "windows_tumbling_windows_count_per_window_and_expose_the_window_bounds"
    older, newer = (next(v for v in saved_versions(case) if v.name.startswith(f"{r}_")) for r in ("0.5.0", "0.11.0"))
    assert '"tableSinkV3"' in (older.path / PLAN_FILE).read_text(encoding="utf-8")
    assert '"tableSinkV5"' in (newer.path / PLAN_FILE).read_text(encoding="utf-8")
    result = replay(older)
    assert result.ok, result.render()
    streaming = next((older.path / "streaming_plans").iterdir()).read_text(encoding="utf-8")
    assert "partitionKey" not in streaming
    streaming = next((newer.path / "streaming_plans").iterdir()).read_text(encoding="utf-8")
    assert "[key#e10, value#e11, timestamp#e12L, headers#e13, partitionKey#e14]" in streaming
    assert _planned_today_in(case, {})[-1] == "tableSinkV5"
