"""Completeness: every registered step version and every expression operator the evaluator
implements is exercised by at least one planned case.

An operator is an expression node kind with the variant that changes what the evaluator
does: ``arithmetic %``, ``comparison IS DISTINCT FROM``, ``logical OR``, ``in NOT``,
``like ESCAPE``, ``case simple``, ``call table`` (a function call by its function kind)...
The list is derived from the expression classes (their ``OPS``, ``negated``, ``escape`` and
``operand`` fields) and the evaluator's node methods, so a new node or variant shows up as
uncovered until a case uses it.

A step version or operator that no case can use yet is listed in ``NOT_YET_COVERABLE`` /
``OPERATORS_NOT_YET_COVERABLE`` with the reason; an entry fails the check as soon as it is
stale (it gained a planned case, or is no longer implemented), so the lists only shrink.
Which registered functions appear in a planned case is reported too, without failing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.plan.serde import TYPE_KEY
from engine.plan.steps import STEP_TYPES

# Step wire name -> why no planned case can use it yet. Keep this the only allow-list; an
# entry must name the reason, and the check fails as soon as the entry is stale.
NOT_YET_COVERABLE: dict[str, str] = {
    # Imported-only step versions (engine/plan/steps_ksqldb.py): kspark's planner never
    # produces them, so no QTT case of tests/qtt_cases can plan them. Their behaviour is
    # pinned by tests/engine/ksqldb_import (the project's own small ksqlDB plans) and
    # measured by `qtt plans replay-ksqldb`; an entry goes once an imported planned case exists.
    "streamGroupByJoinedKeyV1": (
        "imported only (ksqlDB 5.5/6.0 streamGroupByV1 with several expressions); the planner "
        "never produces it; pinned by tests/engine/ksqldb_import"
    ),
    "tableGroupByJoinedKeyV1": (
        "imported only (ksqlDB 5.5/6.0 tableGroupByV1 with several expressions); the planner "
        "never produces it; pinned by tests/engine/ksqldb_import"
    ),
    "tableAggregateTwoUpdatesV1": (
        "imported only (ksqlDB 7.4 and earlier ran tableAggregateV1 before Kafka Streams' "
        "KIP-904); the planner never produces it; pinned by tests/engine/ksqldb_import"
    ),
}

# Operator name (see ``operators_in``) -> why no planned case can use it yet. Same rules.
OPERATORS_NOT_YET_COVERABLE: dict[str, str] = {}

# Sub-nodes that only exist inside their parent (evaluated by the parent's method).
_PARTS = frozenset({"when", "mapEntry", "structField"})
# Logical has no OPS attribute: the evaluator's _Logical knows AND and, otherwise, OR.
_LOGICAL_OPS = ("AND", "OR")


@dataclass(frozen=True, slots=True)
class Completeness:
    """Which step versions (or operators) are covered, missing, allowed to be missing, or stale
    allow-list entries; ``operators`` holds the same for expression operators."""

    covered: frozenset[str]
    missing: tuple[str, ...]
    allowed: tuple[str, ...]
    stale_allowances: tuple[str, ...]
    registered: frozenset[str] = frozenset()
    reasons: Mapping[str, str] = field(default_factory=dict)
    what: str = "Step version"
    allow_list: str = "NOT_YET_COVERABLE"
    operators: Completeness | None = None
    functions: FunctionCoverage | None = None

    @property
    def ok(self) -> bool:
        own = not self.missing and not self.stale_allowances
        return own and (self.operators is None or self.operators.ok)

    def render(self) -> str:
        """Readable problems (empty when complete)."""
        lines = []
        for name in self.missing:
            lines.append(
                f"{self.what} '{name}' has no planned case: write a QTT case in tests/qtt_cases "
                "that uses it, then run `qtt plans regenerate --filter '<case id>'`."
            )
        for name in self.stale_allowances:
            lines.append(
                f"{self.what} '{name}' is listed in {self.allow_list} "
                "(qtt/plans/completeness.py) but is covered or no longer implemented: "
                "remove the entry."
            )
        if self.operators is not None and self.operators.render():
            lines.append(self.operators.render())
        return "\n".join(lines)

    def summary(self) -> str:
        """``23 of 23 step versions covered``, naming what is not covered (and why, if allowed)."""
        kind = self.what.lower() + "s"
        text = f"{len(self.covered)} of {len(self.registered)} {kind} covered by planned cases"
        gaps = [f"{n} (missing)" for n in self.missing]
        gaps += [f"{n} (allowed: {self.reasons.get(n, '')})" for n in self.allowed]
        if gaps:
            text += "; not covered: " + ", ".join(gaps)
        lines = [text]
        if self.operators is not None:
            lines.append(self.operators.summary())
        if self.functions is not None:
            lines.append(self.functions.summary())
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The JSON form of the coverage, for ``qtt plans verify --report``."""
        out: dict[str, Any] = {
            "ok": self.ok,
            "registered": sorted(self.registered),
            "covered": sorted(self.covered),
            "missing": list(self.missing),
            "allowed": {n: self.reasons.get(n, "") for n in self.allowed},
            "staleAllowances": list(self.stale_allowances),
        }
        if self.operators is not None:
            out["operators"] = self.operators.to_json()
        if self.functions is not None:
            out["functions"] = self.functions.to_json()
        return out


