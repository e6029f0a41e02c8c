"""The conformance benchmark times each phase without changing what a case runs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.conformance import PhaseTimes, TimedEngine, main


def test_settings_made_on_the_timed_engine_reach_the_engine() -> None:
    inner = SimpleNamespace(service_id="default_", schema_registry_url=None)
    timed = TimedEngine(inner, PhaseTimes())
    timed.service_id = "some.ksql.service.id"
    timed.schema_registry_url = "mock://case"
    assert inner.service_id == "some.ksql.service.id"
    assert inner.schema_registry_url == "mock://case"
    assert timed.service_id == "some.ksql.service.id"


def test_each_phase_adds_its_time_and_the_queries_run() -> None:
    class Engine:
        queries = {"CSAS_S_0": object()}

        def execute_sql(self, text: str) -> list[str]:
            return [text]

        def run(self) -> dict[str, list[object]]:
            return {}

    times = PhaseTimes()
    timed = TimedEngine(Engine(), times)
    assert timed.execute_sql("SELECT 1;") == ["SELECT 1;"]
    assert timed.run() == {}
    assert times.statements > 0 and times.run > 0
    assert (times.queries, times.cases_with_queries) == (1, 1)


def test_the_benchmark_reports_its_figures_with_the_floor_measured_in_the_same_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = {
        "name": "upper names",
        "statements": [
            "CREATE STREAM S (ID INT KEY, NAME STRING) WITH (kafka_topic='s', value_format='JSON');",
            "CREATE STREAM U AS SELECT ID, UCASE(NAME) AS NAME FROM S;",
        ],
        "inputs": [{"topic": "s", "key": 1, "value": {"NAME": "a"}}],
        "outputs": [{"topic": "U", "key": 1, "value": {"NAME": "A"}}],
    }
    cases = tmp_path / "upper.json"
    cases.write_text(json.dumps({"tests": [case]}), encoding="utf-8")
    report = tmp_path / "benchmark.json"
    assert main([str(cases), "--workers", "1", "--report", str(report)]) == 0
    written = json.loads(report.read_text())
    assert written["benchmark"] == "benchmark" and written["checks"]
    assert written["figures"]["seconds_per_query"]["ratio"] is not None
    figures = written["details"]
    assert (figures["cases"], figures["passed"], figures["queries_run"]) == (1, 1, 1)
    assert figures["floor_jobs_per_second"] > 0
    out = capsys.readouterr().out
    assert f"1 at a time: {figures['floor_jobs_per_second']:.2f} jobs/s" in out


def test_the_benchmark_times_the_engines_qtt_conformance_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Cases run on the interpreted session, as ``qtt conformance`` runs them."""
    from benchmarks import conformance as benchmark
    from engine.runtime.session import interpreted_session

    sessions: list[object] = []
    real = benchmark.interpreted_engine_factory

    def factory(properties: object) -> object:
        engine = real(properties)  # type: ignore[arg-type]
        sessions.append(engine.runtime().spark)
        return engine

    monkeypatch.setattr(benchmark, "interpreted_engine_factory", factory)
    case = {
        "name": "a projection",
        "statements": [
            "CREATE STREAM S (ID INT KEY, V INT) WITH (kafka_topic='s', value_format='JSON');",
            "CREATE STREAM D AS SELECT ID, V * 2 AS W FROM S;",
        ],
        "inputs": [{"topic": "s", "key": 1, "value": {"V": 2}}],
        "outputs": [{"topic": "D", "key": 1, "value": {"W": 4}}],
    }
    cases = tmp_path / "double.json"
    cases.write_text(json.dumps({"tests": [case]}), encoding="utf-8")
    assert main([str(cases), "--workers", "1", "--report", str(tmp_path / "report.json")]) == 0
    assert sessions and all(s is interpreted_session() for s in sessions)
