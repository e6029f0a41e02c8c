"""The runtime adapter: the one place where bounded and unbounded execution differ.

Builders ask the adapter for a topic's raw records as a DataFrame (``RAW_SCHEMA``, key and
value in QTT form), for the keyed operators every stateful step runs on (``keyed``,
``keyed_with_closes``, ``suppress``), and hand it the sink's raw DataFrame.
``BoundedRuntime`` keeps topics in memory and runs each query as a batch job over everything
produced so far (the QTT harness uses it); ``engine.runtime.kafka.KafkaRuntime`` reads and
writes Kafka with Structured Streaming behind the same calls. Builders never know which
one runs them.
"""

from __future__ import annotations

import gc
import itertools
import logging
import pickle
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as ST

from engine.data.partitioner import partition_for
from engine.data.records import Header, TopicInfo, TopicRecord, Window
from engine.errors import KsqlError
from engine.plan.schema import LogicalSchema
from engine.runtime import keyed as K
from engine.runtime import processing_log
from engine.runtime.closes import INTERNAL_COLUMNS, resolve_closes_df
from engine.runtime.local_frames import local_dataframe
from engine.runtime.rows import HEADERS, RAW_SCHEMA, SEQ, arrow_schema_of
from engine.runtime.running import RunningCall
from engine.runtime.session import name_call_site, session_conf
from engine.runtime.suppress import suppress_until_window_closes
from engine.serde import RecordSerde


@dataclass(frozen=True)
class TopicCodec:
    """How a topic's Kafka bytes and the QTT form of its records translate.

    ``window_type`` is None for plain keys, ``"TIME"`` or ``"SESSION"`` for windowed keys
    (Kafka Streams' windowed key bytes, which hold a time window's start but not its end:
    ``window_size_ms`` gives the end). The bounded runtime keeps records in QTT form and
    needs no codec; a Kafka runtime converts with it.
    """

    key: RecordSerde
    value: RecordSerde
    window_type: str | None = None
    window_size_ms: int | None = None


class Runtime(Protocol):
    """What step builders need from the execution environment."""

    spark: SparkSession

    def read_topic(self, topic: str, codec: TopicCodec) -> DataFrame:
        """The topic's records as a DataFrame of ``RAW_SCHEMA``."""
        ...

    def read_topic_bytes(self, topic: str, codec: TopicCodec) -> DataFrame:
        """The topic's records as ``RAW_SCHEMA`` with ``__key`` / ``__value`` as Kafka bytes
        (non-windowed topics; ``codec`` says how the bounded runtime encodes its records)."""
        ...

    def keyed(
        self,
        inputs: list[K.KeyedInput],
        *,
        handler: K.KeyedHandler,
        output_schema: LogicalSchema,
        name: str,
    ) -> DataFrame:
        """Run ``handler`` over every input's records, grouped by key, in input order."""
        ...

    def keyed_with_closes(
        self,
        inputs: list[K.KeyedInput],
        *,
        handler: K.KeyedHandler,
        output_schema: LogicalSchema,
        name: str,
    ) -> DataFrame:
        """``keyed``, where the handler also emits outer-store entries that close by stream time."""
        ...

    def suppress(
        self,
        df: DataFrame,
        schema: LogicalSchema,
        grace_ms: int,
        *,
        name: str,
        retention_ms: int | None = None,
    ) -> DataFrame:
        """EMIT FINAL: each window's last result, once stream time passes its end plus grace.

        With ``retention_ms``, a window that started more than that before the stream time
        that closes it has expired from the window store and is not emitted (tableSuppressV2).
        """
        ...


@runtime_checkable
class RunningAggregates(Protocol):
    """A streaming runtime's running aggregates (``streamAggregateV3``, ``V4``); bounded runs compute
    them with window functions instead."""

    def running_aggregate(
        self, df: DataFrame, *, key_columns: Sequence[str], calls: Sequence[RunningCall],
        output: ST.StructType, name: str,
    ) -> DataFrame:
        """One row per input row of ``df`` (see ``engine.runtime.running``): ``df``'s key
        columns, each call's running result, ``__seq``, ``ROWTIME`` and ``ROWPARTITION``,
        typed as ``output``; each key's state kept across micro-batches."""
        ...

    def running_aggregate_by_task(
        self, df: DataFrame, *, key_columns: Sequence[str], calls: Sequence[RunningCall],
        output: ST.StructType, name: str, previous: bool,
    ) -> DataFrame:
        """``running_aggregate``'s rows with a task's records in input order across its
        groups (``streamAggregateV4``); with ``previous`` each row also holds each call's
        result before the record (``prev<i>``) and ``__has_prev``."""
        ...


