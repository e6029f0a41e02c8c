"""In-memory performance: the engine's stateless CSAS against the same job in hand-written PySpark.

    python -m qtt.perf [--records N] [--report FILE]

N JSON records (default 100,000) are held in memory, in one process on the shared
SparkSession. Two queries are timed. The stateless one is ``SELECT ID, UCASE(ITEM) AS ITEM,
QTY * PRICE AS TOTAL FROM ORDERS WHERE QTY > 2`` (filter, UCASE, arithmetic); the running
GROUP BY is ``SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS GROUP BY ITEM`` (one
update per input record). Each runs three ways:

- **engine**: the query as the engine plans it today, built by its step builders over the
  bounded runtime (records in, records out, as ``kspark run`` and QTT run it);
- **engine, Python steps**: the same plan with its native filter and projection steps
  (V2) swapped for the V1 step versions, whose expressions run in Python (the figure
  before native execution, on the same machine and run);
- **PySpark**: a hand-written job over the same JSON texts: ``from_json``, then ``filter``,
  ``upper`` and arithmetic, or ``count`` and ``sum`` as window functions ordered by input
  position; ``to_json``; collected and decoded to Python values (the engine's records end
  in memory in the same form).

Each is run once on 1,000 records to warm up, then timed once on N. The outputs are
checked against each other (record count and totals) before any figure prints. This is a
benchmark, not a test: ``nox -s perf``. The report goes to ``reports/perf.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
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
    N.StreamSourceV2: S.StreamSource,
    N.TableSourceV2: S.TableSource,
    N.StreamSinkV2: S.StreamSink,
    N.TableSinkV2: S.TableSink,
    N.StreamGroupByV2: A.StreamGroupBy,
    N.StreamGroupByKeyV2: A.StreamGroupByKey,
    N.TableGroupByV2: A.TableGroupBy,
    N.StreamAggregateV2: A.StreamAggregate,
    N.TableAggregateV2: A.TableAggregate,
}


def orders(n: int) -> list[dict[str, Any]]:
    """``n`` order values, deterministic."""
    return [{"ITEM": f"widget-{i % 50}", "QTY": i % 7, "PRICE": (i % 100) / 4} for i in range(n)]


def with_python_steps(step: Step) -> Step:
    """The same plan with every native (V2) step replaced by its V1 version."""
    inputs = {name: with_python_steps(child) for name, child in step.inputs().items()}
    fields = {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}
    fields.update(inputs)
    return _V1.get(type(step), type(step))(**fields)


def run_engine(
    spark: SparkSession, values: list[dict[str, Any]], query: str, *, python_steps: bool
) -> tuple[float, list[Any]]:
    """Seconds for the engine's query over ``values`` (build and run), and its output values."""
    sink, statement = QUERIES[query]
    engine = KsqlEngine({NATIVE_STEPS: "true"})
    engine.create_topic(TopicInfo("orders"))
    engine.create_topic(TopicInfo(sink))
    engine.execute_sql(SOURCE + statement)
    (plan,) = engine.query_order()
    root = with_python_steps(plan.root) if python_steps else plan.root
    runtime = BoundedRuntime(spark)
    runtime.produce(TopicRecord("orders", i, v, i) for i, v in enumerate(values))
    source = next(s for s in walk_steps(root) if isinstance(s, S.StreamSource | N.StreamSourceV2))
    if isinstance(source, N.StreamSourceV2):
        # The records as Kafka bytes in memory, as the hand-written job holds its JSON texts.
        runtime.encoded_rows("orders", TopicCodec(*serdes_for(source.formats, source.source_schema.columns)))
    start = time.perf_counter()
    built = build(root, BuildContext(runtime=runtime, query_id=plan.query_id))
    written = runtime.write_sink(sink, built.df, None, built.codec)
    seconds = time.perf_counter() - start
    return seconds, [r.value for r in written]


def run_pyspark(spark: SparkSession, values: list[dict[str, Any]], query: str) -> tuple[float, list[Any]]:
    """Seconds for the hand-written job over the JSON texts, and its output values."""
    texts = [(i, json.dumps(v)) for i, v in enumerate(values)]
    start = time.perf_counter()
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
    seconds = time.perf_counter() - start
    return seconds, values_out


def _check(name: str, got: list[Any], want: list[Any]) -> None:
    total = round(sum(v["TOTAL"] for v in got), 6)
    expected = round(sum(v["TOTAL"] for v in want), 6)
    if len(got) != len(want) or total != expected:
        raise SystemExit(
            f"perf: {name} produced {len(got)} records (TOTAL sum {total}); expected {len(want)} ({expected})."
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qtt.perf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS)
    parser.add_argument("--report", default=DEFAULT_REPORT)
    args = parser.parse_args(argv)
    if args.records < 1:
        parser.error("--records must be at least 1")
    spark = get_spark()
    warm, values = orders(1_000), orders(args.records)
    report: dict[str, Any] = {
        "records": args.records,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load": os.getloadavg()},
    }
    for query, target in TARGETS.items():
        for python_steps in (False, True):
            run_engine(spark, warm, query, python_steps=python_steps)
        run_pyspark(spark, warm, query)
        pyspark_s, reference = run_pyspark(spark, values, query)
        engine_s, native_out = run_engine(spark, values, query, python_steps=False)
        python_s, python_out = run_engine(spark, values, query, python_steps=True)
        _check(f"the engine ({query})", native_out, reference)
        _check(f"the engine with Python steps ({query})", python_out, reference)
        report[query] = {
            "query": " ".join(QUERIES[query][1].split()),
            "seconds": {"engine": engine_s, "engine_python_steps": python_s, "pyspark": pyspark_s},
            "ratio": {"engine": engine_s / pyspark_s, "engine_python_steps": python_s / pyspark_s},
            "target_ratio": target,
        }
        print(f"{query}, {args.records:,} JSON records in memory, outputs checked:")
        print(f"  hand-written PySpark      {pyspark_s:8.2f} s")
        print(f"  engine (native steps)     {engine_s:8.2f} s   ratio {engine_s / pyspark_s:.2f} (target <= {target})")
        print(f"  engine (Python steps, V1) {python_s:8.2f} s   ratio {python_s / pyspark_s:.2f}")
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"report: {args.report}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
