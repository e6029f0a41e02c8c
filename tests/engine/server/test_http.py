"""The REST layer: ksqlDB's request and error shapes (TestClient), then a real uvicorn with queries."""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from engine.kafka.consume import read_topic
from engine.server.app import MAX_BODY_BYTES, create_app
from engine.server.service import KsqlService
from tests.engine.server.serving import serving


@pytest.fixture(scope="module")
def metastore_service(kafka_broker, tmp_path_factory) -> Iterator[KsqlService]:
    """A service without persistent queries (no Spark): statements, entities and errors."""
    service = KsqlService(
        kafka_broker.bootstrap_servers, f"http_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("state"),
        run_queries=False, command_timeout=3.0,
    )
    service.start(timeout=30)
    yield service
    service.close()


@pytest.fixture(scope="module")
def client(metastore_service) -> Iterator[TestClient]:
    with TestClient(create_app(metastore_service), raise_server_exceptions=False) as c:
        yield c


def test_info_and_healthcheck_describe_the_service(client, metastore_service) -> None:
    info = client.get("/info").json()["KsqlServerInfo"]
    assert info["ksqlServiceId"] == metastore_service.service_id
    assert info["serverStatus"] == "RUNNING" and info["kafkaClusterId"]
    health = client.get("/healthcheck")
    assert health.status_code == 200 and health.json()["isHealthy"] is True
    metadata = client.get("/v1/metadata").json()
    clusters = {"kafka-cluster": info["kafkaClusterId"], "ksql-cluster": metastore_service.service_id}
    assert metadata["version"] == info["version"] and metadata["clusterId"]["scope"]["clusters"] == clusters
    assert client.get("/v1/metadata/id").json() == {"id": "", "scope": {"path": [], "clusters": clusters}}


def test_ksql_answers_entities_and_status_and_reads_its_own_writes(client) -> None:
    name = f"H_{uuid.uuid4().hex[:6]}".upper()
    statement = f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);"
    answer = client.post("/ksql", json={"ksql": statement, "streamsProperties": {}})
    assert answer.status_code == 200
    [entity] = answer.json()
    assert entity["@type"] == "currentStatus" and entity["statementText"] == statement
    assert entity["commandStatus"]["status"] == "SUCCESS" and entity["warnings"] == []
    sequence = entity["commandSequenceNumber"]

    listed = client.post("/ksql", json={"ksql": "LIST STREAMS;", "commandSequenceNumber": sequence})
    assert name in [s["name"] for s in listed.json()[0]["streams"]]
    status = client.get(f"/status/stream/`{name}`/create")
    assert status.status_code == 200 and status.json()["status"] == "SUCCESS"
    assert client.get("/status/stream/`NOPE`/create").status_code == 404
    assert client.get("/status").json()[f"stream/`{name}`/create"] == "SUCCESS"

    again = client.post("/ksql", json={"ksql": statement})
    assert again.status_code == 400
    body = again.json()
    assert body["@type"] == "statement_error" and body["error_code"] == 40001
    assert "already exists" in body["message"] and body["statementText"] == statement


@pytest.mark.parametrize("text", ["", "  \n", "-- only a comment\n"])
def test_a_request_without_statements_answers_no_entities(client, text) -> None:
    answer = client.post("/ksql", json={"ksql": text})  # as ksqlDB's /ksql
    assert answer.status_code == 200 and answer.json() == []


def test_a_command_sequence_number_not_reached_times_out_with_503(client) -> None:
    answer = client.post("/ksql", json={"ksql": "LIST STREAMS;", "commandSequenceNumber": 10**9})
    assert answer.status_code == 503
    assert answer.json()["error_code"] == 50301 and "command sequence number" in answer.json()["message"]


@pytest.mark.parametrize(
    ("method", "path", "content", "status", "code", "text"),
    [
        ("POST", "/ksql", b"{not json", 400, 40000, "Invalid JSON in request: "),
        ("POST", "/ksql", b"[1, 2]", 400, 40000, "JSON object"),
        ("POST", "/ksql", b'{"ksql": "LIST STREAMS;", "bogus": 1}', 400, 40000, "'bogus'"),
        ("POST", "/ksql", b'{"streamsProperties": {}}', 400, 40000, "needs 'ksql'"),
        ("POST", "/ksql", b'{"ksql": "LIST STREAMS;", "commandSequenceNumber": "x"}', 400, 40000, "integer"),
        ("POST", "/ksql", b'{"ksql": "SELECT * FROM X EMIT CHANGES;"}', 400, 40002, "/query"),
        ("POST", "/query", b'{"ksql": "SELECT * FROM NOPE EMIT CHANGES;"}', 400, 40001, "NOPE"),
        ("POST", "/query-stream", b'{"sql": "LIST STREAMS;"}', 400, 40001, "Neither a query nor a print statement"),
        ("POST", "/query", b'{"ksql": "LIST STREAMS;"}', 400, 40000,
         "Statement type `io.confluent.ksql.parser.KsqlParser$PreparedStatement' not supported for this resource"),
        ("POST", "/query", b'{"ksql": "LIST STREAMS; LIST TABLES;"}', 400, 40001,
         "Expected exactly one KSQL statement; found 2 instead"),
        ("POST", "/query-stream", b'{"sql": "-- nothing"}', 400, 40001,
         "Expected exactly one KSQL statement; found 0 instead"),
        ("POST", "/query", b'{"ksql": "SELECT * FROM X;"}', 400, 40001, "X does not exist"),
        ("GET", "/nowhere", b"", 404, 40400, "Unknown endpoint"),
        ("GET", "/ksql", b"", 405, 40500, "not allowed"),
    ],
)
def test_bad_requests_get_ksqldb_error_bodies(client, method, path, content, status, code, text) -> None:
    answer = client.request(method, path, content=content, headers={"Content-Type": "application/json"})
    assert answer.status_code == status
    body = answer.json()
    assert body["error_code"] == code and text in body["message"], body
    assert body["@type"] in ("statement_error", "generic_error")


