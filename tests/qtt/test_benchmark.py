"""The conformance benchmark times each phase without changing what a case runs."""

from __future__ import annotations

from types import SimpleNamespace

from qtt.benchmark import PhaseTimes, TimedEngine


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
