"""The streaming runtime: step builders' DataFrames as Structured Streaming queries on Kafka.

The adapter answers the builders' calls with streaming DataFrames:

- ``read_topic``: Spark's Kafka source (``read_committed``, headers included) decoded to the
  raw record rows the source builders take (key and value in QTT form, windowed keys split
  into key and window). Each record's ``__seq`` is ``[batch time, running max timestamp of
  its partition within the batch, source index, partition, offset]``: later micro-batches
  sort after earlier ones, and within a batch the partitions merge as Kafka Streams merges a
  task's partitions (the partition whose head record has the smallest timestamp goes first).
- ``keyed`` / ``keyed_with_closes`` / ``suppress``: one ``transformWithStateInPandas``
  operator per stateful step, grouped by *task* (a hash of the group key modulo the
  query's task count, fixed at its first start). A task runs ``engine.runtime.tasks`` over
  its records in seq order and keeps each group's state, its stream time and its waiting
  outer-join or suppressed entries in Spark's state store, checkpointed with the query.
- ``running_aggregate`` (``streamAggregateV3``): one ``transformWithStateInPandas`` operator
  grouped by the grouping key itself; a key's records of a micro-batch are aggregated at
  once over typed columns (``engine.runtime.running``), its accumulators kept in the store.
- ``running_aggregate_by_task`` (``streamAggregateV4``): the same computation grouped by
  task, each group's accumulators in a MapState, so that a task's output keeps input order
  across its groups as ksqlDB's does (V3's comes out a group at a time).
- ``sink_records``: the sink builder's rows encoded to Kafka key/value bytes, which
  ``engine.runtime.kafka_sink`` writes exactly once.

Stream time is per task. Where ksqlDB repartitions (GROUP BY an expression, a join on a
non-key column) its tasks are the repartition topic's partitions, which is what this is;
where it does not, ksqlDB's tasks are the source partitions and two keys share a clock when
they share a source partition rather than a task. With one partition the two agree.
"""

from __future__ import annotations

import logging
import pickle
import re
from collections.abc import Iterable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from engine.errors import KsqlError, SchemaRegistryUnavailableError
from engine.hosting.query_metrics import SOURCE_OBSERVATION
from engine.kafka.security import security_for
from engine.plan.schema import LogicalSchema
from engine.runtime import keyed as K
from engine.runtime import processing_log
from engine.runtime import rows as R
from engine.runtime.adapter import TopicCodec
from engine.runtime.lazy_processor import (
    MAP,
    VALUE,
    DeclaredStateProcessor,
    LazyProcessor,
    StateVariable,
)
from engine.runtime.running import RunningCall, run_group, run_task
from engine.runtime.tasks import Clock, Envelope, KeyedTask, SuppressBuffer
from engine.serde.formats import deserialization_failure
from engine.serde.windowed import (
    decode_session_window_key,
    decode_time_window_key,
    encode_session_window_key,
    encode_time_window_key,
)

PROCESSING_LOG = logging.getLogger("kspark.processing")

TASK = "__task"
OUT = "__out"
SUPPRESS_KEY = "__suppress_key"
PICKLED_ROW = "__pickled"

OUT_SCHEMA = ST.StructType([ST.StructField(OUT, ST.BinaryType())])
BLOB = ST.StructType([ST.StructField("b", ST.BinaryType())])
GROUP_KEY = ST.StructType([ST.StructField("g", ST.BinaryType())])  # a MapState's key: a group
SUPPRESS_ENVELOPE = ST.StructType(
    [ST.StructField(SUPPRESS_KEY, ST.StringType()), ST.StructField(PICKLED_ROW, ST.BinaryType())]
)

# Encoded sink records, as the exactly-once writer takes them.
SINK_SCHEMA = ST.StructType(
    [
        ST.StructField("key", ST.BinaryType()),
        ST.StructField("value", ST.BinaryType()),
        ST.StructField("timestamp", ST.LongType()),
        ST.StructField("headers", R.HEADER_SPARK_TYPE),
    ]
)

# A windowed V5 sink's records: also the key's bytes without the window, from which the
# writer (``kspark.TransactionalKafkaWriter``) computes the record's partition as Kafka
# Streams' WindowedStreamPartitioner does (``engine.data.partitioner``).
PARTITION_KEY = "partitionKey"
BASE_KEY_SINK_SCHEMA = ST.StructType([*SINK_SCHEMA.fields, ST.StructField(PARTITION_KEY, ST.BinaryType())])

