"""What is typed at the shell, split into statements and sorted into what the shell runs itself.

A statement ends at a ``;`` outside quotes (``'...'`` with ``''`` inside, ``"..."``,
```...```) and comments (``-- ...`` to the end of the line, ``/* ... */``). The shell's own
commands (``help``, ``exit``, ``RUN SCRIPT``, ``SPOOL``, ``OUTPUT`` ...) are whole lines that
need no ``;``, as in ksqlDB's CLI.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Split:
    """Complete statements (each ending with its ``;``) and what follows the last one."""

    statements: tuple[str, ...]
    rest: str


def split_statements(text: str) -> Split:
    """Split ``text`` at each ``;`` outside quotes and comments; ``rest`` is the unfinished tail
    ("" when only blanks and comments follow the last statement)."""
    statements: list[str] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c in "'\"`":
            i = _end_of_quoted(text, i, c)
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        if c == ";":
            statement = text[start:i + 1].strip()
            if _strip_comments(statement[:-1]).strip():
                statements.append(statement)
            start = i + 1
        i += 1
    rest = text[start:]
    return Split(tuple(statements), rest if _strip_comments(rest).strip() else "")


def _end_of_quoted(text: str, i: int, quote: str) -> int:
    """The index after the quoted run starting at ``i`` (its end, or the text's end if open)."""
    j = i + 1
    while j < len(text):
        if text[j] == quote:
            if text.startswith(quote * 2, j):  # a doubled quote stands for itself
                j += 2
                continue
            return j + 1
        j += 1
    return len(text)


def _strip_comments(text: str, *, quoted: bool = True) -> str:
    """``text`` without its comments (and, unless ``quoted``, without its quoted runs)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c in "'\"`":
            j = _end_of_quoted(text, i, c)
            out.append(text[i:j] if quoted else " ")
            i = j
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = len(text) if end < 0 else end + 2
            out.append(" ")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_complete(text: str) -> bool:
    """Whether ``text`` is ready to run: a shell command, or statements with nothing unfinished."""
    if local_command(text) is not None:
        return True
    split = split_statements(text)
    return bool(split.statements) and not split.rest


# ------------------------------------------------------------------ the shell's own commands


@dataclass(frozen=True, slots=True)
class LocalCommand:
    """One of the shell's own commands, with its argument (a path, a format, ...)."""

    name: str  # help, history, exit, version, clear, output, spool, run_script
    argument: str | None = None


_COMMANDS = (
    (re.compile(r"(?is)help|\?"), "help"),
    (re.compile(r"(?is)history"), "history"),
    (re.compile(r"(?is)exit|quit"), "exit"),
    (re.compile(r"(?is)version"), "version"),
    (re.compile(r"(?is)clear"), "clear"),
    (re.compile(r"(?is)output(?:\s+(\S+))?"), "output"),
    (re.compile(r"(?is)spool(?:\s+(.+))?"), "spool"),
    (re.compile(r"(?is)run\s+script\s+(.+)"), "run_script"),
)


def local_command(line: str) -> LocalCommand | None:
    """The shell command ``line`` is (a whole line, its ``;`` optional), or None."""
    text = line.strip()
    while text.endswith(";"):
        text = text[:-1].rstrip()
    for pattern, name in _COMMANDS:
        match = pattern.fullmatch(text)
        if match is not None:
            argument = match.group(1) if match.groups() else None
            return LocalCommand(name, unquote(argument.strip()) if argument else None)
    return None


def unquote(text: str) -> str:
    """``'a''b'`` is ``a'b``; text without quotes is itself."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].replace(text[0] * 2, text[0])
    return text


# ------------------------------------------------------------------ statements the shell keeps


@dataclass(frozen=True, slots=True)
class Statement:
    """A statement and how the shell runs it.

    ``kind``: ``set``/``unset`` (a property), ``define``/``undefine``/``variables`` (session
    variables), ``query`` (SELECT: ``push`` says EMIT), ``print`` (PRINT topic), or ``server``
    (every other statement, sent to ``/ksql``).
    """

    text: str
    kind: str
    name: str | None = None
    value: str | None = None
    push: bool = False


_QUOTED = r"'(?:[^']|'')*'"
_SET = re.compile(rf"(?is)\s*SET\s+({_QUOTED})\s*=\s*({_QUOTED})\s*;?\s*")
_UNSET = re.compile(rf"(?is)\s*UNSET\s+({_QUOTED})\s*;?\s*")
_DEFINE = re.compile(rf"(?is)\s*DEFINE\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*({_QUOTED})\s*;?\s*")
_UNDEFINE = re.compile(r"(?is)\s*UNDEFINE\s+([A-Za-z_][A-Za-z0-9_]*)\s*;?\s*")
_VARIABLES = re.compile(r"(?is)\s*(?:SHOW|LIST)\s+VARIABLES\s*;?\s*")
_EMIT = re.compile(r"(?is)\bEMIT\s+(?:CHANGES|FINAL)\b")


def classify(text: str) -> Statement:
    """How the shell runs the statement ``text`` (one statement, with its ``;``)."""
    if match := _SET.fullmatch(text):
        return Statement(text, "set", unquote(match.group(1)), unquote(match.group(2)))
    if match := _UNSET.fullmatch(text):
        return Statement(text, "unset", unquote(match.group(1)))
    if match := _DEFINE.fullmatch(text):
        return Statement(text, "define", match.group(1), unquote(match.group(2)))
    if match := _UNDEFINE.fullmatch(text):
        return Statement(text, "undefine", match.group(1))
    if _VARIABLES.fullmatch(text):
        return Statement(text, "variables")
    first = _first_word(text)
    if first == "SELECT":
        return Statement(text, "query", push=_EMIT.search(_strip_comments(text, quoted=False)) is not None)
    if first == "PRINT":
        return Statement(text, "print")
    return Statement(text, "server")


def _first_word(text: str) -> str:
    match = re.match(r"\s*([A-Za-z]+)", _strip_comments(text))
    return match.group(1).upper() if match else ""


def substitute(text: str, variables: dict[str, str]) -> str:
    """``${name}`` replaced by its session variable (names matched case-insensitively), as the
    server does it; for the shell's own reading of a statement only."""
    lowered = {k.lower(): v for k, v in variables.items()}
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                  lambda m: lowered.get(m.group(1).lower(), m.group(0)), text)


def schema_column_names(schema: str) -> list[str]:
    """The column names of a ``/query`` header's schema (``\\`ID\\` STRING, \\`V\\` INTEGER``)."""
    names: list[str] = []
    depth = 0
    at_start = True
    i = 0
    while i < len(schema):
        c = schema[i]
        if c == "`":
            end = _end_of_quoted(schema, i, "`")
            if depth == 0 and at_start:
                names.append(schema[i + 1:end - 1].replace("``", "`"))
                at_start = False
            i = end
            continue
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == "," and depth == 0:
            at_start = True
        i += 1
    return names
