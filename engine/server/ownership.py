"""Which server of a service runs which persistent query: Kafka group membership, as Kafka
Connect assigns work to its workers.

    ownership = QueryOwnership(bootstrap, "my_service", "127.0.0.1:8088",
                               on_assigned=start_these, on_revoked=stop_these)
    ownership.start()                 # join the service's group; callbacks follow
    ownership.owns("CSAS_S_0")        # does this server run the query now?
    ownership.owner_of("CSAS_S_0")    # which server does (any server can tell)
    ownership.publish("CSAS_S_0", "RUNNING")   # the query's state, for every server to read
    ownership.close()                 # stop owned queries, leave the group

Every server of a service is a member of one consumer group, ``_confluent-ksql-<service
id>_query_owners``, subscribed to one internal topic, ``_confluent-ksql-<service
id>_query_assignment`` (``PARTITIONS`` partitions, never written). A query belongs to the
partition ``crc32(query id) % PARTITIONS``; the server the group coordinator assigns that
partition to runs the query. The group uses the cooperative-sticky assignor: when a server
joins or leaves, only the partitions that move are revoked, so queries that stay keep
running.

- Assignment: ``on_assigned(partitions)`` is called once the partitions are this server's;
  it starts their queries from their checkpoints (under the shared state dir).
- Revocation (a rebalance moves the partition, or this server leaves): ``on_revoked`` is
  called inside the rebalance and must stop the queries before it returns, so a query is
  stopped here before another server is handed its partition.
- Loss (this server missed its session timeout, e.g. it was paused): the same, although
  the others may have started the query already; the sink's transactional ids fence this
  server's writes (``engine.runtime.kafka_sink``).
- A server killed with SIGKILL stops heartbeating; after the session timeout the
  coordinator hands its partitions to the others.

Query states travel on a third internal topic, ``_confluent-ksql-<service id>_query_status``
(compacted, one partition): the owner writes ``{"owner", "state", "error"}`` under the query
id when the query starts, fails or restarts, and a tombstone when it is terminated. Every
server reads it from the beginning, so ``LIST QUERIES`` on any server shows each query's
state and owner.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from engine.errors import KafkaClientError, KsqlError
from engine.kafka.admin import TopicAdmin
from engine.kafka.client import client_config, error_text

LOG = logging.getLogger("engine.server.ownership")
PARTITIONS = 12
SESSION_TIMEOUT_MS = 6000  # the broker's smallest allowed (group.min.session.timeout.ms)
HEARTBEAT_MS = 1000
MEMBERS_CACHE_S = 0.5


def assignment_topic(service_id: str) -> str:
    return f"_confluent-ksql-{service_id}_query_assignment"


def status_topic(service_id: str) -> str:
    return f"_confluent-ksql-{service_id}_query_status"


def owners_group(service_id: str) -> str:
    return f"_confluent-ksql-{service_id}_query_owners"


def partition_of(query_id: str, partitions: int = PARTITIONS) -> int:
    """The assignment partition a query belongs to (stable across servers and restarts)."""
    return zlib.crc32(query_id.encode("utf-8")) % partitions


@dataclass(frozen=True, slots=True)
class QueryStatus:
    """A query's state as its owner last published it."""

    owner: str
    state: str  # RUNNING, ERROR
    error: str | None = None


