"""Mutants of the lower layer: small AST changes to one function, applied in process.

A mutant changes one node inside one function body (a comparison, a boolean or arithmetic
operator, an integer constant, a statement, a condition, a returned value). Applying it
compiles the mutated module source and swaps the new code object into the function that
encloses the node (``func.__code__``), so every reference to that function (builder tables,
``from x import f`` copies, methods, pickled-by-reference closures in Spark workers) runs
the mutated code until the mutant is reverted. Nothing on disk changes.

Mutant ids name the file, the enclosing function, the operator and a hash of the changed
source, so an id survives edits elsewhere in the file (the list of reviewed equivalent
mutants is keyed by it).
"""

from __future__ import annotations

import ast
import copy
import gc
import hashlib
import importlib
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

OPERATORS = ("compare", "boolean", "arithmetic", "constant", "statement", "condition", "return")

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_ARITHMETIC_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd,
    ast.LShift: ast.RShift, ast.RShift: ast.LShift,
}
# Statements whose only effect is a side effect: dropping one keeps the function compiling.
_DROPPABLE = (ast.AugAssign, ast.Raise, ast.Continue, ast.Break)


@dataclass(frozen=True, slots=True)
class Mutant:
    """One change to one node of one function; ``node`` indexes ``ast.walk`` of the module."""

    id: str
    path: str  # relative to the repository, e.g. engine/builders/stateless.py
    line: int
    end_line: int
    qualname: str  # the function whose code object is swapped (module- or class-level)
    operator: str
    node: int
    variant: int
    before: str  # the original source line
    after: str  # the line as the mutant reads

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Mutant:
        return cls(**data)


def module_name(path: str) -> str:
    """``engine/builders/stateless.py`` -> ``engine.builders.stateless``."""
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def target_files(repo: Path, targets: tuple[str, ...]) -> list[str]:
    """The Python files under ``targets`` (files or folders), relative to ``repo``, sorted."""
    out: list[str] = []
    for target in targets:
        base = repo / target
        if not base.exists():
            raise ValueError(f"Mutation target {target} does not exist under {repo}.")
        files = [base] if base.is_file() else sorted(base.rglob("*.py"))
        out += [str(f.relative_to(repo)) for f in files if "__pycache__" not in f.parts]
    return sorted(dict.fromkeys(out))


def find_mutants(repo: Path, path: str) -> list[Mutant]:
    """Every mutant of the functions of one file, in source order."""
    source = (repo / path).read_text(encoding="utf-8")
    tree = ast.parse(source)
    index = {id(node): i for i, node in enumerate(ast.walk(tree))}
    lines = source.splitlines()
    out: list[Mutant] = []
    seen: dict[str, int] = {}
    for qualname, func in _outer_functions(tree):
        for node, operator, variant in _sites(func):
            mutated = _mutated_node(copy.deepcopy(node), operator, variant)
            before, after = _lines(lines, node, mutated)
            key = f"{path}::{qualname}:{operator}:{before.strip()}->{after.strip()}"
            seen[key] = seen.get(key, 0) + 1
            digest = hashlib.sha1(f"{key}#{seen[key]}".encode()).hexdigest()[:8]
            out.append(
                Mutant(
                    id=f"{path}::{qualname}:{operator}:{digest}",
                    path=path, line=_line(node), end_line=_end_line(node),
                    qualname=qualname, operator=operator, node=index[id(node)],
                    variant=variant, before=before, after=after,
                )
            )
    return out


def _line(node: ast.AST) -> int:
    return int(getattr(node, "lineno", 0))


def _end_line(node: ast.AST) -> int:
    return int(getattr(node, "end_lineno", None) or _line(node))


def _outer_functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef]]:
    """Functions reachable by qualname: module-level ones and methods of (nested) classes."""

    def walk(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.FunctionDef]]:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef):
                yield prefix + stmt.name, stmt
            elif isinstance(stmt, ast.ClassDef):
                yield from walk(stmt.body, f"{prefix}{stmt.name}.")

    yield from walk(tree.body, "")


def _sites(func: ast.FunctionDef) -> Iterator[tuple[ast.AST, str, int]]:
    """(node, operator, variant) for every mutable node of a function body."""
    skip: set[int] = set()
    for stmt in func.body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Assert | ast.JoinedStr) or _is_docstring(node):
                skip.update(id(n) for n in ast.walk(node))
    for stmt in func.body:
        for node in ast.walk(stmt):
            if id(node) in skip:
                continue
            yield from _node_sites(node)


