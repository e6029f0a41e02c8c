"""Kafka helpers on confluent-kafka: topic admin, produce, read and follow, PRINT formatting.

    admin = TopicAdmin(bootstrap)
    admin.create_topic("orders", partitions=2)
    produce(bootstrap, "orders", [ProducerRecord(key=b"k", value=b"v", timestamp=0)])
    read_topic(bootstrap, "orders")          # [ConsumedRecord(...)], committed records only

Keys and values are raw bytes here; the record formats live in ``engine.serde``.
"""

from __future__ import annotations

from engine.kafka.admin import TopicAdmin, check_connection
from engine.kafka.consume import ConsumedRecord, follow_topic, read_topic
from engine.kafka.printing import RecordPrinter
from engine.kafka.produce import Delivered, ProducerRecord, RecordProducer, produce

__all__ = [
    "ConsumedRecord",
    "Delivered",
    "ProducerRecord",
    "RecordPrinter",
    "RecordProducer",
    "TopicAdmin",
    "check_connection",
    "follow_topic",
    "produce",
    "read_topic",
]
