"""One report for every benchmark: a JSON file per run, and the committed history.

    run = Run("perf", load={"records": 100_000, "repeat": 3})
    run.check_outputs("record counts and TOTAL sums agree with the hand-written job", problems)
    run.figure("stateless_seconds", 2.18, unit="s", baseline=1.91, target=1.3)
    path = write(run, details, report="reports/perf.json", record=args.record)

A run's report holds its date (UTC, ISO 8601), the git commit it ran from, the machine
(cores, memory, Python, Java), the load and parameters, what was checked, and per figure
the engine's value, the baseline measured in the same run (a hand-written PySpark job where
the benchmark has one) and their ratio. ``figure`` refuses to set a figure before the
outputs were checked, so nothing prints from a run whose outputs are wrong. Reports are
written under ``reports/`` (not committed); ``record=True`` also appends the run to
``benchmarks/reports/<benchmark>.json``, the committed history ``docs/benchmarks.md`` is
generated from.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCHMARKS = ("benchmark", "load", "metastore_bench", "metrics_bench", "mutation", "perf", "pull_bench",
              "replay_bench", "soak", "stream_bench")
HISTORY_DIR = Path(__file__).resolve().parent / "reports"
REPOSITORY = Path(__file__).resolve().parent.parent
MEASURED = "measured"
RATIO_MEANING = (
    "the engine's time over the baseline's (for a rate, the baseline's rate over the engine's): "
    "1.0 is as fast, above 1 the engine is slower"
)


class OutputsWrong(Exception):
    """A benchmark's outputs are not what its input implies: no figure is reported."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """One figure of a run: the engine's value and the baseline's of the same run."""

    engine: float | None
    unit: str
    baseline: float | None = None
    higher_is_better: bool = False
    # What is aimed at: a ratio where there is a baseline, else the figure itself (e.g. p99 ms).
    target: float | None = None

    @property
    def ratio(self) -> float | None:
        """The engine's time over the baseline's (rates inverted); None without a baseline."""
        if self.engine is None or self.baseline is None or not self.engine or not self.baseline:
            return None
        value = self.baseline / self.engine if self.higher_is_better else self.engine / self.baseline
        return round(value, 3)

    def to_json(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "unit": self.unit,
            "baseline": self.baseline,
            "ratio": self.ratio,
            "higher_is_better": self.higher_is_better,
            "target": self.target,
        }


@dataclass
class Run:
    """One run of a benchmark: its load, what was checked, and its figures."""

    benchmark: str
    load: Mapping[str, Any]
    baseline: str | None = None  # what the baseline is, e.g. "hand-written PySpark, same session"
    date: str = field(default_factory=lambda: utc_now())
    commit: str | None = field(default_factory=lambda: git_commit())  # read at the start: the code that ran
    load_average_at_start: list[float] = field(default_factory=lambda: [round(x, 2) for x in os.getloadavg()])
    checks: list[str] = field(default_factory=list)
    figures: dict[str, Figure] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.benchmark not in BENCHMARKS:
            raise ValueError(f"Unknown benchmark '{self.benchmark}'; the benchmarks are {', '.join(BENCHMARKS)}.")

    def check_outputs(self, what: str, problems: Iterable[str] = ()) -> None:
        """Record that the outputs were checked (``what``: how); raise ``OutputsWrong`` with
        every problem if there are any."""
        found = list(problems)
        if found:
            raise OutputsWrong(f"{self.benchmark}: outputs are wrong: " + "; ".join(found) + ".")
        self.checks.append(what)

    def figure(
        self, name: str, engine: float | None, *, unit: str, baseline: float | None = None,
        higher_is_better: bool = False, target: float | None = None,
    ) -> Figure:
        """Set one figure; only after ``check_outputs``."""
        if not self.checks:
            raise RuntimeError(
                f"{self.benchmark}: figure '{name}' set before the outputs were checked; this is a bug "
                "in the benchmark."
            )
        entry = Figure(engine=engine, unit=unit, baseline=baseline, higher_is_better=higher_is_better,
                       target=target)
        self.figures[name] = entry
        return entry

    def to_json(self, details: Mapping[str, Any] | None = None, *, provenance: str = MEASURED) -> dict[str, Any]:
        """The run's report as a JSON value (date and commit as at the start, machine now)."""
        return {
            "benchmark": self.benchmark,
            "date": self.date,
            "commit": self.commit,
            "machine": {**machine(), "load_average_at_start": self.load_average_at_start},
            "provenance": provenance,
            "load": dict(self.load),
            "baseline": self.baseline,
            "checks": list(self.checks),
            "figures": {name: f.to_json() for name, f in sorted(self.figures.items())},
            "details": dict(details or {}),
        }


