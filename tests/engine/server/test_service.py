"""The service without HTTP: statements through the command log, racing servers, restarts."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.server.errors import ServiceError
from engine.server.service import KsqlService


def _service(bootstrap: str, service_id: str, state_dir: Path) -> KsqlService:
    service = KsqlService(bootstrap, service_id, state_dir, run_queries=False, command_timeout=20.0)
    service.start(timeout=30)
    return service


def _create(name: str, topic: str) -> str:
    return f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);"


@pytest.fixture
def service_id() -> str:
    return f"svc_{uuid.uuid4().hex[:8]}"


def test_create_describe_list_and_drop_answer_ksqldb_entities(kafka_broker, service_id, tmp_path) -> None:
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    try:
        topic = f"t_{service_id}"
        [created] = service.execute(_create("S1", topic))
        assert created["@type"] == "currentStatus"
        assert created["commandId"] == "stream/`S1`/create"
        assert created["commandStatus"] == {"status": "SUCCESS", "message": "Stream created", "queryId": None}
        assert isinstance(created["commandSequenceNumber"], int)
        assert service.status("stream/`S1`/create").status == "SUCCESS"

        [streams] = service.execute("SHOW STREAMS;")
        assert streams["@type"] == "streams"
        assert streams["streams"] == [{"type": "STREAM", "name": "S1", "topic": topic, "keyFormat": "KAFKA",
                                       "valueFormat": "JSON", "isWindowed": False}]
        [described] = service.execute("DESCRIBE S1;")
        fields = described["sourceDescription"]["fields"]
        assert fields[0] == {"name": "ID", "schema": {"type": "STRING", "fields": None, "memberSchema": None},
                             "type": "KEY"}
        assert fields[1]["name"] == "V" and "type" not in fields[1]

        # SET gives no entity; two statements in one request answer in order.
        answers = service.execute("SET 'auto.offset.reset'='earliest'; LIST PROPERTIES; DROP STREAM S1;")
        assert [a["@type"] for a in answers] == ["properties", "currentStatus"]
        assert {"name": "auto.offset.reset", "scope": "STREAMS", "value": "earliest"} in answers[0]["properties"]
        assert answers[1]["commandStatus"]["message"] == f"Source `S1` (topic: {topic}) was dropped."
        assert answers[1]["commandSequenceNumber"] > created["commandSequenceNumber"]
        assert service.execute("SHOW STREAMS;")[0]["streams"] == []
    finally:
        service.close()


def test_refused_statements_carry_ksqldb_error_codes_and_the_entities_before_them(
    kafka_broker, service_id, tmp_path
) -> None:
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    try:
        with pytest.raises(ServiceError) as parse_error:
            service.execute("CREATE STREEM X (A INT);")
        assert parse_error.value.code == 40001 and parse_error.value.http_status == 400
        assert parse_error.value.body()["@type"] == "statement_error"

        with pytest.raises(ServiceError) as query:
            service.execute("SELECT * FROM X EMIT CHANGES;")
        assert query.value.code == 40002 and "/query" in query.value.message

        with pytest.raises(ServiceError) as partial:
            service.execute(f"{_create('OK1', 'ok1_' + service_id)} DESCRIBE NOPE;")
        body = partial.value.body()
        assert body["statementText"] == "DESCRIBE NOPE;"
        assert "Could not find STREAM/TABLE 'NOPE'" in body["message"]
        assert [e["commandId"] for e in body["entities"]] == ["stream/`OK1`/create"]

        with pytest.raises(ServiceError, match="Unknown queryId: CSAS_NOPE_0"):
            service.execute("TERMINATE CSAS_NOPE_0;")
        with pytest.raises(ServiceError, match="no statement"):
            service.execute("   ")
    finally:
        service.close()


def test_three_servers_racing_create_stream_give_one_success_per_name_and_the_same_metastore(
    kafka_broker, service_id, tmp_path
) -> None:
    """100 names, each sent to the three servers at once: every attempt fences the others'
    in-flight transactions, and still each name is written exactly once."""
    servers = [_service(kafka_broker.bootstrap_servers, service_id, tmp_path) for _ in range(3)]
    outcomes: dict[str, list[str]] = {}
    lock = threading.Lock()

    def create(server: KsqlService, name: str) -> None:
        try:
            [entity] = server.execute(_create(name, f"race_{service_id}_{name}"))
            result = entity["commandStatus"]["status"]
        except ServiceError as exc:
            result = exc.message
        with lock:
            outcomes.setdefault(name, []).append(result)

    try:
        names = [f"R{i}" for i in range(100)]
        with ThreadPoolExecutor(max_workers=24) as pool:
            for future in [pool.submit(create, s, n) for n in names for s in servers]:
                future.result(timeout=600)
        for name in names:
            results = outcomes[name]
            assert results.count("SUCCESS") == 1, (name, results)
            for refused in (r for r in results if r != "SUCCESS"):
                assert f"Cannot add stream '{name}': A stream with the same name already exists." in refused
        for server in servers:
            server.log.wait_until_caught_up()
        summaries = [server.metastore_summary() for server in servers]
        assert summaries[0] == summaries[1] == summaries[2] == sorted(f"STREAM {n}" for n in names)
    finally:
        for server in servers:
            server.close()


def test_a_restarted_server_rebuilds_the_same_metastore_from_the_log(kafka_broker, service_id, tmp_path) -> None:
    first = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    try:
        first.execute(_create("A", f"a_{service_id}"))
        first.execute(_create("B", f"b_{service_id}"))
        first.execute("CREATE STREAM C AS SELECT * FROM A;")
        first.execute("DROP STREAM B;")
        before = first.metastore_summary()
        statuses = {cid: first.status(cid) for cid in ("stream/`C`/create", "stream/`B`/drop")}
    finally:
        first.close()
    assert before == ["QUERY CSAS_C_0", "STREAM A", "STREAM C"]
    again = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    try:
        assert again.metastore_summary() == before
        assert {cid: again.status(cid) for cid in statuses} == statuses
        # Query ids continue where the log left off.
        [created] = again.execute("CREATE STREAM D AS SELECT * FROM A;")
        assert created["commandStatus"]["queryId"] == "CSAS_D_1"
        with pytest.raises(ServiceError, match="Cannot drop A"):
            again.execute("DROP STREAM A;")
    finally:
        again.close()


def test_statements_never_write_to_the_command_topic(kafka_broker, service_id, tmp_path) -> None:
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    try:
        log_topic = service.log.topic
        service.execute(f"CREATE STREAM LOGVIEW (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{log_topic}', VALUE_FORMAT='JSON');")
        service.execute(_create("PLAIN", f"plain_{service_id}"))
        for statement in (
            "INSERT INTO LOGVIEW (ID, V) VALUES ('x', 1);",
            "INSERT INTO LOGVIEW SELECT * FROM PLAIN;",
            f"CREATE STREAM COPY WITH (KAFKA_TOPIC='{log_topic}') AS SELECT * FROM PLAIN;",
        ):
            with pytest.raises(ServiceError, match="it is an internal topic"):
                service.execute(statement)
        assert service.log.position == service.log.end_offset()
        assert "STREAM COPY" not in service.metastore_summary()
    finally:
        service.close()
