"""Formats, serde features and the schema checks every format imposes (ksqlDB's rules).

A topic's key and value each have a format (``FormatInfo``). ``check_key_schema`` and
``check_value_schema`` reject schemas a format cannot carry, with ksqlDB's messages;
``key_serde`` and ``value_serde`` (in ``engine.serde``) build the record serdes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import AnalysisError, UnsupportedSchemaError
from engine.plan import types as T
from engine.plan.schema import Column

JSON = "JSON"
DELIMITED = "DELIMITED"
KAFKA = "KAFKA"
NONE = "NONE"
AVRO = "AVRO"
JSON_SR = "JSON_SR"
PROTOBUF = "PROTOBUF"
PROTOBUF_NOSR = "PROTOBUF_NOSR"

FORMAT_NAMES = (JSON, DELIMITED, KAFKA, NONE, AVRO, JSON_SR, PROTOBUF, PROTOBUF_NOSR)
SCHEMA_REGISTRY_FORMATS = frozenset({AVRO, JSON_SR, PROTOBUF})
PROTOBUF_FORMATS = frozenset({PROTOBUF, PROTOBUF_NOSR})

# Format properties (lower-case keys) each format accepts.
DELIMITER = "delimiter"
NULLABLE_REPRESENTATION = "nullable_representation"
SCHEMA_ID = "schema_id"
SCHEMA_FULL_NAME = "schema_full_name"
# The registry subject whose latest schema a PROTOBUF serde writes with when no schema id is
# named (ksqlDB's subjectName, which a saved plan may hold; no WITH property sets it).
SUBJECT_NAME = "subject_name"
_SUPPORTED_PROPERTIES: dict[str, frozenset[str]] = {
    JSON: frozenset(),
    DELIMITED: frozenset({DELIMITER}),
    KAFKA: frozenset(),
    NONE: frozenset(),
    AVRO: frozenset({SCHEMA_ID, SCHEMA_FULL_NAME}),
    JSON_SR: frozenset({SCHEMA_ID}),
    PROTOBUF: frozenset({SCHEMA_ID, SCHEMA_FULL_NAME, NULLABLE_REPRESENTATION, SUBJECT_NAME}),
    PROTOBUF_NOSR: frozenset({NULLABLE_REPRESENTATION}),
}

KAFKA_TYPES = frozenset(
    {T.BaseType.INTEGER, T.BaseType.BIGINT, T.BaseType.DOUBLE, T.BaseType.STRING, T.BaseType.BYTES}
)
_CONTAINERS = frozenset({T.BaseType.ARRAY, T.BaseType.MAP, T.BaseType.STRUCT})

JSON_SR_WITHOUT_HEADER = (
    "Got unexpected JSON serialization format that did not start with the magic byte. If this "
    "stream was not serialized using the JsonSchemaConverter, then make sure the stream is "
    "declared with JSON format (not JSON_SR)."
)
"""ksqlDB's words for JSON_SR bytes without the schema registry header (magic byte, schema id)."""

def deserialization_failure(fmt: str, target: str, topic: str, cause: object) -> str:
    """The message of ksqlDB's deserializer of ``fmt`` for a ``target`` (key or value) of
    ``topic`` it cannot read; ``cause`` is the reason, which only JSON's message quotes (the
    others keep it as the processing log entry's cause)."""
    if fmt in (JSON, JSON_SR):
        return f"Failed to deserialize {target} from topic: {topic}. {cause}"
    if fmt == KAFKA:
        return f"Error deserializing KAFKA message from topic: {topic}"
    if fmt == DELIMITED:
        return "Error deserializing delimited"
    return f"Error deserializing message from topic: {topic}"


_MAP_STRING_KEYS_MESSAGE = {
    JSON: "JSON only supports MAP types with STRING keys",
    JSON_SR: "JSON only supports MAP types with STRING keys",
    AVRO: "Avro only supports MAPs with STRING keys",
    PROTOBUF: "PROTOBUF format only supports MAP types with STRING keys. "
    "See https://github.com/confluentinc/ksql/issues/6177.",
    PROTOBUF_NOSR: "PROTOBUF format only supports MAP types with STRING keys. "
    "See https://github.com/confluentinc/ksql/issues/6177.",
}