@runtime_checkable
class PartitionOrderReads(Protocol):
    """A streaming runtime's cheaper topic read (``streamSourceV4``) for queries that need
    the records in order within each partition only: no merge order across partitions."""

    def read_topic_bytes_in_partition_order(self, topic: str, codec: TopicCodec) -> DataFrame:
        """``read_topic_bytes``' rows computed in Spark alone: ``__seq`` orders a partition's
        records (by offset) but not the records of different partitions against each other."""
        ...


@dataclass(slots=True)
class StoredRecord:
    """A record in the in-memory topic store, with its input-order key."""

    seq: tuple[int, ...]
    record: TopicRecord
    offset: int
    # Kafka bytes (key, value) by the codec that made them (see ``codec_id``).
    encoded: dict[bytes, tuple[bytes | None, bytes | None]] = field(default_factory=dict)


# Above this many records a topic read as bytes is kept out of the optimizer's folding (see
# read_topic_bytes).
LARGE_TABLE_ROWS = 10_000


def codec_id(codec: TopicCodec) -> bytes:
    """A codec's identity: its serdes' constructor arguments (serdes pickle as those)."""
    return pickle.dumps((codec.key, codec.value))


class TopicService(Protocol):
    """The topics an engine knows and writes to: in memory (bounded) or on a Kafka cluster."""

    @property
    def topics(self) -> dict[str, TopicInfo]:
        """Every topic by name."""
        ...

    def ensure(self, info: TopicInfo) -> TopicInfo:
        """The topic named by ``info``, created with its partitions when it does not exist."""
        ...

    def append(self, record: TopicRecord, seq: tuple[int, ...] | None = None) -> None:
        """Add an input record (bounded runs: records are produced in QTT form)."""
        ...

    def publish(self, record: TopicRecord, codec: TopicCodec) -> None:
        """Write a record an INSERT VALUES statement made; ``codec`` turns it into bytes."""
        ...


@dataclass
class TopicStore:
    """In-memory topics: their configuration and their records in append order."""

    topics: dict[str, TopicInfo] = field(default_factory=dict)
    records: dict[str, list[StoredRecord]] = field(default_factory=dict)
    _next_seq: int = 0
    _next_offset: dict[tuple[str, int], int] = field(default_factory=dict)

    def ensure(self, info: TopicInfo) -> TopicInfo:
        existing = self.topics.get(info.name)
        if existing is None:
            self.topics[info.name] = info
            self.records.setdefault(info.name, [])
            return info
        return existing

    def append(self, record: TopicRecord, seq: tuple[int, ...] | None = None) -> None:
        """Append a record; without ``seq`` it is a new input record (next in input order)."""
        if seq is None:
            seq = (self._next_seq,)
            self._next_seq += 1
        if record.topic not in self.topics:
            self.ensure(TopicInfo(record.topic))
        stored = self.records.setdefault(record.topic, [])
        slot = (record.topic, record.partition or 0)
        offset = self._next_offset.get(slot, 0)
        self._next_offset[slot] = offset + 1
        stored.append(StoredRecord(seq, record, offset))

    def extend(
        self, topic: str, records: Sequence[TopicRecord], seqs: Sequence[tuple[int, ...]],
        encoded: Sequence[tuple[bytes | None, bytes | None]], ident: bytes,
    ) -> None:
        """Append a job's output records to ``topic`` with their seqs and their Kafka bytes
        (by the codec ``ident``): ``append`` for each, in one pass."""
        if not len(records) == len(seqs) == len(encoded):
            raise ValueError(f"{len(records)} records, {len(seqs)} seqs and {len(encoded)} encoded pairs")
        self.ensure(TopicInfo(topic))
        stored = self.records.setdefault(topic, [])
        offsets = self._next_offset
        if len({r.partition or 0 for r in records}) == 1:  # one partition: offsets count on
            slot = (topic, records[0].partition or 0)
            first = offsets.get(slot, 0)
            offsets[slot] = first + len(records)
            stored.extend(map(StoredRecord, seqs, records, itertools.count(first), ({ident: p} for p in encoded)))
            return
        for record, seq, pair in zip(records, seqs, encoded, strict=True):
            slot = (topic, record.partition or 0)
            offset = offsets.get(slot, 0)
            offsets[slot] = offset + 1
            stored.append(StoredRecord(seq, record, offset, {ident: pair}))

    def publish(self, record: TopicRecord, codec: TopicCodec) -> None:
        self.append(record)

    def read(self, topic: str) -> list[StoredRecord]:
        return sorted(self.records.get(topic, []), key=lambda r: r.seq)


