"""Parity table ``functions``: every overload of every function ksqlDB registers.

ksqlDB registers its scalar, aggregate and table functions from classes annotated
``@UdfDescription`` / ``@UdafDescription`` / ``@UdtfDescription``; each overload is a method
annotated ``@Udf`` / ``@UdafFactory`` / ``@Udtf``. This table reads them from the Java sources
(ksqldb-engine's built-ins and the test plugins its functional tests load) and maps the Java
types to SQL types as ksqlDB's ``UdfUtil`` does: ``int`` INTEGER, ``long`` BIGINT, ``double``
DOUBLE, ``String`` STRING, ``BigDecimal`` DECIMAL, ``List`` ARRAY, ``Map`` MAP, ``Struct``
STRUCT, ``Timestamp``/``Date``/``Time`` TIMESTAMP/DATE/TIME, ``ByteBuffer`` BYTES, ``Object``
ANY, type variables stay generics, ``Function``/``BiFunction``/``TriFunction`` are lambdas. A
``schema`` in the annotation wins over the Java type. An aggregate's columns come from its
``Udaf<I, A, O>`` input type (``Pair``..``Quintuple`` for several, ``VariadicArgs`` for a
variadic one) followed by the factory's parameters (its literal init arguments).

A row is ``covered`` when kspark's registry has an overload whose parameters are the same
(compared expanded to a few argument counts, so a variadic parameter in the middle, which
kspark registers as one overload per count, compares too; generics compare by position) and
a kspark test exercises the function (a test under ``tests/engine/functions`` naming it, or a
case of ``tests/qtt_cases`` calling it). ``reasoned`` rows come from ``functions_map.json``
(item or function name -> reason), written after checking each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qtt.parity import Row, table

ROOT = Path(__file__).resolve().parents[2]
MAP_FILE = Path(__file__).with_name("functions_map.json")

# Where ksqlDB keeps the functions it registers, under its unpacked sources.
SOURCE_DIRS = (
    "ksqldb-engine/src/main/java/io/confluent/ksql/function",
    "ksqldb-engine/src/test/java/io/confluent/ksql/function/udf",
    "ksqldb-engine/src/test/java/io/confluent/ksql/function/udaf",
)
DESCRIPTIONS = {"UdfDescription": "scalar", "UdafDescription": "aggregate", "UdtfDescription": "table"}
OVERLOADS = {"scalar": "Udf", "aggregate": "UdafFactory", "table": "Udtf"}

_JAVA_TYPES = {
    "int": "INTEGER", "Integer": "INTEGER", "long": "BIGINT", "Long": "BIGINT",
    "double": "DOUBLE", "Double": "DOUBLE", "boolean": "BOOLEAN", "Boolean": "BOOLEAN",
    "String": "STRING", "BigDecimal": "DECIMAL", "Struct": "STRUCT", "Timestamp": "TIMESTAMP",
    "Date": "DATE", "Time": "TIME", "ByteBuffer": "BYTES", "Object": "ANY", "TimeUnit": "INTERVALUNIT",
}
_TUPLES = {"Pair", "Triple", "Quadruple", "Quintuple"}
_LAMBDAS = {"Function": 1, "BiFunction": 2, "TriFunction": 3}


# --------------------------------------------------------------------------- SQL types, as trees


@dataclass(frozen=True, slots=True)
class Ty:
    """A SQL type of a signature: ``name`` with ``args`` (ARRAY, MAP, LAMBDA), or a generic."""

    name: str
    args: tuple[Ty, ...] = ()
    generic: bool = False

    def render(self, numbering: dict[str, str] | None = None) -> str:
        """The type as text; with ``numbering``, generics print as their position (T1, T2, ...)."""
        if self.generic:
            if numbering is None:
                return self.name
            return numbering.setdefault(self.name, f"T{len(numbering) + 1}")
        parts = [a.render(numbering) for a in self.args]
        if self.name == "LAMBDA":
            return f"LAMBDA<({', '.join(parts[:-1])}) => {parts[-1]}>"
        return f"{self.name}<{', '.join(parts)}>" if parts else self.name


@dataclass(frozen=True, slots=True)
class Overload:
    """One overload of a ksqlDB function, its SQL parameter and return types."""

    name: str
    kind: str
    params: tuple[Ty, ...]
    returns: Ty | None  # None: computed by a schema provider or at run time
    variadic_at: int | None  # index of the variadic parameter
    source: str
    # The names ksqlDB's messages give the parameters: @UdfParameter's value, else the Java
    # name (scalar and table functions; ksqlDB compiles with -parameters).
    param_names: tuple[str, ...] = ()
    declared_name: str = ""  # the name as @UdfDescription/@UdtfDescription writes it

    def describe(self) -> str:
        ps = [p.render() + ("..." if i == self.variadic_at else "") for i, p in enumerate(self.params)]
        ret = self.returns.render() if self.returns is not None else "(computed)"
        return f"{self.name}({', '.join(ps)}) -> {ret}"

    def expansions(self) -> list[tuple[Ty, ...]]:
        """The parameter lists of calls it takes: itself, or a variadic one at 0, 1 and 2 repeats."""
        if self.variadic_at is None:
            return [self.params]
        i = self.variadic_at
        return [self.params[:i] + (self.params[i],) * n + self.params[i + 1:] for n in (0, 1, 2)]


def _schema_type(text: str) -> Ty:
    """A SQL type written in an annotation (``ARRAY<STRUCT<K STRING, V INT>>``)."""
    from engine.plan import types as T

    return _from_sql(T.parse_type(text))


def _from_sql(t: Any) -> Ty:
    """kspark's ``SqlType`` (and the registry's signature-only types) as a ``Ty``."""
    from engine.functions.lib_math import AnyDecimal
    from engine.functions.registry import AnyType, Generic, LambdaType
    from engine.plan import types as T

    if isinstance(t, Generic):
        return Ty(t.name, generic=True)
    if isinstance(t, AnyType):
        return Ty("ANY")
    if isinstance(t, AnyDecimal):
        return Ty("DECIMAL")
    if isinstance(t, LambdaType):
        return Ty("LAMBDA", tuple(_from_sql(p) for p in (*t.params, t.result)))
    if isinstance(t, T.Array):
        return Ty("ARRAY", (_from_sql(t.item),))
    if isinstance(t, T.Map):
        return Ty("MAP", (_from_sql(t.key), _from_sql(t.value)))
    return Ty(str(t))


# --------------------------------------------------------------------------- reading the Java


def _parser() -> Any:
    from qtt.optional import require

    tool = "qtt parity's functions table (it reads ksqlDB's Java sources)"
    tree_sitter = require("tree_sitter", extra="parity", tool=tool)
    tree_sitter_java = require("tree_sitter_java", extra="parity", tool=tool)
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_java.language()))


def _text(node: Any) -> str:
    return node.text.decode("utf-8")


def _annotations(node: Any) -> dict[str, Any]:
    """The annotations on a declaration or parameter, by simple name."""
    found: dict[str, Any] = {}
    for child in node.named_children:
        if child.type == "modifiers":
            for a in child.named_children:
                if a.type in ("annotation", "marker_annotation"):
                    found[_text(a.child_by_field_name("name")).split(".")[-1]] = a
    return found


def _string_value(node: Any, constants: dict[str, str]) -> str | None:
    """A string literal, a concatenation of them, or a constant of the class."""
    if node.type == "string_literal":
        return "".join(_text(c) for c in node.named_children if c.type == "string_fragment")
    if node.type == "binary_expression":
        left = _string_value(node.child_by_field_name("left"), constants)
        right = _string_value(node.child_by_field_name("right"), constants)
        return None if left is None or right is None else left + right
    if node.type in ("identifier", "field_access"):
        return constants.get(_text(node).split(".")[-1])
    if node.type == "parenthesized_expression":
        return _string_value(node.named_children[0], constants)
    return None


def _annotation_values(annotation: Any, constants: dict[str, str]) -> dict[str, str | None]:
    values: dict[str, str | None] = {}
    args = annotation.child_by_field_name("arguments")
    if args is None:
        return values
    for pair in args.named_children:
        if pair.type == "element_value_pair":
            key = _text(pair.child_by_field_name("key"))
            values[key] = _string_value(pair.child_by_field_name("value"), constants)
        else:
            values["value"] = _string_value(pair, constants)
    return values


def _string_constants(tree: Any) -> dict[str, str]:
    constants: dict[str, str] = {}

    def walk(node: Any) -> None:
        if node.type == "field_declaration":
            for decl in node.children_by_field_name("declarator"):
                value = decl.child_by_field_name("value")
                if value is not None:
                    text = _string_value(value, constants)
                    if text is not None:
                        constants[_text(decl.child_by_field_name("name"))] = text
        for child in node.named_children:
            walk(child)

    walk(tree.root_node)
    return constants


def _type_parameters(node: Any) -> set[str]:
    params = node.child_by_field_name("type_parameters")
    if params is None:
        return set()
    names = set()
    for p in params.named_children:
        for c in p.named_children:
            if c.type == "type_identifier":
                names.add(_text(c))
                break
    return names


def _java_type(node: Any, generics: set[str]) -> Ty:
    """A Java type node as its SQL type."""
    kind = node.type
    if kind in ("integral_type", "floating_point_type", "boolean_type"):
        return Ty(_JAVA_TYPES[_text(node)])
    if kind == "type_identifier":
        name = _text(node)
        if name in generics:
            return Ty(name, generic=True)
        if name not in _JAVA_TYPES:
            raise ValueError(f"Java type {name!r} has no SQL type.")
        return Ty(_JAVA_TYPES[name])
    if kind == "scoped_type_identifier":
        return _java_type(node.named_children[-1], generics)
    if kind == "generic_type":
        base = _text(node.named_children[0]).split(".")[-1]
        args = [
            _java_type(a, generics)
            for a in node.named_children[1].named_children
            if a.type not in ("wildcard",)
        ]
        if base == "List":
            return Ty("ARRAY", tuple(args))
        if base == "Map":
            return Ty("MAP", tuple(args))
        if base in _LAMBDAS:
            return Ty("LAMBDA", tuple(args))
        return Ty(base, tuple(args))  # Udaf<...>, Pair<...>, VariadicArgs<...>: unpacked by callers
    raise ValueError(f"Java type node {kind} ({_text(node)!r}) has no SQL type.")


def _parameter(node: Any, generics: set[str], constants: dict[str, str]) -> Ty:
    annotation = _annotations(node).get("UdfParameter")
    if annotation is not None:
        schema = _annotation_values(annotation, constants).get("schema")
        if schema:
            return _schema_type(schema)
    type_node = node.child_by_field_name("type") or next(
        c for c in node.named_children if c.type not in ("modifiers", "variable_declarator", "identifier")
    )
    return _java_type(type_node, generics)


def _parameter_name(node: Any, constants: dict[str, str]) -> str:
    """ksqlDB's name of a parameter: a non-empty @UdfParameter value, else its Java name."""
    annotation = _annotations(node).get("UdfParameter")
    if annotation is not None:
        value = _annotation_values(annotation, constants).get("value")
        if value:
            return value
    if node.type == "spread_parameter":
        declarator = next(c for c in node.named_children if c.type == "variable_declarator")
        return _text(declarator.child_by_field_name("name"))
    return _text(node.child_by_field_name("name"))


