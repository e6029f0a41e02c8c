"""The classic upgrade case: COUNT(*) GROUP BY the key of a stream already keyed by it.

An older planner repartitioned by PAGEID (``streamGroupByV1``, with a repartition topic);
the current one sees the stream is already keyed by PAGEID and uses
``streamGroupByKeyV1`` (no repartition). Planned cases recorded by the old planner must
still replay with the old behaviour and the old internal schemas, while the up-to-date
check asks for a new planned case.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from engine.planner import physical as P
from engine.planner.logical_aggregate import GroupByNode
from qtt.loader import load_file
from qtt.plans import codec
from qtt.plans.layout import SPEC_FILE, saved_versions
from qtt.plans.record import record_case, write_planned_case
from qtt.plans.replay import replay
from qtt.plans.uptodate import CURRENT, STALE, check_up_to_date

CASES = {
    "tests": [
        {
            "name": "page views per page",
            # The Python (V1) grouping steps, whose repartition this upgrade story is about.
            "properties": {"kspark.native.steps": "false"},
            "statements": [
                "CREATE STREAM PAGEVIEWS (PAGEID STRING KEY, USERID STRING) "
                "WITH (kafka_topic='pageviews', value_format='JSON');",
                "CREATE TABLE PAGE_COUNTS AS SELECT PAGEID, COUNT(*) AS VIEWS FROM PAGEVIEWS GROUP BY PAGEID;",
            ],
            "inputs": [
                {"topic": "pageviews", "key": "home", "value": {"USERID": "u1"}, "timestamp": 1},
                {"topic": "pageviews", "key": "cart", "value": {"USERID": "u2"}, "timestamp": 2},
                {"topic": "pageviews", "key": "home", "value": {"USERID": "u3"}, "timestamp": 3},
            ],
            "outputs": [
                {"topic": "PAGE_COUNTS", "key": "home", "value": {"VIEWS": 1}, "timestamp": 1},
                {"topic": "PAGE_COUNTS", "key": "cart", "value": {"VIEWS": 1}, "timestamp": 2},
                {"topic": "PAGE_COUNTS", "key": "home", "value": {"VIEWS": 2}, "timestamp": 3},
            ],
        }
    ]
}


@pytest.fixture
def old_planner(monkeypatch: pytest.MonkeyPatch):
    """The planner as it was: GROUP BY always repartitions, even by the existing key."""
    current = P.RULES[GroupByNode]
    monkeypatch.setitem(
        P.RULES, GroupByNode, lambda node: current(dataclasses.replace(node, by_key=False))
    )


def _step_types(version_dir: Path) -> list[str]:
    plans = codec.read_json(version_dir / "plan.json")["plans"]
    text = json.dumps(plans)
    return sorted({t for t in ("streamGroupByV1", "streamGroupByKeyV1") if f'"{t}"' in text})


def test_old_plans_keep_repartitioning_while_new_plans_skip_it(tmp_path: Path, old_planner, monkeypatch) -> None:
    cases = tmp_path / "pageviews.json"
    cases.write_text(json.dumps(CASES), encoding="utf-8")
    root = tmp_path / "planned_cases"
    (case,) = load_file(cases).cases

    old_dir = write_planned_case(root, record_case(case))  # recorded by the old planner
    assert _step_types(old_dir) == ["streamGroupByV1"]
    old_internal = codec.read_json(old_dir / SPEC_FILE)["schemas"]["internal"]
    assert any("repartition" in name for q in old_internal.values() for name in q)

    monkeypatch.undo()  # upgrade: the current planner
    stale = check_up_to_date(case, root)
    assert stale.state == STALE
    assert any(c.old == "streamGroupByV1" and c.new == "streamGroupByKeyV1" for c in stale.changes)
    assert "qtt plans regenerate" in stale.render()

    (old_version,) = saved_versions(old_dir.parent)
    old_replay = replay(old_version)  # built from the saved plan: still repartitions
    assert old_replay.ok, old_replay.render()

    new_dir = write_planned_case(root, record_case(case), millis=old_version.millis + 1)
    assert _step_types(new_dir) == ["streamGroupByKeyV1"]
    new_internal = codec.read_json(new_dir / SPEC_FILE)["schemas"]["internal"]
    assert not any("repartition" in name for q in new_internal.values() for name in q)
    assert check_up_to_date(case, root).state == CURRENT
    assert all(replay(v).ok for v in saved_versions(old_dir.parent))
