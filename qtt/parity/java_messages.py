"""The error message sites of Java sources: every ``new ...Exception(...)`` whose message holds
text, with that message turned into a pattern (literal text, ``{}`` where a value goes).

Reads Java with a small scanner (comments blanked, string literals kept), enough for the
shapes ksqlDB writes its messages in: string literals, ``+`` concatenations, ``String.format``
patterns and ``System.lineSeparator()``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engine.data.java_properties import unescape

PLACEHOLDER = "{}"
_NEW_EXCEPTION = re.compile(r"\bnew\s+((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Exception|Error))\s*\(")
_FORMAT_SPEC = re.compile(r"%(?:\d+\$)?[-#+ 0,(]*\d*(?:\.\d+)?[a-zA-Z%]")
# Calls whose text is the message they are given (the REST layer's error entities).
_MESSAGE_WRAPPERS = re.compile(r"^(?:Errors\.\w+|String\.format|new\s+KsqlErrorMessage)\s*\(")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0", "'": "'", '"': '"', "\\": "\\"}


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageSite:
    """One ``new XException(message, ...)`` of a Java file."""

    path: str  # relative to the sources' root
    line: int
    exception: str  # the class name, without its package
    pattern: str  # the message: literal text with ``{}`` for each value


def blank_comments(text: str) -> str:
    """``text`` with its comments replaced by spaces (newlines kept, so lines still count)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' and text.startswith('"""', i):  # a text block
            end = text.find('"""', i + 3)
            end = n if end < 0 else end + 3
            out.append(text[i:end])
            i = end
        elif c in "\"'":
            j = _literal_end(text, i)
            out.append(text[i:j])
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:j]))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _literal_end(text: str, start: int) -> int:
    """The index just past the string or char literal opening at ``start``."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == quote or text[i] == "\n":
            return i + 1
        i += 1
    return len(text)


def _arguments(text: str, open_paren: int) -> tuple[list[str], int]:
    """The top-level arguments of the call whose ``(`` is at ``open_paren``, and the index past ``)``."""
    args: list[str] = []
    depth = 0
    start = open_paren + 1
    i = open_paren
    while i < len(text):
        c = text[i]
        if c in "\"'":
            i = _literal_end(text, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i].strip())
                return [a for a in args if a], i + 1
        elif c == "," and depth == 1:
            args.append(text[start:i].strip())
            start = i + 1
        i += 1
    return [], len(text)


def _split_plus(expr: str) -> list[str]:
    """The top-level operands of a ``+`` concatenation."""
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'":
            i = _literal_end(expr, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "+" and depth == 0 and expr[i + 1 : i + 2] != "+" and expr[i - 1 : i] != "+":
            parts.append(expr[start:i].strip())
            start = i + 1
        i += 1
    parts.append(expr[start:].strip())
    return parts


def _format_pattern(fmt: str) -> str:
    return _FORMAT_SPEC.sub(lambda m: "%" if m.group(0) == "%%" else ("\n" if m.group(0) == "%n" else PLACEHOLDER), fmt)


def message_pattern(expr: str, strings: dict[str, str] | None = None, depth: int = 0) -> str:
    """The pattern of a Java message expression (``{}`` wherever a value is computed).

    ``strings`` maps the names of the file's ``String`` variables and constants to their
    expressions, so that a message kept in one reads as its text."""
    strings = strings or {}
    pieces: list[str] = []
    for operand in _split_plus(expr):
        operand = operand.strip()
        while operand.startswith("(") and _arguments(operand, 0)[1] == len(operand):
            operand = operand[1:-1].strip()  # (a + b)
        if re.fullmatch(r'"(?:[^"\\\n]|\\.)*"', operand):
            pieces.append(unescape(operand[1:-1], _ESCAPES))
        elif re.fullmatch(r"'(?:[^'\\]|\\.)+'", operand):
            pieces.append(unescape(operand[1:-1], _ESCAPES))
        elif operand.startswith('"""'):
            pieces.append(_text_block(operand))
        elif re.fullmatch(r"System\s*\.\s*lineSeparator\s*\(\s*\)", operand):
            pieces.append("\n")
        elif (m := re.match(r"String\s*\.\s*format\s*\(", operand)) and _arguments(operand, m.end() - 1)[1] == len(operand):
            args, _ = _arguments(operand, m.end() - 1)
            fmt = message_pattern(args[0], strings, depth) if args else PLACEHOLDER
            pieces.append(_format_pattern(fmt))
        elif (m := re.match(r"([\"'].*?[\"'])\s*\.\s*formatted\s*\(", operand, re.S)):
            pieces.append(_format_pattern(message_pattern(m.group(1), strings, depth)))
        elif operand in strings and depth < 3:
            pieces.append(message_pattern(strings[operand], strings, depth + 1))
        else:
            pieces.append(PLACEHOLDER)
    text = "".join(pieces)
    while PLACEHOLDER + PLACEHOLDER in text:
        text = text.replace(PLACEHOLDER + PLACEHOLDER, PLACEHOLDER)
    return text


def _text_block(operand: str) -> str:
    body = operand[3:-3] if operand.endswith('"""') else operand[3:]
    lines = body.split("\n")[1:]
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    return unescape("\n".join(x[indent:] for x in lines), _ESCAPES)


def _message_argument(args: list[str], strings: dict[str, str]) -> str | None:
    """The argument that carries the message: the first one that holds text."""
    for arg in args[:2]:
        expr = arg
        m = _MESSAGE_WRAPPERS.match(expr)
        if m and not expr.startswith("String"):
            inner, end = _arguments(expr, m.end() - 1)
            if end == len(expr) and inner:
                expr = inner[0]
        if '"' in expr or any(o.strip() in strings for o in _split_plus(expr)):
            return expr
    return None


_STRING_VARIABLE = re.compile(r"\bString\s+([A-Za-z_]\w*)\s*=")


def string_variables(text: str) -> dict[str, str]:
    """The file's ``String name = <expression>;`` (constants and locals; the first of a name)."""
    found: dict[str, str] = {}
    for match in _STRING_VARIABLE.finditer(text):
        depth = 0
        i = match.end()
        while i < len(text):
            c = text[i]
            if c in "\"'":
                i = _literal_end(text, i)
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c == ";" and depth <= 0:
                break
            i += 1
        expr = text[match.end():i].strip()
        if '"' in expr:
            found.setdefault(match.group(1), expr)
    return found


def literal_text(pattern: str) -> str:
    """The pattern's text without its placeholders."""
    return pattern.replace(PLACEHOLDER, "")


def message_sites(root: Path, paths: list[Path]) -> Iterator[MessageSite]:
    """Every message site of the Java files ``paths`` (under ``root``), in file order."""
    for path in paths:
        text = blank_comments(path.read_text(encoding="utf-8", errors="replace"))
        strings = string_variables(text)
        for match in _NEW_EXCEPTION.finditer(text):
            args, _ = _arguments(text, match.end() - 1)
            expr = _message_argument(args, strings)
            if expr is None:
                continue
            pattern = message_pattern(expr, strings).strip()
            if len(re.sub(r"\W", "", literal_text(pattern))) < 3:
                continue  # no words of its own: the message is computed elsewhere
            yield MessageSite(
                path=path.relative_to(root).as_posix(),
                line=text.count("\n", 0, match.start()) + 1,
                exception=match.group(1).rsplit(".", 1)[-1],
                pattern=pattern,
            )
