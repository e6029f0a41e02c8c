"""The ksqlDB-dialect parser: SQL text to ``engine.parser.ast`` statements.

The grammar lives in ``ksql.lark`` (Lark, LALR(1), basic lexer). The text is first split
into statements on top-level ';' (so that ``DEFINE`` can affect the statements after it),
each statement is parsed on its own and its tree is turned into AST and expression nodes.

Literal typing follows ksqlDB: integers in INT range are INTEGER, larger ones BIGINT;
``1.50`` is DECIMAL with precision and scale from its digits (``0.05`` is DECIMAL(2, 2),
as ksqlDB's ``DecimalUtil.fromValue``); numbers with an exponent are DOUBLE. A minus sign
directly before a number literal makes a negative literal (``-1`` is ``Literal(-1)``, as
ksqlDB's grammar, where the sign belongs to the number); any other operand gives
``Negate``.
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from engine.errors import AnalysisError, InternalError, KsqlError, ParseError
from engine.expressions.cast import cast_semantics
from engine.functions import REGISTRY
from engine.parser import ast
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.types import SqlType

__all__ = ["ParsedStatement", "column_reference", "parse", "parse_expression", "reserved_words"]


@dataclass(frozen=True, slots=True)
class ParsedStatement:
    """One parsed statement with its source text and 1-based position in the whole text."""

    statement: ast.Statement
    text: str
    line: int
    column: int
    locations: dict[int, tuple[Any, int, int]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def location_of(self, node: Any) -> tuple[int, int] | None:
        """The 1-based (line, column) where a column reference, call, source or element starts."""
        found = self.locations.get(id(node))
        if found is None or found[0] is not node:
            return None
        return found[1], found[2]

    def locate(self, error: Exception) -> None:
        """Place an ``AnalysisError`` about one of this statement's nodes at that node."""
        if isinstance(error, AnalysisError) and error.line is None and error.node is not None:
            where = self.location_of(error.node)
            if where is not None:
                error.at(*where)

    def relocate(self, error: Exception) -> None:
        """An ``AnalysisError`` placed in this statement's text parsed alone (its first token at
        line 1, column 1), placed in the whole text instead."""
        if isinstance(error, AnalysisError) and error.line is not None and error.column is not None:
            column = error.column + self.column - 1 if error.line == 1 else error.column
            error.at(self.line + error.line - 1, column)


# --------------------------------------------------------------------------- Lark setup

_STARTS = ["statement_eof", "test_statement_eof", "expression_eof"]


# What ksqlDB adds to its refusal of a KEY column in a table or a PRIMARY KEY in a stream.
_KEY_KINDS = (
    "\nTables have PRIMARY KEYs, which are unique and NON NULL."
    "\nStreams have KEYs, which have no uniqueness or NON NULL constraints."
)


_LARK_LOCK = threading.Lock()


def _lark() -> Lark:
    """The parser, built once per process: under a lock, as threads parsing at once (QTT's
    workers) would each build it otherwise."""
    with _LARK_LOCK:
        return _built_lark()


@lru_cache(maxsize=1)
def _built_lark() -> Lark:
    grammar = resources.files("engine.parser").joinpath("ksql.lark").read_text("utf-8")
    # cache=True: Lark keeps the grammar's LALR tables in a file of the temporary directory,
    # named by a hash of the grammar, the options and Lark's version, and later processes
    # load them instead of building them (every `kspark` command parses). A file it
    # cannot read or write only costs the full build.
    return Lark(
        grammar,
        parser="lalr",
        lexer="basic",
        start=_STARTS,
        maybe_placeholders=True,
        propagate_positions=True,
        cache=True,
    )


_WORD = re.compile(r"[A-Z_]+")


@lru_cache(maxsize=1)
def _terminal_names() -> dict[str, str]:
    """Readable names of the grammar's terminals for error messages."""
    names: dict[str, str] = {}
    for term in _lark().terminals:
        value = term.pattern.value
        if term.pattern.type == "str":
            names[term.name] = value.upper() if _WORD.fullmatch(value.upper()) else f"'{value}'"
    names.update(
        {
            "IDENTIFIER": "an identifier",
            "DIGIT_IDENTIFIER": "an identifier",
            "QUOTED_IDENTIFIER": "an identifier",
            "BACKQUOTED_IDENTIFIER": "an identifier",
            "STRING": "a string",
            "NUMBER": "a number",
            "NEQ": "'<>'",
            "$END": "end of input",
        }
    )
    return names


@lru_cache(maxsize=1)
def _nonreserved_terminals() -> frozenset[str]:
    rules = [r for r in _lark().rules if r.origin.name in ("nonreserved", "alias_only_nonreserved")]
    return frozenset(sym.name for r in rules for sym in r.expansion)


@lru_cache(maxsize=1)
def reserved_words() -> frozenset[str]:
    """Keywords that cannot be used as unquoted identifiers."""
    keywords = {
        t.pattern.value.upper()
        for t in _lark().terminals
        if t.pattern.type == "str" and _WORD.fullmatch(t.pattern.value.upper())
    }
    nonreserved = {_terminal_names().get(n, n) for n in _nonreserved_terminals()}
    return frozenset(keywords - nonreserved)


# --------------------------------------------------------------------------- public API


def parse(
    text: str,
    *,
    variables: Mapping[str, str] | None = None,
    types: Mapping[str, SqlType] | None = None,
    test_statements: bool = False,
    first_line: int = 1,
) -> list[ParsedStatement]:
    """Parse ';'-separated statements (the last ';' is optional).

    ``first_line`` is the line of the whole script on which ``text`` starts: positions in
    errors and in the parsed statements count from there (a script run statement by statement
    reports the script's lines, as ksqlDB does for the statements of a test case, which it
    joins with newlines).

    ``variables`` are substituted for ``${name}`` before parsing, as are those a ``DEFINE``
    earlier in the text sets. ``types`` resolves custom type names, as do ``CREATE TYPE``
    statements earlier in the text; unresolved names become ``ast.TypeReference``.
    ``test_statements`` also accepts the test-script forms (``ASSERT VALUES``, ...).
    """
    known_vars = {k.upper(): v for k, v in (variables or {}).items()}
    known_types = {k.upper(): v for k, v in (types or {}).items()}
    start = "test_statement_eof" if test_statements else "statement_eof"
    out: list[ParsedStatement] = []
    for chunk in _split(text, first_line - 1):
        if known_vars and "${" in chunk.text:
            _check_variable_references(chunk, known_vars, start)
        chunk_text = (
            _substitute(chunk.text, known_vars, chunk) if "${" in chunk.text else chunk.text
        )
        builder = _Builder(chunk_text, chunk, known_types)
        try:
            statement = builder.build(_parse_tree(chunk_text, start, chunk))
        except RecursionError:
            raise ParseError(_TOO_LARGE) from None
        out.append(
            ParsedStatement(
                statement=statement,
                text=_statement_text(chunk_text),
                line=chunk.first_line,
                column=chunk.first_column,
                locations=builder.locations,
            )
        )
        if isinstance(statement, ast.DefineVariable):
            known_vars[statement.name.upper()] = statement.value
        elif isinstance(statement, ast.UndefineVariable):
            known_vars.pop(statement.name.upper(), None)
        elif isinstance(statement, ast.CreateType):
            if not (statement.if_not_exists and statement.name.upper() in known_types):
                known_types[statement.name.upper()] = statement.type  # IF NOT EXISTS keeps the registered type
        elif isinstance(statement, ast.DropType):
            known_types.pop(statement.name.upper(), None)
    return out