STATE_STORE_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

# Kafka consumer settings every source gets for latency alone: what a query reads, and so
# what its checkpoint depends on, is the same without them (``describe_streaming_plan``
# leaves them out). Spark keeps a source's consumer between micro-batches, and that
# consumer keeps a fetch in flight past the batch's last offset. The next batch's seek
# then waits for that fetch to come back, which on a quiet topic the broker holds for
# ``fetch.max.wait.ms`` (500 ms by default): half a second added to every batch. At 10 ms
# that wait no longer shows in a query's latency.
SOURCE_TUNING: dict[str, str] = {"kafka.fetch.max.wait.ms": "10"}


@dataclass
class KafkaRuntime:
    """Builds one query's streaming DataFrames over a Kafka cluster.

    One instance per query build: ``tasks`` is the query's task count (frozen into its
    checkpoint at the first start) and sources are numbered in build order.
    """

    spark: SparkSession
    bootstrap_servers: str
    tasks: int = 1
    starting_offsets: str = "latest"
    query_id: str = ""
    # ``ksql.schema.registry.url``: AVRO and JSON_SR topics are read and written in the
    # registry's wire format (``engine.serde.registry``); None keeps the plain bytes.
    registry_url: str | None = None
    # Count each source's bytes (engine.hosting.query_metrics.SOURCE_OBSERVATION). Metrics only:
    # the running application asks for it; the plans the harness records are built without it.
    metered: bool = False
    _sources: int = field(default=0, init=False)
    # One line per stateful operator, in build order: what a checkpoint's state depends on.
    stateful_operators: list[str] = field(default_factory=list, init=False)

    # ------------------------------------------------------------------ sources

    def read_topic(self, topic: str, codec: TopicCodec) -> DataFrame:
        codec = registry_codec(codec, topic, self.registry_url)
        columns, index = self._kafka_columns(topic)
        return columns.mapInArrow(_source_decoder(codec, index, self.query_id, topic), R.RAW_SCHEMA)

    def read_topic_bytes(self, topic: str, codec: TopicCodec) -> DataFrame:
        """The topic's records with their Kafka bytes; only the input-order key is computed in
        Python (vectorised over Arrow columns: no record is converted to Python values)."""
        columns, index = self._kafka_columns(topic)
        columns = columns.withColumn("headers", F.col("headers").cast(R.HEADER_SPARK_TYPE))
        return columns.mapInArrow(_sequencer(index, topic), R.RAW_SCHEMA)

    def read_topic_bytes_in_partition_order(self, topic: str, codec: TopicCodec) -> DataFrame:
        """``read_topic_bytes`` without its Python pass: ``__seq`` is ``[batch time, timestamp,
        source index, partition, offset]``, made in Spark. A query with no stateful step
        writes each partition's records in the order they come and never compares records of
        two partitions, so it needs no merge order (``streamSourceV4``); the Python pass over
        every record's bytes was half the time of such a query (stream_bench)."""
        columns, index = self._kafka_columns(topic)
        seq = F.array(*[
            F.coalesce(c.cast("bigint"), F.lit(0).cast("bigint"))  # never null, as RAW_SCHEMA's
            for c in (F.col("batch"), F.col("ts"), F.lit(index), F.col("partition"), F.col("offset"))
        ])
        return columns.select(
            seq.alias(R.SEQ),
            F.col("key").alias("__key"),
            F.col("value").alias("__value"),
            F.col("ts").alias("__ts"),
            F.col("partition").alias("__partition"),
            F.col("offset").alias("__offset"),
            F.col("headers").cast(R.HEADER_SPARK_TYPE).alias(R.HEADERS),
            F.lit(None).cast("bigint").alias("__wstart"),
            F.lit(None).cast("bigint").alias("__wend"),
        )

    def _kafka_columns(self, topic: str) -> tuple[DataFrame, int]:
        index = self._sources
        self._sources += 1
        kafka = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("subscribe", topic)
            .option("startingOffsets", self.starting_offsets)
            .option("includeHeaders", "true")
            .option("kafka.isolation.level", "read_committed")
            # Transaction markers leave gaps in the offsets a read_committed reader sees.
            .option("failOnDataLoss", "false")
            .options(**SOURCE_TUNING)
            .options(**security_for(self.bootstrap_servers).spark_options())
            .load()
        )
        if self.metered:
            size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
            kafka = kafka.observe(f"{SOURCE_OBSERVATION}{index}",
                                  F.coalesce(F.sum(size), F.lit(0)).cast("long").alias("bytes"))
        columns = kafka.select(
            "key",
            "value",
            "partition",
            "offset",
            F.unix_millis("timestamp").alias("ts"),
            "headers",
            F.unix_millis(F.current_timestamp()).alias("batch"),
        )
        return columns, index

    # ------------------------------------------------------------------ keyed operators

    def _task_of(self, df: DataFrame, *columns: str) -> DataFrame:
        return df.withColumn(TASK, F.pmod(F.xxhash64(*[F.col(c) for c in columns]), F.lit(self.tasks)))

    def _keyed(
        self,
        inputs: list[K.KeyedInput],
        handler: K.KeyedHandler,
        output_schema: LogicalSchema,
        name: str,
        closes: bool,
    ) -> DataFrame:
        envelopes: DataFrame | None = None
        for inp in inputs:
            env = K.envelope(inp, name)
            envelopes = env if envelopes is None else envelopes.unionByName(env)
        assert envelopes is not None
        sides = max(inp.side for inp in inputs) + 1
        tasks = self._task_of(envelopes, K.GROUP)
        processor = KeyedTaskProcessor(KeyedTask(handler, sides, closes), tuple(tasks.columns))
        self._describe(name, processor, f"{type(handler).__name__}, {sides} sides, closes={closes}")
        processed = tasks.groupBy(TASK).transformWithStateInPandas(
            statefulProcessor=LazyProcessor(processor),
            outputStructType=OUT_SCHEMA,
            outputMode="Append",
            timeMode="None",
        )
        return _decode_rows(processed, output_schema, name)

    def _describe(self, name: str, processor: Any, detail: str) -> None:
        self.stateful_operators.append(
            f"operator {len(self.stateful_operators)}: {name} {type(processor).__name__} ({detail}); "
            f"grouped by {TASK} = hash mod {self.tasks}; state: {processor.STATE}"
        )

    def keyed(
        self,
        inputs: list[K.KeyedInput],
        *,
        handler: K.KeyedHandler,
        output_schema: LogicalSchema,
        name: str,
    ) -> DataFrame:
        return self._keyed(inputs, handler, output_schema, name, closes=False)

    def keyed_with_closes(
        self,
        inputs: list[K.KeyedInput],
        *,
        handler: K.KeyedHandler,
        output_schema: LogicalSchema,
        name: str,
    ) -> DataFrame:
        return self._keyed(inputs, handler, output_schema, name, closes=True)

    def running_aggregate(
        self, df: DataFrame, *, key_columns: Sequence[str], calls: Sequence[RunningCall],
        output: ST.StructType, name: str,
    ) -> DataFrame:
        """Running aggregates grouped by the key columns themselves (no task hash): Spark
        hands each key's records of a micro-batch to ``RunningAggregateProcessor``."""
        processor = RunningAggregateProcessor(tuple(calls), tuple(key_columns), tuple(df.columns), output)
        functions = ", ".join(c.function for c in calls)
        self.stateful_operators.append(
            f"operator {len(self.stateful_operators)}: {name} {type(processor).__name__} ({functions}); "
            f"grouped by {', '.join(key_columns)}; state: {processor.STATE}"
        )
        return df.groupBy(*key_columns).transformWithStateInPandas(
            statefulProcessor=LazyProcessor(processor),
            outputStructType=output,
            outputMode="Append",
            timeMode="None",
        )

    def running_aggregate_by_task(
        self, df: DataFrame, *, key_columns: Sequence[str], calls: Sequence[RunningCall],
        output: ST.StructType, name: str, previous: bool,
    ) -> DataFrame:
        """Running aggregates of each task's groups (``RunningAggregateTaskProcessor``): a
        task's records of a micro-batch come out in input order across its groups."""
        processor = RunningAggregateTaskProcessor(
            tuple(calls), tuple(key_columns), (*df.columns, TASK), output, previous=previous
        )
        functions = ", ".join(c.function for c in calls)
        with_previous = "; each record with its group's previous results" if previous else ""
        self._describe(name, processor, f"{functions}; groups by {', '.join(key_columns)}{with_previous}")
        return self._task_of(df, *key_columns).groupBy(TASK).transformWithStateInPandas(
            statefulProcessor=LazyProcessor(processor),
            outputStructType=output,
            outputMode="Append",
            timeMode="None",
        )

    def suppress(
        self,
        df: DataFrame,
        schema: LogicalSchema,
        grace_ms: int,
        *,
        name: str,
        retention_ms: int | None = None,
    ) -> DataFrame:
        key = F.to_json(F.struct(*[F.col(R.spark_name(c.name)) for c in schema.key])) if schema.key else F.lit("")

        def wrap(row: dict[str, Any]) -> list[dict[str, Any]]:
            suppress_key = row.pop(SUPPRESS_KEY)
            return [{SUPPRESS_KEY: suppress_key, PICKLED_ROW: pickle.dumps(row)}]

        envelopes = R.map_rows(
            df.withColumn(SUPPRESS_KEY, key),
            input_schema=schema,
            output_schema=None,
            output_spark_schema=SUPPRESS_ENVELOPE,
            fn=wrap,
            name=f"{name}_buffer",
            input_fields=(*R.META_NAMES, SUPPRESS_KEY),
        )
        tasks = self._task_of(envelopes, SUPPRESS_KEY)
        processor = SuppressProcessor(grace_ms, tuple(tasks.columns), retention_ms)
        retention = "" if retention_ms is None else f", retention {retention_ms} ms"
        self._describe(name, processor, f"grace {grace_ms} ms{retention}")
        processed = tasks.groupBy(TASK).transformWithStateInPandas(
            statefulProcessor=LazyProcessor(processor),
            outputStructType=OUT_SCHEMA,
            outputMode="Append",
            timeMode="None",
        )
        return _decode_rows(processed, schema, name)

    # ------------------------------------------------------------------ sinks

    def sink_records(
        self, df: DataFrame, codec: TopicCodec, name: str, *, base_key_partitions: bool = False
    ) -> DataFrame:
        """The sink builder's raw rows as Kafka records (``SINK_SCHEMA``); with
        ``base_key_partitions`` (a windowed V5 sink) also each record's key bytes without the
        window, which place it (``BASE_KEY_SINK_SCHEMA``)."""
        schema = BASE_KEY_SINK_SCHEMA if base_key_partitions else SINK_SCHEMA
        return df.mapInArrow(_sink_encoder(codec, self.query_id, name, schema), schema)

    @staticmethod
    def encoded_sink_records(df: DataFrame) -> DataFrame:
        """A V2 sink's rows (Kafka bytes already) as Kafka records (``SINK_SCHEMA``)."""
        return df.select(
            F.col("__key").alias("key"),
            F.col("__value").alias("value"),
            F.col("__ts").alias("timestamp"),
            F.col(R.HEADERS).cast(SINK_SCHEMA["headers"].dataType).alias("headers"),
        )


