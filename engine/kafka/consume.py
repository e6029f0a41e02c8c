"""Read topics: everything up to now (``read_topic``), or live as records arrive (``follow_topic``).

    records = read_topic("127.0.0.1:9092", "orders")          # committed records, all partitions
    for record in follow_topic(bootstrap, "orders", stop=done.is_set):
        ...

Both read with ``isolation.level=read_committed`` by default: records of aborted
transactions are skipped, and so are records of transactions still open. The end of a
partition is its *last stable offset* (what ``get_watermark_offsets`` answers a
read_committed consumer) and a partition is caught up when the consumer's position has
reached it. Records are not counted: transaction markers take offsets too.

No consumer group is joined and no offset is committed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from engine.data.records import Header
from engine.errors import KafkaClientError
from engine.kafka.client import client_config, error_text

READ_COMMITTED = "read_committed"
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumedRecord:
    """One record as read from a topic, key and value as raw bytes (None for null)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


def read_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    timeout: float = 30.0,
    isolation_level: str = READ_COMMITTED,
    config: Mapping[str, Any] | None = None,
) -> list[ConsumedRecord]:
    """Every record of ``topic`` from the beginning to the end offsets at call time.

    Sorted by partition, then offset. Raises ``KafkaClientError`` if the topic does not
    exist or the end is not reached within ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    consumer = _consumer(bootstrap_servers, isolation_level, config)
    try:
        ends: dict[int, int] = {}
        for partition in _partitions(consumer, topic, timeout):
            low, high = _watermarks(consumer, topic, partition, timeout)
            if high > low:
                ends[partition] = high
        if not ends:
            return []
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        records: list[ConsumedRecord] = []
        pending = dict(ends)
        while pending:
            for message in consumer.consume(num_messages=1000, timeout=0.1):
                record = _record(message, topic)
                if record is not None and record.offset < ends[record.partition]:
                    records.append(record)
            positions = consumer.position([TopicPartition(topic, p) for p in pending])
            for position in positions:
                if position.offset >= pending[position.partition]:
                    del pending[position.partition]
            if pending and time.monotonic() >= deadline:
                where = ", ".join(f"partition {p} at {_offset(positions, p)} of {end}" for p, end in sorted(pending.items()))
                raise KafkaClientError(
                    f"Reading topic '{topic}' did not reach its end offsets within {timeout:g} s ({where})."
                )
        records.sort(key=lambda r: (r.partition, r.offset))
        return records
    finally:
        consumer.close()


def follow_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    from_beginning: bool = True,
    poll_timeout: float = 0.5,
    stop: Callable[[], bool] | None = None,
    isolation_level: str = READ_COMMITTED,
    config: Mapping[str, Any] | None = None,
) -> Iterator[ConsumedRecord]:
    """Yield the records of ``topic`` as they arrive, until ``stop()`` is true.

    Starts at the beginning of every partition (or at their ends). ``stop`` is checked
    after each poll of at most ``poll_timeout`` seconds, so the iterator ends that long
    after it turns true; closing the iterator (``break``) also ends it.
    """
    consumer = _consumer(bootstrap_servers, isolation_level, config)
    try:
        start = OFFSET_BEGINNING if from_beginning else OFFSET_END
        partitions = _partitions(consumer, topic, 30.0)
        consumer.assign([TopicPartition(topic, p, start) for p in partitions])
        while stop is None or not stop():
            for message in consumer.consume(num_messages=500, timeout=poll_timeout):
                record = _record(message, topic)
                if record is not None:
                    yield record
    finally:
        consumer.close()


def _consumer(bootstrap_servers: str, isolation_level: str, config: Mapping[str, Any] | None) -> Consumer:
    return Consumer(client_config(
        bootstrap_servers,
        **{
            "group.id": f"kspark-reader-{uuid.uuid4().hex}",  # required, never joined or committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": False,
            "isolation.level": isolation_level,
            **(config or {}),
        },
    ))


def _partitions(consumer: Consumer, topic: str, timeout: float) -> list[int]:
    try:
        metadata = consumer.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        raise KafkaClientError(f"Cannot read topic '{topic}': {error_text(exc)}.") from None
    found = metadata.topics.get(topic)
    if found is None or (found.error is not None and found.error.code() in (
        KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC
    )):
        raise KafkaClientError(f"Topic '{topic}' does not exist.")
    if found.error is not None:
        raise KafkaClientError(f"Cannot read topic '{topic}': {error_text(found.error)}.")
    return sorted(found.partitions)


_LEADER_MOVING = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE})


def _watermarks(consumer: Consumer, topic: str, partition: int, timeout: float) -> tuple[int, int]:
    """The partition's offsets; asked again while its leader moves or is not known yet (a
    topic just created), within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=max(0.1, deadline - time.monotonic()), cached=False
            )
            return int(low), int(high)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            code = error.code() if isinstance(error, KafkaError) else None
            if code not in _LEADER_MOVING or time.monotonic() >= deadline:
                raise KafkaClientError(
                    f"Cannot get the end offsets of topic '{topic}' partition {partition}: {error_text(exc)}."
                ) from None
            time.sleep(0.1)


def _record(message: Any, topic: str) -> ConsumedRecord | None:
    error = message.error()
    if error is not None:
        if error.code() == KafkaError._PARTITION_EOF:
            return None
        raise KafkaClientError(f"Cannot read topic '{topic}': {error_text(error)}.")
    kind, timestamp = message.timestamp()
    headers = message.headers() or ()
    return ConsumedRecord(
        topic=message.topic(),
        partition=message.partition(),
        offset=message.offset(),
        timestamp=NO_TIMESTAMP if kind == 0 else timestamp,
        key=message.key(),
        value=message.value(),
        headers=tuple(Header(k, v) for k, v in headers),
    )


def _offset(positions: list[TopicPartition], partition: int) -> int:
    return next((p.offset for p in positions if p.partition == partition), -1)
