"""The record serde interface every format implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from engine.plan.schema import Column
from engine.serde.formats import FormatInfo


class RecordSerde(ABC):
    """Translates a record key or value between QTT form, typed rows and Kafka bytes.

    Subclasses build their per-column converters in ``__init__``. Pickling ships only the
    constructor arguments and rebuilds the converters, so serdes travel to Spark workers
    with plain ``pickle``.
    """

    def __init__(
        self, fmt: FormatInfo, columns: Sequence[Column], wrapped: bool, is_key: bool
    ) -> None:
        self.format = fmt
        self.columns = tuple(columns)
        self.wrapped = wrapped
        self.is_key = is_key
        self.names = tuple(c.name for c in self.columns)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.format, self.columns, self.wrapped, self.is_key))

    def __repr__(self) -> str:
        part = "key" if self.is_key else "value"
        shape = "wrapped" if self.wrapped else "unwrapped"
        return f"{type(self).__name__}({self.format.name} {part}, {shape}, {list(self.names)})"

    @property
    def what(self) -> str:
        """``"JSON key"`` / ``"DELIMITED value"``, for messages."""
        return f"{self.format.name} {'key' if self.is_key else 'value'}"

    @abstractmethod
    def deserialize(self, data: Any) -> dict[str, Any] | None:
        """QTT form -> row (column name -> engine value); None for a null key or tombstone."""

    @abstractmethod
    def serialize(self, row: Mapping[str, Any] | None) -> Any:
        """Row -> QTT form; None for a null row."""

    @abstractmethod
    def to_bytes(self, data: Any) -> bytes | None:
        """QTT form -> Kafka bytes."""

    @abstractmethod
    def from_bytes(self, data: bytes | None) -> Any:
        """Kafka bytes -> QTT form."""

    def qtt_from_bytes(self, data: bytes | None) -> Any:
        """Kafka bytes this serde wrote -> the QTT form ``serialize`` gives the same row
        (``from_bytes`` keeps what the bytes say: a DOUBLE ``1.5`` is a decimal there)."""
        return self.serialize(self.deserialize(self.from_bytes(data)))

    def qtt_from_bytes_many(self, data: Sequence[bytes | None]) -> list[Any]:
        """``qtt_from_bytes`` of each item, in order (a serde may decode them in one go)."""
        return [self.qtt_from_bytes(d) for d in data]


class EmptySerde(RecordSerde):
    """A serde for no columns (the NONE format, or a key without key columns): data is ignored."""

    def deserialize(self, data: Any) -> dict[str, Any] | None:
        return None if data is None else {}

    def serialize(self, row: Mapping[str, Any] | None) -> Any:
        return None

    def to_bytes(self, data: Any) -> bytes | None:
        return None

    def from_bytes(self, data: bytes | None) -> Any:
        return None
