"""ksqlDB plan values -> kspark plan values: formats, serde features, timestamps, windows.

ksqlDB writes a ``java.time.Duration`` as decimal seconds (``1.0``, ``0.002``); window
expressions are either the old text form (``" TUMBLING ( SIZE 1 MINUTES ) "``) or an
object (``{"windowType": ..., "size": {"value": 1, "timeUnit": "SECONDS"}, ...}``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from engine.errors import PlanError, UnsupportedFeatureError
from engine.plan.schema import LogicalSchema
from engine.plan.steps import Formats, TimestampColumn, WindowInfo
from engine.plan.steps_aggregate import WindowSpec

# ksqlDB format property (camelCase) -> kspark format property (lower-case).
_PROPERTIES = {
    "delimiter": "delimiter",
    "schemaId": "schema_id",
    "fullSchemaName": "schema_full_name",
    "nullableRepresentation": "nullable_representation",
    "subjectName": "subject_name",
}
# 5.5's ``options`` -> the value serde features of later releases.
_LEGACY_OPTIONS = {"WRAP_SINGLE_VALUES": "WRAP_SINGLES", "UNWRAP_SINGLE_VALUES": "UNWRAP_SINGLES"}
_FEATURES = frozenset({"WRAP_SINGLES", "UNWRAP_SINGLES"})

_UNIT_MS = {
    "MILLISECOND": 1,
    "SECOND": 1000,
    "MINUTE": 60_000,
    "HOUR": 3_600_000,
    "DAY": 86_400_000,
}


@lru_cache(maxsize=4096)
def schema(text: str) -> LogicalSchema:
    """``LogicalSchema.parse(text)``, remembered: a corpus repeats its schemas, each parse
    costs a grammar run (about a tenth of a second on a loaded machine), and a parsed schema
    is immutable. A text that does not parse raises each time."""
    return LogicalSchema.parse(text)


def require(node: Mapping[str, Any], key: str, where: str) -> Any:
    """``node[key]``, or a PlanError naming the missing field and where it is missing."""
    if key not in node or node[key] is None:
        raise PlanError(f"The ksqlDB plan's {where} has no '{key}'.")
    return node[key]


def duration_ms(seconds: Any, what: str) -> int:
    """A Duration as ksqlDB's plan writes it (decimal seconds) in whole milliseconds."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float | str):
        raise PlanError(f"{what} must be a duration in seconds, got {seconds!r}.")
    return int(Decimal(str(seconds)) * 1000)


def _properties(fmt: Mapping[str, Any], side: str) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for key, value in (fmt.get("properties") or {}).items():
        if key == "unwrapPrimitives":
            # kspark's records of PROTOBUF are in their JSON form, where wrapped and unwrapped
            # primitives read the same; only ``true`` (ksqlDB's default) keeps that so.
            if str(value).lower() != "true":
                raise UnsupportedFeatureError(
                    f"{side} format property unwrapPrimitives={value}",
                    f"kspark reads PROTOBUF primitives unwrapped only; the plan sets "
                    f"unwrapPrimitives={value} on its {side} format.",
                )
            continue
        mapped = _PROPERTIES.get(key)
        if mapped is None:
            raise UnsupportedFeatureError(
                f"{side} format property {key}",
                f"kspark does not support the {side} format property '{key}' "
                f"(known: {', '.join(sorted(_PROPERTIES))}, unwrapPrimitives).",
            )
        out[mapped] = str(value)
    return tuple(sorted(out.items()))


def _features(names: Any, side: str) -> tuple[str, ...]:
    features = tuple(str(n) for n in names or ())
    for name in features:
        if name not in _FEATURES:
            raise UnsupportedFeatureError(
                f"{side} serde feature {name}",
                f"kspark does not support the {side} serde feature '{name}'.",
            )
    return features


