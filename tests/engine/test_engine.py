"""``engine.facade.engine.KsqlEngine``: what a bounded run reports about its queries."""

from __future__ import annotations

from typing import Any

import pytest

import engine.facade.engine as engine_module
from engine.data.records import TopicInfo, TopicRecord
from engine.facade.engine import KsqlEngine


def test_a_query_report_makes_its_physical_plan_text_once_when_first_read(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[object] = []
    real = engine_module.physical_plan_text
    monkeypatch.setattr(engine_module, "physical_plan_text", lambda df: made.append(df) or real(df))
    engine = KsqlEngine()
    for topic in ("s", "OUT"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(
        "CREATE STREAM S (ID BIGINT KEY, V INT) WITH (kafka_topic='s', value_format='JSON');"
        "CREATE STREAM OUT AS SELECT ID, V * 2 AS W FROM S WHERE V > 1;"
    )
    for i in range(3):
        engine.store.append(TopicRecord("s", i, {"V": i}, 100 + i))
    assert [r.value for r in engine.run()["OUT"]] == [{"W": 4}]
    (report,) = engine.query_reports.values()
    assert made == []  # the run itself never needed it
    text = report.physical_plan
    assert "Filter" in text and report.physical_plan is text
    assert len(made) == 1


def test_a_source_table_takes_a_query_number_as_ksqldbs_cst_query_does() -> None:
    """ksqlDB materializes a CREATE SOURCE TABLE with a query CST_<name>_<n> that takes the next
    query number, so the queries after it are numbered past it; a source stream takes none. A
    restored log numbers them alike."""
    text = ("CREATE SOURCE TABLE T (K INT PRIMARY KEY, V INT) WITH (kafka_topic='t', value_format='JSON', partitions=1);"
            "CREATE SOURCE STREAM SS (K INT KEY, V INT) WITH (kafka_topic='ss', value_format='JSON', partitions=1);"
            "CREATE STREAM S (K INT KEY, V INT) WITH (kafka_topic='s', value_format='JSON', partitions=1);"
            "CREATE STREAM S2 AS SELECT * FROM S;")
    planned = KsqlEngine()
    results = planned.execute_sql(text)
    assert [r.query_id for r in results] == [None, None, None, "CSAS_S2_1"]
    restored = KsqlEngine()
    for result in results:
        if result.plan is not None:
            restored.restore(result.plan)
    assert [r.query_id for r in restored.execute_sql("INSERT INTO S2 SELECT * FROM S;")] == ["INSERTQUERY_2"]
