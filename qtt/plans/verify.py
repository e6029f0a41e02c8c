"""``qtt plans verify``: replay every saved version, check the latest plans are up to date,
report orphans, check step completeness and the plan-schema guard, all in one report."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qtt.loader import load_paths
from qtt.model import QttCase, QttFormatError
from qtt.plans import codec
from qtt.plans.completeness import (
    Completeness,
    check_completeness,
    functions_in,
    operators_in,
    step_types_in,
)
from qtt.plans.coverage import covering_versions
from qtt.plans.diff import ERROR, Change
from qtt.plans.layout import PLAN_FILE, case_dirs, case_slug, saved_versions
from qtt.plans.record import positive_cases
from qtt.plans.replay import ReplayResult, error_text, replay_all
from qtt.plans.schema import (
    BREAKING,
    SCHEMA_FILE,
    SchemaChange,
    compare_schemas,
    generate_schema,
    read_schema,
    validate_plan_file,
)
from qtt.plans.uptodate import STALE, UpToDateResult, check_up_to_date, fix_command

DEFAULT_CASES = Path("tests/qtt_cases")


@dataclass
class VerifyReport:
    """Everything ``qtt plans verify`` found."""

    replays: list[ReplayResult] = field(default_factory=list)
    up_to_date: list[UpToDateResult] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    completeness: Completeness | None = None
    schema_changes: list[SchemaChange] = field(default_factory=list)
    schema_problems: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    allow_orphans: bool = False
    replay_seconds: float = 0.0
    shard: tuple[int, int] = (1, 1)

    @property
    def failed_replays(self) -> list[ReplayResult]:
        return [r for r in self.replays if not r.ok]

    @property
    def stale(self) -> list[UpToDateResult]:
        return [r for r in self.up_to_date if not r.ok]

    @property
    def ok(self) -> bool:
        return not (
            self.failed_replays
            or self.stale
            or (self.orphans and not self.allow_orphans)
            or (self.completeness is not None and not self.completeness.ok)
            or any(c.verdict == BREAKING for c in self.schema_changes)
            or self.schema_problems
            or self.problems
        )

    def render(self) -> str:
        """Every failure in detail, then the summary line and the fixing command."""
        parts: list[str] = [r.render() for r in self.failed_replays]
        parts += [r.render() for r in self.stale]
        for slug in self.orphans:
            verdict = "allowed" if self.allow_orphans else "fails the run"
            parts.append(
                f"Orphaned planned case '{slug}': no current QTT case has this slug ({verdict}). "
                "Delete the folder if the case was removed on purpose, or pass --allow-orphans."
            )
        if self.completeness is not None and not self.completeness.ok:
            parts.append(self.completeness.render())
        parts += [c.render() for c in self.schema_changes]
        parts += self.schema_problems + self.problems
        parts.append(self.summary())
        return "\n\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        """The report as JSON (``qtt plans verify --report FILE``)."""
        return {
            "ok": self.ok,
            "replays": [
                {"version": r.label, "ok": r.ok, "seconds": round(r.seconds, 3),
                 "coveredBy": None if r.covered_by is None else r.covered_by.name,
                 "checkedByCaseRun": r.by_case_run,
                 "changes": [c.render() for c in r.changes]}
                for r in self.replays
            ],
            "stale": [r.render() for r in self.stale],
            "orphans": list(self.orphans),
            "completeness": None if self.completeness is None else self.completeness.to_json(),
            "schemaChanges": [c.render() for c in self.schema_changes],
            "problems": self.schema_problems + self.problems,
        }

    def summary(self) -> str:
        """One line of counts, plus the command that fixes the state when something is stale."""
        covered = sum(1 for r in self.replays if r.covered_by is not None)
        by_run = sum(1 for r in self.replays if r.by_case_run)
        run = len(self.replays) - covered - by_run
        rate = run / self.replay_seconds if self.replay_seconds else 0.0
        part = "" if self.shard == (1, 1) else f" (shard {self.shard[0]}/{self.shard[1]})"
        line = (
            f"planned cases{part}: {run} versions replayed "
            f"({len(self.failed_replays)} failed, {rate:.1f}/s), "
            f"{covered} covered by a newer version of their case, "
        )
        if by_run:
            line += f"{by_run} checked by their case's QTT run, "
        line += (
            f"{len(self.up_to_date) - len(self.stale)} up to date, {len(self.stale)} stale or missing, "
            f"{len(self.orphans)} orphaned"
        )
        if self.completeness is not None:
            line += "\n" + self.completeness.summary()
        if self.stale:
            line += f"\nWrite the missing planned cases with: {fix_command()}"
        return line


def current_cases(paths: Sequence[Path]) -> tuple[list[QttCase], list[str]]:
    """The positive cases under ``paths`` and the load problems found."""
    files = load_paths(paths)
    cases = [c for f in files for c in f.cases]
    problems = [str(p) for f in files for p in f.problems]
    return positive_cases(cases), problems


def find_orphans(root: Path, cases: Sequence[QttCase]) -> list[str]:
    """Planned-case folders that no current case maps to."""
    wanted = {case_slug(c.id) for c in cases}
    return [d.name for d in case_dirs(root) if d.name not in wanted]


def check_schema(root: Path, schema_path: Path) -> tuple[list[SchemaChange], list[str]]:
    """Committed vs generated schema, and every committed plan.json against the committed schema."""
    problems: list[str] = []
    try:
        committed = read_schema(schema_path)
    except (OSError, ValueError) as exc:
        return [], [
            f"Cannot read the committed plan schema {schema_path}: {exc}. Run `qtt schema generate`."
        ]
    changes = compare_schemas(committed, generate_schema())
    if changes and all(c.verdict != BREAKING for c in changes):
        problems.append(
            f"The committed schema {schema_path} is out of date (compatible changes only): "
            "run `qtt schema generate` and commit it."
        )
    for case_dir in case_dirs(root):
        for version in saved_versions(case_dir):
            path = version.path / PLAN_FILE
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                problems.append(f"{path}: cannot be read: {exc}.")
                continue
            for message in validate_plan_file(data, committed):
                problems.append(f"{path} does not match the plan schema {message}")
    return changes, problems


def shard_case_dirs(dirs: Sequence[Path], count: int) -> list[list[Path]]:
    """``dirs`` split into ``count`` shards of about as many saved versions each.

    Deterministic for a given tree: the folders with the most versions go first, each to the
    shard holding the fewest versions so far (the first such shard on a tie), and each shard
    lists its folders sorted. A case's versions stay in one shard, so versions that replay
    alike (``replay.alike_groups``) still run once.
    """
    if count < 1:
        raise ValueError(f"a shard count must be at least 1, not {count}")
    sized = sorted(((len(saved_versions(d)), d) for d in dirs), key=lambda s: (-s[0], s[1]))
    shards: list[list[Path]] = [[] for _ in range(count)]
    loads = [0] * count
    for size, case_dir in sized:
        i = loads.index(min(loads))
        shards[i].append(case_dir)
        loads[i] += size
    return [sorted(shard) for shard in shards]


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` as ``(K, N)``, 1 <= K <= N; ValueError naming the problem otherwise."""
    index, _, count = text.partition("/")
    try:
        k, n = int(index), int(count)
    except ValueError:
        raise ValueError(f"a shard is K/N, such as 1/2, not {text!r}") from None
    if not 1 <= k <= n:
        raise ValueError(f"shard {text!r}: K must be between 1 and N")
    return k, n


