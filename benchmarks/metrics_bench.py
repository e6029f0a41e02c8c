"""Metrics benchmark: a query's throughput with the figures gathered, and without.

    python -m benchmarks.metrics_bench [--records N] [--repeat R] [--bootstrap-servers HOST:PORT] [--report FILE] [--record]

Starts a one-node broker in a temporary directory (unless ``--bootstrap-servers`` names one),
produces N JSON orders (default 300,000) into a 2-partition topic, then runs the stateless
query of ``benchmarks.stream_bench`` (``WHERE QTY > 2``, ``UCASE(ITEM)``, ``QTY * PRICE``)
through ``StreamingApplication`` until caught up, after ``--warmup`` untimed runs (default 1),
R times each (default 3), alternating:
with the figures of ``engine.hosting.query_metrics`` gathered (the observation on the sink's
records and the progress listener, as every server and ``kspark run`` has them) and with
``collect_metrics=False``. Each run has a fresh state dir and output topic on one started
SparkSession. Before any figure is reported, every output topic is checked to span at least
the filtered record count of offsets (transaction markers take offsets too), and the gathered
figures to have counted exactly every input record and every output record. The figure is the median records/s with metrics; the baseline the
median without; the target a ratio of 1.03.

The report goes to ``reports/metrics_bench.json`` (``benchmarks.report``; ``--record``
appends it to the history).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import report as R
from benchmarks.stream_bench import (
    FILTER_SQL,
    MIN_QTY,
    PARTITIONS,
    BenchFailure,
    generate,
    kafka_cluster,
    produce_all,
)
from benchmarks.timing import Clock

DEFAULT_RECORDS = 300_000
DEFAULT_REPEAT = 3
TARGET = 1.03  # with metrics at most 3 % slower
DEFAULT_REPORT = "reports/metrics_bench.json"


def timed_run(bootstrap: str, sql: str, state_dir: Path, *, metrics: bool) -> tuple[float, Any]:
    """The query run until caught up (seconds), and its figures (None without metrics)."""
    from engine.hosting.application import StreamingApplication

    app = StreamingApplication(bootstrap, state_dir, collect_metrics=metrics)
    app.submit(sql)
    [query] = app.queries()
    clock = Clock(cpu=False).start()
    app.run_until_caught_up()
    seconds = clock.stop().seconds
    figures = app.metrics.figures(query.query_id)
    app.metrics.close()
    app.topics.close()
    return seconds, figures


def run(args: argparse.Namespace, work: Path, bench: R.Run) -> dict[str, Any]:
    """The whole benchmark in ``work``, its figure set on ``bench``; the details as a JSON value."""
    from benchmarks.stream_bench import topic_size
    from engine.kafka.admin import TopicAdmin
    from engine.runtime.session import get_spark

    n = args.records
    report: dict[str, Any] = {
        "records": n, "repeat": args.repeat, "warmup": args.warmup, "partitions": PARTITIONS,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_average_at_start": [round(x, 2) for x in os.getloadavg()]},
    }
    dataset, records = generate(n, 1_000)
    expected = sum(dataset.filtered.values())
    get_spark(kafka=True, long_running=True)  # started before any timing
    runs: dict[str, list[float]] = {"with": [], "without": []}
    problems: list[str] = []
    with kafka_cluster(args.bootstrap_servers, work) as bootstrap:
        admin = TopicAdmin(bootstrap)
        run_id = f"{int(time.time())}"
        source = f"metrics_orders_{run_id}"
        admin.create_topic(source, PARTITIONS)
        produce_all(bootstrap, source, records)
        del records
        for warmup in range(args.warmup):  # the first run on a session also starts its executors' Python
            sink = f"metrics_warmup_{warmup}_{run_id}"
            admin.create_topic(sink, PARTITIONS)
            seconds, _ = timed_run(bootstrap, FILTER_SQL.format(source=source, sink=sink), work / f"warmup_{warmup}",
                                   metrics=True)
            print(f"metrics_bench: warm-up run {warmup + 1}: {seconds:.2f} s (not counted)", flush=True)
        for attempt in range(args.repeat):
            for mode in ("with", "without") if attempt % 2 == 0 else ("without", "with"):
                sink = f"metrics_{mode}_{attempt}_{run_id}"
                admin.create_topic(sink, PARTITIONS)
                sql = FILTER_SQL.format(source=source, sink=sink)
                seconds, figures = timed_run(bootstrap, sql, work / f"state_{mode}_{attempt}", metrics=mode == "with")
                held = topic_size(bootstrap, sink)
                print(f"metrics_bench: {mode} metrics, run {attempt + 1}: {seconds:.2f} s, {n / seconds:,.0f} "
                      f"records/s, {held:,} records out", flush=True)
                if held < expected:
                    problems.append(f"{sink} holds {held} records, fewer than the {expected} with QTY >= {MIN_QTY}")
                if mode == "with" and (figures is None or figures.records_consumed != n
                                       or figures.records_produced != expected):
                    counted = None if figures is None else (figures.records_consumed, figures.records_produced)
                    problems.append(f"the figures counted {counted} (consumed, produced), not ({n}, {expected})")
                runs[mode].append(seconds)
    bench.check_outputs("each output topic holds the filtered records (transaction markers aside) and the "
                        "figures counted every input and output record", problems)
    rate_with = n / statistics.median(runs["with"])
    rate_without = n / statistics.median(runs["without"])
    bench.figure("records_per_second", round(rate_with, 1), unit="records/s", baseline=round(rate_without, 1),
                 higher_is_better=True, target=TARGET)
    report["seconds"] = {mode: [round(s, 3) for s in values] for mode, values in runs.items()}
    report["records_per_second"] = {"with": round(rate_with, 1), "without": round(rate_without, 1)}
    report["cost"] = round(rate_without / rate_with - 1, 4)
    print(f"metrics_bench: with metrics {rate_with:,.0f} records/s, without {rate_without:,.0f} "
          f"(cost {report['cost']:+.1%}, target at most {TARGET - 1:.0%})", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m benchmarks.metrics_bench [--records N] [--repeat R]``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metrics_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=DEFAULT_RECORDS, help="orders to produce (default 300,000)")
    parser.add_argument("--repeat", type=int, default=DEFAULT_REPEAT, help="runs per mode (default 3)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs first (default 1)")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="use this broker instead of starting one")
    R.add_report_options(parser, "metrics_bench")
    args = parser.parse_args(argv)
    if args.records < 1 or args.repeat < 1 or args.warmup < 0:
        parser.error("--records and --repeat must be at least 1, --warmup at least 0")
    bench = R.Run("metrics_bench", load={"records": args.records, "repeat": args.repeat, "partitions": PARTITIONS},
                  baseline="the same query on the same session with collect_metrics=False")
    work = Path(tempfile.mkdtemp(prefix="kspark-metrics-bench-"))
    try:
        report = run(args, work, bench)
    except (BenchFailure, R.OutputsWrong) as exc:
        print(f"metrics_bench: {exc}", file=sys.stderr)
        return 1
    finally:
        from engine.runtime.session import stop_spark

        stop_spark()
        shutil.rmtree(work, ignore_errors=True)
    R.write(bench, report, report=args.report, record=args.record)
    print(f"metrics_bench: report written to {args.report}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
