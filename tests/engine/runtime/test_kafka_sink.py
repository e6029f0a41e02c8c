"""The exactly-once writer's replay rule: a replayed batch skips only what it had written.

A batch's writer task ``i`` skips its records on replay when task ``i`` of an earlier attempt
committed them. Spark's Kafka source may hand a replayed batch its Kafka partitions in another
order than the first attempt (issue 12), so the writer must not take Spark's partitions as
they come: these tests feed it one batch's records in both orders.
"""

from __future__ import annotations

import uuid
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from engine.kafka.admin import TopicAdmin
from engine.kafka.consume import read_topic
from engine.runtime.kafka import SINK_SCHEMA
from engine.runtime.kafka_sink import KEY_HASH, SHUFFLED, TransactionalSink, writer_layout

# Two Kafka partitions' records of one micro-batch, as the sink step encodes them.
Record = tuple[bytes, bytes, int, list[Any]]
FIRST: list[Record] = [(f"a{i}".encode(), b'{"N":%d}' % i, 1_000 + i, []) for i in range(20)]
SECOND: list[Record] = [(f"b{i}".encode(), b'{"N":%d}' % i, 2_000 + i, []) for i in range(20)]


def _batch(spark: SparkSession, *partitions: list[Record]) -> DataFrame:
    """A batch whose Spark partition ``i`` holds ``partitions[i]``, as a source scan gives it."""
    context = spark.sparkContext
    rdd = context.union([context.parallelize(part, 1) for part in partitions])
    assert rdd.glom().map(len).collect() == [len(p) for p in partitions]
    return spark.createDataFrame(rdd, SINK_SCHEMA)


def _contents(df: DataFrame) -> list[list[bytes]]:
    return [sorted(r["key"] for r in part) for part in df.rdd.glom().collect()]


def test_writer_tasks_get_the_same_records_whatever_order_the_source_partitions_come_in(spark: Any) -> None:
    live, replayed = _batch(spark, FIRST, SECOND), _batch(spark, SECOND, FIRST)
    assert _contents(live) != _contents(replayed)  # Spark's own partitions differ

    (live_layout, live_records), (replay_layout, replay_records) = writer_layout(live), writer_layout(replayed)

    assert live_layout == replay_layout == KEY_HASH
    assert _contents(live_records) == _contents(replay_records)
    assert all(_contents(live_records)), "both writer tasks get records"


def test_a_key_keeps_its_order_in_its_writer_task(spark: Any) -> None:
    same_key: list[Record] = [(b"k", b'{"N":%d}' % i, 1_000 + i, []) for i in range(30)]
    _, records = writer_layout(_batch(spark, same_key, SECOND))
    (values,) = [[r["value"] for r in part if r["key"] == b"k"] for part in records.rdd.glom().collect()
                 if any(r["key"] == b"k" for r in part)]
    assert values == [v for _, v, _, _ in same_key]


def test_a_batch_whose_scans_lie_below_a_shuffle_is_written_as_it_is(spark: Any) -> None:
    """A stateful operator's output: partition ``i`` is already task ``i`` on every attempt."""
    shuffled = _batch(spark, FIRST, SECOND).repartition(2, "key").select("key", "value", "timestamp", "headers")

    layout, records = writer_layout(shuffled)

    assert layout == SHUFFLED
    assert records is shuffled


def _written(kafka_broker: Any, topic: str) -> list[bytes]:
    return sorted(r.key for r in read_topic(kafka_broker.bootstrap_servers, topic) if r.key is not None)


def _sink(kafka_broker: Any) -> TransactionalSink:
    topic = f"sink_{uuid.uuid4().hex[:8]}"
    TopicAdmin(kafka_broker.bootstrap_servers).create_topic(topic, 2)
    return TransactionalSink(kafka_broker.bootstrap_servers, topic, f"test-sink-{uuid.uuid4().hex[:8]}")


def test_a_replayed_batch_whose_source_partitions_come_in_another_order_is_written_exactly_once(
    spark: Any, kafka_broker: Any
) -> None:
    sink = _sink(kafka_broker)
    everything = sorted(key for key, _, _, _ in FIRST + SECOND)
    # The first attempt is killed after writer task 0 committed its transaction, before task 1.
    layout, records = writer_layout(_batch(spark, FIRST, SECOND))
    sink.write(records.where(F.spark_partition_id() == 0), 7, layout)
    first_attempt = _written(kafka_broker, sink.topic)
    assert 0 < len(first_attempt) < len(everything)

    # The restarted query replays batch 7 with the Kafka partitions in the other order.
    sink(_batch(spark, SECOND, FIRST), 7)

    assert _written(kafka_broker, sink.topic) == everything
    sink(_batch(spark, FIRST, SECOND), 7)  # and a second replay of a complete batch writes nothing
    assert _written(kafka_broker, sink.topic) == everything
    sink(_batch(spark, [(b"c0", b"{}", 3_000, [])], []), 8)  # the next batch is written
    assert _written(kafka_broker, sink.topic) == sorted([*everything, b"c0"])


def test_a_mark_left_by_another_layout_does_not_skip_a_replayed_batch(spark: Any, kafka_broker: Any) -> None:
    """A batch half-written before this engine (marks without a layout) is written again in
    full by the restarted one: records may repeat at that one upgrade, none is lost."""
    sink = _sink(kafka_broker)
    sink.write(_batch(spark, FIRST, SECOND).where(F.spark_partition_id() == 0), 3, SHUFFLED)

    sink(_batch(spark, SECOND, FIRST), 3)

    written = _written(kafka_broker, sink.topic)
    assert sorted(set(written)) == sorted(key for key, _, _, _ in FIRST + SECOND)
    assert sorted(written) == sorted([key for key, _, _, _ in FIRST] * 2 + [key for key, _, _, _ in SECOND])