def _node_sites(node: ast.AST) -> Iterator[tuple[ast.AST, str, int]]:
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARE_SWAPS:
                yield node, "compare", i
    elif isinstance(node, ast.BoolOp):
        yield node, "boolean", 0
        for i in range(len(node.values)):
            yield node, "condition", i  # drop operand i
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node, "boolean", 0
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield node, "boolean", 0
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        yield node, "constant", 0
    elif isinstance(node, ast.BinOp | ast.AugAssign) and type(node.op) in _ARITHMETIC_SWAPS:
        yield node, "arithmetic", 0
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        yield node, "arithmetic", 0
    if isinstance(node, ast.If | ast.IfExp) and not isinstance(node.test, ast.Constant):
        yield node.test, "condition", -1  # the test always holds
    elif isinstance(node, ast.comprehension):
        for test in node.ifs:
            yield test, "condition", -1
    if isinstance(node, _DROPPABLE) or _is_side_effect(node):
        yield node, "statement", 0
    if isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
        yield node, "return", 0


def _is_docstring(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def _is_side_effect(node: ast.AST) -> bool:
    """A call statement, or an assignment into a subscript or attribute (a state write)."""
    if isinstance(node, ast.Expr):
        return isinstance(node.value, ast.Call)
    if isinstance(node, ast.Assign):
        return all(isinstance(t, ast.Subscript | ast.Attribute) for t in node.targets)
    return False


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _transformed(tree: ast.Module, node_index: int, operator: str, variant: int) -> None:
    """Apply one mutation to ``tree`` in place."""
    node = next(n for i, n in enumerate(ast.walk(tree)) if i == node_index)
    parent, field, position = _parent_of(tree, node)
    replacement = _mutated_node(node, operator, variant)
    if replacement is not node:
        ast.copy_location(replacement, node)
        _set_child(parent, field, position, replacement)
    ast.fix_missing_locations(tree)


def _mutated_node(node: ast.AST, operator: str, variant: int) -> ast.AST:
    """Mutate ``node`` in place; returns what replaces it (``node`` itself or a new node)."""
    if operator == "compare":
        assert isinstance(node, ast.Compare)
        node.ops[variant] = _COMPARE_SWAPS[type(node.ops[variant])]()
    elif operator == "boolean":
        if isinstance(node, ast.BoolOp):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif isinstance(node, ast.UnaryOp):
            return node.operand
        else:
            assert isinstance(node, ast.Constant)
            node.value = not node.value
    elif operator == "arithmetic":
        if isinstance(node, ast.UnaryOp):
            return node.operand
        assert isinstance(node, ast.BinOp | ast.AugAssign)
        node.op = _ARITHMETIC_SWAPS[type(node.op)]()
    elif operator == "constant":
        assert isinstance(node, ast.Constant) and isinstance(node.value, int)
        node.value = node.value + 1
    elif operator == "condition":
        if variant < 0:  # the test of an ``if`` or a comprehension filter always holds
            return ast.Constant(True)
        assert isinstance(node, ast.BoolOp)  # drop one operand of ``and`` / ``or``
        rest = [v for i, v in enumerate(node.values) if i != variant]
        return rest[0] if len(rest) == 1 else ast.BoolOp(op=node.op, values=rest)
    elif operator == "statement":
        return ast.Pass()
    elif operator == "return":
        assert isinstance(node, ast.Return)
        node.value = ast.Constant(None)
    else:
        raise ValueError(f"Unknown mutation operator {operator!r}; known: {', '.join(OPERATORS)}.")
    return node


def _parent_of(tree: ast.AST, target: ast.AST) -> tuple[ast.AST, str, int | None]:
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is target:
                return parent, field, None
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is target:
                        return parent, field, i
    return tree, "", None


def _set_child(parent: ast.AST, field: str, position: int | None, child: ast.AST) -> None:
    if position is None:
        setattr(parent, field, child)
    else:
        getattr(parent, field)[position] = child


def _lines(lines: list[str], node: ast.AST, mutated: ast.AST) -> tuple[str, str]:
    """The original source line of ``node`` and that line with the mutated node in place."""
    assert isinstance(node, ast.expr | ast.stmt)
    line = lines[node.lineno - 1]
    new = ast.unparse(mutated)
    if node.end_lineno == node.lineno and node.end_col_offset is not None:
        start, end = _char_range(line, node.col_offset, node.end_col_offset)
        return line, line[:start] + new + line[end:]
    indent = line[: len(line) - len(line.lstrip())]
    return line, indent + new.splitlines()[0] + (" ..." if "\n" in new else "")


def _char_range(line: str, start: int, end: int) -> tuple[int, int]:
    """AST columns are UTF-8 byte offsets; turn them into character offsets of ``line``."""
    data = line.encode("utf-8")
    return len(data[:start].decode("utf-8", "replace")), len(data[:end].decode("utf-8", "replace"))


# ---------------------------------------------------------------- applying in process


def mutated_code(mutant: Mutant) -> tuple[types.CodeType, types.CodeType]:
    """(original, mutated) code objects of the function the mutant changes.

    The original is the code of the function loaded now; the mutated one is compiled from
    the module's source with the one node changed.
    """
    module = importlib.import_module(module_name(mutant.path))
    filename = module.__file__
    assert filename is not None
    source = Path(filename).read_text(encoding="utf-8")
    tree = ast.parse(source)
    node = next((n for i, n in enumerate(ast.walk(tree)) if i == mutant.node), None)
    lines = source.splitlines()
    if node is None or _line(node) != mutant.line or lines[mutant.line - 1] != mutant.before:
        raise ValueError(
            f"Mutant {mutant.id}: {mutant.path} changed since the mutants were drawn "
            f"(line {mutant.line} no longer reads {mutant.before.strip()!r})."
        )
    _transformed(tree, mutant.node, mutant.operator, mutant.variant)
    compiled = compile(tree, filename, "exec")
    originals = _functions(filename).get(mutant.qualname, [])
    if not originals:
        raise ValueError(f"Mutant {mutant.id}: no loaded function {mutant.qualname} in {filename}.")
    original = originals[0].__code__
    new = _find_code(compiled, mutant.qualname, original.co_firstlineno)
    if new is None:
        raise ValueError(f"Mutant {mutant.id}: the mutated module has no {mutant.qualname}.")
    if new.co_freevars != original.co_freevars:
        raise ValueError(f"Mutant {mutant.id} changes the closure of {mutant.qualname}.")
    return original, new


def _find_code(code: types.CodeType, qualname: str, firstlineno: int) -> types.CodeType | None:
    found: list[types.CodeType] = []
    stack = [code]
    while stack:
        current = stack.pop()
        for const in current.co_consts:
            if isinstance(const, types.CodeType):
                if const.co_qualname == qualname:
                    found.append(const)
                stack.append(const)
    for candidate in found:
        if candidate.co_firstlineno == firstlineno:
            return candidate
    return found[0] if len(found) == 1 else None


_FUNCTIONS: dict[str, dict[str, list[types.FunctionType]]] = {}


def _functions(filename: str) -> dict[str, list[types.FunctionType]]:
    """The loaded function objects of one file by qualname (module-level and methods).

    The collector's objects, and what the file's modules hold: ``gc.get_objects()`` leaves
    out the objects ``gc.freeze()`` moved to the permanent generation, and kspark's Python
    workers fork from a daemon that freezes everything it imported.
    """
    if filename not in _FUNCTIONS:
        table: dict[str, list[types.FunctionType]] = {}
        seen: set[int] = set()

        def add(obj: object) -> None:
            if isinstance(obj, types.FunctionType) and obj.__code__.co_filename == filename:
                if "<locals>" not in obj.__code__.co_qualname and id(obj) not in seen:
                    seen.add(id(obj))
                    table.setdefault(obj.__code__.co_qualname, []).append(obj)

        for obj in gc.get_objects():
            add(obj)
        for module in [m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == filename]:
            for obj in _module_functions(vars(module), set()):
                add(obj)
        _FUNCTIONS[filename] = table
    return _FUNCTIONS[filename]


def _module_functions(namespace: dict[str, Any], classes: set[int]) -> Iterator[object]:
    """The functions a module or class namespace holds: plain ones, the ones behind
    decorators (``__wrapped__``), static and class methods, properties' functions, and those
    of the classes it defines (each class once)."""
    for value in list(namespace.values()):
        if isinstance(value, staticmethod | classmethod):
            value = value.__func__
        if isinstance(value, property):
            yield from (f for f in (value.fget, value.fset, value.fdel) if f is not None)
            continue
        if isinstance(value, type):
            if id(value) not in classes:
                classes.add(id(value))
                yield from _module_functions(dict(vars(value)), classes)
            continue
        for _ in range(_MAX_WRAPPERS):  # a wrapper's own __dict__ names what it wraps
            yield value
            value = getattr(value, "__dict__", {}).get("__wrapped__")
            if value is None:
                break


_MAX_WRAPPERS = 16


class Applied:
    """A mutant swapped into the running process; ``revert`` puts the original code back."""

    def __init__(self, mutant: Mutant) -> None:
        self.mutant = mutant
        original, new = mutated_code(mutant)
        module = importlib.import_module(module_name(mutant.path))
        assert module.__file__ is not None
        self._functions = [
            f for f in _functions(module.__file__)[mutant.qualname] if f.__code__ is original
        ]
        self._original = original
        for f in self._functions:
            f.__code__ = new
        clear_caches(mutant.path)

    def revert(self) -> None:
        for f in self._functions:
            f.__code__ = self._original
        self._functions = []
        clear_caches(self.mutant.path)


def clear_caches(path: str) -> None:
    """Empty the ``functools`` caches of a module (results computed by a mutant or before it)."""
    module = importlib.import_module(module_name(path))
    for value in vars(module).values():
        clear: Callable[[], None] | None = getattr(value, "cache_clear", None)
        if callable(clear):
            clear()
