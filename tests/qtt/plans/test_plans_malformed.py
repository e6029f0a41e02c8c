"""A planned-case folder whose files are damaged: one error naming the file, never a traceback.

Release engineers copy, merge and hand-edit planned cases; a conflict marker or a truncated
``plan.json`` must fail that version's replay with what is wrong and where, and the other
checks of ``qtt plans verify`` must still run and report.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qtt.model import QttFormatError
from qtt.plans.layout import PLAN_FILE, SPEC_FILE, SavedVersion, saved_versions
from qtt.plans.replay import load_saved

REPO = Path(__file__).resolve().parents[3]
CASE_DIR = REPO / "planned_cases" / "ddl_drop_then_recreate"
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)


def _one_version(tmp_path: Path) -> SavedVersion:
    """A planned-cases root holding one saved version of one committed case."""
    latest = saved_versions(CASE_DIR)[-1]
    target = tmp_path / "root" / CASE_DIR.name / latest.path.name
    shutil.copytree(latest.path, target)
    shutil.copy(REPO / "planned_cases" / "RELEASES", tmp_path / "root" / "RELEASES")
    (version,) = saved_versions(target.parent)
    return version


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from([PLAN_FILE, SPEC_FILE]),
       content=st.text(max_size=60) | JSON.map(json.dumps) | st.binary(max_size=30))
def test_a_damaged_saved_file_loads_or_raises_an_error_naming_it(tmp_path_factory, name, content) -> None:
    version = _one_version(tmp_path_factory.mktemp("pc"))
    path = version.path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    try:
        load_saved(version)
    except (QttFormatError, ValueError) as exc:
        assert str(version.path) in str(exc), exc
        assert str(exc).strip()


def test_a_truncated_plan_fails_its_replay_with_the_file_line_and_column(tmp_path, capsys) -> None:
    from qtt.cli import main

    version = _one_version(tmp_path)
    (version.path / PLAN_FILE).write_text('{"plans": [\n<<<<<<< HEAD\n', encoding="utf-8")
    code = main(["plans", "verify", "--root", str(tmp_path / "root"),
                 "--cases", str(REPO / "tests" / "qtt_cases" / "ddl.json"), "--allow-orphans"])
    out = capsys.readouterr()
    assert code == 1
    assert f"{version.path / PLAN_FILE}: Invalid JSON at line 2, column 1" in out.out + out.err
    assert "Traceback" not in out.out + out.err


@pytest.mark.parametrize("content", [b"\xff\xfe{}", b""])
def test_a_spec_that_is_not_json_text_is_named(tmp_path, content) -> None:
    version = _one_version(tmp_path)
    (version.path / SPEC_FILE).write_bytes(content)
    with pytest.raises(QttFormatError, match=str(version.path / SPEC_FILE)):
        load_saved(version)
