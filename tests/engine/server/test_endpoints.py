"""LIST FUNCTIONS/TYPES, DESCRIBE FUNCTION, EXPLAIN, /inserts-stream, basic auth and HTTP/2.

Each at service level (no HTTP) and over HTTP: TestClient for HTTP/1.1, a real hypercorn
(as ``kspark server`` runs it) for HTTP/2 with prior knowledge and chunked inserts.
"""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from engine.kafka.consume import read_topic
from engine.server.app import create_app
from engine.server.auth import AuthFileError, BasicAuth
from engine.server.errors import ServiceError
from engine.server.service import KsqlService


@pytest.fixture(scope="module")
def service(kafka_broker, tmp_path_factory) -> Iterator[KsqlService]:
    """A service without persistent queries (no Spark), with one JSON stream and one table."""
    svc = KsqlService(
        kafka_broker.bootstrap_servers, f"ep_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("state"),
        run_queries=False, command_timeout=5.0,
    )
    svc.start(timeout=30)
    suffix = svc.service_id
    svc.execute(
        f"CREATE STREAM PV (ID STRING KEY, V INT, AMOUNT DECIMAL(4, 2), TAGS ARRAY<STRING>) "
        f"WITH (KAFKA_TOPIC='pv_{suffix}', VALUE_FORMAT='JSON', PARTITIONS=1);"
        f"CREATE TABLE T (ID STRING PRIMARY KEY, V INT) WITH (KAFKA_TOPIC='t_{suffix}', VALUE_FORMAT='JSON', PARTITIONS=1);"
        "CREATE STREAM BIG AS SELECT ID, V * 10 AS V10 FROM PV WHERE V > 1;"
    )
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def client(service) -> Iterator[TestClient]:
    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        yield c


# ---------------------------------------------------------------- functions and types


def test_list_functions_names_every_kind_with_a_category(service) -> None:
    [entity] = service.execute("SHOW FUNCTIONS;")
    assert entity["@type"] == "function_names" and entity["statementText"] == "SHOW FUNCTIONS;"
    by_name = {f["name"]: f for f in entity["functions"]}
    assert by_name["ABS"] == {"name": "ABS", "type": "SCALAR", "category": "MATHEMATICAL"}
    assert by_name["COUNT"]["type"] == "AGGREGATE" and by_name["COUNT"]["category"] == "AGGREGATE"
    assert by_name["EXPLODE"]["type"] == "TABLE"
    assert by_name["UCASE"]["category"] == "STRING"
    assert [f["name"] for f in entity["functions"]] == sorted(by_name)


def test_describe_function_lists_its_overloads_and_refuses_unknown_names(service, client) -> None:
    [entity] = service.execute("DESCRIBE FUNCTION abs;")
    assert entity["@type"] == "describe_function" and entity["name"] == "ABS" and entity["type"] == "SCALAR"
    returns = {o["returnType"] for o in entity["functions"]}
    assert {"INTEGER", "BIGINT", "DOUBLE"} <= returns
    first = entity["functions"][0]
    assert set(first) == {"arguments", "returnType", "description"}
    assert set(first["arguments"][0]) == {"name", "type", "description", "isVariadic"}
    [concat] = service.execute("DESCRIBE FUNCTION CONCAT;")
    assert any(a["isVariadic"] for o in concat["functions"] for a in o["arguments"])

    with pytest.raises(ServiceError) as unknown:
        service.execute("DESCRIBE FUNCTION NOPE_FN;")
    assert unknown.value.message == "Can't find any functions with the name 'NOPE_FN'"
    answer = client.post("/ksql", json={"ksql": "DESCRIBE FUNCTION NOPE_FN;"})
    assert answer.status_code == 400 and answer.json()["@type"] == "statement_error"
    assert answer.json()["statementText"] == "DESCRIBE FUNCTION NOPE_FN;"


def test_list_types_answers_a_type_list(service, client) -> None:
    [entity] = service.execute("LIST TYPES;")
    assert entity["@type"] == "type_list" and entity["types"] == {}
    answer = client.post("/ksql", json={"ksql": "SHOW TYPES;"})
    assert answer.status_code == 200 and answer.json()[0]["@type"] == "type_list"


# ---------------------------------------------------------------- EXPLAIN


