"""Exactly-once output: each micro-batch's records written in Kafka transactions tied to the batch.

Spark's own Kafka sink is at-least-once: a driver killed in the middle of a micro-batch
replays the batch on restart, and every record the batch had already written is written
again. ksqlDB offers ``exactly_once_v2``, and so does kspark, by default:

- The query's output runs through ``foreachBatch``. Each Spark partition of a batch is
  written by one transactional producer whose ``transactional.id`` is
  ``kspark-<query id>-<partition index>``; its ``init_transactions`` fences any zombie of
  an earlier attempt (and aborts what that one had left open).
- In the same transaction the producer commits the offset ``batch id + 1`` for a consumer
  group of its own (``_kspark-sink-<query id>-<partition index>``, on partition 0 of the
  output topic): the record of which batch that partition last committed, made visible
  atomically with the records.
- A replayed batch (same batch id, same input offsets, same partitioning: the query's
  processing is deterministic) finds the mark and skips the partitions already written.

Read with ``isolation.level=read_committed``, the output then holds every record exactly
once across crashes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as ST

from engine.kafka.client import client_config

SUMMARY_SCHEMA = ST.StructType(
    [
        ST.StructField("partition", ST.IntegerType()),
        ST.StructField("written", ST.LongType()),
        ST.StructField("skipped", ST.BooleanType()),
    ]
)

# Per Python worker: one transactional producer (and marker consumer) per transactional id,
# reused across micro-batches so that init_transactions runs once per worker and partition.
_CLIENTS: dict[str, tuple[Any, Any]] = {}


@dataclass(frozen=True)
class TransactionalSink:
    """``foreachBatch`` function writing a query's records to ``topic`` exactly once."""

    bootstrap_servers: str
    topic: str
    query_id: str
    transaction_timeout_ms: int = 60_000

    def transactional_id(self, partition: int) -> str:
        return f"kspark-{self.query_id}-{partition}"

    def marker_group(self, partition: int) -> str:
        return f"_kspark-sink-{self.query_id}-{partition}"

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        sink = self

        def write(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
            yield _write_partition(sink, batch_id, batches)

        batch.mapInArrow(write, SUMMARY_SCHEMA).collect()

    def clients(self, partition: int) -> tuple[Any, Any]:
        """The producer (transactions initialised) and marker consumer of one partition."""
        from confluent_kafka import Consumer, Producer

        tid = self.transactional_id(partition)
        cached = _CLIENTS.get(tid)
        if cached is not None:
            return cached
        producer = Producer(
            client_config(
                self.bootstrap_servers,
                **{
                    "transactional.id": tid,
                    "transaction.timeout.ms": self.transaction_timeout_ms,
                    "partitioner": "murmur2_random",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "client.id": f"kspark-sink-{os.getpid()}",
                },
            )
        )
        _retrying(lambda: producer.init_transactions(30))
        consumer = Consumer(
            client_config(
                self.bootstrap_servers,
                **{
                    "group.id": self.marker_group(partition),
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                },
            )
        )
        _CLIENTS[tid] = (producer, consumer)
        return producer, consumer

    def drop_clients(self, partition: int) -> None:
        cached = _CLIENTS.pop(self.transactional_id(partition), None)
        if cached is not None:
            cached[1].close()


def _retrying(call: Any, attempts: int = 30, pause: float = 1.0) -> Any:
    """``call()``, retried while Kafka answers with a retriable error (a coordinator moving or
    still being created, as on a fresh broker)."""
    from confluent_kafka import KafkaError, KafkaException

    transient = {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError.CONCURRENT_TRANSACTIONS,
    }
    for attempt in range(attempts):
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            retry = error is not None and (error.retriable() or error.code() in transient)
            if attempt == attempts - 1 or not retry:
                raise
            time.sleep(pause)
    raise AssertionError("unreachable")


def _write_partition(sink: TransactionalSink, batch_id: int, batches: Iterable[pa.RecordBatch]) -> pa.RecordBatch:
    from confluent_kafka import TopicPartition
    from pyspark import TaskContext

    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    records = [r for b in batches for r in b.to_pylist()]

    def summary(written: int, skipped: bool) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist(
            [{"partition": partition, "written": written, "skipped": skipped}],
            schema=pa.schema([("partition", pa.int32()), ("written", pa.int64()), ("skipped", pa.bool_())]),
        )

    if not records:
        return summary(0, False)
    producer, consumer = sink.clients(partition)
    marker = TopicPartition(sink.topic, 0)
    try:
        committed = _retrying(lambda: consumer.committed([marker], timeout=30))[0].offset
        if committed >= batch_id + 1:
            return summary(0, True)  # a replayed batch this partition already wrote
        producer.begin_transaction()
        for r in records:
            producer.produce(
                sink.topic,
                key=r["key"],
                value=r["value"],
                timestamp=r["timestamp"] or 0,
                headers=[(h["key"], h["value"]) for h in (r["headers"] or ())] or None,
            )
            producer.poll(0)
        producer.send_offsets_to_transaction(
            [TopicPartition(sink.topic, 0, batch_id + 1)], consumer.consumer_group_metadata(), 30
        )
        producer.commit_transaction(60)
    except Exception:
        # Fenced, timed out or aborted: a fresh producer on retry fences this one.
        sink.drop_clients(partition)
        raise
    return summary(len(records), False)
