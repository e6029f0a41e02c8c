"""JSON and the schema-registry formats (AVRO, JSON_SR, PROTOBUF, PROTOBUF_NOSR).

In QTT form all of them are JSON values: an object of fields for a wrapped record, or the
bare field value for an unwrapped single column. PROTOBUF cannot represent NULL primitives,
so unless the format asks for an explicit nullable representation, NULL primitives,
arrays and maps read and write as protobuf's defaults (0, "", false, [], {}).

Kafka bytes: JSON is UTF-8 JSON text; JSON_SR prefixes the schema-registry header (magic
byte 0 and a 4-byte schema id). AVRO and PROTOBUF binary encodings need their schemas and
are not implemented yet.
"""

from __future__ import annotations

import decimal
import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import RecordSerdeError, UnsupportedFeatureError
from engine.plan import types as T
from engine.plan.schema import Column
from engine.serde.base import RecordSerde
from engine.serde.coerce import json_text, reader, struct_lookup, upper_keys, writer
from engine.serde.formats import (
    JSON,
    JSON_SR,
    JSON_SR_WITHOUT_HEADER,
    NULLABLE_REPRESENTATION,
    PROTOBUF_FORMATS,
    SCHEMA_ID,
    FormatInfo,
    describe,
)

_MAGIC_BYTE = b"\x00"
_PLAIN_TYPES = frozenset(
    {T.BaseType.BOOLEAN, T.BaseType.INTEGER, T.BaseType.BIGINT, T.BaseType.DOUBLE, T.BaseType.STRING}
)


def uses_protobuf_defaults(fmt: FormatInfo) -> bool:
    """Whether NULL primitives read and write as protobuf defaults in this format."""
    return fmt.name in PROTOBUF_FORMATS and fmt.get(NULLABLE_REPRESENTATION) is None


def _avro_decimal_text(write: Any) -> Any:
    """AVRO decimals appear as strings in QTT form (ksqlDB prints Avro decimals as text)."""

    def write_text(v: Any) -> Any:
        out = write(v)
        return None if out is None else str(out)

    return write_text


class JsonSerde(RecordSerde):
    """JSON-valued formats: JSON, JSON_SR, AVRO, PROTOBUF and PROTOBUF_NOSR in QTT form."""

    def __init__(
        self, fmt: FormatInfo, columns: Sequence[Column], wrapped: bool, is_key: bool
    ) -> None:
        super().__init__(fmt, columns, wrapped, is_key)
        if not wrapped and len(self.columns) != 1:
            raise RecordSerdeError(
                f"An unwrapped {self.what} needs exactly one column, got {list(self.names)}."
            )
        proto = uses_protobuf_defaults(fmt)
        self._readers = tuple(
            (c.name, reader(c.type, c.name, proto_defaults=proto)) for c in self.columns
        )
        self._writers = tuple(
            (c.name, _avro_decimal_text(writer(c.type, proto_defaults=proto)))
            if fmt.name == "AVRO" and isinstance(c.type, T.Decimal)
            else (c.name, writer(c.type, proto_defaults=proto))
            for c in self.columns
        )
        self._names = frozenset(self.names)
        self._plain_json = fmt.name == JSON and all(c.type.base in _PLAIN_TYPES for c in self.columns)

    def deserialize(self, data: Any) -> dict[str, Any] | None:
        if data is None:
            return None
        if not self.wrapped:
            name, read = self._readers[0]
            return {name: read(data)}
        if not isinstance(data, dict):
            raise RecordSerdeError(
                f"Cannot deserialize the {self.what}: expected a JSON object with the fields "
                f"{', '.join(self.names)}, got {describe(data)}."
            )
        upper = None if self._names.issubset(data) else upper_keys(data)
        return {name: read(struct_lookup(data, name, upper)) for name, read in self._readers}

    def serialize(self, row: Mapping[str, Any] | None) -> Any:
        if row is None:
            return None
        if not self.wrapped:
            name, write = self._writers[0]
            return write(row.get(name))
        return {name: write(row.get(name)) for name, write in self._writers}

    def _binary_unsupported(self) -> UnsupportedFeatureError:
        return UnsupportedFeatureError(
            f"binary {self.format.name} records",
            f"kspark cannot encode or decode {self.format.name} records as Kafka bytes yet: "
            "that needs the schema registry's schema.",
        )

    def to_bytes(self, data: Any) -> bytes | None:
        if data is None:
            return None
        if self.format.name == JSON:
            return json_text(data).encode("utf-8")
        if self.format.name == JSON_SR:
            schema_id = int(self.format.get(SCHEMA_ID) or 1)
            return _MAGIC_BYTE + struct.pack(">i", schema_id) + json_text(data).encode("utf-8")
        raise self._binary_unsupported()

    def qtt_from_bytes(self, data: bytes | None) -> Any:
        # Plain JSON of these types reads back as ``serialize`` writes it (a finite DOUBLE is
        # written with a fraction or exponent, a non-finite one as the string "NaN" ...), so
        # one parse is enough.
        if data is not None and self._plain_json:
            return json.loads(data)
        return super().qtt_from_bytes(data)

    def qtt_from_bytes_many(self, data: Sequence[bytes | None]) -> list[Any]:
        # One parse of all the texts as a JSON array instead of one per text (a sink's
        # output decoded for the topic store). Equal to one parse each when every text is a
        # single JSON value: the array then parses and holds exactly one element per text;
        # otherwise each text is parsed alone, failing as ``qtt_from_bytes`` fails.
        present = [d for d in data if d is not None]
        if not self._plain_json or not present:
            return super().qtt_from_bytes_many(data)
        try:
            parsed = json.loads(b"[" + b",".join(present) + b"]")
        except ValueError:  # JSONDecodeError and UnicodeDecodeError
            return super().qtt_from_bytes_many(data)
        if len(parsed) != len(present):
            return super().qtt_from_bytes_many(data)
        if len(present) == len(data):
            return parsed  # type: ignore[no-any-return]
        values = iter(parsed)
        null = self.qtt_from_bytes(None)
        return [null if d is None else next(values) for d in data]

    def from_bytes(self, data: bytes | None) -> Any:
        if data is None:
            return None
        if self.format.name == JSON_SR:
            if len(data) < 5 or data[:1] != _MAGIC_BYTE:
                raise RecordSerdeError(JSON_SR_WITHOUT_HEADER)
            data = data[5:]
        elif self.format.name != JSON:
            raise self._binary_unsupported()
        try:
            return json.loads(data.decode("utf-8"), parse_float=decimal.Decimal)
        except (UnicodeDecodeError, ValueError) as exc:
            raise RecordSerdeError(f"The {self.what} bytes are not valid JSON: {exc}.") from None
