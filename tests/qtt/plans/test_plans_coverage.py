"""Which saved versions a newer version of the same case proves (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from qtt.plans.coverage import covering_versions, covers, is_subset
from qtt.plans.layout import parse_version_dir

PLAN = {"plans": [{"steps": ["streamSourceV1", "streamSelectV1"]}]}
SPEC = {"inputs": [{"key": 1, "value": {"A": 1}}], "outputs": [{"key": 1, "value": {"A": 2}}]}


def _write(root: Path, name: str, plan: Any, spec: Any, physical: str = "Project [A]\n",
           streaming: str | None = None) -> Any:
    folder = root / "case" / name
    (folder / "physical_plans").mkdir(parents=True)
    (folder / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    (folder / "physical_plans" / "Q.txt").write_text(physical, encoding="utf-8")
    if streaming is not None:
        (folder / "streaming_plans").mkdir()
        (folder / "streaming_plans" / "Q.txt").write_text(streaming, encoding="utf-8")
    version = parse_version_dir(folder)
    assert version is not None
    return version


def test_a_dict_with_fewer_keys_is_a_subset_but_a_changed_value_is_not() -> None:
    assert is_subset({"a": 1}, {"a": 1, "b": 2})
    assert is_subset({"a": [{"x": 1}]}, {"a": [{"x": 1, "y": 2}]})
    assert not is_subset({"a": 1}, {"a": 2})
    assert not is_subset({"a": 1, "c": 3}, {"a": 1})
    assert not is_subset([1, 2], [1, 2, 3])
    assert not is_subset({"a": 1}, {"a": 1.0})  # 1 and 1.0 are different saved values
    assert not is_subset({"a": True}, {"a": 1})


@given(st.recursive(st.none() | st.integers() | st.text(max_size=3),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=2), inner, max_size=3), max_leaves=10))
def test_every_json_value_is_a_subset_of_itself(value: Any) -> None:
    assert is_subset(value, value)


def test_a_newer_version_that_only_adds_recorded_artefacts_covers_the_older(tmp_path: Path) -> None:
    older = _write(tmp_path, "0.1.0_1000000000000", PLAN, SPEC)
    newer = _write(tmp_path, "0.2.0_2000000000000", PLAN, {**SPEC, "schemas": {"steps": {}}},
                   streaming="Stateful []\n")
    assert covers(newer, older)
    assert not covers(older, newer)
    assert covering_versions([older, newer]) == {older: newer}


def test_a_changed_plan_output_or_physical_plan_is_not_covered(tmp_path: Path) -> None:
    older = _write(tmp_path, "0.1.0_1000000000000", PLAN, SPEC)
    other_plan = _write(tmp_path, "0.2.0_2000000000000", {"plans": [{"steps": ["streamSelectV2"]}]}, SPEC)
    other_output = _write(tmp_path, "0.2.0_3000000000000", PLAN,
                          {**SPEC, "outputs": [{"key": 1, "value": {"A": 3}}]})
    other_physical = _write(tmp_path, "0.2.0_4000000000000", PLAN, SPEC, physical="Filter [A]\n")
    for newer in (other_plan, other_output, other_physical):
        assert not covers(newer, older)
    assert covering_versions([older, other_plan, other_output, other_physical]) == {}


def test_an_unreadable_version_is_never_covered(tmp_path: Path) -> None:
    older = _write(tmp_path, "0.1.0_1000000000000", PLAN, SPEC)
    newer = _write(tmp_path, "0.2.0_2000000000000", PLAN, SPEC)
    (older.path / "spec.json").write_text("{not json", encoding="utf-8")
    assert covering_versions([older, newer]) == {}


def test_covering_versions_are_always_replayed_ones(tmp_path: Path) -> None:
    first = _write(tmp_path, "0.1.0_1000000000000", PLAN, SPEC)
    second = _write(tmp_path, "0.2.0_2000000000000", PLAN, SPEC)
    third = _write(tmp_path, "0.3.0_3000000000000", PLAN, {**SPEC, "extra": 1})
    covered = covering_versions([first, second, third])
    assert covered == {first: third, second: third}
    assert third not in covered