def verify(
    root: Path,
    case_paths: Sequence[Path] = (DEFAULT_CASES,),
    *,
    allow_orphans: bool = False,
    schema_path: Path | None = SCHEMA_FILE,
    steps_complete: bool = True,
    on_replay: Callable[[ReplayResult], None] | None = None,
    replay_all_versions: bool = False,
    known_replays: Mapping[Path, ReplayResult] | None = None,
    known_up_to_date: Mapping[str, UpToDateResult] | None = None,
    shard: tuple[int, int] = (1, 1),
) -> VerifyReport:
    """Run every check of ``qtt plans verify`` and collect the results.

    ``steps_complete=False`` skips the completeness check (for partial trees in tests);
    ``schema_path=None`` skips the schema guard. A version that a newer version of the same
    case covers (``qtt.plans.coverage``) is reported as covered instead of replayed, unless
    ``replay_all_versions``.

    ``known_replays`` (by resolved version path) and ``known_up_to_date`` (by case id) are
    results this process already has for some versions and cases, from the QTT runs of
    their cases (``qtt.plans.case_runs``): they are reported instead of replaying or
    planning again. Only results for versions under ``root`` are taken.

    ``shard=(K, N)`` does part K of N (``shard_case_dirs``): the replays and up-to-date checks
    of that shard's case folders (a case with no folder belongs to shard 1), so that N
    processes verify one tree together. Orphans, completeness and the schema guard are
    checked by shard 1 only, over the whole tree.
    """
    report = VerifyReport(allow_orphans=allow_orphans, shard=shard)
    index, count = shard
    cases, report.problems = current_cases(case_paths)
    slugs: dict[str, str] = {}
    for case in cases:
        slug = case_slug(case.id)
        if slug in slugs:
            report.problems.append(
                f"Cases '{slugs[slug]}' and '{case.id}' map to the same planned-case folder '{slug}'."
            )
        slugs[slug] = case.id
    used: set[str] = set()
    operators: set[str] = set()
    functions: set[str] = set()
    start = time.perf_counter()
    all_versions = []
    every_dir = case_dirs(root)
    mine = set(every_dir) if count == 1 else set(shard_case_dirs(every_dir, count)[index - 1])
    for case_dir in every_dir:
        if case_dir not in mine:
            if index == 1:  # completeness is over every plan of the tree
                _add_used(case_dir, used, operators, functions)
            continue
        versions = saved_versions(case_dir)
        if not versions:
            report.problems.append(f"Planned-case folder {case_dir} holds no saved version.")
        all_versions.extend(versions)
    covered = {} if replay_all_versions else covering_versions(all_versions)
    results = {v: ReplayResult(v, covered_by=newer) for v, newer in covered.items()}
    known = {} if known_replays is None else dict(known_replays)
    for version in all_versions:
        if version not in covered and version.path.resolve() in known:
            results[version] = known[version.path.resolve()]
    to_run = [v for v in all_versions if v not in results]
    for version, result in zip(to_run, replay_all(to_run), strict=True):
        results[version] = result
        if on_replay is not None:
            on_replay(result)
    for version in all_versions:
        report.replays.append(results[version])
        _add_used_by(version.path, used, operators, functions)
    report.replay_seconds = time.perf_counter() - start
    mine_slugs = {d.name for d in mine}
    every_slug = {d.name for d in every_dir}
    report.up_to_date = [
        _known_up_to_date(c, root, known_up_to_date) or _up_to_date(c, root)
        for c in cases
        if case_slug(c.id) in mine_slugs or (index == 1 and case_slug(c.id) not in every_slug)
    ]
    if index != 1:
        return report
    report.orphans = find_orphans(root, cases)
    try:
        if steps_complete:
            report.completeness = check_completeness(
                used, operators_used=operators, functions_used=functions
            )
        if schema_path is not None:
            report.schema_changes, report.schema_problems = check_schema(root, schema_path)
    except Exception as exc:  # noqa: BLE001 - the report is written whatever a check does
        report.problems.append(f"A check of qtt plans verify failed: {error_text(exc)}")
    return report


