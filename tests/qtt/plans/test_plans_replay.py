"""Replay, up-to-date and verify on the real engine (Spark), on planned cases in tmp_path."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from engine.builders.context import Built
from engine.builders.stateless import build_stream_select
from engine.builders.walker import BUILDERS, builds
from engine.facade.engine import KsqlEngine
from engine.plan import steps as S
from engine.plan.steps import STEP_TYPES, register_step, step_dataclass
from qtt.loader import load_file
from qtt.plans import codec
from qtt.plans.layout import PLAN_FILE, SPEC_FILE, case_slug, saved_versions
from qtt.plans.record import record_case, write_planned_case
from qtt.plans.replay import replay, replay_all
from qtt.plans.schema import write_schema
from qtt.plans.uptodate import CURRENT, MISSING, STALE, check_up_to_date
from qtt.plans.verify import verify

CASES = {
    "tests": [
        {
            "name": "big orders keep their amount doubled",
            # The Python step versions: the guard tests below switch and change their builders.
            "properties": {"kspark.native.steps": "false"},
            "statements": [
                "CREATE STREAM ORDERS (ID INT KEY, ITEM STRING, AMOUNT INT) "
                "WITH (kafka_topic='orders', value_format='JSON');",
                "CREATE STREAM BIG AS SELECT ID, UCASE(ITEM) AS ITEM, AMOUNT * 2 AS TWICE "
                "FROM ORDERS WHERE AMOUNT > 10;",
            ],
            "inputs": [
                {"topic": "orders", "key": 1, "value": {"ITEM": "pen", "AMOUNT": 5}},
                {"topic": "orders", "key": 2, "value": {"ITEM": "desk", "AMOUNT": 40}},
            ],
            "outputs": [{"topic": "BIG", "key": 2, "value": {"ITEM": "DESK", "TWICE": 80}}],
        }
    ]
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A QTT file with one case and its planned cases, recorded once on Spark."""
    base = tmp_path_factory.mktemp("recorded")
    cases = base / "cases" / "orders.json"
    cases.parent.mkdir()
    cases.write_text(json.dumps(CASES), encoding="utf-8")
    root = base / "planned_cases"
    (case,) = load_file(cases).cases
    write_planned_case(root, record_case(case))
    return cases, root


