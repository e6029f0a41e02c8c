"""The REST runner end to end against a scripted stand-in server on a real Kafka broker.

The stand-in answers like ksqlDB's REST API (entities, streamed /query answers sent in
pieces, error bodies) from a script, so these tests pin the runner's side: requests and
their order, the inputs on the broker (timestamp 0 kept), response and error judging,
output verification and the clean-up between cases.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.components.broker import Broker
from engine.kafka import TopicAdmin, read_topic
from qtt.rest.client import RestClient
from qtt.rest.loader import load_rest_file
from qtt.rest.producer import JavaInputProducer, encode_line
from qtt.rest.runner import RestHarness, run_rest_case, statement_kind
from qtt.runner import Status
from tests.stand_in import QuietHandler, standing_in

Answer = tuple[int, Any]


class StandIn:
    """A scripted server: ``ksql`` and ``query`` map a statement to an answer."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.accepts: list[str | None] = []  # each request's Accept header
        self.sources: dict[str, str] = {}  # name -> STREAM / TABLE
        self.queries: list[str] = []
        self.ksql: Callable[[str], Answer | None] = lambda _s: None
        self.query: Callable[[str], tuple[int, list[str]]] = lambda _s: (200, [])

    def answer_ksql(self, body: dict[str, Any]) -> Answer:
        statement = body["ksql"].strip()
        words = statement.rstrip(";").split()
        head = " ".join(words[:2]).upper()
        if head == "SHOW QUERIES":
            return 200, [{"@type": "queries", "queries": [{"id": q} for q in self.queries]}]
        if head in ("SHOW STREAMS", "SHOW TABLES"):
            kind = head.split()[1][:-1]
            listed = [{"name": n, "type": k} for n, k in self.sources.items() if k == kind]
            return 200, [{"@type": kind.lower() + "s", kind.lower() + "s": listed}]
        if words[0].upper() == "TERMINATE":
            self.queries.remove(words[1])
            return 200, [{"@type": "currentStatus"}]
        if words[0].upper() == "DROP":
            self.sources.pop(words[2].strip("`"), None)
            return 200, [{"@type": "currentStatus"}]
        scripted = self.ksql(statement)
        if scripted is not None:
            return scripted
        if head in ("CREATE STREAM", "CREATE TABLE"):
            self.sources[words[2]] = words[1].upper()
            if " AS SELECT " in statement.upper():
                self.queries.append(f"CSAS_{words[2]}_{len(self.queries)}")
        return 200, [
            {"@type": "currentStatus", "statementText": statement, "commandSequenceNumber": 1}
        ]

    def handler(self) -> type[QuietHandler]:
        """The request handler answering from this script."""
        stand_in = self

        class Handler(QuietHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                self.send_json(200, {"isHealthy": True})

            def do_POST(self) -> None:
                body = json.loads(self.request_body())
                stand_in.requests.append((self.path, body))
                stand_in.accepts.append(self.headers.get("Accept"))
                if self.path == "/ksql":
                    self.send_json(*stand_in.answer_ksql(body))
                    return
                status, pieces = stand_in.query(body["ksql"])
                if status != 200:
                    self.send_json(status, json.loads("".join(pieces)))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for piece in pieces:  # pieces split messages anywhere, even mid-character
                    data = piece.encode("utf-8")
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                    time.sleep(0.01)
                self.wfile.write(b"0\r\n\r\n")

        return Handler


@pytest.fixture(scope="module")
def producer(kafka_broker: Broker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaInputProducer]:
    log = tmp_path_factory.mktemp("producer") / "producer.log"
    with JavaInputProducer.open(kafka_broker.bootstrap_servers, kafka_broker.lib, log) as p:
        yield p


@pytest.fixture
def stand_in(kafka_broker: Broker, producer: JavaInputProducer, tmp_path: Path) -> Iterator[tuple[StandIn, RestHarness]]:
    fake = StandIn()
    with standing_in(fake.handler()) as url:
        yield fake, RestHarness(kafka_broker.bootstrap_servers, RestClient(url), producer, tmp_path, wait=3.0)


def _case(tmp_path: Path, case: dict[str, Any]) -> Any:
    path = tmp_path / "cases.json"
    path.write_text(json.dumps({"tests": [case]}), encoding="utf-8")
    loaded = load_rest_file(path)
    assert loaded.problems == ()
    return loaded.cases[0]


CREATE = "CREATE STREAM S (K STRING KEY, V INT) WITH (kafka_topic='rest_in', value_format='JSON');"
PUSH = "SELECT K, V FROM S EMIT CHANGES LIMIT 2;"
HEADER = {"header": {"schema": "`K` STRING, `V` INTEGER"}}


def _push_case(rows: list[list[Any]]) -> dict[str, Any]:
    return {
        "name": "push",
        "statements": [CREATE, PUSH],
        "inputs": [
            {"topic": "rest_in", "timestamp": 0, "key": "a", "value": {"V": 1}},
            {"topic": "rest_in", "timestamp": 9, "key": "b", "value": {"V": 2}},
        ],
        "responses": [
            {"admin": {"@type": "currentStatus"}},
            {"query": [HEADER, *({"row": {"columns": r}} for r in rows), {"finalMessage": "Limit Reached"}]},
        ],
    }


def _streamed(messages: list[dict[str, Any]]) -> list[str]:
    text = "[" + ",\n".join(json.dumps(m) for m in messages) + "]"
    return [text[i : i + 7] for i in range(0, len(text), 7)]


def test_a_push_case_passes_and_its_inputs_keep_timestamp_zero(
    stand_in: tuple[StandIn, RestHarness], tmp_path: Path, kafka_broker: Broker
) -> None:
    fake, harness = stand_in
    seen_topic: list[list[Any]] = []

    def query(statement: str) -> tuple[int, list[str]]:
        records = read_topic(kafka_broker.bootstrap_servers, "rest_in")
        seen_topic.append([(r.timestamp, r.key, json.loads(r.value or b"null")) for r in records])
        rows = [{"row": {"columns": [r.key.decode(), json.loads(r.value)["V"]]}} for r in records]
        return 200, _streamed([{"header": {"queryId": "q", **HEADER["header"]}}, *rows, {"finalMessage": "Limit Reached"}])

    fake.query = query
    result = run_rest_case(_case(tmp_path, _push_case([["a", 1], ["b", 2]])), harness)
    assert result.status is Status.PASSED, result.reason
    assert seen_topic == [[(0, b"a", {"V": 1}), (9, b"b", {"V": 2})]]
    paths = [p for p, _ in fake.requests]
    assert paths[:2] == ["/ksql", "/query"]
    assert fake.requests[1][1]["streamsProperties"] == {"auto.offset.reset": "earliest"}
    assert fake.requests[0][1]["ksql"] == CREATE
    # clean-up: the stream is dropped and the case's topic is gone
    assert fake.sources == {}
    assert "rest_in" not in TopicAdmin(kafka_broker.bootstrap_servers).list_topics()


def test_a_different_row_fails_with_the_difference(stand_in: tuple[StandIn, RestHarness], tmp_path: Path) -> None:
    fake, harness = stand_in
    fake.query = lambda s: (200, _streamed([HEADER, {"row": {"columns": ["a", 1]}}, {"row": {"columns": ["b", 3]}}, {"finalMessage": "Limit Reached"}]))
    result = run_rest_case(_case(tmp_path, _push_case([["a", 1], ["b", 2]])), harness)
    assert result.status is Status.FAILED
    assert result.reason == (
        "Statement 2 `SELECT K, V FROM S EMIT CHANGES LIMIT 2;`: row 2 of 2: columns[1] "
        "expected 2 but was 3."
    )


def test_a_push_query_that_sends_too_few_rows_times_out(stand_in: tuple[StandIn, RestHarness], tmp_path: Path) -> None:
    fake, harness = stand_in
    case = _push_case([["a", 1], ["b", 2]])
    case["responses"][1]["query"].pop()  # no finalMessage: read until the rows came
    fake.query = lambda s: (200, _streamed([HEADER, {"row": {"columns": ["a", 1]}}]))
    result = run_rest_case(_case(tmp_path, case), harness)
    assert result.status is Status.FAILED
    assert result.reason.endswith("expected 2 rows but got 1.")


ERROR = {
    "type": "io.confluent.ksql.rest.entity.KsqlStatementErrorMessage",
    "message": "does not exist",
    "status": 400,
}


@pytest.mark.parametrize(
    ("body", "status", "verdict", "reason"),
    [
        ({"@type": "statement_error", "message": "NOPE does not exist."}, 400, Status.PASSED, ""),
        (
            {"@type": "statement_error", "message": "NOPE does not exist."},
            500,
            Status.FAILED,
            "Statement 1 `INSERT INTO NOPE (A) VALUES (1);`: HTTP status expected 400 but was 500.",
        ),
        (
            {"@type": "statement_error", "message": "kspark does not support inserts yet."},
            400,
            Status.UNSUPPORTED,
            "Unsupported feature: inserts.",
        ),
    ],
)
def test_expected_errors_match_on_type_message_and_status(
    stand_in: tuple[StandIn, RestHarness], tmp_path: Path, body: Any, status: int, verdict: Status, reason: str
) -> None:
    fake, harness = stand_in
    fake.ksql = lambda s: (status, body) if s.startswith("INSERT") else None
    case = _case(tmp_path, {"name": "e", "statements": ["INSERT INTO NOPE (A) VALUES (1);"], "expectedError": ERROR})
    result = run_rest_case(case, harness)
    assert (result.status, result.reason) == (verdict, reason)


def test_an_expected_error_that_never_comes_fails(stand_in: tuple[StandIn, RestHarness], tmp_path: Path) -> None:
    _, harness = stand_in
    case = _case(tmp_path, {"name": "e", "statements": [CREATE], "expectedError": ERROR})
    result = run_rest_case(case, harness)
    assert result.status is Status.FAILED
    assert "but every statement succeeded" in result.reason


def test_an_unexpected_error_answer_fails_the_case(stand_in: tuple[StandIn, RestHarness], tmp_path: Path) -> None:
    fake, harness = stand_in
    fake.query = lambda s: (400, [json.dumps({"@type": "statement_error", "message": "Pull queries are off."})])
    case = _case(tmp_path, {"name": "p", "statements": [CREATE, "SELECT * FROM S;"], "inputs": []})
    result = run_rest_case(case, harness)
    assert result.status is Status.FAILED
    assert result.reason == "Statement 2 `SELECT * FROM S;` answered HTTP 400: Pull queries are off."


def test_a_pull_query_is_asked_again_until_it_matches(stand_in: tuple[StandIn, RestHarness], tmp_path: Path) -> None:
    fake, harness = stand_in
    answers = iter([[HEADER], [HEADER], [HEADER, {"row": {"columns": ["a", 1]}}]])
    fake.query = lambda s: (200, _streamed(next(answers)))
    case = _case(
        tmp_path,
        {
            "name": "pull",
            "statements": [CREATE, "SELECT K, V FROM S WHERE K='a';"],
            "responses": [{"admin": {"@type": "currentStatus"}}, {"query": [HEADER, {"row": {"columns": ["a", 1]}}]}],
        },
    )
    result = run_rest_case(case, harness)
    assert result.status is Status.PASSED, result.reason
    assert sum(1 for p, _ in fake.requests if p == "/query") == 3


def test_outputs_are_read_back_without_the_inputs(
    stand_in: tuple[StandIn, RestHarness], tmp_path: Path, kafka_broker: Broker, producer: JavaInputProducer
) -> None:
    fake, harness = stand_in

    def insert(statement: str) -> Answer | None:
        if statement.startswith("INSERT"):  # the stand-in writes what a server would
            producer.send("rest_in", timestamp=77, key=b"z", value=b'{"V":26}')
            return 200, [{"@type": "currentStatus"}]
        return None

    fake.ksql = insert
    case = {
        "name": "insert",
        "statements": [CREATE, "INSERT INTO S (ROWTIME, K, V) VALUES (77, 'z', 26);"],
        "inputs": [{"topic": "rest_in", "key": "a", "value": {"V": 1}}],
        "outputs": [{"topic": "rest_in", "timestamp": 77, "key": "z", "value": {"V": 26}}],
    }
    assert run_rest_case(_case(tmp_path, case), harness).status is Status.PASSED
    case["outputs"][0]["value"] = {"V": 27}
    result = run_rest_case(_case(tmp_path, case), harness)
    assert result.status is Status.FAILED
    assert result.reason == "Topic 'rest_in' record 1 of 1: value.V expected 27 but was 26."


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        ("SELECT * FROM T WHERE K=1;", "pull"),
        ("  -- a comment\nselect * from s emit changes;", "push"),
        ("PRINT 'topic' FROM BEGINNING;", "push"),
        ("CREATE STREAM X AS SELECT * FROM S EMIT CHANGES;", "admin"),
        ("INSERT INTO S (A) VALUES (1);", "admin"),
    ],
)
def test_statements_go_to_the_right_endpoint(statement: str, kind: str) -> None:
    assert statement_kind(statement) == kind