def test_explain_a_running_query_by_id(service, client) -> None:
    [query] = service.execute("SHOW QUERIES;")[0]["queries"]
    [entity] = service.execute(f"EXPLAIN {query['id']};")
    assert entity["@type"] == "queryDescription"
    description = entity["queryDescription"]
    assert description["id"] == query["id"] and description["queryType"] == "PERSISTENT"
    assert description["sources"] == ["PV"] and description["sinks"] == ["BIG"]
    assert description["statementText"].startswith("CREATE STREAM BIG AS SELECT")
    assert [f["name"] for f in description["fields"]] == ["ID", "V10"]
    assert description["fields"][0]["type"] == "KEY"
    plan = description["executionPlan"].splitlines()
    assert plan[0].startswith(" > [ ") and any("streamSourceV" in line for line in plan)
    assert plan[-1].startswith("\t")  # the source is indented under what reads it

    answer = client.post("/ksql", json={"ksql": "EXPLAIN CSAS_NOPE_9;"})
    assert answer.status_code == 400
    assert answer.json()["message"] == (
        "Query with id:CSAS_NOPE_9 does not exist, use SHOW QUERIES to view the full set of queries."
    )


def test_explain_a_statement_plans_it_without_running_it(service, client) -> None:
    before = service.metastore_summary()
    [push] = service.execute("EXPLAIN SELECT ID, V FROM PV EMIT CHANGES;")
    description = push["queryDescription"]
    assert description["queryType"] == "PUSH" and description["id"].startswith("transient_PV_")
    assert [f["name"] for f in description["fields"]] == ["ID", "V"]

    [csas] = service.execute("EXPLAIN CREATE STREAM SMALL AS SELECT ID, V FROM PV WHERE V < 2;")
    assert csas["queryDescription"]["id"].startswith("CSAS_SMALL_")
    assert csas["queryDescription"]["statementText"] == "CREATE STREAM SMALL AS SELECT ID, V FROM PV WHERE V < 2;"
    assert csas["queryDescription"]["sinks"] == ["SMALL"] and csas["queryDescription"]["state"] is None
    [insert] = service.execute("EXPLAIN INSERT INTO BIG SELECT ID, V AS V10 FROM PV;")
    assert insert["queryDescription"]["id"].startswith("INSERTQUERY_")
    [named] = service.execute("EXPLAIN INSERT INTO BIG WITH (QUERY_ID='more_big') SELECT ID, V AS V10 FROM PV;")
    assert named["queryDescription"]["id"] == "MORE_BIG"
    assert service.metastore_summary() == before  # nothing registered, no query started

    refused = client.post("/ksql", json={"ksql": "EXPLAIN SHOW STREAMS;"})
    assert refused.status_code == 400
    assert refused.json()["message"] == "The provided statement does not run a ksql query"
    assert refused.json()["@type"] == "statement_error" and refused.json()["statementText"] == "EXPLAIN SHOW STREAMS;"
    unknown = client.post("/ksql", json={"ksql": "EXPLAIN SELECT * FROM NOPE EMIT CHANGES;"})
    assert unknown.status_code == 400 and "NOPE" in unknown.json()["message"]


def test_explain_a_pull_query_checks_it_as_a_pull_query_and_describes_its_push_plan(service, client) -> None:
    before = service.metastore_summary()
    [pull] = service.execute("EXPLAIN SELECT ID, V FROM PV WHERE ID = 'a';")
    description = pull["queryDescription"]
    assert description["queryType"] == "PUSH" and description["id"].startswith("transient_PV_")
    assert description["statementText"] == "SELECT ID, V FROM PV WHERE ID = 'a';"  # as ksqlDB cuts it
    assert [f["name"] for f in description["fields"]] == ["ID", "V"]
    assert any("streamFilterV" in line for line in description["executionPlan"].splitlines())
    assert service.metastore_summary() == before

    for statement, message in (
        ("EXPLAIN SELECT ID, COUNT(*) AS N FROM PV GROUP BY ID;", "Pull queries don't support GROUP BY clauses."),
        ("EXPLAIN SELECT ID, ROWOFFSET FROM PV;",
         "Pull queries don't support the following columns in SELECT clauses: `ROWOFFSET`\n"),
    ):
        refused = client.post("/ksql", json={"ksql": statement})
        assert refused.status_code == 400, refused.text
        body = refused.json()
        assert body["@type"] == "statement_error" and body["message"].startswith(message), body
        assert body["message"].endswith("Add EMIT CHANGES if you intended to issue a push query.")
        assert body["statementText"] == statement


