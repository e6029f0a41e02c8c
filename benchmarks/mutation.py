"""The mutation check's figures as a benchmark run.

``python -m qtt.plans.mutation`` (``nox -s mutation``) writes ``reports/mutation.json``; with
``--record`` (or ``python -m benchmarks.mutation REPORT --record``) that report becomes one
run of the committed history ``benchmarks/reports/mutation.json``, which the "mutation check"
section of ``docs/benchmarks.md`` is generated from. The run's figure is the share of the
non-equivalent mutants caught, against its target (0.95 for the whole CI, 0.80 for the planned
cases alone, ``--replays-only``); its load is the seed, the count, the mode and the replay
limit, so two runs compare only on those; its details list the survivors. The report's totals
are checked against its list of verdicts before any figure is set.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.report import HISTORY_DIR, Run, write

TARGETS = {"whole CI": 0.95, "planned cases alone": 0.80}
VERDICTS = ("caught", "survived", "equivalent", "invalid")


def mode(report: Mapping[str, Any]) -> str:
    """``planned cases alone`` for a ``--replays-only`` run, else ``whole CI``."""
    return "planned cases alone" if report.get("replays_only") else "whole CI"


def problems(report: Mapping[str, Any]) -> list[str]:
    """Where the report's totals disagree with its verdicts (none: it is consistent)."""
    mutants = report.get("mutants") or []
    counts = Counter(m.get("verdict") for m in mutants)
    totals = report.get("totals") or {}
    found = [
        f"totals say {totals.get(v)} {v}, the mutants list {counts.get(v, 0)}"
        for v in VERDICTS if totals.get(v) != counts.get(v, 0)
    ]
    if len(mutants) != totals.get("mutants"):
        found.append(f"totals say {totals.get('mutants')} mutants, the report lists {len(mutants)}")
    scored = counts["caught"] + counts["survived"]
    if scored and abs(totals.get("score", -1) - counts["caught"] / scored) > 1e-3:
        found.append(f"the score {totals.get('score')} is not caught / (caught + survived)")
    return found


def to_run(report: Mapping[str, Any]) -> tuple[Run, dict[str, Any]]:
    """The benchmark run of one mutation report, and its details."""
    which = mode(report)
    run = Run(
        "mutation",
        load={"seed": report["seed"], "count": report["count"], "mode": which,
              "max_replays": report.get("max_replays"), "replays": report.get("replays")},
        baseline=None,
        date=report.get("date") or Run("mutation", load={}).date,
        commit=report.get("commit"),
    )
    run.check_outputs("the totals agree with the verdict of every mutant listed", problems(report))
    totals = report["totals"]
    run.figure("caught_share", totals["score"], unit="share of non-equivalent mutants caught",
               higher_is_better=True, target=TARGETS[which])
    details = {
        "totals": totals,
        "seconds": report.get("seconds"),
        "survivors": [f"{m['file']}:{m['line']} {m['operator']}: {m['original']} -> {m['mutated']}"
                      for m in report["mutants"] if m["verdict"] == "survived"],
    }
    return run, details


def record(report_path: Path, *, out: Path, history_dir: Path = HISTORY_DIR) -> dict[str, Any]:
    """Append the run of ``report_path`` to the history; the run's JSON value."""
    report = json.loads(report_path.read_text(encoding="utf-8"))
    run, details = to_run(report)
    return write(run, details, report=out, record=True, history_dir=history_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mutation", description=__doc__.splitlines()[0])
    parser.add_argument("mutation_report", type=Path, help="a report of python -m qtt.plans.mutation")
    parser.add_argument("--out", type=Path, default=Path("reports/mutation-benchmark.json"),
                        help="this run's benchmark report (default reports/mutation-benchmark.json)")
    parser.add_argument("--record", action="store_true",
                        help="append the run to the committed history benchmarks/reports/mutation.json")
    args = parser.parse_args(argv)
    report = json.loads(args.mutation_report.read_text(encoding="utf-8"))
    run, details = to_run(report)
    entry = write(run, details, report=args.out, record=args.record)
    figure = entry["figures"]["caught_share"]
    print(f"mutation ({run.load['mode']}, seed {run.load['seed']}, {run.load['count']} mutants): "
          f"{figure['engine']:.1%} caught, target {figure['target']:.0%}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