@dataclass(frozen=True)
class FormatInfo:
    """A key or value format: its upper-case name and its properties (lower-case keys)."""

    name: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.name.upper())
        object.__setattr__(
            self, "properties", {str(k).lower(): str(v) for k, v in self.properties.items()}
        )

    def __hash__(self) -> int:
        return hash((self.name, tuple(sorted(self.properties.items()))))

    @staticmethod
    def parse(text: str, properties: Mapping[str, str] | None = None) -> FormatInfo:
        """A FormatInfo from a format name as written in SQL (any case), checking the name."""
        name = text.strip().upper()
        if name not in FORMAT_NAMES:
            raise AnalysisError(
                f"Unknown format: {name}\nExpected one of {', '.join(FORMAT_NAMES)}."
            )
        return FormatInfo(name, dict(properties or {}))

    def get(self, key: str, default: str | None = None) -> str | None:
        """A property by case-insensitive name."""
        return self.properties.get(key.lower(), default)


@dataclass(frozen=True)
class SerdeFeatures:
    """Serde features of a value format; ``wrap_single_value`` None means the format default."""

    wrap_single_value: bool | None = None


def parse_delimiter(text: str, config: str = "VALUE_DELIMITER") -> str:
    """The delimiter character a DELIMITED property denotes (a single character, TAB or SPACE)."""
    upper = text.upper()
    if upper == "TAB":
        return "\t"
    if upper == "SPACE":
        return " "
    prefix = f"Failed to prepare statement: Configuration {config} is invalid: "
    example = "\nExample valid value: ';'"
    if text.strip() == "":
        raise AnalysisError(
            prefix + "Delimiter cannot be empty, if you meant to have a tab or space for "
            "delimiter, please use the special values 'TAB' or 'SPACE'" + example
        )
    if len(text) != 1:
        raise AnalysisError(
            prefix + f"Invalid delimiter value: '{text}'. Delimiter must be a single character "
            "or TAB,SPACE" + example
        )
    return text


def check_format(fmt: FormatInfo) -> None:
    """Raise AnalysisError if the format is unknown or has properties it does not support."""
    if fmt.name not in FORMAT_NAMES:
        raise AnalysisError(
            f"Unknown format: {fmt.name.upper()}\nExpected one of {', '.join(FORMAT_NAMES)}."
        )
    unsupported = sorted(set(fmt.properties) - _SUPPORTED_PROPERTIES[fmt.name])
    if unsupported:
        raise AnalysisError(
            f"{fmt.name} does not support the following configs: [{', '.join(unsupported)}]"
        )
    delimiter = fmt.get(DELIMITER)
    if delimiter is not None:
        parse_delimiter(delimiter)
    nullable = fmt.get(NULLABLE_REPRESENTATION)
    if nullable is not None and nullable.upper() not in ("OPTIONAL", "WRAPPER"):
        raise AnalysisError(
            f"Invalid nullable representation '{nullable}'; expected OPTIONAL or WRAPPER."
        )


def _columns_text(columns: Sequence[Column]) -> str:
    return "[" + ", ".join(str(c) for c in columns) + "]"


def _contains_map(t: T.SqlType) -> bool:
    if isinstance(t, T.Map):
        return True
    if isinstance(t, T.Array):
        return _contains_map(t.item)
    if isinstance(t, T.Struct):
        return any(_contains_map(f.type) for f in t.fields)
    return False


def _has_non_string_map_key(t: T.SqlType) -> bool:
    if isinstance(t, T.Map):
        return t.key != T.STRING or _has_non_string_map_key(t.value)
    if isinstance(t, T.Array):
        return _has_non_string_map_key(t.item)
    if isinstance(t, T.Struct):
        return any(_has_non_string_map_key(f.type) for f in t.fields)
    return False


