"""Semantic diffs keyed by step: which query, which step (its ``ctx``), which field, and
whether the plan, an internal schema, the physical plan or the output records changed."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from deepdiff import DeepDiff

from engine.plan.serde import TYPE_KEY

PLAN = "plan"
INTERNAL_SCHEMA = "internal schema"
SOURCE_SCHEMA = "source schema"
BUILT_SCHEMA = "built schema"
SINK_SCHEMA = "sink schema"
PHYSICAL_PLAN = "physical plan"
STREAMING_PLAN = "streaming plan"
OUTPUT = "output records"
LOAD = "load"
ERROR = "replay error"


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between a saved planned case and what the engine does now."""

    area: str
    query_id: str | None = None
    ctx: str | None = None
    field: str | None = None
    old: Any = None
    new: Any = None
    detail: str = ""

    def where(self) -> str:
        """``CSAS_X_0 / Project / selectExpressions[0].expression.op``."""
        return " / ".join(p for p in (self.query_id, self.ctx, self.field) if p) or "-"

    def render(self) -> str:
        """One readable line (plus the detail block, if any)."""
        text = f"[{self.area}] {self.where()}"
        if self.old is not None or self.new is not None:
            text += f": {_short(self.old)} -> {_short(self.new)}"
        if self.detail:
            text += "\n" + "\n".join("    " + line for line in self.detail.splitlines())
        return text


def render_changes(changes: Iterable[Change]) -> str:
    """All changes, one per line, in the order found."""
    return "\n".join(c.render() for c in changes)


def _short(value: Any, limit: int = 100) -> str:
    text = "<absent>" if value is _ABSENT else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()


# ---------------------------------------------------------------------------- plans


def step_index(root: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The steps of a serialised step tree by ctx; input steps replaced by ``{"@input": ctx}``."""
    out: dict[str, dict[str, Any]] = {}

    def visit(node: Mapping[str, Any]) -> str:
        flat: dict[str, Any] = {}
        for key, value in node.items():
            if isinstance(value, Mapping) and TYPE_KEY in value and "ctx" in value:
                flat[key] = {"@input": visit(value)}
            else:
                flat[key] = value
        ctx = str(node.get("ctx"))
        if ctx in out and out[ctx] != flat:
            ctx = f"{ctx}#{len(out)}"
        out[ctx] = flat
        return ctx

    visit(root)
    return out


def strip_statement_text(plans: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Statement plans without their SQL text (the text is not part of plan equality)."""
    return [{k: v for k, v in p.items() if k != "statementText"} for p in plans]


def plan_changes(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]
) -> list[Change]:
    """Differences between two lists of serialised statement plans, keyed by query and step."""
    changes: list[Change] = []
    old_q = _queries(old)
    new_q = _queries(new)
    for qid in sorted(set(old_q) - set(new_q)):
        changes.append(Change(PLAN, qid, detail="query is gone from the new plan"))
    for qid in sorted(set(new_q) - set(old_q)):
        changes.append(Change(PLAN, qid, detail="query is new in the new plan"))
    for qid in [q for q in old_q if q in new_q]:
        o, n = old_q[qid], new_q[qid]
        for key in sorted(set(o) | set(n)):
            if key != "root":
                changes += _field_changes(
                    PLAN, qid, "query", o.get(key, _ABSENT), n.get(key, _ABSENT), key
                )
        changes += step_changes(qid, o.get("root", {}), n.get("root", {}))
    old_c = _commands(old)
    new_c = _commands(new)
    for name in sorted(set(old_c) | set(new_c)):
        changes += _field_changes(
            PLAN, None, f"command {name}", old_c.get(name, _ABSENT), new_c.get(name, _ABSENT), ""
        )
    if len(old) != len(new):
        changes.append(
            Change(PLAN, field="statements", old=len(old), new=len(new), detail="statement count")
        )
    for i, (old_plan, new_plan) in enumerate(zip(old, new, strict=False)):
        if old_plan.get("config") != new_plan.get("config"):
            changes.append(
                Change(
                    PLAN, field=f"statement[{i}].config", old=old_plan.get("config"), new=new_plan.get("config")
                )
            )
    return changes


def step_changes(
    query_id: str, old_root: Mapping[str, Any], new_root: Mapping[str, Any]
) -> list[Change]:
    """Differences between two step trees of one query, by step ctx and field."""
    old = step_index(old_root)
    new = step_index(new_root)
    changes: list[Change] = []
    for ctx in old:
        if ctx not in new:
            changes.append(
                Change(PLAN, query_id, ctx, old=old[ctx].get(TYPE_KEY), detail="step removed")
            )
    for ctx in new:
        if ctx not in old:
            changes.append(
                Change(PLAN, query_id, ctx, new=new[ctx].get(TYPE_KEY), detail="step added")
            )
        else:
            changes += _field_changes(PLAN, query_id, ctx, old[ctx], new[ctx], "")
    return changes


def _field_changes(
    area: str, query_id: str | None, ctx: str, old: Any, new: Any, prefix: str
) -> list[Change]:
    if old is _ABSENT or new is _ABSENT:
        return [] if old is new else [Change(area, query_id, ctx, prefix or None, old, new)]
    diff = DeepDiff(old, new, view="tree")
    out: list[Change] = []
    for levels in diff.values():
        for level in levels:
            path = _path_text(
                [prefix, *level.path(output_format="list")]
                if prefix
                else level.path(output_format="list")
            )
            t1 = _ABSENT if type(level.t1).__name__ == "NotPresent" else level.t1
            t2 = _ABSENT if type(level.t2).__name__ == "NotPresent" else level.t2
            out.append(Change(area, query_id, ctx, path or None, t1, t2))
    return sorted(out, key=lambda c: c.field or "")


