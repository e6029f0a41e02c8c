"""Metastore entries and the interface a durable store implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from engine.plan.schema import LogicalSchema
from engine.plan.steps import Formats, TimestampColumn, WindowInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class DataSource:
    """A stream or table: its schema, topic, formats and how its records are timed."""

    name: str
    kind: str  # STREAM or TABLE
    schema: LogicalSchema
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None
    window_info: WindowInfo | None = None
    is_source: bool = False
    sql: str = ""

    @property
    def is_table(self) -> bool:
        return self.kind == "TABLE"


class MetaStore(Protocol):
    """Sources by name, with referential integrity between sources and queries."""

    def get(self, name: str) -> DataSource | None: ...

    def put(self, source: DataSource, *, replace: bool = False) -> None: ...

    def delete(self, name: str) -> DataSource: ...

    def all(self) -> list[DataSource]: ...

    def link_query(self, query_id: str, reads: tuple[str, ...], writes: str) -> None: ...

    def unlink_query(self, query_id: str) -> None: ...

    def readers(self, name: str) -> list[str]: ...

    def writers(self, name: str) -> list[str]: ...