@dataclass(frozen=True, slots=True)
class FunctionCoverage:
    """Registered functions (by name) that appear, or not, in a planned case. Informational."""

    covered: frozenset[str]
    registered: frozenset[str]

    @property
    def uncovered(self) -> list[str]:
        return sorted(self.registered - self.covered)

    def summary(self) -> str:
        return (
            f"{len(self.covered & self.registered)} of {len(self.registered)} registered functions "
            "appear in a planned case (the uncovered ones are listed in the JSON report)"
        )

    def to_json(self) -> dict[str, Any]:
        return {"covered": sorted(self.covered & self.registered), "uncovered": self.uncovered}


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
    *,
    operators_used: Iterable[str] | None = None,
    functions_used: Iterable[str] | None = None,
) -> Completeness:
    """Compare step versions used by planned cases with the registered ones.

    With ``operators_used`` (see ``operators_in``), also compare the expression operators
    with the ones the evaluator implements; with ``functions_used``, report function coverage.
    """
    registered_set = set(STEP_TYPES if registered is None else registered)
    steps = _compare(used, registered_set, NOT_YET_COVERABLE if allowed is None else allowed)
    if operators_used is not None:
        operators = _compare(
            operators_used, set(evaluator_operators()), OPERATORS_NOT_YET_COVERABLE
        )
        steps = dataclasses.replace(
            steps,
            operators=dataclasses.replace(
                operators, what="Expression operator", allow_list="OPERATORS_NOT_YET_COVERABLE"
            ),
        )
    if functions_used is not None:
        from engine.functions import REGISTRY

        names = frozenset(n.upper() for n in functions_used)
        steps = dataclasses.replace(
            steps, functions=FunctionCoverage(names, frozenset(REGISTRY.names()))
        )
    return steps


def _compare(used: Iterable[str], registered: set[str], allow: Mapping[str, str]) -> Completeness:
    covered = frozenset(set(used) & registered)
    missing = sorted(registered - covered - set(allow))
    allowed_missing = sorted((registered - covered) & set(allow))
    stale = sorted(w for w in allow if w in covered or w not in registered)
    return Completeness(
        covered, tuple(missing), tuple(allowed_missing), tuple(stale),
        registered=frozenset(registered), reasons=dict(allow),
    )


# ----------------------------------------------------------------------------- operators


def evaluator_operators() -> frozenset[str]:
    """Every operator the expression evaluator implements (names as ``operators_in`` gives)."""
    from engine.expressions.evaluator import _Compiler
    from engine.functions import FunctionKind
    from engine.plan import expr as E

    out: set[str] = set()
    for kind, cls in E._KINDS.items():
        if kind in _PARTS or not hasattr(_Compiler, f"_{cls.__name__}"):
            continue
        out.add(kind)
        names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        ops = _LOGICAL_OPS if cls is E.Logical else getattr(cls, "OPS", ())
        out.update(f"{kind} {op}" for op in ops)
        if "negated" in names:
            out.add(f"{kind} NOT")
        if "escape" in names:
            out.add(f"{kind} ESCAPE")
        if cls is E.Case:
            out.update({"case simple", "case searched"})
        if cls is E.FunctionCall:
            out.update(f"call {k.value}" for k in FunctionKind)
    return frozenset(out)


def operators_in(plans: Iterable[Any]) -> set[str]:
    """Every expression operator used anywhere in serialised plans (see the module docstring)."""
    from engine.functions import REGISTRY
    from engine.plan import expr as E

    found: set[str] = set()
    for node in _mappings(list(plans)):
        kind = node.get("kind")
        if not isinstance(kind, str) or kind not in E._KINDS or kind in _PARTS:
            continue
        found.add(kind)
        if isinstance(node.get("op"), str):
            found.add(f"{kind} {node['op']}")
        if node.get("negated") is True:
            found.add(f"{kind} NOT")
        if node.get("escape") is not None and "escape" in node:
            found.add(f"{kind} ESCAPE")
        if kind == "case":
            found.add("case searched" if node.get("operand") is None else "case simple")
        if kind == "call" and isinstance(node.get("name"), str):
            function_kind = REGISTRY.kind_of(node["name"])
            if function_kind is not None:
                found.add(f"call {function_kind.value}")
    return found


def functions_in(plans: Iterable[Any]) -> set[str]:
    """Every function name called anywhere in serialised plans (upper case)."""
    return {
        str(node["name"]).upper()
        for node in _mappings(list(plans))
        if node.get("kind") == "call" and isinstance(node.get("name"), str)
    }


def _mappings(node: Any) -> Iterable[Mapping[str, Any]]:
    """Every JSON object inside ``node``, depth first."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