def registry_codec(codec: TopicCodec, topic: str, registry_url: str | None) -> TopicCodec:
    """``codec`` with the schema registry's wire serdes for ``topic`` when a registry is set
    (PROTOBUF_NOSR's bare payload needs none)."""
    from dataclasses import replace

    from engine.serde.registry import wire_serde

    return replace(codec, key=wire_serde(codec.key, topic, registry_url),
                   value=wire_serde(codec.value, topic, registry_url))


# A tuning option as a source's options print in an analysed plan: ``k=v`` in its
# ``[...]`` list and ``k -> v`` in its ``HashMap(...)``, with the separator next to it.
_TUNING_OPTIONS = re.compile(
    "|".join(
        rf"{option}, |, {option}(?=[\])])"
        for option in (rf"{re.escape(k)}(?:=| -> ){re.escape(v)}" for k, v in SOURCE_TUNING.items())
    )
)


def describe_streaming_plan(runtime: KafkaRuntime, df: DataFrame) -> str:
    """What a streaming query's checkpoint depends on: its stateful operators (order, task
    count, state variables) and its analysed logical plan (Spark optimises a streaming plan
    only once it runs), without the sources' ``SOURCE_TUNING`` options. Not normalised."""
    plan = _TUNING_OPTIONS.sub("", str(df._jdf.queryExecution().analyzed().toString()))
    operators = "\n".join(runtime.stateful_operators) or "no stateful operators"
    return f"{operators}\n\n{plan}"


