"""In-memory performance: the engine's stateless CSAS against the same job in hand-written PySpark.

    python -m qtt.perf [--records N] [--repeat R] [--report FILE]

N JSON records (default 100,000) are held in memory, in one process on the shared
SparkSession. Two queries are timed. The stateless one is ``SELECT ID, UCASE(ITEM) AS ITEM,
QTY * PRICE AS TOTAL FROM ORDERS WHERE QTY > 2`` (filter, UCASE, arithmetic); the running
GROUP BY is ``SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS GROUP BY ITEM`` (one
update per input record). Each runs three ways:

- **engine**: the query as the engine plans it today, built by its step builders over the
  bounded runtime (records in, records out, as ``kspark run`` and QTT run it);
- **engine, Python steps**: the same plan with its native steps (source, filter,
  projection, grouping, aggregate and sink; V2 and V3) swapped for the V1 step versions,
  which run in Python (the figure before native execution, on the same machine and run);
- **PySpark**: a hand-written job over the same JSON texts: ``from_json``, then ``filter``,
  ``upper`` and arithmetic, or ``count`` and ``sum`` as window functions ordered by input
  position; ``to_json``; collected and decoded to Python values (the engine's records end
  in memory in the same form).

Each is run once on 1,000 records to warm up, then timed R times on N (default 3; the
three ways take turns, so a burst of load from elsewhere falls on all of them): the figures
are the medians, and the report keeps every run. A single run moved by a fifth from one run
to the next on the 2-core machine, most of all the first run at full size, while the JIT
still compiles. The outputs are checked against each other (record count and totals) before
any figure prints. This is a benchmark, not a test: ``nox -s perf``. The report goes to
``reports/perf.json``.

Besides the elapsed time, each run's CPU time is measured: user and system seconds of this
process and all its descendants (Spark's JVM and its Python workers, read from ``/proc``).
On a machine others share, elapsed times follow the load; CPU seconds move much less, so
their ratio is the steadier comparison (the targets are on elapsed time).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from engine.builders.context import BuildContext
from engine.builders.formats import serdes_for
from engine.builders.walker import build
from engine.engine import KsqlEngine
from engine.plan import steps as S
from engine.plan import steps_aggregate as A
from engine.plan import steps_native as N
from engine.plan.steps import Step, walk_steps
from engine.planner.physical import NATIVE_STEPS
from engine.records import TopicInfo, TopicRecord
from engine.runtime.adapter import BoundedRuntime, TopicCodec
from engine.runtime.session import get_spark

DEFAULT_RECORDS = 100_000
DEFAULT_REPEAT = 3
DEFAULT_REPORT = "reports/perf.json"
TARGETS = {"stateless": 1.3, "group_by": 2.0}
SOURCE = """
CREATE STREAM ORDERS (ID BIGINT KEY, ITEM STRING, QTY INT, PRICE DOUBLE)
  WITH (kafka_topic='orders', value_format='JSON');
