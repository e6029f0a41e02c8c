"""Run many QTT files and summarise: per-file counts, totals, top reasons, a JSON report."""

from __future__ import annotations

import contextvars
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from qtt.loader import QttFile
from qtt.model import QttCase
from qtt.runner import (
    CaseResult,
    EngineFactory,
    Status,
    installed_engine_factory,
    interpreted_engine_factory,
    problem_result,
    run_case,
)

STATUSES: tuple[Status, ...] = (Status.PASSED, Status.FAILED, Status.ERROR, Status.UNSUPPORTED)


@dataclass(slots=True)
class Counts:
    """Cases per status, plus the cases left out of the totals."""

    passed: int = 0
    failed: int = 0
    error: int = 0
    unsupported: int = 0
    not_applicable: int = 0
    disabled: int = 0

    @property
    def total(self) -> int:
        """Cases that ran (or failed to load): not-applicable and disabled ones excluded."""
        return self.passed + self.failed + self.error + self.unsupported

    def add(self, status: Status) -> None:
        setattr(self, status.value, getattr(self, status.value) + 1)

    def merge(self, other: Counts) -> None:
        for name in ("passed", "failed", "error", "unsupported", "not_applicable", "disabled"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def as_dict(self) -> dict[str, int]:
        return {
            "passed": self.passed,
            "failed": self.failed,
            "error": self.error,
            "unsupported": self.unsupported,
            "total": self.total,
            "not_applicable": self.not_applicable,
            "disabled": self.disabled,
        }


@dataclass(slots=True)
class ConformanceRun:
    """The results of a conformance run, in file then case order."""

    results: list[CaseResult] = field(default_factory=list)
    files: dict[str, Counts] = field(default_factory=dict)
    wall_seconds: float = 0.0
    runtime: str = "bounded"
    sample: dict[str, int] | None = None  # {"size": n, "of": total} when a sample ran

    @property
    def totals(self) -> Counts:
        totals = Counts()
        for counts in self.files.values():
            totals.merge(counts)
        return totals

    def top_unsupported(self, n: int = 10) -> list[tuple[str, int]]:
        """The most frequent missing features."""
        return Counter(
            r.feature or r.reason for r in self.results if r.status is Status.UNSUPPORTED
        ).most_common(n)

    def top_failures(self, n: int = 10) -> list[tuple[str, int]]:
        """The most frequent failure and error reasons, with names and numbers masked."""
        return Counter(
            reason_category(r) for r in self.results if r.status in (Status.FAILED, Status.ERROR)
        ).most_common(n)

    @property
    def other_messages(self) -> list[CaseResult]:
        """Passed cases whose expected error came with another message (lenient passes)."""
        return [r for r in self.results if r.passed and r.message_matched is False]

    def last_line(self) -> str:
        """``conformance: P/T passed (X.Y%)``, then the strict count when it differs: an
        expected error passes strictly only with its expected message."""
        totals = self.totals
        pct = 100.0 * totals.passed / totals.total if totals.total else 0.0
        line = f"conformance: {totals.passed}/{totals.total} passed ({pct:.1f}%)"
        other = len(self.other_messages)
        if other:
            strict = totals.passed - other
            line += (
                f"; {strict}/{totals.total} strictly ({100.0 * strict / totals.total:.1f}%): "
                f"{other} raised the expected error with another message"
            )
        return line

    def report(self) -> dict[str, Any]:
        """The JSON report (see ``write_report``)."""
        cases = []
        for r in self.results:
            entry: dict[str, Any] = {
                "file": r.file,
                "name": r.case_id,
                "status": r.status.value,
                "reason": r.reason,
                "seconds": round(r.seconds, 4),
            }
            if r.message_matched is not None:
                entry["message_matched"] = r.message_matched
            cases.append(entry)
        totals, other = self.totals, len(self.other_messages)
        return {
            "cases": cases,
            "files": {name: c.as_dict() for name, c in sorted(self.files.items())},
            "totals": {**totals.as_dict(), "passed_strictly": totals.passed - other, "other_message": other},
            "top_unsupported": [{"feature": f, "count": n} for f, n in self.top_unsupported()],
            "top_failures": [{"reason": f, "count": n} for f, n in self.top_failures()],
            "wall_seconds": round(self.wall_seconds, 3),
            "runtime": self.runtime,
            **({"sample": dict(self.sample)} if self.sample is not None else {}),
        }


def reason_category(result: CaseResult) -> str:
    """A reason with quoted names and numbers masked, so alike failures count together."""
    if result.verification is not None and result.verification.comparisons:
        bad = [c for c in result.verification.comparisons if c.reason is not None]
        if bad and bad[0].field is not None:
            root = re.split(r"[.\[]", bad[0].field, maxsplit=1)[0]
            if not bad[0].expected:
                return "records on a topic that expects none"
            return f"output {root} differs" if root != "count" else "output record count differs"
    text = re.sub(r"'[^']*'|`[^`]*`|\"[^\"]*\"", "'…'", result.reason)
    text = re.sub(r"\d+", "N", text)
    return text if len(text) <= 100 else text[:99] + "…"


def run_conformance(
    files: Iterable[QttFile],
    *,
    strict: bool = False,
    progress: bool = False,
    stderr: TextIO | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
    runtime: str = "bounded",
    engine_factory_for: Callable[[QttCase], EngineFactory] | None = None,
    workers: int | None = None,
) -> ConformanceRun:
    """Run every case of ``files``; load problems count as errors. Never raises for cases.

    ``engine_factory_for`` gives each case its engine factory (the Kafka runtime's);
    ``runtime`` names the runtime in the report. ``workers`` cases run at a time on the
    shared SparkSession (see ``case_workers``); each has its own engine and topics, and results
    keep file and case order.
    """
    files = list(files)
    count = case_workers(workers, runtime=runtime, own_factories=engine_factory_for is not None)
    run = ConformanceRun(runtime=runtime)
    total = sum(len(f.cases) + len(f.problems) for f in files)
    start = time.perf_counter()
    bar = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=Console(file=stderr or sys.stderr),
        disable=not progress,
        transient=True,
    )
    bounded = _interpreted_factory(runtime)

    def run_one(job: tuple[QttFile, QttCase]) -> CaseResult:
        f, case = job
        factory = engine_factory_for(case) if engine_factory_for is not None else bounded
        return run_case(case, strict=strict, file=f.display_name, engine_factory=factory)

    jobs = [(f, case) for f in files for case in f.cases]
    with bar, _in_order(run_one, jobs, count) as results:
        task = bar.add_task("QTT cases", total=total)
        for f in files:
            counts = run.files.setdefault(f.display_name, Counts())
            counts.not_applicable += len(f.not_applicable)
            counts.disabled += len(f.disabled)
            for problem in f.problems:
                result = problem_result(problem, f.display_name)
                _record(run, counts, result, on_result)
                bar.advance(task)
            for case in f.cases:
                bar.update(task, description=_short(case.id))
                _record(run, counts, next(results), on_result)
                bar.advance(task)
    run.wall_seconds = time.perf_counter() - start
    return run