@pytest.fixture
def workspace(recorded: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the recorded case file and planned cases."""
    cases, root = recorded
    shutil.copytree(cases.parent, tmp_path / "cases")
    shutil.copytree(root, tmp_path / "planned_cases")
    return tmp_path / "cases", tmp_path / "planned_cases"


@pytest.fixture
def schema(tmp_path: Path) -> Path:
    """The plan schema generated from the registries as they are now."""
    return write_schema(tmp_path / "plan.schema.json")


def only_version(root: Path) -> Path:
    (case_dir,) = [p for p in root.iterdir() if p.is_dir()]
    (version,) = saved_versions(case_dir)
    return version.path


def test_verify_passes_on_freshly_recorded_planned_cases(
    workspace: tuple[Path, Path], schema: Path
) -> None:
    cases, root = workspace
    report = verify(root, [cases], schema_path=schema, steps_complete=False)
    assert report.ok, report.render()
    assert len(report.replays) == 1 and report.up_to_date[0].state == CURRENT


def test_verify_fails_when_an_expected_output_in_a_saved_spec_is_altered(
    workspace: tuple[Path, Path], schema: Path
) -> None:
    cases, root = workspace
    spec_path = only_version(root) / SPEC_FILE
    spec = codec.read_json(spec_path)
    spec["testCase"]["outputs"][0]["value"]["TWICE"] = 81
    codec.write_json(spec_path, spec)
    report = verify(root, [cases], schema_path=schema, steps_complete=False)
    assert not report.ok
    (failed,) = report.failed_replays
    assert [c.area for c in failed.changes] == ["output records"]
    assert "TWICE" in failed.render() and "topic BIG" in failed.render()


def _older_copy(version: Path, name: str) -> Path:
    """A copy of ``version`` saved under an older version name, without its per-step schemas."""
    older = version.parent / name
    shutil.copytree(version, older)
    spec = codec.read_json(older / SPEC_FILE)
    spec.get("schemas", {}).pop("steps", None)
    codec.write_json(older / SPEC_FILE, spec)
    return older


def test_verify_does_not_replay_an_older_version_that_the_newer_one_covers(
    workspace: tuple[Path, Path], schema: Path
) -> None:
    cases, root = workspace
    latest = only_version(root)
    _older_copy(latest, "0.0.1_0000000000001")
    report = verify(root, [cases], schema_path=schema, steps_complete=False)
    assert report.ok, report.render()
    older, newer = report.replays
    assert older.covered_by is not None and older.covered_by.path == latest
    assert newer.covered_by is None and newer.seconds > 0
    assert "1 versions replayed" in report.summary() and "1 covered" in report.summary()
    everything = verify(root, [cases], schema_path=schema, steps_complete=False,
                        replay_all_versions=True)
    assert [r.covered_by for r in everything.replays] == [None, None]


def test_verify_replays_and_fails_an_older_version_whose_saved_outputs_differ(
    workspace: tuple[Path, Path], schema: Path
) -> None:
    cases, root = workspace
    older = _older_copy(only_version(root), "0.0.1_0000000000001")
    spec = codec.read_json(older / SPEC_FILE)
    spec["testCase"]["outputs"][0]["value"]["TWICE"] = 81
    codec.write_json(older / SPEC_FILE, spec)
    report = verify(root, [cases], schema_path=schema, steps_complete=False)
    (failed,) = report.failed_replays
    assert failed.version.path == older and failed.covered_by is None


def test_verify_fails_when_the_latest_saved_version_is_removed(
    workspace: tuple[Path, Path], schema: Path
) -> None:
    cases, root = workspace
    shutil.rmtree(only_version(root))
    report = verify(root, [cases], schema_path=schema, steps_complete=False)
    assert not report.ok
    (stale,) = report.stale
    assert stale.state == MISSING
    assert "qtt plans regenerate --filter" in report.render()


def test_verify_fails_when_a_field_of_a_saved_plan_is_removed(
    workspace: tuple[Path, Path], schema: Path
) -> None:
    cases, root = workspace
    plan_path = only_version(root) / PLAN_FILE
    plan = codec.read_json(plan_path)
    del plan["plans"][1]["query"]["root"]["source"]["keyColumnNames"]
    codec.write_json(plan_path, plan)
    report = verify(root, [cases], schema_path=schema, steps_complete=False)
    assert not report.ok
    (failed,) = report.failed_replays
    assert failed.changes[0].area == "load" and "keyColumnNames" in failed.render()
    assert any("keyColumnNames" in p for p in report.schema_problems)
    assert report.stale and "keyColumnNames" in report.stale[0].render()


def test_replay_reports_a_changed_physical_plan_by_step(workspace: tuple[Path, Path]) -> None:
    _, root = workspace
    version = only_version(root)
    (physical,) = (version / "physical_plans").glob("*.txt")
    physical.write_text(physical.read_text().replace("WhereFilter", "Filter"), encoding="utf-8")
    (result,) = [replay(v) for v in saved_versions(version.parent)]
    assert [c.area for c in result.changes] == ["physical plan"]
    assert "WhereFilter" in (result.changes[0].ctx or "")


def _counting_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the engine runs from here on."""
    runs: list[int] = []
    real = KsqlEngine.run

    def counted(self: KsqlEngine, *args: object, **kwargs: object) -> object:
        runs.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(KsqlEngine, "run", counted)
    return runs


@pytest.mark.parametrize("workers", [1, 2])
def test_versions_with_the_same_plan_and_inputs_run_once_and_each_meets_its_own_copies(
    workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    _, root = workspace
    latest = only_version(root)
    older = latest.parent / "0.0.1_0000000000001"
    shutil.copytree(latest, older)
    (physical,) = (older / "physical_plans").glob("*.txt")
    physical.write_text(physical.read_text().replace("WhereFilter", "Filter"), encoding="utf-8")
    runs = _counting_runs(monkeypatch)
    first, second = replay_all(saved_versions(latest.parent), workers)
    assert len(runs) == 1
    assert (first.version.path, second.version.path) == (older, latest)
    assert [c.area for c in first.changes] == ["physical plan"]
    assert second.ok, second.render()


def test_versions_with_other_inputs_run_each_on_their_own(
    workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, root = workspace
    latest = only_version(root)
    older = latest.parent / "0.0.1_0000000000001"
    shutil.copytree(latest, older)
    spec = codec.read_json(older / SPEC_FILE)
    spec["testCase"]["inputs"][1]["value"]["AMOUNT"] = 41
    spec["testCase"]["outputs"][0]["value"]["TWICE"] = 82
    codec.write_json(older / SPEC_FILE, spec)
    runs = _counting_runs(monkeypatch)
    results = replay_all(saved_versions(latest.parent), 1)
    first = next(results)  # one at a time, each result as soon as it is known (progress)
    assert len(runs) == 1
    second = next(results)
    assert len(runs) == 2
    assert first.ok and second.ok, [first.render(), second.render()]


def _add_orphan(root: Path) -> None:
    """A copy of the one case's folder under a slug no current case has: ``gone_case``."""
    shutil.copytree(
        root / case_slug("orders - big orders keep their amount doubled"), root / "gone_case"
    )


def test_verify_reports_orphans_and_fails_unless_allowed(
    workspace: tuple[Path, Path], schema: Path
) -> None:
    cases, root = workspace
    _add_orphan(root)
    report = verify(root, [cases], schema_path=schema, steps_complete=False)
    assert report.orphans == ["gone_case"] and not report.ok
    assert verify(root, [cases], schema_path=schema, steps_complete=False, allow_orphans=True).ok


def test_two_shards_replay_every_version_once_and_shard_one_alone_checks_the_tree(
    workspace: tuple[Path, Path], schema: Path
) -> None:
    cases, root = workspace
    _add_orphan(root)
    one, two = (
        verify(root, [cases], schema_path=schema, steps_complete=True, shard=(k, 2))
        for k in (1, 2)
    )
    replayed = [r.version.path for r in one.replays + two.replays]
    assert sorted(replayed) == sorted(v.path for d in root.iterdir() if d.is_dir()
                                      for v in saved_versions(d))
    assert len(one.replays) == len(two.replays) == 1
    assert one.orphans == ["gone_case"] and one.completeness is not None
    assert two.orphans == [] and two.completeness is None and two.schema_changes == []
    assert two.ok, two.render()
    assert "(shard 2/2)" in two.summary()
    assert len(one.up_to_date) + len(two.up_to_date) == 1  # the one current case, once


# ---------------------------------------------------------------------------- the guard


@register_step
@step_dataclass
class MaterializingStreamSelect(S.Step):
    """Test-only: a newer stream projection version that keeps a state store."""

    TYPE = "testStreamSelectV2"
    source: S.Step
    key_column_names: tuple[str, ...]
    select_expressions: tuple[S.SelectExpression, ...]


# Registered only while the guard test runs (see the fixture below).
del STEP_TYPES[MaterializingStreamSelect.TYPE]


@pytest.fixture
def planner_switched_to_new_step(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Register the new step version and its builder, and make the planner use it."""
    STEP_TYPES[MaterializingStreamSelect.TYPE] = MaterializingStreamSelect

    @builds(MaterializingStreamSelect)
    def build_materializing_select(step, *, source: Built, ctx) -> Built:  # type: ignore[no-untyped-def]
        built = build_stream_select(step, source=source, ctx=ctx)
        store = (f"{ctx.query_id}-{step.ctx}-Materialize", f"KEY {built.schema.key} VALUE JSON")
        return replace(built, internal_schemas=built.internal_schemas + (store,))

    monkeypatch.setattr(S, "StreamSelect", MaterializingStreamSelect)
    try:
        yield
    finally:
        del STEP_TYPES[MaterializingStreamSelect.TYPE]
        del BUILDERS[MaterializingStreamSelect.TYPE]


def test_old_planned_cases_keep_old_behaviour_when_the_planner_switches_step_version(
    workspace: tuple[Path, Path], planner_switched_to_new_step: None
) -> None:
    # Stateless analogue of GROUP BY over a stream already keyed by the grouping column
    # (the planner stops repartitioning); the GROUP BY version should follow once
    # aggregation steps exist.
    cases, root = workspace
    (case,) = load_file(cases / "orders.json").cases
    old = only_version(root)

    stale = check_up_to_date(case, root)
    assert stale.state == STALE
    (change,) = [c for c in stale.changes if c.field == "@type"]
    assert (change.ctx, change.old, change.new) == (
        "Project",
        "streamSelectV1",
        "testStreamSelectV2",
    )
    assert "qtt plans regenerate --filter" in stale.render()

    old_replay = replay(saved_versions(old.parent)[0])
    assert old_replay.ok, old_replay.render()  # built from the saved V1 plan: no state store

    new = write_planned_case(
        root, record_case(case), millis=saved_versions(old.parent)[0].millis + 1
    )
    assert check_up_to_date(case, root).state == CURRENT
    new_schemas = codec.read_json(new / SPEC_FILE)["schemas"]["internal"]
    old_schemas = codec.read_json(old / SPEC_FILE)["schemas"]["internal"]
    assert old_schemas == {"CSAS_BIG_0": {}}
    assert list(new_schemas["CSAS_BIG_0"]) == ["CSAS_BIG_0-Project-Materialize"]
    assert all(replay(v).ok for v in saved_versions(old.parent))


def test_replay_bench_counts_versions_and_shared_runs_and_times_the_floor(
    workspace: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from benchmarks.replay_bench import main

    _, root = workspace
    latest = only_version(root)
    shutil.copytree(latest, latest.parent / "0.0.1_0000000000001")
    assert main([str(root), "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 planned-case versions replayed in " in out
    assert "(0 failed; 1 builds and runs, " in out and ", 1 at a time)" in out
    assert re.search(r"collect\) on this session, 1 at a time: \d+\.\d\d jobs/s", out), out


def test_versions_saved_before_whole_post_topic_formats_are_checked_as_they_were_recorded(tmp_path: Path) -> None:
    from qtt.loader import expand_case
    from qtt.plans.replay import with_post_topic_formats_as_recorded

    raw = {"name": "c", "statements": ["X;"], "inputs": [], "post": {"topics": {"topics": [
        {"name": "t", "keyFormat": {"format": "AVRO"},
         "valueFormat": {"format": "PROTOBUF", "properties": {"nullableRepresentation": "optional"},
                         "features": []}}]}}}
    [case] = expand_case(raw, tmp_path / "f.json", 0)
    old = with_post_topic_formats_as_recorded(case, raw, "0.7.0")
    [topic] = old.post.topics
    assert topic.key_format is not None and topic.value_format is not None
    assert (topic.key_format.whole, topic.key_format.features) == (False, None)  # features not listed
    assert (topic.value_format.whole, topic.value_format.features) == (False, ())
    assert topic.value_format.properties == {"nullableRepresentation": "optional"}
    assert with_post_topic_formats_as_recorded(case, raw, "0.12.0") is case  # recorded whole