def test_an_oversized_body_is_refused_with_413(client) -> None:
    answer = client.post("/ksql", content=b'{"ksql": "' + b" " * (MAX_BODY_BYTES + 10) + b'"}')
    assert answer.status_code == 413 and answer.json()["error_code"] == 41300


# CI runs 60 bodies; KSPARK_FUZZ_EXAMPLES=5000 runs a longer campaign.
@settings(max_examples=int(os.environ.get("KSPARK_FUZZ_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.one_of(
        st.binary(max_size=60),
        st.dictionaries(st.sampled_from(["ksql", "sql", "streamsProperties", "commandSequenceNumber", "x"]),
                        st.one_of(st.text(max_size=40), st.integers(), st.none(), st.lists(st.integers(), max_size=2)),
                        max_size=3).map(lambda d: json.dumps(d).encode()),
        st.text(alphabet="SELECT*FROMWHERE ;'`()=,0123xyz", max_size=40).map(
            lambda t: json.dumps({"ksql": t}).encode()),
    ),
    path=st.sampled_from(["/ksql", "/query-stream", "/query", "/close-query"]),
)
def test_fuzzed_bodies_never_get_a_server_error(client, body, path) -> None:
    answer = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code < 500, (path, body, answer.text)


# ---------------------------------------------------------------------------- a real server


@pytest.fixture(scope="module")
def live_server(kafka_broker, spark, tmp_path_factory) -> Iterator[tuple[str, KsqlService]]:
    """A service running queries, behind a real uvicorn on a free port (HTTP/1.1, chunked)."""
    service = KsqlService(kafka_broker.bootstrap_servers, f"live_{uuid.uuid4().hex[:8]}",
                          Path(tmp_path_factory.mktemp("live")), command_timeout=60.0)
    service.start(timeout=120)
    with serving(service) as url:
        yield url, service
    service.close()


def test_a_persistent_query_and_push_queries_over_http(live_server, kafka_broker) -> None:
    url, service = live_server
    topic = f"in_{service.service_id}"
    with httpx.Client(base_url=url, timeout=120) as http:
        def ksql(text: str, **properties: str) -> list[dict]:
            answer = http.post("/ksql", json={"ksql": text, "streamsProperties": properties})
            assert answer.status_code == 200, answer.text
            return answer.json()

        ksql(f"CREATE STREAM SRC (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        [created] = ksql("CREATE STREAM TENFOLD AS SELECT ID, V * 10 AS V10 FROM SRC;", **{"auto.offset.reset": "earliest"})
        assert created["commandStatus"]["queryId"] == "CSAS_TENFOLD_0"
        assert ksql("INSERT INTO SRC (ID, V) VALUES ('a', 1); INSERT INTO SRC (ID, V) VALUES ('b', 2);") == []
        [queries] = ksql("SHOW QUERIES;")
        assert [(q["id"], q["state"]) for q in queries["queries"]] == [("CSAS_TENFOLD_0", "RUNNING")]

        body = {"sql": "SELECT * FROM TENFOLD EMIT CHANGES LIMIT 2;", "properties": {"auto.offset.reset": "earliest"}}
        headers = {"Accept": "application/vnd.ksqlapi.delimited.v1"}
        with http.stream("POST", "/query-stream", json=body, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("application/vnd.ksqlapi.delimited.v1")
            assert response.headers.get("transfer-encoding") == "chunked"
            lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
        assert lines[0]["columnNames"] == ["ID", "V10"] and lines[0]["columnTypes"] == ["STRING", "INTEGER"]
        assert lines[1:] == [["a", 10], ["b", 20]]

        query = {"ksql": "SELECT ID, V FROM SRC EMIT CHANGES LIMIT 1;", "streamsProperties": {"auto.offset.reset": "earliest"}}
        answer = http.post("/query", json=query)
        messages = json.loads(answer.text)
        assert messages[0]["header"]["schema"] == "`ID` STRING, `V` INTEGER"
        assert messages[1:] == [{"row": {"columns": ["a", 1]}}, {"finalMessage": "Limit Reached"}]

        [terminated] = ksql("TERMINATE CSAS_TENFOLD_0;")
        assert terminated["commandStatus"]["message"] == "Query terminated."
        ksql("DROP STREAM TENFOLD DELETE TOPIC;")
    records = read_topic(kafka_broker.bootstrap_servers, topic)
    assert len(records) == 2


def _open_push(url: str, sql: str) -> socket.socket:
    """A raw HTTP/1.1 push query on /query-stream, read up to its metadata line."""
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"sql": sql, "properties": {"auto.offset.reset": "latest"}}).encode()
    client = socket.create_connection((host, int(port)), timeout=180)  # a first push query starts Spark
    client.sendall(b"POST /query-stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Accept: application/vnd.ksqlapi.delimited.v1\r\n"
                   + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    received = b""
    while b"columnNames" not in received:
        chunk = client.recv(65536)
        assert chunk, f"the server closed the push query before its metadata: {received!r}"
        received += chunk
    return client


def test_a_push_query_whose_client_goes_away_is_closed_within_a_second(live_server) -> None:
    """No row arrives after the client is gone: the server must still notice, stop the query and
    give its worker thread back (it waited in PushQuery.rows until a row came)."""
    url, service = live_server
    topic = f"quiet_{service.service_id}"
    answer = httpx.post(f"{url}/ksql", timeout=60, json={
        "ksql": f"CREATE STREAM QUIET (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);"})
    assert answer.status_code == 200, answer.text
    client = _open_push(url, "SELECT * FROM QUIET EMIT CHANGES;")
    assert len(service._push_queries) == 1
    client.close()
    deadline = time.monotonic() + 2.0
    while service._push_queries and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not service._push_queries, "the push query of a client that went away is still open"


def test_ksqldb_client_forms_on_the_query_endpoints(live_server) -> None:
    """What third-party clients send: ``ksql.streams.``-prefixed offsets and session variables on
    /query, a running push query in SHOW QUERIES and closed by TERMINATE, PRINT on /query and
    /query-stream."""
    url, service = live_server
    topic = f"clients_{service.service_id}"
    with httpx.Client(base_url=url, timeout=120) as http:
        def ksql(text: str) -> list[dict]:
            answer = http.post("/ksql", json={"ksql": text})
            assert answer.status_code == 200, answer.text
            return answer.json()

        ksql(f"CREATE STREAM CLIENTS (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);")
        ksql("INSERT INTO CLIENTS (ID, V) VALUES ('a', 1);")
        query = {"ksql": "SELECT ID, V FROM ${source} EMIT CHANGES LIMIT 1;", "sessionVariables": {"source": "CLIENTS"},
                 "streamsProperties": {"ksql.streams.auto.offset.reset": "earliest"}}
        messages = json.loads(http.post("/query", json=query).text)
        assert messages[1:] == [{"row": {"columns": ["a", 1]}}, {"finalMessage": "Limit Reached"}], messages

        client = _open_push(url, "SELECT * FROM CLIENTS EMIT CHANGES;")
        try:
            [queries] = ksql("SHOW QUERIES;")
            [push] = [q for q in queries["queries"] if q["queryType"] == "PUSH"]
            assert push["id"].startswith("transient_CLIENTS_") and push["state"] == "RUNNING" and push["sinks"] == []
            [described] = ksql("SHOW QUERIES EXTENDED;")
            assert [d["id"] for d in described["queryDescriptions"] if d["queryType"] == "PUSH"] == [push["id"]]
            [terminated] = ksql(f"TERMINATE {push['id']};")
            assert terminated == {"@type": "terminate_query", "statementText": f"TERMINATE {push['id']};",
                                  "queryId": push["id"], "wasTerminated": True, "warnings": []}
            client.settimeout(10)
            received = b""
            while chunk := client.recv(65536):  # the stream ends: its last chunk, then the connection stays
                received += chunk
                if received.endswith(b"0\r\n\r\n"):
                    break
            assert received.endswith(b"0\r\n\r\n"), received
        finally:
            client.close()
        assert not service._push_queries

        printed = {"ksql": f"PRINT '{topic}' FROM BEGINNING LIMIT 1;"}
        with http.stream("POST", "/query", json=printed) as response:
            assert response.status_code == 200
            lines = [line for line in response.iter_lines() if line.strip()]
        assert lines[0] == "Key format: KAFKA_STRING" and lines[1].startswith("Value format: JSON")
        assert lines[2].endswith(', key: a, value: {"V":1}, partition: 0') and len(lines) == 3, lines
        with http.stream("POST", "/query-stream", json={"sql": printed["ksql"]}) as response:
            assert response.headers["content-type"].startswith("application/vnd.ksqlapi.delimited.v1")
            stream_lines = [line for line in response.iter_lines() if line.strip()]
        assert stream_lines == lines[2:]
