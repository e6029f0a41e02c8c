"""Replay speed: planned-case versions replayed per second, Spark start-up excluded.

``python -m qtt.plans.bench [ROOT] [--workers N]`` (N replays at a time; default
$KSPARK_REPLAY_WORKERS or 3).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from qtt.plans.layout import DEFAULT_ROOT, case_dirs, saved_versions
from qtt.plans.replay import replay, replay_all


def main(argv: list[str] | None = None) -> int:
    """Warm up Spark with one replay, then time all the others."""
    args = list(sys.argv[1:] if argv is None else argv)
    workers = None
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

    get_spark(kafka=True)  # replays build streaming plans too: the session needs the connector
    replay(versions[0])  # warms Spark up
    start = time.perf_counter()
    failed = sum(not r.ok for r in replay_all(versions, workers))
    seconds = time.perf_counter() - start
    print(
        f"{len(versions)} planned-case versions replayed in {seconds:.1f}s: "
        f"{len(versions) / seconds:.2f}/s ({failed} failed)"
    )
    return 1 if failed else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
