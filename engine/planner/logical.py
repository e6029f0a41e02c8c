"""The logical plan of a persistent query: a chain of typed nodes, source to sink.

Each node knows its output schema; the physical planner turns nodes into versioned steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.metastore import DataSource
from engine.plan import expr as E
from engine.plan.schema import PSEUDO_COLUMNS, WINDOW_BOUNDS, LogicalSchema
from engine.plan.steps import Formats, TimestampColumn, WindowInfo
from engine.plan.types import SqlType


@dataclass(frozen=True, kw_only=True)
class LogicalNode:
    """Base: every node has an output schema and knows whether it is a table."""

    schema: LogicalSchema
    is_table: bool
    window: WindowInfo | None
    ctx: str = ""

    def columns(self) -> dict[str, SqlType]:
        """Names an expression over this node's rows may reference, with their types."""
        columns: dict[str, SqlType] = dict(PSEUDO_COLUMNS)
        if self.window is not None:
            columns.update(WINDOW_BOUNDS)
        columns.update(self.schema.types())
        return columns


@dataclass(frozen=True, kw_only=True)
class SourceNode(LogicalNode):
    """Reads a source from its topic."""

    source: DataSource


@dataclass(frozen=True, kw_only=True)
class FilterNode(LogicalNode):
    """Keeps the rows for which ``predicate`` holds.

    ``old_values``: the table it filters comes with each key's old row (a push query's table:
    ksqlDB forwards a table's changes to a push query with their old values), so a row that
    misses deletes the key's row only when the key's last row matched (``tableFilterV3``).
    """

    input: LogicalNode
    predicate: E.Expr
    old_values: bool = False


@dataclass(frozen=True, kw_only=True)
class FlatMapNode(LogicalNode):
    """Applies table functions, each output column named by its alias."""

    input: LogicalNode
    functions: tuple[tuple[str, E.FunctionCall], ...]


@dataclass(frozen=True, kw_only=True)
class RepartitionNode(LogicalNode):
    """Re-keys a stream by expressions (PARTITION BY)."""

    input: LogicalNode
    keys: tuple[tuple[str, E.Expr], ...]


@dataclass(frozen=True, kw_only=True)
class ProjectNode(LogicalNode):
    """Projects onto renamed key columns and computed value columns."""

    input: LogicalNode
    key_names: tuple[str, ...]
    values: tuple[tuple[str, E.Expr], ...]


@dataclass(frozen=True, kw_only=True)
class SinkNode(LogicalNode):
    """Writes the result into a topic."""

    input: LogicalNode
    name: str
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None