def _add_used(case_dir: Path, *into: set[str]) -> None:
    for version in saved_versions(case_dir):
        _add_used_by(version.path, *into)


def _add_used_by(version: Path, used: set[str], operators: set[str], functions: set[str]) -> None:
    """Add the step types, operators and functions of a saved version's plans."""
    try:
        plans = codec.read_json(version / PLAN_FILE).get("plans", [])
        used |= step_types_in(plans)
        operators |= operators_in(plans)
        functions |= functions_in(plans)
    except (OSError, ValueError, AttributeError, QttFormatError):
        pass  # its replay reports what is wrong with it


def _known_up_to_date(
    case: QttCase, root: Path, known: Mapping[str, UpToDateResult] | None
) -> UpToDateResult | None:
    """A known current result for ``case`` whose latest version lies under ``root``, or None."""
    result = None if known is None else known.get(case.id)
    if result is None or not result.ok or result.latest is None:
        return None
    return result if result.latest.path.resolve().parent.parent == root.resolve() else None


def _up_to_date(case: QttCase, root: Path) -> UpToDateResult:
    """``check_up_to_date``, with an unexpected exception as this case's stale result."""
    try:
        return check_up_to_date(case, root)
    except Exception as exc:  # noqa: BLE001 - one case's failure, never the whole report's
        change = Change(ERROR, detail=error_text(exc) + "\n(raised while checking up to date)")
        return UpToDateResult(case.id, STALE, None, (change,))