"""
QUERIES = {
    "stateless": ("BIG", "CREATE STREAM BIG AS SELECT ID, UCASE(ITEM) AS ITEM, QTY * PRICE AS TOTAL FROM ORDERS WHERE QTY > 2;"),
    "group_by": ("PER_ITEM", "CREATE TABLE PER_ITEM AS SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS GROUP BY ITEM;"),
}
ORDER_SCHEMA = ST.StructType(
    [
        ST.StructField("ITEM", ST.StringType()),
        ST.StructField("QTY", ST.IntegerType()),
        ST.StructField("PRICE", ST.DoubleType()),
    ]
)
_V1 = {
    N.StreamFilterV2: S.StreamFilter,
    N.StreamSelectV2: S.StreamSelect,
    N.TableFilterV2: S.TableFilter,
    N.TableSelectV2: S.TableSelect,
    N.StreamFilterV3: S.StreamFilter,
    N.StreamSelectV3: S.StreamSelect,
    N.TableFilterV4: S.TableFilter,
    N.TableSelectV3: S.TableSelect,
    N.StreamSourceV2: S.StreamSource,
    N.TableSourceV2: S.TableSource,
    N.StreamSinkV2: S.StreamSink,
    N.TableSinkV2: S.TableSink,
    N.StreamSourceV3: S.StreamSource,
    N.StreamSourceV4: S.StreamSource,
    N.TableSourceV3: S.TableSource,
    N.StreamSourceV5: S.StreamSource,
    N.StreamSourceV6: S.StreamSource,
    N.TableSourceV4: S.TableSource,
    N.StreamSinkV3: S.StreamSink,
    N.TableSinkV3: S.TableSink,
    N.StreamSinkV4: S.StreamSink,
    N.TableSinkV4: S.TableSink,
    N.StreamSinkV5: S.StreamSink,
    N.TableSinkV5: S.TableSink,
    N.StreamGroupByV2: A.StreamGroupBy,
    N.StreamGroupByKeyV2: A.StreamGroupByKey,
    N.TableGroupByV2: A.TableGroupBy,
    N.StreamGroupByV3: A.StreamGroupBy,
    N.TableGroupByV3: A.TableGroupBy,
    N.StreamAggregateV2: A.StreamAggregate,
    N.StreamAggregateV3: A.StreamAggregate,
    N.StreamAggregateV4: A.StreamAggregate,
    N.TableAggregateV2: A.TableAggregate,
    N.StreamAggregateV5: A.StreamAggregate,
    N.TableAggregateV3: A.TableAggregate,
}


@dataclass(frozen=True)
class Timing:
    """One timed run: elapsed seconds and CPU seconds of the process tree (None: not measurable)."""

    seconds: float
    cpu_seconds: float | None


def process_tree_cpu_seconds(pid: int | None = None) -> float | None:
    """User and system CPU seconds used so far by process ``pid`` (default: this one) and its
    descendants, live ones and those already waited for (Linux ``/proc``; None elsewhere)."""
    proc = Path("/proc")
    if not (proc / "self" / "stat").exists():
        return None
    root = os.getpid() if pid is None else pid
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:  # the process ended meanwhile
            continue
        # Fields after the command name (which may hold spaces): state, ppid, ... utime (14th
        # field), stime, cutime, cstime (the children it waited for).
        fields = text.rsplit(")", 1)[1].split()
        parents[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = sum(int(f) for f in fields[11:15]) / tick
    if root not in used:
        return None
    tree, pending = {root}, [root]
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    while pending:
        for child in children.get(pending.pop(), []):
            if child not in tree:
                tree.add(child)
                pending.append(child)
    return sum(used[p] for p in tree)


def median(runs: list[Timing]) -> Timing:
    """The median elapsed and the median CPU seconds of ``runs`` (each on its own)."""
    cpus = [t.cpu_seconds for t in runs]
    cpu = None if any(c is None for c in cpus) else statistics.median(c for c in cpus if c is not None)
    return Timing(statistics.median(t.seconds for t in runs), cpu)


class _Clock:
    """Elapsed and process-tree CPU time from ``start()`` to ``stop()``."""

    def start(self) -> None:
        self._cpu = process_tree_cpu_seconds()
        self._start = time.perf_counter()

    def stop(self) -> Timing:
        seconds = time.perf_counter() - self._start
        cpu = process_tree_cpu_seconds()
        return Timing(seconds, None if cpu is None or self._cpu is None else cpu - self._cpu)


def minimal_job_rate(spark: Any, workers: int, jobs: int = 60) -> float:
    """Jobs/s of the smallest job a query run could be, ``workers`` at a time: 5 records
    made in the driver, a filter and a projection, collected (after 10 warm-up jobs)."""
    def job(i: int) -> None:
        rows = [(i, f"a{j}", float(j)) for j in range(5)]
        df = spark.createDataFrame(rows, "ID INT, NAME STRING, V DOUBLE")
        df.filter(F.col("V") > 1).select(
            F.upper("NAME").alias("N"), (F.col("V") * 2).alias("V2")
        ).collect()

    for i in range(10):
        job(i)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(job, range(jobs)))
    return jobs / (time.perf_counter() - start)


def floor_line(rate: float, workers: int) -> str:
    """How the benchmarks print ``minimal_job_rate``'s figure."""
    return (
        f"the smallest hand-written PySpark job (5 records, filter and projection, collect) on "
        f"this session, {workers} at a time: {rate:.2f} jobs/s"
    )