def utc_now() -> str:
    """Now in UTC, ISO 8601 to the second, e.g. ``2026-12-01T21:54:55Z``."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def git_commit(root: Path = REPOSITORY) -> str | None:
    """The commit checked out at ``root``, ``+dirty`` when the engine or the benchmarks have
    uncommitted changes; None outside a git work tree."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=root, capture_output=True,
                                text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "engine", "benchmarks"], cwd=root,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+dirty" if dirty else "")


def java_version() -> str | None:
    """The version of the ``java`` Spark starts ($JAVA_HOME first), e.g. ``17.0.15``."""
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else "java"
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
    return found.group(1) if found else None


def memory_gib() -> float | None:
    """The machine's memory in GiB (Linux ``/proc/meminfo``; None elsewhere)."""
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    found = re.search(r"^MemTotal:\s+(\d+) kB", text, re.MULTILINE)
    return round(int(found.group(1)) / 2**20, 1) if found else None


def machine() -> dict[str, Any]:
    """Cores, memory, Python, Java, platform and load average (1, 5, 15 minutes) of this
    machine, now (a run's report adds the load average at its start)."""
    return {
        "cores": os.cpu_count(),
        "memory_gib": memory_gib(),
        "python": platform.python_version(),
        "java": java_version(),
        "platform": platform.platform(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def add_report_options(parser: argparse.ArgumentParser, benchmark: str) -> None:
    """``--report FILE`` (default ``reports/<benchmark>.json``) and ``--record``."""
    default = f"reports/{benchmark}.json"
    parser.add_argument("--report", default=default, help=f"JSON report of this run (default {default})")
    parser.add_argument(
        "--record", action="store_true",
        help=f"also append the run to the committed history benchmarks/reports/{benchmark}.json",
    )


def write(
    run: Run, details: Mapping[str, Any] | None = None, *, report: str | Path, record: bool = False,
    history_dir: Path = HISTORY_DIR,
) -> dict[str, Any]:
    """Write the run's report to ``report`` and, with ``record``, append it to the history;
    the report's JSON value."""
    if not run.checks:
        raise RuntimeError(f"{run.benchmark}: report written before the outputs were checked; this is a bug.")
    entry = run.to_json(details)
    path = Path(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump(entry), encoding="utf-8")
    if record:
        append_history(entry, history_dir)
    return entry


def dump(value: Any) -> str:
    """Deterministic JSON: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def history_path(benchmark: str, history_dir: Path = HISTORY_DIR) -> Path:
    return history_dir / f"{benchmark}.json"


def load_history(benchmark: str, history_dir: Path = HISTORY_DIR) -> list[dict[str, Any]]:
    """The recorded runs of ``benchmark``, oldest first (none: an empty list)."""
    path = history_path(benchmark, history_dir)
    if not path.exists():
        return []
    runs = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(runs, list):
        raise ValueError(f"{path} must hold a JSON list of runs, not {type(runs).__name__}.")
    return sorted(runs, key=lambda r: str(r.get("date")))


def append_history(entry: Mapping[str, Any], history_dir: Path = HISTORY_DIR) -> Path:
    """Append one run's report to its benchmark's history file."""
    benchmark = str(entry["benchmark"])
    runs = [*load_history(benchmark, history_dir), dict(entry)]
    path = history_path(benchmark, history_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump(sorted(runs, key=lambda r: str(r.get("date")))), encoding="utf-8")
    return path
