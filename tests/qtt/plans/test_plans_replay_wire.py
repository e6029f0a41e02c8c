"""Replays see the topics' Kafka bytes and today's format checks (qtt.plans.wire), on Spark."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.errors import AnalysisError
from engine.serde.registry import WireSerde
from qtt.loader import load_file
from qtt.model import QttCase
from qtt.plans import wire
from qtt.plans.case_runs import CaseRunCapture
from qtt.plans.diff import ERROR, OUTPUT, SOURCE_SCHEMA
from qtt.plans.layout import latest_version
from qtt.plans.record import record_case, write_planned_case
from qtt.plans.replay import replay
from qtt.runner import Status, run_case

CASES = {
    "tests": [
        {
            "name": "priced orders written as avro",
            "statements": [
                "CREATE STREAM ORDERS (ID INT KEY, ITEM STRING, PRICE DOUBLE) "
                "WITH (kafka_topic='orders', value_format='JSON');",
                "CREATE STREAM PRICED WITH (value_format='AVRO') AS "
                "SELECT ID, ITEM, PRICE * 2 AS DOUBLED FROM ORDERS;",
            ],
            "inputs": [
                {"topic": "orders", "key": 1, "value": {"ITEM": "pen", "PRICE": 1.1}},
                {"topic": "orders", "key": 2, "value": {"ITEM": "desk", "PRICE": 40.5}},
            ],
            "outputs": [
                {"topic": "PRICED", "key": 1, "value": {"ITEM": "pen", "DOUBLED": 2.2}},
                {"topic": "PRICED", "key": 2, "value": {"ITEM": "desk", "DOUBLED": 81.0}},
            ],
        }
    ]
}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[QttCase, Path]:
    """The case and its planned cases, recorded once on Spark."""
    base = tmp_path_factory.mktemp("wire")
    cases = base / "orders.json"
    cases.write_text(json.dumps(CASES), encoding="utf-8")
    (case,) = load_file(cases).cases
    root = base / "planned_cases"
    write_planned_case(root, record_case(case))
    return case, root


def _latest(case: QttCase, root: Path) -> Any:
    (folder,) = [p for p in root.iterdir() if p.is_dir()]
    version = latest_version(folder)
    assert version is not None
    return version


def test_the_replay_of_an_avro_sink_reads_its_outputs_back_from_the_wire_format(
    recorded: tuple[QttCase, Path],
) -> None:
    case, root = recorded
    result = replay(_latest(case, root))
    assert result.ok, result.render()


def test_a_sink_serde_that_writes_a_field_wrongly_fails_the_replay(
    recorded: tuple[QttCase, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    case, root = recorded
    written = WireSerde.to_bytes

    def item_lost(self: WireSerde, data: Any) -> bytes | None:
        return written(self, {**data, "ITEM": None} if isinstance(data, dict) else data)

    monkeypatch.setattr(WireSerde, "to_bytes", item_lost)
    result = replay(_latest(case, root))
    assert not result.ok
    assert {c.area for c in result.changes} == {OUTPUT}, result.render()
    assert "ITEM" in result.render()


def test_an_input_whose_bytes_do_not_read_back_fails_the_replay(
    recorded: tuple[QttCase, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.serde.json_format import JsonSerde

    def unreadable(self: JsonSerde, data: bytes | None) -> Any:
        raise AnalysisError("unreadable")

    case, root = recorded
    monkeypatch.setattr(JsonSerde, "from_bytes", unreadable)
    result = replay(_latest(case, root))
    (change,) = result.changes
    assert change.area == ERROR
    assert "reads in QTT form but not back from the bytes its serdes write: unreadable" in change.detail


def test_a_saved_source_that_todays_format_checks_refuse_fails_the_replay(
    recorded: tuple[QttCase, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    case, root = recorded
    checked = wire.check_value_schema

    def refusing_avro(fmt: Any, columns: Any, features: Any) -> None:
        if fmt.name == "AVRO":
            raise AnalysisError("AVRO is refused now.")
        checked(fmt, columns, features)

    monkeypatch.setattr(wire, "check_value_schema", refusing_avro)
    result = replay(_latest(case, root))
    (change,) = result.changes
    assert (change.area, change.ctx) == (SOURCE_SCHEMA, "PRICED")
    assert change.detail == "today's format checks refuse the saved source: AVRO is refused now."


def test_a_case_run_whose_inputs_change_through_their_bytes_leaves_the_replay_to_verify(
    recorded: tuple[QttCase, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from qtt.plans import case_runs

    case, root = recorded
    capture = CaseRunCapture(case, root)
    assert run_case(case, strict=True, engine_factory=capture.engine_factory).status is Status.PASSED
    assert capture.result() is not None  # the trip changes none of these inputs

    def changed(engine: Any, records: Any) -> list[Any]:
        return [replace(r, value={**r.value, "ITEM": "other"}) for r in records]

    monkeypatch.setattr(case_runs, "inputs_through_bytes", changed)
    capture = CaseRunCapture(case, root)
    assert run_case(case, strict=True, engine_factory=capture.engine_factory).status is Status.PASSED
    assert capture.result() is None
