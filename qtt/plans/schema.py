"""The plan-schema guard: a JSON Schema of the plan format, generated from the registries.

``generate_schema()`` walks the step registry (``STEP_TYPES``), the command registry
(``COMMAND_TYPES``), the expression kinds and the dataclass type hints, and returns a
deterministic JSON Schema (draft 2020-12) of a planned case's ``plan.json``.
``compare_schemas(old, new)`` applies backward-compatibility rules with the *new* engine
as the reader of plans written by the old one:

- a removed step/command/expression type, a removed field, a new required field, a field
  that became required, or a changed field type is **breaking**;
- a new type, a new optional field or a field that became optional is **compatible**.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.plan import expr as E
from engine.plan.plan import COMMAND_TYPES, QueryPlan, StatementPlan
from engine.plan.schema import LogicalSchema
from engine.plan.serde import TYPE_KEY, VALUE_CLASSES, _hints, _is_pairs, json_key
from engine.plan.steps import STEP_TYPES, Step
from engine.plan.types import SqlType

SCHEMA_FILE = Path("schemas") / "plan.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

BREAKING = "breaking"
COMPATIBLE = "compatible"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


# Parameter dataclasses referenced while generating; each gets a definition of its own.
_referenced: dict[str, type[Any]] = {}


def _type_schema(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [_type_schema(a) for a in args if a is not type(None)]
        base = options[0] if len(options) == 1 else {"anyOf": options}
        return {"anyOf": [base, {"type": "null"}]} if type(None) in args else base
    if origin is tuple:
        if _is_pairs(annotation):
            return {"type": "object", "additionalProperties": {"type": "string"}}
        return {"type": "array", "items": _type_schema(args[0])}
    if annotation is Any:
        return {}
    if isinstance(annotation, type):
        if issubclass(annotation, Step):
            return _ref("Step")
        if issubclass(annotation, E.Expr):
            return _ref("Expr")
        if issubclass(annotation, LogicalSchema):
            return {"type": "string", "description": "a logical schema in ksqlDB text form"}
        if issubclass(annotation, SqlType):
            return {"type": "string", "description": "a SQL type in ksqlDB text form"}
        if annotation.__name__ == "Command":
            return _ref("Command")
        if dataclasses.is_dataclass(annotation):
            _referenced.setdefault(annotation.__name__, annotation)
            return _ref(annotation.__name__)
        simple = {bool: "boolean", int: "integer", float: "number", str: "string"}
        if annotation in simple:
            return {"type": simple[annotation]}
    raise TypeError(f"No JSON Schema mapping for the annotation {annotation!r} (a bug).")


def _class_hints(cls: type[Any]) -> dict[str, Any]:
    try:
        return dict(_hints(cls))
    except NameError:  # a class defined outside the modules the serde knows
        return typing.get_type_hints(cls)


def _object_schema(cls: type[Any], wire: str | None, key: str = TYPE_KEY) -> dict[str, Any]:
    hints = _class_hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    if wire is not None:
        properties[key] = {"const": wire}
        required.append(key)
    for f in dataclasses.fields(cls):
        properties[json_key(f.name)] = _type_schema(hints[f.name])
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(json_key(f.name))
    out: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": sorted(required),
        "additionalProperties": False,
    }
    if cls.__doc__:
        out["description"] = cls.__doc__.strip().splitlines()[0]
    return out


def _expr_schema(cls: type[Any]) -> dict[str, Any]:
    properties: dict[str, Any] = {"kind": {"const": cls.KIND}}
    required = ["kind"]
    if cls is E.Literal:
        properties.update({"value": {}, "type": {"anyOf": [{"type": "string"}, {"type": "null"}]}})
    else:
        for f in dataclasses.fields(cls):
            properties[f.name] = {}
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(f.name)
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(required),
        "additionalProperties": False,
    }


def _union(key: str, prefix: str, names: list[str]) -> dict[str, Any]:
    # Dispatch on the discriminator with if/then: only the matching member is validated,
    # so nested steps are not checked once per member (oneOf would be exponential in depth).
    members: list[dict[str, Any]] = [{"properties": {key: {"enum": names}}}]
    members += [
        {"if": {"properties": {key: {"const": n}}}, "then": _ref(f"{prefix}.{n}")} for n in names
    ]
    return {"type": "object", "required": [key], "allOf": members}


def generate_schema() -> dict[str, Any]:
    """The JSON Schema of ``plan.json``, deterministic for a given set of registries."""
    defs: dict[str, Any] = {}
    _referenced.clear()
    for wire, cls in sorted(STEP_TYPES.items()):
        defs[f"step.{wire}"] = _object_schema(cls, wire)
    for wire, command in sorted(COMMAND_TYPES.items()):
        defs[f"command.{wire}"] = _object_schema(command, wire)
    for kind, node in sorted(E._KINDS.items()):
        defs[f"expr.{kind}"] = _expr_schema(node)
    defs["Step"] = _union(TYPE_KEY, "step", sorted(STEP_TYPES))
    defs["Command"] = _union(TYPE_KEY, "command", sorted(COMMAND_TYPES))
    defs["Expr"] = _union("kind", "expr", sorted(E._KINDS))
    _referenced.update(VALUE_CLASSES)
    while missing := sorted(set(_referenced) - set(defs)):
        for name in missing:
            defs[name] = _object_schema(_referenced[name], None)
    assert QueryPlan.__name__ in defs and StatementPlan.__name__ in defs
    return {
        "$schema": DIALECT,
        "$id": "https://kspark.invalid/schemas/plan.schema.json",
        "title": "kspark planned case plan.json",
        "description": (
            "Generated by `qtt schema generate` from the step, command and expression "
            "registries; do not edit by hand."
        ),
        "type": "object",
        "properties": {
            "configs": {"type": "object"},
            "plans": {"type": "array", "items": _ref("StatementPlan")},
        },
        "required": ["configs", "plans"],
        "additionalProperties": False,
        "$defs": defs,
    }


def schema_text(schema: dict[str, Any]) -> str:
    """Deterministic text of a schema: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(schema, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_schema(path: Path = SCHEMA_FILE) -> Path:
    """Generate the schema and write it to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schema_text(generate_schema()), encoding="utf-8")
    return path


def read_schema(path: Path = SCHEMA_FILE) -> dict[str, Any]:
    """The committed schema."""
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON Schema object.")
    return data


# ---------------------------------------------------------------------------- compatibility


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """One difference between the committed and the generated schema, with its verdict."""

    definition: str
    field: str | None
    change: str
    verdict: str

    def render(self) -> str:
        where = self.definition + (f".{self.field}" if self.field else "")
        return f"{self.verdict.upper()}: {where}: {self.change}"


def compare_schemas(old: dict[str, Any], new: dict[str, Any]) -> list[SchemaChange]:
    """Changes from ``old`` (committed) to ``new`` (generated), judged for the new reader."""
    changes: list[SchemaChange] = []
    old_defs = old.get("$defs", {})
    new_defs = new.get("$defs", {})
    for name in sorted(set(old_defs) - set(new_defs)):
        changes.append(SchemaChange(name, None, "type removed", BREAKING))
    for name in sorted(set(new_defs) - set(old_defs)):
        changes.append(SchemaChange(name, None, "type added", COMPATIBLE))
    for name in sorted(set(old_defs) & set(new_defs)):
        changes += _compare_definition(name, old_defs[name], new_defs[name])
    old_top = {k: v for k, v in old.items() if k != "$defs"}
    new_top = {k: v for k, v in new.items() if k != "$defs"}
    if old_top != new_top:
        changes += _compare_definition("plan.json", old_top, new_top)
    return changes


def _compare_definition(name: str, old: dict[str, Any], new: dict[str, Any]) -> list[SchemaChange]:
    if "properties" not in old or "properties" not in new:
        if old == new:
            return []
        # Union definitions (Step, Command, Expr): members are judged on their own.
        return [SchemaChange(name, None, "members changed", COMPATIBLE)]
    changes: list[SchemaChange] = []
    old_props, new_props = old["properties"], new["properties"]
    old_req, new_req = set(old.get("required", [])), set(new.get("required", []))
    for field in sorted(set(old_props) - set(new_props)):
        changes.append(SchemaChange(name, field, "field removed", BREAKING))
    for field in sorted(set(new_props) - set(old_props)):
        if field in new_req:
            changes.append(SchemaChange(name, field, "required field added", BREAKING))
        else:
            changes.append(SchemaChange(name, field, "optional field added", COMPATIBLE))
    for field in sorted(set(old_props) & set(new_props)):
        if old_props[field] != new_props[field]:
            old_t = json.dumps(old_props[field], sort_keys=True)
            new_t = json.dumps(new_props[field], sort_keys=True)
            changes.append(
                SchemaChange(name, field, f"type changed from {old_t} to {new_t}", BREAKING)
            )
        if field in new_req and field not in old_req:
            changes.append(SchemaChange(name, field, "field became required", BREAKING))
        if field in old_req and field not in new_req:
            changes.append(SchemaChange(name, field, "field became optional", COMPATIBLE))
    for key in sorted((set(old) | set(new)) - {"properties", "required", "description"}):
        if old.get(key) != new.get(key):
            changes.append(SchemaChange(name, None, f"'{key}' changed", BREAKING))
    return changes


def validate_plan_file(data: Any, schema: dict[str, Any]) -> list[str]:
    """Messages for every place where a ``plan.json`` document breaks the schema."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema)
    messages = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        leaf = _deepest(error)
        path = "/".join(str(p) for p in leaf.absolute_path) or "<root>"
        message = leaf.message
        last = leaf.absolute_path[-1] if leaf.absolute_path else None
        if leaf.validator == "enum" and last in (TYPE_KEY, "kind"):
            message = f"the type {leaf.instance!r} is not in the schema"
        messages.append(f"at {path}: {_short(message)}")
    return messages


def _deepest(error: Any) -> Any:
    """The most specific error under an anyOf/oneOf failure.

    Branches for another type (a failing ``@type``/``kind`` const, or the ``null`` of an
    optional value) are ignored; the deepest error of the remaining branches wins.
    """
    branches: dict[Any, list[Any]] = {}
    for sub in error.context or ():
        branches.setdefault(sub.schema_path[0] if sub.schema_path else None, []).append(sub)
    candidates = [
        _deepest(sub)
        for subs in branches.values()
        if not any(_other_branch(sub) for sub in subs)
        for sub in subs
    ]
    if not candidates:
        return error
    return max(candidates, key=lambda e: len(e.absolute_path))


def _other_branch(error: Any) -> bool:
    if error.validator == "type" and error.validator_value == "null":
        return True
    last = error.relative_path[-1] if error.relative_path else None
    return error.validator == "const" and last in ("@type", "kind")


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