def orders(n: int) -> list[dict[str, Any]]:
    """``n`` order values, deterministic."""
    return [{"ITEM": f"widget-{i % 50}", "QTY": i % 7, "PRICE": (i % 100) / 4} for i in range(n)]


def with_python_steps(step: Step) -> Step:
    """The same plan with every native (V2, V3) step replaced by its V1 version."""
    inputs = {name: with_python_steps(child) for name, child in step.inputs().items()}
    fields = {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}
    fields.update(inputs)
    return _V1.get(type(step), type(step))(**fields)


def run_engine(
    spark: SparkSession, values: list[dict[str, Any]], query: str, *, python_steps: bool
) -> tuple[Timing, list[Any]]:
    """The timing of the engine's query over ``values`` (build and run), and its output values."""
    sink, statement = QUERIES[query]
    engine = KsqlEngine({NATIVE_STEPS: "true"})
    engine.create_topic(TopicInfo("orders"))
    engine.create_topic(TopicInfo(sink))
    engine.execute_sql(SOURCE + statement)
    (plan,) = engine.query_order()
    root = with_python_steps(plan.root) if python_steps else plan.root
    runtime = BoundedRuntime(spark)
    runtime.produce(TopicRecord("orders", i, v, i) for i, v in enumerate(values))
    source = next(s for s in walk_steps(root) if isinstance(s, S.StreamSource | N.StreamSourceV2 | N.StreamSourceV3 | N.StreamSourceV4))
    if isinstance(source, N.StreamSourceV2 | N.StreamSourceV3 | N.StreamSourceV4):
        # The records as Kafka bytes in memory, as the hand-written job holds its JSON texts.
        runtime.encoded_table("orders", TopicCodec(*serdes_for(source.formats, source.source_schema.columns)))
    clock = _Clock()
    clock.start()
    built = build(root, BuildContext(runtime=runtime, query_id=plan.query_id))
    written = runtime.write_sink(sink, built.df, None, built.codec)
    return clock.stop(), [r.value for r in written]


def run_pyspark(spark: SparkSession, values: list[dict[str, Any]], query: str) -> tuple[Timing, list[Any]]:
    """The timing of the hand-written job over the JSON texts, and its output values."""
    texts = [(i, json.dumps(v)) for i, v in enumerate(values)]
    clock = _Clock()
    clock.start()
    raw = spark.createDataFrame(texts, "id long, value string")
    parsed = raw.select("id", F.from_json("value", ORDER_SCHEMA).alias("v"))
    if query == "stateless":
        out = parsed.filter(F.col("v.QTY") > 2).select(
            "id",
            F.to_json(
                F.struct(F.upper("v.ITEM").alias("ITEM"), (F.col("v.QTY") * F.col("v.PRICE")).alias("TOTAL"))
            ).alias("value"),
        )
    else:
        running = Window.partitionBy("v.ITEM").orderBy("id").rowsBetween(Window.unboundedPreceding, 0)
        out = parsed.select(
            "id",
            F.to_json(
                F.struct(F.count(F.lit(1)).over(running).alias("N"), F.sum("v.QTY").over(running).alias("TOTAL"))
            ).alias("value"),
        )
    values_out = [json.loads(r["value"]) for r in out.collect()]
    return clock.stop(), values_out


def _check(name: str, got: list[Any], want: list[Any]) -> None:
    total = round(sum(v["TOTAL"] for v in got), 6)
    expected = round(sum(v["TOTAL"] for v in want), 6)
    if len(got) != len(want) or total != expected:
        raise SystemExit(
            f"perf: {name} produced {len(got)} records (TOTAL sum {total}); expected {len(want)} ({expected})."
        )


