"""Many request threads writing at once through one producer: each write answered exactly as it landed."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine.errors import KafkaClientError
from engine.facade.engine import KsqlEngine
from engine.hosting.application import KafkaTopics
from engine.kafka import ProducerRecord, TopicAdmin, read_topic
from engine.kafka.produce import SharedProducer

THREADS = 64
WRITES = 400


def test_concurrent_writes_are_each_acknowledged_once_and_land_once(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic, partitions=3)
    producer = SharedProducer(bootstrap)
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            delivered = list(pool.map(
                lambda i: producer.write(topic, ProducerRecord(key=str(i).encode(), value=str(i).encode())),
                range(WRITES),
            ))
    finally:
        producer.close()
    assert len({(d.partition, d.offset) for d in delivered}) == WRITES
    values = sorted(int(r.value) for r in read_topic(bootstrap, topic))
    assert values == list(range(WRITES))


def test_a_refused_record_is_an_error_for_its_writer_only(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic, partitions=1)
    producer = SharedProducer(bootstrap, timeout=10)
    try:
        with pytest.raises(KafkaClientError, match=f"Cannot produce to topic '{topic}' partition '5'"):
            producer.write(topic, ProducerRecord(value=b"x", partition=5))
        assert producer.write(topic, ProducerRecord(value=b"y")).offset == 0
    finally:
        producer.close()
    with pytest.raises(KafkaClientError, match="is closed"):
        producer.send(topic, ProducerRecord(value=b"z"))


def test_insert_values_of_many_threads_through_the_topic_service(bootstrap: str, topic: str) -> None:
    """The server's INSERT VALUES path (``KafkaTopics.publish``) from 64 threads at once: it
    shared one send-then-flush producer between request threads, and reported rows failed
    that were written."""
    topics = KafkaTopics(bootstrap)
    engine = KsqlEngine({}, topics=topics)
    engine.execute_sql(f"CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', "
                       "VALUE_FORMAT='JSON', PARTITIONS=2);")
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(lambda i: engine.insert_row("S", {"ID": str(i), "V": i}), range(WRITES)))
    finally:
        topics.close()
    values = sorted(json.loads(r.value)["V"] for r in read_topic(bootstrap, topic))
    assert values == list(range(WRITES))
