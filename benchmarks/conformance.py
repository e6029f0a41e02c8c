"""Conformance throughput benchmark: cases per second, and where the time goes.

    python -m benchmarks.conformance ../shared/ksqldb-qtt [--report reports/benchmark.json] [--record]

Runs the conformance runner over the given QTT files with engines that time their phases:
statement execution (parse, analyse, plan: no Spark) and ``run`` (building the queries and
running them as Spark jobs), and counts the queries run. It prints cases/s overall and the
split, so a change that slows the planner or adds Spark jobs shows up as a number. Cases run
``--workers`` at a time as in ``qtt conformance`` (the phase times are then summed over
cases that overlap, so they can add up to more than the wall time).
The runner verifies each case's outputs; the report counts the cases per verdict.
This is a benchmark, not a test: it asserts nothing about speed and belongs in a nox session
(``nox -s benchmark``; the report goes through ``benchmarks.report``).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from benchmarks import report as R
from benchmarks.timing import Clock, floor_line, minimal_job_rate
from qtt.conformance import case_workers, run_conformance
from qtt.loader import load_paths
from qtt.runner import execute_sql_at, interpreted_engine_factory, set_engine_factory


@dataclass
class PhaseTimes:
    """Seconds spent per phase, summed over all cases."""

    statements: float = 0.0
    run: float = 0.0
    queries: int = 0
    cases_with_queries: int = 0
    per_case: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, phase: str, seconds: float, queries: int | None = None) -> None:
        """Add one engine's phase time (engines of several workers add at once)."""
        with self.lock:
            setattr(self, phase, getattr(self, phase) + seconds)
            if queries is not None:
                self.queries += queries
                self.cases_with_queries += 1 if queries else 0


class TimedEngine:
    """Wraps a KsqlEngine and adds the time of each phase to ``PhaseTimes``."""

    def __init__(self, inner: Any, times: PhaseTimes) -> None:
        self._inner = inner
        self._times = times

    def execute_sql(self, text: str, *, first_line: int = 1) -> Any:
        start = time.perf_counter()
        try:
            return execute_sql_at(self._inner, text, first_line)
        finally:
            self._times.add("statements", time.perf_counter() - start)

    def run(self) -> Any:
        start = time.perf_counter()
        queries = len(getattr(self._inner, "queries", {}))
        try:
            return self._inner.run()
        finally:
            self._times.add("run", time.perf_counter() - start, queries)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # The runner sets the engine's service id and registry URL: they must reach the engine.
        if name in ("_inner", "_times"):
            object.__setattr__(self, name, value)
        else:
            setattr(self._inner, name, value)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: ``python -m benchmarks.conformance PATH... [--report FILE] [--record]``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+")
    R.add_report_options(parser, "benchmark")
    parser.add_argument(
        "--workers", type=int, help="cases run at a time (default: $KSPARK_QTT_WORKERS or 3)"
    )
    args = parser.parse_args(argv)

    times = PhaseTimes()

    def factory(properties: Mapping[str, Any]) -> Any:
        return TimedEngine(interpreted_engine_factory(properties), times)  # as qtt conformance runs them

    files = load_paths([Path(p) for p in args.paths])
    from engine.runtime.session import get_spark

    start_spark = time.perf_counter()
    get_spark()
    spark_start = time.perf_counter() - start_spark
    workers = case_workers(args.workers)
    previous = set_engine_factory(factory)
    try:
        clock = Clock().start()
        result = run_conformance(
            files,
            progress=False,
            on_result=lambda r: times.per_case.append(r.seconds),
            workers=workers,
        )
        timing = clock.stop()
        wall = timing.seconds
    finally:
        set_engine_factory(previous)

    floor = minimal_job_rate(get_spark(), workers)
    cases = len(times.per_case)
    figures = {
        "cases": cases,
        "passed": result.totals.passed,
        "wall_seconds": round(wall, 2),
        "cpu_seconds": None if timing.cpu_seconds is None else round(timing.cpu_seconds, 2),
        "cases_per_second": round(cases / wall, 2) if wall else None,
        "workers": workers,
        "spark_start_seconds": round(spark_start, 2),
        "statement_seconds": round(times.statements, 2),
        "run_seconds": round(times.run, 2),
        "queries_run": times.queries,
        "seconds_per_query": round(times.run / times.queries, 3) if times.queries else None,
        "case_seconds_median": round(statistics.median(times.per_case), 3) if cases else None,
        "case_seconds_p95": round(sorted(times.per_case)[int(0.95 * (cases - 1))], 3) if cases else None,
        # The smallest hand-written PySpark job, as many at a time, right after the run: the
        # machine's speed moves from run to run, and this is the yardstick measured with it.
        "floor_jobs_per_second": round(floor, 2),
    }
    run = R.Run("benchmark", load={"paths": sorted(str(p) for p in args.paths), "workers": workers},
                baseline="the smallest hand-written PySpark job, as many at a time, right after the run")
    # Each case's outputs are checked by the conformance runner itself; a case that fails is a
    # compatibility gap, counted in the report, not a wrong figure.
    run.check_outputs(f"each case's outputs verified by qtt conformance: {result.totals.as_dict()}")
    run.figure("cases_per_second", figures["cases_per_second"], unit="cases/s", higher_is_better=True)
    run.figure("seconds_per_query", figures["seconds_per_query"], unit="s",
               baseline=round(1 / floor, 4) if floor else None)
    table = Table(title="conformance throughput")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in figures.items():
        table.add_row(name, str(value))
    Console().print(table)
    case_total = sum(times.per_case)
    share = times.run / case_total * 100 if case_total else 0.0
    print(
        f"benchmark: {figures['cases_per_second']} cases/s with {workers} at a time; {share:.0f}% of "
        f"the cases' time runs queries on Spark ({figures['seconds_per_query']} s per query), the "
        "rest parses, plans and verifies."
    )
    print(floor_line(floor, workers))
    R.write(run, {**figures, "statuses": result.totals.as_dict()}, report=args.report, record=args.record)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
