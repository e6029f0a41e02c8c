"""TERMINATE CLUSTER over ``POST /ksql/terminate`` (engine.server.cluster_terminator), on the real
broker: every server of the service stops, the sinks the patterns match and the service's own
topics are deleted, and statements get ksqlDB's 503 afterwards."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from engine.commandlog.log import command_topic
from engine.facade.engine import KsqlEngine
from engine.kafka.admin import TopicAdmin
from engine.server.app import create_app
from engine.server.cluster_terminator import TerminationPlan, delete_patterns, is_terminate_cluster
from engine.server.errors import ServiceError
from engine.server.service import KsqlService


def test_a_plan_deletes_the_matching_sinks_of_create_as_select_and_their_schema_subjects() -> None:
    engine = KsqlEngine()
    engine.execute_sql(
        "CREATE STREAM SRC (ID STRING KEY, V INT) WITH (kafka_topic='out_src', value_format='JSON', partitions=1);"
        "CREATE STREAM OUT_A WITH (kafka_topic='out_a', value_format='AVRO') AS SELECT * FROM SRC;"
        "CREATE STREAM OUT_B WITH (kafka_topic='out_b', key_format='JSON_SR', value_format='JSON') AS SELECT * FROM SRC;"
        "CREATE STREAM KEEP WITH (kafka_topic='keep', value_format='AVRO') AS SELECT * FROM SRC;"
    )
    plan = TerminationPlan.of(engine.metastore, delete_patterns(["out_.*"]), ["cmd", "cmd"])
    assert sorted(plan.sink_topics) == ["out_a", "out_b"]  # out_src is a source, not a CREATE ... AS SELECT
    assert sorted(plan.subjects) == ["out_a-value", "out_b-key"]
    assert plan.managed_topics == ("cmd",)
    # A pattern matches the whole name, as Java's Pattern.matches does.
    assert TerminationPlan.of(engine.metastore, delete_patterns(["out"]), []).sink_topics == ()
    assert TerminationPlan.of(engine.metastore, [], []).sink_topics == ()


def test_patterns_are_checked_as_ksqldb_checks_them() -> None:
    assert [p.pattern for p in delete_patterns(["FOO", "bar.*"])] == ["FOO", "bar.*"]
    assert delete_patterns(None) == []
    with pytest.raises(ServiceError) as refused:
        delete_patterns(["ok", "[unclosed"])
    assert refused.value.message == "Invalid pattern: [unclosed" and refused.value.http_status == 400
    assert is_terminate_cluster("terminate cluster;") and not is_terminate_cluster("TERMINATE ALL;")


def _wait_for(check, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_terminate_cluster_stops_every_server_and_deletes_the_matching_sinks(kafka_broker, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"term_{uuid.uuid4().hex[:8]}_"
    tag = uuid.uuid4().hex[:6]
    first = KsqlService(bootstrap, service_id, tmp_path / "one", run_queries=False, command_timeout=20.0)
    second = KsqlService(bootstrap, service_id, tmp_path / "two", run_queries=False, command_timeout=20.0)
    first.start(timeout=60)
    second.start(timeout=60)
    try:
        with TestClient(create_app(first), raise_server_exceptions=False) as client:
            def ksql(text: str) -> list[dict]:
                answer = client.post("/ksql", json={"ksql": text})
                assert answer.status_code == 200, answer.text
                return answer.json()

            ksql(f"CREATE STREAM SRC (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='src_{tag}', VALUE_FORMAT='JSON', PARTITIONS=1);")
            ksql(f"CREATE STREAM GONE WITH (KAFKA_TOPIC='gone_{tag}') AS SELECT * FROM SRC;")
            ksql(f"CREATE STREAM KEPT WITH (KAFKA_TOPIC='kept_{tag}') AS SELECT * FROM SRC;")
            admin = TopicAdmin(bootstrap)
            assert {f"src_{tag}", f"gone_{tag}", f"kept_{tag}", command_topic(service_id)} <= set(admin.list_topics())

            refused = client.post("/ksql/terminate", json={"deleteTopicList": ["("]})
            assert refused.status_code == 400 and refused.json()["message"] == "Invalid pattern: ("
            unknown = client.post("/ksql/terminate", json={"deleteTopics": []})
            assert unknown.status_code == 400 and "deleteTopics" in unknown.json()["message"]

            answer = client.post("/ksql/terminate", json={"deleteTopicList": [f"gone_{re.escape(tag)}", "nothing.*"]})
            assert answer.status_code == 200, answer.text
            [status] = answer.json()
            assert status["@type"] == "currentStatus" and status["statementText"] == "TERMINATE CLUSTER;"
            assert status["commandId"] == "cluster/TerminateCluster/terminate"
            assert status["commandStatus"]["status"] == "QUEUED"
            assert first.state == "TERMINATED"
            _wait_for(lambda: second.state == "TERMINATED")

            topics = set(admin.list_topics())
            assert f"gone_{tag}" not in topics and command_topic(service_id) not in topics
            assert {f"src_{tag}", f"kept_{tag}"} <= topics  # a source's topic and an unmatched sink stay
            assert not (tmp_path / "one" / service_id).exists()

            after = client.post("/ksql", json={"ksql": "LIST STREAMS;"})
            assert after.status_code == 503
            assert after.json() == {"@type": "generic_error", "error_code": 50304, "message": "The server is shut down"}
            again = client.post("/ksql/terminate", json={})
            assert again.status_code == 503
            assert client.get("/healthcheck").status_code == 503
    finally:
        first.close()
        second.close()


def test_terminate_cluster_is_refused_with_the_metastore_tables(kafka_broker, tmp_path: Path) -> None:
    from engine.server.tables_service import TablesService

    service = TablesService(kafka_broker.bootstrap_servers, f"tables_{uuid.uuid4().hex[:8]}", tmp_path, run_queries=False)
    try:
        with pytest.raises(ServiceError) as refused:
            service.terminate_cluster(["x.*"])
        assert refused.value.message == "TERMINATE CLUSTER is served with --metastore command-topic only."
        assert service.state == "RUNNING"
    finally:
        service.log.close()
