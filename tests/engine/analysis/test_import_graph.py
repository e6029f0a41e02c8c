"""engine.analysis imports at module level and without a circle (issue 12, part 5).

The graph is read from the sources with ``ast``: every ``import``/``from ... import`` of an
``engine`` module, at module level or inside a function. A module of engine.analysis must
import its engine dependencies at the top, and none of them may lead back to it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
ENGINE = ROOT / "engine"
ANALYSIS = sorted(
    f"engine.analysis.{p.stem}" for p in (ENGINE / "analysis").glob("*.py") if p.stem != "__init__"
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ENGINE.rglob("*.py")}


def _imports(tree: ast.AST, modules: dict[str, Path]) -> list[tuple[str, ast.stmt]]:
    """(imported engine module, statement) for every import statement in ``tree``."""
    found: list[tuple[str, ast.stmt]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((a.name, node) for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module not in modules:
                continue
            found.append((node.module, node))
            # ``from engine.planner import logical`` imports the submodule too.
            found.extend(
                (f"{node.module}.{a.name}", node) for a in node.names if f"{node.module}.{a.name}" in modules
            )
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = {target for target, _ in _imports(tree, modules) if target != name}
    return graph


def _cycle_through(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path start -> ... -> start, or None."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_the_graph_sees_the_analysis_modules() -> None:
    graph = _graph()
    assert {"engine.analysis.query", "engine.analysis.aggregate", "engine.analysis.joins",
            "engine.analysis.scope"} <= set(ANALYSIS)
    assert "engine.analysis.scope" in graph["engine.analysis.aggregate"]
    assert "engine.planner.logical" in graph["engine.analysis.joins"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle_through("a", graph) == ["a", "b", "c", "a"]
    assert _cycle_through("d", graph) is None


@pytest.mark.parametrize("module", ANALYSIS)
def test_no_import_cycle_through_analysis_module(module: str) -> None:
    assert _cycle_through(module, _graph()) is None


@pytest.mark.parametrize("module", ANALYSIS)
def test_analysis_module_imports_engine_only_at_top_level(module: str) -> None:
    modules = _modules()
    tree = ast.parse(modules[module].read_text())
    top = set(map(id, tree.body))
    nested = [
        f"line {stmt.lineno}: {target}" for target, stmt in _imports(tree, modules) if id(stmt) not in top
    ]
    assert nested == []


def test_each_analysis_module_imports_first_in_a_fresh_interpreter() -> None:
    # One interpreter per module, that module imported before any other engine module;
    # then the rest, so each order of first import is exercised once.
    for first in ANALYSIS:
        order = [first, *(m for m in ANALYSIS if m != first)]
        code = "import importlib\n" + "".join(f"importlib.import_module({m!r})\n" for m in order)
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"importing {first} first:\n{done.stderr}"