def raw_row(stored: StoredRecord) -> tuple[Any, ...]:
    """One row of ``RAW_SCHEMA`` for a stored record."""
    r = stored.record
    window = r.window
    return (
        list(stored.seq),
        pickle.dumps(r.key),
        pickle.dumps(r.value),
        r.timestamp if r.timestamp is not None else 0,
        r.partition or 0,
        stored.offset,
        [(h.key, h.value) for h in r.headers],
        window.start if window else None,
        window.end if window else None,
    )


def encoded_row(stored: StoredRecord, codec: TopicCodec, ident: bytes) -> tuple[Any, ...] | None:
    """One row of ``RAW_SCHEMA`` holding the record's Kafka bytes; None if it cannot be encoded."""
    pair = stored.encoded.get(ident)
    if pair is None:
        r = stored.record
        try:
            pair = (codec.key.to_bytes(r.key), codec.value.to_bytes(r.value))
        except KsqlError as exc:
            log_input_error(r.topic, stored.offset, exc)
            return None
        stored.encoded[ident] = pair
    r = stored.record
    return (
        list(stored.seq),
        pair[0],
        pair[1],
        r.timestamp if r.timestamp is not None else 0,
        r.partition or 0,
        stored.offset,
        [(h.key, h.value) for h in r.headers],
        None,
        None,
    )


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a block that only allocates (a job's output
    records, which hold no cycles): with the topic store's records on the heap, the
    collections that many allocations set off walk all of them again and again (a sink's
    57,000 records: 0.13 s with it, 0.04 s without). Left as it was found."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def log_input_error(topic: str, offset: int, exc: KsqlError) -> None:
    """An input record the bounded runtime cannot write as Kafka bytes is skipped and logged."""
    processing_log.follow_env()
    logging.getLogger(processing_log.LOGGER_NAME).warning(
        "topic %s offset %s: Failed to serialise the input record: %s", topic, offset, exc
    )


def _placed(record: TopicRecord, key_serde: RecordSerde, partitions: int) -> TopicRecord:
    """``record`` in the partition of its key's bytes without the window (a record with no
    window or no key keeps its partition)."""
    if record.window is None or record.key is None:
        return record
    key = key_serde.to_bytes(record.key)
    if key is None:
        return record
    return replace(record, partition=partition_for(key, partitions))


def record_from_raw(topic: str, row: Any, window_type: str | None) -> tuple[tuple[int, ...], TopicRecord]:
    """A topic record (and its seq) from a collected sink row of ``RAW_SCHEMA``."""
    window = None
    if row["__wstart"] is not None:
        window = Window(row["__wstart"], row["__wend"], window_type or "TIME")
    headers = tuple(Header(h["KEY"], h["VALUE"]) for h in (row["__headers"] or ()))
    record = TopicRecord(
        topic=topic,
        key=pickle.loads(row["__key"]),
        value=pickle.loads(row["__value"]),
        timestamp=row["__ts"],
        partition=row["__partition"],
        window=window,
        headers=headers,
    )
    return tuple(row["__seq"]), record


