"""In-memory performance: the engine's stateless CSAS against the same job in hand-written PySpark.

    python -m qtt.perf [--records N] [--report FILE]

N JSON records (default 100,000) are held in memory, in one process on the shared
SparkSession. The query is ``SELECT ID, UCASE(ITEM) AS ITEM, QTY * PRICE AS TOTAL FROM
ORDERS WHERE QTY > 2`` (filter, UCASE, arithmetic):

- **engine**: the query as the engine plans it today, built by its step builders over the
  bounded runtime (records in, records out, as ``kspark run`` and QTT run it);
- **engine, Python steps**: the same plan with its native filter and projection steps
  (V2) swapped for the V1 step versions, whose expressions run in Python (the figure
  before native execution, on the same machine and run);
- **PySpark**: a hand-written job over the same JSON texts: ``from_json``, ``filter``,
  ``upper``, arithmetic, ``to_json``, collected.

Each is run once on 1,000 records to warm up, then timed once on N. The outputs are
checked against each other (record count and totals) before any figure prints. The GROUP
BY half of the issue's benchmark is not measured yet. This is a benchmark, not a test:
``nox -s perf``. The report goes to ``reports/perf.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from engine.builders.context import BuildContext
from engine.builders.formats import serdes_for
from engine.builders.walker import build
from engine.engine import KsqlEngine
from engine.plan import steps as S
from engine.plan import steps_native as N
from engine.plan.steps import Step, walk_steps
from engine.planner.physical import NATIVE_STEPS
from engine.records import TopicInfo, TopicRecord
from engine.runtime.adapter import BoundedRuntime, TopicCodec
from engine.runtime.session import get_spark

DEFAULT_RECORDS = 100_000
DEFAULT_REPORT = "reports/perf.json"
TARGET = 1.3
STATEMENTS = """
CREATE STREAM ORDERS (ID BIGINT KEY, ITEM STRING, QTY INT, PRICE DOUBLE)
  WITH (kafka_topic='orders', value_format='JSON');
CREATE STREAM BIG AS SELECT ID, UCASE(ITEM) AS ITEM, QTY * PRICE AS TOTAL FROM ORDERS WHERE QTY > 2;
"""
_V1 = {
    N.StreamFilterV2: S.StreamFilter,
    N.StreamSelectV2: S.StreamSelect,
    N.TableFilterV2: S.TableFilter,
    N.TableSelectV2: S.TableSelect,
    N.StreamSourceV2: S.StreamSource,
    N.TableSourceV2: S.TableSource,
    N.StreamSinkV2: S.StreamSink,
    N.TableSinkV2: S.TableSink,
}


def orders(n: int) -> list[dict[str, Any]]:
    """``n`` order values, deterministic."""
    return [{"ITEM": f"widget-{i % 50}", "QTY": i % 7, "PRICE": (i % 100) / 4} for i in range(n)]


def with_python_steps(step: Step) -> Step:
    """The same plan with every native (V2) stateless step replaced by its V1 version."""
    inputs = {name: with_python_steps(child) for name, child in step.inputs().items()}
    fields = {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}
    fields.update(inputs)
    return _V1.get(type(step), type(step))(**fields)


def run_engine(spark: SparkSession, values: list[dict[str, Any]], *, python_steps: bool) -> tuple[float, list[Any]]:
    """Seconds for the engine's query over ``values`` (build and run), and its output values."""
    engine = KsqlEngine({NATIVE_STEPS: "true"})
    engine.create_topic(TopicInfo("orders"))
    engine.create_topic(TopicInfo("BIG"))
    engine.execute_sql(STATEMENTS)
    (query,) = engine.query_order()
    root = with_python_steps(query.root) if python_steps else query.root
    runtime = BoundedRuntime(spark)
    runtime.produce(TopicRecord("orders", i, v, i) for i, v in enumerate(values))
    if not python_steps:
        # The records as Kafka bytes in memory, as the hand-written job holds its JSON texts.
        source = next(s for s in walk_steps(root) if isinstance(s, N.StreamSourceV2))
        runtime.encoded_rows("orders", TopicCodec(*serdes_for(source.formats, source.source_schema.columns)))
    start = time.perf_counter()
    built = build(root, BuildContext(runtime=runtime, query_id=query.query_id))
    written = runtime.write_sink("BIG", built.df, None, built.codec)
    seconds = time.perf_counter() - start
    return seconds, [r.value for r in written]


def run_pyspark(spark: SparkSession, values: list[dict[str, Any]]) -> tuple[float, list[Any]]:
    """Seconds for the hand-written job over the JSON texts, and its output values."""
    texts = [(i, json.dumps(v)) for i, v in enumerate(values)]
    schema = ST.StructType(
        [
            ST.StructField("ITEM", ST.StringType()),
            ST.StructField("QTY", ST.IntegerType()),
            ST.StructField("PRICE", ST.DoubleType()),
        ]
    )
    start = time.perf_counter()
    raw = spark.createDataFrame(texts, "id long, value string")
    parsed = raw.select("id", F.from_json("value", schema).alias("v"))
    out = parsed.filter(F.col("v.QTY") > 2).select(
        "id",
        F.to_json(
            F.struct(F.upper("v.ITEM").alias("ITEM"), (F.col("v.QTY") * F.col("v.PRICE")).alias("TOTAL"))
        ).alias("value"),
    )
    rows = out.collect()
    seconds = time.perf_counter() - start
    return seconds, [json.loads(r["value"]) for r in rows]


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
    warm = orders(1_000)
    run_engine(spark, warm, python_steps=False)
    run_engine(spark, warm, python_steps=True)
    run_pyspark(spark, warm)
    values = orders(args.records)
    pyspark_s, reference = run_pyspark(spark, values)
    engine_s, native_out = run_engine(spark, values, python_steps=False)
    python_s, python_out = run_engine(spark, values, python_steps=True)
    _check("the engine", native_out, reference)
    _check("the engine with Python steps", python_out, reference)
    report = {
        "records": args.records,
        "query": " ".join(STATEMENTS.split()),
        "seconds": {"engine": engine_s, "engine_python_steps": python_s, "pyspark": pyspark_s},
        "ratio": {"engine": engine_s / pyspark_s, "engine_python_steps": python_s / pyspark_s},
        "target_ratio": TARGET,
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version()},
    }
    print(f"stateless CSAS, {args.records:,} JSON records in memory, outputs checked:")
    print(f"  hand-written PySpark      {pyspark_s:8.2f} s")
    print(f"  engine (native steps)     {engine_s:8.2f} s   ratio {engine_s / pyspark_s:.2f} (target <= {TARGET})")
    print(f"  engine (Python steps, V1) {python_s:8.2f} s   ratio {python_s / pyspark_s:.2f}")
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"report: {args.report}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
