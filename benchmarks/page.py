"""``docs/benchmarks.md``, generated from the committed history ``benchmarks/reports/``:
per benchmark, the newest run with its figures and ratios, and the older runs in a table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.report import BENCHMARKS, HISTORY_DIR, MEASURED, RATIO_MEANING, load_history

TITLES = {
    "benchmark": ("Conformance throughput", "nox -s benchmark",
                  "qtt conformance over a QTT corpus: cases/s, and a query's time against the smallest "
                  "hand-written PySpark job on the same session"),
    "load": ("The server under load", "nox -s load",
             "concurrent clients over HTTP/1.1 and HTTP/2 on a three-server service mixing inserts, pull "
             "and push queries and DDL: requests/s, p50/p99 per endpoint, errors; every acknowledged "
             "insert checked in its topic exactly once"),
    "metastore_bench": ("Server restart: metastore tables against the command topic", "nox -s metastore_bench",
                        "a server's restart after many create/drop cycles, KLIP-18 tables against "
                        "replaying the command topic, in the same run"),
    "metrics_bench": ("The cost of metrics", "nox -s metrics_bench",
                      "records/s of a stateless query on a real broker with each query's figures gathered "
                      "(docs/guides/metrics.md), against the same query without them"),
    "mutation": ("The mutation check", "nox -s mutation -- --record",
                 "seeded mutants of the lower layer (builders, expressions, serdes, plan serde) applied in "
                 "process: the share of the non-equivalent ones caught, by the planned cases alone "
                 "(`--replays-only`, what `qtt plans verify` checks) or by the whole CI (unit tests and "
                 "planned cases); seed, count and mode are the run's load, its survivors are in "
                 "benchmarks/reports/mutation.json"),
    "perf": ("In-memory queries against hand-written PySpark", "nox -s perf",
             "JSON records in memory through a stateless CSAS and a running GROUP BY, the engine "
             "against a hand-written PySpark job doing the same work"),
    "pull_bench": ("Pull-query latency", "nox -s pull_bench",
                   "key lookups through HTTP on a materialized table: p50/p99 per endpoint"),
    "replay_bench": ("Planned-case replay speed", "nox -s replay_bench",
                     "planned-case versions replayed per second, against the smallest hand-written "
                     "PySpark job on the same session"),
    "soak": ("A soak of one server", "nox -s soak_bench",
             "persistent queries (stateless, aggregates, windows, joins) started in stages of 1, 5 and 20 "
             "under steady input, with pull and push queries and a restart half-way: memory, threads, "
             "open files, state size and lag sampled every minute and plotted, outputs checked exactly at "
             "the end"),
    "stream_bench": ("Streaming on a real broker", "nox -s stream_bench",
                     "records/s of a stateless query and a running GROUP BY, the engine against "
                     "hand-written Structured Streaming jobs on the same broker, and single-record latency"),
}
HEADER = (
    "<!-- Generated from benchmarks/reports/*.json by `python -m qtt.docs_reference`; do not edit.\n"
    "     Record a run with `nox -s <benchmark> -- --record`, then regenerate. -->\n"
)


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}".rstrip("0").rstrip(".")
    return str(value)


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _machine(run: dict[str, Any]) -> str:
    m = run.get("machine") or {}
    parts = []
    if m.get("cores"):
        parts.append(f"{m['cores']} cores")
    if m.get("memory_gib"):
        parts.append(f"{m['memory_gib']} GiB")
    if m.get("python"):
        parts.append(f"Python {m['python']}")
    if m.get("java"):
        parts.append(f"Java {m['java']}")
    if m.get("load_average_at_start"):
        parts.append(f"load average {m['load_average_at_start'][0]} at start")
    if m.get("load_average"):
        parts.append(f"{m['load_average'][0]} at the end")
    return ", ".join(parts) or "not recorded"


def _load(run: dict[str, Any]) -> str:
    load = run.get("load") or {}
    return ", ".join(f"{k}={_cell(v)}" for k, v in sorted(load.items())) or "not recorded"


def _headline(run: dict[str, Any]) -> str:
    ratios = [f"{name} {_number(f['ratio'])}x" for name, f in sorted(run.get("figures", {}).items())
              if f.get("ratio") is not None]
    return "; ".join(ratios) or "no baseline"


def _newest(run: dict[str, Any]) -> list[str]:
    lines = [
        f"Newest run: **{run['date']}**, commit `{run.get('commit') or 'unknown'}`"
        + ("" if run.get("provenance", MEASURED) == MEASURED else f" ({run['provenance']})") + ".",
        "",
        f"- machine: {_machine(run)}",
        f"- load: {_load(run)}",
        f"- baseline: {run.get('baseline') or 'none'}",
        f"- outputs checked: {'; '.join(run.get('checks') or []) or 'not recorded'}",
        "",
        "| figure | engine | baseline | ratio | target | unit |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for name, f in sorted(run.get("figures", {}).items()):
        unit = f["unit"] + (" (higher is better)" if f.get("higher_is_better") else "")
        lines.append(
            f"| {name} | {_number(f.get('engine'))} | {_number(f.get('baseline'))} | "
            f"{_number(f.get('ratio'))} | {_number(f.get('target'))} | {unit} |"
        )
    plot = (run.get("details") or {}).get("plot")
    if plot:  # a file beside this page under docs/, written by the run
        lines += ["", f"![{run['benchmark']}: the run's samples]({plot})"]
    return lines


def _older(runs: list[dict[str, Any]]) -> list[str]:
    lines = ["", "Older runs:", "", "| date | commit | provenance | ratios | load |", "| --- | --- | --- | --- | --- |"]
    for run in reversed(runs):
        lines.append(
            f"| {run['date']} | `{run.get('commit') or 'unknown'}` | {run.get('provenance', MEASURED)} | "
            f"{_cell(_headline(run))} | {_cell(_load(run))} |"
        )
    return lines


def render(history_dir: Path = HISTORY_DIR) -> str:
    """The whole page, from the history files under ``history_dir``."""
    lines = [
        HEADER.rstrip("\n"),
        "",
        "# Benchmarks",
        "",
        "Each benchmark is a module of the `benchmarks` package, run by its nox session. A run checks "
        "its outputs before any figure is set, and writes a JSON report to `reports/<benchmark>.json`: "
        "date (UTC), git commit, machine, load, the engine's figures, the baseline measured in the same "
        "run, and their ratio. `nox -s <benchmark> -- --record` also appends the run to the committed "
        "history `benchmarks/reports/<benchmark>.json`, which this page is generated from.",
        "",
        f"Ratio: {RATIO_MEANING}. The machine's speed moves from hour to hour on a shared machine, so a "
        "figure is comparable only with the baseline measured in the same run.",
    ]
    for name in BENCHMARKS:
        title, command, what = TITLES.get(name, (name, f"nox -s {name}", ""))
        runs = load_history(name, history_dir)
        lines += ["", f"## {title}", "", f"`{command}`" + (f": {what}." if what else "."), ""]
        if not runs:
            lines.append("No run recorded yet.")
            continue
        lines += _newest(runs[-1])
        if len(runs) > 1:
            lines += _older(runs[:-1])
    return "\n".join(lines) + "\n"