def creating_statement(sql: str) -> ParsedStatement | None:
    """The first statement of a source's saved text: the one that created it (an ALTER appends
    its own statement to the text). None when the text is empty or no longer parses."""
    if not sql.strip():
        return None
    try:
        statements = parse(sql)
    except KsqlError:
        return None
    return statements[0] if statements else None


def parse_expression(text: str, *, types: Mapping[str, SqlType] | None = None) -> E.Expr:
    """Parse a single expression, e.g. ``a + 1 > b``."""
    chunk = _Chunk(text, 0, 1, 1, 1, 1)
    tree = _parse_tree(text, "expression_eof", chunk)
    known = {k.upper(): v for k, v in (types or {}).items()}
    result = _Builder(text, chunk, known).build(tree)
    assert isinstance(result, E.Expr)
    return result


_IDENTIFIER_TEXT = r"""(?:[A-Za-z_][A-Za-z0-9_@]*|[0-9]+[A-Za-z_@][A-Za-z0-9_@]*|"(?:[^"]|"")*"|`(?:[^`]|``)*`)"""
_COLUMN_REFERENCE = re.compile(rf"\s*(?P<first>{_IDENTIFIER_TEXT})(?:\s*\.\s*(?P<second>{_IDENTIFIER_TEXT}))?")


def column_reference(text: str) -> str:
    """The column a WITH clause's text names (``TIMESTAMP='ts'``), as ksqlDB reads it: the text
    starts with a column reference, maybe qualified (``s.ts``: the column is ``TS``), unquoted
    names upper-cased; what follows a complete reference is not read. Text that starts with
    another expression (a literal, a call, a subscript, a field of a struct) is a ``ParseError``.
    """
    found = _COLUMN_REFERENCE.match(text)
    rest = text[found.end():].lstrip() if found else ""
    first = found.group("first") if found else ""
    if (
        found is None
        or (first[0] not in "`\"" and first.upper() in ("TRUE", "FALSE", "NULL"))
        or rest.startswith(("(", "[", "->", "'", "."))
    ):
        raise ParseError("Cannot parse text that is not column reference.")  # ksqlDB's words
    name = found.group("second") or first
    if name[0] in "`\"":
        return _unquote(name, name[0])
    return name.upper()


# --------------------------------------------------------------------------- splitting


@dataclass(frozen=True, slots=True)
class _Chunk:
    """One statement's slice of the text and where it starts in the whole text."""

    text: str
    offset: int
    line: int  # position of text[0]
    column: int
    first_line: int  # position of the statement's first token
    first_column: int

    def position(self, line: int, column: int) -> tuple[int, int]:
        """Translate a 1-based position inside the chunk to the whole text."""
        if line == 1:
            return self.line, self.column + column - 1
        return self.line + line - 1, column


_LEXEMES = re.compile(
    r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`(?:[^`]|``)*`|--[^\n]*|/\*.*?\*/|;", re.S
)
_BLANK = re.compile(r"(?:\s+|--[^\n]*|/\*.*?\*/)*", re.S)


_INSERT_INTO = re.compile(r"INSERT\s+INTO\s+", re.I)


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _split(text: str, lines_before: int = 0) -> list[_Chunk]:
    ends = [m.end() for m in _LEXEMES.finditer(text) if m.group() == ";"]
    if not ends or ends[-1] < len(text):
        ends.append(len(text))
    chunks: list[_Chunk] = []
    begin = 0
    for end in ends:
        piece = text[begin:end]
        lead = _BLANK.match(piece)
        first = begin + (lead.end() if lead else 0)
        if first >= end:  # only blanks and comments
            begin = end
            continue
        line, col = _line_col(text, begin)
        first_line, first_col = _line_col(text, first)
        chunks.append(
            _Chunk(piece, begin, line + lines_before, col, first_line + lines_before, first_col)
        )
        begin = end
    return chunks


def _statement_text(chunk_text: str) -> str:
    lead = _BLANK.match(chunk_text)
    body = chunk_text[lead.end() if lead else 0 :].strip()
    return body if body.endswith(";") else body + ";"


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _substitute(text: str, variables: Mapping[str, str], chunk: _Chunk) -> str:
    """Replace ``${name}``; unknown names are an error outside string literals."""
    out: list[str] = []
    pos = 0
    for m in list(_LEXEMES.finditer(text)) + [None]:
        plain_end = m.start() if m else len(text)
        out.append(_substitute_plain(text, pos, plain_end, variables, chunk))
        if m is None:
            break
        lexeme = m.group()
        if lexeme.startswith("'"):
            lexeme = _VARIABLE.sub(lambda v: variables.get(v.group(1).upper(), v.group()), lexeme)
        out.append(lexeme)
        pos = m.end()
    return "".join(out)


_VALID_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_@]*")
_JAVA_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[dDfF]?")


def _references(text: str) -> list[re.Match[str]]:
    """The ``${name}`` references of a statement outside its string literals."""
    found: list[re.Match[str]] = []
    pos = 0
    for m in list(_LEXEMES.finditer(text)) + [None]:
        end = m.start() if m else len(text)
        found += [v for v in _VARIABLE.finditer(text, pos, end)]
        if m is None:
            break
        pos = m.end()
    return found


def _check_variable_references(chunk: _Chunk, variables: Mapping[str, str], start: str) -> None:
    """ksqlDB's checks of what a variable stands for, where it stands (its
    VariableSubstitutor, which runs when any variable is defined): in a literal's place the
    value must be a quoted string, a boolean or a number; in an identifier's place a name
    (unknown variables stand for themselves, ``${name}``, and fail both). A reference stands
    in a literal's place when a string literal parses there, as ksqlDB's grammar tries a
    literal before a column reference."""
    text = chunk.text
    refs = _references(text)
    for i, ref in enumerate(refs):
        value = variables.get(ref.group(1).upper(), ref.group())
        trial = []
        pos = 0
        for j, other in enumerate(refs):
            trial.append(text[pos:other.start()])
            trial.append("'v'" if i == j else variables.get(other.group(1).upper(), other.group()))
            pos = other.end()
        trial.append(text[pos:])
        try:
            _lark().parse("".join(trial), start=start)
            as_literal = True
        except UnexpectedInput:
            as_literal = False
        line, col = chunk.position(*_line_col(text, ref.start()))
        where = f"Illegal argument at Line: {line}, Col: {col}"
        if as_literal:
            quoted = len(value) >= 2 and value[0] == value[-1] == "'"
            if not (quoted or value.lower() in ("true", "false") or _JAVA_NUMBER.fullmatch(value)):
                raise ParseError(f"{where}.")
            continue
        name = value[1:-1] if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"`" else value
        if not _VALID_IDENTIFIER.fullmatch(name):
            raise ParseError(
                f"{where}. Identifier names cannot start with '@' and may only contain alphanumeric values and '_'."
            )


