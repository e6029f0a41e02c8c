"""``kspark explain``: per step of each persistent query, how its expressions run.

For every query the statements create, the steps are listed inputs first with their wire
names; the native step versions (``engine.builders.native``) list each expression with
``native`` or ``fallback: <reason>`` (evaluated in Python, the reason naming the first part
of the expression that has no exact Spark form); the native sources and sinks
(``engine.builders.native_io``) list each key and value column the same way. Other step versions run their expressions
in Python and say so. Building the query is lazy: no Spark job runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.builders.context import BuildContext, Built
from engine.builders.native import ExpressionReport, collecting_reports
from engine.builders.walker import BuildObserver, build, observing_builds
from engine.facade.engine import KsqlEngine, physical_plan_text
from engine.plan.steps import Step
from engine.plan.steps_native import IO_STEP_TYPES


@dataclass(frozen=True)
class StepExplanation:
    """One step: its context id, wire name, and its expressions' reports (native steps)."""

    ctx: str
    step_type: str
    expressions: tuple[ExpressionReport, ...]
    native: bool


@dataclass(frozen=True)
class QueryExplanation:
    """One persistent query: its id, its steps inputs first, and Spark's physical plan."""

    query_id: str
    steps: tuple[StepExplanation, ...]
    physical_plan: str


def explain_queries(engine: KsqlEngine, *, physical_plan: bool = True) -> list[QueryExplanation]:
    """Explain every persistent query ``engine`` holds, in run order (builds, runs nothing).

    ``physical_plan=False`` skips Spark's planning (the explanations' plans are empty).
    """
    out = []
    runtime = engine.runtime()
    for query in engine.query_order():
        ctx = BuildContext(runtime=runtime, query_id=query.query_id, config=engine.config,
                           registry_url=engine.schema_registry_url)
        order: list[Step] = []
        with collecting_reports() as reports, observing_builds(_appender(order)):
            built = build(query.root, ctx)
        steps = []
        for step in order:
            mine = tuple(r for r in reports if r.step_ctx == step.ctx and r.step_type == step.TYPE)
            steps.append(StepExplanation(step.ctx, step.TYPE, mine, native=bool(mine)))
        plan = physical_plan_text(built.df) if physical_plan else ""
        out.append(QueryExplanation(query.query_id, tuple(steps), plan))
    return out


def _appender(order: list[Step]) -> BuildObserver:
    def seen(step: Step, _ctx: BuildContext, _built: Built) -> None:
        order.append(step)

    return seen


def format_explanations(queries: list[QueryExplanation], *, physical: bool = False) -> str:
    """The text ``kspark explain`` prints."""
    lines: list[str] = []
    for q in queries:
        lines.append(f"Query {q.query_id}")
        for s in q.steps:
            if s.native:
                native = sum(1 for e in s.expressions if e.how == "native")
                what = "columns" if s.step_type in IO_STEP_TYPES else "expressions"
                lines.append(f"  {s.ctx} ({s.step_type}): {native} of {len(s.expressions)} {what} native")
                for e in s.expressions:
                    lines.append(f"    {e.name}: {e.sql} -> {e.how}")
            else:
                lines.append(f"  {s.ctx} ({s.step_type}): runs in Python")
        if physical:
            lines.append("  Physical plan:")
            lines.extend(f"    {line}" for line in q.physical_plan.splitlines())
    if not queries:
        lines.append("No persistent query: explain lists the queries of CREATE ... AS SELECT and INSERT INTO.")
    return "\n".join(lines) + "\n"
