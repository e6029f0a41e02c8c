"""ASSERT [NOT EXISTS] TOPIC / SCHEMA: entities when the assertion holds, 417/41700 when not."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from engine.errors import KafkaClientError
from engine.parser import parse
from engine.server.asserts import (
    ERROR_ASSERTION_FAILED,
    RegistryLookup,
    SchemaLookupError,
    assert_schema,
    assert_topic,
)
from engine.server.errors import ServiceError


def _stmt(text: str) -> Any:
    return parse(text)[0].statement


class _Topics:
    """A fake broker whose topic appears after ``appears_after`` describe calls."""

    def __init__(self, topics: dict[str, tuple[int, int]], appears_after: int = 0) -> None:
        self.topics, self.appears_after, self.calls = topics, appears_after, 0

    def describe_topic(self, topic: str) -> tuple[int, int] | None:
        self.calls += 1
        return self.topics.get(topic) if self.calls > self.appears_after else None


class _Registry:
    def __init__(self, schemas: dict[str, set[int]]) -> None:
        self.schemas = schemas

    def exists(self, subject: str | None, schema_id: int | None) -> bool:
        if subject is None:
            return any(schema_id in ids for ids in self.schemas.values())
        return subject in self.schemas and (schema_id is None or schema_id in self.schemas[subject])


def _failure(call: Any) -> ServiceError:
    with pytest.raises(ServiceError) as raised:
        call()
    assert raised.value.code == ERROR_ASSERTION_FAILED and raised.value.http_status == 417
    return raised.value


def test_a_topic_as_asserted_gives_ksqldbs_entity() -> None:
    text = "ASSERT TOPIC `orders` WITH (PARTITIONS=3, REPLICAS=1);"
    entity = assert_topic(_stmt(text), text, _Topics({"orders": (3, 1)}), {})
    assert entity == {"@type": "assert_topic", "statementText": text, "topicName": "orders", "exists": True,
                      "warnings": []}
    text = "ASSERT NOT EXISTS TOPIC `gone`;"
    assert assert_topic(_stmt(text), text, _Topics({}), {})["exists"] is False


@pytest.mark.parametrize(
    ("text", "topics", "message"),
    [
        ("ASSERT TOPIC `missing` TIMEOUT 0 SECONDS;", {}, "Topic missing does not exist"),
        ("ASSERT NOT EXISTS TOPIC `orders` TIMEOUT 0 SECONDS;", {"orders": (1, 1)}, "Topic orders exists"),
        ("ASSERT TOPIC `orders` WITH (PARTITIONS=3, REPLICAS=2) TIMEOUT 0 SECONDS;", {"orders": (1, 1)},
         "Mismatched configuration for topic orders: For config partitions, expected 3 got 1, "
         "For config replicas, expected 2 got 1"),
    ],
)
def test_a_topic_not_as_asserted_fails_with_what_was_found(text: str, topics: dict[str, Any], message: str) -> None:
    assert _failure(lambda: assert_topic(_stmt(text), text, _Topics(topics), {})).message == message


def test_the_check_is_repeated_until_the_timeout_and_the_default_comes_from_the_config() -> None:
    text = "ASSERT TOPIC `late` TIMEOUT 3 SECONDS;"
    topics = _Topics({"late": (1, 1)}, appears_after=3)
    assert assert_topic(_stmt(text), text, topics, {})["topicName"] == "late"
    assert topics.calls == 4
    text = "ASSERT TOPIC `never`;"
    started = time.monotonic()
    _failure(lambda: assert_topic(_stmt(text), text, _Topics({}), {"ksql.assert.topic.default.timeout.ms": "300"}))
    assert 0.25 <= time.monotonic() - started < 2.0


def test_bad_topic_properties_are_statement_errors() -> None:
    text = "ASSERT TOPIC `orders` WITH (RETENTION_MS=5);"
    with pytest.raises(ServiceError, match="Cannot assert unknown topic property: RETENTION_MS") as raised:
        assert_topic(_stmt(text), text, _Topics({"orders": (1, 1)}), {})
    assert raised.value.code == 40001


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ASSERT SCHEMA SUBJECT 'nope' TIMEOUT 0 SECONDS;", "Schema with subject name nope does not exist"),
        ("ASSERT SCHEMA ID 9 TIMEOUT 0 SECONDS;", "Schema with id 9 does not exist"),
        ("ASSERT SCHEMA SUBJECT 'orders-value' ID 9 TIMEOUT 0 SECONDS;",
         "Schema with subject name orders-value id 9 does not exist"),
        ("ASSERT NOT EXISTS SCHEMA SUBJECT 'orders-value' TIMEOUT 0 SECONDS;",
         "Schema with subject name orders-value exists"),
    ],
)
def test_a_schema_not_as_asserted_fails_with_what_was_found(text: str, message: str) -> None:
    registry = _Registry({"orders-value": {1}})
    assert _failure(lambda: assert_schema(_stmt(text), text, registry, {})).message == message


def test_a_schema_as_asserted_gives_ksqldbs_entity() -> None:
    text = "ASSERT SCHEMA SUBJECT 'orders-value' ID 1;"
    entity = assert_schema(_stmt(text), text, _Registry({"orders-value": {1}}), {})
    assert entity == {"@type": "assert_schema", "statementText": text, "subject": "orders-value", "id": 1,
                      "exists": True, "warnings": []}


def test_real_broker_and_registry(kafka_broker: Any, schema_registry: Any) -> None:
    from confluent_kafka.schema_registry import Schema

    from engine.kafka.admin import TopicAdmin
    from engine.serde.registry import registry_client

    topic = f"assert_{uuid.uuid4().hex[:8]}"
    admin = TopicAdmin(kafka_broker.bootstrap_servers)
    admin.create_topic(topic, 2)
    assert admin.describe_topic(topic) == (2, 1)
    assert admin.describe_topic(topic + "_missing") is None
    subject = f"{topic}-value"
    schema_id = registry_client(schema_registry.url).register_schema(
        subject, Schema('{"type":"record","name":"R","fields":[]}', "AVRO"))
    lookup = RegistryLookup(schema_registry.url)
    assert lookup.exists(subject, None) and lookup.exists(None, schema_id) and lookup.exists(subject, schema_id)
    assert not lookup.exists(subject + "x", None) and not lookup.exists(subject, schema_id + 1000)


def test_without_a_registry_a_schema_assertion_says_what_to_configure() -> None:
    text = "ASSERT SCHEMA ID 1 TIMEOUT 0 SECONDS;"
    failure = _failure(lambda: assert_schema(_stmt(text), text, RegistryLookup(None), {}))
    assert failure.message == (
        "Cannot check schema existence: no schema registry is configured (set ksql.schema.registry.url)."
    )


class _Unreachable:
    """A broker and a registry that cannot answer, then (after ``fails`` calls) do."""

    def __init__(self, fails: int) -> None:
        self.fails, self.calls = fails, 0

    def _answer(self) -> None:
        self.calls += 1
        if self.calls <= self.fails:
            raise KafkaClientError("Timed out waiting for the broker.")

    def describe_topic(self, topic: str) -> tuple[int, int] | None:
        self._answer()
        return (1, 1)

    def exists(self, subject: str | None, schema_id: int | None) -> bool:
        try:
            self._answer()
        except KafkaClientError as exc:
            raise SchemaLookupError(f"the schema registry answered: {exc}") from None
        return True


def test_an_assertion_that_cannot_be_checked_is_retried_then_fails_saying_why() -> None:
    text = "ASSERT TOPIC `orders` TIMEOUT 0 SECONDS;"
    failure = _failure(lambda: assert_topic(_stmt(text), text, _Unreachable(fails=99), {}))
    assert failure.message == "Cannot check topic existence: Timed out waiting for the broker."
    text = "ASSERT NOT EXISTS SCHEMA SUBJECT 'orders-value' TIMEOUT 0 SECONDS;"
    failure = _failure(lambda: assert_schema(_stmt(text), text, _Unreachable(fails=99), {}))
    assert failure.message == "Cannot check schema existence: the schema registry answered: Timed out waiting for the broker."
    # a failure to check is retried like a failed assertion: the broker answers on the third call
    text = "ASSERT TOPIC `orders` TIMEOUT 3 SECONDS;"
    broker = _Unreachable(fails=2)
    assert assert_topic(_stmt(text), text, broker, {})["topicName"] == "orders" and broker.calls == 3


def test_a_schema_assertion_without_timeout_waits_for_the_configured_default() -> None:
    text = "ASSERT SCHEMA SUBJECT 'never-value';"
    started = time.monotonic()
    _failure(lambda: assert_schema(_stmt(text), text, _Registry({}), {"ksql.assert.schema.default.timeout.ms": "300"}))
    assert 0.25 <= time.monotonic() - started < 2.0
    started = time.monotonic()
    _failure(lambda: assert_schema(_stmt(text), text, _Registry({}), {"ksql.assert.schema.default.timeout.ms": "1500"}))
    assert time.monotonic() - started >= 1.45
