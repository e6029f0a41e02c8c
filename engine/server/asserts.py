"""ASSERT [NOT EXISTS] TOPIC and ASSERT [NOT EXISTS] SCHEMA, as ksqlDB's server answers them.

    ASSERT TOPIC orders WITH (PARTITIONS=3, REPLICAS=1) TIMEOUT 5 SECONDS;
    ASSERT NOT EXISTS SCHEMA SUBJECT 'orders-value' TIMEOUT 2 SECONDS;

The condition is checked until it holds or the timeout (the statement's ``TIMEOUT``, else
``ksql.assert.topic.default.timeout.ms`` / ``ksql.assert.schema.default.timeout.ms``, 1 s)
has passed. It holds: an ``assert_topic`` / ``assert_schema`` entity. It does not: ksqlDB's
assertion failure, HTTP 417 with error code 41700 and the message saying what was found, or
why it could not be checked ("Cannot check topic existence: ...", "Cannot check schema
existence: ..."), a failure that is retried alike.
Nothing is written to the command log: an assertion changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from engine.errors import KafkaClientError
from engine.parser import ast
from engine.server.errors import ServiceError

ERROR_ASSERTION_FAILED = 41700
TOPIC_TIMEOUT = "ksql.assert.topic.default.timeout.ms"
SCHEMA_TIMEOUT = "ksql.assert.schema.default.timeout.ms"
DEFAULT_TIMEOUT_MS = 1000
_TOPIC_PROPERTIES = {"PARTITIONS": "partitions", "REPLICAS": "replicas"}
_POLL_S = 0.1


def _timeout_s(stmt: ast.AssertStatement, config: Mapping[str, Any], name: str) -> float:
    if stmt.timeout_ms is not None:
        return stmt.timeout_ms / 1000
    try:
        return int(str(config.get(name, DEFAULT_TIMEOUT_MS))) / 1000
    except ValueError:
        raise ServiceError(f"Invalid value for {name}: {config.get(name)!r} is not a number of milliseconds.") from None


def _until(check: Callable[[], str | None], timeout_s: float) -> str | None:
    """Call ``check`` until it returns None (the condition holds) or ``timeout_s`` passed;
    the last failure's message otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        failure = check()
        if failure is None or time.monotonic() >= deadline:
            return failure
        time.sleep(min(_POLL_S, max(deadline - time.monotonic(), 0)))


def assert_topic(stmt: ast.AssertStatement, text: str, admin: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``assert_topic`` entity, or ``ServiceError`` 41700 when the topic is not as asserted.

    ``admin`` answers ``describe_topic(topic) -> (partitions, replicas) | None`` (None: no such
    topic), as ``engine.kafka.admin.TopicAdmin`` does.
    """
    topic = str(stmt.target)
    unknown = sorted(k for k in stmt.properties if k.upper() not in _TOPIC_PROPERTIES)
    if unknown:
        raise ServiceError(f"Cannot assert unknown topic property: {', '.join(unknown)}")
    if not stmt.exists and stmt.properties:
        raise ServiceError("Cannot specify properties for topics that should not exist.")
    expected = {_TOPIC_PROPERTIES[k.upper()]: v for k, v in stmt.properties.items()}

    def check() -> str | None:
        try:
            found = admin.describe_topic(topic)
        except KafkaClientError as exc:  # ksqlDB's retries go on; the last failure is the answer
            return f"Cannot check topic existence: {exc}"
        if found is None:
            return f"Topic {topic} does not exist" if stmt.exists else None
        if not stmt.exists:
            return f"Topic {topic} exists"
        actual = dict(zip(("partitions", "replicas"), found, strict=True))
        wrong = [f"For config {name}, expected {value} got {actual[name]}"
                 for name, value in expected.items() if str(actual[name]) != str(value)]
        return f"Mismatched configuration for topic {topic}: {', '.join(wrong)}" if wrong else None

    failure = _until(check, _timeout_s(stmt, config, TOPIC_TIMEOUT))
    if failure is not None:
        raise ServiceError(failure, code=ERROR_ASSERTION_FAILED)
    return {"@type": "assert_topic", "statementText": text, "topicName": topic, "exists": stmt.exists,
            "warnings": []}


def assert_schema(stmt: ast.AssertStatement, text: str, registry: Any, config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``assert_schema`` entity, or ``ServiceError`` 41700 when the schema is not as asserted.

    ``registry`` answers ``exists(subject, schema_id) -> bool`` (either may be None, not both).
    """
    subject, schema_id = stmt.target, stmt.schema_id
    if subject is None and schema_id is None:
        raise ServiceError("ASSERT SCHEMA statements much include a subject name or an id")  # ksqlDB's words
    named = " ".join(part for part in (
        f"subject name {subject}" if subject is not None else "", f"id {schema_id}" if schema_id is not None else ""
    ) if part)

    def check() -> str | None:
        try:
            found = registry.exists(subject, schema_id)
        except SchemaLookupError as exc:  # ksqlDB's retries go on; the last failure is the answer
            return f"Cannot check schema existence: {exc}"
        if found and not stmt.exists:
            return f"Schema with {named} exists"
        if not found and stmt.exists:
            return f"Schema with {named} does not exist"
        return None

    failure = _until(check, _timeout_s(stmt, config, SCHEMA_TIMEOUT))
    if failure is not None:
        raise ServiceError(failure, code=ERROR_ASSERTION_FAILED)
    return {"@type": "assert_schema", "statementText": text, "subject": subject, "id": schema_id,
            "exists": stmt.exists, "warnings": []}


class SchemaLookupError(Exception):
    """The registry could not say whether a schema exists (unreachable, not configured, an
    error other than 'not found')."""


class RegistryLookup:
    """``exists(subject, schema_id)`` over a schema registry's Confluent API."""

    def __init__(self, url: str | None) -> None:
        self.url = url

    def exists(self, subject: str | None, schema_id: int | None) -> bool:
        if not self.url:
            raise SchemaLookupError("no schema registry is configured (set ksql.schema.registry.url).")
        from engine.serde.registry import registry_client

        client = registry_client(self.url)
        try:
            if schema_id is not None and subject is None:
                client.get_schema(int(schema_id))
                return True
            if schema_id is None:
                client.get_latest_version(subject)
                return True
            return int(schema_id) in {client.get_version(subject, v).schema_id for v in client.get_versions(subject)}
        except Exception as exc:  # the client raises SchemaRegistryError for 404s and others
            if getattr(exc, "http_status_code", None) == 404:
                return False
            raise SchemaLookupError(f"the schema registry at {self.url} answered: {exc}") from None