def _aggregate_columns(input_type: Ty) -> tuple[list[Ty], int | None]:
    """The columns of a UDAF's input type: ``Pair<A, B>`` is two, ``VariadicArgs<C>`` variadic."""
    parts = list(input_type.args) if input_type.name in _TUPLES else [input_type]
    variadic = None
    for i, part in enumerate(parts):
        if part.name == "VariadicArgs":
            parts[i] = part.args[0]
            variadic = i
    return parts, variadic


def _overloads_of_class(cls: Any, kind: str, fn_name: str, constants: dict[str, str], source: str) -> Iterator[Overload]:
    class_generics = _type_parameters(cls)
    for member in cls.child_by_field_name("body").named_children:
        if member.type != "method_declaration":
            continue
        annotation = _annotations(member).get(OVERLOADS[kind])
        if annotation is None:
            continue
        values = _annotation_values(annotation, constants)
        generics = class_generics | _type_parameters(member)
        params: list[Ty] = []
        names: list[str] = []
        variadic_at: int | None = None
        for p in member.child_by_field_name("parameters").named_children:
            if p.type == "spread_parameter":
                variadic_at = len(params)
            if p.type in ("formal_parameter", "spread_parameter"):
                params.append(_parameter(p, generics, constants))
                names.append(_parameter_name(p, constants))
        java_return = _java_type(member.child_by_field_name("type"), generics)
        returns: Ty | None
        if kind == "aggregate":
            input_type, _, output = java_return.args
            columns, column_variadic = _aggregate_columns(input_type)
            if param_schema := values.get("paramSchema"):
                columns = [_schema_type(param_schema)]
            if column_variadic is not None:
                variadic_at = column_variadic
            elif variadic_at is not None:
                variadic_at += len(columns)
            params = columns + params
            return_schema = values.get("returnSchema")
            returns = _schema_type(return_schema) if return_schema else output
        else:
            if kind == "table":
                java_return = java_return.args[0]  # a UDTF returns the list of its rows
            schema = values.get("schema")
            returns = _schema_type(schema) if schema else java_return
        if "schemaProvider" in values:  # the return type is computed from the arguments
            returns = None
        param_names = tuple(names) if kind != "aggregate" else ()
        yield Overload(
            fn_name.upper(), kind, tuple(params), returns, variadic_at, source, param_names, fn_name
        )


