"""Up to date: the plan the engine builds now for a case equals its latest saved plan."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import KsqlError
from qtt.model import QttCase
from qtt.plans import codec
from qtt.plans.diff import LOAD, Change, plan_changes, render_changes, strip_statement_text
from qtt.plans.layout import (
    PLAN_FILE,
    SPEC_FILE,
    STREAMING_DIR,
    SavedVersion,
    case_slug,
    latest_version,
)
from qtt.plans.record import STEPS_KEY, plan_case

MISSING = "missing"
STALE = "stale"
INCOMPLETE = "incomplete"
CURRENT = "current"


@dataclass(frozen=True, slots=True)
class UpToDateResult:
    """Whether a case's latest saved plan matches what the engine plans now."""

    case_id: str
    state: str
    latest: SavedVersion | None = None
    changes: tuple[Change, ...] = ()

    @property
    def ok(self) -> bool:
        return self.state == CURRENT

    def render(self) -> str:
        """Why the case is not up to date, the changes by step, and the command that fixes it."""
        if self.state == MISSING:
            head = f"Case '{self.case_id}' has no planned case."
        elif self.state == STALE:
            where = self.latest.name if self.latest else "?"
            head = (
                f"The plan of case '{self.case_id}' differs from its latest planned case {where}:"
            )
        elif self.state == INCOMPLETE:
            where = self.latest.name if self.latest else "?"
            head = (
                f"The latest planned case {where} of case '{self.case_id}' was recorded before "
                f"planned cases kept streaming plans ({STREAMING_DIR}/) and per-step built "
                "schemas (spec.json schemas.steps): its queries are not fully guarded."
            )
        else:
            return f"Case '{self.case_id}' is up to date."
        body = render_changes(self.changes)
        return "\n".join(
            p
            for p in (head, body, f"Write a new planned case with: {fix_command(self.case_id)}")
            if p
        )


def fix_command(case_id: str | None = None) -> str:
    """The command that writes new planned cases (for one case, or all)."""
    if case_id is None:
        return "qtt plans regenerate"
    return f"qtt plans regenerate --filter {shlex.quote(case_id)}"


def _reloaded(plans: list[Any]) -> list[Any]:
    """Saved plans as the current serde reads and writes them.

    An optional field added since (the one allowed in-place change) then shows with its
    default, so it does not count as a difference. Plans that no longer load are compared
    as saved (and replay reports why they do not load).
    """
    from engine.plan.serde import statement_plan_from_json, to_json_value

    try:
        return [json.loads(json.dumps(to_json_value(statement_plan_from_json(p)))) for p in plans]
    except (KsqlError, TypeError, ValueError):
        return plans


def check_up_to_date(case: QttCase, root: Path) -> UpToDateResult:
    """Compare the plans the engine builds now for ``case`` with its latest saved version."""
    latest = latest_version(root / case_slug(case.id))
    if latest is None:
        return UpToDateResult(case.id, MISSING)
    try:
        engine, now, _ = plan_case(case)
        engine.close()
    except KsqlError as exc:
        change = Change(
            LOAD, detail=f"The engine cannot plan the case now: {type(exc).__name__}: {exc}"
        )
        return UpToDateResult(case.id, STALE, latest, (change,))
    try:
        saved = codec.read_json(latest.path / PLAN_FILE)
        saved_plans = saved["plans"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        change = Change(LOAD, detail=f"Cannot read {latest.path / PLAN_FILE}: {exc}")
        return UpToDateResult(case.id, STALE, latest, (change,))
    old = strip_statement_text(_reloaded(saved_plans))
    new = strip_statement_text(now)
    if codec.dumps(old) == codec.dumps(new):
        has_queries = any(isinstance(p, dict) and p.get("query") for p in saved_plans)
        if has_queries and not (
            (latest.path / STREAMING_DIR).is_dir() and _has_step_schemas(latest)
        ):
            return UpToDateResult(case.id, INCOMPLETE, latest)
        return UpToDateResult(case.id, CURRENT, latest)
    changes = plan_changes(old, new) or [Change(LOAD, detail="plans differ")]
    return UpToDateResult(case.id, STALE, latest, tuple(changes))


def _has_step_schemas(version: SavedVersion) -> bool:
    """Whether a saved version's spec.json keeps every step's built schema."""
    try:
        spec = codec.read_json(version.path / SPEC_FILE)
        return STEPS_KEY in spec["schemas"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
