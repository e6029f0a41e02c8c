"""Functions with a meaning for the planner rather than for values."""

from __future__ import annotations

from typing import Any

from engine.functions.registry import Generic, scalar

_T = Generic("T")


@scalar("AS_VALUE", params=[_T], returns=_T, null_propagating=False)
def as_value(value: Any) -> Any:
    """Copies a key column into the value; the value itself passes through unchanged."""
    return value
