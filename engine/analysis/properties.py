"""WITH-clause properties of CREATE statements: validation and typed access."""

from __future__ import annotations

import decimal
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import AnalysisError, StatementPrepareError
from engine.serde.formats import parse_delimiter

SOURCE_PROPERTIES = frozenset(
    {
        "KAFKA_TOPIC",
        "KEY_FORMAT",
        "VALUE_FORMAT",
        "FORMAT",
        "PARTITIONS",
        "REPLICAS",
        "TIMESTAMP",
        "TIMESTAMP_FORMAT",
        "WRAP_SINGLE_VALUE",
        "VALUE_DELIMITER",
        "KEY_DELIMITER",
        "WINDOW_TYPE",
        "WINDOW_SIZE",
        "KEY_SCHEMA_ID",
        "VALUE_SCHEMA_ID",
        "KEY_SCHEMA_FULL_NAME",
        "VALUE_SCHEMA_FULL_NAME",
        "VALUE_AVRO_SCHEMA_FULL_NAME",
        "KEY_PROTOBUF_NULLABLE_REPRESENTATION",
        "VALUE_PROTOBUF_NULLABLE_REPRESENTATION",
        "RETENTION_MS",
        "CLEANUP_POLICY",
        "SOURCE_CONNECTOR",
    }
)


@dataclass(frozen=True)
class WithProperties:
    """The WITH (...) properties of one statement, upper-case keys."""

    values: Mapping[str, Any]
    statement: str = ""

    @staticmethod
    def of(
        values: Mapping[str, Any], *, statement: str = "", create_as: bool | None = None
    ) -> WithProperties:
        """The properties of a CREATE (``create_as`` False) or CREATE ... AS SELECT (True)
        statement, checked as ksqlDB's WITH-clause definitions check them; None checks names only."""
        upper = {k.upper(): v for k, v in values.items()}
        if create_as is not None:
            upper = _checked_definitions(upper, create_as=create_as)
        known = SOURCE_PROPERTIES - _CREATE_ONLY if create_as else SOURCE_PROPERTIES
        unknown = sorted(set(upper) - known)
        if unknown:
            raise AnalysisError(
                f"Invalid config variable(s) in the WITH clause: {','.join(unknown)}."
            )
        if create_as is not None:
            _check_datetime_pattern("TIMESTAMP_FORMAT", upper.get("TIMESTAMP_FORMAT"))
        return WithProperties(upper, statement)

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def string(self, key: str) -> str | None:
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise AnalysisError(f"Property {key} must be a string, got {value!r}.")
        return value

    def integer(self, key: str) -> int | None:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | str | decimal.Decimal):
            raise AnalysisError(f"Property {key} must be a number, got {value!r}.")
        try:
            number = int(str(value))
        except ValueError:
            raise AnalysisError(f"Property {key} must be a number, got '{value}'.") from None
        return number

    def boolean(self, key: str) -> bool | None:
        value = self.values.get(key)
        if value is None:
            return None
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise AnalysisError(f"Property {key} must be true or false, got {value!r}.")


