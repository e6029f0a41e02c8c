"""Completeness: every registered step version has at least one planned case.

A step version that no case can use yet is listed in ``NOT_YET_COVERABLE`` with the reason;
an entry fails the check as soon as it is stale (the step gained a planned case, or is no
longer registered), so the list only ever shrinks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.plan.serde import TYPE_KEY
from engine.plan.steps import STEP_TYPES

# Step wire name -> why no planned case can use it yet. Keep this the only allow-list; an
# entry must name the reason, and the check fails as soon as the entry is stale.
NOT_YET_COVERABLE: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class Completeness:
    """Which step versions are covered, missing, allowed to be missing, or stale entries."""

    covered: frozenset[str]
    missing: tuple[str, ...]
    allowed: tuple[str, ...]
    stale_allowances: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.missing and not self.stale_allowances

    def render(self) -> str:
        """Readable problems (empty when complete)."""
        lines = []
        for wire in self.missing:
            lines.append(
                f"Step version '{wire}' has no planned case: write a QTT case in tests/qtt_cases "
                "that uses it, then run `qtt plans regenerate`."
            )
        for wire in self.stale_allowances:
            lines.append(
                f"Step version '{wire}' is listed in NOT_YET_COVERABLE "
                "(qtt/plans/completeness.py) but is covered or no longer registered: remove the entry."
            )
        return "\n".join(lines)


def step_types_in(plans: Iterable[Any]) -> set[str]:
    """Every step wire name used anywhere in serialised plans."""
    found: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, Mapping):
            wire = node.get(TYPE_KEY)
            if isinstance(wire, str) and "ctx" in node:
                found.add(wire)
            for value in node.values():
                visit(value)
        elif isinstance(node, list | tuple):
            for value in node:
                visit(value)

    visit(list(plans))
    return found


def check_completeness(
    used: Iterable[str],
    registered: Iterable[str] | None = None,
    allowed: Mapping[str, str] | None = None,
) -> Completeness:
    """Compare step versions used by planned cases with the registered ones."""
    registered_set = set(STEP_TYPES if registered is None else registered)
    allow = NOT_YET_COVERABLE if allowed is None else allowed
    covered = frozenset(set(used) & registered_set)
    missing = sorted(registered_set - covered - set(allow))
    allowed_missing = sorted((registered_set - covered) & set(allow))
    stale = sorted(w for w in allow if w in covered or w not in registered_set)
    return Completeness(covered, tuple(missing), tuple(allowed_missing), tuple(stale))
