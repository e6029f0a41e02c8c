"""Parity table ``grammar``: every parser rule and every alternative of ksqlDB's grammar
(``ksqldb-parser/.../SqlBase.g4``), and whether kspark's parser reads it with the same meaning.

Rows:

- ``<rule>``: one per parser rule;
- ``<rule> #<Label>``: one per labelled alternative (``#<Label> [n]`` when a label names
  several alternatives, in grammar order);
- ``<rule> [n]``: one per unlabelled alternative of a rule with several.

The judgement is the committed ``grammar_statements.json``: row -> a statement of kspark's own
that exercises it and the outcome it must have. The generator checks every entry with
kspark's parser (the same check ``tests/engine/parser/test_grammar_parity.py`` runs), so a row
is ``covered`` only while kspark parses it as mapped:

- ``{"sql": ..., "node": "Query", "fields": {"select.0.expr": "..."}}``: the statement parses
  to that AST node and the dotted fields hold those values (expressions as SQL text, types as
  their SQL names, tuples as lists);
- ``{"expression": ..., "node": "Dereference", "text": "..."}``: an expression alone;
- ``{"sql": ..., "error": "..."}``: kspark refuses it while parsing, the message containing
  that text (where ksqlDB's AST builder refuses it too, with ksqlDB's words);
- ``"test_statements": true`` parses with the test-script forms (``ASSERT VALUES``, ...);
- ``"reason"``: the row is ``reasoned`` (kspark does not support the statement on purpose);
  its outcome is still checked (it parses to its node, and the engine refuses it).

A row without an entry, or whose entry's check fails, is ``missing``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from qtt.parity import Row, table

GRAMMAR = "ksqldb-parser/src/main/antlr4/io/confluent/ksql/parser/SqlBase.g4"
MAP_FILE = Path(__file__).with_name("grammar_statements.json")
TEST = "tests/engine/parser/test_grammar_parity.py::test_grammar_form_parses_as_mapped"


# --------------------------------------------------------------------------- reading the grammar


@dataclasses.dataclass(frozen=True, slots=True)
class Alternative:
    """One alternative of a parser rule: its label (if any) and the symbols it names."""

    rule: str
    index: int  # 1-based, in grammar order
    label: str | None
    symbols: tuple[str, ...]


def _strip_comments(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("/*", i):
            i = text.index("*/", i) + 2
        elif text.startswith("//", i):
            i = text.find("\n", i)
            i = len(text) if i < 0 else i
        elif text[i] == "'":
            end = i + 1
            while text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            out.append(text[i : end + 1])
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _split_top(body: str, sep: str) -> list[str]:
    """Split at ``sep`` outside quotes, brackets and parentheses."""
    parts: list[str] = []
    current: list[str] = []
    depth, quoted = 0, False
    for ch in body:
        if ch == "'":
            quoted = not quoted
        elif not quoted and ch in "([{":
            depth += 1
        elif not quoted and ch in ")]}":
            depth -= 1
        elif not quoted and depth == 0 and ch == sep:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return parts


_RULE = re.compile(r"^([a-z][A-Za-z0-9_]*)\s*(?:\[[^\]]*\])?\s*:", re.M)
_LABEL = re.compile(r"#\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")
_SYMBOL = re.compile(r"'[^']*'|[A-Za-z_][A-Za-z0-9_]*")


def parser_rules(text: str) -> dict[str, list[Alternative]]:
    """Every parser rule (lower-case name) of an ANTLR grammar with its alternatives."""
    text = _strip_comments(text)
    rules: dict[str, list[Alternative]] = {}
    for match in _RULE.finditer(text):
        name = match.group(1)
        if name == "grammar":
            continue
        body_start = match.end()
        parts = _split_top(text[body_start:], ";")
        body = parts[0]
        alternatives = []
        for i, alt in enumerate(_split_top(body, "|"), start=1):
            label_match = _LABEL.search(alt.strip())
            label = label_match.group(1) if label_match else None
            core = _LABEL.sub("", alt.strip())
            core = re.sub(r"\b[a-z]+\s*=", "", core)  # element labels (left=...)
            symbols = tuple(s for s in _SYMBOL.findall(core) if not s.startswith("$"))
            alternatives.append(Alternative(name, i, label, symbols))
        rules[name] = alternatives
    return rules


def items(rules: dict[str, list[Alternative]]) -> Iterator[tuple[str, str]]:
    """(row item, detail) for every rule and alternative, in grammar order."""
    for name, alternatives in rules.items():
        yield name, f"{len(alternatives)} alternative{'s' if len(alternatives) != 1 else ''}"
        counts: dict[str, int] = {}
        for alt in alternatives:
            if alt.label:
                counts[alt.label] = counts.get(alt.label, 0) + 1
        seen: dict[str, int] = {}
        for alt in alternatives:
            detail = " ".join(alt.symbols)
            if alt.label:
                seen[alt.label] = seen.get(alt.label, 0) + 1
                suffix = f" [{seen[alt.label]}]" if counts[alt.label] > 1 else ""
                yield f"{name} #{alt.label}{suffix}", detail
            elif len(alternatives) > 1:
                yield f"{name} [{alt.index}]", detail


# --------------------------------------------------------------------------- checking kspark


def load_map(path: Path = MAP_FILE) -> dict[str, dict[str, Any]]:
    """The committed mapping: row item -> the statement exercising it and its outcome."""
    return json.loads(path.read_text(encoding="utf-8"))


def plain(value: Any) -> Any:
    """A parsed value in the mapping's terms: expressions as SQL, types as names, lists."""
    from engine.plan import expr as E
    from engine.plan.types import SqlType

    if isinstance(value, E.Expr):
        return E.format_sql(value)
    if isinstance(value, SqlType):
        return str(value)
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value).__name__
    return value