def read_ksqldb_functions(src: Path) -> list[Overload]:
    """Every overload of every function ksqlDB registers, from its unpacked sources."""
    parser = _parser()
    found: list[Overload] = []
    for directory in SOURCE_DIRS:
        for path in sorted((src / directory).rglob("*.java")):
            data = path.read_bytes()
            if not any(d.encode() in data for d in DESCRIPTIONS):
                continue
            tree = parser.parse(data)
            constants = _string_constants(tree)
            for node in tree.root_node.named_children:
                if node.type != "class_declaration":
                    continue
                annotations = _annotations(node)
                for description, kind in DESCRIPTIONS.items():
                    if description in annotations:
                        name = _annotation_values(annotations[description], constants).get("name")
                        if not name:
                            raise ValueError(f"{path}: @{description} without a readable name.")
                        found.extend(_overloads_of_class(node, kind, name, constants, str(path.relative_to(src))))
    return found


# --------------------------------------------------------------------------- ksqlDB's alternatives

ALTERNATIVES_FILE = ROOT / "engine" / "functions" / "ksqldb_alternatives.json"

# ksqlDB's ParamType classes: how each prints and its hashCode (primitives are constants).
_PARAM_TYPES = {
    "BOOLEAN": ("BOOLEAN", 1), "DECIMAL": ("DECIMAL", 2), "DOUBLE": ("DOUBLE", 3),
    "INTEGER": ("INT", 4), "BIGINT": ("BIGINT", 5), "STRING": ("VARCHAR", 6),
    "TIMESTAMP": ("TIMESTAMP", 7), "TIME": ("TIME", 8), "INTERVALUNIT": ("INTERVAL UNIT", 8),
    "DATE": ("DATE", 9), "BYTES": ("BYTES", 10), "ANY": ("ANY", 11),
}