def formats(node: Any, where: str) -> Formats:
    """``{"keyFormat": {format, properties}, "valueFormat": ..., keyFeatures, valueFeatures}``."""
    if not isinstance(node, Mapping):
        raise PlanError(f"The formats of {where} must be an object, got {node!r}.")
    key = require(node, "keyFormat", f"formats of {where}")
    value = require(node, "valueFormat", f"formats of {where}")
    value_features = list(node.get("valueFeatures") or ())
    for option in node.get("options") or ():
        mapped = _LEGACY_OPTIONS.get(option)
        if mapped is None:
            raise UnsupportedFeatureError(
                f"serde option {option}", f"kspark does not support the serde option '{option}'."
            )
        value_features.append(mapped)
    return Formats(
        key_format=str(require(key, "format", f"key format of {where}")).upper(),
        value_format=str(require(value, "format", f"value format of {where}")).upper(),
        key_properties=_properties(key, "key"),
        value_properties=_properties(value, "value"),
        key_features=_features(node.get("keyFeatures"), "key"),
        value_features=_features(value_features, "value"),
    )


def timestamp_column(node: Any) -> TimestampColumn | None:
    """``{"column": "TS", "format": "yyyy-MM-dd"}`` or null."""
    if node is None:
        return None
    if not isinstance(node, Mapping) or not node.get("column"):
        raise PlanError(f"A timestampColumn must be an object with a column, got {node!r}.")
    return TimestampColumn(column=str(node["column"]), format=node.get("format"))


def window_info(node: Any) -> WindowInfo | None:
    """A source's ``windowInfo`` (``{"type": "TUMBLING", "size": 1.0}``) or null."""
    if node is None:
        return None
    window_type = str(require(node, "type", "windowInfo")).upper()
    size = node.get("size")
    return WindowInfo(
        type=window_type,
        size_ms=None if size is None or window_type == "SESSION" else duration_ms(size, "windowInfo.size"),
    )


_TEXT_WINDOW = re.compile(r"^\s*(TUMBLING|HOPPING|SESSION)\s*\((.*)\)\s*$", re.IGNORECASE | re.DOTALL)
_TEXT_DURATION = r"(\d+)\s+([A-Z]+)"


def _unit_ms(unit: str) -> int:
    upper = unit.upper()
    found = _UNIT_MS.get(upper[:-1] if upper.endswith("S") else upper)
    if found is None:
        raise PlanError(f"Unknown time unit '{unit}' in a ksqlDB window expression.")
    return found


def _text_duration(text: str, pattern: str) -> int | None:
    match = re.search(pattern.replace("{d}", _TEXT_DURATION), text, re.IGNORECASE)
    return None if match is None else int(match.group(1)) * _unit_ms(match.group(2))


def window_spec(node: Any) -> WindowSpec:
    """A windowed aggregate's ``windowExpression``, text (before 7.3) or object form."""
    if isinstance(node, str):
        match = _TEXT_WINDOW.match(node)
        if match is None:
            raise PlanError(f"Cannot read the ksqlDB window expression '{node.strip()}'.")
        kind, body = match.group(1).upper(), match.group(2)
        grace = _text_duration(body, r"GRACE\s+PERIOD\s+{d}")
        retention = _text_duration(body, r"RETENTION\s+{d}")
        if kind == "SESSION":
            gap = _text_duration(body, r"^\s*{d}")
            return WindowSpec(type=kind, gap_ms=gap, grace_ms=grace, retention_ms=retention)
        size = _text_duration(body, r"SIZE\s+{d}")
        advance = _text_duration(body, r"ADVANCE\s+BY\s+{d}")
        return WindowSpec(
            type=kind, size_ms=size, advance_ms=advance, grace_ms=grace, retention_ms=retention
        )
    if not isinstance(node, Mapping):
        raise PlanError(f"A windowExpression must be text or an object, got {node!r}.")
    kind = str(require(node, "windowType", "windowExpression")).upper()

    def ms(key: str) -> int | None:
        part = node.get(key)
        if part is None:
            return None
        return int(require(part, "value", f"windowExpression.{key}")) * _unit_ms(
            str(require(part, "timeUnit", f"windowExpression.{key}"))
        )

    return WindowSpec(
        type=kind,
        size_ms=ms("size"),
        advance_ms=ms("advanceBy"),
        gap_ms=ms("gap"),
        grace_ms=ms("gracePeriod"),
        retention_ms=ms("retention"),
    )


def emit_final(node: Any) -> bool:
    """Whether an object-form window expression asks for EMIT FINAL."""
    return isinstance(node, Mapping) and str(node.get("emitStrategy") or "").upper() == "FINAL"
