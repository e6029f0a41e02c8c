"""Kafka helpers on confluent-kafka: topic admin, produce, read and follow, PRINT formatting.

    admin = TopicAdmin(bootstrap)
    admin.create_topic("orders", partitions=2)
    produce(bootstrap, "orders", [ProducerRecord(key=b"k", value=b"v", timestamp=0)])
    read_topic(bootstrap, "orders")          # [ConsumedRecord(...)], committed records only

Keys and values are raw bytes here; the record formats live in ``engine.serde``.
"""

from __future__ import annotations

from importlib.util import find_spec

# The Python workers of a Spark cluster import ``engine.kafka.security`` (the transactional
# writer's settings travel with it) with an interpreter that may have PySpark alone: there the
# helpers on confluent-kafka are not imported (nothing in a worker uses them). Wherever
# confluent-kafka is installed, as it is with kspark, the package is what it always was.
if find_spec("confluent_kafka") is not None:
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