def _field(node: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(node, tuple | list):
            node = node[int(part)]
        elif isinstance(node, dict):
            node = node[part]
        else:
            node = getattr(node, part)
    return node


def check(entry: dict[str, Any]) -> str | None:
    """None when kspark's parser gives the entry's outcome, else what it gave instead."""
    from engine.errors import KsqlError
    from engine.parser import parse, parse_expression

    try:
        if "expression" in entry:
            result: Any = parse_expression(entry["expression"])
        else:
            parsed = parse(entry["sql"], test_statements=bool(entry.get("test_statements")))
            result = parsed[-1].statement
    except KsqlError as exc:
        if "error" in entry:
            return None if entry["error"] in str(exc) else f"refused with another message: {exc}"
        return f"does not parse: {' '.join(str(exc).split())[:300]}"
    if "error" in entry:
        return f"parses to {type(result).__name__}, expected the error {entry['error']!r}"
    if type(result).__name__ != entry["node"]:
        return f"parses to {type(result).__name__}, expected {entry['node']}"
    if "text" in entry and plain(result) != entry["text"]:
        return f"parses as {plain(result)!r}, expected {entry['text']!r}"
    for path, expected in entry.get("fields", {}).items():
        try:
            got = plain(_field(result, path))
        except (AttributeError, IndexError, KeyError, ValueError):
            return f"has no field {path}"
        if got != expected:
            return f"field {path} is {got!r}, expected {expected!r}"
    return None


@table("grammar")
def grammar_rows(src: Path) -> list[Row]:
    rules = parser_rules((src / GRAMMAR).read_text(encoding="utf-8"))
    mapping = load_map()
    rows: list[Row] = []
    for item, symbols in items(rules):
        entry = mapping.get(item)
        if entry is None:
            rows.append(Row(item=item, status="missing", source=GRAMMAR, detail=symbols,
                            reason="no kspark statement mapped to it yet"))
            continue
        statement = entry.get("sql", entry.get("expression", ""))
        detail = f"{symbols} | kspark: {statement}"
        problem = check(entry)
        if problem is not None:
            rows.append(Row(item=item, status="missing", source=GRAMMAR, detail=detail,
                            reason=f"kspark {problem}"))
        elif entry.get("reason"):
            rows.append(Row(item=item, status="reasoned", source=GRAMMAR, detail=detail,
                            reason=entry["reason"]))
        else:
            rows.append(Row(item=item, status="covered", source=GRAMMAR, detail=detail,
                            test=f"{TEST}[{item}]"))
    unknown = sorted(set(mapping) - {i for i, _ in items(rules)})
    if unknown:
        raise ValueError(f"grammar_statements.json maps items the grammar does not have: {unknown[:5]}")
    return rows