# ---------------------------------------------------------------- /inserts-stream


def test_inserts_stream_at_service_level_acks_every_row_and_refuses_bad_ones(service, kafka_broker) -> None:
    topic = f"pv_{service.service_id}"
    before = len(read_topic(kafka_broker.bootstrap_servers, topic))
    stream = service.inserts_stream("pv")  # unquoted names are upper-cased
    assert stream.insert(b'{"id": "a", "v": 1, "amount": 1.5, "tags": ["x"]}', 0) == {"status": "ok", "seq": 0}
    bad_type = stream.insert(b'{"ID": "b", "V": "not a number"}', 1)
    assert bad_type["status"] == "error" and bad_type["seq"] == 1 and bad_type["error_code"] == 40000
    assert "V" in bad_type["message"]
    unknown = stream.insert(b'{"ID": "c", "NOPE": 1}', 2)
    assert unknown["status"] == "error" and "Column name NOPE does not exist" in unknown["message"]
    assert stream.insert(b"{not json", 3)["message"].startswith("Invalid JSON in inserts stream")
    assert stream.insert(b"[1, 2]", 4)["status"] == "error"
    assert stream.insert(b'{"ID": "d", "ROWTIME": 1234}', 5) == {"status": "ok", "seq": 5}
    records = read_topic(kafka_broker.bootstrap_servers, topic)[before:]
    assert [r.key for r in records] == [b"a", b"d"]
    assert json.loads(records[0].value or b"null") == {"V": 1, "AMOUNT": 1.5, "TAGS": ["x"]}
    assert records[1].timestamp == 1234

    with pytest.raises(ServiceError, match="Cannot insert values into an unknown stream: NOPE"):
        service.inserts_stream("NOPE")
    with pytest.raises(ServiceError, match="Cannot insert into a table: T"):
        service.inserts_stream("T")


def test_inserts_stream_over_http_answers_one_ack_a_row(client, service, kafka_broker) -> None:
    body = (
        '{"target": "PV"}\n{"ID": "h1", "V": 7}\n\n{"ID": "h2", "V": "x"}\n{"ID": "h3", "V": 8}'
    )
    answer = client.post("/inserts-stream", content=body)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("application/vnd.ksqlapi.delimited.v1")
    acks = [json.loads(line) for line in answer.text.splitlines()]
    assert [(a["status"], a["seq"]) for a in acks] == [("ok", 0), ("error", 1), ("ok", 2)]
    as_json = client.post("/inserts-stream", content='{"target": "PV"}\n{"ID": "h4", "V": 9}\n',
                          headers={"Accept": "application/json"})
    assert as_json.json() == [{"status": "ok", "seq": 0}]
    keys = [r.key for r in read_topic(kafka_broker.bootstrap_servers, f"pv_{service.service_id}")]
    assert keys[-3:] == [b"h1", b"h3", b"h4"]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ("", 400, "The inserts stream is empty"),
        ("not json\n", 400, "not valid JSON"),
        ('{"target": "PV", "x": 1}\n', 400, "Unrecognized field(s) 'x'"),
        ('{"nottarget": 1}\n', 400, "Unrecognized field(s)"),
        ('{"properties": {}}\n', 400, "No target"),
        ('{"target": "NOPE"}\n{"ID": "a"}\n', 400, "Cannot insert values into an unknown stream: NOPE"),
        ('{"target": "T"}\n', 400, "Cannot insert into a table"),
    ],
)
def test_inserts_stream_refuses_a_bad_first_line_with_a_ksqldb_error(client, body, status, message) -> None:
    answer = client.post("/inserts-stream", content=body)
    assert answer.status_code == status
    assert message in answer.json()["message"] and answer.json()["@type"] in ("generic_error", "statement_error")


# ---------------------------------------------------------------- basic auth


