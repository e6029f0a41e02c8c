"""Parity table ``errors``: every error message a statement can meet in ksqlDB, and whether
kspark raises the same text in the same situation.

One row per message site: a ``new ...Exception(...)`` with text of its own in ksqlDB's parser,
analyzers, planners, step builders (``ksqldb-streams``), DDL/DML executors, serde and format validation, metastore, the QTT runner
(``ksqldb-functional-tests``), and the REST layer's statement validation. The message is the
site's text as a pattern, ``{}`` where ksqlDB puts a value.

The judgement is the committed ``errors_map.json``, written after checking kspark:

- ``covered``: item -> the kspark test asserting the text, or ``{"test": ..., "shows": ...}``
  when the test shows one branch of a message built in parts (``shows`` is that branch's text,
  a piece of the pattern). The generator checks it again: the message's longest literal piece
  (or ``shows``) must occur in kspark's sources (``engine/``, ``qtt/``) and in the named test's
  file, or the row stays missing (``reason`` says which was not found);
- ``reasoned``: item -> why the situation cannot arise in kspark;
- ``reasoned_paths``: a source path prefix -> why nothing under it can arise in kspark (a part
  of ksqlDB kspark does not have);
- ``reasoned_exceptions``: a Java exception class -> why its sites are no message a statement
  meets (internal invariants).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

from qtt.parity import Row, table
from qtt.parity.java_messages import PLACEHOLDER, MessageSite, message_sites

MAP_FILE = Path(__file__).with_name("errors_map.json")
ROOT = Path(__file__).resolve().parents[2]
MODULES = (
    "ksqldb-parser",
    "ksqldb-engine",
    "ksqldb-execution",
    "ksqldb-streams",
    "ksqldb-common",
    "ksqldb-serde",
    "ksqldb-metastore",
    "ksqldb-functional-tests",
)
# The REST layer's parts that validate and execute statements (not its HTTP or auth plumbing).
REST_PARTS = (
    "ksqldb-rest-app/src/main/java/io/confluent/ksql/rest/server/validation",
    "ksqldb-rest-app/src/main/java/io/confluent/ksql/rest/server/execution",
    "ksqldb-rest-app/src/main/java/io/confluent/ksql/rest/server/resources",
)


def java_files(src: Path) -> list[Path]:
    """The Java files the table reads, in a stable order."""
    files: list[Path] = []
    for module in MODULES:
        files += sorted((src / module / "src" / "main").rglob("*.java"))
    for part in REST_PARTS:
        files += sorted((src / part).rglob("*.java"))
    return files


def item_of(site: MessageSite) -> str:
    """The row's name: the Java file's class and the message on one line."""
    return f"{Path(site.path).stem}: {' '.join(site.pattern.split())}"


def longest_piece(pattern: str) -> str:
    """The longest stretch of the pattern's own text (between placeholders and line breaks)."""
    pieces = [p.strip() for chunk in pattern.split(PLACEHOLDER) for p in chunk.split("\n")]
    return max(pieces, key=len, default="")


_ADJACENT_LITERALS = re.compile(r"""(["'])\s*\n\s*[fr]?\1""")


@cache
def _text_of(path: Path) -> str:
    """A file's text; in Python, string literals split over lines read as one."""
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace")
    return _ADJACENT_LITERALS.sub("", text) if path.suffix == ".py" else text


@cache
def _kspark_sources() -> str:
    files = sorted((ROOT / "engine").rglob("*.py")) + sorted((ROOT / "qtt").rglob("*.py"))
    return "\n".join(_text_of(f) for f in files if "parity" not in f.parts)


def _spellings(piece: str) -> tuple[str, ...]:
    """How a piece of text can be written in a Python or JSON file."""
    return (piece, json.dumps(piece)[1:-1], re.escape(piece), piece.replace("'", "\\'"))


def _test_file(test: str) -> Path:
    if test.startswith("qtt:"):
        return ROOT / "tests" / "qtt_cases" / test.split(":", 2)[1]
    return ROOT / test.partition("::")[0]


def unconfirmed(pattern: str, test: str, shows: str | None = None) -> str:
    """Why a covered mapping does not hold up ('' when it does): the message's text must be in
    kspark's sources and in the test's file."""
    if shows is not None and shows not in pattern:
        return f"mapped to {test}, showing {shows!r}, which is no piece of the message"
    piece = shows if shows is not None else longest_piece(pattern)
    if not any(s in _kspark_sources() for s in _spellings(piece)):
        return f"mapped to {test}, but kspark's sources do not hold {piece!r}"
    if not any(s in _text_of(_test_file(test)) for s in _spellings(piece)):
        return f"mapped to {test}, but that test's file does not hold {piece!r}"
    return ""


def load_map(path: Path = MAP_FILE) -> dict[str, object]:
    return json.loads(path.read_text(encoding="utf-8"))


@table("errors")
def errors_table(src: Path) -> list[Row]:
    mapping = load_map()
    covered: dict[str, str | dict[str, str]] = mapping.get("covered", {})  # type: ignore[assignment]
    reasoned: dict[str, str] = mapping.get("reasoned", {})  # type: ignore[assignment]
    by_path: dict[str, str] = mapping.get("reasoned_paths", {})  # type: ignore[assignment]
    by_class: dict[str, str] = mapping.get("reasoned_exceptions", {})  # type: ignore[assignment]
    rows: list[Row] = []
    seen: dict[str, int] = {}
    for site in message_sites(src, java_files(src)):
        item = item_of(site)
        seen[item] = seen.get(item, 0) + 1
        if seen[item] > 1:
            item = f"{item} (#{seen[item]})"
        source = f"{site.path}:{site.line}"
        detail = f"{site.exception}: {site.pattern}"
        path_reason = next((r for p, r in by_path.items() if site.path.startswith(p)), "")
        if item in covered:
            entry = covered[item]
            test, shows = (entry, None) if isinstance(entry, str) else (entry["test"], entry.get("shows"))
            problem = unconfirmed(site.pattern, test, shows)
            if problem:
                rows.append(Row(item=item, status="missing", source=source, reason=problem, detail=detail))
            else:
                rows.append(Row(item=item, status="covered", source=source, test=test, detail=detail))
        elif item in reasoned or path_reason or site.exception in by_class:
            reason = reasoned.get(item) or path_reason or by_class[site.exception]
            rows.append(Row(item=item, status="reasoned", source=source, reason=reason, detail=detail))
        else:
            rows.append(Row(item=item, status="missing", source=source, detail=detail))
    return rows