def test_the_producer_line_protocol_encodes_nulls_and_headers() -> None:
    from engine.data.records import Header

    line = encode_line("t", partition=None, timestamp=0, key=None, value=b"v", headers=[Header("h", None)])
    assert line == "t\t-\t0\t-\tdg==\taA==:-\n"


def test_a_topic_a_create_statement_names_gets_its_partitions_else_four_as_in_ksqldb_runner(
    stand_in: tuple[StandIn, RestHarness], tmp_path: Path, kafka_broker: Broker
) -> None:
    fake, harness = stand_in
    admin = TopicAdmin(kafka_broker.bootstrap_servers)
    counts: list[tuple[int, int]] = []

    def query(statement: str) -> tuple[int, list[str]]:
        counts.append((admin.partition_count("rest_in"), admin.partition_count("rest_two")))
        return 200, _streamed([HEADER, {"row": {"columns": ["a", 1]}}, {"row": {"columns": ["b", 2]}},
                               {"finalMessage": "Limit Reached"}])

    fake.query = query
    case = _push_case([["a", 1], ["b", 2]])
    case["statements"].insert(1, "CREATE STREAM T (K STRING KEY, V INT) WITH (kafka_topic='rest_two', value_format='JSON', partitions=2);")
    case["responses"].insert(1, {"admin": {"@type": "currentStatus"}})
    result = run_rest_case(_case(tmp_path, case), harness)
    assert result.status is Status.PASSED, result.reason
    assert counts == [(4, 2)]


