"""Write new planned cases where they are missing or stale; fold unreleased versions at release."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qtt.model import QttCase
from qtt.plans.layout import (
    PROVENANCE_FILE,
    add_release,
    case_dirs,
    is_released,
    now_millis,
    read_releases,
    saved_versions,
    version_dir_name,
)
from qtt.plans.record import RecordingError, record_case, write_planned_case
from qtt.plans.release_wheel import head_commit, uncommitted_engine_files
from qtt.plans.uptodate import check_up_to_date


@dataclass
class RegenerateReport:
    """What ``regenerate`` did."""

    written: list[Path] = field(default_factory=list)
    current: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)


def regenerate(
    root: Path,
    cases: Sequence[QttCase],
    *,
    advance: Callable[[QttCase], None] | None = None,
) -> RegenerateReport:
    """Record every case whose latest planned case is missing or stale, as a new version."""
    report = RegenerateReport()
    for case in cases:
        result = check_up_to_date(case, root)
        if result.ok:
            report.current.append(case.id)
        else:
            try:
                report.written.append(write_planned_case(root, record_case(case)))
            except (RecordingError, Exception) as exc:  # report every case, never stop half-way
                report.failed.append(f"{case.id}: {type(exc).__name__}: {exc}")
        if advance is not None:
            advance(case)
    return report


def fold_release(root: Path, version: str, *, millis: int | None = None) -> list[str]:
    """Fold each case's unreleased versions into one ``<version>_<time>`` and record the release.

    The newest unreleased version of a case is renamed to the release version (its time is
    kept); older unreleased versions are removed. Released versions are never touched.
    Returns a line per case that changed.
    """
    releases = read_releases(root)
    if version in releases:
        raise ValueError(
            f"Version {version} is already released; released history is never rewritten."
        )
    dirty = uncommitted_engine_files(root)
    if dirty:
        raise ValueError(
            f"Not releasing {version}: the release records the commit its engine is built "
            f"from, and these engine files are not committed: {', '.join(dirty[:5])}"
            + (" ..." if len(dirty) > 5 else "")
        )
    lines: list[str] = []
    for case_dir in case_dirs(root):
        unreleased = [v for v in saved_versions(case_dir) if not is_released(v, releases)]
        if not unreleased:
            continue
        keep = unreleased[-1]
        for old in unreleased[:-1]:
            shutil.rmtree(old.path)
        target = case_dir / version_dir_name(version, keep.millis)
        if target != keep.path:
            keep.path.rename(target)
        provenance_path = target / PROVENANCE_FILE
        if provenance_path.is_file():
            data = json.loads(provenance_path.read_text(encoding="utf-8"))
            data["release"] = version
            provenance_path.write_text(
                json.dumps(data, sort_keys=True, indent=2) + "\n", encoding="utf-8"
            )
        folded = f" (folded {len(unreleased) - 1} older unreleased)" if len(unreleased) > 1 else ""
        lines.append(f"{case_dir.name}: {keep.name} -> {target.name}{folded}")
    add_release(root, version, now_millis() if millis is None else millis, head_commit(root))
    return lines
