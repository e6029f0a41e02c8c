"""The statement tree the parser produces and the analyser consumes.

Statements and query clauses are frozen dataclasses holding tuples; expressions inside
them are the nodes of ``engine.plan.expr``. Durations are already converted to
milliseconds and identifiers are already normalised (unquoted upper-cased, quoted kept).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeVar, dataclass_transform

from engine.plan.expr import Expr
from engine.plan.types import SqlType

SourceKind: TypeAlias = Literal["STREAM", "TABLE"]
JoinType: TypeAlias = Literal["INNER", "LEFT", "RIGHT", "FULL"]
WindowKind: TypeAlias = Literal["TUMBLING", "HOPPING", "SESSION"]

_A = TypeVar("_A")


@dataclass_transform(frozen_default=True, kw_only_default=True)
def _ast(cls: type[_A]) -> type[_A]:
    return dataclass(frozen=True, slots=True, kw_only=True)(cls)


class Statement:
    """Base of all statements."""


@dataclass(frozen=True, slots=True)
class TypeReference(SqlType):
    """A type named by ``CREATE TYPE`` that the parser could not resolve; the analyser does.

    ``base`` is None: code that switches on the base type must resolve the reference first.
    """

    name: str
    base: Any = None

    def __str__(self) -> str:
        return self.name


# --------------------------------------------------------------------------- elements


@_ast
class TableElement:
    """One column of ``CREATE STREAM/TABLE (...)``."""

    name: str
    type: SqlType
    constraint: Literal["KEY", "PRIMARY KEY", "HEADERS", "HEADER"] | None = None
    header_key: str | None = None


# --------------------------------------------------------------------------- queries


@_ast
class SelectColumn:
    """``expr [AS alias]`` in a select list."""

    expr: Expr
    alias: str | None = None


@_ast
class AllColumns:
    """``*`` or ``source.*`` in a select list."""

    source: str | None = None


@_ast
class StructAll:
    """``base->*`` in a select list: every field of a struct, each a column named by its field."""

    base: Expr


SelectItem: TypeAlias = SelectColumn | AllColumns | StructAll


@_ast
class WithinExpr:
    """The ``WITHIN`` window of a stream-stream join, in milliseconds."""

    before_ms: int
    after_ms: int
    grace_ms: int | None = None


@_ast
class AliasedSource:
    """A source named in FROM or JOIN, with its optional alias."""

    name: str
    alias: str | None = None


@_ast
class Join:
    """``left [type] JOIN right [WITHIN ..] ON criteria``; joins nest to the left."""

    left: Relation
    right: AliasedSource
    join_type: JoinType
    criteria: Expr
    within: WithinExpr | None = None


Relation: TypeAlias = AliasedSource | Join


@_ast
class WindowExpr:
    """``WINDOW TUMBLING|HOPPING|SESSION (...)`` with all durations in milliseconds."""

    kind: WindowKind
    size_ms: int | None = None
    advance_ms: int | None = None
    gap_ms: int | None = None
    retention_ms: int | None = None
    grace_ms: int | None = None


@_ast
class Query(Statement):
    """A SELECT; on its own it is a pull or push query."""

    select: tuple[SelectItem, ...]
    from_: Relation
    window: WindowExpr | None = None
    where: Expr | None = None
    group_by: tuple[Expr, ...] | None = None
    partition_by: tuple[Expr, ...] | None = None
    having: Expr | None = None
    emit: Literal["CHANGES", "FINAL"] | None = None
    limit: int | None = None


# --------------------------------------------------------------------------- statements


@_ast
class CreateSource(Statement):
    """``CREATE [OR REPLACE] [SOURCE] STREAM|TABLE [IF NOT EXISTS] name (...) WITH (...)``."""

    kind: SourceKind
    name: str
    elements: tuple[TableElement, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)
    or_replace: bool = False
    if_not_exists: bool = False
    is_source: bool = False


@_ast
class CreateAsSelect(Statement):
    """``CREATE [OR REPLACE] STREAM|TABLE [IF NOT EXISTS] name [WITH (...)] AS SELECT ...``."""

    kind: SourceKind
    name: str
    query: Query
    properties: dict[str, Any] = field(default_factory=dict)
    or_replace: bool = False
    if_not_exists: bool = False


@_ast
class InsertInto(Statement):
    """``INSERT INTO target [WITH (...)] SELECT ...``."""

    target: str
    query: Query
    properties: dict[str, Any] = field(default_factory=dict)


@_ast
class InsertValues(Statement):
    """``INSERT INTO target [(columns)] VALUES (values)``."""

    target: str
    columns: tuple[str, ...] | None
    values: tuple[Expr, ...]


@_ast
class DropSource(Statement):
    """``DROP STREAM|TABLE [IF EXISTS] name [DELETE TOPIC]``."""

    kind: SourceKind
    name: str
    if_exists: bool = False
    delete_topic: bool = False


@_ast
class AlterSource(Statement):
    """``ALTER STREAM|TABLE name ADD [COLUMN] col type, ...``."""

    kind: SourceKind
    name: str
    columns: tuple[TableElement, ...]


@_ast
class CreateType(Statement):
    """``CREATE TYPE [IF NOT EXISTS] name AS type``."""

    name: str
    type: SqlType
    if_not_exists: bool = False


@_ast
class DropType(Statement):
    """``DROP TYPE [IF EXISTS] name``."""

    name: str
    if_exists: bool = False


@_ast
class SetProperty(Statement):
    """``SET 'name' = 'value'``."""

    name: str
    value: str


@_ast
class UnsetProperty(Statement):
    """``UNSET 'name'``."""

    name: str


@_ast
class DefineVariable(Statement):
    """``DEFINE name = 'value'``; later ``${name}`` references are substituted."""

    name: str
    value: str


@_ast
class UndefineVariable(Statement):
    """``UNDEFINE name``."""

    name: str


@_ast
class TerminateQuery(Statement):
    """``TERMINATE query_id`` or ``TERMINATE ALL`` (query_id ``"ALL"``)."""

    query_id: str


@_ast
class PauseQuery(Statement):
    """``PAUSE query_id`` or ``PAUSE ALL`` (query_id ``"ALL"``)."""

    query_id: str


@_ast
class ResumeQuery(Statement):
    """``RESUME query_id`` or ``RESUME ALL`` (query_id ``"ALL"``)."""

    query_id: str


@_ast
class AlterSystemProperty(Statement):
    """``ALTER SYSTEM 'name' = 'value'``: a property of the whole cluster."""

    name: str
    value: str


@_ast
class CreateConnector(Statement):
    """``CREATE SOURCE|SINK CONNECTOR [IF NOT EXISTS] name WITH (...)``."""

    name: str
    connector_type: Literal["SOURCE", "SINK"]
    properties: dict[str, Any] = field(default_factory=dict)
    if_not_exists: bool = False


@_ast
class DropConnector(Statement):
    """``DROP CONNECTOR [IF EXISTS] name``."""

    name: str
    if_exists: bool = False


@_ast
class AssertStatement(Statement):
    """An ASSERT statement.

    ``kind`` is ``TOPIC`` or ``SCHEMA`` (server statements, ``exists`` False for
    ``ASSERT NOT EXISTS``), or one of the test-script forms ``VALUES``, ``TOMBSTONE``
    (``ASSERT NULL VALUES``), ``STREAM`` and ``TABLE`` (only parsed with
    ``parse(..., test_statements=True)``).
    """

    kind: Literal["TOPIC", "SCHEMA", "VALUES", "TOMBSTONE", "STREAM", "TABLE"]
    target: str | None = None
    exists: bool = True
    columns: tuple[str, ...] | None = None
    values: tuple[Expr, ...] = ()
    elements: tuple[TableElement, ...] = ()
    properties: dict[str, Any] = field(default_factory=dict)
    schema_id: Any = None
    timeout_ms: int | None = None


@_ast
class RunScript(Statement):
    """``RUN SCRIPT 'path'`` (test-script form only)."""

    path: str


@_ast
class PrintTopic(Statement):
    """``PRINT topic [FROM BEGINNING] [INTERVAL n] [LIMIT n]``: a topic's records as they arrive.

    ``interval`` shows every n-th record (the first, the n+1-th, ...); ``limit`` ends it
    after that many shown records. An unquoted topic name is upper-cased like any identifier.
    """

    topic: str
    from_beginning: bool = False
    interval: int = 1
    limit: int | None = None


@_ast
class Informational(Statement):
    """SHOW/LIST, DESCRIBE and EXPLAIN: ``kind`` like ``"LIST STREAMS EXTENDED"``.

    ``target`` is the source, function, topic or query id named, or for ``EXPLAIN`` of a
    statement the statement's text.
    """

    kind: str
    target: str | None = None
    statement: Statement | None = None
