"""Deterministic JSON serde of statement plans, steps and commands.

One place maps dataclass field names to JSON keys (``json_key``: snake_case -> camelCase).
Steps and commands carry their wire name under ``"@type"``. Output is deterministic:
sorted keys, 2-space indent, trailing newline. Unknown step types, unknown fields and
missing required fields are SerdeErrors that name them and the known ones.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

from engine.errors import SerdeError
from engine.plan import expr as E
from engine.plan.plan import COMMAND_TYPES, Command, QueryPlan, StatementPlan
from engine.plan.schema import LogicalSchema
from engine.plan.steps import (
    STEP_TYPES,
    Formats,
    SelectExpression,
    Step,
    TimestampColumn,
    WindowInfo,
)
from engine.plan.types import SqlType, parse_type

TYPE_KEY = "@type"

# Parameter dataclasses that serialise as plain objects (no @type).
VALUE_CLASSES: dict[str, type[Any]] = {
    "Formats": Formats,
    "TimestampColumn": TimestampColumn,
    "WindowInfo": WindowInfo,
    "SelectExpression": SelectExpression,
    "QueryPlan": QueryPlan,
    "StatementPlan": StatementPlan,
}


def json_key(field_name: str) -> str:
    """The JSON key of a dataclass field: ``key_column_names`` -> ``keyColumnNames``."""
    head, *rest = field_name.split("_")
    return head + "".join(part.capitalize() for part in rest)


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    """Resolved type hints of a plan class (cached: plans load often)."""
    found = _HINTS.get(cls)
    if found is None:
        found = _HINTS[cls] = _resolve_hints(cls)
    return found


def _resolve_hints(cls: type[Any]) -> dict[str, Any]:
    import sys

    import engine.plan.plan as plan_mod
    import engine.plan.steps as steps_mod

    namespace = {
        **vars(steps_mod),
        **vars(plan_mod),
        **vars(sys.modules[cls.__module__]),
        "Expr": E.Expr,
        "SqlType": SqlType,
    }
    return typing.get_type_hints(cls, globalns=namespace)


def _fields(cls: type[Any]) -> list[dataclasses.Field[Any]]:
    return list(dataclasses.fields(cls))


# --------------------------------------------------------------------------- to JSON


def to_json_value(obj: Any) -> Any:
    """Convert a plan object (or any field value in it) to plain JSON values."""
    if obj is None or isinstance(obj, bool | int | str):
        return obj
    if isinstance(obj, float):
        return obj
    if isinstance(obj, Step | Command):
        out: dict[str, Any] = {TYPE_KEY: obj.TYPE}
        out.update(_dataclass_to_json(obj))
        return out
    if isinstance(obj, E.Expr):
        return E.to_json(obj)
    if isinstance(obj, LogicalSchema | SqlType):
        return str(obj)
    if dataclasses.is_dataclass(obj):
        return _dataclass_to_json(obj)
    if isinstance(obj, tuple):
        return [to_json_value(v) for v in obj]
    raise SerdeError(f"Cannot serialise a value of type {type(obj).__name__}: {obj!r}.")


def _is_pairs(annotation: Any) -> bool:
    """Whether a field annotation is ``tuple[tuple[str, str], ...]`` (serialised as an object)."""
    args = typing.get_args(annotation)
    return (
        typing.get_origin(annotation) is tuple
        and len(args) == 2
        and args[1] is Ellipsis
        and typing.get_origin(args[0]) is tuple
    )


def _dataclass_to_json(obj: Any) -> dict[str, Any]:
    hints = _hints(type(obj))
    out: dict[str, Any] = {}
    for f in _fields(type(obj)):
        value = getattr(obj, f.name)
        if f.metadata.get(E.OMIT_DEFAULT) and value == f.default:
            continue  # a field added later leaves the plans that do not use it as they were
        if _is_pairs(hints[f.name]):
            out[json_key(f.name)] = {k: v for k, v in value}
        else:
            out[json_key(f.name)] = to_json_value(value)
    return out


def dumps(obj: Any) -> str:
    """Deterministic JSON text: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(to_json_value(obj), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# --------------------------------------------------------------------------- from JSON


def step_from_json(data: Any) -> Step:
    """Rebuild a step (and its inputs) from JSON."""
    node = _typed_node(data, STEP_TYPES, "step")
    assert isinstance(node, Step)
    return node


def command_from_json(data: Any) -> Command:
    """Rebuild a DDL command from JSON."""
    node = _typed_node(data, COMMAND_TYPES, "command")
    assert isinstance(node, Command)
    return node


def statement_plan_from_json(data: Any) -> StatementPlan:
    """Rebuild a statement plan from JSON."""
    value = _from_json(data, StatementPlan, "statement plan")
    assert isinstance(value, StatementPlan)
    return value


def loads_statement_plan(text: str) -> StatementPlan:
    """Parse JSON text of one statement plan."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SerdeError(f"Plan is not valid JSON: {exc}.") from exc
    return statement_plan_from_json(data)


def _typed_node(data: Any, registry: dict[str, type[Any]], what: str) -> Any:
    if not isinstance(data, dict) or TYPE_KEY not in data:
        raise SerdeError(f"A {what} must be a JSON object with '{TYPE_KEY}', got {_short(data)}.")
    wire = data[TYPE_KEY]
    cls = registry.get(wire)
    if cls is None:
        raise SerdeError(
            f"Unknown {what} type '{wire}'; known types: {', '.join(sorted(registry))}."
        )
    return _object_from_json(data, cls, wire, skip={TYPE_KEY})


def _object_from_json(data: dict[str, Any], cls: type[Any], label: str, skip: set[str]) -> Any:
    hints = _hints(cls)
    fields = {json_key(f.name): f for f in _fields(cls)}
    unknown = set(data) - set(fields) - skip
    if unknown:
        raise SerdeError(
            f"Unknown field(s) {', '.join(sorted(unknown))} in {label}; "
            f"known fields: {', '.join(sorted(fields))}."
        )
    kwargs: dict[str, Any] = {}
    for key, f in fields.items():
        if key not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise SerdeError(f"{label} is missing its required field '{key}'.")
            continue
        kwargs[f.name] = _from_json(data[key], hints[f.name], f"{label}.{key}")
    try:
        return cls(**kwargs)
    except SerdeError:
        raise
    except Exception as exc:
        raise SerdeError(f"Invalid {label}: {exc}") from exc


def _from_json(data: Any, annotation: Any, label: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        non_null = [a for a in args if a is not type(None)]
        return _from_json(data, non_null[0], label)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            item = args[0]
            if _is_pairs(annotation):
                if not isinstance(data, dict):
                    raise SerdeError(f"{label} must be a JSON object, got {_short(data)}.")
                return tuple((str(k), str(v)) for k, v in sorted(data.items()))
            if not isinstance(data, list):
                raise SerdeError(f"{label} must be a JSON array, got {_short(data)}.")
            return tuple(_from_json(v, item, f"{label}[{i}]") for i, v in enumerate(data))
    if annotation is Any:
        return data
    if isinstance(annotation, type):
        if issubclass(annotation, Step):
            return step_from_json(data)
        if issubclass(annotation, Command):
            return command_from_json(data)
        if issubclass(annotation, E.Expr):
            return E.from_json(data)
        if issubclass(annotation, LogicalSchema):
            return LogicalSchema.parse(_expect(data, str, label))
        if issubclass(annotation, SqlType):
            return parse_type(_expect(data, str, label))
        if dataclasses.is_dataclass(annotation):
            if not isinstance(data, dict):
                raise SerdeError(f"{label} must be a JSON object, got {_short(data)}.")
            return _object_from_json(data, annotation, label, skip=set())
        if annotation is bool:
            return _expect(data, bool, label)
        if annotation is int:
            if isinstance(data, bool):
                raise SerdeError(f"{label} must be an integer, got {_short(data)}.")
            return _expect(data, int, label)
        if annotation is str:
            return _expect(data, str, label)
    raise SerdeError(f"{label}: no JSON mapping for the annotation {annotation!r} (a bug).")


def _expect(data: Any, kind: type[Any], label: str) -> Any:
    if not isinstance(data, kind):
        raise SerdeError(f"{label} must be a {kind.__name__}, got {_short(data)}.")
    return data


def _short(data: Any) -> str:
    text = json.dumps(data, default=str)
    return text if len(text) <= 80 else text[:77] + "..."
