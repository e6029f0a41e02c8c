"""``qtt rest``: per-file progress, the conformance-shaped report, and one-line run errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from qtt.cli import main
from qtt.conformance import write_report
from qtt.rest.cli import run_rest_files
from qtt.rest.loader import load_rest_paths
from qtt.rest.model import RestCase
from qtt.runner import CaseResult, Status

CASES = """{"tests": [
  {"name": "good", "statements": ["SELECT 1 FROM S;"]},
  {"name": "bad", "statements": ["SELECT 2 FROM S;"]},
  {"name": "missing", "statements": ["SELECT 3 FROM S;"]},
  {"name": "broken", "statements": "not a list"}
]}"""


def _verdict(case: RestCase, file: str) -> CaseResult:
    status = {"good": Status.PASSED, "bad": Status.FAILED, "missing": Status.UNSUPPORTED}[case.name]
    return CaseResult(
        case_id=case.id,
        file=file,
        name=case.name,
        status=status,
        reason="" if status is Status.PASSED else f"{case.name} reason",
        feature="windowed joins" if status is Status.UNSUPPORTED else None,
    )


def test_a_run_prints_per_file_rates_and_reports_like_conformance(tmp_path: Path) -> None:
    (tmp_path / "one.json").write_text(CASES, encoding="utf-8")
    out = io.StringIO()
    run = run_rest_files(load_rest_paths([tmp_path]), _verdict, out=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "== one.json: 4 cases"
    assert lines[1].startswith("ERROR one - broken (0.0s) - Cannot load: ")
    assert lines[2] == "PASS one - good (0.0s)"
    assert lines[-1] == "== one.json: 1/4 passed (25.0%)"
    report_path = tmp_path / "rest.json"
    write_report(run, report_path)
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["runtime"] == "rest"
    assert report["files"]["one.json"] == {
        "passed": 1,
        "failed": 1,
        "error": 1,
        "unsupported": 1,
        "total": 4,
        "not_applicable": 0,
        "disabled": 0,
    }
    assert report["top_unsupported"] == [{"feature": "windowed joins", "count": 1}]
    assert {c["name"] for c in report["cases"]} == {
        "one - broken",
        "one - good",
        "one - bad",
        "one - missing",
    }
    assert set(report) >= {"cases", "files", "totals", "top_failures", "wall_seconds"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["rest", "no/such/path"], "qtt: QTT path 'no/such/path' is neither a file nor a folder."),
        (
            ["rest", "{cases}", "--server", "http://127.0.0.1:9"],
            "qtt: --server needs --bootstrap-servers: the broker that server uses",
        ),
    ],
)
def test_run_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    (tmp_path / "one.json").write_text(CASES, encoding="utf-8")
    code = main([a.replace("{cases}", str(tmp_path)) for a in args])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(message)
    assert len(err.strip().splitlines()) == 1


def test_no_cases_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rest", str(tmp_path)]) == 1
    assert "no REST QTT cases found" in capsys.readouterr().err


def test_ignored_case_keys_are_named_once_with_their_counts(tmp_path: Path) -> None:
    from qtt.rest.cli import ignored_keys_note

    (tmp_path / "one.json").write_text(
        '{"tests": [{"name": "a", "statements": ["S;"], "extra": 1, "other": 2}, '
        '{"name": "b", "statements": ["S;"], "extra": 3}, {"name": "c", "statements": ["S;"]}]}',
        encoding="utf-8",
    )
    files = load_rest_paths([tmp_path])
    assert ignored_keys_note(files) == (
        "qtt: case keys ignored, as ksqlDB's runner ignores keys it does not know: extra (2 cases), other (1 case)"
    )
    (tmp_path / "one.json").write_text('{"tests": [{"name": "c", "statements": ["S;"]}]}', encoding="utf-8")
    assert ignored_keys_note(load_rest_paths([tmp_path])) is None
