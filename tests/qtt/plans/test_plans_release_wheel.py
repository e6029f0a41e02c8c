"""Releases record the commit their engine was built from, and that commit rebuilds the wheel."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from qtt.plans.layout import add_release, read_release_lines, read_releases
from qtt.plans.regenerate import fold_release
from qtt.plans.release_wheel import (
    ReleaseError,
    build_release_wheel,
    head_commit,
    release_commit,
)

REPO = Path(__file__).resolve().parents[3]


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip()


def _package_repo(path: Path, version: str) -> Path:
    """A git repository holding a tiny package ``tinypkg`` of one version."""
    path.mkdir()
    _git(path, "init", "-q")
    (path / "pyproject.toml").write_text(
        "[build-system]\nrequires = ['setuptools>=61']\nbuild-backend = 'setuptools.build_meta'\n"
        f"[project]\nname = 'tinypkg'\nversion = '{version}'\n"
        "[tool.setuptools]\npackages = ['tinypkg']\n"
    )
    (path / "tinypkg").mkdir()
    (path / "tinypkg" / "__init__.py").write_text(f"VERSION = {version!r}\n")
    (path / "planned_cases").mkdir()
    (path / "planned_cases" / "RELEASES").write_text("")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", f"tinypkg {version}")
    return path


def test_a_release_line_carries_its_commit_and_an_old_two_field_line_still_reads(tmp_path):
    (tmp_path / "RELEASES").write_text("# c\n0.1.0 1795423240893\n0.2.0 1795447992375 abc1234\n")
    lines = read_release_lines(tmp_path)
    assert [(r.version, r.commit) for r in lines] == [("0.1.0", None), ("0.2.0", "abc1234")]
    assert read_releases(tmp_path) == {"0.1.0": 1795423240893, "0.2.0": 1795447992375}


def test_a_release_line_whose_third_field_is_no_commit_is_an_error_naming_file_and_line(tmp_path):
    (tmp_path / "RELEASES").write_text("0.1.0 1795423240893\n0.2.0 1795447992375 main\n")
    with pytest.raises(ValueError, match=r"RELEASES:2: expected '<engine-version> <epoch-ms>"):
        read_release_lines(tmp_path)


def test_release_commit_refuses_an_unknown_version_and_a_line_without_commit(tmp_path):
    add_release(tmp_path, "0.1.0", 1795423240893)
    with pytest.raises(ReleaseError, match=r"Version 0.9.0 is not released \(released: 0.1.0\)"):
        release_commit(tmp_path, "0.9.0")
    with pytest.raises(ReleaseError, match="records no commit"):
        release_commit(tmp_path, "0.1.0")


def test_every_committed_release_names_a_commit_whose_engine_has_that_version():
    if _git(REPO, "rev-parse", "--is-shallow-repository") == "true":
        pytest.skip("a shallow clone has no release commits (git fetch --unshallow)")
    for release in read_release_lines(REPO / "planned_cases"):
        assert release.commit, f"release {release.version} records no commit"
        pyproject = _git(REPO, "show", f"{release.commit}:pyproject.toml")
        assert f'version = "{release.version}"' in pyproject, release


@pytest.mark.system
def test_the_wheel_of_a_release_is_built_from_its_commit_not_from_the_checkout(tmp_path):
    repo = _package_repo(tmp_path / "repo", "1.0.0")
    first = head_commit(repo)
    (repo / "pyproject.toml").write_text(
        (repo / "pyproject.toml").read_text().replace("1.0.0", "2.0.0")
    )
    (repo / "tinypkg" / "__init__.py").write_text("VERSION = '2.0.0'\n")
    _git(repo, "commit", "-q", "-am", "tinypkg 2.0.0")

    wheel = build_release_wheel(repo, first, tmp_path / "out")

    assert wheel.name.startswith("tinypkg-1.0.0-")
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("tinypkg/__init__.py").decode() == "VERSION = '1.0.0'\n"
    assert _git(repo, "worktree", "list").count("\n") == 0, "the worktree is left behind"


def test_a_commit_missing_from_the_repository_says_so(tmp_path):
    repo = _package_repo(tmp_path / "repo", "1.0.0")
    with pytest.raises(ReleaseError, match="is not in the repository .* shallow clone"):
        build_release_wheel(repo, "0" * 40, tmp_path / "out")


def test_a_release_records_the_head_commit_and_refuses_uncommitted_engine_files(tmp_path):
    repo = _package_repo(tmp_path / "repo", "1.0.0")
    root = repo / "planned_cases"
    fold_release(root, "1.0.0", millis=1795423240893)
    [release] = read_release_lines(root)
    assert release.commit == head_commit(repo)

    (repo / "engine").mkdir()
    (repo / "engine" / "new.py").write_text("")
    with pytest.raises(ValueError, match=r"Not releasing 1.1.0: .* engine/new.py"):
        fold_release(root, "1.1.0", millis=1795423240894)


@pytest.mark.system
def test_the_cli_prints_the_wheel_or_one_line_naming_the_problem(tmp_path):
    repo = _package_repo(tmp_path / "repo", "1.0.0")
    root = repo / "planned_cases"
    add_release(root, "1.0.0", 1795423240893, head_commit(repo))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "qtt.cli",
            "plans",
            "release-wheel",
            "1.0.0",
            "--root",
            str(root),
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()).name.startswith("tinypkg-1.0.0-")
    refused = subprocess.run(
        [sys.executable, "-m", "qtt.cli", "plans", "release-wheel", "3.0.0", "--root", str(root)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert refused.returncode == 1
    assert refused.stderr.strip() == "qtt: Version 3.0.0 is not released (released: 1.0.0)."