@dataclass
class BoundedRuntime:
    """Runs queries as batch jobs over an in-memory topic store."""

    spark: SparkSession
    store: TopicStore = field(default_factory=TopicStore)
    _tables: dict[tuple[str, bytes], tuple[int, pa.Table]] = field(default_factory=dict, repr=False)

    def read_topic(self, topic: str, codec: TopicCodec | None = None) -> DataFrame:
        rows = [raw_row(r) for r in self.store.read(topic)]
        return local_dataframe(self.spark, rows, RAW_SCHEMA)  # no Python job to read them

    def read_topic_bytes(self, topic: str, codec: TopicCodec) -> DataFrame:
        # Through Arrow: one columnar transfer instead of a pickled row per record.
        table = self.encoded_table(topic, codec)
        if table.num_rows <= LARGE_TABLE_ROWS:
            return self.spark.createDataFrame(table, RAW_SCHEMA)
        # A small table becomes an in-memory relation in the plan, and Spark's optimizer folds
        # any projection over it into the relation: the driver runs it, interpreted, one record
        # at a time (column pruning alone puts one there). A large table is read by a task
        # instead, from one Arrow batch (one partition, as the in-memory relation has). An
        # observed count between them does not stop the fold: pruning puts the projection under it.
        # The settings are the session's for the length of this call: a case run at the same
        # time on another thread (QTT's workers) that reads a small topic meanwhile would get
        # a task-read table too. Same records; only its physical plan would say so, and the
        # runs that record or compare physical plans (planned cases) never hold a topic this large.
        with session_conf(self.spark, {
            "spark.sql.execution.arrow.localRelationThreshold": "0",
            "spark.sql.execution.arrow.maxRecordsPerBatch": str(table.num_rows),
        }):
            return self.spark.createDataFrame(table, RAW_SCHEMA)

    def encoded_rows(self, topic: str, codec: TopicCodec) -> list[tuple[Any, ...]]:
        """The topic's records as ``RAW_SCHEMA`` rows of Kafka bytes (encoded once per codec)."""
        ident = codec_id(codec)
        return [row for r in self.store.read(topic) if (row := encoded_row(r, codec, ident)) is not None]

    def encoded_table(self, topic: str, codec: TopicCodec) -> pa.Table:
        """``encoded_rows`` as an Arrow table of ``RAW_SCHEMA``, kept until the topic grows
        (records are only ever appended): queries reading one topic share its bytes."""
        key = (topic, codec_id(codec))
        count = len(self.store.records.get(topic, ()))
        cached = self._tables.get(key)
        if cached is not None and cached[0] == count:
            return cached[1]
        rows = self.encoded_rows(topic, codec)
        arrow_schema = arrow_schema_of(RAW_SCHEMA)
        columns = list(zip(*rows, strict=True)) if rows else [() for _ in arrow_schema]
        table = pa.Table.from_arrays(
            [pa.array(list(c), type=f.type) for c, f in zip(columns, arrow_schema, strict=True)], schema=arrow_schema
        )
        self._tables[key] = (count, table)
        return table

    def keyed(
        self,
        inputs: list[K.KeyedInput],
        *,
        handler: K.KeyedHandler,
        output_schema: LogicalSchema,
        name: str,
    ) -> DataFrame:
        return K.process_keyed(inputs, handler=handler, output_schema=output_schema, name=name)

    def keyed_with_closes(
        self,
        inputs: list[K.KeyedInput],
        *,
        handler: K.KeyedHandler,
        output_schema: LogicalSchema,
        name: str,
    ) -> DataFrame:
        wide = LogicalSchema(output_schema.columns + INTERNAL_COLUMNS)
        results = K.process_keyed(inputs, handler=handler, output_schema=wide, name=name)
        timeline = K.timeline(inputs, name=f"{name}_timeline")
        return resolve_closes_df(results, timeline, output_schema)

    def suppress(
        self,
        df: DataFrame,
        schema: LogicalSchema,
        grace_ms: int,
        *,
        name: str,
        retention_ms: int | None = None,
    ) -> DataFrame:
        return suppress_until_window_closes(df, schema, grace_ms, retention_ms=retention_ms)

    def write_sink(
        self, topic: str, df: DataFrame, window_type: str | None = None, codec: TopicCodec | None = None,
        *, base_key: RecordSerde | None = None,
    ) -> list[TopicRecord]:
        """Run the sink's job and append its records to the topic, in input order.

        With ``codec``, the rows hold Kafka bytes (a V2 sink): records are kept in QTT form
        (``codec`` decodes them) and with their bytes. With ``base_key`` (a windowed V5 sink's
        key serde), a windowed record goes to the partition of its key's bytes without the
        window (``engine.data.partitioner``), as on Kafka.
        """
        name_call_site(self.spark, f"kspark: write {topic}")
        if codec is None:
            collected = [record_from_raw(topic, row, window_type) for row in df.collect()]
            collected.sort(key=lambda pair: pair[0])
            if base_key is not None:
                partitions = self.store.ensure(TopicInfo(topic)).partitions
                collected = [(seq, _placed(record, base_key, partitions)) for seq, record in collected]
            for seq, record in collected:
                self.store.append(record, seq)
            return [record for _, record in collected]
        table = df.toArrow()
        with collector_paused():
            seqs = list(map(tuple, table.column(SEQ).to_pylist()))
            order = sorted(range(len(seqs)), key=seqs.__getitem__)  # input order
            if order != list(range(len(seqs))):
                table = table.take(order)
                seqs = [seqs[i] for i in order]
            columns = table.select(["__key", "__value", "__ts", "__partition"]).to_pydict()
            raw_keys, raw_values = columns["__key"], columns["__value"]
            keys = codec.key.qtt_from_bytes_many(raw_keys)
            values = codec.value.qtt_from_bytes_many(raw_values)
            header_lists = table.column(HEADERS)
            if header_lists.null_count == len(header_lists) or not pc.max(pc.list_value_length(header_lists)).as_py():
                headers: list[tuple[Header, ...]] = [()] * len(seqs)  # no record has a header
            else:
                headers = [
                    tuple(Header(h["KEY"], h["VALUE"]) for h in hs) if hs else () for hs in header_lists.to_pylist()
                ]
            written = list(map(
                TopicRecord, itertools.repeat(topic), keys, values, columns["__ts"], columns["__partition"],
                itertools.repeat(None), headers,
            ))
            self.store.extend(topic, written, seqs, list(zip(raw_keys, raw_values, strict=True)), codec_id(codec))
        return written

    def produce(self, records: Iterable[TopicRecord]) -> None:
        for record in records:
            self.store.append(record)
