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
- A replayed batch (same batch id, same input offsets) finds the mark and skips the
  partitions already written. That is right only if writer task ``i`` gets the same records
  on every attempt of a batch (``writer_layout``). The query's processing gives each attempt
  the same records, but not always in the same Spark partitions: Spark's Kafka source numbers
  a batch's partitions in the order of a map of its end offsets, which a running query takes
  from the broker's answer and a restarted one reads back from the offset log. For some
  topic names the two orders differ: a replayed batch would then read Kafka partition 0 in
  Spark partition 1 and the other way round, skip the records that had not been written
  and write the others a second time.
  So when the writing stage reads a source directly (no shuffle between the batch's RDD and
  a source in its lineage), the batch is first hash-partitioned on the record key into as
  many partitions as it has: the records of writer task ``i`` are then a function of the
  batch's records alone. A batch already shuffled (a stateful operator's output: partition
  ``i`` is task ``i``) is written as it is.
- Each mark carries the layout it was written under (``""`` for a shuffled batch, as marks
  have always been; ``"key-hash"`` for a re-partitioned one). A mark of another layout does
  not skip: a batch half-written by an older engine is written again in full (repeats are
  possible at that one upgrade, losses are not).

Read with ``isolation.level=read_committed``, the output then holds every record exactly
once across crashes. The writing runs in the executors' JVMs (``kspark.TransactionalKafkaWriter``
in ``engine/components/java``, built by ``engine.components.jvm``) with the Java Kafka client,
which keeps every record's timestamp as it is, and with the cluster's security properties
(``engine.kafka.security``), which travel with the writer to the executors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from engine.kafka.security import security_for

WRITER_CLASS = "kspark.TransactionalKafkaWriter"


# The layout of a batch whose partitions come from a shuffle (the tag every older mark has).
SHUFFLED = ""
# The layout of a batch hash-partitioned on the record key by ``writer_layout``.
KEY_HASH = "key-hash"


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
        layout, records = writer_layout(batch)
        self.write(records, batch_id, layout)

    def write(self, records: DataFrame, batch_id: int, layout: str) -> None:
        """Write each partition of ``records`` in its writer task's transaction, marked with
        ``layout``; a partition whose mark for ``batch_id`` has the same layout is skipped."""
        jvm = records.sparkSession._jvm
        assert jvm is not None
        client = jvm.java.util.HashMap()
        for key, value in security_for(self.bootstrap_servers).java().items():
            client.put(key, value)
        writer = jvm.kspark.TransactionalKafkaWriter(
            self.bootstrap_servers, self.topic, self.query_id, batch_id, self.transaction_timeout_ms, layout,
            client,
        )
        records._jdf.foreachPartition(writer)


def writer_layout(batch: DataFrame) -> tuple[str, DataFrame]:
    """The batch laid out so that writer task ``i`` gets the same records on every attempt.

    A batch whose every source lies below a shuffle is returned as it is (``SHUFFLED``): its
    partition ``i`` is the shuffle's partition ``i``. A batch whose writing stage reads a
    source directly is hash-partitioned on the record key into as many partitions as it has
    (``KEY_HASH``); a key's records stay in one partition, in their order.
    """
    rdd = batch._jdf.rdd()  # a foreachBatch batch's plan is one scan of its RDD: ask the RDD
    if not _sources_outside_shuffles(batch.sparkSession, rdd):
        return SHUFFLED, batch
    return KEY_HASH, batch.repartition(max(1, int(rdd.getNumPartitions())), "key")


def _sources_outside_shuffles(spark: SparkSession, rdd: Any) -> bool:
    """Whether an RDD without parents is reached from ``rdd`` without crossing a shuffle."""
    jvm = spark._jvm
    assert jvm is not None
    shuffle = jvm.java.lang.Class.forName("org.apache.spark.ShuffleDependency")
    pending = [rdd]
    while pending:
        dependencies = pending.pop().dependencies()
        if dependencies.isEmpty():
            return True
        for i in range(dependencies.size()):
            dependency = dependencies.apply(i)
            if not shuffle.isInstance(dependency):
                pending.append(dependency.rdd())
    return False