def _substitute_plain(
    text: str, begin: int, end: int, variables: Mapping[str, str], chunk: _Chunk
) -> str:
    def replace(m: re.Match[str]) -> str:
        name = m.group(1).upper()
        if name not in variables:
            line, col = chunk.position(*_line_col(text, begin + m.start()))
            raise ParseError(
                f"Variable '{m.group(1)}' is not defined; define it with DEFINE {m.group(1)} = '...';"
                " first.",
                line=line,
                column=col,
                snippet=_snippet_line(text, begin + m.start()),
            )
        return variables[name]

    return _VARIABLE.sub(replace, text[begin:end])


def _snippet_line(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    stop = text.find("\n", pos)
    return text[start : stop if stop >= 0 else len(text)]


# --------------------------------------------------------------------------- errors

# ksqlDB's words when its parser runs out of stack on deeply nested expressions.
_TOO_LARGE = (
    "Error processing statement: Statement is too large to parse. "
    "This may be caused by having too many nested expressions in the statement."
)


def _parse_tree(text: str, start: str, chunk: _Chunk) -> Tree[Any]:
    try:
        return _lark().parse(text, start=start)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, chunk) from None


def _syntax_error(exc: UnexpectedInput, text: str, chunk: _Chunk) -> ParseError:
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END":
        stripped = text.rstrip()
        line, col = _line_col(text, len(stripped))
        at, offending = "end of input", "<EOF>"
        snippet = _snippet_line(text, max(len(stripped) - 1, 0))
    else:
        line, col = exc.line, exc.column
        offending = (
            str(exc.token)
            if isinstance(exc, UnexpectedToken)
            else text[exc.pos_in_stream or 0]
        )
        at = f"'{offending}'"
        snippet = _snippet_line(text, exc.pos_in_stream or 0)
    whole_line, whole_col = chunk.position(line, col)
    lead = _BLANK.match(text)
    first_token = isinstance(exc, UnexpectedToken) and exc.token.start_pos == (
        lead.end() if lead else 0
    )
    if first_token and offending != "<EOF>":
        return ParseError(
            f"Syntax Error\nUnknown statement '{offending}': expected a statement such as "
            "SELECT, CREATE, INSERT, DROP, SET, DEFINE, SHOW, DESCRIBE or TERMINATE.",
            line=whole_line,
            column=whole_col,
            snippet=snippet,
            syntax=True,
        )
    expected = _expected(exc)
    tail = f": expected {expected}." if expected else "."
    # ksqlDB's words first (its parser's "Syntax Error", and ANTLR's recovery message when one
    # token is missing), then what kspark met and expected.
    missing = None
    if expected and _WORD.fullmatch(expected):  # one keyword
        missing = f"'{expected}'"
    elif expected and expected.startswith("'"):  # one punctuation token
        missing = expected
    head = "Syntax Error" + (f"\nmissing {missing} at '{offending}'" if missing else "")
    return ParseError(
        f"{head}\nSyntax error at or near {at} at line {whole_line}:{whole_col}{tail}",
        line=whole_line,
        column=whole_col,
        snippet=snippet,
        syntax=True,
    )


