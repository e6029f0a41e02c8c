"""Reading topics to their end (read_committed) and following them live."""

from __future__ import annotations

import threading
import time

import pytest

from engine.errors import KafkaClientError
from engine.kafka import (
    ProducerRecord,
    RecordProducer,
    TopicAdmin,
    follow_topic,
    produce,
    read_topic,
)


def test_a_read_returns_every_partition_in_offset_order(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic, partitions=2)
    produce(bootstrap, topic, [
        ProducerRecord(value=f"{p}-{i}".encode(), partition=p, timestamp=100 + i) for i in range(3) for p in (1, 0)
    ])
    records = read_topic(bootstrap, topic)
    assert [(r.partition, r.offset, r.value) for r in records] == [
        (0, 0, b"0-0"), (0, 1, b"0-1"), (0, 2, b"0-2"), (1, 0, b"1-0"), (1, 1, b"1-1"), (1, 2, b"1-2"),
    ]
    assert all(r.topic == topic for r in records)


def test_an_empty_topic_reads_as_no_records(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic, partitions=3)
    assert read_topic(bootstrap, topic, timeout=5) == []


def test_a_missing_topic_is_an_error_naming_it(bootstrap: str, topic: str) -> None:
    with pytest.raises(KafkaClientError, match=f"Topic '{topic}' does not exist."):
        read_topic(bootstrap, topic, timeout=5)


def test_read_committed_skips_aborted_transactions_and_keeps_committed_ones(
    bootstrap: str, admin: TopicAdmin, topic: str
) -> None:
    admin.create_topic(topic, partitions=2)
    with RecordProducer(bootstrap, transactional_id=f"{topic}-tx") as producer:
        with producer.transaction():
            producer.send(topic, ProducerRecord(key=b"a", value=b"committed-1", partition=0))
            producer.send(topic, ProducerRecord(key=b"b", value=b"committed-2", partition=1))
        with pytest.raises(RuntimeError, match="give up"):
            with producer.transaction():
                producer.send(topic, ProducerRecord(key=b"a", value=b"aborted", partition=0))
                producer.flush()  # the aborted record is in the log, not just queued
                raise RuntimeError("give up")
        with producer.transaction():
            producer.send(topic, ProducerRecord(key=b"a", value=b"committed-3", partition=0))
    committed = read_topic(bootstrap, topic, timeout=10)
    assert [(r.partition, r.value) for r in committed] == [(0, b"committed-1"), (0, b"committed-3"), (1, b"committed-2")]
    # The markers and the aborted record take offsets: 0 committed, 1 marker, 2 aborted, 3 marker, 4 committed.
    assert [r.offset for r in committed if r.partition == 0] == [0, 4]
    uncommitted = read_topic(bootstrap, topic, isolation_level="read_uncommitted", timeout=10)
    assert b"aborted" in [r.value for r in uncommitted]


def test_an_open_transaction_neither_shows_nor_blocks_a_read(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic)
    produce(bootstrap, topic, [ProducerRecord(value=b"before")])
    producer = RecordProducer(bootstrap, transactional_id=f"{topic}-open")
    with pytest.raises(RuntimeError, match="stop"):
        with producer.transaction():
            producer.send(topic, ProducerRecord(value=b"pending"))
            producer.flush()
            started = time.monotonic()
            records = read_topic(bootstrap, topic, timeout=10)
            elapsed = time.monotonic() - started
            raise RuntimeError("stop")  # aborts the transaction
    assert [r.value for r in records] == [b"before"]
    assert elapsed < 5


def test_records_produced_after_the_call_are_not_awaited(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic)
    produce(bootstrap, topic, [ProducerRecord(value=b"1")])
    stop = threading.Event()

    def keep_producing() -> None:
        while not stop.is_set():
            produce(bootstrap, topic, [ProducerRecord(value=b"later")])

    writer = threading.Thread(target=keep_producing)
    writer.start()
    try:
        records = read_topic(bootstrap, topic, timeout=10)
    finally:
        stop.set()
        writer.join()
    assert records[0].value == b"1"


def test_following_a_topic_yields_records_as_they_arrive_until_stopped(
    bootstrap: str, admin: TopicAdmin, topic: str
) -> None:
    admin.create_topic(topic, partitions=2)
    produce(bootstrap, topic, [ProducerRecord(value=b"old", partition=0)])
    done = threading.Event()
    seen: list[bytes | None] = []

    def follow() -> None:
        for record in follow_topic(bootstrap, topic, poll_timeout=0.1, stop=done.is_set):
            seen.append(record.value)

    follower = threading.Thread(target=follow)
    follower.start()
    try:
        produce(bootstrap, topic, [ProducerRecord(value=b"new", partition=1)])
        deadline = time.monotonic() + 10
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        done.set()
        follower.join(timeout=10)
    assert not follower.is_alive()
    assert sorted(v or b"" for v in seen) == [b"new", b"old"]


def test_following_from_the_end_skips_older_records(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic)
    produce(bootstrap, topic, [ProducerRecord(value=b"old")])
    done = threading.Event()
    seen: list[bytes | None] = []

    def follow() -> None:
        for record in follow_topic(bootstrap, topic, from_beginning=False, poll_timeout=0.1, stop=done.is_set):
            seen.append(record.value)

    follower = threading.Thread(target=follow)
    follower.start()
    try:  # the follower finds the end in its own time: produce until it sees something
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            produce(bootstrap, topic, [ProducerRecord(value=b"new")])
            time.sleep(0.2)
    finally:
        done.set()
        follower.join(timeout=10)
    assert seen and set(seen) == {b"new"}


def test_end_offsets_are_asked_again_while_a_new_topics_leader_moves() -> None:
    from confluent_kafka import KafkaError, KafkaException

    from engine.kafka.consume import _watermarks

    class _Consumer:
        def __init__(self, errors: list[int]) -> None:
            self.errors = errors

        def get_watermark_offsets(self, *args: object, **kwargs: object) -> tuple[int, int]:
            if self.errors:
                raise KafkaException(KafkaError(self.errors.pop(0)))
            return 0, 5

    moving = [KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE]
    assert _watermarks(_Consumer(moving), "t", 0, 5.0) == (0, 5)  # type: ignore[arg-type]
    with pytest.raises(KafkaClientError, match="Cannot get the end offsets of topic 't' partition 0"):
        _watermarks(_Consumer([KafkaError.TOPIC_AUTHORIZATION_FAILED]), "t", 0, 5.0)  # type: ignore[arg-type]
