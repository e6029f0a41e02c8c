"""Statement plans: what one statement does, as a value that saves and loads without SQL.

A statement plan holds an optional DDL command (create/drop a source in the metastore)
and an optional query plan (a persistent query: a DAG of steps ending in a sink).
Commands are versioned like steps. A transient query's plan (a push query) is not a
statement plan: nothing of it is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, ClassVar, TypeVar

from engine.errors import PlanError
from engine.plan.constraints import NON_EMPTY, OneOf
from engine.plan.schema import LogicalSchema
from engine.plan.steps import Formats, Step, TimestampColumn, WindowInfo, step_dataclass

_WIRE_NAME = re.compile(r"^[a-z][A-Za-z]*V[0-9]+$")
SOURCE_KINDS = ("STREAM", "TABLE")

COMMAND_TYPES: dict[str, type[Command]] = {}

C = TypeVar("C", bound="type[Command]")


def register_command(cls: C) -> C:
    """Class decorator: add a command version to the registry."""
    wire = getattr(cls, "TYPE", None)
    if not isinstance(wire, str) or not _WIRE_NAME.match(wire):
        raise TypeError(f"Command class {cls.__name__} has a badly formed wire name {wire!r}.")
    if wire in COMMAND_TYPES:
        raise TypeError(f"Command wire name '{wire}' is registered twice.")
    COMMAND_TYPES[wire] = cls
    return cls


@step_dataclass
class Command:
    """Base of DDL commands."""

    TYPE: ClassVar[str] = ""
    name: str


@register_command
@step_dataclass
class CreateStreamCommand(Command):
    """Registers a stream in the metastore."""

    TYPE: ClassVar[str] = "createStreamV1"
    schema: LogicalSchema
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None
    window_info: WindowInfo | None = None
    or_replace: bool = False
    is_source: bool = False


@register_command
@step_dataclass
class CreateTableCommand(Command):
    """Registers a table in the metastore."""

    TYPE: ClassVar[str] = "createTableV1"
    schema: LogicalSchema
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None
    window_info: WindowInfo | None = None
    or_replace: bool = False
    is_source: bool = False


@register_command
@step_dataclass
class DropSourceCommand(Command):
    """Removes a stream or table from the metastore."""

    TYPE: ClassVar[str] = "dropSourceV1"
    kind: Annotated[str, OneOf(SOURCE_KINDS)]


@register_command
@step_dataclass
class AlterSourceCommand(Command):
    """Adds value columns to a stream or table (``ALTER STREAM|TABLE name ADD COLUMN ...``).

    Queries already running keep the schema they were planned with; queries planned later
    see the new columns.
    """

    TYPE: ClassVar[str] = "alterSourceV1"
    kind: Annotated[str, OneOf(SOURCE_KINDS)]
    new_columns: LogicalSchema


@step_dataclass
class QueryPlan:
    """A persistent query: its id, the sources it reads, its sink and its step DAG."""

    query_id: Annotated[str, NON_EMPTY]
    sources: tuple[str, ...]
    sink: str
    root: Step

    def __post_init__(self) -> None:
        if not self.query_id:
            raise PlanError("A query plan needs a query id.")


@dataclass(frozen=True, slots=True, kw_only=True)
class StatementPlan:
    """The plan of one statement: a DDL command, a query, or both (CREATE ... AS SELECT)."""

    statement_text: str
    command: Command | None = None
    query: QueryPlan | None = None
    config: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.command is None and self.query is None:
            raise PlanError(
                f"The plan of statement '{self.statement_text}' has neither a command nor a query."
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class TransientQueryPlan:
    """A push query (``SELECT ... EMIT CHANGES``): a step DAG that ends in its projection.

    Never registered nor saved: it lives as long as its client reads it. The root's rows
    hold ``schema``'s columns (the SELECT list, in order, all value columns as ksqlDB's
    push-query header shows them) and the query's key columns under hidden names.
    ``tombstone_keys`` gives, per result column, the hidden key column it shows when a
    table row is deleted, or ``WINDOWSTART``/``WINDOWEND`` for a window bound, which a
    deletion of a windowed row shows too (None: the column is null in a deletion).
    """

    query_id: str
    statement_text: str
    sources: tuple[str, ...]
    root: Step
    schema: LogicalSchema
    is_table: bool
    tombstone_keys: tuple[str | None, ...]
    limit: int | None = None

    def __post_init__(self) -> None:
        if len(self.tombstone_keys) != len(self.schema.columns):
            raise PlanError(
                f"Transient query {self.query_id} has {len(self.schema.columns)} columns but "
                f"{len(self.tombstone_keys)} tombstone entries (a bug)."
            )
        if self.limit is not None and self.limit < 0:
            raise PlanError(f"LIMIT must not be negative, got {self.limit}.")
