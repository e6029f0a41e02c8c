"""HTML report: the plan DAG of each saved planned case next to the one built now, changes marked.

``python -m qtt.plans.html [ROOT] [OUT]`` writes one self-contained file (inline SVG, no
network fetches) with a section per case whose latest plan differs from the current one (or
every case with ``--all``). Under the DAGs, every changed step (and changed query field or
source command) gets a table of its fields, saved beside now, the changed ones marked:
expressions are printed as SQL, schemas as column lists, inputs by their step ctx, so a
reviewer judges a plan change without reading JSON.
"""

from __future__ import annotations

import html
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.errors import KsqlError
from engine.plan.serde import TYPE_KEY
from qtt.plans import codec
from qtt.plans.diff import Change, plan_changes, step_index, strip_statement_text
from qtt.plans.layout import DEFAULT_ROOT, PLAN_FILE, case_slug, latest_version
from qtt.plans.record import plan_case
from qtt.plans.verify import DEFAULT_CASES, current_cases

_BOX_W, _BOX_H, _GAP = 230, 44, 26


def dag_svg(plans: list[dict[str, Any]], changed: set[tuple[str, str]]) -> str:
    """An SVG column per query: its steps from source (top) to sink, changed steps in red."""
    columns = []
    for plan in plans:
        query = plan.get("query")
        if isinstance(query, dict):
            columns.append((str(query.get("queryId")), step_index(query.get("root", {}))))
    width = max(1, len(columns)) * (_BOX_W + 40)
    height = max([len(s) for _, s in columns] + [1]) * (_BOX_H + _GAP) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">']
    for col, (qid, steps) in enumerate(columns):
        x = 20 + col * (_BOX_W + 40)
        parts.append(f'<text x="{x}" y="16" font-weight="bold">{html.escape(qid)}</text>')
        for row, (ctx, step) in enumerate(steps.items()):
            y = 28 + row * (_BOX_H + _GAP)
            color = "#f8d0d0" if (qid, ctx) in changed else "#e8eef8"
            parts.append(
                f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="6" '
                f'fill="{color}" stroke="#333"/>'
                f'<text x="{x + 8}" y="{y + 18}">{html.escape(ctx)}</text>'
                f'<text x="{x + 8}" y="{y + 36}" font-size="11">'
                f"{html.escape(str(step.get('@type')))}</text>"
            )
            if row:
                parts.append(
                    f'<line x1="{x + _BOX_W / 2}" y1="{y - _GAP}" x2="{x + _BOX_W / 2}" '
                    f'y2="{y}" stroke="#333"/>'
                )
    parts.append("</svg>")
    return "".join(parts)


# ------------------------------------------------------------------ changed steps, field by field

_ABSENT = object()


def render_value(name: str, value: Any) -> str:
    """One plan field as readable HTML: SQL for expressions, column lists for schemas."""
    if isinstance(value, Mapping):
        if set(value) == {"@input"}:
            return f"input <code>{html.escape(str(value['@input']))}</code>"
        sql = _sql(value)
        if sql is not None:
            return f"<code>{html.escape(sql)}</code>"
        if "expression" in value and isinstance(value.get("alias"), str):
            inner = _sql(value["expression"])
            if inner is not None:
                return f"<code>{html.escape(inner)} AS {html.escape(value['alias'])}</code>"
        rows = "".join(
            f"<li>{html.escape(str(k))}: {render_value(str(k), v)}</li>"
            for k, v in sorted(value.items())
        )
        return f"<ul class='fields'>{rows}</ul>" if rows else "{}"
    if isinstance(value, list | tuple):
        if not value:
            return "(none)"
        items = "".join(f"<li>{render_value(name, v)}</li>" for v in value)
        return f"<ol>{items}</ol>"
    if isinstance(value, str) and name.lower().endswith("schema"):
        columns = _columns(value)
        if columns is not None:
            items = "".join(f"<li><code>{html.escape(c)}</code></li>" for c in columns)
            return f"<ol class='columns'>{items}</ol>"
    if isinstance(value, str):
        return f"<code>{html.escape(value)}</code>"
    return f"<code>{html.escape(json.dumps(value))}</code>"


def _sql(value: Mapping[str, Any]) -> str | None:
    """An expression's SQL, or None when ``value`` is not a serialised expression."""
    from engine.plan import expr as E

    if value.get("kind") not in E._KINDS:
        return None
    try:
        return E.format_sql(E.from_json(dict(value)))
    except (KsqlError, KeyError, TypeError, ValueError):
        return None


def _columns(text: str) -> list[str] | None:
    from engine.plan.schema import LogicalSchema

    try:
        return [str(c) for c in LogicalSchema.parse(text).columns]
    except Exception:  # noqa: BLE001 - not a schema after all: shown as text
        return None


