"""The benchmarks' one report: figures only after the outputs were checked, ratios, history."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks import report as R
from benchmarks.page import render


def checked_run() -> R.Run:
    run = R.Run("perf", load={"records": 10}, baseline="hand-written PySpark")
    run.check_outputs("record counts agree")
    return run


def test_a_figure_before_the_outputs_were_checked_is_a_bug() -> None:
    run = R.Run("perf", load={})
    with pytest.raises(RuntimeError, match="figure 'x' set before the outputs were checked"):
        run.figure("x", 1.0, unit="s")


def test_wrong_outputs_raise_with_every_problem_and_set_no_check() -> None:
    run = R.Run("perf", load={})
    with pytest.raises(R.OutputsWrong, match="^perf: outputs are wrong: a is short; b is long.$"):
        run.check_outputs("counts", ["a is short", "b is long"])
    assert run.checks == []


def test_an_unknown_benchmark_is_refused() -> None:
    with pytest.raises(ValueError, match="Unknown benchmark 'nope'"):
        R.Run("nope", load={})


def test_the_ratio_is_the_engines_time_over_the_baselines() -> None:
    run = checked_run()
    assert run.figure("seconds", 3.0, unit="s", baseline=2.0).ratio == 1.5
    assert run.figure("rate", 50.0, unit="records/s", baseline=100.0, higher_is_better=True).ratio == 2.0
    assert run.figure("alone", 5.0, unit="ms").ratio is None


def test_a_report_holds_date_commit_machine_load_figures_and_is_recorded_on_request(tmp_path: Path) -> None:
    run = checked_run()
    run.figure("stateless_seconds", 2.2, unit="s", baseline=2.0, target=1.3)
    history = tmp_path / "history"
    entry = R.write(run, {"raw": 1}, report=tmp_path / "reports" / "perf.json", history_dir=history)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", entry["date"])
    assert entry["commit"] is None or re.match(r"[0-9a-f]{7,}", entry["commit"])
    assert {"cores", "memory_gib", "python", "java", "load_average", "load_average_at_start"} <= set(entry["machine"])
    assert entry["load"] == {"records": 10} and entry["details"] == {"raw": 1}
    assert entry["figures"]["stateless_seconds"]["ratio"] == 1.1
    assert json.loads((tmp_path / "reports" / "perf.json").read_text()) == entry
    assert not (history / "perf.json").exists()  # not recorded without record=True
    R.write(run, report=tmp_path / "reports" / "perf.json", record=True, history_dir=history)
    R.write(run, report=tmp_path / "reports" / "perf.json", record=True, history_dir=history)
    assert len(R.load_history("perf", history)) == 2


def test_the_page_shows_the_newest_run_and_older_runs_and_says_when_none_is_recorded(tmp_path: Path) -> None:
    for date, ratio_base in (("2026-01-01T00:00:00Z", 1.0), ("2026-02-01T00:00:00Z", 2.0)):
        run = checked_run()
        run.date = date
        run.figure("stateless_seconds", 2.0, unit="s", baseline=ratio_base)
        R.append_history(run.to_json(), tmp_path)
    page = render(tmp_path)
    assert "Newest run: **2026-02-01T00:00:00Z**" in page
    assert "| stateless_seconds | 2 | 2 | 1 |" in page
    assert "| 2026-01-01T00:00:00Z |" in page and "stateless_seconds 2x" in page
    assert page.count("No run recorded yet.") == len(R.BENCHMARKS) - 1
