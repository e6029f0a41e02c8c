"""The command topic as a log, written with Kafka transactions (ksqlDB's protocol).

    log = CommandLog("127.0.0.1:9092", "my_service")
    log.create_topic()                       # _confluent-ksql-my_service_command_topic
    log.start(apply)                         # replay from the beginning, then follow
    log.wait_until_caught_up()               # everything committed so far is applied
    queued = log.submit(execute)             # validate + execute, produce, commit
    log.wait_for(queued.sequence)            # this server has applied it too

Writing a statement (``submit``) follows the design text step by step:

1. create a new transactional producer whose ``transactional.id`` is the service id;
2. ``init_transactions``: the coordinator aborts any transaction another server (or a
   zombie of this one) has open with that id and fences its producer;
3. begin a transaction;
4. read the command topic's end offset;
5. wait until this server's read_committed consumer has applied everything before it
   (its *position* reaches the end offset: commit markers take offsets too, so records
   are never counted);
6. validate and execute the statement against a snapshot of the metastore (``execute``);
7. produce the command;
8. commit.

Anything that fails in steps 2-8 because of Kafka (another server fenced this attempt,
the broker timed out) aborts the attempt; the statement is tried again from step 1, a
bounded number of times, then answered with a ``CommandLogError``. An error ``execute``
raises (the statement is invalid) aborts the transaction and is raised as it is.

Applying the log (``start``) never validates and never skips: every command is handed to
``apply`` in offset order, by one consumer thread, on every server and on every restart,
so they all rebuild the same metastore.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition

from engine.commandlog.command import Command, QueuedCommand
from engine.errors import CommandLogError, KafkaClientError
from engine.kafka.admin import TopicAdmin
from engine.kafka.client import client_config, error_text, init_transactions

LOG = logging.getLogger("engine.commandlog")
PARTITION = 0
# Servers racing for the command topic fence each other's attempts: a statement is tried
# again after a random pause that doubles each time (at most 2 s), 10 times in all.
ATTEMPTS = 10
MAX_PAUSE = 2.0


def command_topic(service_id: str) -> str:
    """The command topic of a service, named as ksqlDB names it."""
    return f"_confluent-ksql-{service_id}_command_topic"


class CommandLog:
    """The command topic of one service, as one server of that service sees it."""

    def __init__(
        self,
        bootstrap_servers: str,
        service_id: str,
        *,
        attempts: int = ATTEMPTS,
        timeout: float = 30.0,
    ) -> None:
        if not service_id or any(c.isspace() for c in service_id):
            raise CommandLogError(f"The service id must be a non-empty word, got '{service_id}'.")
        self.bootstrap_servers = bootstrap_servers
        self.service_id = service_id
        self.topic = command_topic(service_id)
        self.attempts = attempts
        self.timeout = timeout
        self._partition = TopicPartition(self.topic, PARTITION)
        self._position = 0  # the consumer's position: every offset below it is applied
        self._changed = threading.Condition()
        self._submitting = threading.Lock()  # this server writes one statement at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: str | None = None  # the consumer thread died: why
        self._offsets = Consumer(self._consumer_config())  # end offsets only, never assigned

    # ------------------------------------------------------------------ the topic

    def create_topic(self, replicas: int = 1, min_insync_replicas: int = 1) -> None:
        """Create the command topic unless it exists, as ksqlDB creates its internal topics: one
        partition, infinite retention, no unclean leader election, ``replicas`` replicas
        (``ksql.internal.topic.replicas``) and ``min_insync_replicas``
        (``ksql.internal.topic.min.insync.replicas``). An existing topic must have one partition
        and at least ``replicas`` replicas."""
        admin = TopicAdmin(self.bootstrap_servers, timeout=self.timeout)
        configs = {"retention.ms": "-1", "cleanup.policy": "delete", "unclean.leader.election.enable": "false",
                   "min.insync.replicas": str(min_insync_replicas)}
        try:
            admin.create_topic(self.topic, 1, configs=configs, exist_ok=True, replication_factor=replicas)
        except KafkaClientError as exc:
            raise CommandLogError(f"{exc} (ksql.internal.topic.replicas={replicas})") from None
        described = admin.describe_topic(self.topic)
        partitions, actual_replicas = described if described is not None else (0, 0)
        if partitions != 1:
            raise CommandLogError(
                f"The command topic '{self.topic}' has {partitions} partitions; it must have exactly 1."
            )
        if actual_replicas < replicas:
            raise CommandLogError(f"Invalid replication factor on topic '{self.topic}'. "
                                  f"Expected: {replicas}, but was: {actual_replicas}")

    def end_offset(self) -> int:
        """The offset after the last stable record (what a read_committed consumer can reach)."""
        try:
            _, high = self._offsets.get_watermark_offsets(self._partition, timeout=self.timeout, cached=False)
        except KafkaException as exc:
            raise KafkaClientError(
                f"Cannot read the end offset of the command topic '{self.topic}': {error_text(exc)}."
            ) from None
        return int(high)

    # ------------------------------------------------------------------ applying the log

    def start(self, apply: Callable[[QueuedCommand], None]) -> None:
        """Apply every command from the beginning, in order, on a consumer thread; keep following.

        ``apply`` must not raise for a command it cannot execute (it records the failure):
        the log is never skipped. An exception it raises anyway is logged and the next
        command follows.
        """
        if self._thread is not None:
            raise CommandLogError("The command log is being applied already.")
        consumer = Consumer(self._consumer_config())
        consumer.assign([TopicPartition(self.topic, PARTITION, OFFSET_BEGINNING)])
        self._thread = threading.Thread(
            target=self._follow, args=(consumer, apply), name=f"command-log-{self.service_id}", daemon=True
        )
        self._thread.start()

    def replay(self, apply: Callable[[QueuedCommand], None], timeout: float | None = None) -> int:
        """Start applying the log and return once what was committed at call time is applied.

        Returns the position reached (the number of offsets, markers included, applied).
        """
        self.start(apply)
        return self.wait_until_caught_up(timeout)

    def _follow(self, consumer: Consumer, apply: Callable[[QueuedCommand], None]) -> None:
        try:
            while not self._stop.is_set():
                for message in consumer.consume(num_messages=100, timeout=0.1):
                    error = message.error()
                    if error is not None:
                        if error.fatal():
                            raise CommandLogError(f"Reading the command topic failed: {error_text(error)}.")
                        LOG.warning("reading %s: %s", self.topic, error_text(error))
                        continue
                    offset = int(message.offset() or 0)
                    try:
                        command = Command.from_record(message.key(), message.value(), offset)
                        apply(QueuedCommand(offset, command))
                    except Exception:  # noqa: BLE001 - the log goes on; apply reports its own errors
                        LOG.exception("applying command %d of %s failed", offset, self.topic)
                    self._advance(offset + 1)
                position = consumer.position([self._partition])[0].offset
                if position >= 0:
                    self._advance(position)  # past commit and abort markers too
        except Exception as exc:  # noqa: BLE001 - waiters are told why the log stopped
            with self._changed:
                self._failure = str(exc) or type(exc).__name__
                self._changed.notify_all()
        finally:
            consumer.close()

    def _advance(self, position: int) -> None:
        with self._changed:
            if position > self._position:
                self._position = position
                self._changed.notify_all()

    @property
    def position(self) -> int:
        """Every command at an offset below this one has been applied by this server."""
        with self._changed:
            return self._position

    def wait_for(self, sequence: int, timeout: float | None = None) -> None:
        """Wait until the command at offset ``sequence`` is applied; ``CommandLogError`` on timeout."""
        self._await_position(sequence + 1, timeout)

    def wait_until_caught_up(self, timeout: float | None = None) -> int:
        """Wait until everything committed now is applied; the position reached."""
        end = self.end_offset()
        self._await_position(end, timeout)
        return end

    def _await_position(self, position: int, timeout: float | None) -> None:
        limit = self.timeout if timeout is None else timeout
        with self._changed:
            done = self._changed.wait_for(
                lambda: self._position >= position or self._failure is not None, limit
            )
            if self._failure is not None:
                raise CommandLogError(f"This server stopped applying the command topic: {self._failure}")
            if not done:
                raise CommandLogError(
                    f"Timed out after {limit:g} s waiting for this server to apply the command topic "
                    f"up to offset {position} (it is at {self._position})."
                )

    # ------------------------------------------------------------------ writing the log

    def submit(self, execute: Callable[[], Command]) -> QueuedCommand:
        """Validate and execute a statement (``execute``) and write its command, as one transaction.

        ``execute`` runs once the metastore holds every command committed before this
        attempt; it returns the command to write or raises the statement's error. Returns
        the command with its sequence number (its offset).
        """
        if self._thread is None:
            raise CommandLogError("Statements can be submitted once the command log is applied (start).")
        last = ""
        with self._submitting:
            for attempt in range(1, self.attempts + 1):
                try:
                    return self._attempt(execute)
                except _Retry as retry:
                    last = retry.reason
                    LOG.info("command topic attempt %d of %d failed: %s", attempt, self.attempts, last)
                    time.sleep(random.uniform(0, min(MAX_PAUSE, 0.05 * 2 ** attempt)))  # racers spread out
        raise CommandLogError(
            f"Could not write the statement to the command topic '{self.topic}' after "
            f"{self.attempts} attempts (other servers kept writing, or Kafka failed): {last}"
        )

    def _attempt(self, execute: Callable[[], Command]) -> QueuedCommand:
        producer = self._producer()  # 1. a new transactional producer per statement
        try:
            init_transactions(producer, self.topic, self.timeout)  # 2. fence every other attempt
            producer.begin_transaction()  # 3.
            end = self.end_offset()  # 4.
            self._await_position(end, None)  # 5. the metastore is up to date
        except (KafkaException, KafkaClientError, CommandLogError) as exc:
            _abort(producer, self.timeout)
            raise _Retry(error_text(exc)) from None
        try:
            command = execute()  # 6. validate and execute against a snapshot
        except BaseException:
            _abort(producer, self.timeout)
            raise
        try:
            delivered: list[Any] = []
            producer.produce(  # 7.
                self.topic,
                key=command.key_bytes(),
                value=command.value_bytes(),
                partition=PARTITION,
                on_delivery=lambda error, message: delivered.append((error, message)),
            )
            if producer.flush(self.timeout) > 0 or not delivered:
                raise _Retry("the command was not delivered in time")
            error, message = delivered[0]
            if error is not None:
                raise _Retry(f"producing the command failed: {error_text(error)}")
            producer.commit_transaction(self.timeout)  # 8.
            return QueuedCommand(int(message.offset()), command)
        except _Retry:
            _abort(producer, self.timeout)
            raise
        except Exception as exc:  # noqa: BLE001 - librdkafka reports a fenced producer in several ways
            _abort(producer, self.timeout)
            raise _Retry(error_text(exc)) from None

    def _producer(self) -> Producer:
        return Producer(client_config(
            self.bootstrap_servers,
            **{
                "transactional.id": self.service_id,
                "transaction.timeout.ms": max(int(self.timeout * 1000), 60_000),
                "enable.idempotence": True,
                "acks": "all",
                "message.timeout.ms": int(self.timeout * 1000),
            },
        ))

    def _consumer_config(self) -> dict[str, Any]:
        return client_config(
            self.bootstrap_servers,
            **{
                "group.id": f"kspark-command-log-{uuid.uuid4().hex}",  # never joined or committed
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 20,  # a command is applied (and answered) soon after its commit
            },
        )

    def close(self) -> None:
        """Stop applying the log (the consumer thread ends within a poll)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._offsets.close()


class _Retry(Exception):
    """This attempt failed because of Kafka: try the statement again from the start."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _abort(producer: Producer, timeout: float) -> None:
    try:
        producer.abort_transaction(timeout)
    except Exception:  # noqa: BLE001 - a fenced producer cannot abort; its coordinator did
        pass
