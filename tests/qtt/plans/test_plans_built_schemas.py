"""Replay compares every step's built schema with the saved one, and never dies (Spark)."""

from __future__ import annotations

import itertools
import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.builders.context import BuildContext, Built
from engine.builders.stateless import build_stream_select
from engine.builders.walker import BUILDERS
from engine.plan import types as T
from engine.plan.schema import LogicalSchema
from engine.plan.steps import StreamSelect
from engine.runtime.session import get_spark
from qtt.loader import load_file
from qtt.plans import codec
from qtt.plans.diff import BUILT_SCHEMA, ERROR, SINK_SCHEMA
from qtt.plans.layout import SPEC_FILE, saved_versions, version_dir_name
from qtt.plans.record import STEPS_KEY, record_case, write_planned_case
from qtt.plans.replay import REPLAY_WORKERS_ENV, replay
from qtt.plans.uptodate import CURRENT, INCOMPLETE, check_up_to_date
from qtt.plans.verify import verify

CASES = {
    "tests": [
        {
            "name": "doubled big orders and a count per item",
            # The Python step versions: the tests below change their builders.
            "properties": {"kspark.native.steps": "false"},
            "statements": [
                "CREATE STREAM ORDERS (ID INT KEY, ITEM STRING, AMOUNT INT) "
                "WITH (kafka_topic='orders', value_format='JSON');",
                "CREATE STREAM BIG AS SELECT ID, UCASE(ITEM) AS ITEM, AMOUNT * 2 AS TWICE "
                "FROM ORDERS WHERE AMOUNT > 10;",
                "CREATE TABLE PER_ITEM AS SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM;",
            ],
            "inputs": [
                {"topic": "orders", "key": 1, "value": {"ITEM": "pen", "AMOUNT": 5}},
                {"topic": "orders", "key": 2, "value": {"ITEM": "desk", "AMOUNT": 40}},
            ],
            "outputs": [
                {"topic": "BIG", "key": 2, "value": {"ITEM": "DESK", "TWICE": 80}},
                {"topic": "PER_ITEM", "key": "pen", "value": {"N": 1}},
                {"topic": "PER_ITEM", "key": "desk", "value": {"N": 1}},
            ],
        }
    ]
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The case file and its planned case, recorded once on Spark."""
    base = tmp_path_factory.mktemp("built")
    cases = base / "cases" / "orders.json"
    cases.parent.mkdir()
    cases.write_text(json.dumps(CASES), encoding="utf-8")
    (case,) = load_file(cases).cases
    write_planned_case(base / "planned_cases", record_case(case))
    return cases.parent, base / "planned_cases"


@pytest.fixture
def workspace(recorded: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    cases, root = recorded
    shutil.copytree(cases, tmp_path / "cases")
    shutil.copytree(root, tmp_path / "planned_cases")
    return tmp_path / "cases", tmp_path / "planned_cases"


def version_path(root: Path) -> Path:
    (case_dir,) = [p for p in root.iterdir() if p.is_dir()]
    return saved_versions(case_dir)[-1].path


def saved_steps(root: Path) -> dict[str, list[dict[str, Any]]]:
    steps: dict[str, list[dict[str, Any]]] = codec.read_json(version_path(root) / SPEC_FILE)[
        "schemas"
    ][STEPS_KEY]
    return steps


@pytest.fixture
def select_widens_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """streamSelectV1's builder now says TWICE is a BIGINT (its values stay the same)."""

    def widened(step: StreamSelect, *, source: Built, ctx: BuildContext) -> Built:
        built = build_stream_select(step, source=source, ctx=ctx)
        columns = tuple(
            replace(c, type=T.BIGINT) if c.name == "TWICE" else c for c in built.schema.columns
        )
        return replace(built, schema=LogicalSchema(columns))

    monkeypatch.setitem(BUILDERS, StreamSelect.TYPE, widened)


def test_recording_saves_every_steps_columns_types_and_internal_schemas(
    recorded: tuple[Path, Path],
) -> None:
    steps = saved_steps(recorded[1])
    assert sorted(steps) == ["CSAS_BIG_0", "CTAS_PER_ITEM_1"]
    big = {s["ctx"]: s for s in steps["CSAS_BIG_0"]}
    assert list(big) == ["KsqlTopic/Source", "WhereFilter", "Project", "KsqlTopic/Sink"]
    assert big["Project"]["key"] == ["`ID` INTEGER"]
    assert big["Project"]["value"] == ["`ITEM` STRING", "`TWICE` INTEGER"]
    assert big["Project"]["kind"] == "STREAM" and big["Project"]["window"] is None
    per_item = steps["CTAS_PER_ITEM_1"]
    assert per_item[-1]["kind"] == "TABLE" and per_item[-1]["value"] == ["`N` BIGINT"]
    internal = {ctx: s["internal"] for s in per_item if s["internal"] for ctx in [s["ctx"]]}
    assert "Aggregate/Aggregate" in internal
    assert all(not s["internal"] for s in steps["CSAS_BIG_0"])


def test_a_builder_that_changes_an_output_type_fails_replay_naming_query_step_and_column(
    workspace: tuple[Path, Path], select_widens_twice: None
) -> None:
    _, root = workspace
    (result,) = [replay(v) for v in saved_versions(version_path(root).parent)]
    assert not result.ok
    wheres = {(c.area, c.where(), c.old, c.new) for c in result.changes}
    assert (BUILT_SCHEMA, "CSAS_BIG_0 / Project / value column `TWICE`", "INTEGER", "BIGINT") in wheres
    assert (BUILT_SCHEMA, "CSAS_BIG_0 / KsqlTopic/Sink / value column `TWICE`", "INTEGER", "BIGINT") in wheres
    assert (SINK_SCHEMA, "CSAS_BIG_0 / KsqlTopic/Sink / value column `TWICE`", "INTEGER", "BIGINT") in wheres
    assert {c.area for c in result.changes} == {BUILT_SCHEMA, SINK_SCHEMA}  # outputs are the same
    text = result.render()
    assert "[built schema] CSAS_BIG_0 / Project / value column `TWICE`: 'INTEGER' -> 'BIGINT'" in text
    assert "against the saved schema of sink BIG" in text


def test_verify_fails_on_a_changed_output_type(
    workspace: tuple[Path, Path], select_widens_twice: None
) -> None:
    cases, root = workspace
    report = verify(root, [cases], schema_path=None, steps_complete=False)
    assert not report.ok and len(report.failed_replays) == 1
    assert "CSAS_BIG_0 / Project / value column `TWICE`" in report.render()


def test_a_version_without_step_schemas_still_fails_on_a_changed_sink_type(
    workspace: tuple[Path, Path], select_widens_twice: None
) -> None:
    # Versions recorded before per-step schemas (release 0.1.0) compare the sink only.
    cases, root = workspace
    spec_path = version_path(root) / SPEC_FILE
    spec = codec.read_json(spec_path)
    del spec["schemas"][STEPS_KEY]
    codec.write_json(spec_path, spec)
    (case,) = load_file(cases / "orders.json").cases
    assert check_up_to_date(case, root).state == INCOMPLETE
    (result,) = [replay(v) for v in saved_versions(spec_path.parent.parent)]
    assert [(c.area, c.where()) for c in result.changes] == [
        (SINK_SCHEMA, "CSAS_BIG_0 / KsqlTopic/Sink / value column `TWICE`")
    ]


def test_a_saved_step_schema_that_differs_fails_replay_without_a_builder_change(
    workspace: tuple[Path, Path],
) -> None:
    cases, root = workspace
    spec_path = version_path(root) / SPEC_FILE
    spec = codec.read_json(spec_path)
    (case,) = load_file(cases / "orders.json").cases
    assert check_up_to_date(case, root).state == CURRENT
    aggregate = next(
        s for s in spec["schemas"][STEPS_KEY]["CTAS_PER_ITEM_1"] if s["ctx"] == "Aggregate/Aggregate"
    )
    (name,) = aggregate["internal"]
    aggregate["internal"][name] += " (changed)"
    codec.write_json(spec_path, spec)
    (result,) = [replay(v) for v in saved_versions(spec_path.parent.parent)]
    assert [(c.area, c.where()) for c in result.changes] == [
        (BUILT_SCHEMA, f"CTAS_PER_ITEM_1 / Aggregate/Aggregate / internal {name}")
    ]


# ---------------------------------------------------------------------------- never dies


def test_a_spark_error_in_one_version_fails_that_version_and_the_others_still_run(
    workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cases, root = workspace
    only = version_path(root)
    version = saved_versions(only.parent)[0]
    copy = only.parent / version_dir_name(version.engine_version, version.millis - 1)
    shutil.copytree(only, copy)
    # Other inputs, so that the two versions replay on their own (the same plan and inputs
    # would be built and run once for both).
    spec = codec.read_json(copy / SPEC_FILE)
    spec["testCase"]["inputs"][1]["value"]["AMOUNT"] = 41
    spec["testCase"]["outputs"][0]["value"]["TWICE"] = 82
    codec.write_json(copy / SPEC_FILE, spec)
    calls = itertools.count()

    def fails_once(step: StreamSelect, *, source: Built, ctx: BuildContext) -> Built:
        if next(calls) == 0:  # a real py4j error from the JVM
            get_spark()._jvm.java.util.ArrayList().get(5)  # type: ignore[union-attr]
        return build_stream_select(step, source=source, ctx=ctx)

    monkeypatch.setitem(BUILDERS, StreamSelect.TYPE, fails_once)
    monkeypatch.setenv(REPLAY_WORKERS_ENV, "2")
    # the copy has the same plan, so replay it too instead of calling it covered
    report = verify(root, [cases], schema_path=None, steps_complete=False, replay_all_versions=True)
    assert len(report.replays) == 2
    (failed,) = report.failed_replays
    (change,) = failed.changes
    assert change.area == ERROR
    assert change.detail.startswith("Py4JJavaError: ")
    assert "java.lang.IndexOutOfBoundsException: Index 5 out of bounds" in change.detail
    assert len(change.detail.splitlines()) <= 6  # the head and the root cause, not the stack
    text = report.render()
    assert f"[{ERROR}]" in text and "2 versions replayed (1 failed" in text


def test_any_exception_in_a_builder_is_the_versions_failure(
    workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, root = workspace

    def broken(step: StreamSelect, *, source: Built, ctx: BuildContext) -> Built:
        raise ZeroDivisionError("the select builder divided by zero")

    monkeypatch.setitem(BUILDERS, StreamSelect.TYPE, broken)
    (result,) = [replay(v) for v in saved_versions(version_path(root).parent)]
    (change,) = result.changes
    assert change.area == ERROR
    assert change.detail.splitlines()[0] == "ZeroDivisionError: the select builder divided by zero"


def test_an_exception_in_the_up_to_date_check_is_that_cases_failure_and_the_report_is_written(
    workspace: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cases, root = workspace

    def broken(case: Any, root: Path) -> Any:
        raise RuntimeError("planner crashed")

    monkeypatch.setattr("qtt.plans.verify.check_up_to_date", broken)
    report = verify(root, [cases], schema_path=None, steps_complete=False)
    assert len(report.replays) == 1 and report.replays[0].ok
    (stale,) = report.stale
    assert stale.changes[0].area == ERROR
    assert "RuntimeError: planner crashed" in report.render()