# ---------------------------------------------------------------------- record codecs


def _log(query_id: str, where: str, message: str, **details: Any) -> None:
    processing_log.follow_env()
    PROCESSING_LOG.warning("%s %s: %s", query_id, where, message, extra={"kspark_details": details or None})


def _source_decoder(codec: TopicCodec, index: int, query_id: str, topic: str) -> Any:
    arrow_schema = R.arrow_schema_of(R.RAW_SCHEMA)
    session = codec.window_type == "SESSION"

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        head_time: dict[int, int] = {}  # per partition: the running max timestamp in this batch
        for batch in batches:
            out: list[dict[str, Any]] = []
            for r in batch.to_pylist():
                partition, offset, ts = r["partition"], r["offset"], r["ts"]
                merged = max(head_time.get(partition, ts), ts)
                head_time[partition] = merged
                key_bytes, start, end = r["key"], None, None
                target, raw, serde = "key", r["key"], codec.key
                try:
                    if session and key_bytes is not None:
                        key_bytes, start, end = decode_session_window_key(key_bytes)
                    elif codec.window_type is not None and key_bytes is not None:
                        key_bytes, start = decode_time_window_key(key_bytes)
                        end = None if codec.window_size_ms is None else start + codec.window_size_ms
                    key = codec.key.from_bytes(key_bytes)
                    target, raw, serde = "value", r["value"], codec.value
                    value = codec.value.from_bytes(r["value"])
                except KsqlError as exc:
                    _log(query_id, topic, deserialization_failure(serde.format.name, target, topic, exc),
                         type=processing_log.DESERIALIZATION, target=target, topic=topic, record=raw,
                         cause=[f"{exc} (partition {partition} offset {offset})"])
                    continue
                headers = [{"KEY": h["key"], "VALUE": h["value"]} for h in (r["headers"] or ())]
                out.append(
                    {
                        R.SEQ: [r["batch"], merged, index, partition, offset],
                        "__key": pickle.dumps(key),
                        "__value": pickle.dumps(value),
                        "__ts": ts,
                        "__partition": partition,
                        "__offset": offset,
                        R.HEADERS: headers,
                        "__wstart": start,
                        "__wend": end,
                    }
                )
            yield pa.RecordBatch.from_pylist(out, schema=arrow_schema)

    decode.__name__ = f"Source_{R._function_name(topic)}"
    return decode


