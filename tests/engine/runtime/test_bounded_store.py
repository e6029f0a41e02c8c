"""The bounded runtime's in-memory topics: shared Arrow tables of their bytes, bulk appends."""

from __future__ import annotations

import gc
from typing import cast

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from engine.builders.formats import serdes_for
from engine.data.records import Header, TopicRecord
from engine.plan import types as T
from engine.plan.schema import Column, Namespace
from engine.plan.steps import Formats
from engine.runtime.adapter import (
    LARGE_TABLE_ROWS,
    BoundedRuntime,
    TopicCodec,
    TopicStore,
    codec_id,
    collector_paused,
)

COLUMNS = [Column("ID", T.BIGINT, Namespace.KEY), Column("N", T.INTEGER)]


def _codec() -> TopicCodec:
    return TopicCodec(*serdes_for(Formats(key_format="KAFKA", value_format="JSON"), COLUMNS))


def _runtime() -> BoundedRuntime:
    return BoundedRuntime(cast(SparkSession, None))  # the store alone: no Spark job runs here


def test_a_topic_read_twice_shares_one_table_until_the_topic_grows() -> None:
    runtime = _runtime()
    runtime.produce(TopicRecord("t", i, {"N": i}, i) for i in range(3))
    first = runtime.encoded_table("t", _codec())
    assert runtime.encoded_table("t", _codec()) is first
    assert first.column("__value").to_pylist() == [b'{"N":0}', b'{"N":1}', b'{"N":2}']
    runtime.produce([TopicRecord("t", 3, {"N": 3}, 3)])
    grown = runtime.encoded_table("t", _codec())
    assert grown is not first
    assert grown.column("__key").to_pylist()[-1] == (3).to_bytes(8, "big")
    assert grown.num_rows == 4


def test_extend_appends_as_append_does_record_by_record() -> None:
    records = [
        TopicRecord("out", 1, {"N": 1}, 10, 0, None, (Header("h", b"x"),)),
        TopicRecord("out", 2, {"N": 2}, 11, 1),
        TopicRecord("out", 3, None, 12, 0),
    ]
    seqs = [(0,), (1, 0), (2,)]
    one_by_one, bulk = TopicStore(), TopicStore()
    for record, seq in zip(records, seqs, strict=True):
        one_by_one.append(record, seq)
    ident = codec_id(_codec())
    pairs = [(b"k", b"v"), (None, b"w"), (b"k", None)]
    bulk.extend("out", records, seqs, pairs, ident)
    assert [(s.seq, s.record, s.offset) for s in bulk.read("out")] == [
        (s.seq, s.record, s.offset) for s in one_by_one.read("out")
    ]
    assert [s.offset for s in bulk.read("out")] == [0, 0, 1]  # offsets count per partition
    assert [s.encoded[ident] for s in bulk.read("out")] == pairs
    assert "out" in bulk.topics


def test_extend_of_one_partition_continues_its_offsets() -> None:
    store = TopicStore()
    store.append(TopicRecord("out", 0, {"N": 0}, 9, 2), (0,))  # partition 2 holds offset 0
    records = [TopicRecord("out", i, {"N": i}, 10 + i, 2) for i in range(1, 4)]
    store.extend("out", records, [(i,) for i in range(1, 4)], [(b"k", b"v")] * 3, b"id")
    assert [(s.seq, s.offset, s.record.key) for s in store.read("out")] == [((i,), i, i) for i in range(4)]
    assert store.read("out")[1].encoded == {b"id": (b"k", b"v")}
    with pytest.raises(ValueError, match="1 records, 2 seqs and 1 encoded pairs"):
        store.extend("out", records[:1], [(5,), (6,)], [(None, None)], b"id")


def test_a_large_topic_is_read_by_a_task_not_folded_into_the_plan(spark: SparkSession) -> None:
    runtime = BoundedRuntime(spark)
    count = LARGE_TABLE_ROWS + 1
    runtime.produce(TopicRecord("big", i, {"N": i}, i) for i in range(count))
    threshold = spark.conf.get("spark.sql.execution.arrow.localRelationThreshold")
    df = runtime.read_topic_bytes("big", _codec()).select(F.col("__value").cast("string").alias("text"))
    execution = df._jdf.queryExecution()
    assert "LocalRelation" not in execution.optimizedPlan().toString()  # nothing to fold into
    assert "Exchange" not in execution.executedPlan().toString()  # and no shuffle
    assert df.rdd.getNumPartitions() == 1  # one batch, one task, as an in-memory relation
    assert spark.conf.get("spark.sql.execution.arrow.localRelationThreshold") == threshold  # restored
    both = df.union(runtime.read_topic_bytes("big", _codec()).select(F.col("__value").cast("string")))
    assert both.count() == 2 * count
    assert [r.text for r in df.collect()] == [f'{{"N":{i}}}' for i in range(count)]  # in order


def test_a_small_topic_stays_an_in_memory_relation(spark: SparkSession) -> None:
    runtime = BoundedRuntime(spark)
    runtime.produce(TopicRecord("small", i, {"N": i}, i) for i in range(3))
    df = runtime.read_topic_bytes("small", _codec())
    assert "LocalTableScan" in df._jdf.queryExecution().executedPlan().toString()  # as planned cases record it


def test_the_collector_is_paused_for_the_block_and_left_as_it_was() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with pytest.raises(RuntimeError), collector_paused():
            raise RuntimeError("the block failed")
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_a_sink_job_is_named_for_its_topic(spark: SparkSession) -> None:
    from engine.runtime.local_frames import local_dataframe
    from engine.runtime.rows import RAW_SCHEMA

    runtime = BoundedRuntime(spark, TopicStore())
    assert runtime.write_sink("NAMED_SINK", local_dataframe(spark, [], RAW_SCHEMA)) == []
    # Spark takes each job's and RDD's long call site from this name, not from a walk of the
    # stack (PySpark sets the short one around each action and clears it after).
    assert spark.sparkContext._jsc.sc().getCallSite().longForm() == "kspark: write NAMED_SINK"
