"""Post-conditions on the topics a bounded run creates: a join's internal topics by ksqlDB's
names and formats, and the partitions of topics CREATE statements name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from qtt.loader import expand_case
from qtt.model import QttCase
from qtt.runner import Status, run_case

PREFIX = "_confluent-ksql-some.ksql.service.idquery_CSAS_J_0-"
# ksqlDB's PostTopicNode requires both formats.
JSON_VALUE = {"valueFormat": {"format": "JSON"}}


def _case(tmp_path: Path, post_topics: list[dict[str, Any]], **raw: Any) -> QttCase:
    body: dict[str, Any] = {
        "name": "join topics",
        "statements": [
            "CREATE STREAM L (ID INT KEY, X INT) WITH (kafka_topic='l', key_format='JSON', value_format='JSON');",
            "CREATE STREAM R (ID INT KEY, Y STRING) WITH (kafka_topic='r', key_format='KAFKA', value_format='JSON');",
            # not joined: a join's inputs must have as many partitions
            "CREATE STREAM O (ID INT KEY, Z INT) WITH (kafka_topic='o', value_format='JSON', partitions=2);",
            "CREATE STREAM J AS SELECT L.ID, X, Y FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.ID;",
        ],
        "inputs": [
            {"topic": "r", "key": 7, "value": {"Y": "seven"}, "timestamp": 10},
            {"topic": "l", "key": 7, "value": {"X": 1}, "timestamp": 20},
        ],
        "outputs": [{"topic": "J", "key": 7, "value": {"X": 1, "Y": "seven"}, "timestamp": 20}],
        "post": {"topics": {"topics": post_topics}},
    }
    body.update(raw)
    [case] = expand_case(body, tmp_path / "cases.json", 0)
    return case


def test_a_join_creates_its_repartition_and_store_topics_in_the_join_key_format(
    spark: SparkSession, tmp_path: Path
) -> None:
    key = {"format": "JSON", "features": ["UNWRAP_SINGLES"]}
    case = _case(tmp_path, [
        {"name": PREFIX + "Join-right-repartition", "keyFormat": key, "valueFormat": {"format": "JSON"}},
        {"name": PREFIX + "KSTREAM-JOINTHIS-0000000012-store-changelog", "keyFormat": key, **JSON_VALUE},
        {"name": PREFIX + "KSTREAM-JOINOTHER-0000000013-store-changelog", "keyFormat": key, **JSON_VALUE},
        # A topic a CREATE statement names gets its PARTITIONS, else ksqlDB's runner's 4.
        {"name": "l", "keyFormat": key, **JSON_VALUE, "partitions": 4},  # one key column: unwrapped
        {"name": "r", "keyFormat": {"format": "KAFKA"}, **JSON_VALUE, "partitions": 4},
        {"name": "o", "keyFormat": {"format": "KAFKA"}, **JSON_VALUE, "partitions": 2},
    ])
    result = run_case(case, strict=True)
    assert result.status is Status.PASSED, result.reason


def test_a_wrong_internal_topic_expectation_fails_naming_the_topic(spark: SparkSession, tmp_path: Path) -> None:
    case = _case(tmp_path, [
        {"name": PREFIX + "Join-left-repartition", "keyFormat": {"format": "JSON"}, **JSON_VALUE},
        {"name": PREFIX + "Join-right-repartition", "keyFormat": {"format": "KAFKA"}, **JSON_VALUE},
    ])
    result = run_case(case, strict=True)
    assert result.status is Status.FAILED
    assert f"Topic '{PREFIX}Join-left-repartition' does not exist after the case ran." in result.reason
    assert "(and 2 more problems)" in result.reason  # the right one's format and its features


def test_a_case_property_names_the_service_id(spark: SparkSession, tmp_path: Path) -> None:
    name = "_confluent-ksql-mine_query_CSAS_J_0-Join-right-repartition"
    case = _case(tmp_path, [{"name": name, "keyFormat": {"format": "JSON", "features": ["UNWRAP_SINGLES"]},
                             **JSON_VALUE}],
                 properties={"ksql.service.id": "mine_"})
    result = run_case(case, strict=True)
    assert result.status is Status.PASSED, result.reason
