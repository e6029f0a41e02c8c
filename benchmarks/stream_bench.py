"""Streaming benchmark: the engine against hand-written PySpark on a real Kafka broker.

    python -m benchmarks.stream_bench [--records N] [--bootstrap-servers HOST:PORT] [--report FILE] [--record]

Starts a one-node broker in a temporary directory (unless ``--bootstrap-servers`` names
one), produces N JSON orders (default 1,000,000; keys spread over ``--keys`` ids) into a
2-partition topic, then measures two queries, each by the engine and by a hand-written
Structured Streaming job doing the same work on the same broker, all with availableNow
triggers so that every run ends when it has caught up with the input:

(a) stateless: ``WHERE QTY > 2``, ``UCASE(ITEM)``, ``QTY * PRICE``, topic to topic;
(b) a running ``GROUP BY ID`` with ``COUNT(*)`` and ``SUM(QTY)``, one update per input record.

The engine runs twice per query: as ``kspark run FILE --until-caught-up`` with a fresh state
dir (timed from process start to exit), and in this process through ``StreamingApplication``
on an already started SparkSession (engine time, JVM and session start excluded). The
hand-written jobs run in this process on the same session. For (b) there are two of them:
``groupBy().agg()`` in update mode (Spark's idiom: one update per key per micro-batch, not
per record) and a per-record-exact ``transformWithStateInPandas`` job keeping count and sum
per key and emitting one update per input record, like the engine (``applyInPandasWithState``
fails in PySpark 4.1.1 with pyarrow 26: a float offset in its state-info column). Outputs are read back with read_committed consumers and
checked (record counts; for (b) the final count and sum per key) before any figure is
reported. Last, single records go one at a time through a running stateless engine query
and their produce-to-visible latency is measured.

This is a benchmark, not a test: it belongs in a nox session (``nox -s stream_bench``).
Production is not timed. The report goes to ``reports/stream_bench.json``
(``benchmarks.report``; ``--record`` appends it to the history).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from benchmarks import report as R
from benchmarks.timing import Clock

DEFAULT_RECORDS = 1_000_000
DEFAULT_KEYS = 1_000
PARTITIONS = 2
DEFAULT_REPORT = "reports/stream_bench.json"
TARGETS = {"filter": 1.3, "aggregate": 2.0}
ITEMS = tuple(f"widget-{n}" for n in range(50))
REGIONS = ("eu-west", "eu-north", "us-east", "ap-south")
MIN_QTY = 3  # the filter keeps QTY > 2

SOURCE_DDL = """\
SET 'auto.offset.reset'='earliest';
CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT, PRICE DOUBLE, REGION STRING)
    WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
"""
FILTER_SQL = SOURCE_DDL + """\
CREATE STREAM BIG_ORDERS WITH (KAFKA_TOPIC='{sink}') AS
    SELECT ID, UCASE(ITEM) AS ITEM, QTY, QTY * PRICE AS AMOUNT FROM ORDERS WHERE QTY > 2;
"""
AGGREGATE_SQL = SOURCE_DDL + """\
CREATE TABLE ORDERS_PER_ID WITH (KAFKA_TOPIC='{sink}') AS
    SELECT ID, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS GROUP BY ID;
