"""Topic records as the engine and the harness exchange them.

Keys and values are in **QTT form**: the shape a QTT file writes for the topic's format
(a JSON value for JSON, a string for DELIMITED, a bare primitive for KAFKA, ``None`` for a
null key or a tombstone). The serdes in ``engine.serde`` translate QTT form to typed rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Window:
    """The window of a windowed key: start and end in epoch ms, type TIME or SESSION."""

    start: int
    end: int
    type: str = "TIME"


@dataclass(frozen=True, slots=True)
class Header:
    """One record header; ``value`` is raw bytes or None."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class TopicRecord:
    """One record of a topic."""

    topic: str
    key: Any
    value: Any
    timestamp: int | None = None
    partition: int | None = None
    window: Window | None = None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic known to the engine: name, partitions and the formats it was created with."""

    name: str
    partitions: int = 1
    key_format: str | None = None
    value_format: str | None = None
    key_schema: Any = None
    value_schema: Any = None
    properties: dict[str, Any] = field(default_factory=dict)
    # How a topic the engine creates on Kafka is made: its replication factor (None: the
    # broker's default) and topic configs (cleanup.policy, retention.ms).
    replicas: int | None = None
    configs: dict[str, str] = field(default_factory=dict)
