"""Replay speed: planned-case versions replayed per second, Spark start-up excluded.

``python -m qtt.plans.bench [ROOT] [--workers N]`` (N replays at a time; default
$KSPARK_REPLAY_WORKERS or 3).

Versions of a case with the same plan and inputs are built and run once and each is compared
with its own saved copies (``qtt.plans.replay.replay_alike``); the figure counts versions.
The run also times the smallest job a replay could be, written by hand in PySpark, on the
same session and as many at a time (``qtt.perf.minimal_job_rate``): the machine's speed moves from
run to run, and a figure is only comparable with the floor measured next to it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from qtt.perf import floor_line, minimal_job_rate
from qtt.plans.layout import DEFAULT_ROOT, case_dirs, saved_versions
from qtt.plans.replay import alike_groups, default_workers, replay, replay_all


def main(argv: list[str] | None = None) -> int:
    """Warm up Spark with one replay, then time all the others."""
    args = list(sys.argv[1:] if argv is None else argv)
    workers = default_workers()
    if "--workers" in args:
        i = args.index("--workers")
        workers = int(args[i + 1])
        del args[i : i + 2]
    root = Path(args[0]) if args else DEFAULT_ROOT
    versions = [v for d in case_dirs(root) for v in saved_versions(d)]
    if not versions:
        print(f"no planned cases under {root}", file=sys.stderr)
        return 2
    from engine.runtime.session import get_spark

    spark = get_spark(kafka=True)  # replays build streaming plans too: the session needs the connector
    replay(versions[0])  # warms Spark up
    start = time.perf_counter()
    failed = sum(not r.ok for r in replay_all(versions, workers))
    seconds = time.perf_counter() - start
    runs = len(alike_groups(versions))
    floor = minimal_job_rate(spark, workers)
    print(
        f"{len(versions)} planned-case versions replayed in {seconds:.1f}s: "
        f"{len(versions) / seconds:.2f}/s ({failed} failed; {runs} builds and runs, "
        f"{runs / seconds:.2f}/s, {workers} at a time)\n{floor_line(floor, workers)}"
    )
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