def _interpreted_factory(runtime: str) -> EngineFactory | None:
    """Bounded cases run on engines of ``interpreted_session()`` (Spark's interpreted
    operators: a case's few records cost less than the code generated for them), unless a
    factory of engines is installed (``set_engine_factory``), whose engines they keep."""
    if runtime != "bounded" or installed_engine_factory() is not None:
        return None
    return interpreted_engine_factory


WORKERS_ENV = "KSPARK_QTT_WORKERS"


def case_workers(workers: int | None, *, runtime: str = "bounded", own_factories: bool = False) -> int:
    """How many cases run at a time on the bounded runtime: ``workers``, else
    $KSPARK_QTT_WORKERS, else 3. One on any other runtime and when cases bring their own
    engine factories (the Kafka runtime's), whose engines share a broker and a registry."""
    if runtime != "bounded" or own_factories:
        return 1
    if workers is not None:
        return max(1, workers)
    return max(1, int(os.environ.get(WORKERS_ENV, "3")))


@contextmanager
def _in_order(
    fn: Callable[[Any], CaseResult], jobs: Sequence[Any], workers: int
) -> Iterator[Iterator[CaseResult]]:
    """``fn`` over ``jobs``, ``workers`` at a time, results in job order.

    Spark runs the jobs that several threads submit at once, so one case's planning and
    verifying (driver Python) overlap another's Spark job. Each job runs in a copy of the
    caller's context variables, as it would in the caller's thread.
    """
    if workers <= 1 or len(jobs) <= 1:
        yield (fn(job) for job in jobs)
        return
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="qtt-case") as pool:
        context = contextvars.copy_context()
        yield pool.map(lambda job: context.copy().run(fn, job), jobs)


