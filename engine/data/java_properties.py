"""Java's ``.properties`` text, as ksqlDB's servers, CLI and migrations tool read their files.

``name=value``, ``name: value`` or ``name value`` lines; ``#``/``!`` comments; a line ending in an
odd number of backslashes goes on in the next one (its leading blanks dropped, as ksqlDB's docs
write ``sasl.jaas.config``); backslash escapes (``\\t``, ``\\uXXXX``, ``\\=``). A line with no
separator is a name with an empty value, as ``java.util.Properties`` reads it.
"""

from __future__ import annotations

import re

_SEPARATOR = re.compile(r"(?<!\\)[=:\s]")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def unescape(text: str, escapes: dict[str, str] = _ESCAPES) -> str:
    """``text`` with its backslash escapes resolved: ``\\uXXXX``, the letters of ``escapes``, and
    any other escaped character as itself (as ``.properties`` files and Java string literals
    read them; a literal's table adds ``\\b`` and ``\\0``)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
                out.append(chr(int(text[i + 2:i + 6], 16)))
                i += 6
                continue
            out.append(escapes.get(nxt, nxt))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    return logical


def parse_properties(text: str) -> dict[str, str]:
    """The properties of a ``.properties`` text, in the order they come (a later line wins)."""
    found: dict[str, str] = {}
    for line in _logical_lines(text):
        match = _SEPARATOR.search(line)
        if match is None:
            found[unescape(line)] = ""
            continue
        key, rest = line[:match.start()], line[match.end():].lstrip()
        if match.group().isspace() and rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip()
        found[unescape(key)] = unescape(rest)
    return found
