"""Topic administration: create, inspect, list and delete topics, and check the connection.

    admin = TopicAdmin("127.0.0.1:9092")
    admin.check_connection()                                  # bounded, names the address
    admin.create_topic("orders", partitions=3, configs={"cleanup.policy": "compact"})
    admin.partition_count("orders")                           # 3
    admin.delete_topic("orders")

Every call is bounded by ``timeout`` seconds (confluent-kafka alone would retry an
unreachable broker forever) and raises ``KafkaClientError`` naming the topic or address.
Creation and deletion return once the broker's metadata shows the change, so a produce
or a read right after them sees the topic as it now is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from engine.errors import KafkaClientError
from engine.kafka.client import LOG, client_config, error_text

DEFAULT_TIMEOUT = 30.0


# librdkafka errors that retrying does not mend: the cluster refuses these client settings.
CREDENTIALS_REFUSED = ("the broker refused the credentials (check sasl.mechanism and the user name and "
                       "password of sasl.jaas.config)")
TOKEN_REFUSED = ("no OAUTHBEARER token could be had (check sasl.oauthbearer.token.endpoint.url and the clientId "
                 "and clientSecret of sasl.jaas.config)")
TLS_FAILED = ("the TLS handshake failed (check ssl.truststore.*, ssl.keystore.* and "
              "ssl.endpoint.identification.algorithm)")
# A plain client at a TLS listener (or a TLS client at a plain one) is disconnected at its
# first request, each time. So is any client behind a proxy whose broker is away: this is
# said when the time is up, not taken for a refusal.
WRONG_PROTOCOL = ("the broker closed every connection before its first answer: does its listener speak "
                  "another protocol than security.protocol says?")
WRONG_PROTOCOL_AFTER = 3


class _Refusals(logging.Handler):
    """What librdkafka reports while a connection is checked, sorted into the reasons it cannot be mended."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.reasons: list[str] = []
        self.early_disconnects = 0

    def on_error(self, error: KafkaError) -> None:
        code, text = error.code(), error_text(error)
        if code == KafkaError._AUTHENTICATION and "OAUTHBEARER token" in text:
            # librdkafka's own login failed (the token endpoint refused or is away): no broker asked yet
            self.reasons.append(f"{TOKEN_REFUSED}: {text}")
        elif code == KafkaError._AUTHENTICATION:
            self.reasons.append(f"{CREDENTIALS_REFUSED}: {text}")
        elif code in (KafkaError._SSL, KafkaError._TRANSPORT) and "SSL routines" in text:
            # OpenSSL's own verdict (a certificate not trusted or refused); a TLS connection that
            # is only closed may be a broker away, which the timeout covers.
            self.reasons.append(f"{TLS_FAILED}: {text}")

    def emit(self, record: logging.LogRecord) -> None:
        if LOG.isEnabledFor(record.levelno):  # what the clients' logger would have shown
            LOG.handle(record)
        message = record.getMessage()
        if "incorrect security.protocol" in message or (
                "Disconnected" in message and "in state APIVERSION_QUERY" in message):
            self.early_disconnects += 1


def check_connection(bootstrap_servers: str, timeout: float = 10.0) -> None:
    """Raise ``KafkaClientError`` naming ``bootstrap_servers`` if no broker answers in time;
    at once when the broker refuses the client's credentials or the TLS handshake fails."""
    refusals = _Refusals()
    # librdkafka reports a disconnection at INFO: a logger of its own sees them all.
    watcher = logging.Logger(f"{LOG.name}.check", logging.DEBUG)
    watcher.addHandler(refusals)
    client = AdminClient(client_config(bootstrap_servers, error_cb=refusals.on_error, logger=watcher))
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.list_topics(timeout=min(0.5, max(0.05, deadline - time.monotonic())))
            return
        except KafkaException as exc:
            last = error_text(exc)
        client.poll(0)
        if refusals.reasons:
            raise KafkaClientError(f"Cannot connect to the Kafka broker at {bootstrap_servers}: {refusals.reasons[0]}.")
        if time.monotonic() >= deadline:
            hint = f" ({WRONG_PROTOCOL})" if refusals.early_disconnects >= WRONG_PROTOCOL_AFTER else ""
            raise KafkaClientError(
                f"Cannot reach the Kafka broker at {bootstrap_servers} within {timeout:g} s: {last}{hint}."
            )


