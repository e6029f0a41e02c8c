"""Versioned function and CAST behaviour: a plan keeps the versions it was saved with."""

from __future__ import annotations

import json
import math
from typing import Any

from engine.engine import KsqlEngine
from engine.plan import serde
from engine.records import TopicInfo, TopicRecord

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


def _run(plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    engine = KsqlEngine({})
    try:
        engine.create_topic(TopicInfo("s", partitions=1))
        for plan in plans:
            engine.execute_plan(serde.statement_plan_from_json(plan))
        engine.produce([TopicRecord("s", "a", {"V": 1000.0, "B": 1, "T": "1970-01"}, 1)])
        return [r.value for r in (engine.run() or {})["OUT"]]
    finally:
        engine.close()


def _planned_today() -> list[dict[str, Any]]:
    engine = KsqlEngine({})
    try:
        engine.create_topic(TopicInfo("s", partitions=1))
        results = engine.execute_sql(STATEMENTS)
        return [json.loads(serde.dumps(r.plan)) for r in results if r.plan is not None]
    finally:
        engine.close()


def test_new_plans_get_ksqldb_log_and_partial_dates_and_saved_plans_keep_their_versions(spark):
    today = _planned_today()
    assert json.dumps(today).count('"semantics": 2') == 3  # the two LOG calls and the CAST
    [new] = _run(today)
    # JSON has no NaN or infinities: values carry them as ksqlDB's JSON serde writes them;
    # a DATE is its day count.
    assert new == {"L": math.log(1000.0), "LB": "NaN", "D": 0}
    [saved] = _run(_without_versions(today))
    assert saved == {"L": 3.0, "LB": "Infinity", "D": None}
