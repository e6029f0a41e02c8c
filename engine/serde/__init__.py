"""Record serdes: topic keys and values between QTT form, typed rows and Kafka bytes.

    fmt = FormatInfo.parse("JSON")
    check_value_schema(fmt, columns, SerdeFeatures())      # AnalysisError if unsupported
    serde = value_serde(fmt, columns, SerdeFeatures())
    row = serde.deserialize({"ID": 1})                      # {"ID": 1, "NAME": None}
    serde.serialize(row)                                    # {"ID": 1, "NAME": None}
    serde.to_bytes(serde.serialize(row))                    # b'{"ID":1,"NAME":null}'

Rows are dicts column name -> Python value (see engine.plan.types for the representation).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.errors import AnalysisError
from engine.plan.schema import Column, Namespace
from engine.serde.base import EmptySerde, RecordSerde
from engine.serde.delimited import DelimitedSerde
from engine.serde.formats import (
    DELIMITED,
    FORMAT_NAMES,
    KAFKA,
    NONE,
    PROTOBUF_FORMATS,
    FormatInfo,
    SerdeFeatures,
    check_format,
    check_key_schema,
    check_value_schema,
    format_reason,
    parse_delimiter,
    wraps_single_value,
)
from engine.serde.json_format import JsonSerde
from engine.serde.kafka_format import KafkaSerde


def _require_supported(fmt: FormatInfo, columns: Sequence[Column], part: str) -> None:
    if fmt.name not in FORMAT_NAMES:
        check_format(fmt)  # raises the unknown-format error
    reason = format_reason(fmt, columns)
    if reason is not None:
        raise AnalysisError(f"Cannot build a {fmt.name} {part} serde: {reason}")


def key_serde(fmt: FormatInfo, columns: Sequence[Column]) -> RecordSerde:
    """The serde for a key in ``fmt`` with these key columns."""
    cols = tuple(columns)
    if not cols or fmt.name == NONE:
        _require_supported(fmt, cols, "key")
        return EmptySerde(fmt, cols, False, True)
    _require_supported(fmt, cols, "key")
    if fmt.name == KAFKA:
        return KafkaSerde(fmt, cols, False, True)
    if fmt.name == DELIMITED:
        return DelimitedSerde(fmt, cols, False, True)
    wrapped = len(cols) > 1 or fmt.name in PROTOBUF_FORMATS
    return JsonSerde(fmt, cols, wrapped, True)


def value_serde(fmt: FormatInfo, columns: Sequence[Column], features: SerdeFeatures) -> RecordSerde:
    """The serde for a value in ``fmt`` with these value columns (HEADERS columns skipped)."""
    cols = tuple(c for c in columns if c.namespace is not Namespace.HEADERS)
    _require_supported(fmt, cols, "value")
    if fmt.name == NONE:
        return EmptySerde(fmt, cols, False, False)
    if fmt.name == KAFKA:
        return KafkaSerde(fmt, cols, False, False)
    if fmt.name == DELIMITED:
        return DelimitedSerde(fmt, cols, False, False)
    wrapped = len(cols) != 1 or wraps_single_value(fmt, features)
    return JsonSerde(fmt, cols, wrapped, False)


__all__ = [
    "FORMAT_NAMES",
    "FormatInfo",
    "RecordSerde",
    "SerdeFeatures",
    "check_format",
    "check_key_schema",
    "check_value_schema",
    "key_serde",
    "parse_delimiter",
    "value_serde",
    "wraps_single_value",
]
