"""The serde modules import one another in one direction: no circle, lazy imports included."""

from __future__ import annotations

import ast
from pathlib import Path

import engine.serde

SERDE = Path(engine.serde.__file__).parent


def serde_imports() -> dict[str, set[str]]:
    """Each serde module's name -> the serde modules it imports anywhere in its body."""
    graph: dict[str, set[str]] = {}
    for path in sorted(SERDE.glob("*.py")):
        name = path.stem
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("engine.serde."):
                targets.add(node.module.removeprefix("engine.serde.").split(".")[0])
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("engine.serde."):
                        targets.add(alias.name.removeprefix("engine.serde.").split(".")[0])
        graph[name] = targets - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports as a list of module names (first repeated last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target):], target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_find_cycle_reports_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_serde_modules_import_without_a_circle() -> None:
    graph = serde_imports()
    assert {"protobuf", "registry", "schema_inference", "schema_text"} <= set(graph)
    cycle = find_cycle({name: targets for name, targets in graph.items() if name != "__init__"})
    assert cycle is None, "serde import circle: " + " -> ".join(cycle or ())


def test_schema_inference_and_protobuf_share_the_proto_parser() -> None:
    graph = serde_imports()
    assert "schema_text" in graph["protobuf"] and "schema_text" in graph["schema_inference"]
    assert "schema_inference" not in graph["protobuf"]
