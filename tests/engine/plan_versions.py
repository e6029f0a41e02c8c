"""The behaviour versions a query plan records, for tests of how versions are chosen."""

from __future__ import annotations

from typing import Any

from engine.plan import serde


def recorded_versions(plan: Any) -> dict[str, int]:
    """The version each function call records in ``plan``, by function name (``CAST`` for
    casts); a call saved without one is version 1."""
    found: dict[str, int] = {}

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("kind") == "cast":
                found["CAST"] = value.get("semantics", 1)
            if value.get("kind") == "call":
                found[value["name"].upper()] = value.get("semantics", 1)
            for v in value.values():
                visit(v)
        elif isinstance(value, list):
            for v in value:
                visit(v)

    visit(serde.to_json_value(plan))
    return found
