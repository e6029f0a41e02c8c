"""Where planned cases live, how their versions are named, and which versions are released.

``planned_cases/<case-slug>/<engine-version>_<epoch-ms>/`` is one saved version of a case.
Versions sort by (engine version, time). A version is *released* when the file
``planned_cases/RELEASES`` has a line ``<engine-version> <epoch-ms>`` with the same engine
version and a release time at or after the version's time; every other version is
unreleased (written during development). Released versions are never rewritten or removed;
``qtt plans regenerate --release X`` folds each case's unreleased versions into one
version ``X_<time>`` and appends ``X <now> <commit>`` to RELEASES, the commit being the one the
release's engine was built from (``git rev-parse HEAD`` at release time), so that the engine of
any release can be rebuilt from the repository alone (``qtt plans release-wheel X``).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

from qtt.model import version_tuple

PLAN_FILE = "plan.json"
SPEC_FILE = "spec.json"
PROVENANCE_FILE = "provenance.json"
PHYSICAL_DIR = "physical_plans"
STREAMING_DIR = "streaming_plans"
RELEASES_FILE = "RELEASES"
README_FILE = "README.md"
DEFAULT_ROOT = Path("planned_cases")

_VERSION_DIR = re.compile(r"^(?P<version>[0-9][0-9A-Za-z.+-]*)_(?P<time>[0-9]{13})$")


def case_slug(case_id: str) -> str:
    """The folder name of a case: its id, lower case, runs of other characters as ``_``."""
    slug = re.sub(r"[^a-z0-9]+", "_", case_id.lower()).strip("_")
    if not slug:
        raise ValueError(f"Case id '{case_id}' has no letters or digits to name a folder after.")
    return slug


@dataclass(frozen=True, slots=True, order=True)
class VersionKey:
    """Sort key of a saved version: engine version, then time."""

    version: tuple[int, ...]
    millis: int


@dataclass(frozen=True, slots=True)
class SavedVersion:
    """One saved version of a planned case."""

    path: Path
    engine_version: str
    millis: int

    @property
    def slug(self) -> str:
        return self.path.parent.name

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def key(self) -> VersionKey:
        return VersionKey(version_tuple(self.engine_version), self.millis)


def version_dir_name(engine_version: str, millis: int) -> str:
    """``0.1.0_1763755428000``."""
    return f"{engine_version}_{millis:013d}"


def parse_version_dir(path: Path) -> SavedVersion | None:
    """The saved version a folder stands for, or None when its name is not a version."""
    match = _VERSION_DIR.match(path.name)
    if match is None or not path.is_dir():
        return None
    return SavedVersion(path, match["version"], int(match["time"]))


def case_dirs(root: Path) -> list[Path]:
    """Every case folder under ``root``, sorted."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def saved_versions(case_dir: Path) -> list[SavedVersion]:
    """The saved versions of one case, oldest first."""
    found = [v for p in case_dir.iterdir() if (v := parse_version_dir(p)) is not None]
    return sorted(found, key=lambda v: v.key)


def latest_version(case_dir: Path) -> SavedVersion | None:
    """The newest saved version of a case, or None."""
    versions = saved_versions(case_dir) if case_dir.is_dir() else []
    return versions[-1] if versions else None


def now_millis() -> int:
    """The current time in epoch milliseconds."""
    return int(time.time() * 1000)


# ---------------------------------------------------------------------------- releases


_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")


@dataclass(frozen=True)
class Release:
    """One line of ``RELEASES``: an engine version, its release time and, when recorded, the
    commit its engine was built from."""

    version: str
    millis: int
    commit: str | None


def read_release_lines(root: Path) -> list[Release]:
    """Every release line of ``RELEASES`` in file order (``#`` starts a comment)."""
    path = root / RELEASES_FILE
    if not path.is_file():
        return []
    releases: list[Release] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        if (
            len(parts) not in (2, 3)
            or not parts[1].isdigit()
            or (len(parts) == 3 and not _COMMIT.match(parts[2]))
        ):
            raise ValueError(
                f"{path}:{number}: expected '<engine-version> <epoch-ms> [<commit>]', "
                f"got '{line.strip()}'."
            )
        commit = parts[2] if len(parts) == 3 else None
        releases.append(Release(parts[0], int(parts[1]), commit))
    return releases


def read_releases(root: Path) -> dict[str, int]:
    """Released engine versions and their release times."""
    return {release.version: release.millis for release in read_release_lines(root)}


def is_released(version: SavedVersion, releases: dict[str, int]) -> bool:
    """Whether a saved version belongs to a release (and so must never change)."""
    released_at = releases.get(version.engine_version)
    return released_at is not None and version.millis <= released_at


def add_release(root: Path, engine_version: str, millis: int, commit: str | None = None) -> None:
    """Append a release line to ``RELEASES``; refuses a version released before."""
    if engine_version in read_releases(root):
        raise ValueError(
            f"Version {engine_version} is already released (see {root / RELEASES_FILE})."
        )
    path = root / RELEASES_FILE
    text = path.read_text(encoding="utf-8") if path.is_file() else RELEASES_HEADER
    if text and not text.endswith("\n"):
        text += "\n"
    line = f"{engine_version} {millis}" + (f" {commit}" if commit else "")
    path.write_text(text + line + "\n", encoding="utf-8")


RELEASES_HEADER = (
    "# Released engine versions: '<engine-version> <release time, epoch ms> <commit>' per line\n"
    "# (the commit the release's engine was built from; `qtt plans release-wheel X` builds it).\n"
    "# A saved version <v>_<t> is released when <v> is listed here with a time >= t.\n"
    "# Released versions are never rewritten; `qtt plans regenerate --release X` adds lines.\n"
)
