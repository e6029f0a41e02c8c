from __future__ import annotations

import json
import textwrap
from typing import Any

import pytest

pytest_plugins = ["pytester"]

CONFTEST = textwrap.dedent(
    """
    from engine import errors
    from engine.data.records import TopicRecord

    CALLS = []


    class EchoEngine:
        def __init__(self, properties):
            self.routes = []
            self.inputs = []

        def create_topic(self, topic):
            pass

        def execute_sql(self, text):
            words = text.rstrip(";").split()
            if words[0] == "UNSUPPORTED":
                raise errors.UnsupportedFeatureError(" ".join(words[1:]))
            self.routes.append((words[1], words[3]))
            return []

        def produce(self, records):
            self.inputs.extend(records)

        def run(self):
            out = {}
            for r in self.inputs:
                for src, dst in self.routes:
                    if r.topic == src:
                        out.setdefault(dst, []).append(TopicRecord(dst, r.key, r.value))
            return out

        def close(self):
            pass


    def pytest_qtt_engine_factory(config):
        CALLS.append(config)
        return EchoEngine


    def pytest_sessionfinish(session):
        print(f"factory hook calls: {len(CALLS)}")
    """
)


def echo(name: str, value: int = 1, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "statements": ["ECHO in TO out;"],
        "inputs": [{"topic": "in", "key": "k", "value": 1}],
        "outputs": [{"topic": "out", "key": "k", "value": value}],
    }
    body.update(extra)
    return body


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nqtt_paths = cases\n")
    cases = pytester.mkdir("cases")
    (cases / "echo.json").write_text(
        json.dumps(
            {
                "tests": [
                    echo("same", format=["JSON", "AVRO"]),
                    echo("differs", value=2),
                    echo("gap", statements=["UNSUPPORTED joins"]),
                    echo("off", enabled=False),
                ]
            }
        )
    )
    (cases / "broken.json").write_text("{ not json")
    # JSON files outside qtt_paths are not QTT files.
    (pytester.path / "other.json").write_text("{}")
    return pytester


def test_each_expanded_case_is_one_item_named_by_its_id(project: pytest.Pytester) -> None:
    result = project.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(
        [
            "cases/broken.json::broken",
            "cases/echo.json::echo - same - JSON",
            "cases/echo.json::echo - same - AVRO",
            "cases/echo.json::echo - differs",
            "cases/echo.json::echo - gap",
            "cases/echo.json::echo - off",
        ]
    )
    assert "other.json" not in result.stdout.str()


def test_failures_show_the_diff_and_unsupported_cases_fail(project: pytest.Pytester) -> None:
    result = project.runpytest("-s")
    result.assert_outcomes(passed=2, failed=3, skipped=1)
    out = result.stdout.str()
    assert "Topic 'out' record 1 of 1: value expected 2 but was 1." in out
    assert "<- value" in out
    assert "UNSUPPORTED: Unsupported feature: joins." in out
    assert "QTT file cannot be loaded" in out and "Invalid JSON" in out
    assert "factory hook calls: 1" in out
    assert "qtt: 4 cases ran: 1 failed, 2 passed, 1 unsupported" in out


def test_qtt_filter_selects_cases_by_substring(project: pytest.Pytester) -> None:
    result = project.runpytest("--qtt-filter", "same")
    result.assert_outcomes(passed=2)


def test_options_live_in_one_qtt_group(project: pytest.Pytester) -> None:
    result = project.runpytest("--help")
    result.stdout.fnmatch_lines(
        ["QTT (query translation test) cases:", "*--qtt-filter=SUBSTRING*", "*qtt_paths*"]
    )


@pytest.mark.system
def test_with_pytest_xdist_the_controller_prints_the_workers_counts(project: pytest.Pytester) -> None:
    (project.path / "cases" / "more.json").write_text(json.dumps({"tests": [echo("again"), echo("wrong", value=3)]}))
    result = project.runpytest_subprocess("-n", "2", "--dist", "loadfile")
    result.assert_outcomes(passed=3, failed=4, skipped=1)
    assert "qtt: 6 cases ran: 2 failed, 3 passed, 1 unsupported" in result.stdout.str()


def test_orphans_a_worker_found_fail_the_controllers_run(pytester: pytest.Pytester) -> None:
    from types import SimpleNamespace

    from qtt import plugin

    config = pytester.parseconfigure()
    output = {"counts": {"passed": 2}, "plans": {"passed": 2, "failed": 0, "written": 0, "orphaned": 1},
              "orphans": ["gone_case"]}
    for _ in range(2):  # each worker finds the same orphan
        plugin.pytest_testnodedown(SimpleNamespace(config=config, workeroutput={"qtt": output}), None)
    state = config.stash[plugin._PLANS_KEY]
    assert state["orphans"] == ["gone_case"] and state["counts"]["orphaned"] == 1
    assert state["counts"]["passed"] == 4
    assert plugin._orphans_fail(config)
