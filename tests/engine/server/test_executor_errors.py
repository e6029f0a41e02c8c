"""What ksqlDB's statement executors and streaming resources answer when they refuse: the
text, the HTTP status and the body (``statement_error`` naming the statement, or a
``generic_error`` for ksqlDB's request-level codes), over a service without Spark."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from engine.errors import KafkaClientError
from engine.kafka.admin import TopicAdmin
from engine.server.app import create_app
from engine.server.errors import ServiceError
from engine.server.service import KsqlService


@pytest.fixture(scope="module")
def service(kafka_broker, tmp_path_factory) -> Iterator[KsqlService]:
    service = KsqlService(
        kafka_broker.bootstrap_servers, f"executors_{uuid.uuid4().hex[:8]}", tmp_path_factory.mktemp("state"),
        run_queries=False, command_timeout=10.0,
    )
    service.start(timeout=30)
    yield service
    service.close()


@pytest.fixture(scope="module")
def client(service) -> Iterator[TestClient]:
    with TestClient(create_app(service), raise_server_exceptions=False) as c:
        yield c


def _refused(client: TestClient, path: str, body: dict[str, object], status: int) -> dict[str, object]:
    answer = client.post(path, json=body)
    assert answer.status_code == status, answer.text
    return answer.json()


def test_terminate_of_a_push_query_no_server_streams_fails_as_ksqldbs_executor_says(client) -> None:
    body = _refused(client, "/ksql", {"ksql": "TERMINATE transient_NOPE_42;"}, 400)
    assert body == {"@type": "generic_error", "error_code": 40000,
                    "message": "Failed to terminate query with query ID: 'TRANSIENT_NOPE_42'"}
    # an unknown persistent query's id is refused when the statement is validated
    body = _refused(client, "/ksql", {"ksql": "TERMINATE CSAS_NOPE_42;"}, 400)
    assert body["@type"] == "statement_error" and body["error_code"] == 40001
    assert body["message"] == "Unknown queryId: CSAS_NOPE_42" and body["statementText"] == "TERMINATE CSAS_NOPE_42;"


def test_a_failed_assertion_is_a_generic_error_with_417(client) -> None:
    topic = f"nope_{uuid.uuid4().hex[:8]}"
    body = _refused(client, "/ksql", {"ksql": f"ASSERT TOPIC `{topic}` TIMEOUT 0 SECONDS;"}, 417)
    assert body == {"@type": "generic_error", "error_code": 41700, "message": f"Topic {topic} does not exist"}


def test_query_without_a_statement_is_refused_in_ksqldbs_words(client) -> None:
    body = _refused(client, "/query", {"ksql": "  "}, 400)
    assert body == {"@type": "generic_error", "error_code": 40000, "message": '"ksql" field must be populated'}


def test_an_insert_naming_a_reserved_query_id_is_a_statement_error(client) -> None:
    name = f"S_{uuid.uuid4().hex[:6]}".upper()
    created = client.post("/ksql", json={"ksql": (
        f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', "
        f"PARTITIONS=1); CREATE STREAM {name}_COPY AS SELECT * FROM {name};"
    )})
    assert created.status_code == 200, created.text
    statement = f"INSERT INTO {name}_COPY WITH (QUERY_ID='ctas_mine') SELECT * FROM {name};"
    body = _refused(client, "/ksql", {"ksql": statement}, 400)
    assert body["@type"] == "statement_error" and body["error_code"] == 40001 and body["statementText"] == statement
    assert body["message"] == (
        "Query IDs must not start with a reserved query ID prefix (INSERTQUERY_, CTAS_, CSAS_, CST_). Got 'CTAS_MINE'."
    )


def test_a_source_on_a_missing_topic_without_partitions_is_refused_with_ksqldbs_example() -> None:
    from engine.parser import parse
    from engine.server.errors import ServiceError
    from engine.server.service import _require_topic_or_partitions

    def refusal(text: str, config: dict[str, object] | None = None) -> str:
        with pytest.raises(ServiceError) as refused:
            _require_topic_or_partitions(parse(text)[0].statement, {"here": None}, config or {})
        return refused.value.message

    intro = ("Topic 'nope' does not exist. If you want to create a new topic for the stream/table please re-run the "
             "statement providing the required 'PARTITIONS' configuration in the WITH clause (and optionally "
             "'REPLICAS'). For example: ")
    assert refusal("CREATE STREAM s (id STRING KEY, `v` INT) WITH (kafka_topic='nope', value_format='json');") == (
        intro + "CREATE STREAM S (ID STRING KEY, `v` INTEGER) WITH (KAFKA_TOPIC='nope', KEY_FORMAT='KAFKA', "
                "PARTITIONS=2, VALUE_FORMAT='JSON');")
    assert refusal("CREATE SOURCE TABLE IF NOT EXISTS T (ID INT PRIMARY KEY, H BYTES HEADER('h')) "
                   "WITH (kafka_topic='nope', format='AVRO');") == (
        intro + "CREATE SOURCE TABLE IF NOT EXISTS T (ID INTEGER PRIMARY KEY, H BYTES HEADER('h')) "
                "WITH (FORMAT='AVRO', KAFKA_TOPIC='nope', PARTITIONS=2);")
    assert refusal("CREATE STREAM S (V INT) WITH (kafka_topic='nope');",
                   {"ksql.persistence.default.format.value": "delimited"}).endswith(
        "WITH (KAFKA_TOPIC='nope', KEY_FORMAT='KAFKA', PARTITIONS=2, VALUE_FORMAT='DELIMITED');")
    # the topic exists, PARTITIONS creates it, or no value format (refused later in its own words)
    for text in ("CREATE STREAM S (V INT) WITH (kafka_topic='here', value_format='JSON');",
                 "CREATE STREAM S (V INT) WITH (kafka_topic='nope', value_format='JSON', partitions=1);",
                 "CREATE STREAM S (V INT) WITH (kafka_topic='nope');"):
        _require_topic_or_partitions(parse(text)[0].statement, {"here": None}, {})


def test_a_source_on_a_missing_topic_is_refused_by_the_server(client) -> None:
    topic = f"absent_{uuid.uuid4().hex[:8]}"
    statement = f"CREATE STREAM ABSENT (V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');"
    body = _refused(client, "/ksql", {"ksql": statement}, 400)
    assert body["@type"] == "generic_error" and body["error_code"] == 40000
    assert body["message"] == (
        f"Topic '{topic}' does not exist. If you want to create a new topic for the stream/table please re-run the "
        "statement providing the required 'PARTITIONS' configuration in the WITH clause (and optionally 'REPLICAS'). "
        f"For example: CREATE STREAM ABSENT (V INTEGER) WITH (KAFKA_TOPIC='{topic}', KEY_FORMAT='KAFKA', "
        "PARTITIONS=2, VALUE_FORMAT='JSON');"
    )


def test_an_existing_topic_must_have_the_partitions_replicas_and_retention_a_create_names() -> None:
    from engine.parser import parse
    from engine.server.errors import ServiceError
    from engine.server.service import _check_existing_topic

    def check(text: str) -> str | None:
        try:
            _check_existing_topic(parse(text)[0].statement, lambda topic: (1, 1, 604800000) if topic == "one" else None)
        except ServiceError as refused:
            assert refused.code == 50000
            return refused.message
        return None

    stream = "CREATE STREAM S (V INT) WITH (kafka_topic='one', value_format='JSON', {});"
    table = "CREATE TABLE T (K INT PRIMARY KEY, V INT) WITH (kafka_topic='one', value_format='JSON', {});"
    assert check(stream.format("partitions=3")) == (
        "A Kafka topic with the name 'one' already exists, with different partition/replica/retention configuration "
        "than required. KSQL expects 3 partitions (topic has 1), 1 replication factor (topic has 1), and 604800000 "
        "retention (topic has 604800000).")
    assert check(table.format("partitions=3, replicas=2")) == (
        "A Kafka topic with the name 'one' already exists, with different partition/replica configuration than "
        "required. KSQL expects 3 partitions (topic has 1), 2 replication factor (topic has 1).")
    assert check(stream.format("retention_ms=1000")) == (
        "A Kafka topic with the name 'one' already exists, with different partition/replica/retention configuration "
        "than required. KSQL expects 1 partitions (topic has 1), 1 replication factor (topic has 1), and 1000 "
        "retention (topic has 604800000).")
    # as the topic is, fewer replicas than it has, or a topic still to be created
    assert check(stream.format("partitions=1, replicas=1, retention_ms=604800000")) is None
    assert check(table.format("replicas=1")) is None
    assert check(stream.format("partitions=3").replace("'one'", "'new'")) is None


def test_drop_delete_topic_also_deletes_the_schemas_of_the_topic(kafka_broker, schema_registry, tmp_path,
                                                                  monkeypatch) -> None:
    from engine.serde.registry import registry_client

    service = KsqlService(
        kafka_broker.bootstrap_servers, f"dropper_{uuid.uuid4().hex[:8]}", tmp_path, run_queries=False,
        command_timeout=10.0, properties={"ksql.schema.registry.url": schema_registry.url},
    )
    service.start(timeout=30)
    try:
        topic = f"dropped_{uuid.uuid4().hex[:8]}"
        service.execute(f"CREATE STREAM DROPPED (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', PARTITIONS=1, "
                        "KEY_FORMAT='KAFKA', VALUE_FORMAT='AVRO');")
        service.execute("INSERT INTO DROPPED (ID, V) VALUES (1, 'a');")
        client = registry_client(schema_registry.url)
        assert f"{topic}-value" in client.get_subjects()
        service.execute("DROP STREAM DROPPED DELETE TOPIC;")
        assert f"{topic}-value" not in client.get_subjects()
        assert topic not in TopicAdmin(kafka_broker.bootstrap_servers).list_topics()

        # the registry refuses the deletion (not a 404), then the broker does
        import engine.serde.registry as registry

        real_client = registry.registry_client

        class Refusing:
            """The registry, refusing deletions (a CREATE still asks it for its subjects)."""

            def __init__(self, url: str) -> None:
                self.real = real_client(url)

            def __getattr__(self, name: str) -> Any:
                return getattr(self.real, name)

            def delete_subject(self, subject: str) -> None:
                raise type("SchemaRegistryError", (Exception,), {"http_status_code": 500})("boom")

        create = (f"CREATE STREAM DROPPED (ID INT KEY, V STRING) WITH (KAFKA_TOPIC='{topic}', PARTITIONS=1, "
                  "KEY_FORMAT='KAFKA', VALUE_FORMAT='AVRO');")
        service.execute(create)
        monkeypatch.setattr(registry, "registry_client", Refusing)
        with pytest.raises(ServiceError) as refused:
            service.execute("DROP STREAM DROPPED DELETE TOPIC;")
        assert refused.value.message == f"Could not clean up the schema registry for topic: {topic}"
        assert refused.value.code == 50000 and refused.value.statement_text == "DROP STREAM DROPPED DELETE TOPIC;"

        def unreachable(self, name: str, *, missing_ok: bool = False) -> None:
            raise KafkaClientError("Timed out waiting for the broker.")

        service.execute(create)
        monkeypatch.setattr(TopicAdmin, "delete_topic", unreachable)
        with pytest.raises(ServiceError) as refused:
            service.execute("DROP STREAM DROPPED DELETE TOPIC;")
        assert refused.value.message == f"Could not delete the corresponding kafka topic: {topic}"
    finally:
        service.close()
