"""The service with its metastore in the KLIP-18 tables: statements, integrity, racing servers, restarts."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from engine.errors import MetastoreError
from engine.kafka.consume import read_topic
from engine.metastore.database import QUERIES, SOURCES, TYPES
from engine.server.errors import ServiceError
from engine.server.tables_service import TablesService, apply_queries_file


def _service(bootstrap: str, service_id: str, state_dir: Path, name: str = "http://one",
             peers: dict[str, TablesService] | None = None) -> TablesService:
    service = TablesService(bootstrap, service_id, state_dir, run_queries=False, command_timeout=20.0,
                            internal_url=name)
    if peers is not None:  # forwarding without HTTP: straight to the other service's handler
        peers[name] = service
        service.database.forward = lambda url, payload, timeout: peers[url].handle_internal(payload, "")
    service.start(timeout=30)
    return service


def _await_owner(service: TablesService) -> None:
    deadline = time.monotonic() + 30
    while service.database.owner_of(SOURCES) is None or service.database.owner_of(TYPES) is None:
        assert time.monotonic() < deadline, "no server became the owner"
        time.sleep(0.1)


def _create(name: str, topic: str) -> str:
    return f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);"


@pytest.fixture
def service_id() -> str:
    return f"svc_{uuid.uuid4().hex[:8]}"


def test_statements_write_rows_and_a_restart_loads_the_live_ones(kafka_broker, service_id, tmp_path) -> None:
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    topic = f"t_{service_id}"
    try:
        _await_owner(service)
        [created] = service.execute(_create("S1", topic))
        assert created["commandStatus"]["status"] == "SUCCESS" and created["commandId"] == "stream/`S1`/create"
        [derived] = service.execute("CREATE STREAM D AS SELECT * FROM S1 WHERE V > 1;")
        query_id = derived["commandStatus"]["queryId"]
        assert query_id.startswith("CSAS_D_")
        service.execute(_create("GONE", topic) + "DROP STREAM GONE;")
        # the engine's check on the snapshot, in ksqlDB's words: a CREATE ... AS SELECT sink reads S1
        with pytest.raises(ServiceError, match=r"The following streams and/or tables read from this source: \[D\]"):
            service.execute("DROP STREAM S1;")
        [typed] = service.execute("CREATE TYPE ADDRESS AS STRUCT<STREET STRING>;")
        assert typed["commandStatus"]["message"] == "Created custom type"
        [types] = service.execute("LIST TYPES;")
        assert list(types["types"]) == ["ADDRESS"] and types["types"]["ADDRESS"]["type"] == "STRUCT"
        with pytest.raises(ServiceError) as registered:
            service.execute("CREATE TYPE ADDRESS AS STRUCT<STREET STRING>;")
        assert registered.value.message == (
            "Cannot register custom type 'ADDRESS' since it is already registered with type: STRUCT<`STREET` STRING>"
        )
        with pytest.raises(ServiceError) as dropped:
            service.execute("DROP TYPE NOPE;")
        assert dropped.value.message == "Type NOPE does not exist."
        summary = service.metastore_summary()
        assert summary == ["QUERY " + query_id, "STREAM D", "STREAM S1"]
        row = service.database.rows(SOURCES)["D"]
        assert row.query_id == query_id and row.upstream == ("S1",)
        records = read_topic(kafka_broker.bootstrap_servers, service.database.topics[SOURCES])
        assert [(r.key, r.value is None) for r in records] == [
            (b"S1", False), (b"D", False), (b"GONE", False), (b"GONE", True)]
    finally:
        service.close()

    restarted = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    try:
        assert restarted.metastore_summary() == summary
        assert list(restarted.database.rows(TYPES)) == ["ADDRESS"]
        # A new query's id never repeats an earlier one's (checkpoints are kept by id).
        _await_owner(restarted)
        [again] = restarted.execute("CREATE STREAM E AS SELECT * FROM S1;")
        assert again["commandStatus"]["queryId"] not in {query_id}
        [dropped] = restarted.execute("DROP STREAM D;")  # its query stops with it
        assert dropped["commandStatus"]["status"] == "SUCCESS"
        assert f"QUERY {query_id}" not in restarted.metastore_summary()
    finally:
        restarted.close()


def test_insert_into_and_terminate_write_rows_that_a_restart_honours(kafka_broker, service_id, tmp_path) -> None:
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    topic = f"t_{service_id}"
    try:
        _await_owner(service)
        service.execute(_create("S1", topic) + _create("S2", topic))
        [derived] = service.execute("CREATE STREAM D AS SELECT * FROM S1;")
        csas = derived["commandStatus"]["queryId"]
        [inserted] = service.execute("INSERT INTO D SELECT * FROM S2;")
        insert = inserted["commandStatus"]["queryId"]
        assert inserted["commandStatus"]["status"] == "SUCCESS" and insert.startswith("INSERTQUERY_")
        row = service.database.rows(QUERIES)[insert]
        assert row.sink == "D" and row.upstream == ("S2",) and row.sql.startswith("INSERT INTO D")
        # Integrity in the metastore itself (the engine's snapshot check bypassed): the query is named.
        from engine.metastore.database import Write

        with pytest.raises(MetastoreError, match=rf"Cannot drop S2.\nThe following queries read from this source: \[{insert}\]"):
            service.database.write(Write(SOURCES, "S2", None))
        with pytest.raises(ServiceError, match=insert):
            service.execute("DROP STREAM S2;")
        [other] = service.execute("INSERT INTO D SELECT * FROM S1;")
        kept = other["commandStatus"]["queryId"]
        [stopped] = service.execute(f"TERMINATE {insert};")
        assert stopped["commandStatus"]["status"] == "SUCCESS" and stopped["commandId"] == f"terminate/{insert}/execute"
        assert insert not in service.database.rows(QUERIES)
        [stopped] = service.execute(f"TERMINATE {csas};")  # the source stays, without its query
        assert stopped["commandStatus"]["status"] == "SUCCESS"
        assert service.database.rows(SOURCES)["D"].terminated_query == csas
        with pytest.raises(ServiceError, match=f"Unknown queryId: {csas}"):
            service.execute(f"TERMINATE {csas};")
        summary = service.metastore_summary()
        assert summary == [f"QUERY {kept}", "STREAM D", "STREAM S1", "STREAM S2"]
        service.execute("DROP STREAM S2;")  # no live query uses it any more
    finally:
        service.close()

    restarted = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    try:
        assert restarted.metastore_summary() == [f"QUERY {kept}", "STREAM D", "STREAM S1"]
        _await_owner(restarted)
        [again] = restarted.execute("INSERT INTO D SELECT * FROM S1;")
        assert again["commandStatus"]["queryId"] not in {csas, insert, kept}  # ids never repeat
        [everything] = restarted.execute("TERMINATE ALL;")
        assert everything["commandStatus"]["message"] == "All queries terminated."
        assert restarted.database.rows(QUERIES) == {}
        assert [s for s in restarted.metastore_summary() if s.startswith("QUERY")] == []
    finally:
        restarted.close()


def test_three_servers_racing_creates_and_drops_converge(kafka_broker, service_id, tmp_path) -> None:
    peers: dict[str, TablesService] = {}
    servers = [_service(kafka_broker.bootstrap_servers, service_id, tmp_path / str(i), f"http://s{i}", peers)
               for i in range(3)]
    topic = f"t_{service_id}"
    outcomes: list[str] = []
    try:
        _await_owner(servers[0])

        def client(index: int) -> None:
            server = servers[index % 3]
            for n in range(6):
                for statement in (_create(f"R{n}", topic), f"CREATE STREAM X{index}_{n} AS SELECT * FROM R{n};"):
                    try:
                        server.execute(statement)
                        outcomes.append("ok")
                    except ServiceError as exc:
                        outcomes.append(exc.message.split(":")[0])

        threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=300)
        assert outcomes.count("ok") == 6 + 36  # each R once, every derived stream
        for server in servers:
            server.log.wait_until_caught_up()
        summaries = [server.metastore_summary() for server in servers]
        assert summaries[0] == summaries[1] == summaries[2]
        assert len([s for s in summaries[0] if s.startswith("STREAM")]) == 42
    finally:
        for server in servers:
            server.close()


def test_headless_file_is_a_delta_over_the_tables(kafka_broker, service_id, tmp_path) -> None:
    topic = f"t_{service_id}"
    sql = tmp_path / "app.sql"
    sql.write_text(_create("S", topic) + "\nALTER STREAM S ADD COLUMN W STRING;\nCREATE STREAM D AS SELECT * FROM S;\n",
                   encoding="utf-8")
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    try:
        _await_owner(service)
        assert [line.split(": ")[-1] for line in apply_queries_file(service, str(sql))] == ["applied"] * 3
        assert [line.split(": ")[-1] for line in apply_queries_file(service, str(sql))] == [
            "S exists already (no-op)", "S has these columns already (no-op)", "D exists already (no-op)"]
        assert str(service.engine.metastore.get("D").schema).endswith("`W` STRING")
        sql.write_text(_create("S", topic) + "\nCREATE STREAM D AS SELECT ID FROM S;\n", encoding="utf-8")
        with pytest.raises(MetastoreError, match=r"app.sql, line 2 changes stream D, which was created by a different"):
            apply_queries_file(service, str(sql))
    finally:
        service.close()


def test_the_internal_endpoint_refuses_a_wrong_token_and_bad_json(kafka_broker, service_id, tmp_path) -> None:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from engine.server.tables_service import with_internal_route

    service = TablesService(kafka_broker.bootstrap_servers, service_id, tmp_path, run_queries=False,
                            properties={"kspark.metastore.internal.token": "s3cret"})
    try:
        client = TestClient(with_internal_route(Starlette(), service))
        answer: Any = client.post("/internal/metastore/write", json={"table": "UserTypes", "key": "T", "row": None})
        assert answer.status_code == 401 and "kspark.metastore.internal.token" in answer.json()["message"]
        answer = client.post("/internal/metastore/write", content=b"{", headers={"x-kspark-internal-token": "s3cret"})
        assert answer.status_code == 400 and "not JSON" in answer.json()["message"]
        assert client.get("/elsewhere").status_code == 404  # the rest goes to the wrapped app
    finally:
        service.log.close()


def _produce(bootstrap: str, topic: str, numbers: range) -> None:
    import json

    from engine.kafka.produce import ProducerRecord, RecordProducer

    producer = RecordProducer(bootstrap)
    for n in numbers:
        producer.send(topic, ProducerRecord(key=f"k{n}".encode(), value=json.dumps({"V": n}).encode(), timestamp=1_000 + n))
    producer.flush()


def _sink_values(bootstrap: str, topic: str, expected: int, timeout: float = 180.0) -> list[int]:
    """The V values in ``topic`` once it holds ``expected`` records, and a moment more (sorted)."""
    import json

    def values() -> list[int]:
        return sorted(int(json.loads(r.value)["V"]) for r in read_topic(bootstrap, topic, timeout=5))

    deadline = time.monotonic() + timeout
    while len(values()) < expected and time.monotonic() < deadline:
        time.sleep(1)
    time.sleep(3)  # a record that should not come would arrive now
    return values()


@pytest.mark.long
def test_an_insert_query_runs_stops_on_terminate_and_stays_stopped_after_a_restart(kafka_broker, service_id,
                                                                                   tmp_path, spark) -> None:
    from engine.kafka.admin import TopicAdmin

    bootstrap = kafka_broker.bootstrap_servers
    first, second, sink = f"a_{service_id}", f"b_{service_id}", f"out_{service_id}"
    for topic in (first, second):
        TopicAdmin(bootstrap).create_topic(topic, 1)
    _produce(bootstrap, first, range(0, 5))
    _produce(bootstrap, second, range(100, 105))

    def start() -> TablesService:
        service = TablesService(bootstrap, service_id, tmp_path, command_timeout=30.0, internal_url="http://one")
        service.start(timeout=60)
        _await_owner(service)
        return service

    service = start()
    try:
        earliest = {"auto.offset.reset": "earliest"}
        for topic, name in ((first, "A"), (second, "B")):
            service.execute(f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
        service.execute(f"CREATE STREAM D WITH (KAFKA_TOPIC='{sink}') AS SELECT * FROM A;", earliest)
        [inserted] = service.execute("INSERT INTO D SELECT * FROM B;", earliest)
        insert = inserted["commandStatus"]["queryId"]
        assert _sink_values(bootstrap, sink, 10) == [*range(0, 5), *range(100, 105)]
        service.execute(f"TERMINATE {insert};")
        _produce(bootstrap, first, range(5, 8))
        _produce(bootstrap, second, range(105, 108))  # nobody reads B any more
        assert _sink_values(bootstrap, sink, 13) == [*range(0, 8), *range(100, 105)]
    finally:
        service.close()

    service = start()
    try:
        [listed] = service.execute("SHOW QUERIES;")
        assert [q["id"] for q in listed["queries"]] == list(service.engine.queries)
        assert len(service.engine.queries) == 1 and next(iter(service.engine.queries)).startswith("CSAS_D_")
        _produce(bootstrap, first, range(8, 10))
        _produce(bootstrap, second, range(108, 110))
        assert _sink_values(bootstrap, sink, 15) == [*range(0, 10), *range(100, 105)]  # the CSAS resumed, alone
    finally:
        service.close()