def test_a_reset_producer_writes_to_a_topic_made_again_with_fewer_partitions(
    kafka_broker: Broker, producer: JavaInputProducer
) -> None:
    # The harness deletes a case's topics, and the next case may make one of the same name
    # with fewer partitions: a producer that kept the old partitions sends the record to one
    # the topic lacks, and it expires after 30 s. ``reset`` (after the clean-up deletes topics)
    # makes a producer that reads the topic afresh.
    from engine.data.partitioner import partition_for

    admin = TopicAdmin(kafka_broker.bootstrap_servers)
    topic = f"remade_{uuid.uuid4().hex[:8]}"
    key = next(k for k in (b"a", b"b", b"c", b"d", b"e") if partition_for(k, 4) != 0)
    admin.create_topic(topic, 4)
    assert producer.send(topic, timestamp=1, key=key, value=b"{}")[0] == partition_for(key, 4)
    admin.delete_topic(topic)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics() and time.monotonic() < deadline:
        time.sleep(0.2)
    admin.create_topic(topic, 1)
    producer.reset()
    assert producer.send(topic, timestamp=2, key=key, value=b"{}") == (0, 0)


def test_pull_queries_of_a_proto_case_ask_for_ksqldbs_protobuf_form(
    stand_in: tuple[StandIn, RestHarness], tmp_path: Path
) -> None:
    fake, harness = stand_in
    proto_header = {"header": {"schema": "`K` STRING, `V` INTEGER", "protoSchema": "syntax = \"proto3\";"}}
    fake.query = lambda s: (200, _streamed([proto_header, {"row": {"protobufBytes": "CgFhEAE="}}]))
    case = _case(
        tmp_path,
        {
            "name": "proto",
            "testPullWithProtoFormat": True,
            "statements": [CREATE, "SELECT K, V FROM S WHERE K='a';"],
            "responses": [
                {"admin": {"@type": "currentStatus"}},
                {"query": [proto_header, {"row": {"protobufBytes": "CgFhEAE="}}]},
            ],
        },
    )
    result = run_rest_case(case, harness)
    assert result.status is Status.PASSED, result.reason
    asked = [a for (p, _), a in zip(fake.requests, fake.accepts, strict=True) if p == "/query"]
    assert asked == ["application/vnd.ksql.v1+protobuf"]