"""


class BenchFailure(Exception):
    """A run failed or its output is not what the input implies."""


# ---------------------------------------------------------------------- input data


@dataclass
class Dataset:
    """The produced orders and what correct outputs must hold."""

    records: int
    keys: int
    filtered: Counter[tuple[Any, ...]] = field(default_factory=Counter)  # (a)'s rows, see filter_rows
    per_key: dict[str, tuple[int, int]] = field(default_factory=dict)  # ID -> (count, sum of QTY)


def generate(records: int, keys: int, seed: int = 7) -> tuple[Dataset, list[tuple[bytes, bytes]]]:
    """``records`` orders as (key, JSON value) bytes, with the expected outputs."""
    rnd = random.Random(seed)
    ids = [f"id-{k:04d}" for k in range(keys)]
    counts = [0] * keys
    sums = [0] * keys
    filtered: Counter[tuple[Any, ...]] = Counter()
    out: list[tuple[bytes, bytes]] = []
    for _ in range(records):
        k = rnd.randrange(keys)
        qty = rnd.randint(1, 5)
        cents = rnd.randint(100, 10_000)
        item = ITEMS[rnd.randrange(len(ITEMS))]
        region = REGIONS[rnd.randrange(len(REGIONS))]
        price = f"{cents // 100}.{cents % 100:02d}"
        counts[k] += 1
        sums[k] += qty
        if qty >= MIN_QTY:
            filtered[(ids[k], item.upper(), qty, round(qty * float(price), 6))] += 1
        value = f'{{"ITEM":"{item}","QTY":{qty},"PRICE":{price},"REGION":"{region}"}}'
        out.append((ids[k].encode(), value.encode()))
    per_key = {ids[k]: (counts[k], sums[k]) for k in range(keys) if counts[k]}
    return Dataset(records, keys, filtered, per_key), out


def produce_all(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    """Produce ``records`` to ``topic`` in large batches; seconds taken (not part of any figure)."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",  # as ksqlDB's and Java's default partitioner
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1_048_576,
            "acks": "1",
        }
    )
    start = time.perf_counter()
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value, key)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise BenchFailure(f"Producing to '{topic}' did not finish within 120 s.")
    seconds = time.perf_counter() - start
    held = topic_size(bootstrap, topic)
    if held != len(records):
        raise BenchFailure(f"Topic '{topic}' holds {held} records after producing {len(records)}.")
    return seconds


def topic_size(bootstrap: str, topic: str) -> int:
    """Offsets between the low and high watermarks, summed over partitions."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kspark-stream-bench"})
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        total = 0
        for p in partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)
            total += high - low
        return total
    finally:
        consumer.close()


# ---------------------------------------------------------------------- reading outputs


def read_output(bootstrap: str, topic: str) -> list[tuple[str, Any]]:
    """Every committed record of ``topic`` as (key text, parsed JSON value), partition by partition."""
    from engine.kafka.consume import read_topic

    return [
        (r.key.decode() if r.key is not None else "", json.loads(r.value) if r.value is not None else None)
        for r in read_topic(bootstrap, topic, timeout=300)
    ]


def final_per_key(records: list[tuple[str, Any]]) -> dict[str, tuple[int, int]]:
    """The last (N, TOTAL) per key; N grows with every update, so the last is the largest."""
    final: dict[str, tuple[int, int]] = {}
    for key, value in records:
        update = (int(value["N"]), int(value["TOTAL"]))
        if key not in final or update[0] > final[key][0]:
            final[key] = update
    return final


def filter_rows(records: list[tuple[str, Any]]) -> Counter[tuple[Any, ...]]:
    """The filter outputs as a multiset of (ID, ITEM, QTY, AMOUNT)."""
    return Counter(
        (key, value["ITEM"], int(value["QTY"]), round(float(value["AMOUNT"]), 6)) for key, value in records
    )


# ---------------------------------------------------------------------- the engine


@dataclass
class Timing:
    """One measured run."""

    seconds: float
    records: int  # input records processed
    output: int = 0  # output records found
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    def to_json(self) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 3),
            "records_per_s": round(self.rate, 1),
            "output_records": self.output,
            **self.extra,
        }


def kspark_command() -> list[str]:
    """The ``kspark`` console script of this interpreter's environment."""
    script = Path(sys.executable).with_name("kspark")
    return [str(script)] if script.exists() else [sys.executable, "-m", "engine.cli"]


