"""Planned-case folders: slugs, version order, releases and folding at release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qtt.plans.layout import (
    RELEASES_FILE,
    add_release,
    case_slug,
    is_released,
    latest_version,
    read_releases,
    saved_versions,
)
from qtt.plans.regenerate import fold_release


def make_version(root: Path, slug: str, name: str) -> Path:
    path = root / slug / name
    path.mkdir(parents=True)
    (path / "provenance.json").write_text(json.dumps({"engineVersion": name.split("_")[0]}))
    return path


def test_case_slug_is_lower_case_with_underscores() -> None:
    assert (
        case_slug("queries - partition by a value column") == "queries_partition_by_a_value_column"
    )
    assert case_slug("f - it's 100% JSON!") == "f_it_s_100_json"


def test_case_slug_refuses_an_id_without_letters_or_digits() -> None:
    with pytest.raises(ValueError, match="no letters or digits"):
        case_slug(" - ")


def test_versions_sort_by_engine_version_then_time(tmp_path: Path) -> None:
    make_version(tmp_path, "c", "0.10.0_0000000000005")
    make_version(tmp_path, "c", "0.9.0_0000000000009")
    make_version(tmp_path, "c", "0.10.0_0000000000001")
    (tmp_path / "c" / "not_a_version").mkdir()
    names = [v.name for v in saved_versions(tmp_path / "c")]
    assert names == ["0.9.0_0000000000009", "0.10.0_0000000000001", "0.10.0_0000000000005"]
    latest = latest_version(tmp_path / "c")
    assert latest is not None and latest.name == "0.10.0_0000000000005"


def test_a_version_is_released_only_up_to_its_release_time(tmp_path: Path) -> None:
    add_release(tmp_path, "0.1.0", 100)
    releases = read_releases(tmp_path)
    before = make_version(tmp_path, "c", "0.1.0_0000000000100")
    after = make_version(tmp_path, "c", "0.1.0_0000000000101")
    (v_before, v_after) = saved_versions(before.parent)
    assert v_before.path == before and is_released(v_before, releases)
    assert v_after.path == after and not is_released(v_after, releases)


def test_a_version_cannot_be_released_twice(tmp_path: Path) -> None:
    add_release(tmp_path, "0.1.0", 100)
    with pytest.raises(ValueError, match="already released"):
        add_release(tmp_path, "0.1.0", 200)


def test_a_malformed_releases_line_is_reported_with_its_line(tmp_path: Path) -> None:
    (tmp_path / RELEASES_FILE).write_text("# comment\n0.1.0\n")
    with pytest.raises(ValueError, match="RELEASES:2"):
        read_releases(tmp_path)


def test_release_folds_unreleased_versions_and_keeps_released_history(tmp_path: Path) -> None:
    released = make_version(tmp_path, "c", "0.1.0_0000000000010")
    add_release(tmp_path, "0.1.0", 10)
    make_version(tmp_path, "c", "0.1.0_0000000000020")
    make_version(tmp_path, "c", "0.1.0_0000000000030")
    make_version(tmp_path, "d", "0.1.0_0000000000005")  # released, nothing to fold
    lines = fold_release(tmp_path, "0.2.0", millis=40)
    assert [v.name for v in saved_versions(tmp_path / "c")] == [
        "0.1.0_0000000000010",
        "0.2.0_0000000000030",
    ]
    assert released.is_dir() and len(lines) == 1 and "folded 1" in lines[0]
    assert read_releases(tmp_path) == {"0.1.0": 10, "0.2.0": 40}
    provenance = json.loads(
        (tmp_path / "c" / "0.2.0_0000000000030" / "provenance.json").read_text()
    )
    assert provenance["release"] == "0.2.0"
    assert all(is_released(v, read_releases(tmp_path)) for v in saved_versions(tmp_path / "c"))


def test_release_refuses_a_version_already_released(tmp_path: Path) -> None:
    add_release(tmp_path, "0.1.0", 10)
    with pytest.raises(ValueError, match="never rewritten"):
        fold_release(tmp_path, "0.1.0")
