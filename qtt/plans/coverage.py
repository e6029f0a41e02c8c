"""Which saved versions a newer version of the same case already proves.

A replay rebuilds a version from its saved plan, runs it on its saved inputs and compares
what it built with the saved copies (outputs, schemas, physical and streaming plans). Two
versions of one case with the same plan, whose older copy saves nothing the newer one does
not save identically, replay the same way: the newer replay checks a superset of what the
older one checks. The older replay is then redundant, and ``qtt plans verify`` reports it as
*covered* by the newer version instead of running it again (``--replay-all`` runs it anyway).

Typical case: a release adds a recorded artefact (per-step schemas, streaming plans) and the
next release's version of each case differs from the previous one only by these additions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from qtt.model import QttFormatError
from qtt.plans import codec
from qtt.plans.layout import PHYSICAL_DIR, PLAN_FILE, SPEC_FILE, STREAMING_DIR, SavedVersion


def is_subset(older: Any, newer: Any) -> bool:
    """True when ``older`` is ``newer`` with some object keys left out, at any depth.

    Objects may lack keys the newer one has; lists must have the same length and each item
    must be a subset of the item at the same position; other values must be equal.
    """
    if isinstance(older, dict):
        return isinstance(newer, dict) and all(
            key in newer and is_subset(value, newer[key]) for key, value in older.items()
        )
    if isinstance(older, list):
        return (
            isinstance(newer, list)
            and len(older) == len(newer)
            and all(is_subset(a, b) for a, b in zip(older, newer, strict=True))
        )
    return type(older) is type(newer) and older == newer


def _texts_subset(older: Path, newer: Path) -> bool:
    """Every file under ``older`` exists under ``newer`` with the same bytes."""
    if not older.is_dir():
        return True
    for path in sorted(older.rglob("*")):
        if path.is_file():
            twin = newer / path.relative_to(older)
            if not twin.is_file() or twin.read_bytes() != path.read_bytes():
                return False
    return True


def covers(newer: SavedVersion, older: SavedVersion) -> bool:
    """True when replaying ``newer`` checks everything replaying ``older`` checks.

    The plans must be equal (the same steps build the same Spark operations); the older
    spec (statements, inputs, expected outputs, schemas) must be a subset of the newer one;
    each recorded physical and streaming plan of the older version must be recorded
    identically in the newer one. Unreadable files never cover anything.
    """
    try:
        if codec.read_json(older.path / PLAN_FILE) != codec.read_json(newer.path / PLAN_FILE):
            return False
        if not is_subset(
            codec.read_json(older.path / SPEC_FILE), codec.read_json(newer.path / SPEC_FILE)
        ):
            return False
        return all(
            _texts_subset(older.path / folder, newer.path / folder)
            for folder in (PHYSICAL_DIR, STREAMING_DIR)
        )
    except (OSError, ValueError, QttFormatError):
        return False


def covering_versions(versions: Sequence[SavedVersion]) -> dict[SavedVersion, SavedVersion]:
    """For each version that a later version of the same case covers, that later version.

    ``versions`` may mix cases. Versions are taken newest first and each is checked only
    against the versions that will be replayed, so every covering version is replayed and
    the newest version of a case always is.
    """
    by_case: dict[Path, list[SavedVersion]] = {}
    for version in versions:
        by_case.setdefault(version.path.parent, []).append(version)
    covered: dict[SavedVersion, SavedVersion] = {}
    for case_versions in by_case.values():
        replayed: list[SavedVersion] = []
        for version in sorted(case_versions, key=lambda v: v.key, reverse=True):
            newer = next((n for n in replayed if covers(n, version)), None)
            if newer is None:
                replayed.append(version)
            else:
                covered[version] = newer
    return covered