def _ratio(part: float | None, whole: float | None) -> float | None:
    return None if part is None or not whole else part / whole


def query_report(query: str, target: float, runs: dict[str, list[Timing]]) -> dict[str, Any]:
    """The report entry of one query: median elapsed and CPU seconds of each way, their ratios
    to the hand-written job's, and every run (``runs`` by way: engine, engine_python_steps,
    pyspark)."""
    timings = {way: median(ways_runs) for way, ways_runs in runs.items()}
    base = timings["pyspark"]
    engines = ("engine", "engine_python_steps")
    return {
        "query": " ".join(QUERIES[query][1].split()),
        "seconds": {k: t.seconds for k, t in timings.items()},
        "ratio": {k: timings[k].seconds / base.seconds for k in engines},
        "cpu_seconds": {k: t.cpu_seconds for k, t in timings.items()},
        "cpu_ratio": {k: _ratio(timings[k].cpu_seconds, base.cpu_seconds) for k in engines},
        "runs": {k: [dataclasses.asdict(t) for t in ways_runs] for k, ways_runs in runs.items()},
        "target_ratio": target,
    }


def summary_lines(query: str, records: int, target: float, entry: dict[str, Any]) -> list[str]:
    """What ``main`` prints for one query's report entry."""

    def cpu(way: str) -> str:
        seconds, ratio = entry["cpu_seconds"][way], entry["cpu_ratio"].get(way)
        if seconds is None:
            return ""
        return f"   CPU {seconds:7.2f} s" + ("" if ratio is None else f"   ratio {ratio:.2f}")

    seconds, ratio = entry["seconds"], entry["ratio"]
    rows = [
        ("pyspark", f"  hand-written PySpark      {seconds['pyspark']:8.2f} s"),
        ("engine", f"  engine (native steps)     {seconds['engine']:8.2f} s   ratio {ratio['engine']:.2f} (target <= {target})"),
        ("engine_python_steps",
         f"  engine (Python steps, V1) {seconds['engine_python_steps']:8.2f} s   ratio {ratio['engine_python_steps']:.2f}"),
    ]
    width = max(len(text) for _, text in rows)
    repeat = len(entry["runs"]["pyspark"])
    lines = [
        f"{query}, {records:,} JSON records in memory, outputs checked, median of {repeat} run(s)"
        " (elapsed; CPU of all processes):"
    ]
    lines += [(text.ljust(width) + cpu(way)).rstrip() for way, text in rows]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qtt.perf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="timed runs of each way (the median prints)")
    parser.add_argument("--report", default=DEFAULT_REPORT)
    args = parser.parse_args(argv)
    if args.records < 1:
        parser.error("--records must be at least 1")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    spark = get_spark(long_running=True)
    warm, values = orders(1_000), orders(args.records)
    report: dict[str, Any] = {
        "records": args.records,
        "repeat": args.repeat,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
    }
    for query, target in TARGETS.items():
        for python_steps in (False, True):
            run_engine(spark, warm, query, python_steps=python_steps)
        run_pyspark(spark, warm, query)
        runs: dict[str, list[Timing]] = {"engine": [], "engine_python_steps": [], "pyspark": []}
        for _ in range(args.repeat):
            pyspark, reference = run_pyspark(spark, values, query)
            engine, native_out = run_engine(spark, values, query, python_steps=False)
            python, python_out = run_engine(spark, values, query, python_steps=True)
            _check(f"the engine ({query})", native_out, reference)
            _check(f"the engine with Python steps ({query})", python_out, reference)
            for way, timing in (("pyspark", pyspark), ("engine", engine), ("engine_python_steps", python)):
                runs[way].append(timing)
        report[query] = query_report(query, target, runs)
        print("\n".join(summary_lines(query, args.records, target, report[query])))
    report["machine"]["load_after"] = os.getloadavg()
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"report: {args.report}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
