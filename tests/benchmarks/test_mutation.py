"""The mutation check's report as a benchmark run (benchmarks.mutation)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.mutation import problems, record, to_run
from benchmarks.page import render
from benchmarks.report import OutputsWrong


def _report(verdicts: list[str], *, replays_only: bool, score: float | None = None) -> dict[str, Any]:
    mutants = [
        {"id": f"m{i}", "file": "engine/x.py", "line": i, "operator": "compare", "original": "a < b",
         "mutated": "a <= b", "verdict": v}
        for i, v in enumerate(verdicts)
    ]
    caught, survived = verdicts.count("caught"), verdicts.count("survived")
    totals = {"mutants": len(verdicts), "caught": caught, "survived": survived,
              "equivalent": verdicts.count("equivalent"), "invalid": verdicts.count("invalid"),
              "score": score if score is not None else round(caught / (caught + survived), 4)}
    return {"date": "2026-12-02T08:00:00Z", "commit": "abc123", "seed": 7, "count": len(verdicts),
            "replays_only": replays_only, "max_replays": 10, "replays": 3, "totals": totals,
            "mutants": mutants}


def test_a_run_of_the_planned_cases_alone_has_its_target_load_and_survivors() -> None:
    run, details = to_run(_report(["caught", "caught", "caught", "survived", "equivalent"], replays_only=True))
    figure = run.figures["caught_share"]
    assert (figure.engine, figure.target, figure.higher_is_better) == (0.75, 0.80, True)
    assert run.load["mode"] == "planned cases alone" and run.load["seed"] == 7
    assert (run.date, run.commit) == ("2026-12-02T08:00:00Z", "abc123")
    assert details["survivors"] == ["engine/x.py:3 compare: a < b -> a <= b"]
    whole, _ = to_run(_report(["caught", "survived"], replays_only=False))
    assert whole.load["mode"] == "whole CI" and whole.figures["caught_share"].target == 0.95


def test_totals_that_disagree_with_the_verdicts_set_no_figure() -> None:
    bad = _report(["caught", "survived"], replays_only=True, score=0.9)
    bad["totals"]["caught"] = 2
    found = problems(bad)
    assert "totals say 2 caught, the mutants list 1" in found
    assert any("is not caught / (caught + survived)" in p for p in found)
    with pytest.raises(OutputsWrong):
        to_run(bad)


def test_a_recorded_run_appears_on_the_benchmarks_page(tmp_path: Path) -> None:
    path = tmp_path / "mutation.json"
    path.write_text(json.dumps(_report(["caught", "survived"], replays_only=True)))
    record(path, out=tmp_path / "out.json", history_dir=tmp_path / "history")
    assert json.loads((tmp_path / "history" / "mutation.json").read_text())[0]["load"]["mode"] == "planned cases alone"
    page = render(tmp_path / "history")
    assert "## The mutation check" in page and "| caught_share | 0.5 |" in page
