"""Cases run several at a time on the shared SparkSession judge exactly as one at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from engine.runtime.session import interpreted_session
from qtt import conformance
from qtt.conformance import case_workers, run_conformance
from qtt.loader import load_paths
from qtt.runner import default_engine_factory, interpreted_engine_factory, set_engine_factory

_STREAM = "CREATE STREAM S (ID INT KEY, ITEM STRING, PRICE INT) WITH (kafka_topic='s', value_format='JSON');"
_INPUTS = [
    {"topic": "s", "key": 1, "value": {"ITEM": "pen", "PRICE": 3}, "timestamp": 10},
    {"topic": "s", "key": 2, "value": {"ITEM": "ink", "PRICE": 7}, "timestamp": 20},
    {"topic": "s", "key": 3, "value": {"ITEM": "pen", "PRICE": 4}, "timestamp": 30},
]
_CASES = [
    {
        "name": "stateless filter passes",
        "statements": [_STREAM, "CREATE STREAM CHEAP AS SELECT ID, UCASE(ITEM) AS I FROM S WHERE PRICE < 5;"],
        "inputs": _INPUTS,
        "outputs": [
            {"topic": "CHEAP", "key": 1, "value": {"I": "PEN"}, "timestamp": 10},
            {"topic": "CHEAP", "key": 3, "value": {"I": "PEN"}, "timestamp": 30},
        ],
    },
    {
        "name": "running aggregate passes",
        "statements": [_STREAM, "CREATE TABLE T AS SELECT ITEM, COUNT(*) AS N FROM S GROUP BY ITEM;"],
        "inputs": _INPUTS,
        "outputs": [
            {"topic": "T", "key": "pen", "value": {"N": 1}, "timestamp": 10},
            {"topic": "T", "key": "ink", "value": {"N": 1}, "timestamp": 20},
            {"topic": "T", "key": "pen", "value": {"N": 2}, "timestamp": 30},
        ],
    },
    {
        "name": "aggregate with a wrong expectation fails",
        "statements": [_STREAM, "CREATE TABLE T AS SELECT ITEM, SUM(PRICE) AS TOTAL FROM S GROUP BY ITEM;"],
        "inputs": _INPUTS,
        "outputs": [
            {"topic": "T", "key": "pen", "value": {"TOTAL": 3}, "timestamp": 10},
            {"topic": "T", "key": "ink", "value": {"TOTAL": 7}, "timestamp": 20},
            {"topic": "T", "key": "pen", "value": {"TOTAL": 8}, "timestamp": 30},
        ],
    },
    {
        "name": "expected error is met",
        "statements": [_STREAM, "CREATE STREAM X AS SELECT ID, NO_SUCH_COLUMN FROM S;"],
        "expectedException": {"type": "io.confluent.ksql.util.KsqlStatementException"},
    },
    {
        "name": "expected error that does not come fails",
        "statements": [_STREAM, "CREATE STREAM Y AS SELECT ID, ITEM FROM S;"],
        "inputs": _INPUTS[:1],
        "expectedException": {"type": "io.confluent.ksql.util.KsqlStatementException"},
    },
    {
        "name": "two queries, the second reading the first's sink",
        "statements": [
            _STREAM,
            "CREATE STREAM A AS SELECT ID, PRICE * 2 AS P FROM S;",
            "CREATE TABLE B AS SELECT ID, SUM(P) AS TOTAL FROM A GROUP BY ID;",
        ],
        "inputs": _INPUTS,
        "outputs": [
            {"topic": "A", "key": 1, "value": {"P": 6}, "timestamp": 10},
            {"topic": "A", "key": 2, "value": {"P": 14}, "timestamp": 20},
            {"topic": "A", "key": 3, "value": {"P": 8}, "timestamp": 30},
            {"topic": "B", "key": 1, "value": {"TOTAL": 6}, "timestamp": 10},
            {"topic": "B", "key": 2, "value": {"TOTAL": 14}, "timestamp": 20},
            {"topic": "B", "key": 3, "value": {"TOTAL": 8}, "timestamp": 30},
        ],
    },
]


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps({"tests": _CASES}), encoding="utf-8")
    return path


def _verdicts(path: Path, workers: int) -> list[tuple[str, str, str, bool | None]]:
    run = run_conformance(load_paths([path]), workers=workers)
    return [(r.case_id, r.status.value, r.reason, r.message_matched) for r in run.results]


def test_several_cases_at_a_time_give_the_same_verdicts_in_the_same_order(
    spark: SparkSession, mixed: Path
) -> None:
    alone = _verdicts(mixed, 1)
    assert [status for _, status, _, _ in alone] == [
        "passed", "passed", "failed", "passed", "failed", "passed",
    ]
    assert _verdicts(mixed, 3) == alone


def test_workers_come_from_the_argument_the_environment_or_three(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KSPARK_QTT_WORKERS", raising=False)
    assert case_workers(None) == 3
    assert case_workers(0) == 1
    monkeypatch.setenv("KSPARK_QTT_WORKERS", "2")
    assert case_workers(None) == 2
    assert case_workers(5) == 5
    assert case_workers(5, runtime="kafka") == 1
    assert case_workers(None, own_factories=True) == 1


def test_bounded_cases_run_on_the_interpreted_session_and_leave_the_shared_one_as_it_was(
    spark: SparkSession, mixed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions: list[object] = []

    def factory(properties: Any) -> Any:
        engine = interpreted_engine_factory(properties)
        sessions.append(engine.runtime().spark)
        return engine

    monkeypatch.setattr(conformance, "interpreted_engine_factory", factory)
    seen: list[str] = []
    before = spark.conf.get("spark.sql.codegen.wholeStage")
    run_conformance(
        load_paths([mixed]), workers=1,
        on_result=lambda _: seen.append(spark.conf.get("spark.sql.codegen.wholeStage")),
    )
    assert sessions and all(s is interpreted_session() for s in sessions)
    assert interpreted_session().conf.get("spark.sql.codegen.wholeStage") == "false"
    assert seen and set(seen) == {before}


def test_an_installed_engine_factory_keeps_its_engines_in_a_conformance_run(
    spark: SparkSession, mixed: Path
) -> None:
    made: list[object] = []

    def factory(properties: Any) -> Any:
        engine = default_engine_factory(properties)
        made.append(engine)
        return engine

    previous = set_engine_factory(factory)
    try:
        run_conformance(load_paths([mixed]), workers=1)
    finally:
        set_engine_factory(previous)
    assert len(made) == len(_CASES)  # one engine a case, all of them the factory's
