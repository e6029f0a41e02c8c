"""The plan-schema guard: a precise JSON Schema of the plan format and a compatibility check.

``generate_schema()`` walks the step registry (``STEP_TYPES``), the command registry
(``COMMAND_TYPES``), the expression kinds and the dataclass type hints (with their
``engine.plan.constraints`` annotations) and returns a deterministic JSON Schema (draft
2020-12) of a planned case's ``plan.json``. Every step, command and expression object is
closed (``additionalProperties: false``); its discriminator is a ``const``; fields without
a default are ``required``; fixed-option strings are ``enum``s; SQL types and logical
schemas are strings with a ``pattern`` and a ``format`` that ``validate_plan_file`` checks
with the engine's own parsers; literals carry one value encoding per SQL type.

``compare_schemas(old, new)`` judges every difference with the *new* engine as the reader
of plans written under the *old* schema: a change is **compatible** when every document the
old schema accepts is still accepted (a new step version, a new optional field, a widened
enum or type, a dropped constraint) and **breaking** otherwise (a removed or renamed field,
a narrowed enum or type, a field made required, a new constraint, a changed ``const`` or
reference). ``update_schema`` writes the generated schema only when no change is breaking.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import PlanError
from engine.plan import expr as E
from engine.plan.constraints import Minimum, MinLength, OneOf
from engine.plan.plan import COMMAND_TYPES, Command, QueryPlan, StatementPlan
from engine.plan.schema import LogicalSchema
from engine.plan.serde import TYPE_KEY, VALUE_CLASSES, json_key
from engine.plan.steps import STEP_TYPES, Step
from engine.plan.types import (
    BIGINT_MAX,
    BIGINT_MIN,
    INT_MAX,
    INT_MIN,
    BaseType,
    SqlType,
    parse_type,
)

SCHEMA_FILE = Path("schemas") / "plan.schema.json"
DIALECT = "https://json-schema.org/draft/2020-12/schema"

BREAKING = "breaking"
COMPATIBLE = "compatible"

SQL_TYPE_FORMAT = "kspark-sql-type"
LOGICAL_SCHEMA_FORMAT = "kspark-logical-schema"

# ----------------------------------------------------------------------------- text formats

_PRIMITIVES = [b.value for b in BaseType if b.value not in ("DECIMAL", "ARRAY", "MAP", "STRUCT")]
_QUOTED_NAME = r"`(?:[^`]|``)*`"
_DECIMAL = r"DECIMAL\([0-9]+, [0-9]+\)"
# The tokens of a SQL type in the canonical text the serde writes (``str(SqlType)``). The
# pattern cannot check nesting; the format check parses the text with the engine's parser.
_TYPE_TOKENS = "|".join([*_PRIMITIVES, _DECIMAL, "ARRAY<", "MAP<", "STRUCT<", _QUOTED_NAME + " ", ", ", ">"])
SQL_TYPE_PATTERN = f"^(?:{_TYPE_TOKENS})+$"
LOGICAL_SCHEMA_PATTERN = (
    f"^(?:{_TYPE_TOKENS}| KEY| HEADERS| HEADER\\('(?:[^']|'')*'\\))*$"
)

# Literal value encodings by literal type, as engine.plan.expr.literal_to_json writes them
# (a test round-trips literals of every type through the serde and this schema).
_DOUBLE_TEXT = r"^(?:nan|-?inf|-?[0-9]+\.[0-9]+(?:e[+-][0-9]+)?|-?[0-9]+e[+-][0-9]+)$"
_DECIMAL_TEXT = r"^-?[0-9]+(?:\.[0-9]+)?(?:E[+-][0-9]+)?$"
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
LITERAL_ENCODINGS: dict[str, dict[str, Any]] = {
    "BOOLEAN": {"type": "boolean"},
    "INTEGER": {"type": "integer", "minimum": INT_MIN, "maximum": INT_MAX},
    # 2**63 appears only as the operand of a negation (the parser's -9223372036854775808).
    "BIGINT": {"type": "integer", "minimum": BIGINT_MIN, "maximum": BIGINT_MAX + 1},
    "DOUBLE": {"type": "string", "pattern": _DOUBLE_TEXT, "description": "Python repr of the float"},
    "STRING": {"type": "string"},
    "BYTES": {"type": "string", "pattern": _BASE64, "description": "base64"},
}
DECIMAL_LITERAL = {"type": "string", "pattern": _DECIMAL_TEXT, "description": "exact decimal text"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


# ---------------------------------------------------------------------------- generation


class _Generator:
    """One generation run: definitions are added as the walk meets their classes."""

    def __init__(self) -> None:
        self.referenced: dict[str, type[Any]] = dict(VALUE_CLASSES)

    def type_schema(self, annotation: Any) -> dict[str, Any]:
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            return self._constrained(args[0], args[1:])
        if origin in (typing.Union, types.UnionType):
            options = [self.type_schema(a) for a in args if a is not type(None)]
            base = options[0] if len(options) == 1 else {"anyOf": options}
            return {"anyOf": [base, {"type": "null"}]} if type(None) in args else base
        if origin is tuple:
            if _is_pairs(annotation):
                return {"type": "object", "additionalProperties": {"type": "string"}}
            return {"type": "array", "items": self.type_schema(args[0])}
        if isinstance(annotation, type):
            if issubclass(annotation, Step):
                return _ref("Step")
            if issubclass(annotation, Command):
                return _ref("Command")
            if annotation is E.Expr:
                return _ref("Expr")
            if issubclass(annotation, E.Expr):
                return _ref(f"expr.{annotation.KIND}")
            if issubclass(annotation, LogicalSchema):
                return _ref("LogicalSchema")
            if issubclass(annotation, SqlType):
                return _ref("SqlType")
            if dataclasses.is_dataclass(annotation):
                self.referenced.setdefault(annotation.__name__, annotation)
                return _ref(annotation.__name__)
            simple = {bool: "boolean", int: "integer", str: "string"}
            if annotation in simple:
                return {"type": simple[annotation]}
        raise TypeError(f"No JSON Schema mapping for the annotation {annotation!r} (a bug).")

    def _constrained(self, annotation: Any, constraints: tuple[Any, ...]) -> dict[str, Any]:
        out = self.type_schema(annotation)
        for c in constraints:
            if isinstance(c, OneOf) and _is_pairs(annotation):
                out["propertyNames"] = {"enum": list(c.values)}
            elif isinstance(c, OneOf) and annotation is str:
                out["enum"] = list(c.values)
            elif isinstance(c, Minimum) and annotation is int:
                out["minimum"] = c.value
            elif isinstance(c, MinLength) and annotation is str:
                out["minLength"] = c.value
            else:
                raise TypeError(f"The constraint {c!r} does not apply to {annotation!r} (a bug).")
        return out

    def object_schema(
        self, cls: type[Any], discriminator: tuple[str, str] | None, key: Callable[[str], str]
    ) -> dict[str, Any]:
        hints = _class_hints(cls)
        properties: dict[str, Any] = {}
        required: list[str] = []
        if discriminator is not None:
            properties[discriminator[0]] = {"const": discriminator[1]}
            required.append(discriminator[0])
        for f in dataclasses.fields(cls):
            properties[key(f.name)] = self.type_schema(hints[f.name])
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                required.append(key(f.name))
        out: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "required": sorted(required),
            "additionalProperties": False,
        }
        if cls.__doc__:
            out["description"] = cls.__doc__.strip().splitlines()[0]
        return out


def _is_pairs(annotation: Any) -> bool:
    """``tuple[tuple[str, str], ...]`` (serialised as a JSON object of strings)."""
    args = typing.get_args(annotation)
    return (
        typing.get_origin(annotation) is tuple
        and len(args) == 2
        and args[1] is Ellipsis
        and typing.get_origin(args[0]) is tuple
    )


def _class_hints(cls: type[Any]) -> dict[str, Any]:
    """Type hints with their ``Annotated`` constraints, in the namespace the serde uses."""
    import engine.plan.plan as plan_module
    import engine.plan.steps as steps_module

    namespace = {
        **vars(steps_module),
        **vars(plan_module),
        **vars(sys.modules[cls.__module__]),
        "Expr": E.Expr,
        "SqlType": SqlType,
    }
    return typing.get_type_hints(cls, globalns=namespace, include_extras=True)


def _literal_schema() -> dict[str, Any]:
    typed = [
        {
            "if": {"properties": {"type": {"const": name}}, "required": ["type"]},
            "then": {"properties": {"value": encoding}, "required": ["value"]},
        }
        for name, encoding in LITERAL_ENCODINGS.items()
    ]
    decimal_type = {"type": "string", "pattern": f"^{_DECIMAL}$", "format": SQL_TYPE_FORMAT}
    typed.append(
        {
            "if": {"properties": {"type": decimal_type}, "required": ["type"]},
            "then": {"properties": {"value": DECIMAL_LITERAL}, "required": ["value"]},
        }
    )
    typed.append(
        {
            "if": {"properties": {"type": {"type": "null"}}},
            "then": {"properties": {"value": {"type": "null"}}},
        }
    )
    return {
        "type": "object",
        "description": E.Literal.__doc__.strip().splitlines()[0] if E.Literal.__doc__ else "",
        "properties": {
            "kind": {"const": E.Literal.KIND},
            "type": {"anyOf": [{"enum": list(LITERAL_ENCODINGS)}, decimal_type, {"type": "null"}]},
            "value": {},
        },
        "required": ["kind"],
        "additionalProperties": False,
        "allOf": typed,
    }


def _union(key: str, prefix: str, names: list[str]) -> dict[str, Any]:
    # Dispatch on the discriminator with if/then: only the matching member is validated,
    # so nested steps are not checked once per member (oneOf would be exponential in depth).
    members = [
        {"if": {"properties": {key: {"const": n}}}, "then": _ref(f"{prefix}.{n}")} for n in names
    ]
    return {
        "type": "object",
        "properties": {key: {"enum": names}},
        "required": [key],
        "allOf": members,
    }


def generate_schema() -> dict[str, Any]:
    """The JSON Schema of ``plan.json``, deterministic for a given set of registries."""
    gen = _Generator()
    defs: dict[str, Any] = {}
    for wire, cls in sorted(STEP_TYPES.items()):
        defs[f"step.{wire}"] = gen.object_schema(cls, (TYPE_KEY, wire), json_key)
    for wire, command in sorted(COMMAND_TYPES.items()):
        defs[f"command.{wire}"] = gen.object_schema(command, (TYPE_KEY, wire), json_key)
    for kind, node in sorted(E._KINDS.items()):
        if node is E.Literal:
            defs[f"expr.{kind}"] = _literal_schema()
        else:
            defs[f"expr.{kind}"] = gen.object_schema(node, ("kind", kind), lambda name: name)
    defs["Step"] = _union(TYPE_KEY, "step", sorted(STEP_TYPES))
    defs["Command"] = _union(TYPE_KEY, "command", sorted(COMMAND_TYPES))
    defs["Expr"] = _union("kind", "expr", sorted(E._KINDS))
    defs["SqlType"] = {
        "type": "string",
        "description": "A SQL type in ksqlDB's canonical text, e.g. DECIMAL(4, 2), ARRAY<STRING>.",
        "pattern": SQL_TYPE_PATTERN,
        "format": SQL_TYPE_FORMAT,
    }
    defs["LogicalSchema"] = {
        "type": "string",
        "description": "Columns in ksqlDB's text form, e.g. `ID` STRING KEY, `V` INTEGER.",
        "pattern": LOGICAL_SCHEMA_PATTERN,
        "format": LOGICAL_SCHEMA_FORMAT,
    }
    while missing := sorted(set(gen.referenced) - set(defs)):
        for name in missing:
            defs[name] = gen.object_schema(gen.referenced[name], None, json_key)
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
            "configs": {"type": "object", "description": "The engine configuration (open)."},
            "plans": {"type": "array", "items": _ref("StatementPlan")},
        },
        "required": ["configs", "plans"],
        "additionalProperties": False,
        "$defs": defs,
    }


def schema_text(schema: dict[str, Any]) -> str:
    """Deterministic text of a schema: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(schema, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def read_schema(path: Path = SCHEMA_FILE) -> dict[str, Any]:
    """The committed schema."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON Schema object.")
    return data


def write_schema(path: Path = SCHEMA_FILE) -> Path:
    """Generate the schema and write it to ``path``, whatever is there (tests, first write)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(schema_text(generate_schema()), encoding="utf-8")
    return path


@dataclass(frozen=True, slots=True)
class SchemaUpdate:
    """What ``update_schema`` found and did."""

    changes: list[SchemaChange]
    written: bool

    @property
    def breaking(self) -> list[SchemaChange]:
        return [c for c in self.changes if c.verdict == BREAKING]


def update_schema(path: Path = SCHEMA_FILE) -> SchemaUpdate:
    """Write the generated schema to ``path`` unless a change from the one there is breaking.

    A missing file is written (the first schema). An unreadable one is a ValueError/OSError.
    """
    new = generate_schema()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(schema_text(new), encoding="utf-8")
        return SchemaUpdate([], True)
    changes = compare_schemas(read_schema(path), new)
    if any(c.verdict == BREAKING for c in changes):
        return SchemaUpdate(changes, False)
    text = schema_text(new)
    if path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
        return SchemaUpdate(changes, True)
    return SchemaUpdate(changes, False)


# ---------------------------------------------------------------------------- compatibility


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """One difference between the committed and the generated schema, with its verdict.

    ``pointer`` is the JSON pointer of the changed keyword's schema in the schemas.
    """

    pointer: str
    change: str
    verdict: str
    reason: str

    def render(self) -> str:
        return f"{self.verdict.upper()} {self.pointer}: {self.change}; {self.reason}."


_DOC_KEYWORDS = frozenset({"description", "title", "$comment", "$schema", "$id", "examples", "default"})
_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_SUBSCHEMA_KEYWORDS = ("items", "propertyNames", "then", "else", "not", "contains")
_HANDLED = frozenset(
    {"type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf",
     "allOf", "$ref", "$defs", "pattern", "format", *_LOWER_BOUNDS, *_UPPER_BOUNDS,
     *_SUBSCHEMA_KEYWORDS}
)


def compare_schemas(old: dict[str, Any], new: dict[str, Any]) -> list[SchemaChange]:
    """Every change from ``old`` (committed) to ``new`` (generated), judged for the new reader."""
    defs = {*old.get("$defs", {}), *new.get("$defs", {})}
    return _Comparer(defs).compare(old, new, "")


def _pointer(base: str, *parts: str | int) -> str:
    for part in parts:
        base += "/" + str(part).replace("~", "~0").replace("/", "~1")
    return base


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _schema(node: Any) -> dict[str, Any]:
    if node is True:
        return {}
    if node is False:
        return {"not": {}}
    return node if isinstance(node, dict) else {}


def _published(pointer: str, defs: set[str]) -> str:
    """The advice a breaking change inside a published definition gets (``defs``: every
    definition name of both schemas, so that the advice names a version not taken yet)."""
    match = re.match(r"^/\$defs/(step|command)\.([a-z][A-Za-z]*)V([0-9]+)(?:/|$)", pointer)
    if match:
        kind, name, version = match.groups()
        following = int(version) + 1
        while f"{kind}.{name}V{following}" in defs:
            following += 1
        return (
            f"; {name}V{version} is a published {kind} version: a change of its meaning "
            f"needs a new version ({name}V{following}) beside it"
        )
    match = re.match(r"^/\$defs/expr\.([A-Za-z]+)(?:/|$)", pointer)
    if match:
        return f"; the expression kind '{match.group(1)}' is read by every published step"
    return ""


class _Comparer:
    def __init__(self, defs: set[str]) -> None:
        self.defs = defs
        self.changes: list[SchemaChange] = []

    def compare(self, old: Any, new: Any, pointer: str) -> list[SchemaChange]:
        self._node(_schema(old), _schema(new), pointer)
        return self.changes

    def _add(self, pointer: str, change: str, verdict: str, reason: str) -> None:
        if verdict == BREAKING:
            reason += _published(pointer, self.defs)
        self.changes.append(SchemaChange(pointer or "/", change, verdict, reason))

    def _breaking(self, pointer: str, change: str, reason: str) -> None:
        self._add(pointer, change, BREAKING, reason)

    def _compatible(self, pointer: str, change: str, reason: str) -> None:
        self._add(pointer, change, COMPATIBLE, reason)

    # -- one schema node --------------------------------------------------------------

    def _node(self, old: dict[str, Any], new: dict[str, Any], ptr: str) -> None:
        if old == new:
            return
        self._defs(old.get("$defs", {}), new.get("$defs", {}), ptr)
        self._type(old.get("type"), new.get("type"), ptr)
        self._properties(old, new, ptr)
        self._required(old, new, ptr)
        self._additional(old.get("additionalProperties"), new.get("additionalProperties"), ptr)
        self._enum(old, new, ptr)
        self._const(old, new, ptr)
        for keyword in ("anyOf", "oneOf"):
            self._alternatives(old.get(keyword), new.get(keyword), _pointer(ptr, keyword))
        self._all_of(old, new, ptr)
        self._ref(old.get("$ref"), new.get("$ref"), ptr)
        for keyword in ("pattern", "format"):
            self._text_constraint(keyword, old.get(keyword), new.get(keyword), ptr)
        for keyword in _LOWER_BOUNDS:
            self._bound(keyword, old.get(keyword), new.get(keyword), ptr, lower=True)
        for keyword in _UPPER_BOUNDS:
            self._bound(keyword, old.get(keyword), new.get(keyword), ptr, lower=False)
        for keyword in _SUBSCHEMA_KEYWORDS:
            if keyword in old and keyword in new:
                self._node(_schema(old[keyword]), _schema(new[keyword]), _pointer(ptr, keyword))
            elif keyword in old:
                self._compatible(
                    _pointer(ptr, keyword), f"'{keyword}' removed", "a constraint was dropped"
                )
            elif keyword in new:
                self._breaking(
                    _pointer(ptr, keyword),
                    f"'{keyword}' added",
                    "a new constraint may refuse values plans written before hold",
                )
        for keyword in sorted((set(old) | set(new)) - _HANDLED - _DOC_KEYWORDS - {"if"}):
            if old.get(keyword) != new.get(keyword):
                self._breaking(
                    _pointer(ptr, keyword),
                    f"'{keyword}' changed from {_text(old.get(keyword))} to {_text(new.get(keyword))}",
                    "the checker cannot prove a change of this keyword compatible",
                )
        if "if" in old or "if" in new:
            if old.get("if") != new.get("if"):
                self._breaking(
                    _pointer(ptr, "if"),
                    "the condition changed",
                    "the constraints now apply to other values",
                )

    def _defs(self, old: dict[str, Any], new: dict[str, Any], ptr: str) -> None:
        for name in sorted(set(old) - set(new)):
            self._breaking(
                _pointer(ptr, "$defs", name),
                "definition removed",
                f"plans written before may use '{name}' and would no longer load",
            )
        for name in sorted(set(new) - set(old)):
            what = "a new step version" if name.startswith("step.") else "a new definition"
            self._compatible(
                _pointer(ptr, "$defs", name),
                "definition added",
                f"{what}: plans written before do not use it",
            )
        for name in sorted(set(old) & set(new)):
            self._node(_schema(old[name]), _schema(new[name]), _pointer(ptr, "$defs", name))

    def _type(self, old: Any, new: Any, ptr: str) -> None:
        if old == new:
            return
        where = _pointer(ptr, "type")
        if new is None:
            self._compatible(where, f"type {_text(old)} no longer restricted", "a widening")
            return
        if old is None:
            self._breaking(where, f"type restricted to {_text(new)}", "a narrowing")
            return
        old_set = {old} if isinstance(old, str) else set(old)
        new_set = {new} if isinstance(new, str) else set(new)
        if "number" in new_set:
            new_set.add("integer")
        change = f"type changed from {_text(old)} to {_text(new)}"
        if old_set <= new_set:
            self._compatible(where, change, "a widening: every old value still has an allowed type")
        else:
            lost = ", ".join(sorted(old_set - new_set))
            self._breaking(where, change, f"plans written before may hold a {lost} here")

    def _properties(self, old: dict[str, Any], new: dict[str, Any], ptr: str) -> None:
        old_props, new_props = old.get("properties", {}), new.get("properties", {})
        removed = sorted(set(old_props) - set(new_props))
        added = sorted(set(new_props) - set(old_props))
        new_required = set(new.get("required", []))
        closed_before = old.get("additionalProperties") is False
        closed_now = new.get("additionalProperties") is False
        for name in removed:
            twin = [a for a in added if new_props[a] == old_props[name]]
            renamed = f" (renamed to '{twin[0]}'?)" if len(twin) == 1 else ""
            where = _pointer(ptr, "properties", name)
            if closed_now:
                self._breaking(
                    where,
                    f"field '{name}' removed{renamed}",
                    f"plans written before carry '{name}' and would be refused",
                )
            else:
                self._compatible(where, f"field '{name}' no longer described", "a widening")
        for name in added:
            where = _pointer(ptr, "properties", name)
            if name in new_required:
                self._breaking(
                    where,
                    f"required field '{name}' added",
                    f"plans written before lack '{name}'",
                )
            elif closed_before:
                self._compatible(
                    where,
                    f"optional field '{name}' added",
                    "plans written before lack it and get its default",
                )
            else:
                self._breaking(
                    where,
                    f"field '{name}' constrained in an open object",
                    f"plans written before may hold any '{name}'",
                )
        for name in sorted(set(old_props) & set(new_props)):
            self._node(
                _schema(old_props[name]), _schema(new_props[name]), _pointer(ptr, "properties", name)
            )

    def _required(self, old: dict[str, Any], new: dict[str, Any], ptr: str) -> None:
        old_req, new_req = set(old.get("required", [])), set(new.get("required", []))
        added_props = set(new.get("properties", {})) - set(old.get("properties", {}))
        where = _pointer(ptr, "required")
        for name in sorted(new_req - old_req - added_props):
            self._breaking(
                where, f"field '{name}' made required", f"plans written before may lack '{name}'"
            )
        for name in sorted(old_req - new_req):
            self._compatible(where, f"field '{name}' made optional", "a widening")

    def _additional(self, old: Any, new: Any, ptr: str) -> None:
        if old == new:
            return
        where = _pointer(ptr, "additionalProperties")
        if new is False:
            self._breaking(where, "the object was closed", "plans written before may carry other fields")
        elif old is False:
            self._compatible(where, "the object was opened", "a widening")
        elif old is None or old is True:
            self._breaking(
                where, "other fields constrained", "plans written before may carry any other field"
            )
        elif new is None or new is True:
            self._compatible(where, "other fields no longer constrained", "a widening")
        else:
            self._node(_schema(old), _schema(new), where)

    def _enum(self, old: dict[str, Any], new: dict[str, Any], ptr: str) -> None:
        if old.get("enum") == new.get("enum"):
            return
        where = _pointer(ptr, "enum")
        if "enum" not in new:
            self._compatible(where, "enum removed", "a widening")
            return
        if "enum" not in old:
            self._breaking(
                where,
                f"values restricted to {_text(new['enum'])}",
                "plans written before may hold other values",
            )
            return
        old_values = {_text(v): v for v in old["enum"]}
        new_values = {_text(v): v for v in new["enum"]}
        lost = [v for k, v in old_values.items() if k not in new_values]
        gained = [v for k, v in new_values.items() if k not in old_values]
        if lost:
            self._breaking(
                where,
                f"enum narrowed: {', '.join(map(_text, lost))} removed",
                "plans written before may hold these values",
            )
        if gained:
            self._compatible(
                where,
                f"enum widened: {', '.join(map(_text, gained))} added",
                "plans written before hold only the old values",
            )

    def _const(self, old: dict[str, Any], new: dict[str, Any], ptr: str) -> None:
        if old.get("const") == new.get("const") and ("const" in old) == ("const" in new):
            return
        where = _pointer(ptr, "const")
        if "const" not in new:
            self._compatible(where, f"const {_text(old['const'])} removed", "a widening")
        elif "const" not in old:
            self._breaking(
                where, f"value fixed to {_text(new['const'])}", "plans written before may hold others"
            )
        else:
            self._breaking(
                where,
                f"const changed from {_text(old['const'])} to {_text(new['const'])}",
                "a discriminator names what a plan object means, and plans written before "
                "carry the old value",
            )

    def _alternatives(self, old: Any, new: Any, ptr: str) -> None:
        if old == new:
            return
        if old is None:
            self._breaking(ptr, "alternatives introduced", "a narrowing of the allowed values")
            return
        if new is None:
            self._compatible(ptr, "alternatives dropped", "a widening")
            return
        new_texts = [_text(n) for n in new]
        old_left = [(i, o) for i, o in enumerate(old) if _text(o) not in new_texts]
        old_texts = [_text(o) for o in old]
        new_left = [(i, n) for i, n in enumerate(new) if _text(n) not in old_texts]
        if len(old_left) == len(new_left):
            for (_, o), (j, n) in zip(old_left, new_left, strict=True):
                self._node(_schema(o), _schema(n), _pointer(ptr, j))
            return
        for i, o in old_left:
            self._breaking(
                _pointer(ptr, i),
                f"alternative {_text(o)} removed",
                "plans written before may hold a value only it allowed",
            )
        for j, n in new_left:
            self._compatible(
                _pointer(ptr, j), f"alternative {_text(n)} added", "a widening"
            )

    def _all_of(self, old: dict[str, Any], new: dict[str, Any], ptr: str) -> None:
        old_members = _members_by_key(old.get("allOf", []))
        new_members = _members_by_key(new.get("allOf", []))
        for key in old_members.keys() - new_members.keys():
            i, member = old_members[key]
            self._compatible(
                _pointer(ptr, "allOf", i), f"constraint {_short(member)} removed", "a widening"
            )
        for key in sorted(new_members.keys() - old_members.keys()):
            j, member = new_members[key]
            where = _pointer(ptr, "allOf", j)
            if _applies_to_new_values_only(member, old):
                self._compatible(
                    where,
                    f"conditional constraint {_short(member)} added",
                    "it applies only to values plans written before cannot hold",
                )
            else:
                self._breaking(
                    where,
                    f"constraint {_short(member)} added",
                    "plans written before may break it",
                )
        for key in sorted(old_members.keys() & new_members.keys()):
            (_, o), (j, n) = old_members[key], new_members[key]
            self._node(_schema(o), _schema(n), _pointer(ptr, "allOf", j))

    def _ref(self, old: Any, new: Any, ptr: str) -> None:
        if old == new:
            return
        where = _pointer(ptr, "$ref")
        if new is None:
            self._compatible(where, f"reference {old} removed", "a widening")
        elif old is None:
            self._breaking(
                where,
                f"now constrained by {new}",
                "a narrowing: plans written before may hold values it refuses",
            )
        else:
            self._breaking(
                where,
                f"now refers to {new} instead of {old or 'nothing'}",
                "a different definition may refuse what plans written before hold",
            )

    def _text_constraint(self, keyword: str, old: Any, new: Any, ptr: str) -> None:
        if old == new:
            return
        where = _pointer(ptr, keyword)
        if new is None:
            self._compatible(where, f"{keyword} {_text(old)} removed", "a widening")
        else:
            self._breaking(
                where,
                f"{keyword} changed from {_text(old)} to {_text(new)}",
                f"the checker cannot prove the new {keyword} accepts every value the old one did",
            )

    def _bound(self, keyword: str, old: Any, new: Any, ptr: str, *, lower: bool) -> None:
        if old == new:
            return
        where = _pointer(ptr, keyword)
        if new is None:
            self._compatible(where, f"{keyword} {old} removed", "a widening")
        elif old is None or (new > old if lower else new < old):
            self._breaking(
                where,
                f"{keyword} {'set to' if old is None else f'changed from {old} to'} {new}",
                "plans written before may hold values outside the new bound",
            )
        else:
            self._compatible(where, f"{keyword} relaxed from {old} to {new}", "a widening")


def _short(member: Any) -> str:
    text = _text(member)
    return text if len(text) <= 120 else text[:117] + "..."


def _members_by_key(members: list[Any]) -> dict[str, tuple[int, Any]]:
    """allOf members keyed for pairing: if/then ones by their condition, others by order."""
    out: dict[str, tuple[int, Any]] = {}
    plain = 0
    for i, member in enumerate(members):
        if isinstance(member, dict) and "if" in member:
            out["if:" + _text(member["if"])] = (i, member)
        else:
            out[f"plain:{plain}"] = (i, member)
            plain += 1
    return out


def _applies_to_new_values_only(member: Any, old: dict[str, Any]) -> bool:
    """Whether an if/then member's condition requires a value the old schema refuses.

    Adding ``if kind == "x" then ...`` with a new discriminator value "x" constrains no
    document the old schema accepted: the compatible way a union gains a member.
    """
    if not isinstance(member, dict) or "if" not in member:
        return False
    condition = member["if"]
    if not isinstance(condition, dict):
        return False
    from jsonschema import Draft202012Validator

    required = set(condition.get("required", []))
    for name, sub in condition.get("properties", {}).items():
        if not isinstance(sub, dict) or "const" not in sub:
            continue
        if name not in required and name not in old.get("required", []):
            continue  # a document without the field matches the condition vacuously
        value = sub["const"]
        schemas = [old.get("properties", {}).get(name)]
        schemas += [
            m.get("properties", {}).get(name)
            for m in old.get("allOf", [])
            if isinstance(m, dict) and "if" not in m
        ]
        for schema in schemas:
            if not isinstance(schema, dict) or "$ref" in _text(schema):
                continue
            if not Draft202012Validator(schema).is_valid(value):
                return True
    return False


# ---------------------------------------------------------------------------- validation


def _format_checker() -> Any:
    from jsonschema import FormatChecker

    checker = FormatChecker()
    checker.checks(SQL_TYPE_FORMAT, raises=PlanError)(_is_sql_type)
    checker.checks(LOGICAL_SCHEMA_FORMAT, raises=PlanError)(_is_logical_schema)
    return checker


def _is_sql_type(value: object) -> bool:
    if isinstance(value, str):
        parse_type(value)
    return True


def _is_logical_schema(value: object) -> bool:
    if isinstance(value, str):
        LogicalSchema.parse(value)
    return True


def json_pointer(parts: Iterable[str | int]) -> str:
    """RFC 6901 pointer of a path in a document (``/plans/0/query``); ``""`` is the root."""
    return _pointer("", *parts)


def validate_plan_file(data: Any, schema: dict[str, Any]) -> list[str]:
    """Messages for every place where a ``plan.json`` document breaks the schema.

    Each message starts ``at <JSON pointer>:`` (``/`` for the root). Results are kept per
    schema and document content: a plan validated again against an equal schema (the
    committed one and the generated one in one test run) is not validated twice.
    """
    key = (_content_key(schema), _content_key(data))
    known = _RESULTS.get(key)
    if known is None:
        known = _RESULTS[key] = tuple(_validate_plan_file(data, schema))
    return list(known)


_RESULTS: dict[tuple[str, str], tuple[str, ...]] = {}


def _content_key(value: Any) -> str:
    """A digest of a JSON value's content (key order ignored)."""
    text = json.dumps(value, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _validate_plan_file(data: Any, schema: dict[str, Any]) -> list[str]:
    validator = _validator(schema)
    messages = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(map(str, e.absolute_path))):
        leaf = _deepest(error)
        path = json_pointer(leaf.absolute_path) or "/"
        message = leaf.message
        last = leaf.absolute_path[-1] if leaf.absolute_path else None
        if leaf.validator == "enum" and last in (TYPE_KEY, "kind"):
            message = f"the type {leaf.instance!r} is not in the schema"
        elif leaf.validator == "format" and leaf.cause is not None:
            message = str(leaf.cause)
        messages.append(f"at {path}: {_short_message(message)}")
    return messages


_VALIDATORS: list[tuple[dict[str, Any], Any]] = []


def _validator(schema: dict[str, Any]) -> Any:
    """A validator for ``schema``, reused while the same schema object is passed (verify
    validates every saved plan against one schema; building a validator costs more)."""
    from jsonschema import Draft202012Validator

    for known, validator in _VALIDATORS:
        if known is schema:
            return validator
    validator = Draft202012Validator(schema, format_checker=_format_checker())
    _VALIDATORS[:] = [*_VALIDATORS[-3:], (schema, validator)]
    return validator


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


def _short_message(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
