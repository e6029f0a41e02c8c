"""ksqlDB plan expressions (SQL text) -> kspark expression trees, via kspark's own grammar.

A saved plan holds expressions as ksqlDB's ExpressionFormatter printed them, and select
items as ``<expression> AS <alias>``. Functions kspark does not have are reported as
unsupported, naming the function.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

from engine.errors import KsqlError, PlanError, UnsupportedFeatureError
from engine.parser import parse_expression
from engine.plan import expr as E
from engine.plan.steps import SelectExpression
from engine.plan.types import SqlType

# `` ... AS `ALIAS` `` or `` ... AS ALIAS `` at the end of a select item.
_ALIAS = re.compile(r"\s+AS\s+(`(?:[^`]|``)+`|[A-Za-z0-9_@$]+)\s*$", re.IGNORECASE)


def expression(text: str, where: str, types: Mapping[str, SqlType] | None = None) -> E.Expr:
    """Parse one expression of a ksqlDB plan; errors name the step and quote the text."""
    if not isinstance(text, str) or not text.strip():
        raise PlanError(f"Step {where}: expected an expression as SQL text, got {text!r}.")
    try:
        parsed = parse_expression(text, types=types)
    except KsqlError as exc:
        raise PlanError(f"Step {where}: cannot parse the expression '{text}': {exc}") from exc
    check_functions(parsed, where)
    return parsed


def aliased(text: str, where: str, types: Mapping[str, SqlType] | None = None) -> SelectExpression:
    """Parse a select item ``<expression> AS <alias>``."""
    if not isinstance(text, str):
        raise PlanError(f"Step {where}: expected '<expression> AS <alias>', got {text!r}.")
    match = _ALIAS.search(text)
    if match is None:
        raise PlanError(f"Step {where}: the select item '{text}' has no 'AS <alias>'.")
    alias = match.group(1)
    alias = alias[1:-1].replace("``", "`") if alias.startswith("`") else alias.upper()
    return SelectExpression(alias=alias, expression=expression(text[: match.start()], where, types))


def alias_of(text: str) -> str | None:
    """The alias of a select item ``<expression> AS <alias>`` without parsing the expression."""
    match = _ALIAS.search(text)
    if match is None:
        return None
    alias = match.group(1)
    return alias[1:-1].replace("``", "`") if alias.startswith("`") else alias.upper()


def function_calls(node: E.Expr) -> Iterator[E.FunctionCall]:
    """Every function call of an expression tree, outermost first."""
    if isinstance(node, E.FunctionCall):
        yield node
    for child in node.children():
        yield from function_calls(child)


def check_functions(node: E.Expr, where: str) -> None:
    """Raise UnsupportedFeatureError for the first function kspark does not know."""
    from engine.functions import REGISTRY

    for call in function_calls(node):
        if REGISTRY.kind_of(call.name) is None:
            raise UnsupportedFeatureError(
                f"function {call.name.upper()}",
                f"Step {where} calls the function {call.name.upper()}, which kspark does not have.",
            )


def column_name(node: E.Expr) -> str | None:
    """The column an expression merely references (``ID``, ``T.ID``), else None."""
    return node.name if isinstance(node, E.ColumnRef) else None