def _int32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units)."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = _int32(31 * h + int.from_bytes(units[i:i + 2], "big"))
    return h


def _objects_hash(*hashes: int) -> int:
    h = 1
    for x in hashes:
        h = _int32(31 * h + x)
    return h


def param_type(t: Ty) -> tuple[str, int]:
    """How ksqlDB's ParamType of ``t`` prints, and its hashCode."""
    if t.generic:
        return t.name, _objects_hash(java_string_hash(t.name))
    if t.name in _PARAM_TYPES:
        return _PARAM_TYPES[t.name]
    if t.name.startswith("DECIMAL("):
        return _PARAM_TYPES["DECIMAL"]
    if t.name == "ARRAY":
        text, h = param_type(t.args[0])
        return f"ARRAY<{text}>", _objects_hash(h)
    if t.name == "MAP":
        (kt, kh), (vt, vh) = param_type(t.args[0]), param_type(t.args[1])
        return f"MAP<{kt}, {vt}>", _objects_hash(kh, vh)
    if t.name == "LAMBDA":
        inputs = [param_type(a) for a in t.args[:-1]]
        rt, rh = param_type(t.args[-1])
        text = "LAMBDA (" + ", ".join(i[0] for i in inputs) + ") => " + rt
        return text, _objects_hash(_objects_hash(*(i[1] for i in inputs)), rh)
    if t.name == "STRUCT" or t.name.startswith("STRUCT<"):
        fields = _struct_fields(t)
        shown = ", ".join(f"{name} {param_type(ft)[0]}" for name, ft in fields)
        schema_hash = sum(java_string_hash(name) ^ param_type(ft)[1] for name, ft in fields)
        return f"STRUCT<{shown}>", _objects_hash(_int32(schema_hash))
    raise ValueError(f"No ksqlDB ParamType for {t.render()}.")


