"""``qtt native-report``: what of a corpus's queries still runs in Python, and why.

Every case is planned with the native step versions (``kspark.native.steps=true``) and
built as ``kspark explain`` builds it (no Spark job runs): its topics, schemas and
statements are set up exactly as ``qtt run`` sets them up, then each persistent query is
built and every step reports how it runs. The report counts steps by type (native, partly
native, or in Python: a step type with no native version yet, or a native version that
builds as V1 for a reason), expressions and source/sink columns native or not, and the
fallback reasons, most frequent first, each with an example case. Cases that stop with an
error before their queries exist (expected errors) are counted, not explained.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engine.facade.engine import KsqlEngine
from engine.facade.explain import QueryExplanation, explain_queries
from engine.planner.physical import NATIVE_STEPS
from qtt.loader import QttFile
from qtt.runner import run_case

_STEP_WIDE = "the step runs in Python ("


class _ExplainingEngine(KsqlEngine):
    """An engine whose ``run`` explains its queries instead of running them."""

    explanations: list[QueryExplanation] | None = None

    def run(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.explanations = explain_queries(self, physical_plan=False)
        return {}


def normalise_reason(reason: str) -> str:
    """A fallback reason without the expression text and type parameters it names."""
    text = reason.removeprefix("fallback: ")
    text = re.sub(r"^(converting .*?) in .*$", r"\1", text)  # "converting A to B in <expression>"
    text = re.sub(r"(has no Spark form yet) \(.*\)$", r"\1", text)  # "... (<expression>)"
    text = re.sub(r"\b(STRUCT|ARRAY|MAP)<.*>", r"\1", text)  # the element and field types
    return re.sub(r"\((\d+), ?(\d+)\)", "", text)  # DECIMAL(4, 2) -> DECIMAL


@dataclass
class NativeReport:
    """Counts over every explained query."""

    cases: int = 0
    explained: int = 0
    not_explained: int = 0
    steps: Counter[tuple[str, str]] = field(default_factory=Counter)  # (step type, how)
    expressions: Counter[str] = field(default_factory=Counter)  # native / fallback
    reasons: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, case_id: str, queries: Sequence[QueryExplanation]) -> None:
        for query in queries:
            for step in query.steps:
                self.steps[(step.step_type, _how(step.expressions, step.native))] += 1
                for e in step.expressions:
                    if e.how == "native":
                        self.expressions["native"] += 1
                        continue
                    self.expressions["fallback"] += 1
                    if e.how.startswith(f"fallback: {_STEP_WIDE}"):
                        continue  # counted under the expression that made the step fall back
                    reason = normalise_reason(e.how)
                    self.reasons[reason] += 1
                    self.examples.setdefault(reason, f"{case_id}: {e.name} = {e.sql}")
                if not step.native:
                    reason = f"{step.step_type}: no native step version yet"
                    self.reasons[reason] += 1
                    self.examples.setdefault(reason, case_id)

    def to_json(self) -> dict[str, Any]:
        step_types = sorted({t for t, _ in self.steps})
        return {
            "cases": self.cases,
            "explained": self.explained,
            "not_explained": self.not_explained,
            "steps": {t: {how: n for (st, how), n in self.steps.items() if st == t} for t in step_types},
            "expressions": dict(self.expressions),
            "reasons": [
                {"reason": r, "count": n, "example": self.examples.get(r, "")} for r, n in self.reasons.most_common()
            ],
        }


def _how(expressions: Iterable[Any], native_step: bool) -> str:
    if not native_step:
        return "python"
    hows = [e.how == "native" for e in expressions]
    if all(hows):
        return "native"
    return "partly native" if any(hows) else "python"


def build_report(
    files: Sequence[QttFile], *, properties: Mapping[str, str] | None = None, progress: bool = False
) -> NativeReport:
    """Explain every case of ``files`` with the native step versions (``progress``: a bar on stderr)."""
    report = NativeReport()
    bar = Progress(
        TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), console=Console(file=sys.stderr), disable=not progress, transient=True,
    )
    with bar:
        task = bar.add_task("explaining", total=sum(len(f.cases) for f in files))
        for f in files:
            for case in f.cases:
                bar.update(task, description=case.id[:60])
                _explain_case(report, f, case, properties)
                bar.advance(task)
    return report


def _explain_case(report: NativeReport, f: QttFile, case: Any, properties: Mapping[str, str] | None) -> None:
    report.cases += 1
    made: list[_ExplainingEngine] = []

    def factory(props: Mapping[str, Any]) -> _ExplainingEngine:
        engine = _ExplainingEngine({**props, **(properties or {}), NATIVE_STEPS: "true"})
        made.append(engine)
        return engine

    run_case(case, file=f.display_name, engine_factory=factory)
    explanations = made[0].explanations if made else None
    if explanations is None:
        report.not_explained += 1
        return
    report.explained += 1
    report.add(case.id, explanations)


def format_report(report: NativeReport, *, top: int = 20) -> str:
    lines = [
        f"{report.cases} cases: {report.explained} explained, {report.not_explained} stopped before their "
        "queries existed (expected errors)",
    ]
    total_steps = sum(report.steps.values())
    native_steps = sum(n for (_, how), n in report.steps.items() if how == "native")
    partly = sum(n for (_, how), n in report.steps.items() if how == "partly native")
    if total_steps:
        lines.append(
            f"steps: {total_steps}; native {native_steps} ({100 * native_steps / total_steps:.1f}%), "
            f"partly native {partly} ({100 * partly / total_steps:.1f}%)"
        )
    total_expr = sum(report.expressions.values())
    if total_expr:
        lines.append(
            f"expressions and columns of native step versions: {total_expr}; native "
            f"{report.expressions['native']} ({100 * report.expressions['native'] / total_expr:.1f}%)"
        )
    lines.append("")
    lines.append(f"{'step type':32} {'native':>7} {'partly':>7} {'python':>7}")
    for t in sorted({t for t, _ in report.steps}, key=lambda t: -sum(n for (s, _), n in report.steps.items() if s == t)):
        counts = [report.steps.get((t, how), 0) for how in ("native", "partly native", "python")]
        lines.append(f"{t:32} {counts[0]:>7} {counts[1]:>7} {counts[2]:>7}")
    if top and report.reasons:
        lines.append("")
        lines.append(f"what runs in Python, most frequent first (top {top}):")
        for reason, n in report.reasons.most_common(top):
            lines.append(f"{n:>6}  {reason}")
            lines.append(f"        e.g. {report.examples.get(reason, '')}")
    return "\n".join(lines) + "\n"


def write_report(report: NativeReport, path: str) -> None:
    Path(path).write_text(json.dumps(report.to_json(), indent=2) + "\n")