def _expected(exc: UnexpectedInput) -> str:
    if isinstance(exc, UnexpectedCharacters):
        return ""
    names = set(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    if "IDENTIFIER" in names:
        names -= _nonreserved_terminals()
    if "SEMICOLON" in names:
        names.discard("$END")
    # `x AT TIME ZONE ...` parses only to be refused: never suggest it.
    names.discard("AT")
    readable = sorted({_terminal_names().get(n, n) for n in names}, key=_expected_order)
    if not readable:
        return ""
    if len(readable) > 15:
        readable = readable[:15] + ["..."]
    if len(readable) == 1:
        return readable[0]
    return "one of " + ", ".join(readable)


def _expected_order(name: str) -> tuple[int, str]:
    if name.startswith("'"):
        return (1, name)
    if name[0].islower():
        return (2, name)
    return (0, name)


# --------------------------------------------------------------------------- tree -> AST


_UNIT_MS = {
    "MILLISECOND": 1,
    "SECOND": 1000,
    "MINUTE": 60_000,
    "HOUR": 3_600_000,
    "DAY": 86_400_000,
}
_INTERVAL_FUNCTIONS = frozenset(
    {"TIMESTAMPADD", "TIMESTAMPSUB", "DATEADD", "DATESUB", "TIMEADD", "TIMESUB"}
)
_NEGATIVE_NUMBER = re.compile(r"-\s*(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:E[+-]?[0-9]+)?", re.I)
_INT_TEXT = re.compile(r"[0-9]+")


def _call(name: str, args: tuple[E.Expr, ...], *, star: bool = False) -> E.FunctionCall:
    """A call planned with the current version of the function's behaviour."""
    return E.FunctionCall(name, args, star=star, semantics=REGISTRY.current_semantics(name))


def _unit_singular(unit: str) -> str:
    unit = unit.upper()
    return unit[:-1] if unit.endswith("S") else unit


@dataclass(frozen=True, slots=True)
class _Flag:
    name: str


@dataclass(frozen=True, slots=True)
class _Clause:
    name: str
    value: Any


def _unquote(text: str, quote: str) -> str:
    return text[1:-1].replace(quote * 2, quote)


def _checked_name(name: str) -> str:
    """A quoted name as ksqlDB's names take it (its Name): not empty, no blanks around it."""
    if name.strip() != name:
        raise ParseError(f"Failed to prepare statement: name is not trimmed: '{name}'")
    if not name:
        raise ParseError("Failed to prepare statement: name is empty")
    return name


class _Builder(Transformer):  # type: ignore[type-arg]
    """Turns one statement's parse tree into AST and expression nodes."""

    def __init__(self, text: str, chunk: _Chunk, types: Mapping[str, SqlType]) -> None:
        super().__init__(visit_tokens=True)
        self._text = text
        self._chunk = chunk
        self._types = types
        self.locations: dict[int, tuple[Any, int, int]] = {}

    def build(self, tree: Tree[Any]) -> Any:
        """Transform, unwrapping Lark's VisitError around our own ParseErrors."""
        try:
            return self.transform(tree)
        except VisitError as exc:
            if isinstance(exc.orig_exc, ParseError):
                raise exc.orig_exc from None
            raise

    # ----------------------------------------------------------------- helpers

    def _at(self, meta: Any) -> tuple[int, int]:
        return self._chunk.position(meta.line, meta.column)

    def _remember(self, node: Any, meta: Any) -> Any:
        if not getattr(meta, "empty", True):
            line, col = self._at(meta)
            self.locations[id(node)] = (node, line, col)
        return node

    def _error(self, message: str, meta: Any) -> ParseError:
        line, col = self._at(meta)
        return ParseError(
            message, line=line, column=col, snippet=_snippet_line(self._text, meta.start_pos)
        )

    # ----------------------------------------------------------------- tokens

    def IDENTIFIER(self, token: Token) -> str:  # noqa: N802 - Lark terminal callback
        return token.upper()

    DIGIT_IDENTIFIER = IDENTIFIER

    def QUOTED_IDENTIFIER(self, token: Token) -> str:  # noqa: N802
        return _checked_name(_unquote(token, '"'))

    def BACKQUOTED_IDENTIFIER(self, token: Token) -> str:  # noqa: N802
        return _checked_name(_unquote(token, "`"))

    def nonreserved(self, children: list[Token]) -> str:
        return str(children[0]).upper()

    alias_only_nonreserved = nonreserved

    # ----------------------------------------------------------------- start rules

    def statement_eof(self, children: list[Any]) -> Any:
        return children[0]

    test_statement_eof = statement_eof
    expression_eof = statement_eof

    # ----------------------------------------------------------------- statements

    def or_replace(self, _: list[Any]) -> _Flag:
        return _Flag("or_replace")

    def source_kw(self, _: list[Any]) -> _Flag:
        return _Flag("source")

    def if_not_exists(self, _: list[Any]) -> _Flag:
        return _Flag("if_not_exists")

    def not_exists(self, _: list[Any]) -> _Flag:
        return _Flag("not_exists")

    def if_exists(self, _: list[Any]) -> _Flag:
        return _Flag("if_exists")

    def delete_topic(self, _: list[Any]) -> _Flag:
        return _Flag("delete_topic")

    def extended(self, _: list[Any]) -> _Flag:
        return _Flag("extended")

    def all_kw(self, _: list[Any]) -> str:
        return "ALL"

    def source_kind(self, children: list[Token]) -> str:
        return str(children[0]).upper()

    def show_kw(self, _: list[Any]) -> _Flag:
        return _Flag("show")

    @staticmethod
    def _flags(children: list[Any]) -> set[str]:
        return {c.name for c in children if isinstance(c, _Flag)}

    @staticmethod
    def _plain(children: list[Any]) -> list[Any]:
        return [c for c in children if not isinstance(c, _Flag)]

    @v_args(meta=True)
    def create_source(self, meta: Any, children: list[Any]) -> ast.CreateSource:
        flags = self._flags(children)
        kind, name, *rest = self._plain(children)
        elements: tuple[ast.TableElement, ...] = ()
        properties: dict[str, Any] = {}
        for part in rest:
            if isinstance(part, tuple):
                elements = part
            elif isinstance(part, dict):
                properties = part
        for element in elements:
            self._check_constraint(kind, element)
        return ast.CreateSource(
            kind=kind,
            name=name,
            elements=elements,
            properties=properties,
            or_replace="or_replace" in flags,
            if_not_exists="if_not_exists" in flags,
            is_source="source" in flags,
        )

    def _check_constraint(self, kind: str, element: ast.TableElement) -> None:
        found = self.locations.get(id(element))
        line, col = (found[1], found[2]) if found else (None, None)
        if kind == "TABLE" and element.constraint == "KEY":
            message = (
                f"Column `{element.name}` is a 'KEY' column: please use 'PRIMARY KEY' for tables.{_KEY_KINDS}"
            )
        elif kind == "STREAM" and element.constraint == "PRIMARY KEY":
            message = (
                f"Column `{element.name}` is a 'PRIMARY KEY' column: please use 'KEY' for streams.{_KEY_KINDS}"
            )
        else:
            return
        raise ParseError(message, line=line, column=col)

    def create_as_select(self, children: list[Any]) -> ast.CreateAsSelect:
        flags = self._flags(children)
        kind, name, *rest = self._plain(children)
        properties = next((p for p in rest if isinstance(p, dict)), {})
        return ast.CreateAsSelect(
            kind=kind,
            name=name,
            query=rest[-1],
            properties=properties,
            or_replace="or_replace" in flags,
            if_not_exists="if_not_exists" in flags,
        )

    @v_args(meta=True)
    def insert_into(self, meta: Any, children: list[Any]) -> ast.InsertInto:
        target, *rest = children
        properties = next((p for p in rest if isinstance(p, dict)), {})
        statement = ast.InsertInto(target=target, query=rest[-1], properties=properties)
        # The statement's location is its target's: errors about the target are placed there.
        found = _INSERT_INTO.match(self._text, meta.start_pos) if not getattr(meta, "empty", True) else None
        if found is not None:
            line, col = self._chunk.position(*_line_col(self._text, found.end()))
            self.locations[id(statement)] = (statement, line, col)
        return statement

    def insert_values(self, children: list[Any]) -> ast.InsertValues:
        target, *rest = children
        columns = rest[0] if len(rest) == 2 else None
        if not rest[-1]:
            raise ParseError("Expected some values for INSERT INTO statement.")  # ksqlDB's words
        return ast.InsertValues(target=target, columns=columns, values=rest[-1])

    def drop_source(self, children: list[Any]) -> ast.DropSource:
        flags = self._flags(children)
        kind, name = self._plain(children)
        return ast.DropSource(
            kind=kind,
            name=name,
            if_exists="if_exists" in flags,
            delete_topic="delete_topic" in flags,
        )

    def create_type(self, children: list[Any]) -> ast.CreateType:
        name, sql_type = self._plain(children)
        return ast.CreateType(
            name=name, type=sql_type, if_not_exists="if_not_exists" in self._flags(children)
        )

    def drop_type(self, children: list[Any]) -> ast.DropType:
        (name,) = self._plain(children)
        return ast.DropType(name=name, if_exists="if_exists" in self._flags(children))

    def set_property(self, children: list[Token]) -> ast.SetProperty:
        return ast.SetProperty(name=_unquote(children[0], "'"), value=_unquote(children[1], "'"))

    def unset_property(self, children: list[Token]) -> ast.UnsetProperty:
        return ast.UnsetProperty(name=_unquote(children[0], "'"))

    def define_variable(self, children: list[Any]) -> ast.DefineVariable:
        return ast.DefineVariable(name=children[0], value=_unquote(children[1], "'"))

    def undefine_variable(self, children: list[Any]) -> ast.UndefineVariable:
        return ast.UndefineVariable(name=children[0])

    def terminate_query(self, children: list[Any]) -> ast.TerminateQuery:
        return ast.TerminateQuery(query_id=children[0])

    def pause_query(self, children: list[Any]) -> ast.PauseQuery:
        return ast.PauseQuery(query_id=children[0])

    def resume_query(self, children: list[Any]) -> ast.ResumeQuery:
        return ast.ResumeQuery(query_id=children[0])

    def alter_system(self, children: list[Token]) -> ast.AlterSystemProperty:
        name, value = (c for c in children if c.type == "STRING")
        return ast.AlterSystemProperty(name=_unquote(name, "'"), value=_unquote(value, "'"))

    def connector_kind(self, children: list[Token]) -> str:
        return str(children[0]).upper()

    def create_connector(self, children: list[Any]) -> ast.CreateConnector:
        kind, _, name, properties = self._plain(children)
        return ast.CreateConnector(
            name=name,
            connector_type=kind,
            properties=properties,
            if_not_exists="if_not_exists" in self._flags(children),
        )

    def drop_connector(self, children: list[Any]) -> ast.DropConnector:
        name = self._plain(children)[-1]
        return ast.DropConnector(name=name, if_exists="if_exists" in self._flags(children))

    def alter_source(self, children: list[Any]) -> ast.AlterSource:
        kind, name, *columns = children
        return ast.AlterSource(kind=kind, name=name, columns=tuple(columns))

    def alter_option(self, children: list[Any]) -> ast.TableElement:
        name, sql_type = [c for c in children if not isinstance(c, Token)]
        return ast.TableElement(name=name, type=sql_type)

    def assert_topic(self, children: list[Any]) -> ast.AssertStatement:
        flags = self._flags(children)
        name, *rest = self._plain(children)
        return ast.AssertStatement(
            kind="TOPIC",
            target=self._name_or_string(name),
            exists="not_exists" not in flags,
            properties=next((p for p in rest if isinstance(p, dict)), {}),
            timeout_ms=next((c.value for c in rest if isinstance(c, _Clause)), None),
        )

    def assert_schema(self, children: list[Any]) -> ast.AssertStatement:
        flags = self._flags(children)
        clauses = {c.name: c.value for c in children if isinstance(c, _Clause)}
        # ksqlDB's AST builder refuses these while the statement is built, in these words.
        if "subject" not in clauses and "id" not in clauses:
            raise ParseError("ASSERT SCHEMA statements much include a subject name or an id")
        return ast.AssertStatement(
            kind="SCHEMA",
            target=clauses.get("subject"),
            exists="not_exists" not in flags,
            schema_id=clauses.get("id"),
            timeout_ms=clauses.get("timeout"),
        )

    def subject(self, children: list[Any]) -> _Clause:
        return _Clause("subject", self._name_or_string(children[0]))

    def schema_id(self, children: list[Any]) -> _Clause:
        literal = children[0]
        if not (isinstance(literal, E.Literal) and literal.type == T.INTEGER):
            raise ParseError("ID must be an integer")  # ksqlDB's words
        return _Clause("id", literal.value)

    def timeout(self, children: list[Any]) -> _Clause:
        return _Clause("timeout", children[0])

    @staticmethod
    def _name_or_string(value: Any) -> str:
        if isinstance(value, Token) and value.type == "STRING":
            return _unquote(value, "'")
        return str(value)

    def assert_values(self, children: list[Any]) -> ast.AssertStatement:
        target, *rest = children
        columns = rest[0] if len(rest) == 2 else None
        return ast.AssertStatement(kind="VALUES", target=target, columns=columns, values=rest[-1])

    def assert_tombstone(self, children: list[Any]) -> ast.AssertStatement:
        statement = self.assert_values(children)
        return dataclasses.replace(statement, kind="TOMBSTONE")

    def assert_source(self, children: list[Any]) -> ast.AssertStatement:
        kind, name, *rest = children
        return ast.AssertStatement(
            kind=kind,
            target=name,
            elements=next((p for p in rest if isinstance(p, tuple)), ()),
            properties=next((p for p in rest if isinstance(p, dict)), {}),
        )

    def run_script(self, children: list[Token]) -> ast.RunScript:
        return ast.RunScript(path=_unquote(children[0], "'"))

    def list_things(self, children: list[Any]) -> ast.Informational:
        target = children[1]
        suffix = " EXTENDED" if "extended" in self._flags(children) else ""
        return ast.Informational(kind=f"LIST {target}{suffix}")

    def list_target(self, children: list[Token]) -> str:
        return " ".join(str(c).upper() for c in children)

    def describe(self, children: list[Any]) -> ast.Informational:
        target = children[0]
        suffix = " EXTENDED" if "extended" in self._flags(children) else ""
        if isinstance(target, ast.Informational):
            return dataclasses.replace(target, kind=target.kind + suffix)
        return ast.Informational(kind="DESCRIBE" + suffix, target=target)

    def describe_target(self, children: list[Any]) -> Any:
        plain = self._plain(children)
        extended = " EXTENDED" if self._flags(children) else ""
        target = plain[0]
        if isinstance(target, ast.Informational):
            return target
        if isinstance(target, Token) and target.type == "STREAMS":
            return ast.Informational(kind="DESCRIBE STREAMS")
        if target == "TABLES":
            return ast.Informational(kind="DESCRIBE TABLES")
        return ast.Informational(kind="DESCRIBE" + extended, target=target)

    def describe_function(self, children: list[Any]) -> ast.Informational:
        return ast.Informational(kind="DESCRIBE FUNCTION", target=children[0])

    def describe_connector(self, children: list[Any]) -> ast.Informational:
        return ast.Informational(kind="DESCRIBE CONNECTOR", target=children[1])

    @v_args(meta=True)
    def print_topic(self, meta: Any, children: list[Any]) -> ast.PrintTopic:
        topic, *tails = children
        found = {c.name: c.value for c in tails}
        interval = found.get("interval", 1)
        if interval < 1:
            raise self._error(f"INTERVAL must be greater than one, but was: {interval}", meta)  # ksqlDB's words
        return ast.PrintTopic(
            topic=self._name_or_string(topic),
            from_beginning=found.get("from_beginning", False),
            interval=interval,
            limit=found.get("limit"),
        )

    def print_from_beginning(self, children: list[Any]) -> _Clause:
        return _Clause("from_beginning", True)

    @v_args(meta=True)
    def print_interval(self, meta: Any, children: list[Token]) -> _Clause:
        return _Clause("interval", self._integer_token(children[0], meta))

    @v_args(meta=True)
    def print_limit(self, meta: Any, children: list[Token]) -> _Clause:
        return _Clause("limit", self._integer_token(children[0], meta))

    @v_args(meta=True)
    def explain(self, meta: Any, children: list[Any]) -> ast.Informational:
        target = children[0]
        if isinstance(target, ast.Statement):
            start = meta.start_pos
            body = self._text[start : meta.end_pos]
            body = re.sub(r"^EXPLAIN\s+", "", body, flags=re.I)
            return ast.Informational(kind="EXPLAIN", target=body, statement=target)
        return ast.Informational(kind="EXPLAIN", target=target)

    # ----------------------------------------------------------------- elements

    def table_elements(self, children: list[ast.TableElement]) -> tuple[ast.TableElement, ...]:
        return tuple(children)

    @v_args(meta=True)
    def table_element(self, meta: Any, children: list[Any]) -> ast.TableElement:
        name, sql_type, *constraint = children
        kind, header_key = constraint[0] if constraint else (None, None)
        element = ast.TableElement(name=name, type=sql_type, constraint=kind, header_key=header_key)
        return self._remember(element, meta)

    def key_constraint(self, _: list[Any]) -> tuple[str, None]:
        return ("KEY", None)

    def primary_key_constraint(self, _: list[Any]) -> tuple[str, None]:
        return ("PRIMARY KEY", None)

    def headers_constraint(self, _: list[Any]) -> tuple[str, None]:
        return ("HEADERS", None)

    def header_constraint(self, children: list[Token]) -> tuple[str, str]:
        return ("HEADER", _unquote(children[0], "'"))

    def with_properties(self, children: list[tuple[str, Any]]) -> dict[str, Any]:
        return dict(children)

    def property(self, children: list[Any]) -> tuple[str, Any]:
        key, value = children
        name = _unquote(key, "'") if isinstance(key, Token) and key.type == "STRING" else key
        literal = value
        return name.upper(), literal.value

    def column_list(self, children: list[str]) -> tuple[str, ...]:
        return tuple(children)

    def values(self, children: list[Any]) -> tuple[E.Expr, ...]:
        return tuple(c for c in children if c is not None)

    # ----------------------------------------------------------------- types

    def array_type(self, children: list[Any]) -> SqlType:
        # ARRAY<t> and ksqlDB's postfix form `t ARRAY`, both an array of t.
        (element,) = [c for c in children if not isinstance(c, Token)]
        return T.Array(element)

    def map_type(self, children: list[SqlType]) -> SqlType:
        return T.Map(children[0], children[1])

    def struct_type(self, children: list[Any]) -> SqlType:
        fields = tuple(c for c in children if isinstance(c, T.Field))  # "STRUCT<>" lexes "<>"
        try:
            return T.Struct(fields)
        except Exception as exc:
            raise ParseError(str(exc)) from exc

    def struct_type_field(self, children: list[Any]) -> T.Field:
        return T.Field(children[0], children[1])

    @v_args(meta=True)
    def decimal_type(self, meta: Any, children: list[Token]) -> SqlType:
        precision, scale = (self._integer_token(c, meta) for c in children)
        # ksqlDB's words (its SqlDecimal), refused while the statement is prepared
        for holds, rule in ((precision > 0, "precision must be >= 1"), (scale >= 0, "scale must be >= 0"),
                            (precision >= scale, "precision must be >= scale")):
            if not holds:
                raise ParseError(f"Failed to prepare statement: DECIMAL {rule}: DECIMAL({precision},{scale})")
        try:
            return T.Decimal(precision, scale)
        except Exception as exc:
            raise self._error(f"Invalid DECIMAL type: {exc}", meta) from exc

    def type_parameter(self, _: list[Any]) -> None:
        return None

    def named_type(self, children: list[str]) -> SqlType:
        name = children[0]  # parameters, as in VARCHAR(10), are read and ignored like ksqlDB
        found = T.primitive_named(name)
        if found is not None:
            return found
        custom = self._types.get(name.upper())
        return custom if custom is not None else ast.TypeReference(name)

    def _integer_token(self, token: Token, meta: Any) -> int:
        if not _INT_TEXT.fullmatch(token):
            raise self._error(f"Expected a whole number but got '{token}'.", meta)
        return int(token)

    # ----------------------------------------------------------------- queries

    def query(self, children: list[Any]) -> ast.Query:
        select, relation, *clauses = children
        found = {c.name: c.value for c in clauses}
        return ast.Query(
            select=select,
            from_=relation,
            window=found.get("window"),
            where=found.get("where"),
            group_by=found.get("group_by"),
            partition_by=found.get("partition_by"),
            having=found.get("having"),
            emit=found.get("emit"),
            limit=found.get("limit"),
        )

    def select_items(self, children: list[Any]) -> tuple[Any, ...]:
        return tuple(children)

    def select_column(self, children: list[Any]) -> ast.SelectColumn:
        alias = children[1] if len(children) > 1 else None
        return ast.SelectColumn(expr=children[0], alias=alias)

    def select_all_of(self, children: list[str]) -> ast.AllColumns:
        return ast.AllColumns(source=children[0])

    def select_all(self, _: list[Any]) -> ast.AllColumns:
        return ast.AllColumns()

    def select_struct_all(self, children: list[Any]) -> ast.StructAll:
        return ast.StructAll(base=children[0])

    def window_clause(self, children: list[Any]) -> _Clause:
        return _Clause("window", children[-1])

    def where_clause(self, children: list[Any]) -> _Clause:
        return _Clause("where", children[0])

    def group_by_clause(self, children: list[Any]) -> _Clause:
        if not children[0]:
            raise ParseError("GROUP BY requires at least one expression")  # ksqlDB's words
        return _Clause("group_by", children[0])

    def partition_by_clause(self, children: list[Any]) -> _Clause:
        if not children[0]:
            raise ParseError("PARTITION BY requires at least one expression")  # ksqlDB's words
        return _Clause("partition_by", children[0])

    def having_clause(self, children: list[Any]) -> _Clause:
        return _Clause("having", children[0])

    def emit_clause(self, children: list[Token]) -> _Clause:
        return _Clause("emit", str(children[0]).upper())

    @v_args(meta=True)
    def limit_clause(self, meta: Any, children: list[Token]) -> _Clause:
        # ksqlDB parses a signed number; a negative LIMIT is refused by the query's kind
        # (pull queries name it), a fraction as ksqlDB's AST builder does.
        number = children[-1]
        if not _INT_TEXT.fullmatch(number):
            raise self._error("Value must be integer for command: LIMIT", number)
        return _Clause("limit", -int(number) if len(children) > 1 else int(number))

    def grouping(self, children: list[Any]) -> tuple[E.Expr, ...]:
        return tuple(children)

    def _window_parts(self, children: list[Any]) -> tuple[list[int], dict[str, int]]:
        durations = [c for c in children if isinstance(c, int)]
        clauses = {c.name: c.value for c in children if isinstance(c, _Clause)}
        return durations, clauses

    def tumbling_window(self, children: list[Any]) -> ast.WindowExpr:
        (size,), clauses = self._window_parts(children)
        return ast.WindowExpr(
            kind="TUMBLING",
            size_ms=size,
            retention_ms=clauses.get("retention"),
            grace_ms=clauses.get("grace"),
        )

    def hopping_window(self, children: list[Any]) -> ast.WindowExpr:
        (size, advance), clauses = self._window_parts(children)
        return ast.WindowExpr(
            kind="HOPPING",
            size_ms=size,
            advance_ms=advance,
            retention_ms=clauses.get("retention"),
            grace_ms=clauses.get("grace"),
        )

    def session_window(self, children: list[Any]) -> ast.WindowExpr:
        (gap,), clauses = self._window_parts(children)
        return ast.WindowExpr(
            kind="SESSION",
            gap_ms=gap,
            retention_ms=clauses.get("retention"),
            grace_ms=clauses.get("grace"),
        )

    def retention(self, children: list[int]) -> _Clause:
        return _Clause("retention", children[0])

    def window_grace(self, children: list[int]) -> _Clause:
        return _Clause("grace", children[0])

    grace = window_grace

    @v_args(meta=True)
    def duration(self, meta: Any, children: list[Any]) -> int:
        amount, unit = children
        if not _INT_TEXT.fullmatch(amount):
            raise self._error(
                f"Expected a whole number of {unit.lower()}s but got '{amount}'.", meta
            )
        return int(amount) * _UNIT_MS[unit]

    def time_unit(self, children: list[Token]) -> str:
        return _unit_singular(children[0])

    def relation(self, children: list[Any]) -> ast.Relation:
        left: ast.Relation = children[0]
        for join_type, right, within, criteria in children[1:]:
            left = ast.Join(
                left=left, right=right, join_type=join_type, criteria=criteria, within=within
            )
        return left

    @v_args(meta=True)
    def aliased_relation(self, meta: Any, children: list[Any]) -> ast.AliasedSource:
        alias = children[1] if len(children) > 1 else None
        return self._remember(ast.AliasedSource(name=children[0], alias=alias), meta)

    def join_part(self, children: list[Any]) -> tuple[Any, ...]:
        join_type, right, *rest = children
        within = rest[0] if len(rest) == 2 else None
        return (join_type, right, within, rest[-1])

    def inner_join(self, _: list[Any]) -> str:
        return "INNER"

    def left_join(self, _: list[Any]) -> str:
        return "LEFT"

    def right_join(self, _: list[Any]) -> str:
        return "RIGHT"

    def full_join(self, _: list[Any]) -> str:
        return "FULL"

    def within_single(self, children: list[Any]) -> ast.WithinExpr:
        grace = children[1].value if len(children) > 1 else None
        return ast.WithinExpr(before_ms=children[0], after_ms=children[0], grace_ms=grace)

    def within_pair(self, children: list[Any]) -> ast.WithinExpr:
        grace = children[2].value if len(children) > 2 else None
        return ast.WithinExpr(before_ms=children[0], after_ms=children[1], grace_ms=grace)

    # ----------------------------------------------------------------- expressions

    def or_(self, children: list[E.Expr]) -> E.Expr:
        return E.Logical("OR", children[0], children[1])

    def and_(self, children: list[E.Expr]) -> E.Expr:
        return E.Logical("AND", children[0], children[1])

    def not_(self, children: list[E.Expr]) -> E.Expr:
        return E.Not(children[0])

    def comparison(self, children: list[Any]) -> E.Expr:
        return E.Comparison(children[1], children[0], children[2])

    def comparison_operator(self, children: list[Token]) -> str:
        op = str(children[0])
        return "<>" if op == "!=" else op

    def between(self, children: list[E.Expr]) -> E.Expr:
        return E.Between(children[0], children[1], children[2])

    def not_between(self, children: list[E.Expr]) -> E.Expr:
        return E.Between(children[0], children[1], children[2], negated=True)

    def in_(self, children: list[E.Expr]) -> E.Expr:
        return E.In(children[0], tuple(children[1:]))

    def not_in(self, children: list[E.Expr]) -> E.Expr:
        return E.In(children[0], tuple(children[1:]), negated=True)

    @v_args(meta=True)
    def like(self, meta: Any, children: list[Any]) -> E.Expr:
        return self._like(meta, children, negated=False)

    @v_args(meta=True)
    def not_like(self, meta: Any, children: list[Any]) -> E.Expr:
        return self._like(meta, children, negated=True)

    def _like(self, meta: Any, children: list[Any], *, negated: bool) -> E.Expr:
        escape = None
        if len(children) > 2:
            escape = _unquote(children[2], "'")
            if len(escape) != 1:
                # ksqlDB's text prints the escape's location as a Java Optional.
                token = children[2]
                line, col = self._chunk.position(token.line, token.column) if isinstance(token, Token) else self._at(meta)
                raise ParseError(
                    f"Optional[Line: {line}, Col: {col}]: Expected single character escape but got: {escape}"
                )
        return E.Like(children[0], children[1], escape=escape, negated=negated)

    def is_null(self, children: list[E.Expr]) -> E.Expr:
        return E.IsNull(children[0])

    def is_not_null(self, children: list[E.Expr]) -> E.Expr:
        return E.IsNull(children[0], negated=True)

    def is_distinct(self, children: list[E.Expr]) -> E.Expr:
        return E.Comparison("IS DISTINCT FROM", children[0], children[1])

    def is_not_distinct(self, children: list[E.Expr]) -> E.Expr:
        return E.Comparison("IS NOT DISTINCT FROM", children[0], children[1])

    @v_args(meta=True)
    def at_time_zone(self, meta: Any, children: list[Any]) -> E.Expr:
        # ksqlDB's grammar has the form but its AST builder refuses it, with these words.
        raise self._error(
            "Failed to prepare statement: not yet implemented\n"
            "AT TIME ZONE is not supported: use CONVERT_TZ or FORMAT_TIMESTAMP with a time zone.",
            meta,
        )

    @v_args(meta=True)
    def type_constructor(self, meta: Any, children: list[Any]) -> E.Expr:
        # `<type> '<value>'`: ksqlDB's AST builder knows only DECIMAL (written quoted, as
        # DECIMAL is reserved) and refuses any other type name, with these words.
        name, value = children
        if name == "DECIMAL":
            text = _unquote(value, "'").strip()
            try:
                return _decimal_literal(decimal.Decimal(text))
            except decimal.InvalidOperation:
                raise self._error(
                    f"Failed to prepare statement: '{text}' is not a DECIMAL value.",
                    meta,
                ) from None
        line, col = self._at(meta)
        raise self._error(
            f"Failed to prepare statement: Unknown type: {name}, location:Optional[Line: {line}, Col: {col}]",
            meta,
        )

    def concat(self, children: list[E.Expr]) -> E.Expr:
        return _call("CONCAT", (children[0], children[1]))

    def arithmetic(self, children: list[Any]) -> E.Expr:
        return E.Arithmetic(str(children[1]), children[0], children[2])

    @v_args(meta=True)
    def negate(self, meta: Any, children: list[Any]) -> E.Expr:
        operand = children[1]
        spelled = self._text[meta.start_pos : meta.end_pos]
        number = _NEGATIVE_NUMBER.match(spelled)
        if number is None:
            return E.Negate(operand)
        # In ksqlDB the sign belongs to the number, so "-1[2]" subscripts the literal -1.
        return _negate_leftmost(operand, "-" + number.group()[1:].strip())

    def plus(self, children: list[Any]) -> E.Expr:
        return children[1]

    @v_args(meta=True)
    def subscript(self, meta: Any, children: list[E.Expr]) -> E.Expr:
        return E.Subscript(children[0], children[1])

    def dereference(self, children: list[Any]) -> E.Expr:
        return E.Dereference(children[0], children[1])

    @v_args(meta=True)
    def column(self, meta: Any, children: list[str]) -> E.Expr:
        return self._remember(E.ColumnRef(children[0]), meta)

    @v_args(meta=True)
    def qualified_column(self, meta: Any, children: list[str]) -> E.Expr:
        return self._remember(E.ColumnRef(children[1], source=children[0]), meta)

    @v_args(meta=True)
    def call_star(self, meta: Any, children: list[str]) -> E.Expr:
        return self._remember(_call(children[0], (), star=True), meta)

    @v_args(meta=True)
    def call(self, meta: Any, children: list[Any]) -> E.Expr:
        name, *args = children
        args = [a for a in args if a is not None]
        if name.upper() in _INTERVAL_FUNCTIONS and args:
            first = args[0]
            if (
                isinstance(first, E.ColumnRef)
                and first.source is None
                and _unit_singular(first.name) in _UNIT_MS
            ):
                args[0] = E.IntervalUnit(_unit_singular(first.name) + "S")
        return self._remember(_call(name, tuple(args)), meta)

    def interval_unit(self, children: list[Token]) -> E.Expr:
        return E.IntervalUnit(_unit_singular(children[0]) + "S")

    def simple_case(self, children: list[Any]) -> E.Expr:
        operand, *rest = children
        return self._case(operand, rest)

    def searched_case(self, children: list[Any]) -> E.Expr:
        return self._case(None, children)

    @staticmethod
    def _case(operand: E.Expr | None, rest: list[Any]) -> E.Expr:
        whens = tuple(w for w in rest if isinstance(w, E.WhenClause))
        default = rest[-1] if rest and not isinstance(rest[-1], E.WhenClause) else None
        return E.Case(operand, whens, default)

    def when_clause(self, children: list[E.Expr]) -> E.Expr:
        return E.WhenClause(children[0], children[1])

    def cast(self, children: list[Any]) -> E.Expr:
        return E.Cast(children[0], children[1], semantics=cast_semantics(children[1]))

    def create_array(self, children: list[Any]) -> E.Expr:
        return E.CreateArray(tuple(c for c in children if c is not None))

    def create_map(self, children: list[Any]) -> E.Expr:
        return E.CreateMap(tuple(c for c in children if c is not None))

    def map_entry(self, children: list[E.Expr]) -> E.Expr:
        return E.MapEntry(children[0], children[1])

    def create_struct(self, children: list[Any]) -> E.Expr:
        return E.CreateStruct(tuple(c for c in children if c is not None))

    def struct_field(self, children: list[Any]) -> E.Expr:
        return E.StructField(children[0], children[1])

    def paren(self, children: list[E.Expr]) -> E.Expr:
        return children[0]

    def lambda_bare(self, children: list[Any]) -> E.Expr:
        return _make_lambda((children[0],), children[1])

    @v_args(meta=True)
    def lambda_paren(self, meta: Any, children: list[Any]) -> E.Expr:
        param = children[0]
        if not isinstance(param, E.ColumnRef) or param.source is not None:
            raise self._error(
                f"Expected a lambda parameter name before '=>' but got {E.format_sql(param)}.",
                meta,
            )
        return _make_lambda((param.name,), children[1])

    def lambda_list(self, children: list[Any]) -> E.Expr:
        params = tuple(children[:-1])
        if len(set(params)) < len(params):
            # ksqlDB's lambda node refuses this while the statement is built, listing them all.
            raise ParseError(f"Lambda arguments have duplicates: [{', '.join(params)}]")
        return _make_lambda(params, children[-1])

    @v_args(meta=True)
    def source_name(self, meta: Any, children: list[Any]) -> Any:
        name = children[0]
        if not _VALID_SOURCE_NAME.fullmatch(str(name)):
            line, col = self._at(meta)
            raise ParseError(
                f"Illegal argument at Line: {line}, Col: {col}. Source names may only contain "
                "alphanumeric values, '_' or '-'."
            )
        return name

    @v_args(meta=True)
    def number(self, meta: Any, children: list[Token]) -> E.Literal:
        try:
            return _number_literal(str(children[0]))
        except ParseError as exc:
            # ksqlDB's ParsingException: its detail after the literal's position.
            line, col = self._at(meta)
            raise ParseError(f"line {line}:{col}: {exc.reason}") from None

    def string(self, children: list[Token]) -> E.Literal:
        return E.Literal(_unquote(children[0], "'"), T.STRING)

    def true(self, _: list[Any]) -> E.Literal:
        return E.Literal(True, T.BOOLEAN)

    def false(self, _: list[Any]) -> E.Literal:
        return E.Literal(False, T.BOOLEAN)

    def null(self, _: list[Any]) -> E.Literal:
        return E.Literal(None, None)


_VALID_SOURCE_NAME = re.compile(r"[a-zA-Z0-9_-]*")


def _number_literal(text: str) -> E.Literal:
    """Type a numeric literal as ksqlDB does (see the module docstring)."""
    unsigned = text.lstrip("-")
    if _INT_TEXT.fullmatch(unsigned):
        value = int(text)
        if T.INT_MIN <= value <= T.INT_MAX:
            return E.Literal(value, T.INTEGER)
        if T.BIGINT_MIN <= value <= T.BIGINT_MAX or value == T.BIGINT_MAX + 1:
            # 2**63 is only valid negated; the negative form re-types it.
            return E.Literal(value, T.BIGINT)
        raise ParseError(f"Invalid numeric literal: {unsigned}")
    if "e" in unsigned.lower():
        value = float(text)
        if math.isinf(value):
            raise ParseError(f"Number overflows DOUBLE: {unsigned}")
        return E.Literal(value, T.DOUBLE)
    return _decimal_literal(decimal.Decimal(text))


def _decimal_literal(value_dec: decimal.Decimal) -> E.Literal:
    """A DECIMAL literal with precision and scale from its digits (``0.05`` is DECIMAL(2, 2))."""
    if not value_dec.is_finite():
        raise decimal.InvalidOperation(str(value_dec))
    exponent = value_dec.as_tuple().exponent
    assert isinstance(exponent, int)
    if exponent > 0:  # 1E+2: a whole number, its digits written out
        value_dec = value_dec.quantize(decimal.Decimal(1))
        exponent = 0
    scale = max(-exponent, 0)
    precision = max(len(value_dec.as_tuple().digits), scale, 1)
    return E.Literal(value_dec, T.Decimal(precision, scale))


def _negate_leftmost(operand: E.Expr, negative_text: str) -> E.Expr:
    if isinstance(operand, E.Literal):
        return _number_literal(negative_text)
    if isinstance(operand, E.Subscript | E.Dereference):
        return dataclasses.replace(operand, base=_negate_leftmost(operand.base, negative_text))
    raise InternalError(f"A negative number starts '{operand}' but is not its leftmost operand.")


def _make_lambda(params: tuple[str, ...], body: E.Expr) -> E.Lambda:
    return E.Lambda(params, _bind(body, frozenset(params)))


def _bind(node: E.Expr, params: frozenset[str]) -> E.Expr:
    """Turn unqualified references to lambda parameters into ``LambdaVariable``."""
    if isinstance(node, E.ColumnRef):
        if node.source is None and node.name in params:
            return E.LambdaVariable(node.name)
        return node
    if isinstance(node, E.Lambda):
        inner = params - set(node.params)
        return E.Lambda(node.params, _bind(node.body, inner)) if inner else node
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        new: Any
        if isinstance(value, E.Expr):
            new = _bind(value, params)
        elif isinstance(value, tuple) and any(isinstance(v, E.Expr) for v in value):
            new = tuple(_bind(v, params) for v in value)
        else:
            continue
        if new != value:
            changes[f.name] = new
    return dataclasses.replace(node, **changes) if changes else node  # type: ignore[type-var]
