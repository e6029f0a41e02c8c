"""What a builder gets besides its step and inputs, and what it returns."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import DataFrame

from engine.plan.schema import PSEUDO_COLUMNS, WINDOW_BOUNDS, LogicalSchema
from engine.plan.steps import WindowInfo
from engine.plan.types import SqlType
from engine.runtime import processing_log
from engine.runtime.adapter import Runtime, TopicCodec

PROCESSING_LOG = logging.getLogger("kspark.processing")


@dataclass(frozen=True)
class BuildContext:
    """The explicit environment of a build: runtime adapter, query id and configuration."""

    runtime: Runtime
    query_id: str
    config: Mapping[str, Any] = field(default_factory=dict)
    # The schema registry of a run whose config names none (the QTT harness's in-process one).
    registry_url: str | None = None

    def schema_registry_url(self) -> str | None:
        """The registry the query's formats read and write schemas with, if any."""
        return self.registry_url or self.config.get("ksql.schema.registry.url") or None


@dataclass(frozen=True)
class Built:
    """A built step: its DataFrame, its logical schema, stream or table, and windowing."""

    df: DataFrame
    schema: LogicalSchema
    is_table: bool = False
    window: WindowInfo | None = None
    internal_schemas: tuple[tuple[str, str], ...] = ()
    # A V2 sink's rows hold Kafka bytes in ``__key`` / ``__value``, written with this codec
    # (None: a V1 sink's rows hold the pickled QTT form).
    codec: TopicCodec | None = None
    # A V5 sink of windowed records: each goes to the partition of its key without the window
    # (Kafka Streams' WindowedStreamPartitioner); otherwise the whole key's bytes decide.
    base_key_partitions: bool = False

    @property
    def encoded(self) -> bool:
        """Whether the rows hold Kafka bytes (see ``codec``)."""
        return self.codec is not None

    def with_df(self, df: DataFrame, schema: LogicalSchema | None = None) -> Built:
        return replace(self, df=df, schema=schema or self.schema)

    def expression_columns(self) -> dict[str, SqlType]:
        """Names and types an expression over this step's rows may reference."""
        columns: dict[str, SqlType] = dict(PSEUDO_COLUMNS)
        if self.window is not None:
            columns.update(WINDOW_BOUNDS)
        columns.update(self.schema.types())
        return columns


def log_processing_error(query_id: str, ctx: str, message: str, **details: Any) -> None:
    """Report a record-level problem (ksqlDB's processing log); the query keeps going.

    ``details`` fill the log entry's fields (``processing_log.entry``): ``type``, ``target``,
    ``topic``, ``record`` (the raw bytes).
    """
    processing_log.follow_env()
    extra = {"kspark_details": details} if details else None
    PROCESSING_LOG.warning("%s %s: %s", query_id, ctx, message, extra=extra)
