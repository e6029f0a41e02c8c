"""The committed parity tables hold: each covered row names a kspark test that exists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from qtt.parity import PARITY_DIR, STATUSES, Row, markdown, read_rows, totals

ROOT = Path(__file__).resolve().parents[2]
TABLES = sorted(p.stem for p in PARITY_DIR.glob("*.json"))


def _qtt_case_exists(file: str, name: str) -> bool:
    path = ROOT / "tests" / "qtt_cases" / file
    if not path.is_file():
        return False
    text = path.read_text(encoding="utf-8")
    return json.dumps(name) in text


def _pytest_test_exists(node: str) -> bool:
    path, _, rest = node.partition("::")
    file = ROOT / path
    if not file.is_file() or not rest:
        return False
    name = rest.split("::")[-1].split("[")[0]
    return re.search(rf"^\s*(async )?def {re.escape(name)}\(", file.read_text(encoding="utf-8"), re.M) is not None


def test_exists(reference: str) -> bool:
    """``tests/x.py::test_y`` or ``qtt:<file in tests/qtt_cases>:<case name>``."""
    if reference.startswith("qtt:"):
        _, file, name = reference.split(":", 2)
        return _qtt_case_exists(file, name)
    return _pytest_test_exists(reference)


test_exists.__test__ = False  # a helper, not a test


@pytest.mark.parametrize("name", TABLES)
def test_every_covered_row_names_an_existing_test(name: str) -> None:
    rows = read_rows(name)
    missing = [f"{r.item}: {r.test}" for r in rows if r.status == "covered" and not test_exists(r.test)]
    assert not missing, f"{len(missing)} covered rows of parity/{name}.json name no existing test:\n" + "\n".join(missing[:20])


@pytest.mark.parametrize("name", TABLES)
def test_the_committed_markdown_matches_the_rows(name: str) -> None:
    rows = read_rows(name)
    data = json.loads((PARITY_DIR / f"{name}.json").read_text(encoding="utf-8"))
    assert data["totals"] == totals(rows)
    assert (PARITY_DIR / f"{name}.md").read_text(encoding="utf-8") == markdown(name, sorted(rows, key=lambda r: r.item)), (
        f"parity/{name}.md is out of date: run `qtt parity --ksqldb-src DIR --table {name}`."
    )


def test_a_row_refuses_an_unknown_status_and_a_covered_row_without_test() -> None:
    with pytest.raises(ValueError, match="status 'done'"):
        Row(item="x", status="done")
    with pytest.raises(ValueError, match="names no test"):
        Row(item="x", status="covered")
    with pytest.raises(ValueError, match="gives no reason"):
        Row(item="x", status="reasoned")
    assert STATUSES == ("covered", "reasoned", "missing")


def test_a_reference_to_a_missing_test_is_found_missing() -> None:
    assert test_exists("tests/qtt/test_parity.py::test_a_reference_to_a_missing_test_is_found_missing")
    assert not test_exists("tests/qtt/test_parity.py::test_that_does_not_exist")
    assert not test_exists("qtt:functions.json:no such case name at all")


def test_the_compatibility_page_is_generated_from_the_committed_tables() -> None:
    from qtt.parity import COMPATIBILITY_PAGE, compatibility_page

    assert COMPATIBILITY_PAGE.read_text(encoding="utf-8") == compatibility_page(), (
        "docs/reference/compatibility.md is out of date: run `qtt parity --ksqldb-src DIR`."
    )
