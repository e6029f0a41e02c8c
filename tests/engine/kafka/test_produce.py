"""Producing records with explicit bytes, timestamps, partitions and headers."""

from __future__ import annotations

import pytest

from engine.data.partitioner import partition_for
from engine.data.records import Header
from engine.errors import KafkaClientError
from engine.kafka import ProducerRecord, RecordProducer, TopicAdmin, produce, read_topic


def test_records_land_with_their_key_value_timestamp_and_headers(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic)
    delivered = produce(bootstrap, topic, [
        ProducerRecord(key=b"k1", value=b"v1", timestamp=1, headers=(Header("h", b"x"), Header("n", None))),
        ProducerRecord(key=None, value=None, timestamp=1_000),
    ])
    assert [(d.partition, d.offset, d.timestamp) for d in delivered] == [(0, 0, 1), (0, 1, 1_000)]
    first, second = read_topic(bootstrap, topic)
    assert (first.key, first.value, first.timestamp, first.headers) == (
        b"k1", b"v1", 1, (Header("h", b"x"), Header("n", None))
    )
    assert (second.key, second.value, second.timestamp, second.headers) == (None, None, 1_000, ())


def test_an_explicit_partition_is_kept(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic, partitions=3)
    delivered = produce(bootstrap, topic, [ProducerRecord(key=b"k", value=b"v", partition=2)])
    assert delivered[0].partition == 2


def test_keys_are_partitioned_like_the_java_client(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    # murmur2(key) & 0x7fffffff % 6, as the Java client's default partitioner computes it.
    admin.create_topic(topic, partitions=6)
    keys = [b"a", b"b", b"c", b"hello", b"ksql"]
    delivered = produce(bootstrap, topic, [ProducerRecord(key=k, value=b"") for k in keys])
    assert [d.partition for d in delivered] == [partition_for(k, 6) for k in keys]


def test_producing_to_a_missing_partition_raises_naming_the_topic(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic, partitions=1)
    with pytest.raises(KafkaClientError, match=f"Cannot produce to topic '{topic}' partition '5'"):
        produce(bootstrap, topic, [ProducerRecord(value=b"v", partition=5)], timeout=5)


def test_a_transaction_outside_a_transactional_producer_is_refused(bootstrap: str) -> None:
    producer = RecordProducer(bootstrap)
    with pytest.raises(KafkaClientError, match="needs a producer made with a transactional_id"):
        with producer.transaction():
            pass


def test_a_partition_refused_before_sending_is_named_too(bootstrap: str, admin: TopicAdmin, topic: str) -> None:
    """Once the producer knows the topic's partitions, librdkafka refuses the record in
    ``produce`` itself rather than in its delivery report (seen in a CI run)."""
    admin.create_topic(topic, partitions=1)
    producer = RecordProducer(bootstrap)
    producer.send(topic, ProducerRecord(value=b"first"))
    producer.flush()  # the producer now has the topic's metadata
    with pytest.raises(KafkaClientError, match=f"Cannot produce to topic '{topic}' partition '5': .*Unknown partition"):
        producer.send(topic, ProducerRecord(value=b"v", partition=5))


def test_key_and_value_must_be_bytes() -> None:
    with pytest.raises(TypeError, match="ProducerRecord.value must be bytes or None, got str"):
        ProducerRecord(value="text")  # type: ignore[arg-type]


def test_timestamp_zero_is_refused_rather_than_sent_as_now() -> None:
    with pytest.raises(KafkaClientError, match="Cannot produce a record with timestamp 0: librdkafka"):
        ProducerRecord(value=b"v", timestamp=0)


def test_a_topic_made_again_with_fewer_partitions_takes_the_next_record(
    bootstrap: str, admin: TopicAdmin, topic: str
) -> None:
    """A long-lived writer (the server's INSERT VALUES) whose producer still sees the topic's
    old partitions: the record is sent again by a producer that reads the topic afresh."""
    import time

    from engine.data.records import TopicRecord
    from engine.hosting.application import KafkaTopics
    from engine.plan import types as T
    from engine.plan.schema import Column, Namespace
    from engine.runtime.adapter import TopicCodec
    from engine.serde import FormatInfo, SerdeFeatures, key_serde, value_serde

    key = key_serde(FormatInfo("KAFKA"), [Column("K", T.STRING, Namespace.KEY)])
    value = value_serde(FormatInfo("JSON"), [Column("V", T.INTEGER)], SerdeFeatures())
    topics = KafkaTopics(bootstrap)
    admin.create_topic(topic, partitions=4)
    # "x" goes to partition 2 of 4 (murmur2), a partition the topic made again does not have.
    topics.publish(TopicRecord(topic, {"K": "x"}, {"V": 1}, 1), TopicCodec(key, value))
    admin.delete_topic(topic)
    deadline = time.monotonic() + 30
    while admin.topic_exists(topic) and time.monotonic() < deadline:
        time.sleep(0.2)
    admin.create_topic(topic, partitions=1)
    topics.publish(TopicRecord(topic, {"K": "x"}, {"V": 2}, 2), TopicCodec(key, value))
    (record,) = read_topic(bootstrap, topic)
    assert (record.partition, record.value) == (0, b'{"V":2}')
