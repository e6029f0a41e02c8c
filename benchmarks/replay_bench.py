"""Replay speed: planned-case versions replayed per second, Spark start-up excluded.

``python -m benchmarks.replay_bench [ROOT] [--workers N] [--report FILE] [--record]`` (N
replays at a time; default $KSPARK_REPLAY_WORKERS or 3).

Versions of a case with the same plan and inputs are built and run once and each is compared
with its own saved copies (``qtt.plans.replay.replay_alike``); the figure counts versions.
Every replay must match its saved copies before a figure is set. The run also times the
smallest job a replay could be, written by hand in PySpark, on the same session and as many
at a time (``benchmarks.timing.minimal_job_rate``): the machine's speed moves from run to
run, and a figure is only comparable with the floor measured next to it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from benchmarks import report as R
from benchmarks.timing import Clock, floor_line, minimal_job_rate
from qtt.plans.layout import DEFAULT_ROOT, case_dirs, saved_versions
from qtt.plans.replay import alike_groups, default_workers, replay, replay_all


def main(argv: list[str] | None = None) -> int:
    """Warm up Spark with one replay, then time all the others."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=str(DEFAULT_ROOT), help=f"planned cases (default {DEFAULT_ROOT})")
    parser.add_argument("--workers", type=int, default=None, help="replays at a time (default $KSPARK_REPLAY_WORKERS or 3)")
    R.add_report_options(parser, "replay_bench")
    args = parser.parse_args(argv)
    workers = default_workers() if args.workers is None else args.workers
    root = Path(args.root)
    versions = [v for d in case_dirs(root) for v in saved_versions(d)]
    if not versions:
        print(f"no planned cases under {root}", file=sys.stderr)
        return 2
    from engine.runtime.session import get_spark

    spark = get_spark(kafka=True)  # replays build streaming plans too: the session needs the connector
    replay(versions[0])  # warms Spark up
    clock = Clock().start()
    results = list(replay_all(versions, workers))
    timing = clock.stop()
    seconds = timing.seconds
    failed = [f"{r.version.slug}/{r.version.path.name}" for r in results if not r.ok]
    runs = len(alike_groups(versions))
    floor = minimal_job_rate(spark, workers)
    print(
        f"{len(versions)} planned-case versions replayed in {seconds:.1f}s: "
        f"{len(versions) / seconds:.2f}/s ({len(failed)} failed; {runs} builds and runs, "
        f"{runs / seconds:.2f}/s, {workers} at a time)\n{floor_line(floor, workers)}"
    )
    run = R.Run("replay_bench", load={"root": str(root), "versions": len(versions), "runs": runs, "workers": workers},
                baseline="the smallest hand-written PySpark job, as many at a time, right after the replays")
    try:
        run.check_outputs("every replayed version matches its saved outputs, schemas and plans",
                          [f"{len(failed)} version(s) failed to replay: {', '.join(failed[:5])}"] if failed else [])
    except R.OutputsWrong as exc:
        print(f"replay_bench: {exc}", file=sys.stderr)
        return 1
    run.figure("versions_per_second", round(len(versions) / seconds, 3), unit="versions/s", higher_is_better=True)
    run.figure("runs_per_second", round(runs / seconds, 3), unit="builds and runs/s", higher_is_better=True,
               baseline=round(floor, 3))
    R.write(run, {"seconds": round(seconds, 2), "cpu_seconds": timing.cpu_seconds,
                  "floor_jobs_per_second": round(floor, 2)},
            report=args.report, record=args.record)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