def test_auth_files_in_jetty_and_htpasswd_forms(tmp_path: Path) -> None:
    sha = base64.b64encode(__import__("hashlib").sha1(b"s3cret").digest()).decode()
    path = tmp_path / "users"
    path.write_text(
        "# Jetty realm lines and htpasswd lines\n"
        "fred: letmein, admin, user\n"
        "ann: MD5:0d107d09f5bbe40cade3de5c71e9e9b7\n"
        f"bob:{{SHA}}{sha}\n"
        "plain:pw\n"
    )
    auth = BasicAuth.from_file(path)

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    assert auth.check(header("fred", "letmein")) and auth.check(header("ann", "letmein"))
    assert auth.check(header("bob", "s3cret")) and auth.check(header("plain", "pw"))
    assert not auth.check(header("fred", "wrong")) and not auth.check(header("nobody", "pw"))
    assert not auth.check(None) and not auth.check("Bearer x") and not auth.check("Basic !!!")

    for text, problem in [
        ("fred\n", "line 1 of"),
        ("fred:\n", "has no password"),
        ("a: x\na: y\n", "listed twice"),
        ("x:$apr1$abc$def\n", "'$apr1$' are not supported"),
        ("# nobody\n", "lists no user"),
        ("ann: MD5:xyz\n", "32 hex digits"),
    ]:
        path.write_text(text)
        with pytest.raises(AuthFileError, match=problem.replace("$", r"\$")):
            BasicAuth.from_file(path)
    with pytest.raises(AuthFileError, match="Cannot read the auth file"):
        BasicAuth.from_file(tmp_path / "missing")


def test_every_endpoint_but_healthcheck_needs_credentials(service, tmp_path: Path) -> None:
    path = tmp_path / "users"
    path.write_text("fred: letmein, admin\n")
    with TestClient(create_app(service, BasicAuth.from_file(path)), raise_server_exceptions=False) as c:
        assert c.get("/healthcheck").status_code == 200
        for method, url in [("GET", "/info"), ("POST", "/ksql"), ("POST", "/query-stream"),
                            ("POST", "/inserts-stream"), ("GET", "/clusterStatus"), ("GET", "/nope")]:
            refused = c.request(method, url, json={"ksql": "LIST STREAMS;"})
            assert refused.status_code == 401, url
            assert refused.json() == {"@type": "generic_error", "error_code": 40100, "message": "Unauthorized"}
            assert refused.headers["www-authenticate"].startswith("Basic realm=")
        wrong = c.post("/ksql", json={"ksql": "LIST STREAMS;"}, auth=("fred", "nope"))
        assert wrong.status_code == 401
        ok = c.post("/ksql", json={"ksql": "LIST STREAMS;"}, auth=("fred", "letmein"))
        assert ok.status_code == 200 and ok.json()[0]["@type"] == "streams"


# ---------------------------------------------------------------- HTTP/2 (hypercorn, as kspark server runs it)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def hypercorn_url(service) -> Iterator[str]:
    port = _free_port()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    async def main() -> None:
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"127.0.0.1:{port}"]
        config.loglevel = "WARNING"
        config.accesslog = None
        await serve(create_app(service), config, shutdown_trigger=stop.wait)

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthcheck").status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.1)
    yield url
    loop.call_soon_threadsafe(stop.set)
    thread.join(timeout=10)


def test_http2_with_prior_knowledge_over_cleartext(hypercorn_url) -> None:
    with httpx.Client(http1=False, http2=True, base_url=hypercorn_url, timeout=30) as h2:
        info = h2.get("/info")
        assert info.http_version == "HTTP/2" and info.status_code == 200
        listed = h2.post("/ksql", json={"ksql": "SHOW FUNCTIONS;"})
        assert listed.http_version == "HTTP/2" and listed.json()[0]["@type"] == "function_names"
        refused = h2.post("/ksql", json={"ksql": "DESCRIBE FUNCTION NOPE_FN;"})
        assert refused.status_code == 400 and refused.json()["error_code"] == 40001
        missing = h2.get("/nope")
        assert missing.status_code == 404 and missing.json()["error_code"] == 40400