def format_reason(fmt: FormatInfo, columns: Sequence[Column]) -> str | None:
    """Why ``fmt`` cannot carry ``columns`` (ksqlDB's wording), or None if it can."""
    if fmt.name == NONE:
        if columns:
            return (
                "The 'NONE' format can only be used when no columns are defined. "
                f"Got: {_columns_text(columns)}"
            )
        return None
    if fmt.name == KAFKA:
        if len(columns) > 1:
            return f"The 'KAFKA' format only supports a single field. Got: {_columns_text(columns)}"
        for c in columns:
            if c.type.base not in KAFKA_TYPES:
                return f"The 'KAFKA' format does not support type '{c.type.base.value}'"
        return None
    if fmt.name == DELIMITED:
        for c in columns:
            if c.type.base in _CONTAINERS:
                return (
                    f"The 'DELIMITED' format does not support type '{c.type.base.value}', "
                    f"column: {T.quote_identifier(c.name)}"
                )
        return None
    for c in columns:
        if _has_non_string_map_key(c.type):
            return _MAP_STRING_KEYS_MESSAGE[fmt.name]
    return None


def _persistence_text(
    kind: str, fmt: FormatInfo, columns: Sequence[Column], features: Sequence[str], reason: str
) -> str:
    return (
        f"{kind} format does not support schema.\nformat: {fmt.name}\n"
        f"schema: Persistence{{columns={_columns_text(columns)}, "
        f"features=[{', '.join(features)}]}}\nreason: {reason}"
    )


def check_key_schema(fmt: FormatInfo, columns: Sequence[Column]) -> None:
    """Raise AnalysisError if the key format cannot carry these key columns."""
    check_format(fmt)
    for c in columns:
        if _contains_map(c.type):
            raise AnalysisError(
                "Map keys, including types that contain maps, are not supported as they may "
                "lead to unexpected behavior due to inconsistent serialization. Key column name: "
                f"{T.quote_identifier(c.name)}. Column type: {c.type}. "
                "See https://github.com/confluentinc/ksql/issues/6621 for more."
            )
    reason = format_reason(fmt, columns)
    if reason is not None:
        raise UnsupportedSchemaError(_persistence_text("Key", fmt, columns, (), reason))


def wraps_single_value(fmt: FormatInfo, features: SerdeFeatures) -> bool:
    """Whether a single value column is written wrapped in an object/record."""
    if fmt.name in (KAFKA, DELIMITED, NONE):
        return False
    if fmt.name in PROTOBUF_FORMATS:
        return True
    return features.wrap_single_value is not False


def check_value_schema(fmt: FormatInfo, columns: Sequence[Column], features: SerdeFeatures) -> None:
    """Raise AnalysisError if the value format cannot carry these value columns/features."""
    check_format(fmt)
    wrap = features.wrap_single_value
    if wrap is not None:
        if len(columns) != 1:
            raise AnalysisError("'WRAP_SINGLE_VALUE' is only valid for single-field value schemas")
        unsupported = (wrap and fmt.name in (KAFKA, DELIMITED, NONE)) or (
            not wrap and fmt.name in PROTOBUF_FORMATS
        )
        if unsupported:
            raise AnalysisError(
                f"Format '{fmt.name}' does not support 'WRAP_SINGLE_VALUE' set to "
                f"'{'true' if wrap else 'false'}'."
            )
    reason = format_reason(fmt, columns)
    if reason is not None:
        # ksqlDB's Avro serde refuses the map when it is made, so the message is the serde's.
        if fmt.name in _MAP_STRING_KEYS_MESSAGE and fmt.name != AVRO:
            raise AnalysisError(reason)
        feature_names: tuple[str, ...] = ()
        if wrap is not None:
            feature_names = ("WRAP_SINGLES",) if wrap else ("UNWRAP_SINGLES",)
        raise UnsupportedSchemaError(_persistence_text("Value", fmt, columns, feature_names, reason))


def describe(value: Any) -> str:
    """A short description of a QTT-form value for error messages: its JSON type and text."""
    kind = {
        bool: "boolean",
        int: "number",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        bytes: "bytes",
    }.get(type(value))
    if kind is None:
        kind = "number" if type(value).__name__ == "Decimal" else type(value).__name__
    text = repr(value)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{kind} {text}"
