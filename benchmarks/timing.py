"""One way to time a benchmark's runs: elapsed and process-tree CPU seconds, medians, and the
smallest hand-written PySpark job as the yardstick measured in the same run."""

from __future__ import annotations

import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


class Clock:
    """Elapsed and process-tree CPU time from ``start()`` to ``stop()``: every benchmark's
    timed section. ``cpu=False`` reads no CPU time (a walk over ``/proc`` takes milliseconds,
    too much around one HTTP request); its timings have ``cpu_seconds`` None."""

    def __init__(self, *, cpu: bool = True) -> None:
        self._with_cpu = cpu

    def start(self) -> Clock:
        self._cpu = process_tree_cpu_seconds() if self._with_cpu else None
        self._start = time.perf_counter()
        return self

    def stop(self) -> Timing:
        seconds = time.perf_counter() - self._start
        cpu = process_tree_cpu_seconds() if self._with_cpu else None
        return Timing(seconds, None if cpu is None or self._cpu is None else cpu - self._cpu)


def minimal_job_rate(spark: Any, workers: int, jobs: int = 60) -> float:
    """Jobs/s of the smallest job a query run could be, ``workers`` at a time: 5 records
    made in the driver, a filter and a projection, collected (after 10 warm-up jobs)."""
    from pyspark.sql import functions as F

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