def test_inserts_stream_over_http2_acks_rows_as_they_are_sent(hypercorn_url, service, kafka_broker) -> None:
    """A client writes a row, reads its ack, then writes the next (one request, both ways at once)."""
    import h2.config
    import h2.connection
    import h2.events

    port = int(hypercorn_url.rsplit(":", 1)[1])
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    conn.send_headers(1, [(":method", "POST"), (":path", "/inserts-stream"), (":scheme", "http"),
                          (":authority", f"127.0.0.1:{port}")])
    conn.send_data(1, b'{"target": "PV"}\n')
    sock.sendall(conn.data_to_send())
    received = b""
    acks: list[dict] = []

    def read_ack() -> dict:
        nonlocal received
        while b"\n" not in received:
            for event in conn.receive_data(sock.recv(65535)):
                if isinstance(event, h2.events.DataReceived):
                    received += event.data
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            sock.sendall(conn.data_to_send())
        line, received = received.split(b"\n", 1)
        return json.loads(line)

    for number in range(3):
        conn.send_data(1, json.dumps({"ID": f"two{number}", "V": number}).encode() + b"\n")
        sock.sendall(conn.data_to_send())
        acks.append(read_ack())  # answered before the request ends
    conn.end_stream(1)
    sock.sendall(conn.data_to_send())
    sock.close()
    assert acks == [{"status": "ok", "seq": n} for n in range(3)]
    keys = [r.key for r in read_topic(kafka_broker.bootstrap_servers, f"pv_{service.service_id}")]
    assert keys[-3:] == [b"two0", b"two1", b"two2"]


# ---------------------------------------------------------------- INSERT VALUES errors


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("INSERT INTO PV (ID, V) VALUES ('a');", "Failed to prepare statement: Expected number columns and values to match: 2, 1"),
        ("INSERT INTO PV (ID, V) VALUES ('a', X.V);", "Failed to prepare statement: 'X' is not a valid stream/table name or alias."),
        ("INSERT INTO PV (ID, V, ROWPARTITION) VALUES ('a', 1, 0);", "Inserting into column `ROWPARTITION` is not allowed."),
        # ksqlDB's GenericExpressionResolver and GenericRecordFactory words, names quoted as ksqlDB quotes them
        ("INSERT INTO PV (ID, V) VALUES ('a', 'x');",
         "Failed to insert values into 'PV'. Expected type INTEGER for field `V` but got STRING(x)"),
        ("INSERT INTO PV (ID, NOPE) VALUES ('a', 1);", "Failed to insert values into 'PV'. Column name `NOPE` does not exist."),
    ],
)
def test_insert_values_errors_carry_ksqldb_prefixes_and_are_400s(service, client, statement, message) -> None:
    with pytest.raises(ServiceError) as refused:
        service.execute(statement)
    assert message in refused.value.message and refused.value.http_status == 400
    answer = client.post("/ksql", json={"ksql": statement})
    assert answer.status_code == 400 and answer.json()["@type"] == "statement_error"
    assert message in answer.json()["message"] and answer.json()["statementText"] == statement


def test_kspark_server_stops_at_a_bad_auth_file_with_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "users"
    bad.write_text("fred:$apr1$x$y\n")
    for path, problem in [(bad, "passwords hashed as '$apr1$' are not supported"),
                          (tmp_path / "missing", "Cannot read the auth file")]:
        done = subprocess.run(
            [sys.executable, "-m", "engine.cli", "server", "--bootstrap-servers", "127.0.0.1:1",
             "--service-id", "x", "--state-dir", str(tmp_path / "state"), "--auth-file", str(path)],
            capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 1
        assert done.stderr.startswith("kspark: ") and problem in done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_push_query_streams_over_http2(hypercorn_url, service, spark) -> None:
    """/query-stream over cleartext HTTP/2 with prior knowledge: the metadata line, then rows."""
    service.execute("INSERT INTO PV (ID, V) VALUES ('h2row', 42);")
    request = {"sql": "SELECT ID, V FROM PV WHERE V = 42 EMIT CHANGES LIMIT 1;",
               "properties": {"auto.offset.reset": "earliest"}}
    with httpx.Client(http1=False, http2=True, base_url=hypercorn_url, timeout=120) as h2:
        with h2.stream("POST", "/query-stream", json=request) as answer:
            assert answer.http_version == "HTTP/2" and answer.status_code == 200
            lines = [json.loads(line) for line in answer.iter_lines() if line.strip()]
    assert lines[0]["columnNames"] == ["ID", "V"] and lines[0]["queryId"].startswith("transient_PV_")
    assert lines[1:] == [["h2row", 42]]
