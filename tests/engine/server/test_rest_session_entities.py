"""ksqlDB's session entities and extra answers over a real broker (no Spark): DEFINE / UNDEFINE /
SHOW VARIABLES and ``${name}`` substitution, warning entities, /is_valid_property, pull queries in
ksqlDB's protobuf form, scalable push query refusals, /ws/query."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.testclient import TestClient

from engine.kafka.admin import TopicAdmin
from engine.kafka.produce import ProducerRecord, produce
from engine.serde.protobuf import ProtoCodec
from engine.server.app import create_app
from engine.server.service import KsqlService

PROTOBUF = "application/vnd.ksql.v1+protobuf"


@pytest.fixture(scope="module")
def service(kafka_broker, tmp_path_factory) -> Iterator[KsqlService]:
    svc = KsqlService(
        kafka_broker.bootstrap_servers, f"se_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("state"),
        run_queries=False, command_timeout=5.0,
    )
    svc.start(timeout=30)
    yield svc
    svc.close()


@pytest.fixture(scope="module")
def client(service) -> Iterator[TestClient]:
    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        yield c


def _name(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}".upper()


# ---------------------------------------------------------------- variables


def test_define_substitutes_later_statements_and_show_variables_lists_the_session(client) -> None:
    name = _name("VAR")
    script = (
        f"DEFINE topic = '{name.lower()}'; DEFINE fmt = 'JSON';"
        f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='${{topic}}', VALUE_FORMAT='${{fmt}}', PARTITIONS=1);"
        "SHOW VARIABLES;"
    )
    answer = client.post("/ksql", json={"ksql": script, "sessionVariables": {"given": "1"}})
    assert answer.status_code == 200, answer.text
    created, listed = answer.json()  # DEFINE answers no entity, as in ksqlDB
    assert created["@type"] == "currentStatus"
    assert f"KAFKA_TOPIC='{name.lower()}'" in created["statementText"]
    assert listed == {
        "@type": "variables",
        "statementText": "SHOW VARIABLES;",
        "variables": [{"name": "given", "value": "1"}, {"name": "TOPIC", "value": name.lower()},
                      {"name": "FMT", "value": "JSON"}],
        "warnings": [],
    }
    described = client.post("/ksql", json={"ksql": f"DESCRIBE {name};"}).json()[0]
    assert described["sourceDescription"]["topic"] == name.lower()


def test_a_request_variable_reaches_a_query(client, service) -> None:
    name = _name("VQ")
    service.execute(f"CREATE SOURCE TABLE {name} (ID STRING PRIMARY KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                    "VALUE_FORMAT='JSON', PARTITIONS=1);")
    answer = client.post("/query", json={"ksql": "SELECT * FROM ${t} WHERE ID = '${k}';",
                                         "sessionVariables": {"t": name, "k": "a"}})
    assert answer.status_code == 200, answer.text
    assert answer.json()[0]["header"]["schema"] == "`ID` STRING KEY, `V` INTEGER"


def test_undefine_of_an_unknown_variable_is_a_warning(client) -> None:
    answer = client.post("/ksql", json={"ksql": "DEFINE a = 'x'; UNDEFINE a; UNDEFINE nope; SHOW VARIABLES;"})
    assert answer.status_code == 200, answer.text
    warning, listed = answer.json()
    assert warning == {"@type": "warning_entity", "statementText": "UNDEFINE nope;",
                       "message": "Cannot undefine variable 'NOPE' which was never defined", "warnings": []}
    assert listed["variables"] == []


# ---------------------------------------------------------------- warnings


def test_create_if_not_exists_of_an_existing_source_is_a_warning(client, service) -> None:
    name = _name("WE")
    create = f"CREATE STREAM IF NOT EXISTS {name} (ID STRING KEY) WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);"
    first = client.post("/ksql", json={"ksql": create}).json()[0]
    assert first["@type"] == "currentStatus"
    again = client.post("/ksql", json={"ksql": create}).json()[0]
    assert again == {"@type": "warning_entity", "statementText": create,
                     "message": f"Cannot add stream `{name}`: A stream with the same name already exists.",
                     "warnings": []}


# ---------------------------------------------------------------- /is_valid_property


@pytest.mark.parametrize(
    ("name", "status", "message"),
    [
        ("ksql.query.pull.table.scan.enabled", 200, None),
        ("ksql.streams.num.stream.threads", 200, None),
        ("auto.offset.reset", 200, None),
        ("ksql.functions.any.thing", 200, None),
        ("ksql.no.such.setting", 400, "Not recognizable as ksql, streams, consumer, or producer property: "
                                      "'ksql.no.such.setting'"),
        ("request.ksql.nope", 400, "Not recognizable as ksql, streams, consumer, or producer property"),
        ("bootstrap.servers", 400, "Cannot override property 'bootstrap.servers'"),
    ],
)
def test_is_valid_property_answers_true_or_why_not(client, name, status, message) -> None:
    answer = client.get(f"/is_valid_property/{name}")
    assert answer.status_code == status, answer.text
    if message is None:
        assert answer.json() is True
    else:
        body = answer.json()
        assert body["@type"] == "generic_error" and body["error_code"] == 40000
        assert message in body["message"]


# ---------------------------------------------------------------- protobuf pull queries


def test_a_pull_query_in_protobuf_form_answers_the_schema_and_the_rows_bytes(client, service, kafka_broker) -> None:
    name = _name("PB")
    service.execute(f"CREATE SOURCE TABLE {name} (ID STRING PRIMARY KEY, V INT, NAME STRING) WITH "
                    f"(KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(kafka_broker.bootstrap_servers, name.lower(), [
        ProducerRecord(key=b"a", value=json.dumps({"V": 1, "NAME": "x"}).encode(), timestamp=1),
    ])
    deadline = time.monotonic() + 30
    while True:
        answer = client.post("/query", json={"ksql": f"SELECT * FROM {name} WHERE ID = 'a';"},
                             headers={"Accept": PROTOBUF})
        assert answer.status_code == 200, answer.text
        messages = answer.json()
        if len(messages) > 1 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert answer.headers["content-type"].startswith(PROTOBUF)
    header, row = messages
    schema = 'syntax = "proto3";\n\nmessage ConnectDefault1 {\n  string ID = 1;\n  int32 V = 2;\n  string NAME = 3;\n}\n'
    assert header["header"]["protoSchema"] == schema
    assert header["header"]["schema"] == "`ID` STRING KEY, `V` INTEGER, `NAME` STRING"
    message = ProtoCodec.from_text(schema).message_class.FromString(base64.b64decode(row["row"]["protobufBytes"]))
    assert (message.ID, message.V, message.NAME) == ("a", 1, "x")
    stream_form = client.post("/query-stream", json={"sql": f"SELECT * FROM {name} WHERE ID = 'a';"},
                              headers={"Accept": PROTOBUF})
    assert stream_form.status_code == 200 and stream_form.json()[1] == row


def test_a_push_query_in_protobuf_form_is_refused(client, service) -> None:
    name = _name("PP")
    service.execute(f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                    "VALUE_FORMAT='JSON', PARTITIONS=1);")
    answer = client.post("/query", json={"ksql": f"SELECT * FROM {name} EMIT CHANGES;"}, headers={"Accept": PROTOBUF})
    assert answer.status_code == 406
    assert "only pull queries in ksqlDB's protobuf form" in answer.json()["message"]


# ---------------------------------------------------------------- scalable push queries


def test_a_scalable_push_query_is_refused_with_ksqldbs_message(service) -> None:
    from engine.server.errors import ServiceError

    name = _name("SP")
    service.execute(f"CREATE STREAM {name}_IN (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                    f"VALUE_FORMAT='JSON', PARTITIONS=1); CREATE STREAM {name} AS SELECT * FROM {name}_IN;")
    v2 = {"ksql.query.push.v2.enabled": True, "auto.offset.reset": "latest"}
    with pytest.raises(ServiceError) as refused:
        service.push_query(f"SELECT *, V AS W FROM {name} EMIT CHANGES;", v2)
    assert refused.value.http_status == 400
    assert refused.value.message == ("Scalable push queries only support wildcards in the projects if they are "
                                     "the only expression")
    # the same query is no scalable push query without v2: a transient push query takes it
    query = service.push_query(f"SELECT *, V AS W FROM {name} EMIT CHANGES;", {})
    assert not query.plan.query_id.startswith("SCALABLE_PUSH_QUERY_")
    service.close_push_query(query)


# ---------------------------------------------------------------- /ws/query


def _ws_messages(client: TestClient, params: dict[str, str], path: str = "/ws/query") -> tuple[list[Any], int, str]:
    """The text messages of a WebSocket query, its close code and reason."""
    from starlette.websockets import WebSocketDisconnect

    messages: list[Any] = []
    with client.websocket_connect(path + "?" + urlencode(params)) as socket:
        while True:
            try:
                messages.append(json.loads(socket.receive_text()))
            except WebSocketDisconnect as closed:
                return messages, closed.code, closed.reason


def test_a_pull_query_over_a_websocket_sends_schema_rows_and_done(client, service, kafka_broker) -> None:
    name = _name("WS")
    service.execute(f"CREATE SOURCE TABLE {name} (ID STRING PRIMARY KEY, V INT) WITH "
                    f"(KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    produce(kafka_broker.bootstrap_servers, name.lower(), [
        ProducerRecord(key=b"a", value=b'{"V": 1}', timestamp=1),
        ProducerRecord(key=b"b", value=b'{"V": 2}', timestamp=2),
    ])
    request = json.dumps({"ksql": f"SELECT * FROM {name} WHERE ID = 'b';", "streamsProperties": {}})
    deadline = time.monotonic() + 30
    while True:
        messages, code, reason = _ws_messages(client, {"request": request, "version": "1"}, "/ws/query")
        if len(messages) > 2 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    schema, row, end = messages
    assert schema == [
        {"name": "ID", "schema": {"type": "STRING", "fields": None, "memberSchema": None}, "type": "KEY"},
        {"name": "V", "schema": {"type": "INTEGER", "fields": None, "memberSchema": None}},
    ]
    assert row == {"row": {"columns": ["b", 2]}}
    assert end == {"error": "done"} and (code, reason) == (1000, "done")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "Error parsing request: missing request parameter"),
        ({"request": "{not json"}, "Error parsing request: "),
        ({"request": '{"ksql": ""}'}, 'Error parsing request: "ksql" field of "request" must be populated'),
        ({"request": '{"ksql": "SELECT 1;"}', "version": "7"}, "Received invalid api version: 7"),
        ({"request": '{"ksql": "SELECT * FROM X;", "streamsProperties": {"bootstrap.servers": "x"}}'},
         "Error parsing request: Cannot override property 'bootstrap.servers'"),
        ({"request": '{"ksql": "SELECT * FROM NO_SUCH_TABLE;"}'}, "NO_SUCH_TABLE does not exist."),
        ({"request": '{"ksql": "SELEKT * FROM X;"}'}, "Error parsing query: line 1:1: Syntax Error"),
        ({"request": '{"ksql": "SELECT * FROM X; SELECT * FROM Y;"}'},
         "Error parsing query: Expected exactly one KSQL statement; found 2 instead"),
    ],
)
def test_a_websocket_request_that_cannot_run_closes_with_1003_and_the_reason(client, params, message) -> None:
    messages, code, reason = _ws_messages(client, params)
    assert code == 1003
    assert messages[-1]["error"].startswith(message) and reason.startswith(message[:100])


def test_a_long_close_reason_is_cut_to_the_websocket_limit() -> None:
    from engine.server.ws_query import close_reason

    assert close_reason("short") == "short"
    cut = close_reason("é" * 200)
    assert len(cut.encode("utf-8")) <= 123 and cut.endswith("...")


def test_a_websocket_needs_credentials_when_the_server_asks_for_them(service, tmp_path) -> None:
    from starlette.websockets import WebSocketDisconnect

    from engine.server.auth import BasicAuth

    path = tmp_path / "users"
    path.write_text("fred: letmein, admin\n")
    with TestClient(create_app(service, BasicAuth.from_file(path)), raise_server_exceptions=False) as guarded:
        with pytest.raises(WebSocketDisconnect) as refused:
            with guarded.websocket_connect("/ws/query?" + urlencode({"request": '{"ksql": "SELECT 1;"}'})) as socket:
                socket.receive_text()
        assert refused.value.code == 1008
        credentials = base64.b64encode(b"fred:letmein").decode()
        with guarded.websocket_connect("/ws/query?" + urlencode({"request": '{"ksql": ""}'}),
                                       headers={"Authorization": f"Basic {credentials}"}) as socket:
            assert "must be populated" in json.loads(socket.receive_text())["error"]


def test_a_push_query_over_a_websocket_streams_value_columns_until_its_limit(client, service, spark) -> None:
    name = _name("WP")
    service.execute(f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                    f"VALUE_FORMAT='JSON', PARTITIONS=1); INSERT INTO {name} (ID, V) VALUES ('a', 7);")
    request = json.dumps({"ksql": f"SELECT * FROM {name} EMIT CHANGES LIMIT 1;",
                          "streamsProperties": {"auto.offset.reset": "earliest"}})
    messages, code, reason = _ws_messages(client, {"request": request}, "/ws/query")
    schema, row, end = messages
    assert [field["name"] for field in schema] == ["ID", "V"] and all("type" not in f for f in schema)
    assert row == {"row": {"columns": ["a", 7]}}
    assert end == {"error": "done"} and (code, reason) == (1000, "done")


def test_print_over_a_websocket_sends_each_record_as_a_json_string_until_its_limit(client, kafka_broker) -> None:
    topic = _name("wsprint").lower()
    TopicAdmin(kafka_broker.bootstrap_servers).create_topic(topic, 1)
    produce(kafka_broker.bootstrap_servers, topic, [
        ProducerRecord(key=b"a", value=b'{"V":1}', timestamp=1000),
        ProducerRecord(key=b"b", value=b'{"V":2}', timestamp=2000),
    ])
    request = json.dumps({"ksql": f"PRINT '{topic}' FROM BEGINNING LIMIT 2;"})
    messages, code, reason = _ws_messages(client, {"request": request, "version": "1"}, "/ws/query")
    records, end = messages[:-1], messages[-1]
    assert [m.split(", ", 1)[1] for m in records] == [
        'key: a, value: {"V":1}, partition: 0', 'key: b, value: {"V":2}, partition: 0']
    assert all(m.startswith("rowtime: ") for m in records)
    assert end == {"error": "done"} and (code, reason) == (1000, "done")
    missing = json.dumps({"ksql": "PRINT 'no_such_ws_topic' FROM BEGINNING;"})
    messages, code, _ = _ws_messages(client, {"request": missing, "version": "1"}, "/ws/query")
    assert messages == [{"error": "Topic does not exist, or KSQL does not have permission to list the topic: "
                                  "no_such_ws_topic"}] and code == 1003
