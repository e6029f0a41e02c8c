"""ksqlDB's REST API as its clients meet it: media types, request fields, EXTENDED entities,
session variables on the query endpoints (TestClient over a service without Spark)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from engine.parser import parse
from engine.server.app import create_app, negotiate
from engine.server.errors import ServiceError
from engine.server.service import KsqlService


@pytest.fixture(scope="module")
def service(kafka_broker, tmp_path_factory) -> Iterator[KsqlService]:
    service = KsqlService(
        kafka_broker.bootstrap_servers, f"shapes_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("state"),
        run_queries=False, command_timeout=5.0,
    )
    service.start(timeout=30)
    yield service
    service.close()


@pytest.fixture(scope="module")
def client(service) -> Iterator[TestClient]:
    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize(
    ("accept", "route", "media"),
    [
        (None, 0, None),
        ("*/*", 0, None),
        ("application/json", 0, "application/json"),
        ("application/vnd.ksql.v1+json", 0, "application/vnd.ksql.v1+json"),
        ("application/vnd.ksqlapi.delimited.v1", 1, "application/vnd.ksqlapi.delimited.v1"),
        ("text/html;q=0.9, application/vnd.ksqlapi.delimited.v1;q=0.5, application/json;q=0.1", 0,
         "application/json"),
        ("application/vnd.ksql.v1+protobuf", 2, "application/vnd.ksql.v1+protobuf"),
    ],
)
def test_query_picks_ksqldbs_route_for_the_accept_header(accept, route, media) -> None:
    from engine.server.app import QUERY_ROUTES

    assert negotiate(accept, QUERY_ROUTES) == (route, media)


def test_a_media_type_no_route_produces_is_refused_with_406() -> None:
    from engine.server.app import OLD_API

    with pytest.raises(ServiceError) as refused:
        negotiate("text/html", (OLD_API,))
    assert refused.value.http_status == 406


@pytest.mark.parametrize("accept", ["application/vnd.ksql.v1+json", "application/json", "*/*", None])
def test_ksql_answers_requests_accepting_ksqldbs_json(client, accept) -> None:
    headers = {"Accept": accept} if accept else {}
    answer = client.post("/ksql", json={"ksql": "LIST STREAMS;"}, headers=headers)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert answer.json()[0]["@type"] == "streams"


@pytest.mark.parametrize("path", ["/ksql", "/query", "/info"])
def test_an_unacceptable_media_type_gets_406(client, path) -> None:
    method = "GET" if path == "/info" else "POST"
    answer = client.request(method, path, json={"ksql": "LIST STREAMS;"}, headers={"Accept": "text/html"})
    assert answer.status_code == 406 and answer.json()["error_code"] == 40600


def test_query_stream_accepts_request_properties(client) -> None:
    body = {"sql": "SELECT * FROM NO_SUCH_SOURCE EMIT CHANGES;", "properties": {},
            "requestProperties": {"request.ksql.query.push.skip.forwarding": True}}
    answer = client.post("/query-stream", json=body)
    assert answer.status_code == 400 and "NO_SUCH_SOURCE" in answer.json()["message"], answer.text


@pytest.mark.parametrize(
    ("path", "field"),
    [("/query", "ksql"), ("/query-stream", "sql")],
)
@pytest.mark.parametrize("emit", ["", " EMIT CHANGES"])
def test_session_variables_are_substituted_on_the_query_endpoints(client, path, field, emit) -> None:
    name = f"MISSING_{uuid.uuid4().hex[:6]}".upper()
    body = {field: f"SELECT * FROM ${{source}}{emit};", "sessionVariables": {"source": name}}
    answer = client.post(path, json=body)
    assert answer.status_code == 400 and name in answer.json()["message"], answer.text


def test_query_endpoint_properties_follow_ksqldbs_rules(client) -> None:
    body = {"ksql": "SELECT * FROM X EMIT CHANGES;", "streamsProperties": {"ksql.streams.auto.offset.reset": "none"}}
    answer = client.post("/query", json=body)
    assert answer.status_code == 400
    assert answer.json()["message"] == "'none' is not valid for this property within KSQL"


def test_set_of_a_ksql_streams_property_is_read_under_its_plain_name(service) -> None:
    properties: dict = {}
    service._execute_one(parse("SET 'ksql.streams.auto.offset.reset'='earliest';")[0].statement, "", properties, {})
    assert properties == {"auto.offset.reset": "earliest"}


def test_set_names_a_property_ksqldb_defines_and_the_server_lets_override(client) -> None:
    unknown = client.post("/ksql", json={"ksql": "SET 'ksql.no.such.setting'='1';"})
    assert unknown.status_code == 400
    assert unknown.json()["message"] == "Unknown property: ksql.no.such.setting"
    denied = client.post("/ksql", json={"ksql": "SET 'ksql.service.id'='other';"})
    assert denied.status_code == 400
    assert denied.json()["message"] == (
        "One or more properties overrides set locally are prohibited by the KSQL server denylist "
        "(use UNSET to reset their default value): [ksql.service.id]"
    )


def test_show_queries_extended_answers_query_descriptions(client) -> None:
    answer = client.post("/ksql", json={"ksql": "SHOW QUERIES EXTENDED;"})
    assert answer.status_code == 200, answer.text
    entity = answer.json()[0]
    assert entity["@type"] == "query_descriptions" and entity["queryDescriptions"] == []
    assert client.post("/ksql", json={"ksql": "SHOW QUERIES;"}).json()[0]["@type"] == "queries"


def test_list_topics_extended_answers_consumer_counts(client, service) -> None:
    name = f"ext_{uuid.uuid4().hex[:6]}"
    statement = (f"CREATE STREAM {name.upper()} (ID STRING KEY, V INT) "
                 f"WITH (KAFKA_TOPIC='{name}', VALUE_FORMAT='JSON', PARTITIONS=2);")
    assert client.post("/ksql", json={"ksql": statement}).status_code == 200
    answer = client.post("/ksql", json={"ksql": "LIST TOPICS EXTENDED;"})
    assert answer.status_code == 200, answer.text
    entity = answer.json()[0]
    assert entity["@type"] == "kafka_topics_extended"
    topic = next(t for t in entity["topics"] if t["name"] == name)
    assert topic == {"name": name, "replicaInfo": [1, 1], "consumerCount": 0, "consumerGroupCount": 0}
    plain = client.post("/ksql", json={"ksql": "LIST TOPICS;"}).json()[0]
    assert plain["@type"] == "kafka_topics" and "consumerCount" not in plain["topics"][0]


def test_list_topics_hides_ksqldbs_hidden_topics_and_list_all_topics_shows_them(client) -> None:
    """ksqlDB's ReservedInternalTopics: internal topics (_confluent-ksql-...) and the patterns of
    ksql.hidden.topics are left out of LIST TOPICS; another topic starting with '_' is listed."""
    name = f"_own_{uuid.uuid4().hex[:8]}"
    statement = (f"CREATE STREAM S{name.upper()} (ID STRING KEY, V INT) "
                 f"WITH (KAFKA_TOPIC='{name}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert client.post("/ksql", json={"ksql": statement}).status_code == 200
    for listing in ("LIST TOPICS;", "LIST TOPICS EXTENDED;"):
        names = [t["name"] for t in client.post("/ksql", json={"ksql": listing}).json()[0]["topics"]]
        assert name in names and not any(n.startswith("_confluent-ksql-") for n in names), listing
    for listing in ("LIST ALL TOPICS;", "SHOW ALL TOPICS EXTENDED;"):
        names = [t["name"] for t in client.post("/ksql", json={"ksql": listing}).json()[0]["topics"]]
        assert name in names and any(n.startswith("_confluent-ksql-") for n in names), listing


def test_a_topic_is_hidden_by_the_internal_prefix_and_the_configured_patterns() -> None:
    from engine.facade.engine import is_hidden_topic

    assert is_hidden_topic("_confluent-ksql-svc_command_topic", {})
    assert is_hidden_topic("_schemas", {}) and is_hidden_topic("__consumer_offsets", {})
    assert not is_hidden_topic("_orders", {}) and not is_hidden_topic("svcksql_processing_log", {})
    configured = {"ksql.hidden.topics": "secret_.*, audit"}
    assert is_hidden_topic("secret_plans", configured) and is_hidden_topic("audit", configured)
    assert not is_hidden_topic("_schemas", configured)  # the configured list replaces ksqlDB's default
    assert is_hidden_topic("_confluent-ksql-svc_metastore_sources", configured)  # internal topics always


def test_print_of_a_missing_topic_is_refused_with_ksqldbs_words(client) -> None:
    answer = client.post("/query", json={"ksql": "PRINT 'no_such_topic_here' FROM BEGINNING;"})
    assert answer.status_code == 400
    assert answer.json() == {
        "@type": "generic_error", "error_code": 40000,
        "message": "Could not find topic 'no_such_topic_here', or the KSQL user does not have permissions to list the "
                   "topic. Topic names are case-sensitive.",
    }


def test_root_redirects_to_info_and_container_health_checks_answer(client) -> None:
    root = client.get("/", follow_redirects=False)
    assert root.status_code == 307 and root.headers["location"] == "/info"
    for path in ("/chc/ready", "/chc/live"):
        answer = client.get(path)
        assert answer.status_code == 200 and answer.json() == {}


def test_list_tables_and_streams_extended_answer_their_entities(client) -> None:
    name = f"T_{uuid.uuid4().hex[:6]}".upper()
    statement = (f"CREATE TABLE {name} (ID STRING PRIMARY KEY, V INT) "
                 f"WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    assert client.post("/ksql", json={"ksql": statement}).status_code == 200
    [tables] = client.post("/ksql", json={"ksql": "LIST TABLES;"}).json()
    assert tables["@type"] == "tables" and name in [t["name"] for t in tables["tables"]]
    [described] = client.post("/ksql", json={"ksql": "LIST TABLES EXTENDED;"}).json()
    assert described["@type"] == "source_descriptions"
    assert name in [d["name"] for d in described["sourceDescriptions"]]


def test_close_query_of_an_unknown_id_and_cluster_status(client) -> None:
    closed = client.post("/close-query", json={"queryId": "transient_NOPE_1"})
    assert closed.status_code == 400 and closed.json()["message"] == "No query with id transient_NOPE_1"
    status = client.get("/clusterStatus")
    assert status.status_code == 200 and status.json()["clusterStatus"]