# ksqlDB's definitions of the WITH clause (its CommonCreateConfigs, and CreateConfigs for
# CREATE alone), in the order it checks them: the property's type, and a check of its value.
_COMMON_DEFINITIONS = (
    ("KAFKA_TOPIC", "STRING"), ("PARTITIONS", "INT"), ("REPLICAS", "SHORT"), ("RETENTION_MS", "LONG"),
    ("VALUE_FORMAT", "STRING"), ("TIMESTAMP", "STRING"), ("TIMESTAMP_FORMAT", "STRING"),
    ("WRAP_SINGLE_VALUE", "BOOLEAN"), ("KEY_PROTOBUF_NULLABLE_REPRESENTATION", "STRING"),
    ("VALUE_PROTOBUF_NULLABLE_REPRESENTATION", "STRING"), ("VALUE_AVRO_SCHEMA_FULL_NAME", "STRING"),
    ("KEY_SCHEMA_FULL_NAME", "STRING"), ("VALUE_SCHEMA_FULL_NAME", "STRING"), ("KEY_DELIMITER", "STRING"),
    ("VALUE_DELIMITER", "STRING"), ("KEY_FORMAT", "STRING"), ("FORMAT", "STRING"),
    ("KEY_SCHEMA_ID", "INT"), ("VALUE_SCHEMA_ID", "INT"), ("CLEANUP_POLICY", "STRING"),
)
_CREATE_DEFINITIONS = (("WINDOW_TYPE", "STRING"), ("WINDOW_SIZE", "STRING"), ("SOURCE_CONNECTOR", "STRING"))
_CREATE_ONLY = frozenset(name for name, _ in _CREATE_DEFINITIONS)
_ONE_OF = {
    "WINDOW_TYPE": ("SESSION", "HOPPING", "TUMBLING"),
    "KEY_PROTOBUF_NULLABLE_REPRESENTATION": ("OPTIONAL", "WRAPPER"),
    "VALUE_PROTOBUF_NULLABLE_REPRESENTATION": ("OPTIONAL", "WRAPPER"),
}
_INT_RANGES = {"INT": 2**31, "SHORT": 2**15, "LONG": 2**63}
_JAVA_CLASS = {bool: "java.lang.Boolean", int: "java.lang.Integer", float: "java.lang.Double",
               decimal.Decimal: "java.math.BigDecimal", str: "java.lang.String"}


def _java_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _java_class(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**31) <= value < 2**31:
        return "java.lang.Long"
    return _JAVA_CLASS.get(type(value), type(value).__name__)


def _invalid(name: str, value: Any, problem: str) -> StatementPrepareError:
    # Kafka's ConfigException text, "configuration" said "property" as ksqlDB rewrites it.
    return StatementPrepareError(
        f"Failed to prepare statement: Invalid value {_java_text(value)} for property {name}: {problem}"
    )


def _parsed(name: str, kind: str, value: Any) -> Any:
    """The value as Kafka's ConfigDef reads a literal of the WITH clause for a ``kind`` property."""
    if kind == "STRING":
        if not isinstance(value, str):
            raise _invalid(name, value, f"Expected value to be a string, but it was a {_java_class(value)}")
        return value.strip()
    if kind == "BOOLEAN":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise _invalid(name, value, "Expected value to be either true or false")
    bound = _INT_RANGES[kind]
    if isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(r"[+-]?\d+", text) or not -bound <= int(text) < bound:
            raise _invalid(name, value, f"Not a number of type {kind}")
        return int(text)
    if kind == "SHORT" and isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool):
        return value  # ksqlDB narrows any number to a short first
    if isinstance(value, int) and not isinstance(value, bool):
        if kind == "LONG" or -(2**31) <= value < 2**31:
            return value
    what = {"INT": "a 32-bit integer", "SHORT": "a 16-bit integer (short)", "LONG": "a 64-bit integer (long)"}[kind]
    raise _invalid(name, value, f"Expected value to be {what}, but it was a {_java_class(value)}")


def _checked_definitions(values: dict[str, Any], *, create_as: bool) -> dict[str, Any]:
    """Type and check each defined property in ksqlDB's order; unknown names stay for the
    caller. Strings come back trimmed, as Kafka's ConfigDef gives them."""
    out = dict(values)
    definitions = _COMMON_DEFINITIONS if create_as else _CREATE_DEFINITIONS + _COMMON_DEFINITIONS
    for name, kind in definitions:
        if name not in values or values[name] is None:
            continue
        value = _parsed(name, kind, values[name])
        if name == "KAFKA_TOPIC" and value == "":
            raise _invalid(name, value, "String must be non-empty")
        if name in _ONE_OF and value.upper() not in _ONE_OF[name]:
            raise _invalid(name, values[name], "String must be one of: " + ", ".join((*_ONE_OF[name], "null")))
        if name == "WINDOW_SIZE":
            try:
                duration_ms(value)
            except AnalysisError as exc:
                raise StatementPrepareError(
                    f"Failed to prepare statement: Configuration {name} is invalid: {exc.reason}"
                ) from exc
        if name in ("KEY_DELIMITER", "VALUE_DELIMITER"):
            parse_delimiter(values[name], name)
        out[name] = value
    return out


