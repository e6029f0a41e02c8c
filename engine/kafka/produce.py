"""Produce records with explicit key and value bytes, timestamp, partition and headers.

    produce("127.0.0.1:9092", "orders", [ProducerRecord(key=b"k", value=b"v", timestamp=0)])

    with RecordProducer(bootstrap, transactional_id="kspark-cmd") as producer:
        with producer.transaction():            # committed on exit, aborted on an exception
            producer.send("orders", ProducerRecord(value=b"v"))

Timestamps must be at least 1: librdkafka, under confluent-kafka, cannot send 0 (it
means "now"). Records without a partition go where the Java client's default partitioner puts them
(``murmur2_random``: murmur2 of the key bytes, as ksqlDB's producers do). The producer is
idempotent with ``acks=all``; ``flush`` and ``produce`` raise ``KafkaClientError`` on any
delivery error instead of dropping the record.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from engine.data.records import Header
from engine.errors import KafkaClientError
from engine.kafka.client import client_config, error_text

PRODUCER_CONFIG: dict[str, Any] = {
    "partitioner": "murmur2_random",
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
}


class UnknownPartitionError(KafkaClientError):
    """Records went to partitions the topic does not have. For a record without a partition,
    the producer's view of the topic is older than the topic (deleted and made again with
    fewer partitions): a new producer reads the topic afresh."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerRecord:
    """One record to produce: raw key and value bytes (None for null), optional placement."""

    key: bytes | None = None
    value: bytes | None = None
    timestamp: int | None = None
    partition: int | None = None
    headers: tuple[Header, ...] = ()

    def __post_init__(self) -> None:
        for name in ("key", "value"):
            data = getattr(self, name)
            if data is not None and not isinstance(data, bytes):
                raise TypeError(f"ProducerRecord.{name} must be bytes or None, got {type(data).__name__}.")
        if self.timestamp is not None and self.timestamp < 1:
            # librdkafka reads 0 as "now" and the broker refuses negative timestamps.
            raise KafkaClientError(
                f"Cannot produce a record with timestamp {self.timestamp}: librdkafka (under "
                "confluent-kafka) reads 0 as 'now'; use a timestamp of 1 or more, or None for now."
            )


@dataclass(frozen=True, slots=True)
class Delivered:
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class RecordProducer:
    """An idempotent (optionally transactional) producer that reports every delivery.

    For one thread at a time (its sends and flushes share one list of deliveries): threads
    that write at once share a ``SharedProducer`` instead."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        transactional_id: str | None = None,
        config: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout = timeout
        settings = {**PRODUCER_CONFIG, "message.timeout.ms": int(timeout * 1000), **(config or {})}
        if transactional_id is not None:
            settings["transactional.id"] = transactional_id
            settings["transaction.timeout.ms"] = max(int(timeout * 1000), 60_000)
        self._producer = Producer(client_config(bootstrap_servers, **settings))
        self._transactional = transactional_id is not None
        self._initialised = False
        self._sent: list[Delivered | None] = []
        self._errors: list[str] = []
        self._all_unknown_partition = True  # every error of the records queued was one

    def send(self, topic: str, record: ProducerRecord) -> None:
        """Queue ``record`` for ``topic``; ``flush`` waits for it and reports its delivery."""
        index = len(self._sent)
        self._sent.append(None)
        where = _where(topic, record)

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is not None:
                self._errors.append(f"Cannot produce to topic '{where}': {error_text(error)}.")
                self._all_unknown_partition &= error.code() == KafkaError._UNKNOWN_PARTITION
            else:
                self._sent[index] = _delivered(message)

        kwargs = _produce_kwargs(record, delivered)
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: let deliveries drain, then retry
                self._producer.poll(0.1)
            except KafkaException as exc:
                raise _refused(exc, where) from None
        self._producer.poll(0)

    def flush(self) -> list[Delivered]:
        """Wait for every queued record; their deliveries in send order, or raise."""
        remaining = self._producer.flush(self.timeout)
        errors, self._errors = self._errors, []
        sent, self._sent = self._sent, []
        unknown, self._all_unknown_partition = self._all_unknown_partition, True
        if errors:
            more = f" ({len(errors) - 1} more failed)" if len(errors) > 1 else ""
            raise (UnknownPartitionError if unknown else KafkaClientError)(errors[0] + more)
        if remaining:
            raise KafkaClientError(
                f"{remaining} records were not delivered to {self.bootstrap_servers} within "
                f"{self.timeout:g} s."
            )
        return [d for d in sent if d is not None]

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Run the block in a transaction: committed if it completes, aborted if it raises."""
        if not self._transactional:
            raise KafkaClientError("transaction() needs a producer made with a transactional_id.")
        try:
            if not self._initialised:
                self._producer.init_transactions(self.timeout)
                self._initialised = True
            self._producer.begin_transaction()
        except KafkaException as exc:
            raise KafkaClientError(f"Cannot begin a transaction: {error_text(exc)}.") from None
        try:
            yield
            self.flush()
            self._producer.commit_transaction(self.timeout)
        except BaseException as exc:
            with contextlib.suppress(KafkaException):
                self._producer.abort_transaction(self.timeout)
            self._sent, self._errors = [], []
            if isinstance(exc, KafkaException):
                raise KafkaClientError(f"Cannot commit the transaction: {error_text(exc)}.") from None
            raise

    def close(self) -> None:
        """Deliver what is queued (outside a transaction)."""
        if not self._transactional:
            self._producer.flush(self.timeout)

    def __enter__(self) -> RecordProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _where(topic: str, record: ProducerRecord) -> str:
    # The partition is named whether librdkafka refuses the record at once (it knows the
    # topic's partitions already) or in its delivery report.
    return topic if record.partition is None else f"{topic}' partition '{record.partition}"


