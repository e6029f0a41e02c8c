"""The engine of a past release, rebuilt from the repository alone.

Each line of ``planned_cases/RELEASES`` names the commit its engine was built from. A git
worktree at that commit builds the release's wheel, so an upgrade test can install the previous
release without tags or a package index:

    wheel = build_release_wheel(Path("."), release_commit(Path("planned_cases"), "0.11.0"), out)
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from qtt.plans.layout import RELEASES_FILE, read_release_lines


class ReleaseError(Exception):
    """A release's wheel cannot be built; the message says why and what to do."""


def release_commit(root: Path, version: str) -> str:
    """The commit release ``version``'s engine was built from."""
    releases = {release.version: release for release in read_release_lines(root)}
    release = releases.get(version)
    if release is None:
        known = ", ".join(releases) or "none"
        raise ReleaseError(f"Version {version} is not released (released: {known}).")
    if release.commit is None:
        raise ReleaseError(
            f"Release {version} in {root / RELEASES_FILE} records no commit: its engine "
            "cannot be rebuilt from the repository."
        )
    return release.commit


def head_commit(repo: Path) -> str | None:
    """The commit checked out at ``repo``, or None outside a git repository."""
    done = _git(repo, "rev-parse", "HEAD", check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def uncommitted_engine_files(repo: Path) -> list[str]:
    """Changed or new files of the engine's sources that no commit holds yet."""
    top = _git(repo, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0:
        return []
    done = _git(
        Path(top.stdout.strip()),
        "status",
        "--porcelain",
        "--untracked-files=all",
        "--",
        "engine",
        "pyproject.toml",
        check=False,
    )
    if done.returncode != 0:
        return []
    return [line[3:] for line in done.stdout.splitlines() if line.strip()]


def build_release_wheel(repo: Path, commit: str, out: Path) -> Path:
    """Build the wheel of the engine at ``commit`` into ``out``; returns the wheel's path."""
    if _git(repo, "cat-file", "-e", f"{commit}^{{commit}}", check=False).returncode != 0:
        raise ReleaseError(
            f"Commit {commit} is not in the repository at {repo} (a shallow clone? "
            "`git fetch --unshallow` brings the history)."
        )
    out.mkdir(parents=True, exist_ok=True)
    before = set(out.glob("*.whl"))
    with tempfile.TemporaryDirectory(prefix="kspark-release-") as tmp:
        tree = Path(tmp) / "tree"
        _git(repo, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "wheel",
                    "--no-deps",
                    "--quiet",
                    "--wheel-dir",
                    str(out),
                    str(tree),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise ReleaseError(
                    f"pip could not build the wheel of {commit}: "
                    f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}"
                )
        finally:
            _git(repo, "worktree", "remove", "--force", str(tree), check=False)
    built = sorted(set(out.glob("*.whl")) - before) or sorted(out.glob("kspark-*.whl"))
    if not built:
        raise ReleaseError(f"pip built no wheel of {commit} into {out}.")
    return built[-1]


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=False
        )
    except FileNotFoundError as exc:
        raise ReleaseError("git is not installed: releases are rebuilt from git commits.") from exc
    if check and done.returncode != 0:
        raise ReleaseError(f"git {' '.join(args)} failed: {done.stderr.strip()}")
    return done