_UNITS_NS = {
    "NANOSECONDS": 1, "MICROSECONDS": 10**3, "MILLISECONDS": 10**6, "SECONDS": 10**9, "MINUTES": 60 * 10**9,
    "HOURS": 3600 * 10**9, "DAYS": 86400 * 10**9,
}


def duration_ms(text: str) -> int:
    """A WITH clause duration, ``'10 SECONDS'``, in milliseconds; refused in ksqlDB's words."""
    parts = re.split(r"\s", text)
    unit = parts[1].upper() if len(parts) == 2 else ""
    unit = unit if unit.endswith("S") else unit + "S"
    if len(parts) != 2:
        problem = f"Expected 2 tokens, got: {len(parts)}"
    elif not re.fullmatch(r"[+-]?\d+", parts[0]):
        problem = f"Not numeric: '{parts[0]}'"
    elif unit not in _UNITS_NS:
        problem = (
            f"Unknown time unit: '{parts[1].upper()}'\nSupported time units are: "
            "NANOSECONDS, MICROSECONDS, MILLISECONDS, SECONDS, MINUTES, HOURS, DAYS"
        )
    else:
        return int(parts[0]) * _UNITS_NS[unit] // 10**6  # floored, as Java's Duration.toMillis
    raise AnalysisError(f"Invalid duration: '{text}'. {problem}")


# Pattern letters Java's DateTimeFormatter knows, and the most of each it takes.
_PATTERN_LETTERS = "GyuQqMLDdFEceaHkKhmsSAnNgzVvZOXxWwYpB"
_MOST_LETTERS = {
    **dict.fromkeys("dhHkKms", 2), **dict.fromkeys("EMLQqG", 5), "a": 1, "D": 3, "F": 1, "z": 4,
    "Z": 5, "X": 5, "x": 5, "W": 1, "w": 2,
}


def java_pattern_problem(pattern: str) -> str | None:
    """Why Java's ``DateTimeFormatter.ofPattern`` refuses ``pattern``, in its words (None: it
    takes it). The checks are those of the pattern's shape, letter counts included."""
    i, n, depth = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        if c.isascii() and c.isalpha():
            end = i
            while end < n and pattern[end] == c:
                end += 1
            count = end - i
            if c == "p":
                if end >= n or not (pattern[end].isascii() and pattern[end].isalpha()):
                    return f"Pad letter 'p' must be followed by valid pad pattern: {pattern}"
                i = end
                continue
            if c not in _PATTERN_LETTERS:
                return f"Unknown pattern letter: {c}"
            if c == "V" and count != 2:
                return "Pattern letter count must be 2: V"
            if c == "O" and count not in (1, 4):
                return "Pattern letter count must be 1 or 4: O"
            if count > _MOST_LETTERS.get(c, 19):
                return f"Too many pattern letters: {c}"
            i = end
        elif c == "'":
            end = i + 1
            while end < n:
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        end += 2
                        continue
                    break
                end += 1
            if end >= n:
                return f"Pattern ends with an incomplete string literal: {pattern}"
            i = end + 1
        else:
            if c == "[":
                depth += 1
            elif c == "]":
                if depth == 0:
                    return "Pattern invalid as it contains ] without previous ["
                depth -= 1
            elif c in "{}#":
                return f"Pattern includes reserved character: '{c}'"
            i += 1
    return None


def _check_datetime_pattern(name: str, value: Any) -> None:
    if not isinstance(value, str):
        return
    problem = java_pattern_problem(value)
    if problem is not None:
        raise StatementPrepareError(
            f"Failed to prepare statement: Invalid datetime format for config:{name}, reason:{problem}"
        )