class TopicAdmin:
    """Topic operations against the cluster at ``bootstrap_servers``."""

    def __init__(self, bootstrap_servers: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout = timeout
        self._client = AdminClient(client_config(bootstrap_servers))

    def check_connection(self) -> None:
        """Raise ``KafkaClientError`` unless a broker answers within the timeout."""
        self._metadata()

    def list_topics(self, *, internal: bool = False) -> list[str]:
        """The topic names, sorted; internal ones (``__consumer_offsets``, ...) on request."""
        topics = self._metadata().topics
        return sorted(name for name in topics if internal or not name.startswith("__"))

    def topic_exists(self, name: str) -> bool:
        """True if the topic exists."""
        return name in self._metadata().topics

    def partition_counts(self) -> dict[str, int]:
        """Every topic's partition count (internal ones left out), from one metadata request."""
        return {
            name: len(topic.partitions)
            for name, topic in self._metadata().topics.items()
            if not name.startswith("__") and not _unknown(topic.error)
        }

    def partition_count(self, name: str) -> int:
        """The number of partitions of an existing topic."""
        topic = self._metadata(name).topics.get(name)
        if topic is None or _unknown(topic.error):
            raise KafkaClientError(f"Topic '{name}' does not exist.")
        if topic.error is not None:
            raise KafkaClientError(f"Cannot describe topic '{name}': {error_text(topic.error)}.")
        return len(topic.partitions)

    def topic_consumers(self) -> dict[str, tuple[int, int]]:
        """Per topic: the consumers assigned one of its partitions and their consumer groups
        (what ksqlDB's LIST TOPICS EXTENDED counts); topics nobody consumes are left out."""
        try:
            listed = self._client.list_consumer_groups(request_timeout=self.timeout).result(self.timeout)
            ids = [group.group_id for group in listed.valid]
            if not ids:
                return {}
            described = self._client.describe_consumer_groups(ids, request_timeout=self.timeout)
            consumers: dict[str, int] = {}
            groups: dict[str, set[str]] = {}
            for group_id, future in described.items():
                for member in future.result(self.timeout).members:
                    topics = {p.topic for p in (member.assignment.topic_partitions if member.assignment else [])}
                    for topic in topics:
                        consumers[topic] = consumers.get(topic, 0) + 1
                        groups.setdefault(topic, set()).add(group_id)
        except KafkaException as exc:
            raise KafkaClientError(f"Cannot describe the consumer groups of {self.bootstrap_servers}: "
                                   f"{error_text(exc)}.") from None
        return {topic: (count, len(groups[topic])) for topic, count in consumers.items()}

    def describe_topic(self, name: str) -> tuple[int, int] | None:
        """An existing topic's partition count and replication factor (its least replicated
        partition's); None when there is no such topic."""
        topic = self._metadata(name).topics.get(name)
        if topic is None or topic.error is not None or not topic.partitions:
            return None
        return len(topic.partitions), min(len(p.replicas) for p in topic.partitions.values())

    def topic_config(self, name: str) -> dict[str, str]:
        """The topic's effective configuration (``cleanup.policy``, ``retention.ms``, ...)."""
        resource = ConfigResource(ConfigResource.Type.TOPIC, name)
        future = self._client.describe_configs([resource], request_timeout=self.timeout)[resource]
        try:
            entries = future.result(timeout=self.timeout)
        except KafkaException as exc:
            if _unknown(exc.args[0]):
                raise KafkaClientError(f"Topic '{name}' does not exist.") from None
            raise KafkaClientError(f"Cannot describe topic '{name}': {error_text(exc)}.") from None
        return {key: entry.value for key, entry in entries.items() if entry.value is not None}

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        configs: Mapping[str, str] | None = None,
        exist_ok: bool = False,
        replication_factor: int = 1,
    ) -> None:
        """Create ``name`` with ``partitions`` partitions, ``replication_factor`` and ``configs``.

        With ``exist_ok`` an existing topic is left as it is (whatever its partitions).
        """
        if partitions < 1:
            raise KafkaClientError(
                f"Cannot create topic '{name}': partitions must be at least 1, got {partitions}."
            )
        new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                       config={k: str(v) for k, v in (configs or {}).items()})
        future = self._client.create_topics(
            [new], operation_timeout=self.timeout, request_timeout=self.timeout
        )[name]
        try:
            future.result(timeout=self.timeout)
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                if exist_ok:
                    # Another client may have created it a moment ago: wait until this
                    # client's metadata shows it, so that reading its partitions next works.
                    self._await(name, lambda topic: topic is not None and not _unknown(topic.error)
                                and len(topic.partitions) > 0, "created")
                    return
                raise KafkaClientError(f"Topic '{name}' already exists.") from None
            raise KafkaClientError(f"Cannot create topic '{name}': {error_text(exc)}.") from None
        self._await(name, lambda topic: topic is not None and len(topic.partitions) == partitions
                    and all(p.leader >= 0 for p in topic.partitions.values()), "created")

    def delete_topic(self, name: str, *, missing_ok: bool = False) -> None:
        """Delete ``name``; a missing topic is an error unless ``missing_ok``."""
        future = self._client.delete_topics(
            [name], operation_timeout=self.timeout, request_timeout=self.timeout
        )[name]
        try:
            future.result(timeout=self.timeout)
        except KafkaException as exc:
            if _unknown(exc.args[0]):
                if missing_ok:
                    return
                raise KafkaClientError(f"Topic '{name}' does not exist.") from None
            raise KafkaClientError(f"Cannot delete topic '{name}': {error_text(exc)}.") from None
        self._await(name, lambda topic: topic is None or _unknown(topic.error), "deleted")

    # -- helpers -------------------------------------------------------------------------

    def _metadata(self, topic: str | None = None) -> Any:
        try:
            return self._client.list_topics(topic=topic, timeout=self.timeout)
        except KafkaException as exc:
            raise KafkaClientError(
                f"Cannot reach the Kafka broker at {self.bootstrap_servers} within "
                f"{self.timeout:g} s: {error_text(exc)}."
            ) from None

    def _await(self, name: str, done: Any, what: str) -> None:
        """Wait until the metadata of ``name`` satisfies ``done`` (the change propagated)."""
        deadline = time.monotonic() + self.timeout
        while True:
            topic = self._metadata().topics.get(name)
            if done(topic):
                return
            if time.monotonic() >= deadline:
                raise KafkaClientError(
                    f"Topic '{name}' was {what} but the broker's metadata did not show it "
                    f"within {self.timeout:g} s."
                )
            time.sleep(0.05)


def _unknown(error: Any) -> bool:
    return error is not None and error.code() in (
        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC
    )
