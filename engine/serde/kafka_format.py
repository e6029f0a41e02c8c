"""The KAFKA format: one primitive column as Kafka's own serializers write it.

QTT form is the bare value (a number, a string, base64 text for BYTES). Bytes are
big-endian int32 (INTEGER), int64 (BIGINT), IEEE-754 double (DOUBLE), UTF-8 (STRING) or
the raw bytes (BYTES).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import RecordSerdeError
from engine.plan import types as T
from engine.plan.schema import Column
from engine.serde.base import RecordSerde
from engine.serde.coerce import reader, writer
from engine.serde.formats import KAFKA_TYPES, FormatInfo

_STRUCTS = {
    T.BaseType.INTEGER: struct.Struct(">i"),
    T.BaseType.BIGINT: struct.Struct(">q"),
    T.BaseType.DOUBLE: struct.Struct(">d"),
}


class KafkaSerde(RecordSerde):
    """A single INTEGER, BIGINT, DOUBLE, STRING or BYTES column, never wrapped."""

    def __init__(
        self, fmt: FormatInfo, columns: Sequence[Column], wrapped: bool, is_key: bool
    ) -> None:
        super().__init__(fmt, columns, wrapped, is_key)
        if len(self.columns) != 1 or self.columns[0].type.base not in KAFKA_TYPES:
            raise RecordSerdeError(
                "The KAFKA format needs exactly one INTEGER, BIGINT, DOUBLE, STRING or BYTES "
                f"column, got {[str(c) for c in self.columns]}."
            )
        column = self.columns[0]
        self._name = column.name
        self._type = column.type
        self._read = reader(column.type, column.name)
        self._write = writer(column.type)

    def deserialize(self, data: Any) -> dict[str, Any] | None:
        if data is None:
            return None
        return {self._name: self._read(data)}

    def serialize(self, row: Mapping[str, Any] | None) -> Any:
        if row is None:
            return None
        return self._write(row.get(self._name))

    def to_bytes(self, data: Any) -> bytes | None:
        if data is None:
            return None
        value = self._read(data)
        base = self._type.base
        if base is T.BaseType.STRING:
            return value.encode("utf-8")
        if base is T.BaseType.BYTES:
            return bytes(value)
        return _STRUCTS[base].pack(value)

    def qtt_from_bytes(self, data: bytes | None) -> Any:
        if self._type.base is T.BaseType.DOUBLE:  # NaN reads as a float, ``serialize`` writes "NaN"
            return super().qtt_from_bytes(data)
        return self.from_bytes(data)

    def qtt_from_bytes_many(self, data: Sequence[bytes | None]) -> list[Any]:
        # INT and BIGINT: one unpack of all the values (a sink's output decoded for the topic
        # store), when each has its type's width; otherwise each alone, failing as one does.
        base = self._type.base
        if base not in (T.BaseType.INTEGER, T.BaseType.BIGINT):
            return super().qtt_from_bytes_many(data)
        packer = _STRUCTS[base]
        present = [d for d in data if d is not None]
        if any(map(packer.size.__ne__, map(len, present))):  # the width test runs in C (map, not a Python loop)
            return super().qtt_from_bytes_many(data)
        unpacked = [v for (v,) in packer.iter_unpack(b"".join(present))]
        if len(present) == len(data):
            return unpacked
        values = iter(unpacked)
        return [None if d is None else next(values) for d in data]

    def from_bytes(self, data: bytes | None) -> Any:
        if data is None:
            return None
        base = self._type.base
        if base is T.BaseType.STRING:
            try:
                return data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise RecordSerdeError(
                    f"The {self.what} bytes are not valid UTF-8: {exc}."
                ) from None
        if base is T.BaseType.BYTES:
            return base64.b64encode(data).decode("ascii")
        packer = _STRUCTS[base]
        if len(data) != packer.size:
            raise RecordSerdeError(
                f"Cannot deserialize the {self.what} as {self._type}: expected "
                f"{packer.size} bytes, got {len(data)}."
            )
        return packer.unpack(data)[0]
