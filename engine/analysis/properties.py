"""WITH-clause properties of CREATE statements: validation and typed access."""

from __future__ import annotations

import decimal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import AnalysisError

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
    def of(values: Mapping[str, Any], *, statement: str = "") -> WithProperties:
        upper = {k.upper(): v for k, v in values.items()}
        unknown = sorted(set(upper) - SOURCE_PROPERTIES)
        if unknown:
            raise AnalysisError(
                f"Invalid config variable(s) in the WITH clause: {','.join(unknown)}."
            )
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