def run_engine_process(bootstrap: str, sql_file: Path, state_dir: Path, log: Path, timeout: float) -> float:
    """``kspark run FILE --until-caught-up`` with a fresh state dir; seconds from start to exit."""
    command = [
        *kspark_command(), "run", str(sql_file),
        "--bootstrap-servers", bootstrap, "--state-dir", str(state_dir), "--until-caught-up",
    ]
    with open(log, "wb") as out:
        clock = Clock(cpu=False).start()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except BaseException:
            _kill_group(process)
            raise
        seconds = clock.stop().seconds
    if code != 0:
        kept = Path(DEFAULT_REPORT).parent / f"stream_bench-{log.name}"
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, kept)
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        last = next((line for line in reversed(lines) if line.startswith("kspark:")), lines[-1] if lines else "")
        raise BenchFailure(f"kspark run exited with code {code}: {last[:300]} (whole output in {kept})")
    return seconds


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """End the process we started and its children (its JVM, Python workers), by group id."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def run_engine_in_process(bootstrap: str, sql: str, state_dir: Path) -> tuple[float, float]:
    """The statements applied (seconds) and their queries run until caught up (seconds)."""
    from engine.hosting.application import StreamingApplication

    clock = Clock(cpu=False).start()
    app = StreamingApplication(bootstrap, state_dir)
    app.submit(sql)
    planned = clock.stop().seconds
    clock.start()
    app.run_until_caught_up()
    return planned, clock.stop().seconds


# ---------------------------------------------------------------------- hand-written jobs


def _source(spark: Any, bootstrap: str, topic: str) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    schema = T.StructType(
        [
            T.StructField("ITEM", T.StringType()),
            T.StructField("QTY", T.IntegerType()),
            T.StructField("PRICE", T.DoubleType()),
            T.StructField("REGION", T.StringType()),
        ]
    )
    kafka = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "false")
        .load()
    )
    return kafka.select(
        F.col("key"),
        F.col("partition"),
        F.col("offset"),
        F.from_json(F.col("value").cast("string"), schema).alias("v"),
    )


def _run_to_kafka(spark: Any, df: Any, bootstrap: str, topic: str, checkpoint: Path, mode: str) -> float:
    """Write ``df`` (key, value) to ``topic`` with an availableNow trigger; seconds until done."""
    spark.conf.set("spark.sql.shuffle.partitions", str(PARTITIONS))  # as the engine's task count
    clock = Clock(cpu=False).start()
    query = (
        df.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
        .outputMode(mode)
        .trigger(availableNow=True)
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", "1")
    return clock.stop().seconds


def handwritten_filter(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path) -> float:
    """from_json, filter, upper, arithmetic, to_json: query (a) in plain Structured Streaming."""
    from pyspark.sql import functions as F

    orders = _source(spark, bootstrap, source)
    out = orders.where(F.col("v.QTY") > 2).select(
        F.col("key"),
        F.to_json(
            F.struct(
                F.upper("v.ITEM").alias("ITEM"),
                F.col("v.QTY").alias("QTY"),
                (F.col("v.QTY") * F.col("v.PRICE")).alias("AMOUNT"),
            )
        ).alias("value"),
    )
    return _run_to_kafka(spark, out, bootstrap, sink, checkpoint, "append")


def handwritten_aggregate_update(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path) -> float:
    """groupBy().agg(count, sum) in update mode: one update per key per micro-batch."""
    from pyspark.sql import functions as F

    orders = _source(spark, bootstrap, source)
    totals = orders.groupBy("key").agg(F.count(F.lit(1)).alias("N"), F.sum("v.QTY").alias("TOTAL"))
    out = totals.select("key", F.to_json(F.struct("N", "TOTAL")).alias("value"))
    return _run_to_kafka(spark, out, bootstrap, sink, checkpoint, "update")


class RunningTotals(StatefulProcessor):
    """One key's records in offset order -> one (N, TOTAL) update per record, kept in a ValueState."""

    COLUMNS = ("key", "partition", "offset", "QTY")

    def init(self, handle: StatefulProcessorHandle) -> None:
        from pyspark.sql import types as T

        schema = T.StructType([T.StructField("n", T.LongType()), T.StructField("total", T.LongType())])
        self.totals = handle.getValueState("totals", schema)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        import numpy as np
        import pandas as pd

        batch = pd.concat(list(rows), ignore_index=True)
        batch.columns = list(self.COLUMNS)  # PySpark 4.1 may hand them over as _0, _1, ...
        batch = batch.sort_values(["partition", "offset"], kind="stable")
        saved = self.totals.get() if self.totals.exists() else None
        count, total = (int(saved[0]), int(saved[1])) if saved else (0, 0)
        counts = count + np.arange(1, len(batch) + 1, dtype="int64")
        totals = total + batch["QTY"].fillna(0).astype("int64").cumsum().to_numpy()
        self.totals.update((int(counts[-1]), int(totals[-1])))
        yield pd.DataFrame({"key": [key[0]] * len(batch), "N": counts, "TOTAL": totals})

    def close(self) -> None:
        pass


