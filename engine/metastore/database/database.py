"""The metastore database of KLIP-18: tables on key-compacted changelogs, one writer each.

    db = MetastoreDatabase("127.0.0.1:9092", "my_service", internal_url="http://10.0.0.5:8088")
    db.create_topics()          # _confluent-ksql-my_service_metastore_UserDataSources, ..._UserTypes, ..._UserQueries
    db.start(on_change)         # the views (every server), and a member of the owners' group
    seq = db.write(Write(SOURCES, "S", row))        # routed to the owner, committed, a sequence
    db.wait_for(seq)            # read your own writes: this server's views include it

**Views.** Every server follows the three changelogs from the beginning with a read_committed
consumer and keeps every row in memory; ``on_change(change)`` is called for each committed
record, in order, after the view holds it (callbacks start and stop persistent queries).

**Owners.** Each changelog has one partition. The servers of a service join the consumer
group ``_confluent-ksql-<service id>_metastore`` (subscribed to the UserDataSources and
UserTypes changelogs, paused: membership only); the member the group assigns a partition
to is its owner and its only writer. UserQueries has no owner of its own: the owner of
UserDataSources writes it with the same producer, since a query row and the source rows it
reads or writes are checked together (a source read or written by a live query cannot be
dropped). A member's ``client.id`` is its internal URL, so any server finds the owner by
describing the group. The owner writes with a transactional producer whose
``transactional.id`` is ``<service id>-<changelog topic>-<partition>``, initialised when the
partition is assigned: that init fences the previous owner's producer, so a write of a
server that lost ownership fails and is answered "not the owner".

**Writes.** ``write`` finds the owner (this server, or another reached through
``forward``, the internal HTTP endpoint), with bounded retries while ownership is unknown
or moving. The owner, holding the partition's lock: begins a transaction, waits until its
view holds everything committed, checks referential integrity against that complete view,
produces the row (or a tombstone), commits. Its view (and every other server's) changes
only when the committed record is read back.

**Integrity.** A source whose query reads unknown sources is refused; a source that other
sources' queries read, or that a UserQueries query reads or writes, cannot be deleted (the
message names them). A query row reading or writing an unknown source is refused.
Downstream links are derived in memory from the stored query plans.

**Sequence numbers** (read your own writes). A write answers with one integer packing the
positions the views must reach to include it:
``(sources_position << 18 | queries_position) << 16 | types_position`` (a position is the
offset after the last record to include), below 2^63 so that Java clients read it as a
long (JavaScript numbers lose precision past 2^53: past sources offset 2^19).
``wait_for(sequence)`` waits until this server's views reach all three. Offsets only grow,
even after compaction; a changelog past its range is refused with a message to migrate.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from engine.errors import KafkaClientError, MetastoreError
from engine.kafka.admin import TopicAdmin
from engine.kafka.client import client_config, error_text, init_transactions
from engine.metastore.database.rows import (
    QUERIES,
    SOURCES,
    TABLES,
    TYPES,
    QueryRow,
    Row,
    SourceRow,
    decode_row,
    encode_row,
    row_from_json,
    validate_row,
)

LOG = logging.getLogger("engine.metastore.database")
PARTITION = 0
ATTEMPTS = 20
RETRY_OWNERSHIP_S = 2.0  # an assigned table whose producer did not initialise is tried again after this
# 29 + 18 + 16 bits: a sequence number fits a signed 64-bit integer (a Java client's long).
# Offsets count every write and its commit marker: the sources changelog holds about 268
# million writes, the queries one about 131,000, the types one about 32,000.
SOURCES_BITS = 29
QUERIES_BITS = 18
TYPES_BITS = 16
# The owned changelogs (a member of the owners' group is assigned them) and the writer of
# each table: UserQueries is written by the owner of UserDataSources, in its transactions,
# because a query row and the source rows it reads or writes are checked together.
OWNED = (SOURCES, TYPES)
WRITER = {SOURCES: SOURCES, TYPES: TYPES, QUERIES: SOURCES}
INTERNAL_PATH = "/internal/metastore/write"


def changelog_topic(service_id: str, table: str) -> str:
    """The key-compacted changelog of a metastore table (internal, like the command topic)."""
    return f"_confluent-ksql-{service_id}_metastore_{table}"


def pack_sequence(sources_position: int, types_position: int, queries_position: int = 0) -> int:
    """One sequence number for the three views (see the module docstring)."""
    for table, position, bits in (
        (SOURCES, sources_position, SOURCES_BITS),
        (TYPES, types_position, TYPES_BITS),
        (QUERIES, queries_position, QUERIES_BITS),
    ):
        if not 0 <= position < 1 << bits:
            raise MetastoreError(
                f"The {table} changelog reached offset {position}; sequence numbers hold offsets below "
                f"{1 << bits} for it. Recreate the service's metastore with kspark metastore migrate."
            )
    return (((sources_position << QUERIES_BITS) | queries_position) << TYPES_BITS) | types_position


def unpack_sequence(sequence: int) -> tuple[int, int, int]:
    """(sources, types, queries) positions of a sequence number."""
    types = sequence & ((1 << TYPES_BITS) - 1)
    rest = sequence >> TYPES_BITS
    return rest >> QUERIES_BITS, types, rest & ((1 << QUERIES_BITS) - 1)


def _pack(positions: dict[str, int]) -> int:
    return pack_sequence(positions[SOURCES], positions[TYPES], positions[QUERIES])


class MetastoreUnavailableError(MetastoreError):
    """The metastore could not take a write or answer in time (no owner, closed, Kafka failed)."""


class NotOwnerError(MetastoreUnavailableError):
    """This server does not own the table's partition (any more): the write goes elsewhere."""