class QueryOwnership:
    """This server's membership in its service's query-owner group and the queries' states."""

    def __init__(
        self,
        bootstrap_servers: str,
        service_id: str,
        server_id: str,
        *,
        on_assigned: Callable[[set[int]], None],
        on_revoked: Callable[[set[int]], None],
        partitions: int = PARTITIONS,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        timeout: float = 30.0,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.service_id = service_id
        self.server_id = server_id
        self.partitions = partitions
        self.session_timeout_ms = session_timeout_ms
        self.timeout = timeout
        self._on_assigned = on_assigned
        self._on_revoked = on_revoked
        self._owned: set[int] = set()
        self._statuses: dict[str, QueryStatus] = {}
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._producer: Producer | None = None
        self._members: tuple[float, dict[str, set[int]]] = (0.0, {})
        self._admin: AdminClient | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Create the internal topics, join the group and follow the statuses (a thread)."""
        admin = TopicAdmin(self.bootstrap_servers, timeout=self.timeout)
        admin.create_topic(assignment_topic(self.service_id), self.partitions,
                           configs={"retention.ms": "-1"}, exist_ok=True)
        self.partitions = admin.partition_count(assignment_topic(self.service_id))  # an older count stays
        admin.create_topic(status_topic(self.service_id), 1, configs={"cleanup.policy": "compact"}, exist_ok=True)
        self._admin = AdminClient(client_config(self.bootstrap_servers))
        self._producer = Producer(client_config(self.bootstrap_servers, **{"acks": "all", "linger.ms": 0}))
        group = Consumer(client_config(
            self.bootstrap_servers,
            **{
                "group.id": owners_group(self.service_id),
                "client.id": self.server_id,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": self.session_timeout_ms,
                "heartbeat.interval.ms": min(HEARTBEAT_MS, self.session_timeout_ms // 3),
                "enable.auto.commit": False,
            },
        ))
        group.subscribe([assignment_topic(self.service_id)], on_assign=self._assign,
                        on_revoke=self._revoke, on_lost=self._revoke)
        statuses = Consumer(client_config(
            self.bootstrap_servers,
            **{"group.id": f"kspark-query-status-{uuid.uuid4().hex}", "enable.auto.commit": False,
               "enable.partition.eof": False, "fetch.wait.max.ms": 50},
        ))
        statuses.assign([TopicPartition(status_topic(self.service_id), 0, OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._run, args=(group, statuses),
                                        name=f"query-ownership-{self.service_id}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Leave the group: owned queries are stopped (``on_revoked``) before the others get them."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
        if self._producer is not None:
            self._producer.flush(5)

    def _run(self, group: Consumer, statuses: Consumer) -> None:
        try:
            while not self._stop.is_set():
                group.poll(0.1)  # drives heartbeats' results and the rebalance callbacks
                for message in statuses.consume(num_messages=100, timeout=0.1):
                    if message.error() is None:
                        self._read_status(message.key(), message.value())
        except Exception:  # noqa: BLE001 - a dead membership thread must be visible in the log
            LOG.exception("query ownership of service %s stopped", self.service_id)
        finally:
            try:
                group.close()  # revokes (stops owned queries), then leaves the group at once
            except Exception:  # noqa: BLE001 - closing after a failure
                LOG.exception("leaving the query-owner group failed")
            statuses.close()

    # ------------------------------------------------------------------ assignments

    def _assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        added = {p.partition for p in partitions}
        with self._changed:
            self._owned |= added
            self._changed.notify_all()
        LOG.info("server %s got query partitions %s", self.server_id, sorted(added))
        if added:
            self._on_assigned(added)

    def _revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        removed = {p.partition for p in partitions}
        with self._changed:
            self._owned -= removed
            self._changed.notify_all()
        LOG.info("server %s gives up query partitions %s", self.server_id, sorted(removed))
        if removed:
            self._on_revoked(removed)  # the queries stop before the partitions are released

    def partition_of(self, query_id: str) -> int:
        return partition_of(query_id, self.partitions)

    def owns(self, query_id: str) -> bool:
        """Whether this server is to run the query now."""
        with self._changed:
            return self.partition_of(query_id) in self._owned

    def owned_partitions(self) -> set[int]:
        with self._changed:
            return set(self._owned)

    def members(self) -> dict[str, set[int]]:
        """The live servers of the service (their ids) and the partitions each owns."""
        fetched_at, members = self._members
        if time.monotonic() - fetched_at < MEMBERS_CACHE_S:
            return members
        if self._admin is None:
            return {self.server_id: self.owned_partitions()}
        group = owners_group(self.service_id)
        try:
            description = self._admin.describe_consumer_groups([group], request_timeout=5)[group].result(timeout=10)
        except KafkaException as exc:
            # An admin client whose describe failed while the broker was away never describes
            # a group again once it is back (librdkafka's group requests time out for good).
            self._admin = AdminClient(client_config(self.bootstrap_servers))
            raise KafkaClientError(f"Cannot describe the query-owner group '{group}': {error_text(exc)}.") from None
        members = {}
        for member in description.members:
            owned = member.assignment.topic_partitions if member.assignment is not None else []
            members.setdefault(member.client_id, set()).update(p.partition for p in owned)
        self._members = (time.monotonic(), members)
        return members

    def owner_of(self, query_id: str, members: dict[str, set[int]] | None = None) -> str | None:
        """The server running the query now (None while a rebalance moves it); ``members`` as
        ``members()`` answered, or asked now."""
        if self.owns(query_id):
            return self.server_id
        partition = self.partition_of(query_id)
        for server, owned in (self.members() if members is None else members).items():
            if partition in owned:
                return server
        return None

    def queries_of(self, partitions: Iterable[int], query_ids: Iterable[str]) -> list[str]:
        """The queries among ``query_ids`` that belong to ``partitions``."""
        wanted = set(partitions)
        return [q for q in query_ids if self.partition_of(q) in wanted]

    # ------------------------------------------------------------------ states

    def publish(self, query_id: str, state: str | None, error: str | None = None) -> None:
        """Write the state of a query this server runs (None: the query is gone)."""
        if self._producer is None:
            return
        value = None if state is None else json.dumps(
            {"owner": self.server_id, "state": state, "error": error}, sort_keys=True).encode("utf-8")
        self._producer.produce(status_topic(self.service_id), key=query_id.encode("utf-8"), value=value)
        self._producer.poll(0)

    def _read_status(self, key: bytes | None, value: bytes | None) -> None:
        if key is None:
            return
        query_id = key.decode("utf-8", "replace")
        with self._changed:
            if value is None:
                self._statuses.pop(query_id, None)
            else:
                try:
                    raw = json.loads(value)
                    self._statuses[query_id] = QueryStatus(str(raw["owner"]), str(raw["state"]), raw.get("error"))
                except (ValueError, KeyError, TypeError):
                    LOG.warning("unreadable status of query %s: %r", query_id, value[:200])
            self._changed.notify_all()

    def status_of(self, query_id: str) -> QueryStatus | None:
        with self._changed:
            return self._statuses.get(query_id)

    def wait_published(self, query_id: str, timeout: float) -> QueryStatus | None:
        """Wait until some server has published the query's state (started or failed)."""
        with self._changed:
            self._changed.wait_for(lambda: query_id in self._statuses, timeout)
            return self._statuses.get(query_id)


RETRY_BACKOFF_INITIAL = "ksql.query.retry.backoff.initial.ms"
RETRY_BACKOFF_MAX = "ksql.query.retry.backoff.max.ms"


class Backoff:
    """When to restart a failed query: 1 s, 2 s, 4 s ... up to ``limit`` seconds after each failure."""

    def __init__(self, first: float = 1.0, limit: float = 60.0) -> None:
        self.first = first
        self.limit = limit
        self._failures: dict[str, int] = {}
        self._due: dict[str, float] = {}

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> Backoff:
        """The backoff a server's config sets with ksqlDB's ``ksql.query.retry.backoff.initial.ms``
        and ``ksql.query.retry.backoff.max.ms`` (kspark's 1 s and 60 s where it sets neither:
        ksqlDB's 15 s and 15 min leave a query down long after a broker came back)."""
        first = _milliseconds(properties, RETRY_BACKOFF_INITIAL, 1000)
        limit = _milliseconds(properties, RETRY_BACKOFF_MAX, max(60_000, first))
        if limit < first:
            raise KsqlError(f"{RETRY_BACKOFF_MAX} ({limit}) is less than {RETRY_BACKOFF_INITIAL} ({first}): the "
                            "longest wait before a failed query restarts cannot be shorter than the first.")
        return cls(first=first / 1000, limit=limit / 1000)

    def failed(self, query_id: str, now: float | None = None) -> float:
        """Record a failure; the delay before the next attempt."""
        count = self._failures.get(query_id, 0) + 1
        self._failures[query_id] = count
        delay = min(self.first * 2 ** (count - 1), self.limit)
        self._due[query_id] = (time.monotonic() if now is None else now) + delay
        return delay

    def due(self, now: float | None = None) -> list[str]:
        """The failed queries whose restart time has come (each returned once per failure)."""
        at = time.monotonic() if now is None else now
        ready = [q for q, t in self._due.items() if t <= at]
        for query_id in ready:
            del self._due[query_id]
        return ready

    def retry_now(self, query_id: str, now: float | None = None) -> None:
        """Have the query restarted at the next ``due`` without counting a failure."""
        self._due[query_id] = time.monotonic() if now is None else now

    def forget(self, query_id: str) -> None:
        self._failures.pop(query_id, None)
        self._due.pop(query_id, None)

    def failures(self, query_id: str) -> int:
        return self._failures.get(query_id, 0)


def _milliseconds(properties: Mapping[str, Any], name: str, default: int) -> int:
    given = properties.get(name)
    if given is None:
        return default
    text = str(given).strip()
    if not text.isdigit():
        raise KsqlError(f"Invalid value {str(given)!r} for configuration {name}: expected a whole number of "
                        "milliseconds, 0 or more.")
    return int(text)