def stratified_sample(files: Iterable[QttFile], size: int) -> list[QttFile]:
    """About ``size`` cases drawn from every file in proportion to its case count.

    Each file with cases gets at least one when ``size`` allows, the rest by largest
    remainder; within a file the cases are evenly spaced, so the same corpus and size always
    give the same sample. Load problems and not-applicable or disabled names are left out:
    a sample counts cases that run.
    """
    files = [f for f in files if f.cases]
    total = sum(len(f.cases) for f in files)
    if size >= total:
        return [_with_cases(f, f.cases) for f in files]
    quotas = {f.display_name: 0 for f in files}
    if size >= len(files):
        quotas = {f.display_name: 1 for f in files}
    left = size - sum(quotas.values())
    shares = {f.display_name: left * len(f.cases) / total for f in files}
    for name, share in shares.items():
        quotas[name] += int(share)
    remaining = size - sum(quotas.values())
    by_remainder = sorted(shares, key=lambda n: (-(shares[n] - int(shares[n])), n))
    for name in by_remainder[:remaining]:
        quotas[name] += 1
    sampled = []
    for f in files:
        k = min(quotas[f.display_name], len(f.cases))
        if k:
            picks = [f.cases[int((i + 0.5) * len(f.cases) / k)] for i in range(k)]
            sampled.append(_with_cases(f, tuple(picks)))
    return sampled


def _with_cases(file: QttFile, cases: tuple[QttCase, ...]) -> QttFile:
    return QttFile(path=file.path, display_name=file.display_name, cases=cases)


def _record(
    run: ConformanceRun,
    counts: Counts,
    result: CaseResult,
    on_result: Callable[[CaseResult], None] | None,
) -> None:
    run.results.append(result)
    counts.add(result.status)
    if on_result is not None:
        on_result(result)


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def write_report(run: ConformanceRun, path: str | Path) -> None:
    """Write the JSON report: sorted keys, 2-space indent, trailing newline."""
    text = json.dumps(run.report(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    Path(path).write_text(text, encoding="utf-8")


def print_summary(run: ConformanceRun, console: Console, *, top: int = 10) -> None:
    """Per-file table, totals, top reasons, counts left out, timing; ends with the last line."""
    table = Table(title="QTT conformance")
    table.add_column("file")
    for status in STATUSES:
        table.add_column(status.value, justify="right")
    table.add_column("total", justify="right")
    table.add_column("pass %", justify="right")
    for name, counts in sorted(run.files.items()):
        table.add_row(name, *_row(counts))
    totals = run.totals
    table.add_section()
    table.add_row("TOTAL", *_row(totals), style="bold")
    console.print(table)
    if top > 0:
        for title, label, rows in (
            ("top unsupported features", "feature", run.top_unsupported(top)),
            ("top failure reasons", "reason", run.top_failures(top)),
        ):
            if rows:
                console.print(title, markup=False, highlight=False)
                t = Table()
                t.add_column("count", justify="right")
                t.add_column(label)
                for text, n in rows:
                    t.add_row(str(n), text)
                console.print(t)
    other = run.other_messages
    if top > 0 and other:
        console.print(
            "expected errors raised with another message (passed leniently, not strictly)",
            markup=False, highlight=False,
        )
        t = Table()
        t.add_column("case")
        t.add_column("messages")
        for r in other[:top]:
            t.add_row(r.case_id, r.reason)
        if len(other) > top:
            t.add_row(f"... and {len(other) - top} more", "see the JSON report (--report)")
        console.print(t)
    rate = totals.total / run.wall_seconds if run.wall_seconds > 0 else 0.0
    console.print(
        f"not applicable (versions): {totals.not_applicable}, disabled: {totals.disabled}",
        markup=False,
        highlight=False,
    )
    console.print(
        f"wall time: {run.wall_seconds:.1f}s, {rate:.2f} cases/s on the {run.runtime} runtime",
        markup=False,
        highlight=False,
    )
    if run.sample is not None:
        console.print(
            f"a stratified sample: {run.sample['size']} of {run.sample['of']} cases",
            markup=False,
            highlight=False,
        )
    console.print(run.last_line(), markup=False, highlight=False, soft_wrap=True)


def _row(counts: Counts) -> list[str]:
    pct = f"{100.0 * counts.passed / counts.total:.1f}" if counts.total else "-"
    return [
        str(counts.passed),
        str(counts.failed),
        str(counts.error),
        str(counts.unsupported),
        str(counts.total),
        pct,
    ]