def _struct_fields(t: Ty) -> list[tuple[str, Ty]]:
    if t.name == "STRUCT":
        return []  # Java's Struct: any struct
    from engine.plan import types as T

    parsed = T.parse_type(t.name)
    return [(f.name, _from_sql(f.type)) for f in parsed.fields]


def _key_hash(o: Overload) -> int:
    """The hashCode of the overload's ``List<ParamType>`` (a variadic one is an ARRAY)."""
    hashes = []
    for i, p in enumerate(o.params):
        h = param_type(p)[1]
        hashes.append(_objects_hash(h) if i == o.variadic_at else h)
    return _objects_hash(*hashes)


def _signature_line(o: Overload) -> str:
    parts = []
    for i, (p, name) in enumerate(zip(o.params, o.param_names, strict=True)):
        text = param_type(p)[0] + ("..." if i == o.variadic_at else "")
        parts.append(f"{text} {name}" if name else text)
    return f"{o.declared_name}({', '.join(parts)})"


def java_hash_map_order(keys: Sequence[int]) -> list[int]:
    """The iteration order of a ``java.util.HashMap`` filled with keys of these hashCodes in
    this order: by bucket of the final table (16 slots, doubled past 3/4 full), then by
    insertion within a bucket. Returns indexes into ``keys``."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(h: int) -> int:
        u = h & 0xFFFFFFFF
        return (u ^ (u >> 16)) & (capacity - 1)

    return sorted(range(len(keys)), key=lambda i: (bucket(keys[i]), i))


def ksqldb_alternatives(overloads: Iterable[Overload]) -> dict[str, list[str]]:
    """Per scalar or table function (upper-case name), the lines of ksqlDB's "Valid
    alternatives are:" list, in the order its UdfIndex prints them."""
    by_name: dict[str, list[Overload]] = {}
    for o in overloads:
        if o.kind in ("scalar", "table"):
            by_name.setdefault(o.name, []).append(o)
    out: dict[str, list[str]] = {}
    for name, group in by_name.items():
        unique: dict[tuple[tuple[str, bool], ...], Overload] = {}
        for o in group:  # ksqlDB keys its overloads by their parameter types
            key = tuple((param_type(p)[0], i == o.variadic_at) for i, p in enumerate(o.params))
            unique.setdefault(key, o)
        kept = list(unique.values())
        order = java_hash_map_order([_key_hash(o) for o in kept])
        out[name] = [_signature_line(kept[i]) for i in order]
    return out


# --------------------------------------------------------------------------- kspark's side


def kspark_overloads() -> dict[str, list[Any]]:
    """kspark's current overloads by upper-case name."""
    import engine.functions  # noqa: F401 - registers the library
    from engine.functions.registry import REGISTRY

    return {
        name: [s for s in REGISTRY.signatures(name)]
        for name in REGISTRY.names()
    }


def _kspark_spelling(text: str) -> str:
    # kspark's DATEADD & co. take the interval unit (a keyword in ksqlDB) as its name, a STRING.
    return re.sub(r"\bINTERVALUNIT\b", "STRING", text)


def _kspark_expansion(sig: Any, count: int) -> tuple[Ty, ...] | None:
    from engine.functions.registry import _expand

    params = _expand(sig, count)
    return None if params is None else tuple(_from_sql(p) for p in params)


def _kspark_return(sig: Any) -> Ty | None:
    from engine.plan.types import SqlType

    return _from_sql(sig.returns) if isinstance(sig.returns, SqlType) else None


_KINDS = {"scalar": "SCALAR", "aggregate": "AGGREGATE", "table": "TABLE"}


def _accepts(kspark: Ty, java: Ty, bindings: dict[str, Ty]) -> bool:
    """Whether kspark's parameter type takes every argument ksqlDB's takes: equal, or more
    general (a kspark generic binds, consistently, to ksqlDB's type; ANY takes anything; a
    DECIMAL parameter takes any DECIMAL as it is)."""
    if kspark.generic:
        bound = bindings.setdefault(kspark.name, java)
        return bound == java
    if kspark.name == "ANY":
        return True
    if java.generic or java.name == "ANY":
        return False
    if java.name == "DECIMAL" and kspark.name.startswith("DECIMAL"):
        return True
    if _kspark_spelling(kspark.name) != _kspark_spelling(java.name) or len(kspark.args) != len(java.args):
        return False
    return all(_accepts(k, j, bindings) for k, j in zip(kspark.args, java.args, strict=True))