def _sequencer(index: int, topic: str) -> Any:
    """Kafka records -> ``RAW_SCHEMA`` rows keeping their bytes, with the same input-order key
    as ``_source_decoder`` (batch, running max timestamp per partition, source, partition,
    offset), computed on Arrow columns."""
    arrow_schema = R.arrow_schema_of(R.RAW_SCHEMA)
    seq_type = arrow_schema.field(R.SEQ).type

    def sequence(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        head_time: dict[int, int] = {}
        for batch in batches:
            n = batch.num_rows
            partition = batch.column("partition").to_numpy(zero_copy_only=False).astype(np.int64)
            ts = batch.column("ts").to_numpy(zero_copy_only=False).astype(np.int64)
            merged = np.empty(n, dtype=np.int64)
            for p in np.unique(partition):
                mask = partition == p
                running = np.maximum.accumulate(ts[mask])
                start = head_time.get(int(p))
                if start is not None:
                    running = np.maximum(running, start)
                merged[mask] = running
                head_time[int(p)] = int(running[-1])
            offset = batch.column("offset").to_numpy(zero_copy_only=False).astype(np.int64)
            keys = np.column_stack(
                [batch.column("batch").to_numpy(zero_copy_only=False).astype(np.int64), merged,
                 np.full(n, index, dtype=np.int64), partition, offset]
            ).reshape(-1)
            seq = pa.ListArray.from_arrays(
                pa.array(np.arange(0, 5 * n + 1, 5, dtype=np.int32)), pa.array(keys), type=seq_type
            )
            headers = batch.column("headers")
            nulls = pa.nulls(n, pa.int64())
            yield pa.RecordBatch.from_arrays(
                [seq, batch.column("key"), batch.column("value"), batch.column("ts"),
                 batch.column("partition"), batch.column("offset"), headers, nulls, nulls],
                schema=arrow_schema,
            )

    sequence.__name__ = f"Sequence_{R._function_name(topic)}"
    return sequence


def _sink_encoder(codec: TopicCodec, query_id: str, name: str, schema: ST.StructType = SINK_SCHEMA) -> Any:
    arrow_schema = R.arrow_schema_of(schema)
    session = codec.window_type == "SESSION"
    base_keys = PARTITION_KEY in schema.fieldNames()

    def encode(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: list[dict[str, Any]] = []
            for r in batch.to_pylist():
                try:
                    key = base_key = codec.key.to_bytes(pickle.loads(r["__key"]))
                    if session and r["__wstart"] is not None:
                        key = encode_session_window_key(key or b"", r["__wstart"], r["__wend"])
                    elif codec.window_type is not None and r["__wstart"] is not None:
                        key = encode_time_window_key(key or b"", r["__wstart"])
                    value = codec.value.to_bytes(pickle.loads(r["__value"]))
                except SchemaRegistryUnavailableError:
                    raise  # the query fails and restarts: no record is skipped
                except KsqlError as exc:
                    _log(query_id, name, f"Failed to serialise the record: {exc}",
                         type=processing_log.SERIALIZATION, topic=name)
                    continue
                headers = [{"KEY": h["KEY"], "VALUE": h["VALUE"]} for h in (r[R.HEADERS] or ())]  # HEADER_SPARK_TYPE
                record = {"key": key, "value": value, "timestamp": r["__ts"], "headers": headers}
                if base_keys:  # null (no key): the writer lets the producer place the record
                    record[PARTITION_KEY] = base_key
                out.append(record)
            yield pa.RecordBatch.from_pylist(out, schema=arrow_schema)

    encode.__name__ = f"Sink_{R._function_name(name)}"
    return encode


def _decode_rows(processed: DataFrame, schema: LogicalSchema, name: str) -> DataFrame:
    """The operator's pickled output rows as typed rows of ``schema``."""
    return R.map_rows(
        processed,
        input_schema=None,
        output_schema=schema,
        fn=lambda raw: [pickle.loads(raw[OUT])],
        name=name,
        input_fields=(OUT,),
    )


# ---------------------------------------------------------------------- state store operators


class _Groups(MutableMapping[bytes, Any]):
    """Group states of a MapState, read (unpickled) on first use and written back by ``flush``."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._cache: dict[bytes, Any] = {}

    def __getitem__(self, group: bytes) -> Any:
        if group not in self._cache:
            if not self._store.containsKey((group,)):
                raise KeyError(group)
            self._cache[group] = pickle.loads(self._store.getValue((group,))[0])
        return self._cache[group]

    def __setitem__(self, group: bytes, state: Any) -> None:
        self._cache[group] = state

    def __delitem__(self, group: bytes) -> None:
        self._cache.pop(group, None)
        self._store.removeKey((group,))

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)

    def flush(self) -> None:
        for group, state in self._cache.items():
            self._store.updateValue((group,), (pickle.dumps(state),))


def _load(state: Any, default: Any) -> Any:
    return pickle.loads(state.get()[0]) if state.exists() else default


def _out_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame({OUT: [pickle.dumps(r) for r in rows]}, dtype=object)


def _one_frame(frames: Iterator[pd.DataFrame], columns: tuple[str, ...]) -> pd.DataFrame:
    """A group's input frames as one frame with their column names."""
    named = list(_named(frames, columns))
    return named[0] if len(named) == 1 else pd.concat(named, ignore_index=True)


def _named(frames: Iterator[pd.DataFrame], columns: tuple[str, ...]) -> Iterator[pd.DataFrame]:
    """Input frames with their column names (PySpark 4.1 hands them over as ``_0``, ``_1``...)."""
    for frame in frames:
        if list(frame.columns) != list(columns):
            frame.columns = list(columns)
        yield frame


class KeyedTaskProcessor(DeclaredStateProcessor):
    """A keyed step's task in Spark's state store: group states, clock, outer-join entries."""

    STATE_VARIABLES = (
        StateVariable("groups", MAP, BLOB, GROUP_KEY), StateVariable("clock", VALUE, BLOB),
        StateVariable("outer", VALUE, BLOB),
    )
    groups: Any
    clock: Any
    outer: Any

    def __init__(self, task: KeyedTask, columns: tuple[str, ...]) -> None:
        self.task = task
        self.columns = columns

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        envelopes = [
            Envelope(bytes(g), int(side), tuple(int(x) for x in seq), int(ts), bytes(row))
            for frame in _named(rows, self.columns)
            for g, side, seq, ts, row in zip(
                frame[K.GROUP], frame[K.SIDE], frame[R.SEQ], frame[K.TS], frame[K.ROW], strict=True
            )
        ]
        clock: Clock = _load(self.clock, Clock())
        outer: dict[tuple[int, ...], Any] = _load(self.outer, {})
        groups = _Groups(self.groups)
        out = self.task.process(envelopes, groups, clock, outer)
        groups.flush()
        self.clock.update((pickle.dumps(clock),))
        if self.task.closes:
            self.outer.update((pickle.dumps(outer),))
        if out:
            yield _out_frame(out)

    def close(self) -> None:
        pass


class RunningAggregateProcessor(DeclaredStateProcessor):
    """One grouping key's running aggregates (``engine.runtime.running``) in Spark's state store."""

    STATE_VARIABLES = (StateVariable("running", VALUE, BLOB),)
    running: Any

    def __init__(
        self, calls: tuple[RunningCall, ...], key_columns: tuple[str, ...], columns: tuple[str, ...],
        output: ST.StructType,
    ) -> None:
        self.calls = calls
        self.key_columns = key_columns
        self.columns = columns
        self.output = tuple(output.fieldNames())

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        frame = _one_frame(rows, self.columns)
        if frame.empty:
            return
        out, state = run_group(self.calls, self.key_columns, frame, _load(self.running, None))
        self.running.update((pickle.dumps(state),))
        # Lists (MIN/MAX with NULLs, __seq) stay Python objects: a float column would lose integers.
        yield pd.DataFrame(
            {name: pd.Series(v, dtype=object) if isinstance(v, list) else v
             for name, v in zip(self.output, out.values(), strict=True)}
        )

    def close(self) -> None:
        pass


class RunningAggregateTaskProcessor(DeclaredStateProcessor):
    """One task's running aggregates (``engine.runtime.running.run_task``) in Spark's state
    store: each group's state in a MapState keyed by the group's key."""

    STATE_VARIABLES = (StateVariable("groups", MAP, BLOB, GROUP_KEY),)
    groups: Any

    def __init__(
        self, calls: tuple[RunningCall, ...], key_columns: tuple[str, ...], columns: tuple[str, ...],
        output: ST.StructType, *, previous: bool,
    ) -> None:
        self.calls = calls
        self.key_columns = key_columns
        self.columns = columns
        self.output = tuple(output.fieldNames())
        self.previous = previous

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        frame = _one_frame(rows, self.columns)
        if frame.empty:
            return
        states = _Groups(self.groups)
        out = run_task(self.calls, self.key_columns, frame, states, previous=self.previous)
        states.flush()
        yield out[list(self.output)]

    def close(self) -> None:
        pass


class SuppressProcessor(DeclaredStateProcessor):
    """EMIT FINAL's buffer for one task, in Spark's state store."""

    STATE_VARIABLES = (StateVariable("buffer", VALUE, BLOB),)
    buffer: Any

    def __init__(self, grace_ms: int, columns: tuple[str, ...], retention_ms: int | None = None) -> None:
        self.grace_ms = grace_ms
        self.columns = columns
        self.retention_ms = retention_ms

    def handleInputRows(self, key: Any, rows: Iterator[pd.DataFrame], timerValues: Any) -> Iterator[pd.DataFrame]:
        updates = [
            (str(k), pickle.loads(row))
            for frame in _named(rows, self.columns)
            for k, row in zip(frame[SUPPRESS_KEY], frame[PICKLED_ROW], strict=True)
        ]
        buffer: SuppressBuffer = _load(
            self.buffer, SuppressBuffer(self.grace_ms, retention_ms=self.retention_ms)
        )
        out = buffer.process(updates)
        self.buffer.update((pickle.dumps(buffer),))
        if out:
            yield _out_frame(out)

    def close(self) -> None:
        pass
