"""Two conformance reports side by side: pass rates per file, and the cases one passes and
the other does not, grouped by the other's reason.

    qtt compare reports/bounded.json reports/kafka.json

Only cases present in both reports count (a sampled run compares with the same cases of a
full one). Passing is counted strictly: a case whose expected error came with another message
(``"message_matched": false``) did not pass. Reasons group with quoted names and numbers
masked, as the conformance summary counts them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table


def mask_reason(reason: str) -> str:
    """``reason`` with quoted names, numbers and record contents masked."""
    text = re.sub(
        r"(record \d+ of \d+: \w+)\S* expected .*", r"\1 differs", reason
    )  # 'Topic 'T' record 2 of 3: value.X expected 1 but was 2.'
    text = re.sub(r"'[^']*'|`[^`]*`|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\d+", "N", text)
    return text if len(text) <= 140 else text[:139] + "…"


@dataclass(slots=True)
class Comparison:
    """What two reports say about the cases they share."""

    first: str  # the runtime (or file name) of each report
    second: str
    files: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # passed 1st, 2nd, total
    lost: list[dict[str, Any]] = field(default_factory=list)  # passed in first, not in second
    gained: list[dict[str, Any]] = field(default_factory=list)  # passed in second, not in first

    def lost_by_reason(self) -> list[tuple[str, int]]:
        return Counter(mask_reason(c["reason"]) for c in self.lost).most_common()


def compare_reports(first: Mapping[str, Any], second: Mapping[str, Any]) -> Comparison:
    """Compare the cases two conformance reports (``ConformanceRun.report()``) share."""
    key = lambda case: (case["file"], case["name"])  # noqa: E731
    theirs = {key(c): c for c in second["cases"]}
    comparison = Comparison(
        first=str(first.get("runtime", "first")), second=str(second.get("runtime", "second"))
    )
    for case in first["cases"]:
        other = theirs.get(key(case))
        if other is None:
            continue
        one, two = passed_strictly(case), passed_strictly(other)
        p1, p2, total = comparison.files.get(case["file"], (0, 0, 0))
        comparison.files[case["file"]] = (p1 + one, p2 + two, total + 1)
        if one and not two:
            comparison.lost.append(other)
        elif two and not one:
            comparison.gained.append(other)
    return comparison


def passed_strictly(case: Mapping[str, Any]) -> bool:
    """A report's case passed, with its expected error's message if it expects one."""
    return case["status"] == "passed" and case.get("message_matched") is not False


def load_report(path: str | Path) -> dict[str, Any]:
    """A conformance report written by ``qtt conformance --report``."""
    return dict(json.loads(Path(path).read_text(encoding="utf-8")))


def print_comparison(comparison: Comparison, console: Console, *, cases: bool = True) -> None:
    """Per-file table, totals, then the lost cases grouped by reason (and listed)."""
    a, b = comparison.first, comparison.second
    table = Table(title=f"QTT conformance: {a} vs {b}")
    for column in ("file", f"{a} passed", f"{b} passed", "total", f"{a} %", f"{b} %"):
        table.add_column(column, justify="left" if column == "file" else "right")
    totals = [0, 0, 0]
    for name, (p1, p2, total) in sorted(comparison.files.items()):
        table.add_row(name, str(p1), str(p2), str(total), _pct(p1, total), _pct(p2, total))
        totals = [totals[0] + p1, totals[1] + p2, totals[2] + total]
    table.add_section()
    p1, p2, total = totals
    table.add_row("TOTAL", str(p1), str(p2), str(total), _pct(p1, total), _pct(p2, total), style="bold")
    console.print(table)
    console.print(
        f"passed on {a} but not on {b}: {len(comparison.lost)}; the reverse: {len(comparison.gained)}",
        markup=False,
        highlight=False,
    )
    for reason, count in comparison.lost_by_reason():
        console.print(f"{count:5d}  {reason}", markup=False, highlight=False, soft_wrap=True)
        if cases:
            for case in comparison.lost:
                if mask_reason(case["reason"]) == reason:
                    console.print(
                        f"         {case['name']}: {case['status']}: {case['reason']}",
                        markup=False,
                        highlight=False,
                        soft_wrap=True,
                    )


def _pct(passed: int, total: int) -> str:
    return f"{100.0 * passed / total:.1f}" if total else "-"