@dataclass(frozen=True, slots=True)
class Write:
    """An insert (``row``) or a delete (``row`` None) of one key, with an id for retries."""

    table: str
    key: str
    row: Row | None
    request_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "key": self.key, "requestId": self.request_id,
                "row": None if self.row is None else self.row.to_json()}

    @classmethod
    def from_json(cls, value: Any) -> Write:
        if not isinstance(value, dict) or value.get("table") not in TABLES or not isinstance(value.get("key"), str):
            raise MetastoreError(
                f"A forwarded metastore write needs 'table' (one of {', '.join(TABLES)}) and 'key'."
            )
        table, row = value["table"], value.get("row")
        if row is not None:
            validate_row(table, row, f"forwarded for '{value['key']}'")
        decoded: Row | None = None
        if row is not None:
            decoded = row_from_json(table, row)
        return cls(table, value["key"], decoded, str(value.get("requestId", "")))


@dataclass(frozen=True, slots=True)
class Change:
    """A committed record as the views applied it: ``old`` and ``new`` rows (None: absent)."""

    table: str
    key: str
    old: Row | None
    new: Row | None
    offset: int


Forward = Callable[[str, dict[str, Any], float], tuple[int, dict[str, Any]]]


def http_forward(url: str, payload: dict[str, Any], timeout: float, *, headers: dict[str, str] | None = None,
                 verify: Any = True) -> tuple[int, dict[str, Any]]:
    """POST a write to another server's internal endpoint: (HTTP status, JSON body).

    ``verify`` is httpx's: True (the system's trust store) or an ``ssl.SSLContext``."""
    import httpx

    response = httpx.post(url.rstrip("/") + INTERNAL_PATH, json=payload, timeout=timeout, headers=headers,
                          verify=verify)
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text[:200]}
    return response.status_code, body if isinstance(body, dict) else {"message": str(body)}