def match(overload: Overload, signatures: Sequence[Any]) -> tuple[Any | None, str]:
    """kspark's signature taking every expansion of ``overload`` (None if some has none), and a
    note when its return type differs."""
    chosen = None
    for params in overload.expansions():
        fits = []
        for s in signatures:
            if s.kind.name != _KINDS[overload.kind]:
                continue
            got = _kspark_expansion(s, len(params))
            bindings: dict[str, Ty] = {}
            if got is not None and all(_accepts(k, j, bindings) for k, j in zip(got, params, strict=True)):
                fits.append(s)
        if not fits:
            return None, ""
        chosen = chosen or fits[0]
    note = ""
    if chosen is not None and overload.returns is not None and overload.variadic_at is None:
        ks_return = _kspark_return(chosen)
        if ks_return is not None and not _generic_in(ks_return) and not _generic_in(overload.returns):
            want_ret = _kspark_spelling(overload.returns.render())
            got_ret = _kspark_spelling(ks_return.render())
            if want_ret != got_ret and not (want_ret == "DECIMAL" and got_ret.startswith("DECIMAL")):
                note = f"kspark returns {got_ret}"
    return chosen, note


def _generic_in(t: Ty) -> bool:
    return t.generic or any(_generic_in(a) for a in t.args)


# --------------------------------------------------------------------------- kspark's tests


def _python_tests() -> dict[str, str]:
    """Function name -> the first test under tests/engine/functions naming it in a string."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tests" / "engine" / "functions").glob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^def (test_\w+)\(.*?(?=^def |^@|\Z)", text, re.M | re.S):
            for name in re.findall(r"""["']([A-Za-z_][A-Za-z0-9_]*)\b""", m.group(0)):
                found.setdefault(name.upper(), f"{path.relative_to(ROOT)}::{m.group(1)}")
    return found


def _qtt_tests() -> dict[str, str]:
    """Function name -> the first case of tests/qtt_cases calling it in a statement."""
    found: dict[str, str] = {}
    for path in sorted((ROOT / "tests" / "qtt_cases").glob("*.json")):
        for case in json.loads(path.read_text(encoding="utf-8")).get("tests", []):
            for statement in case.get("statements", []):
                for name in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", statement):
                    found.setdefault(name.upper(), f"qtt:{path.name}:{case['name']}")
    return found


def function_tests() -> dict[str, str]:
    """Function name -> a kspark test exercising it (a unit test first, else a QTT case)."""
    return {**_qtt_tests(), **_python_tests()}


# --------------------------------------------------------------------------- the table


def rows(overloads: Iterable[Overload], signatures: dict[str, list[Any]], tests: dict[str, str],
         reasons: dict[str, str]) -> list[Row]:
    out: list[Row] = []
    seen: set[str] = set()
    for o in overloads:
        item = o.describe()
        if o.kind != "scalar":
            item = f"{item} [{o.kind}]"
        base, n = item, 2
        while item in seen:  # Java overloads that differ only in what SQL does not see
            item, n = f"{base} #{n}", n + 1
        seen.add(item)
        detail = o.kind
        reason = reasons.get(item) or reasons.get(o.name)
        if reason:
            out.append(Row(item=item, status="reasoned", source=o.source, reason=reason, detail=detail))
            continue
        sig, note = match(o, signatures.get(o.name, []))
        test = tests.get(o.name, "")
        if sig is not None and test and not note:
            out.append(Row(item=item, status="covered", source=o.source, test=test, detail=detail))
            continue
        why = (
            "kspark has no such function" if o.name not in signatures
            else "kspark has no overload with these parameters" if sig is None
            else note or "no kspark test exercises the function"
        )
        out.append(Row(item=item, status="missing", source=o.source, reason=why, detail=detail))
    return out


@table("functions")
def functions_table(src: Path) -> list[Row]:
    """Each overload of each function ksqlDB registers, and whether kspark has it, tested."""
    reasons = json.loads(MAP_FILE.read_text(encoding="utf-8"))["reasoned"] if MAP_FILE.is_file() else {}
    overloads = read_ksqldb_functions(src)
    # kspark's registry lists ksqlDB's own alternatives in its messages: written here, from
    # the same reading of ksqlDB's sources.
    ALTERNATIVES_FILE.write_text(
        json.dumps(ksqldb_alternatives(overloads), indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    return rows(overloads, kspark_overloads(), function_tests(), reasons)