def handwritten_aggregate_exact(spark: Any, bootstrap: str, source: str, sink: str, checkpoint: Path) -> float:
    """transformWithStateInPandas keeping count and sum per key: one update per input record."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    orders = _source(spark, bootstrap, source).select(*RunningTotals.COLUMNS[:3], F.col("v.QTY").alias("QTY"))
    updates = orders.groupBy("key").transformWithStateInPandas(
        statefulProcessor=RunningTotals(),
        outputStructType=T.StructType(
            [
                T.StructField("key", T.BinaryType()),
                T.StructField("N", T.LongType()),
                T.StructField("TOTAL", T.LongType()),
            ]
        ),
        outputMode="Append",
        timeMode="None",
    )
    out = updates.select("key", F.to_json(F.struct("N", "TOTAL")).alias("value"))
    return _run_to_kafka(spark, out, bootstrap, sink, checkpoint, "append")


HANDWRITTEN = (
    ("handwritten_filter", handwritten_filter),
    ("handwritten_update", handwritten_aggregate_update),
    ("handwritten_exact", handwritten_aggregate_exact),
)


# ---------------------------------------------------------------------- latency


def measure_latency(
    bootstrap: str, work: Path, run_id: str, samples: int, warmup: int, keys: int
) -> dict[str, Any]:
    """Produce-to-visible latency of single records through a running stateless engine query."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

    from engine.hosting.application import StreamingApplication
    from engine.kafka.admin import TopicAdmin

    source, sink = f"bench_latency_orders_{run_id}", f"bench_latency_big_orders_{run_id}"
    admin = TopicAdmin(bootstrap)
    admin.create_topic(source, PARTITIONS)
    admin.create_topic(sink, PARTITIONS)
    app = StreamingApplication(bootstrap, work / "latency-state")
    app.submit(FILTER_SQL.format(source=source, sink=sink))
    stop = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            app.run_forever(stop, poll=0.2)
        except BaseException as exc:  # noqa: BLE001 - reported by the measuring thread
            failure.append(exc)

    runner = threading.Thread(target=run, name="stream-bench-latency", daemon=True)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all",
                         "partitioner": "murmur2_random"})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kspark-stream-bench-latency",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 5})
    consumer.assign([TopicPartition(sink, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    runner.start()
    latencies: list[float] = []
    try:
        for i in range(warmup + samples):
            probe = f"probe-{i}"
            value = json.dumps({"ITEM": probe, "QTY": 5, "PRICE": 1.5, "REGION": "eu-west"}).encode()
            start = time.perf_counter()
            producer.produce(source, value, f"id-{i % keys:04d}".encode())
            producer.flush(30)
            deadline = start + (180.0 if i == 0 else 60.0)  # the first waits for the query to start
            while not _seen(consumer, probe.upper()):
                if failure:
                    raise BenchFailure(f"The latency query failed: {failure[0]}")
                if time.perf_counter() > deadline:
                    raise BenchFailure(f"Record {probe} did not reach '{sink}' within {deadline - start:.0f} s.")
            if i >= warmup:
                latencies.append(time.perf_counter() - start)
    finally:
        stop.set()
        runner.join(60)
        consumer.close()
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "samples": len(latencies),
        "warmup": warmup,
        "p50_ms": round(quantiles[49] * 1000, 1),
        "p99_ms": round(quantiles[98] * 1000, 1),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 1),
        "max_ms": round(max(latencies) * 1000, 1),
    }


def _seen(consumer: Any, item: str) -> bool:
    for message in consumer.consume(num_messages=100, timeout=0.01):
        if message.error() is None and json.loads(message.value()).get("ITEM") == item:
            return True
    return False


# ---------------------------------------------------------------------- the run


@contextlib.contextmanager
def kafka_cluster(bootstrap: str | None, work: Path) -> Iterator[str]:
    """``bootstrap`` as given, or a broker of our own, stopped on the way out whatever happens."""
    if bootstrap:
        yield bootstrap
        return
    from engine.components.broker import Broker

    broker = Broker(work / "broker", stop_with_parent=True)
    try:
        broker.start()
        broker.wait_ready(timeout=120)
        yield broker.bootstrap_servers
    finally:
        broker.stop()


def _ratio(engine: Timing | None, handwritten: Timing | None) -> float | None:
    if engine is None or handwritten is None:
        return None
    return round(engine.seconds / handwritten.seconds, 2)


QUERIES = (("filter", FILTER_SQL), ("aggregate", AGGREGATE_SQL))
SKIPPABLE = ("process", "handwritten", "latency")


def run(args: argparse.Namespace, work: Path, bench: R.Run) -> dict[str, Any]:
    """The whole benchmark in ``work``, its figures set on ``bench``; the details as a JSON value."""
    from engine.kafka.admin import TopicAdmin
    from engine.runtime.session import get_spark

    n = args.records
    report: dict[str, Any] = {
        "records": n,
        "keys": args.keys,
        "partitions": PARTITIONS,
        "skipped": sorted(args.skip),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
    }
    print(f"stream_bench: generating {n:,} orders over {args.keys:,} ids", flush=True)
    dataset, records = generate(n, args.keys)
    timings: dict[str, Timing] = {}  # run name -> timing
    outputs: dict[str, str] = {}  # run name -> its output topic
    with kafka_cluster(args.bootstrap_servers, work) as bootstrap:
        admin = TopicAdmin(bootstrap)
        run_id = f"{int(time.time())}"
        topic = f"bench_orders_{run_id}"
        admin.create_topic(topic, PARTITIONS)
        produced = produce_all(bootstrap, topic, records)
        del records
        print(f"stream_bench: produced {n:,} records to {topic} in {produced:.1f} s (not timed)", flush=True)
        report["produce_seconds"] = round(produced, 2)

        def sink(name: str) -> str:
            sink_topic = f"bench_{name}_{run_id}"
            admin.create_topic(sink_topic, PARTITIONS)
            return sink_topic

        # --- the engine as a user runs it: a fresh process per query
        if "process" not in args.skip:
            for query, template in QUERIES:
                name = f"engine_process_{query}"
                outputs[name] = sink(name)
                sql_file = work / f"{query}.sql"
                sql_file.write_text(template.format(source=topic, sink=outputs[name]), encoding="utf-8")
                print(f"stream_bench: kspark run ({query}) --until-caught-up ...", flush=True)
                seconds = run_engine_process(bootstrap, sql_file, work / f"state-{name}",
                                             work / f"{name}.log", args.timeout)
                timings[name] = Timing(seconds, n)
                print(f"stream_bench:   {seconds:.1f} s", flush=True)

        # --- in this process, on one started session: the engine and the hand-written jobs
        started = time.perf_counter()
        spark = get_spark(kafka=True, long_running=True)
        report["spark_session_start_seconds"] = round(time.perf_counter() - started, 2)
        print(f"stream_bench: SparkSession with the Kafka connector started in "
              f"{report['spark_session_start_seconds']:.1f} s", flush=True)
        handwritten = () if "handwritten" in args.skip else HANDWRITTEN
        warm = f"bench_warmup_{run_id}"
        admin.create_topic(warm, PARTITIONS)
        produce_all(bootstrap, warm, generate(min(n, WARMUP_RECORDS), args.keys, seed=11)[1])
        print(f"stream_bench: warm-up: every in-process run once over {min(n, WARMUP_RECORDS):,} records",
              flush=True)
        for query, template in QUERIES:
            run_engine_in_process(bootstrap, template.format(source=warm, sink=sink(f"warm_{query}")),
                                  work / f"state-warm-{query}")
        for name, job in handwritten:
            job(spark, bootstrap, warm, sink(f"warm_{name}"), work / f"cp-warm-{name}")

        for query, template in QUERIES:
            name = f"engine_{query}"
            outputs[name] = sink(name)
            print(f"stream_bench: engine ({query}) in process ...", flush=True)
            planned, seconds = run_engine_in_process(
                bootstrap, template.format(source=topic, sink=outputs[name]), work / f"state-{name}"
            )
            timings[name] = Timing(seconds, n, extra={"statements_seconds": round(planned, 3)})
            print(f"stream_bench:   {seconds:.1f} s (statements applied in {planned:.1f} s)", flush=True)
        for name, job in handwritten:
            outputs[name] = sink(name)
            print(f"stream_bench: {name.replace('_', ' ')} ...", flush=True)
            timings[name] = Timing(job(spark, bootstrap, topic, outputs[name], work / f"cp-{name}"), n)
            print(f"stream_bench:   {timings[name].seconds:.1f} s", flush=True)

        # --- every output complete and right before any figure is reported
        print("stream_bench: verifying outputs ...", flush=True)
        started = time.perf_counter()
        read = {name: read_output(bootstrap, out) for name, out in outputs.items()}
        print(f"stream_bench:   outputs read in {time.perf_counter() - started:.1f} s", flush=True)
        for name, records_out in read.items():
            timings[name].output = len(records_out)
        verify(dataset, read)
        bench.check_outputs("record counts; (a)'s records; (b)'s final count and sum per key")

        # --- latency through a running query
        if "latency" not in args.skip:
            print(f"stream_bench: latency: {args.latency_samples} single records through a running query ...",
                  flush=True)
            report["latency"] = measure_latency(
                bootstrap, work, run_id, args.latency_samples, args.latency_warmup, args.keys
            )

    def figures(name: str) -> dict[str, Any] | None:
        return timings[name].to_json() if name in timings else None

    f_ratio = _ratio(timings.get("engine_filter"), timings.get("handwritten_filter"))
    report["filter"] = {
        "sql": FILTER_SQL.format(source="<orders>", sink="<sink>"),
        "expected_output_records": sum(dataset.filtered.values()),
        "engine_process": figures("engine_process_filter"),
        "engine": figures("engine_filter"),
        "handwritten": figures("handwritten_filter"),
        "ratio": f_ratio,
        "target": TARGETS["filter"],
        "met": None if f_ratio is None else f_ratio <= TARGETS["filter"],
    }
    a_ratio = _ratio(timings.get("engine_aggregate"), timings.get("handwritten_exact"))
    report["aggregate"] = {
        "sql": AGGREGATE_SQL.format(source="<orders>", sink="<sink>"),
        "expected_output_records": n,
        "engine_process": figures("engine_process_aggregate"),
        "engine": figures("engine_aggregate"),
        "handwritten_exact": figures("handwritten_exact"),
        "handwritten_update": figures("handwritten_update"),
        "ratio_vs_exact": a_ratio,
        "ratio_vs_update": _ratio(timings.get("engine_aggregate"), timings.get("handwritten_update")),
        "target": TARGETS["aggregate"],
        "met": None if a_ratio is None else a_ratio <= TARGETS["aggregate"],
        "note": UPDATE_MODE_NOTE,
    }
    report["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]

    def rate(name: str) -> float | None:
        return round(timings[name].rate, 1) if name in timings else None

    bench.figure("filter_records_per_second", rate("engine_filter"), unit="records/s", higher_is_better=True,
                 baseline=rate("handwritten_filter"), target=TARGETS["filter"])
    bench.figure("aggregate_records_per_second", rate("engine_aggregate"), unit="records/s",
                 higher_is_better=True, baseline=rate("handwritten_exact"), target=TARGETS["aggregate"])
    for query, _ in QUERIES:
        if f"engine_process_{query}" in timings:
            bench.figure(f"{query}_kspark_run_seconds", round(timings[f"engine_process_{query}"].seconds, 2), unit="s")
    if report.get("latency"):
        bench.figure("latency_p50", report["latency"]["p50_ms"], unit="ms")
        bench.figure("latency_p99", report["latency"]["p99_ms"], unit="ms")
    print_summary(report, timings)
    return report


WARMUP_RECORDS = 20_000
UPDATE_MODE_NOTE = (
    "Spark's update mode emits one update per key per micro-batch, not one per input record; "
    "the exact variant (transformWithStateInPandas per key) emits one per record, as the engine does."
)


def verify(dataset: Dataset, read: dict[str, list[tuple[str, Any]]]) -> None:
    """Raise ``BenchFailure`` unless every output holds exactly what the input implies."""
    problems: list[str] = []
    for name, recs in read.items():
        if name.endswith("filter"):
            if len(recs) != sum(dataset.filtered.values()):
                problems.append(f"{name}: {len(recs):,} records, expected {sum(dataset.filtered.values()):,}")
            elif filter_rows(recs) != dataset.filtered:
                problems.append(f"{name}: the records are not the filtered and projected input")
            continue
        if name != "handwritten_update" and len(recs) != dataset.records:
            problems.append(f"{name}: {len(recs):,} updates, expected one per input record ({dataset.records:,})")
        final = final_per_key(recs)
        if final != dataset.per_key:
            wrong = sorted(k for k in dataset.per_key.keys() | final.keys() if final.get(k) != dataset.per_key.get(k))
            problems.append(f"{name}: final (N, TOTAL) wrong for {len(wrong)} keys, e.g. {wrong[0]}: "
                            f"{final.get(wrong[0])} instead of {dataset.per_key.get(wrong[0])}")
    if problems:
        raise BenchFailure("Outputs are not complete: " + "; ".join(problems) + ".")
    print("stream_bench: outputs verified: record counts, (a)'s records, (b)'s final count and sum per key",
          flush=True)


def print_summary(report: dict[str, Any], timings: dict[str, Timing]) -> None:
    """The figures as a short table on stdout."""

    def line(label: str, name: str) -> None:
        t = timings.get(name)
        if t is not None:
            print(f"  {label:<52} {t.seconds:7.1f} s {t.rate:>9,.0f} records/s  {t.output:>9,} out")

    def verdict(ratio: float | None, target: float) -> str:
        if ratio is None:
            return "not measured"
        return f"{ratio:.2f}x (target {target}x: {'met' if ratio <= target else 'not met'})"

    machine = report["machine"]
    print(f"\nstream_bench: {report['records']:,} records, {report['keys']:,} keys, {PARTITIONS} partitions, "
          f"{machine['cpus']} CPUs, load average {machine['load_average_at_start'][0]:.1f} at start, "
          f"{machine['load_average_at_end'][0]:.1f} at end")
    f, a = report["filter"], report["aggregate"]
    print("(a) filter + projection, topic to topic")
    line("engine: kspark run, process start to exit", "engine_process_filter")
    line("engine: in process, session started", "engine_filter")
    line("hand-written Structured Streaming", "handwritten_filter")
    print(f"  engine / hand-written: {verdict(f['ratio'], f['target'])}")
    print("(b) running GROUP BY count/sum, one update per input record")
    line("engine: kspark run, process start to exit", "engine_process_aggregate")
    line("engine: in process, session started", "engine_aggregate")
    line("hand-written: transformWithStateInPandas, per record", "handwritten_exact")
    line("hand-written: groupBy().agg(), update mode", "handwritten_update")
    print(f"  engine / per-record hand-written: {verdict(a['ratio_vs_exact'], a['target'])}")
    if a["ratio_vs_update"] is not None:
        print(f"  engine / update mode: {a['ratio_vs_update']:.2f}x; note: update mode emits one update per "
              "key per micro-batch, not per record")
    latency = report.get("latency")
    if latency:
        print(f"latency of single records through a running stateless query ({latency['samples']} samples): "
              f"p50 {latency['p50_ms']:.0f} ms, p99 {latency['p99_ms']:.0f} ms, max {latency['max_ms']:.0f} ms")


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m benchmarks.stream_bench [--records N] [--bootstrap-servers HOST:PORT]``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stream_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="orders to produce (default 1,000,000)")
    parser.add_argument("--keys", type=int, default=DEFAULT_KEYS, help="distinct ids (default 1,000)")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="use this broker instead of starting one")
    R.add_report_options(parser, "stream_bench")
    parser.add_argument("--latency-samples", type=int, default=200, help="timed single records")
    parser.add_argument("--latency-warmup", type=int, default=20, help="single records sent before timing")
    parser.add_argument("--skip", action="append", default=[], choices=SKIPPABLE,
                        help="leave out the kspark run processes, the hand-written jobs or the latency")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed per kspark run process")
    args = parser.parse_args(argv)
    if args.records < 1 or args.keys < 1 or args.latency_samples < 2:
        parser.error("--records and --keys must be at least 1, --latency-samples at least 2")

    bench = R.Run(
        "stream_bench",
        load={"records": args.records, "keys": args.keys, "partitions": PARTITIONS, "skipped": sorted(args.skip),
              "latency_samples": args.latency_samples},
        baseline="hand-written Structured Streaming jobs on the same broker and session "
                 "(the aggregate's: per-record transformWithStateInPandas)",
    )
    start = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="kspark-stream-bench-"))
    try:
        report = run(args, work, bench)
    except BenchFailure as exc:
        print(f"stream_bench: {exc}", file=sys.stderr)
        return 1
    finally:
        from engine.runtime.session import stop_spark

        stop_spark()
        shutil.rmtree(work, ignore_errors=True)
    report["session_seconds"] = round(time.perf_counter() - start, 1)
    R.write(bench, report, report=args.report, record=args.record)
    print(f"stream_bench: done in {report['session_seconds']:.0f} s; report written to {args.report}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