class MetastoreDatabase:
    """The metastore tables of one service, as one server of that service holds them."""

    def __init__(
        self,
        bootstrap_servers: str,
        service_id: str,
        *,
        internal_url: str = "",
        timeout: float = 30.0,
        attempts: int = ATTEMPTS,
        forward: Forward = http_forward,
    ) -> None:
        if not service_id or any(c.isspace() for c in service_id):
            raise MetastoreError(f"The service id must be a non-empty word, got '{service_id}'.")
        self.bootstrap_servers = bootstrap_servers
        self.service_id = service_id
        self.internal_url = internal_url or f"local-{uuid.uuid4().hex}"
        self.timeout = timeout
        self.attempts = attempts
        self.forward = forward
        self.topics = {table: changelog_topic(service_id, table) for table in TABLES}
        self.group_id = f"_confluent-ksql-{service_id}_metastore"
        self._rows: dict[str, dict[str, Row]] = {table: {} for table in TABLES}
        self._positions = dict.fromkeys(TABLES, 0)
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._failure: str | None = None
        self._owned: dict[str, Producer] = {}  # table -> its initialised transactional producer
        self._locks = {table: threading.Lock() for table in OWNED}  # one writer thread per owned partition
        self._written: dict[str, int] = {}  # table -> the position after this owner's last commit
        self._done: dict[str, int] = {}  # request ids this owner committed: their sequence
        self._offsets = Consumer(self._consumer_config(f"kspark-metastore-offsets-{uuid.uuid4().hex}"))
        self._admin: Any = None

    # ------------------------------------------------------------------ topics

    def create_topics(self) -> None:
        """Create both changelogs (one partition, ``cleanup.policy=compact``) unless they exist."""
        admin = TopicAdmin(self.bootstrap_servers, timeout=self.timeout)
        for topic in self.topics.values():
            admin.create_topic(topic, 1, configs={"cleanup.policy": "compact"}, exist_ok=True)
            partitions = admin.partition_count(topic)
            if partitions != 1:
                raise MetastoreError(f"The metastore changelog '{topic}' has {partitions} partitions; it must have exactly 1.")
            policy = admin.topic_config(topic).get("cleanup.policy", "")
            if "compact" not in policy:
                raise MetastoreError(
                    f"The metastore changelog '{topic}' has cleanup.policy={policy}; it must be compact."
                )

    def end_offset(self, table: str) -> int:
        """The offset after the last stable record of the table's changelog."""
        try:
            _, high = self._offsets.get_watermark_offsets(
                TopicPartition(self.topics[table], PARTITION), timeout=self.timeout, cached=False
            )
        except KafkaException as exc:
            raise KafkaClientError(f"Cannot read the end offset of '{self.topics[table]}': {error_text(exc)}.") from None
        return int(high)

    # ------------------------------------------------------------------ views

    def start(self, on_change: Callable[[Change], None] | None = None, *, join_group: bool = True) -> None:
        """Follow both changelogs (the views) and, with ``join_group``, compete for ownership."""
        if self._threads:
            raise MetastoreError("The metastore database is started already.")
        view = Consumer(self._consumer_config(f"kspark-metastore-view-{uuid.uuid4().hex}"))
        view.assign([TopicPartition(topic, PARTITION, OFFSET_BEGINNING) for topic in self.topics.values()])
        self._threads.append(threading.Thread(target=self._follow, args=(view, on_change),
                                              name=f"metastore-view-{self.service_id}", daemon=True))
        if join_group:
            self._threads.append(threading.Thread(target=self._membership, name=f"metastore-owner-{self.service_id}",
                                                  daemon=True))
        for thread in self._threads:
            thread.start()

    def _follow(self, consumer: Consumer, on_change: Callable[[Change], None] | None) -> None:
        table_of = {topic: table for table, topic in self.topics.items()}
        partitions = [TopicPartition(topic, PARTITION) for topic in self.topics.values()]
        try:
            while not self._stop.is_set():
                for message in consumer.consume(num_messages=500, timeout=0.1):
                    error = message.error()
                    if error is not None:
                        if error.fatal():
                            raise MetastoreError(f"Reading the metastore changelogs failed: {error_text(error)}.")
                        LOG.warning("reading the metastore changelogs: %s", error_text(error))
                        continue
                    table = table_of[str(message.topic())]
                    offset = int(message.offset() or 0)
                    key = (message.key() or b"").decode("utf-8", "replace")
                    try:
                        row = decode_row(table, message.key(), message.value(), f"at offset {offset} of {message.topic()}")
                    except MetastoreError as exc:  # written by something else than kspark: kept out
                        LOG.error("%s", exc)
                        self._advance(table, offset + 1)
                        continue
                    with self._changed:
                        old = self._rows[table].get(key)
                        if row is None:
                            self._rows[table].pop(key, None)
                        else:
                            self._rows[table][key] = row
                    if on_change is not None and old != row:  # a row written again changes nothing
                        try:
                            on_change(Change(table, key, old, row, offset))
                        except Exception:  # noqa: BLE001 - the view goes on; the callback reports its own errors
                            LOG.exception("the metastore callback failed on %s '%s'", table, key)
                    self._advance(table, offset + 1)
                for position in consumer.position(partitions):
                    if position.offset >= 0:
                        self._advance(table_of[position.topic], position.offset)  # past transaction markers
        except Exception as exc:  # noqa: BLE001 - waiters are told why the view stopped
            with self._changed:
                self._failure = str(exc) or type(exc).__name__
                self._changed.notify_all()
        finally:
            consumer.close()

    def _advance(self, table: str, position: int) -> None:
        with self._changed:
            if position > self._positions[table]:
                self._positions[table] = position
                self._changed.notify_all()

    @property
    def sequence(self) -> int:
        """The sequence number this server's views have reached."""
        with self._changed:
            return _pack(self._positions)

    def wait_for(self, sequence: int, timeout: float | None = None) -> None:
        """Wait until this server's views include the write that answered ``sequence``."""
        sources, types, queries = unpack_sequence(sequence)
        self._await({SOURCES: sources, TYPES: types, QUERIES: queries}, timeout)

    def wait_until_caught_up(self, timeout: float | None = None) -> int:
        """Wait until the views hold everything committed now; the sequence reached."""
        ends = {table: self.end_offset(table) for table in TABLES}
        self._await(ends, timeout)
        return _pack(ends)

    def _await(self, positions: dict[str, int], timeout: float | None) -> None:
        limit = self.timeout if timeout is None else timeout
        with self._changed:
            done = self._changed.wait_for(
                lambda: self._failure is not None or self._stop.is_set()
                or all(self._positions[t] >= p for t, p in positions.items()),
                limit,
            )
            if self._stop.is_set():
                raise MetastoreError("The metastore database of this server is closed.")
            if self._failure is not None:
                raise MetastoreError(f"This server stopped reading the metastore changelogs: {self._failure}")
            if not done:
                raise MetastoreError(
                    f"Timed out after {limit:g} s waiting for this server's metastore views to reach "
                    f"{positions} (they are at {dict(self._positions)})."
                )

    def rows(self, table: str) -> dict[str, Row]:
        """A copy of this server's view of ``table``."""
        with self._changed:
            return dict(self._rows[table])

    def downstream(self, name: str) -> list[str]:
        """The sources whose queries read ``name`` (derived from the stored plans)."""
        with self._changed:
            rows = self._rows[SOURCES].values()
            return sorted(r.name for r in rows if isinstance(r, SourceRow) and name in r.upstream and r.name != name)

    def queries_using(self, name: str) -> list[str]:
        """The ``UserQueries`` queries that read or write the source ``name``."""
        with self._changed:
            rows = self._rows[QUERIES].values()
            return sorted(r.name for r in rows if isinstance(r, QueryRow) and (name in r.upstream or r.sink == name))

    # ------------------------------------------------------------------ ownership

    def _membership(self) -> None:
        consumer = Consumer(client_config(
            self.bootstrap_servers,
            **{
                "group.id": self.group_id,
                "client.id": self.internal_url,
                "partition.assignment.strategy": "range",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 1000,
                "enable.auto.commit": False,
                "auto.offset.reset": "latest",
            },
        ))

        # Tables assigned to this server whose producer did not initialise yet (the broker was
        # away, or slow): tried again until they are, or until the table goes to another server.
        pending: dict[str, float] = {}

        def assigned(c: Consumer, partitions: list[TopicPartition]) -> None:
            c.pause(partitions)  # membership only: the views read the records
            for tp in partitions:
                table = self._table_of(tp.topic)
                if not self._take_ownership(table):
                    pending[table] = time.monotonic() + RETRY_OWNERSHIP_S

        def revoked(c: Consumer, partitions: list[TopicPartition]) -> None:
            for tp in partitions:
                table = self._table_of(tp.topic)
                pending.pop(table, None)
                self._give_up_ownership(table)

        try:
            consumer.subscribe([self.topics[t] for t in OWNED], on_assign=assigned, on_revoke=revoked, on_lost=revoked)
            while not self._stop.is_set():
                consumer.poll(0.1)
                for table, due in list(pending.items()):
                    if time.monotonic() >= due:
                        del pending[table]
                        if not self._take_ownership(table):
                            pending[table] = time.monotonic() + RETRY_OWNERSHIP_S
        except Exception:  # noqa: BLE001 - without membership this server forwards every write
            LOG.exception("the metastore ownership consumer stopped")
        finally:
            for table in list(self._owned):
                self._give_up_ownership(table)
            consumer.close()

    def _table_of(self, topic: str) -> str:
        return next(table for table, name in self.topics.items() if name == topic)

    def _take_ownership(self, table: str) -> bool:
        """Initialise the table's producer and own the table; False if the producer failed."""
        producer = self._transactional_producer(table)
        if producer is None:
            return False
        with self._locks[table]:
            self._owned[table] = producer
        LOG.info("this server (%s) owns %s", self.internal_url, self.topics[table])
        return True

    def _transactional_producer(self, table: str) -> Producer | None:
        """The table's transactional producer, initialised (which fences every earlier one of
        its transactional id and aborts their open transactions); None if that failed."""
        topic = self.topics[table]
        producer = Producer(client_config(
            self.bootstrap_servers,
            **{
                "transactional.id": f"{self.service_id}-{topic}-{PARTITION}",
                "transaction.timeout.ms": max(int(self.timeout * 1000), 60_000),
                "enable.idempotence": True,
                "acks": "all",
                "message.timeout.ms": int(self.timeout * 1000),
            },
        ))
        try:
            init_transactions(producer, topic, self.timeout)  # fences the previous owner's producer
        except KafkaException as exc:
            LOG.error("taking ownership of %s failed: %s", topic, error_text(exc))
            return None
        return producer

    def _give_up_ownership(self, table: str) -> None:
        with self._locks[table]:  # an in-flight write ends first
            self._owned.pop(table, None)

    def owns(self, table: str) -> bool:
        return WRITER[table] in self._owned

    def owner_of(self, table: str) -> str | None:
        """The internal URL of the writer of ``table`` (this server's own URL if it is); None: unknown."""
        table = WRITER[table]
        if self.owns(table):
            return self.internal_url
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient(client_config(self.bootstrap_servers))
        try:
            description = self._admin.describe_consumer_groups(
                [self.group_id], request_timeout=min(self.timeout, 10.0)
            )[self.group_id].result(timeout=min(self.timeout, 10.0) + 5)
        except Exception as exc:  # noqa: BLE001 - unknown owner: the caller retries
            LOG.info("describing %s failed: %s", self.group_id, error_text(exc))
            # An admin client whose describe failed while the broker was away never describes
            # a group again once it is back (librdkafka's group requests time out for good):
            # the next attempt asks through a new one.
            self._admin = None
            return None
        topic = self.topics[table]
        for member in description.members:
            assignment = member.assignment.topic_partitions if member.assignment else []
            if any(tp.topic == topic and tp.partition == PARTITION for tp in assignment):
                return str(member.client_id)
        return None

    # ------------------------------------------------------------------ writes

    def write(self, write: Write) -> int:
        """Commit ``write`` through the table's owner; its sequence number.

        Raises ``MetastoreError`` for an integrity violation (the owner's message) or when
        no owner took the write within the retries.
        """
        if self._stop.is_set():
            raise MetastoreUnavailableError("The metastore database of this server is closed.")
        if not write.request_id:
            write = Write(write.table, write.key, write.row, uuid.uuid4().hex)
        last = "no server of the service owns it yet"
        for attempt in range(1, self.attempts + 1):
            owner = self.owner_of(write.table)
            try:
                if owner == self.internal_url:
                    return self.write_as_owner(write)
                if owner is not None and owner.startswith(("http://", "https://")):
                    status, body = self.forward(owner, write.to_json(), self.timeout)
                    if status == 200 and isinstance(body.get("sequence"), int):
                        return int(body["sequence"])
                    if status == 400:
                        raise MetastoreError(str(body.get("message", "The owner refused the write.")))
                    last = f"the owner {owner} answered {status}: {body.get('message', '')}"
                elif owner is not None:
                    last = f"the owner is '{owner}', which has no internal URL to forward to"
            except MetastoreUnavailableError as exc:  # not the owner (any more), or it timed out
                if self._stop.is_set():
                    raise
                last = str(exc)
            except MetastoreError:  # refused by the owner: integrity, a damaged row
                raise
            except KafkaClientError as exc:
                last = str(exc)
            except Exception as exc:  # noqa: BLE001 - the owner cannot be reached: it may be moving
                last = f"the owner {owner} cannot be reached: {type(exc).__name__}: {exc}"
            LOG.info("metastore write attempt %d of %d for %s '%s': %s", attempt, self.attempts, write.table, write.key, last)
            time.sleep(min(0.1 * attempt, 1.0) * random.uniform(0.5, 1.0))
        raise MetastoreUnavailableError(
            f"Could not write {write.table} '{write.key}' to the metastore after {self.attempts} attempts: {last}."
        )

    def write_as_owner(self, write: Write) -> int:
        """Validate ``write`` against the complete view and commit it; ``NotOwnerError`` if not the owner."""
        table, owned = write.table, WRITER[write.table]
        with self._locks[owned]:
            producer = self._owned.get(owned)
            if producer is None:
                raise NotOwnerError(f"This server ({self.internal_url}) is not the owner of {self.topics[owned]}.")
            if write.request_id and write.request_id in self._done:
                return self._done[write.request_id]  # a retried write that was committed already
            try:
                producer.begin_transaction()
                # The complete view: every committed write. The end offset can lag this owner's
                # last commit (markers are written after the commit answers): wait for both.
                ends = {t: self.end_offset(t) for t in TABLES}
                for t in TABLES:
                    ends[t] = max(ends[t], self._written.get(t, 0))
                self._await(ends, None)
            except (KafkaException, KafkaClientError, MetastoreError) as exc:
                self._abort(owned, producer)
                raise NotOwnerError(f"This server cannot write {self.topics[table]} now: {error_text(exc)}") from None
            try:
                self._check_integrity(write)
                value = encode_row(table, write.row)
            except BaseException:  # an integrity refusal, or a bug: the transaction never stays open
                self._abort(owned, producer)
                raise
            try:
                delivered: list[Any] = []
                producer.produce(self.topics[table], key=write.key.encode("utf-8"), value=value, partition=PARTITION,
                                 on_delivery=lambda error, message: delivered.append((error, message)))
                if producer.flush(self.timeout) > 0 or not delivered or delivered[0][0] is not None:
                    raise KafkaException(delivered[0][0] if delivered else "the row was not delivered in time")
                producer.commit_transaction(self.timeout)
            except KafkaException as exc:
                self._abort(owned, producer)
                raise NotOwnerError(
                    f"This server ({self.internal_url}) is not the owner of {self.topics[owned]} any more: "
                    f"{error_text(exc)}"
                ) from None
            except BaseException:
                self._abort(owned, producer)
                raise
            offset = int(delivered[0][1].offset())
            self._written[table] = offset + 1
            with self._changed:
                positions = dict(self._positions)
            positions[table] = offset + 1
            sequence = _pack(positions)
            if write.request_id:
                self._done[write.request_id] = sequence
            return sequence

    def _abort(self, table: str, producer: Producer) -> None:
        """End the open transaction (the caller holds the table's lock). Where the abort itself
        fails but this server still owns the table (it timed out, or the producer is in a state
        that takes no abort), a new producer with the same transactional id takes over:
        initialising it aborts whatever the old one left open, so the next write can begin."""
        try:
            producer.abort_transaction(self.timeout)
        except KafkaException as exc:
            if self._owned.get(table) is not producer:
                return
            if not _retriable(exc) and "not valid in state" not in error_text(exc):
                self._owned.pop(table, None)  # fenced: the partition has another owner now
                return
            LOG.warning("aborting a transaction on %s failed (%s): a new producer takes over",
                        self.topics[table], error_text(exc))
            replacement = self._transactional_producer(table)
            if replacement is None:
                self._owned.pop(table, None)
            else:
                self._owned[table] = replacement

    def _check_integrity(self, write: Write) -> None:
        rows = self._rows[write.table]
        existing = rows.get(write.key)
        if write.row is not None and write.row.name != write.key:
            raise MetastoreError(f"The {write.table} row names '{write.row.name}' but its key is '{write.key}'.")
        if write.table == QUERIES:
            self._check_query(write)
            return
        if write.table == TYPES:
            if write.row is not None and existing is not None:
                raise MetastoreError(f"Cannot register custom type '{write.key}' since it is already registered.")
            if write.row is None and existing is None:
                raise MetastoreError(f"Type {write.key} does not exist.")
            return
        if isinstance(write.row, SourceRow):
            row = write.row
            if row.terminated_query is not None and existing is not None:  # TERMINATE of its CSAS/CTAS query
                if not isinstance(existing, SourceRow) or existing.query_id != row.terminated_query:
                    raise MetastoreError(f"Unknown queryId: {row.terminated_query}")
                return
            if existing is not None and not row.command.get("orReplace"):
                kind = existing.kind.lower() if isinstance(existing, SourceRow) else "source"
                raise MetastoreError(f"Cannot add {row.kind.lower()} '{row.name}': A {kind} with the same name already exists.")
            unknown = [name for name in row.upstream if name not in rows]
            if unknown:
                raise MetastoreError(
                    f"Cannot add {row.kind.lower()} '{row.name}': its query reads unknown sources: {', '.join(unknown)}."
                )
            return
        if existing is None:
            raise MetastoreError(f"Source {write.key} does not exist.")
        dependents = sorted(r.name for r in rows.values()
                            if isinstance(r, SourceRow) and write.key in r.upstream and r.name != write.key)
        if dependents:
            raise MetastoreError(
                f"Cannot drop {write.key}: the queries of these sources read from it: [{', '.join(dependents)}]. "
                f"Drop them first."
            )
        queries = self._rows[QUERIES].values()
        readers = sorted(q.name for q in queries if isinstance(q, QueryRow) and write.key in q.upstream)
        writers = sorted(q.name for q in queries if isinstance(q, QueryRow) and q.sink == write.key)
        if readers or writers:
            raise MetastoreError(
                f"Cannot drop {write.key}.\nThe following queries read from this source: [{', '.join(readers)}]."
                f"\nThe following queries write into this source: [{', '.join(writers)}]."
                f"\nYou need to terminate them before dropping {write.key}."
            )

    def _check_query(self, write: Write) -> None:
        """A ``UserQueries`` row reads and writes known sources; a delete needs the query."""
        existing = self._rows[QUERIES].get(write.key)
        if write.row is None:
            if existing is None:
                raise MetastoreError(f"Unknown queryId: {write.key}")
            return
        if existing is not None:
            raise MetastoreError(f"Query id {write.key} is already running.")
        if not isinstance(write.row, QueryRow):
            raise MetastoreError(f"The {QUERIES} row '{write.key}' is not a query.")
        sources = self._rows[SOURCES]
        unknown = [name for name in (*write.row.upstream, write.row.sink) if name not in sources]
        if unknown:
            raise MetastoreError(
                f"Cannot add query '{write.key}': it reads or writes unknown sources: {', '.join(unknown)}."
            )

    def handle_forwarded(self, payload: Any) -> tuple[int, dict[str, Any]]:
        """Answer a write another server forwarded: 200 with its sequence, 409 not the owner, 400 refused."""
        try:
            write = Write.from_json(payload)
            return 200, {"sequence": self.write_as_owner(write)}
        except NotOwnerError as exc:
            return 409, {"message": f"not the owner: {exc}"}
        except MetastoreUnavailableError as exc:
            return 503, {"message": str(exc)}
        except MetastoreError as exc:
            return 400, {"message": str(exc)}

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Leave the owners' group and stop the views."""
        self._stop.set()
        with self._changed:
            self._changed.notify_all()  # writers waiting for the views give up
        for thread in self._threads:
            thread.join(timeout=15)
        self._offsets.close()

    def _consumer_config(self, group: str) -> dict[str, Any]:
        return client_config(
            self.bootstrap_servers,
            **{
                "group.id": group,  # never joined or committed
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 20,
            },
        )


def _retriable(exc: KafkaException) -> bool:
    error = exc.args[0] if exc.args else None
    return bool(error is not None and hasattr(error, "retriable") and error.retriable())
