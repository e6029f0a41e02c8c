"""Versioned function and CAST behaviour: a plan keeps the versions it was saved with."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import Any

import pytest

from engine.data.records import TopicInfo, TopicRecord
from engine.errors import ExecutionError
from engine.facade.engine import KsqlEngine
from engine.plan import serde

STATEMENTS = """
CREATE STREAM S (K STRING KEY, V DOUBLE, B INT, T STRING) WITH (kafka_topic='s', value_format='JSON');
CREATE STREAM OUT AS SELECT K, LOG(V) AS L, LOG(B, V) AS LB, CAST(T AS DATE) AS D FROM S;
"""


def _without_versions(node: Any) -> Any:
    """The JSON a planner wrote before functions and CAST were versioned: no "semantics"."""
    if isinstance(node, dict):
        return {k: _without_versions(v) for k, v in node.items() if k != "semantics"}
    if isinstance(node, list):
        return [_without_versions(v) for v in node]
    return node


def _run(
    plans: list[dict[str, Any]], records: list[TopicRecord] | None = None, sink: str = "OUT"
) -> list[Any]:
    engine = KsqlEngine({})
    try:
        engine.create_topic(TopicInfo("s", partitions=1))
        for plan in plans:
            engine.execute_plan(serde.statement_plan_from_json(plan))
        engine.produce(records or [TopicRecord("s", "a", {"V": 1000.0, "B": 1, "T": "1970-01"}, 1)])
        return [r.value for r in (engine.run() or {})[sink]]
    finally:
        engine.close()


def _planned_today(statements: str = STATEMENTS) -> list[dict[str, Any]]:
    engine = KsqlEngine({})
    try:
        engine.create_topic(TopicInfo("s", partitions=1))
        results = engine.execute_sql(statements)
        return [json.loads(serde.dumps(r.plan)) for r in results if r.plan is not None]
    finally:
        engine.close()


def test_new_plans_get_ksqldb_log_and_partial_dates_and_saved_plans_keep_their_versions(spark):
    today = _planned_today()
    # The two LOG calls (version 3: ksqlDB's natural logarithm and its ties of casts) and the CAST.
    assert json.dumps(today).count('"semantics": 3') == 2
    assert json.dumps(today).count('"semantics": 2') == 1
    [new] = _run(today)
    # JSON has no NaN or infinities: values carry them as ksqlDB's JSON serde writes them;
    # a DATE is its day count.
    assert new == {"L": math.log(1000.0), "LB": "NaN", "D": 0}
    [saved] = _run(_without_versions(today))
    assert saved == {"L": 3.0, "LB": "Infinity", "D": None}


SUMS = """
CREATE STREAM S (K STRING KEY, D DECIMAL(4, 1), I INT) WITH (kafka_topic='s', value_format='JSON');
CREATE TABLE SUMS AS SELECT K, SUM(D) AS SD, SUM(I) AS SI FROM S GROUP BY K;
"""


def test_an_aggregate_records_the_version_of_the_overload_it_resolves_to():
    [_, query] = _planned_today(SUMS)
    calls = _aggregate_calls(query)
    # SUM over DECIMAL changed in version 2; SUM over INTEGER did not, and its plan is
    # what it was before SUM was versioned (no "semantics" written).
    assert calls["SD"].get("semantics") == 2
    assert "semantics" not in calls["SI"]


def _aggregate_calls(node: Any) -> dict[str, dict[str, Any]]:
    """The aggregate calls of a plan's JSON by their function's first argument column."""
    found: dict[str, dict[str, Any]] = {}
    if isinstance(node, dict):
        if node.get("kind") == "call" and node.get("name", "").upper() == "SUM":
            column = node["args"][0]["name"]
            found[{"D": "SD", "I": "SI"}[column]] = node
        for value in node.values():
            found |= _aggregate_calls(value)
    elif isinstance(node, list):
        for value in node:
            found |= _aggregate_calls(value)
    return found


def test_a_decimal_sum_that_overflows_stops_the_query_and_a_saved_plan_still_skips_the_record(spark):
    today = _planned_today(SUMS)
    records = [
        TopicRecord("s", "a", {"D": "900.5", "I": 1}, 1),
        TopicRecord("s", "a", {"D": "200.0", "I": 2}, 2),  # 1100.5 does not fit DECIMAL(4, 1)
        TopicRecord("s", "a", {"D": "1.0", "I": 3}, 3),
    ]
    with pytest.raises(ExecutionError) as raised:
        _run(today, records, sink="SUMS")
    message = str(raised.value)
    assert message.startswith("Query CTAS_SUMS_0 failed: Exception caught in process: ")
    assert "SUM over DECIMAL(4, 1): Numeric field overflow" in message
    # Version 1, as a plan saved before: the overflowing record is logged and left out.
    saved = _run(_without_versions(today), records, sink="SUMS")
    assert [(v["SD"], v["SI"]) for v in saved] == [
        (Decimal("900.5"), 1), (Decimal("900.5"), 3), (Decimal("901.5"), 6)
    ]