def test_a_proto_row_with_other_bytes_fails(stand_in: tuple[StandIn, RestHarness], tmp_path: Path) -> None:
    fake, harness = stand_in
    fake.query = lambda s: (200, _streamed([HEADER, {"row": {"protobufBytes": "CgFi"}}]))
    case = _case(
        tmp_path,
        {
            "name": "proto",
            "testPullWithProtoFormat": True,
            "statements": [CREATE, "SELECT K, V FROM S WHERE K='a';"],
            "responses": [{"admin": {}}, {"query": [HEADER, {"row": {"protobufBytes": "CgFh"}}]}],
        },
    )
    result = run_rest_case(case, harness)
    assert result.status is Status.FAILED
    assert "protobufBytes expected 'CgFh' but were \"CgFi\"" in result.reason


def test_defined_variables_go_with_the_later_requests(stand_in: tuple[StandIn, RestHarness], tmp_path: Path) -> None:
    fake, harness = stand_in
    fake.ksql = lambda s: (200, []) if s.upper().startswith(("DEFINE", "UNDEFINE")) else None
    case = _case(
        tmp_path,
        {
            "name": "vars",
            "statements": ["DEFINE topic = 'rest_in';", "DEFINE gone = 'x';", "UNDEFINE gone;",
                           "CREATE STREAM S (K STRING KEY, V INT) WITH (kafka_topic='${topic}', value_format='JSON');",
                           "SELECT * FROM S WHERE K = '${topic}';"],
        },
    )
    run_rest_case(case, harness)
    sent = [(p, b.get("sessionVariables")) for p, b in fake.requests if not b.get("ksql", "").startswith("SHOW")]
    assert sent[:5] == [
        ("/ksql", None),
        ("/ksql", {"TOPIC": "rest_in"}),
        ("/ksql", {"TOPIC": "rest_in", "GONE": "x"}),
        ("/ksql", {"TOPIC": "rest_in"}),
        ("/query", {"TOPIC": "rest_in"}),
    ]
