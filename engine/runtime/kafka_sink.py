"""Exactly-once output: each micro-batch's records written in Kafka transactions tied to the batch.

Spark's own Kafka sink is at-least-once: a driver killed in the middle of a micro-batch
replays the batch on restart, and every record the batch had already written is written
again. ksqlDB offers ``exactly_once_v2``, and so does kspark, by default:

- The query's output runs through ``foreachBatch``. Each Spark partition of a batch is
  written by one transactional producer whose ``transactional.id`` is
  ``kspark-<application id>-<partition index>`` (the application id is unique per query on
  the broker: ``_confluent-ksql-<service id>query_<query id>`` by default); its ``initTransactions`` fences any zombie of
  an earlier attempt (and aborts what that one had left open).
- In the same transaction the producer commits the offset ``batch id + 1`` for a consumer
  group of its own (``_kspark-sink-<application id>-<partition index>``, on partition 0 of the
  output topic): the record of which batch that partition last committed, made visible
  atomically with the records.
- A replayed batch (same batch id, same input offsets, same partitioning: the query's
  processing is deterministic) finds the mark and skips the partitions already written.

Read with ``isolation.level=read_committed``, the output then holds every record exactly
once across crashes. The writing runs in the executors' JVMs (``kspark.TransactionalKafkaWriter``
in ``engine/components/java``, built by ``engine.components.jvm``) with the Java Kafka client,
which keeps every record's timestamp as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame

WRITER_CLASS = "kspark.TransactionalKafkaWriter"


@dataclass(frozen=True)
class TransactionalSink:
    """``foreachBatch`` function writing a query's encoded records to ``topic`` exactly once.

    The batch holds ``engine.runtime.kafka.SINK_SCHEMA`` rows: key, value, timestamp, headers.
    """

    bootstrap_servers: str
    topic: str
    query_id: str  # the application id: unique among every query writing to the broker
    # A partition's rows are computed while its transaction is open, and a micro-batch that
    # catches up with a large backlog runs for minutes, longer than Kafka's default 60 s
    # (after which the broker aborts the transaction). A restart still aborts a dead
    # writer's transaction at once (initTransactions fences it). Brokers allow up to
    # transaction.max.timeout.ms, 15 minutes by default.
    transaction_timeout_ms: int = 600_000

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        jvm = batch.sparkSession._jvm
        assert jvm is not None
        writer = jvm.kspark.TransactionalKafkaWriter(
            self.bootstrap_servers, self.topic, self.query_id, batch_id, self.transaction_timeout_ms
        )
        batch._jdf.foreachPartition(writer)
