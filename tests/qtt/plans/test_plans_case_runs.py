"""A case's QTT run stands for the replay of its latest planned case, as strictly (Spark)."""

from __future__ import annotations

import json
import shutil
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from engine.builders.context import BuildContext, Built
from engine.builders.stateless import build_stream_select
from engine.builders.walker import BUILDERS
from engine.plan import types as T
from engine.plan.schema import LogicalSchema
from engine.plan.steps import StreamSelect
from qtt.loader import load_file
from qtt.model import QttCase
from qtt.plans.case_runs import CaseRunCapture, CaseRuns
from qtt.plans.diff import BUILT_SCHEMA, SINK_SCHEMA
from qtt.plans.layout import latest_version
from qtt.plans.record import record_case, write_planned_case
from qtt.plans.replay import ReplayResult
from qtt.plans.uptodate import check_up_to_date
from qtt.plans.verify import verify
from qtt.runner import Status, run_case

pytest_plugins = ["pytester"]

CASES = {
    "tests": [
        {
            "name": "big orders",
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
    """The case file and its planned case, recorded once on Spark."""
    base = tmp_path_factory.mktemp("case-runs")
    cases = base / "cases" / "orders.json"
    cases.parent.mkdir()
    cases.write_text(json.dumps(CASES), encoding="utf-8")
    (case,) = load_file(cases).cases
    write_planned_case(base / "planned_cases", record_case(case))
    return cases.parent, base / "planned_cases"


def the_case(cases: Path) -> QttCase:
    (case,) = load_file(cases / "orders.json").cases
    return case


def run_captured(case: QttCase, root: Path) -> tuple[Status, ReplayResult | None, CaseRuns]:
    """Run ``case`` as the plugin does when verify asks for its runs."""
    capture = CaseRunCapture(case, root)
    result = run_case(case, strict=True, engine_factory=capture.engine_factory)
    runs = CaseRuns()
    runs.add(check_up_to_date(case, root), capture.result())
    return result.status, capture.result(), runs


def test_the_run_of_an_up_to_date_case_stands_for_the_replay_of_its_latest_version(
    recorded: tuple[Path, Path],
) -> None:
    cases, root = recorded
    status, result, runs = run_captured(the_case(cases), root)
    assert status is Status.PASSED
    assert result is not None and result.ok and result.by_case_run, result
    assert result.version == latest_version(root / result.version.slug)
    report = verify(
        root, [cases], schema_path=None, steps_complete=False,
        known_replays=runs.replays, known_up_to_date=runs.up_to_date,
    )
    assert report.ok, report.render()
    assert report.replays == [result]
    assert "0 versions replayed" in report.summary()
    assert "1 checked by their case's QTT run" in report.summary()
    assert report.to_json()["replays"][0]["checkedByCaseRun"] is True


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


def test_a_changed_builder_that_the_outputs_do_not_show_still_fails_verify(
    recorded: tuple[Path, Path], select_widens_twice: None
) -> None:
    cases, root = recorded
    status, result, runs = run_captured(the_case(cases), root)
    assert status is Status.PASSED  # the QTT case alone does not see the change
    assert result is not None and not result.ok
    wheres = {(c.area, c.where()) for c in result.changes}
    assert (BUILT_SCHEMA, "CSAS_BIG_0 / Project / value column `TWICE`") in wheres
    assert (SINK_SCHEMA, "CSAS_BIG_0 / KsqlTopic/Sink / value column `TWICE`") in wheres
    report = verify(
        root, [cases], schema_path=None, steps_complete=False,
        known_replays=runs.replays, known_up_to_date=runs.up_to_date,
    )
    assert not report.ok and report.failed_replays == [result]
    assert "CSAS_BIG_0 / Project / value column `TWICE`" in report.render()


def test_a_case_that_differs_from_its_saved_test_case_is_replayed_by_verify(
    recorded: tuple[Path, Path],
) -> None:
    cases, root = recorded
    case = the_case(cases)
    fewer = replace(case, inputs=case.inputs[1:])  # same plan and outputs, one input less
    status, result, runs = run_captured(fewer, root)
    assert status is Status.PASSED and result is None
    assert not runs.replays and list(runs.up_to_date) == [case.id]
    report = verify(
        root, [cases], schema_path=None, steps_complete=False,
        known_replays=runs.replays, known_up_to_date=runs.up_to_date,
    )
    assert report.ok, report.render()
    assert "1 versions replayed" in report.summary() and "QTT run" not in report.summary()


def test_the_plugin_runs_a_test_asking_for_the_case_runs_after_the_qtt_cases_and_before_the_rest(
    recorded: tuple[Path, Path], pytester: pytest.Pytester
) -> None:
    cases, root = recorded
    shutil.copytree(cases, pytester.path / "cases")
    shutil.copytree(root, pytester.path / "planned_cases")
    pytester.makeini("[pytest]\nqtt_paths = cases\n")
    checks = pytester.mkdir("a_checks")  # collected before cases/
    (checks / "test_after.py").write_text(
        textwrap.dedent(
            """
            def test_early():
                pass

            def test_sees_every_case_run(qtt_case_runs):
                assert list(qtt_case_runs.up_to_date) == ["orders - big orders"]
                (result,) = qtt_case_runs.replays.values()
                assert result.ok and result.by_case_run
            """
        ),
        encoding="utf-8",
    )
    run = pytester.runpytest_inprocess("-v", "-p", "no:randomly")
    run.assert_outcomes(passed=3)
    lines = [line for line in run.outlines if " PASSED" in line]
    # The long test that uses the runs starts before the other tests, so that pytest-xdist,
    # which hands out test files in this order, runs it alongside them.
    assert [line.split(" PASSED")[0].rsplit("::", 1)[-1] for line in lines] == [
        "orders - big orders",
        "test_sees_every_case_run",
        "test_early",
    ]


def test_without_qtt_cases_in_the_session_the_case_runs_are_empty(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        """
        def test_empty(qtt_case_runs):
            assert not qtt_case_runs.replays and not qtt_case_runs.up_to_date
        """
    )
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)


def test_a_run_stands_for_a_replay_only_with_the_replays_topic_partitions(recorded: tuple[Path, Path]) -> None:
    """The QTT runner makes a topic a CREATE statement names with 4 partitions, as ksqlDB's
    runner does; a planned case's replay with 1: a captured run uses the replay's layout,
    and one with any other layout does not stand for the replay."""
    from engine.data.records import TopicInfo
    from qtt.plans.case_runs import _same_topics

    cases, root = recorded
    case = the_case(cases)

    class _Engine:
        def __init__(self, partitions: int) -> None:
            self.partitions = partitions

        def topics(self) -> dict[str, TopicInfo]:
            return {name: TopicInfo(name, partitions=self.partitions) for name in ("orders", "BIG")}

    assert _same_topics(_Engine(1), case) and not _same_topics(_Engine(4), case)
    capture = CaseRunCapture(case, root)
    assert getattr(capture.engine_factory({}), "statement_topic_partitions", None) == 1
