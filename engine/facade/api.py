"""The engine's public facade, as the QTT harness, the CLI and tests use it.

    engine = KsqlEngine(properties={...})           # one engine per test case
    engine.create_topic(TopicInfo("input", partitions=1, ...))
    engine.execute_sql("CREATE STREAM ...; CREATE STREAM ... AS SELECT ...;")
    engine.produce([TopicRecord(...), ...])          # input records, in order
    outputs = engine.run()                          # dict topic -> records, in order
    engine.source("OUTPUT")                         # SourceInfo for post-conditions

Keys and values of records are in QTT form (see engine.data.records).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.data.records import TopicInfo, TopicRecord
from engine.plan.schema import LogicalSchema


@dataclass(frozen=True, slots=True)
class FormatDescription:
    """A source's key or value format as post-conditions describe it."""

    format: str
    properties: dict[str, str] = field(default_factory=dict)
    features: tuple[str, ...] = ()  # e.g. ("UNWRAP_SINGLES",), ("WRAP_SINGLES",)
    window_type: str | None = None  # TUMBLING / HOPPING / SESSION for windowed keys
    window_size_ms: int | None = None


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """A stream or table in the metastore, as post-conditions check it."""

    name: str
    kind: str  # "STREAM" or "TABLE"
    schema: LogicalSchema
    topic: str
    key_format: FormatDescription
    value_format: FormatDescription
    is_source: bool = False


@dataclass(frozen=True, slots=True)
class StatementResult:
    """What executing one statement did."""

    statement_text: str
    kind: str  # e.g. "CREATE_STREAM", "CREATE_STREAM_AS_SELECT", "INSERT_INTO", "DROP", "SET"
    query_id: str | None = None
    plan: Any = None  # engine.plan.StatementPlan for statements that start a query


__all__ = [
    "FormatDescription",
    "SourceInfo",
    "StatementResult",
    "TopicInfo",
    "TopicRecord",
]
