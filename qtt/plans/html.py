"""HTML report: the plan DAG of each saved planned case next to the one built now, changes marked.

``python -m qtt.plans.html [ROOT] [OUT]`` writes one self-contained file (inline SVG, no
network fetches) with a section per case whose latest plan differs from the current one (or
every case with ``--all``).
"""

from __future__ import annotations

import html
import sys
from pathlib import Path
from typing import Any

from qtt.plans import codec
from qtt.plans.diff import plan_changes, step_index, strip_statement_text
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
        changes = plan_changes(strip_statement_text(old), strip_statement_text(new))
        differing += bool(changes) or latest is None
        if not changes and latest is not None and not show_all:
            continue
        marked = {(c.query_id or "", c.ctx or "") for c in changes}
        rows = "".join(f"<li>{html.escape(c.render())}</li>" for c in changes)
        saved = latest.name if latest else "no saved version"
        sections.append(
            f"<section><h2>{html.escape(case.id)}</h2><ul>{rows}</ul><table><tr>"
            f"<th>saved ({html.escape(saved)})</th><th>now</th></tr><tr>"
            f"<td>{dag_svg(old, marked)}</td><td>{dag_svg(new, marked)}</td></tr></table></section>"
        )
    body = (
        "".join(sections) or "<p>Every case's latest planned case matches the plan built now.</p>"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>kspark planned cases</title>"
        "<style>body{font-family:sans-serif} td{vertical-align:top;padding:8px}</style></head>"
        f"<body><h1>Planned cases: saved vs now</h1>{body}</body></html>\n",
        encoding="utf-8",
    )
    return differing


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
