"""In-memory performance: the engine's stateless CSAS against the same job in hand-written PySpark.

    python -m benchmarks.perf [--records N] [--repeat R] [--report FILE] [--record]

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
``reports/perf.json`` (``benchmarks.report``; ``--record`` appends it to the history).

Besides the elapsed time, each run's CPU time is measured: user and system seconds of this
process and all its descendants (Spark's JVM and its Python workers, read from ``/proc``).
On a machine others share, elapsed times follow the load; CPU seconds move much less, so
their ratio is the steadier comparison (the targets are on elapsed time).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from benchmarks import report as R
from benchmarks.timing import Clock, Timing, median
from engine.builders.context import BuildContext
from engine.builders.formats import serdes_for
from engine.builders.walker import build
from engine.data.records import TopicInfo, TopicRecord
from engine.facade.engine import KsqlEngine
from engine.plan import steps as S
from engine.plan import steps_aggregate as A
from engine.plan import steps_native as N
from engine.plan.steps import Step, walk_steps
from engine.planner.physical import NATIVE_STEPS
from engine.runtime.adapter import BoundedRuntime, TopicCodec
from engine.runtime.session import get_spark

DEFAULT_RECORDS = 100_000
DEFAULT_REPEAT = 3
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
    clock = Clock().start()
    built = build(root, BuildContext(runtime=runtime, query_id=plan.query_id))
    written = runtime.write_sink(sink, built.df, None, built.codec)
    return clock.stop(), [r.value for r in written]


def run_pyspark(spark: SparkSession, values: list[dict[str, Any]], query: str) -> tuple[Timing, list[Any]]:
    """The timing of the hand-written job over the JSON texts, and its output values."""
    texts = [(i, json.dumps(v)) for i, v in enumerate(values)]
    clock = Clock().start()
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


def _problems(name: str, got: list[Any], want: list[Any]) -> list[str]:
    total = round(sum(v["TOTAL"] for v in got), 6)
    expected = round(sum(v["TOTAL"] for v in want), 6)
    if len(got) != len(want) or total != expected:
        return [f"{name} produced {len(got)} records (TOTAL sum {total}); expected {len(want)} ({expected})"]
    return []


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
    parser = argparse.ArgumentParser(prog="python -m benchmarks.perf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="timed runs of each way (the median prints)")
    R.add_report_options(parser, "perf")
    args = parser.parse_args(argv)
    if args.records < 1:
        parser.error("--records must be at least 1")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    run = R.Run("perf", load={"records": args.records, "repeat": args.repeat},
                baseline="a hand-written PySpark job over the same JSON texts, same session, in turns")
    spark = get_spark(long_running=True)
    warm, values = orders(1_000), orders(args.records)
    details: dict[str, Any] = {"records": args.records, "repeat": args.repeat}
    for query, target in TARGETS.items():
        for python_steps in (False, True):
            run_engine(spark, warm, query, python_steps=python_steps)
        run_pyspark(spark, warm, query)
        runs: dict[str, list[Timing]] = {"engine": [], "engine_python_steps": [], "pyspark": []}
        problems: list[str] = []
        for _ in range(args.repeat):
            pyspark, reference = run_pyspark(spark, values, query)
            engine, native_out = run_engine(spark, values, query, python_steps=False)
            python, python_out = run_engine(spark, values, query, python_steps=True)
            problems += _problems(f"the engine ({query})", native_out, reference)
            problems += _problems(f"the engine with Python steps ({query})", python_out, reference)
            for way, timing in (("pyspark", pyspark), ("engine", engine), ("engine_python_steps", python)):
                runs[way].append(timing)
        try:
            run.check_outputs(f"{query}: record count and TOTAL sum of both engine ways equal the hand-written job's",
                              problems)
        except R.OutputsWrong as exc:
            raise SystemExit(f"perf: {exc}") from None
        entry = details[query] = query_report(query, target, runs)
        base = entry["seconds"]["pyspark"]
        run.figure(f"{query}_seconds", entry["seconds"]["engine"], unit="s", baseline=base, target=target)
        run.figure(f"{query}_python_steps_seconds", entry["seconds"]["engine_python_steps"], unit="s", baseline=base)
        run.figure(f"{query}_cpu_seconds", entry["cpu_seconds"]["engine"], unit="s CPU",
                   baseline=entry["cpu_seconds"]["pyspark"])
        print("\n".join(summary_lines(query, args.records, target, entry)))
    R.write(run, details, report=args.report, record=args.record)
    print(f"report: {args.report}" + (" (recorded in benchmarks/reports/perf.json)" if args.record else ""))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
