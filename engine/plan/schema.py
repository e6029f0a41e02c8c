"""Logical schemas: the key, value and header columns of a source or of a step's output.

Text form as ksqlDB prints it: ``"`K` STRING KEY, `ID` BIGINT, `H` BYTES HEADER('x')"``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from lark import Lark, UnexpectedInput

from engine.errors import PlanError
from engine.plan import types as T
from engine.plan.types import TYPE_RULES, SqlType, TypeTransformer, identifier, quote_identifier


class Namespace(enum.Enum):
    """Where a column lives in a record."""

    KEY = "KEY"
    VALUE = "VALUE"
    HEADERS = "HEADERS"


# Pseudo columns every stream/table row has, with their types.
ROWTIME = "ROWTIME"
ROWPARTITION = "ROWPARTITION"
ROWOFFSET = "ROWOFFSET"
WINDOWSTART = "WINDOWSTART"
WINDOWEND = "WINDOWEND"
PSEUDO_COLUMNS: dict[str, SqlType] = {
    ROWTIME: T.BIGINT,
    ROWPARTITION: T.INTEGER,
    ROWOFFSET: T.BIGINT,
}
WINDOW_BOUNDS: dict[str, SqlType] = {WINDOWSTART: T.BIGINT, WINDOWEND: T.BIGINT}
HEADERS_TYPE = T.Array(T.Struct((T.Field("KEY", T.STRING), T.Field("VALUE", T.BYTES))))


@dataclass(frozen=True, slots=True)
class Column:
    """One column: name, type, namespace and, for ``HEADER('k')`` columns, the header key."""

    name: str
    type: SqlType
    namespace: Namespace = Namespace.VALUE
    header_key: str | None = None

    def __str__(self) -> str:
        text = f"{quote_identifier(self.name)} {self.type}"
        if self.namespace is Namespace.KEY:
            return text + " KEY"
        if self.namespace is Namespace.HEADERS:
            if self.header_key is None:
                return text + " HEADERS"
            return text + " HEADER('" + self.header_key.replace("'", "''") + "')"
        return text


@dataclass(frozen=True, slots=True)
class LogicalSchema:
    """An ordered set of uniquely named columns; key columns first by convention."""

    columns: tuple[Column, ...]

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for c in self.columns:
            if c.name in seen:
                raise PlanError(f"Schema has the column name `{c.name}` twice.")
            seen.add(c.name)

    @property
    def key(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.namespace is Namespace.KEY)

    @property
    def value(self) -> tuple[Column, ...]:
        """Value columns, including header columns (they travel with the value)."""
        return tuple(c for c in self.columns if c.namespace is not Namespace.KEY)

    @property
    def headers(self) -> tuple[Column, ...]:
        return tuple(c for c in self.columns if c.namespace is Namespace.HEADERS)

    def find(self, name: str) -> Column | None:
        for c in self.columns:
            if c.name == name:
                return c
        return None

    def __iter__(self) -> Iterator[Column]:
        return iter(self.columns)

    def __len__(self) -> int:
        return len(self.columns)

    def types(self) -> dict[str, SqlType]:
        return {c.name: c.type for c in self.columns}

    def __str__(self) -> str:
        return ", ".join(str(c) for c in self.columns)

    @staticmethod
    def parse(text: str) -> LogicalSchema:
        """Parse the text form; unquoted names are upper-cased as ksqlDB does. A key column
        is ``KEY`` or, as ksqlDB writes a table's, ``PRIMARY KEY``."""
        return _parse_schema(text)


_SCHEMA_GRAMMAR = (
    r"""
    schema: [column ("," column)*]
    column: name type [ns]
    ns: PRIMARY_KEY | KEY | HEADERS | header
    header: "HEADER"i "(" STRING_LIT ")"
    PRIMARY_KEY: /PRIMARY\s+KEY\b/i
    KEY: /KEY\b/i
    HEADERS: /HEADERS\b/i
    STRING_LIT: /'([^']|'')*'/
"""
    + TYPE_RULES
)


class _ToSchema(TypeTransformer):
    """Lark tree -> LogicalSchema: the type rules plus columns and their namespaces."""

    def schema(self, items: list[Column | None]) -> LogicalSchema:
        return LogicalSchema(tuple(c for c in items if c is not None))

    def column(self, items: list) -> Column:  # type: ignore[type-arg]
        name, sql_type, ns = items
        if ns is None:
            return Column(identifier(name), sql_type)
        return Column(identifier(name), sql_type, ns[0], ns[1])

    def ns(self, items: list) -> tuple[Namespace, str | None]:  # type: ignore[type-arg]
        item = items[0]
        if isinstance(item, tuple):
            return item
        if str(item).upper().split()[0] in ("KEY", "PRIMARY"):  # a table's key, as ksqlDB writes it
            return (Namespace.KEY, None)
        return (Namespace.HEADERS, None)

    def header(self, items: list) -> tuple[Namespace, str]:  # type: ignore[type-arg]
        return (Namespace.HEADERS, str(items[0])[1:-1].replace("''", "'"))


@lru_cache(maxsize=1)
def _schema_parser() -> Lark:
    return Lark(_SCHEMA_GRAMMAR, start="schema", parser="earley")


@lru_cache(maxsize=4096)
def _parse_schema(text: str) -> LogicalSchema:
    try:
        tree = _schema_parser().parse(text)
    except UnexpectedInput as exc:
        raise PlanError(
            f"Cannot parse schema '{text}': unexpected input at column {exc.column}."
        ) from exc
    try:
        result = _ToSchema().transform(tree)
    except Exception as exc:
        cause = exc.__context__ if isinstance(exc.__context__, PlanError) else exc
        raise PlanError(f"Cannot parse schema '{text}': {cause}") from exc
    assert isinstance(result, LogicalSchema)
    return result