def _field_table(
    title: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, changed: set[str]
) -> str:
    """A table of the fields of one step (or query, or command): saved beside now."""
    old_map: Mapping[str, Any] = old or {}
    new_map: Mapping[str, Any] = new or {}
    names = sorted(set(old_map) | set(new_map), key=lambda n: (n != TYPE_KEY, n))
    rows = []
    for name in names:
        a, b = old_map.get(name, _ABSENT), new_map.get(name, _ABSENT)
        mark = name in changed or a != b
        cells = [
            "<td class='absent'>(absent)</td>" if v is _ABSENT else f"<td>{render_value(name, v)}</td>"
            for v in (a, b)
        ]
        rows.append(
            f"<tr class='{'changed' if mark else 'same'}'><th>{html.escape(name)}</th>{''.join(cells)}</tr>"
        )
    if old is None:
        title += " (step added)"
    elif new is None:
        title += " (step removed)"
    return (
        f"<table class='step'><caption>{html.escape(title)}</caption>"
        "<tr><th>field</th><th>saved</th><th>now</th></tr>" + "".join(rows) + "</table>"
    )


def _queries(plans: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {
        str(p["query"].get("queryId")): p["query"]
        for p in plans
        if isinstance(p.get("query"), Mapping)
    }


def _commands(plans: Sequence[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    return {
        f"command #{i} {p['command'].get('name')}": p["command"]
        for i, p in enumerate(plans)
        if isinstance(p.get("command"), Mapping)
    }


def changed_steps_html(
    old: Sequence[Mapping[str, Any]], new: Sequence[Mapping[str, Any]], changes: Sequence[Change]
) -> str:
    """A field table for every step, query or command that ``changes`` touch, saved beside now."""
    changed: dict[tuple[str | None, str], set[str]] = {}
    for c in changes:
        if c.ctx is not None:
            top = (c.field or "").split(".")[0].split("[")[0]
            changed.setdefault((c.query_id, c.ctx), set()).add(top)
    old_q, new_q = _queries(old), _queries(new)
    old_steps = {q: step_index(v.get("root", {})) for q, v in old_q.items()}
    new_steps = {q: step_index(v.get("root", {})) for q, v in new_q.items()}
    old_c, new_c = _commands(old), _commands(new)
    tables = []
    for (qid, ctx), fields in changed.items():
        if qid is None:
            tables.append(_field_table(ctx, old_c.get(ctx), new_c.get(ctx), fields))
        elif ctx == "query":
            strip = lambda q: None if q is None else {k: v for k, v in q.items() if k != "root"}  # noqa: E731
            tables.append(_field_table(f"{qid} / query", strip(old_q.get(qid)), strip(new_q.get(qid)), fields))
        else:
            tables.append(
                _field_table(
                    f"{qid} / {ctx}",
                    old_steps.get(qid, {}).get(ctx),
                    new_steps.get(qid, {}).get(ctx),
                    fields,
                )
            )
    return "".join(tables)


def case_section(
    case_id: str, saved: str, old: list[dict[str, Any]], new: list[dict[str, Any]]
) -> tuple[str, bool]:
    """The HTML section of one case and whether its saved plan differs from the one built now."""
    old, new = strip_statement_text(old), strip_statement_text(new)
    changes = plan_changes(old, new)
    marked = {(c.query_id or "", c.ctx or "") for c in changes}
    rows = "".join(f"<li>{html.escape(c.render())}</li>" for c in changes)
    section = (
        f"<section><h2>{html.escape(case_id)}</h2><ul>{rows}</ul><table><tr>"
        f"<th>saved ({html.escape(saved)})</th><th>now</th></tr><tr>"
        f"<td>{dag_svg(old, marked)}</td><td>{dag_svg(new, marked)}</td></tr></table>"
        f"{changed_steps_html(old, new, changes)}</section>"
    )
    return section, bool(changes)


def write_report(root: Path, cases_path: Path, out: Path, *, show_all: bool = False) -> int:
    """Write the report; returns the number of cases that differ."""
    cases, _ = current_cases([cases_path])
    sections = []
    differing = 0
    for case in cases:
        latest = latest_version(root / case_slug(case.id))
        old = codec.read_json(latest.path / PLAN_FILE)["plans"] if latest else []
        engine, new, _ = plan_case(case)
        engine.close()
        saved = latest.name if latest else "no saved version"
        section, changed = case_section(case.id, saved, old, new)
        differing += changed or latest is None
        if changed or latest is None or show_all:
            sections.append(section)
    body = (
        "".join(sections) or "<p>Every case's latest planned case matches the plan built now.</p>"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>kspark planned cases</title>"
        f"<style>{_STYLE}</style></head>"
        f"<body><h1>Planned cases: saved vs now</h1>{body}</body></html>\n",
        encoding="utf-8",
    )
    return differing


_STYLE = (
    "body{font-family:sans-serif} td{vertical-align:top;padding:8px}"
    " table.step{border-collapse:collapse;margin:12px 0} table.step td,table.step th"
    "{border:1px solid #bbb;padding:4px 8px;text-align:left;vertical-align:top}"
    " table.step caption{font-weight:bold;text-align:left;padding:4px 0}"
    " tr.changed td{background:#fde2e2} tr.same td{color:#555} td.absent{color:#999}"
    " ol,ul.fields{margin:0;padding-left:18px} code{white-space:pre-wrap}"
)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``[ROOT] [OUT] [--all]``."""
    args = sys.argv[1:] if argv is None else argv
    show_all = "--all" in args
    args = [a for a in args if a != "--all"]
    root = Path(args[0]) if args else DEFAULT_ROOT
    out = Path(args[1]) if len(args) > 1 else Path("reports/planned_cases.html")
    differing = write_report(root, DEFAULT_CASES, out, show_all=show_all)
    print(f"wrote {out} ({differing} case(s) differ)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
