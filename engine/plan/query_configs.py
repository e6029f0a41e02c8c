"""ksqlDB's configs that change what a query computes, recorded in the query's plan.

ksqlDB reads them when it builds a query; kspark records their outcome on the plan nodes it
plans or imports, so that a saved plan keeps its behaviour whatever the config is later (the
builders and evaluators read only the nodes):

- ``ksql.cast.strings.preserve.nulls=false``: every ``Cast`` gets ``null_text``.
- ``ksql.nested.error.set.null=false``: every ``Cast`` and ``FunctionCall`` gets
  ``error_null=False``.
- ``ksql.timestamp.throw.on.invalid=true``: every source step's ``TimestampColumn`` gets
  ``throw_on_invalid`` (ksqlDB's source builders read it; its sinks do not).

At their defaults the nodes are left as they are, so plans do not change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from engine.plan import expr as E
from engine.plan.steps import TimestampColumn

CAST_STRINGS_PRESERVE_NULLS = "ksql.cast.strings.preserve.nulls"
NESTED_ERROR_SET_NULL = "ksql.nested.error.set.null"
TIMESTAMP_THROW_ON_INVALID = "ksql.timestamp.throw.on.invalid"

_T = TypeVar("_T")


def _is(config: Mapping[str, Any], name: str, value: str) -> bool:
    return str(config.get(name, "")).strip().lower() == value


def with_query_configs(node: _T, config: Mapping[str, Any]) -> _T:
    """``node`` (a step tree, or any plan object holding expressions) with the configs'
    outcome recorded on its nodes; ``node`` itself when the configs are at their defaults."""
    null_text = _is(config, CAST_STRINGS_PRESERVE_NULLS, "false")
    nested_fails = _is(config, NESTED_ERROR_SET_NULL, "false")
    throw_on_invalid = _is(config, TIMESTAMP_THROW_ON_INVALID, "true")
    if not null_text and not nested_fails and not throw_on_invalid:
        return node

    def mark(expr: Any, parent: Any) -> Any:
        changes: dict[str, Any] = {}
        if isinstance(expr, TimestampColumn):
            # A source step is the one with a source schema; a sink's timestamp is not checked.
            if throw_on_invalid and hasattr(parent, "source_schema"):
                changes["throw_on_invalid"] = True
        elif isinstance(expr, E.Cast):
            if null_text:
                changes["null_text"] = True
            if nested_fails:
                changes["error_null"] = False
        elif isinstance(expr, E.FunctionCall) and nested_fails:
            changes["error_null"] = False
        return dataclasses.replace(expr, **changes) if changes else expr  # type: ignore[type-var]

    return _map(node, mark)


def _map(value: Any, mark: Any, parent: Any = None) -> Any:
    """Rebuild ``value``, applying ``mark(node, parent)`` to every plan object, bottom-up."""
    if isinstance(value, tuple):
        return tuple(_map(v, mark, parent) for v in value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        if not f.init:
            continue
        old = getattr(value, f.name)
        new = _map(old, mark, value)
        if new is not old:
            changes[f.name] = new
    rebuilt = dataclasses.replace(value, **changes) if changes else value
    return mark(rebuilt, parent)