def _path_text(parts: Sequence[Any]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


def _queries(plans: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        str(p["query"]["queryId"]): dict(p["query"])
        for p in plans
        if isinstance(p.get("query"), Mapping)
    }


def _commands(plans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, p in enumerate(plans):
        command = p.get("command")
        if isinstance(command, Mapping):
            out[f"#{i} {command.get('name')}"] = dict(command)
    return out


# ---------------------------------------------------------------------------- other areas


def mapping_changes(
    area: str, old: Mapping[str, Any], new: Mapping[str, Any], query_id: str | None = None
) -> list[Change]:
    """Differences between two name -> description maps (internal or source schemas)."""
    changes: list[Change] = []
    for name in sorted(set(old) | set(new)):
        o, n = old.get(name, _ABSENT), new.get(name, _ABSENT)
        if o != n:
            changes += _field_changes(area, query_id, name, o, n, "")
    return changes


_OPERATOR = re.compile(r"MapInArrow (\w+)\(")


def physical_plan_changes(query_id: str, old: str, new: str, kind: str = PHYSICAL_PLAN) -> list[Change]:
    """A unified diff of two normalised plans (physical, or ``kind``), attributed to the step
    ctx it touches."""
    if old == new:
        return []
    lines = list(
        difflib.unified_diff(old.splitlines(), new.splitlines(), "saved", "now", lineterm="", n=1)
    )
    touched = []
    for line in lines:
        if line[:1] in "+-" and not line.startswith(("+++", "---")):
            match = _OPERATOR.search(line)
            if match and match.group(1).replace("_", "/") not in touched:
                touched.append(match.group(1).replace("_", "/"))
    ctx = ", ".join(touched) or None
    return [Change(kind, query_id, ctx, detail="\n".join(lines))]


# ---------------------------------------------------------------------------- built schemas

_COLUMN = re.compile(r"^`((?:[^`]|``)*)` (.*)$", re.DOTALL)


def _split_column(text: str) -> tuple[str, str]:
    """```NAME` TYPE`` -> (NAME, TYPE); text of another shape is its own name."""
    match = _COLUMN.match(text)
    if match is None:
        return text, ""
    return match.group(1).replace("``", "`"), match.group(2)


def column_changes(
    area: str, query_id: str | None, ctx: str, part: str, old: Sequence[str], new: Sequence[str]
) -> list[Change]:
    """Differences between two ordered column lists (``part`` is ``key`` or ``value``).

    A column whose type changed, a column removed or added, then columns in another order,
    each named by the column.
    """
    old_cols = [_split_column(c) for c in old]
    new_cols = [_split_column(c) for c in new]
    old_types, new_types = dict(old_cols), dict(new_cols)
    changes: list[Change] = []
    for name, old_type in old_cols:
        where = f"{part} column `{name}`"
        if name not in new_types:
            changes.append(Change(area, query_id, ctx, where, old_type, _ABSENT, "column removed"))
        elif new_types[name] != old_type:
            changes.append(Change(area, query_id, ctx, where, old_type, new_types[name], "type changed"))
    for name, new_type in new_cols:
        if name not in old_types:
            changes.append(
                Change(area, query_id, ctx, f"{part} column `{name}`", _ABSENT, new_type, "column added")
            )
    old_order = [n for n, _ in old_cols if n in new_types]
    new_order = [n for n, _ in new_cols if n in old_types]
    if old_order != new_order:
        changes.append(
            Change(area, query_id, ctx, f"{part} column order", old_order, new_order, "columns reordered")
        )
    return changes


def step_schema_changes(
    area: str,
    query_id: str | None,
    ctx: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    *,
    fields: Sequence[str] = ("step", "kind", "window"),
    internal: bool = True,
) -> list[Change]:
    """Differences between two step schemas (see ``qtt.plans.built.step_schema``)."""
    changes: list[Change] = []
    for name in fields:
        if old.get(name) != new.get(name):
            changes.append(Change(area, query_id, ctx, name, old.get(name), new.get(name)))
    for part in ("key", "value"):
        changes += column_changes(
            area, query_id, ctx, part, old.get(part) or [], new.get(part) or []
        )
    if internal:
        old_internal = old.get("internal") or {}
        new_internal = new.get("internal") or {}
        for name in sorted(set(old_internal) | set(new_internal)):
            o, n = old_internal.get(name, _ABSENT), new_internal.get(name, _ABSENT)
            if o != n:
                changes.append(Change(area, query_id, ctx, f"internal {name}", o, n))
    return changes


def _by_ctx(steps: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Step schemas by ctx; a ctx seen again gets ``#2``, ``#3``... in build order."""
    out: dict[str, Mapping[str, Any]] = {}
    for step in steps:
        ctx = str(step.get("ctx"))
        key, n = ctx, 1
        while key in out:
            n += 1
            key = f"{ctx}#{n}"
        out[key] = step
    return out


def built_schema_changes(
    query_id: str, saved: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]]
) -> list[Change]:
    """Differences between the saved and the now-built schemas of one query's steps, by ctx."""
    old, new = _by_ctx(saved), _by_ctx(now)
    changes: list[Change] = []
    for ctx, step in old.items():
        if ctx not in new:
            changes.append(
                Change(BUILT_SCHEMA, query_id, ctx, old=step.get("step"), new=_ABSENT,
                       detail="step saved but not built now")
            )
    for ctx, step in new.items():
        if ctx not in old:
            changes.append(
                Change(BUILT_SCHEMA, query_id, ctx, old=_ABSENT, new=step.get("step"),
                       detail="step built now but not saved")
            )
        else:
            changes += step_schema_changes(BUILT_SCHEMA, query_id, ctx, old[ctx], step)
    return changes