def _delivered(message: Any) -> Delivered:
    return Delivered(message.topic(), message.partition(), message.offset(), message.timestamp()[1])


def _produce_kwargs(record: ProducerRecord, on_delivery: Any) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"key": record.key, "value": record.value, "on_delivery": on_delivery}
    if record.timestamp is not None:
        kwargs["timestamp"] = record.timestamp
    if record.partition is not None:
        kwargs["partition"] = record.partition
    if record.headers:
        kwargs["headers"] = [(h.key, h.value) for h in record.headers]
    return kwargs


def _refused(exc: KafkaException, where: str) -> KafkaClientError:
    unknown = exc.args[0].code() == KafkaError._UNKNOWN_PARTITION
    kind = UnknownPartitionError if unknown else KafkaClientError
    return kind(f"Cannot produce to topic '{where}': {error_text(exc)}.")


class SharedProducer:
    """One idempotent producer that many threads write through at once.

    ``write`` returns once the broker has the record (``acks=all``) and raises when it does
    not: a record is reported written exactly when it is. confluent-kafka's ``produce`` may
    be called from any thread, but deliveries are reported by whichever thread polls, so one
    thread of this producer's own does all the polling; request threads only wait on their
    record's future.

        producer = SharedProducer(bootstrap)
        producer.write("orders", ProducerRecord(key=b"k", value=b"v"))   # -> Delivered
        producer.close()
    """

    def __init__(self, bootstrap_servers: str, *, config: Mapping[str, Any] | None = None,
                 timeout: float = 30.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout = timeout
        settings = {**PRODUCER_CONFIG, "message.timeout.ms": int(timeout * 1000), **(config or {})}
        self._producer = Producer(client_config(bootstrap_servers, **settings))
        self._closing = threading.Event()
        self._poller = threading.Thread(target=self._poll, name="kspark-producer-poll", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._closing.is_set():
            self._producer.poll(0.05)

    def send(self, topic: str, record: ProducerRecord) -> Future[Delivered]:
        """Queue ``record``; its future holds the delivery, or the error that kept it out."""
        if self._closing.is_set():
            raise KafkaClientError(f"The producer to {self.bootstrap_servers} is closed.")
        future: Future[Delivered] = Future()
        where = _where(topic, record)

        def delivered(error: KafkaError | None, message: Any) -> None:
            if error is None:
                future.set_result(_delivered(message))
            else:
                unknown = error.code() == KafkaError._UNKNOWN_PARTITION
                kind = UnknownPartitionError if unknown else KafkaClientError
                future.set_exception(kind(f"Cannot produce to topic '{where}': {error_text(error)}."))

        kwargs = _produce_kwargs(record, delivered)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return future
            except BufferError:  # the local queue is full: the poll thread drains it
                if time.monotonic() > deadline:
                    raise KafkaClientError(
                        f"Cannot produce to topic '{where}': the producer's queue stayed full for "
                        f"{self.timeout:g} s."
                    ) from None
                time.sleep(0.01)
            except KafkaException as exc:
                raise _refused(exc, where) from None

    def write(self, topic: str, record: ProducerRecord) -> Delivered:
        """Send ``record`` and wait until the broker has it; raise ``KafkaClientError`` if it has not."""
        future = self.send(topic, record)
        try:
            # librdkafka reports every record within message.timeout.ms: the margin is for the poll.
            return future.result(timeout=self.timeout + 10)
        except FutureTimeout:
            raise KafkaClientError(
                f"The record for topic '{topic}' was not acknowledged by {self.bootstrap_servers} "
                f"within {self.timeout:g} s."
            ) from None

    def close(self) -> None:
        """Deliver what is queued, then stop the poll thread."""
        self._closing.set()
        self._poller.join()
        self._producer.flush(self.timeout)


def produce(
    bootstrap_servers: str,
    topic: str,
    records: Iterable[ProducerRecord],
    *,
    timeout: float = 30.0,
) -> list[Delivered]:
    """Produce ``records`` to ``topic`` and wait for them; their deliveries in order."""
    with RecordProducer(bootstrap_servers, timeout=timeout) as producer:
        for record in records:
            producer.send(topic, record)
        return producer.flush()
