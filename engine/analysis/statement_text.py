"""A CREATE ... AS SELECT as ksqlDB's ``SqlFormatter`` prints the statement it plans.

ksqlDB rewrites a persistent query before it plans it, and some planning errors quote that
rewritten statement after ``Statement:`` (a sink key format that cannot carry the key
columns). The rewrite qualifies every column reference with its source's alias, gives
every source an alias (its name unless the query gave one), names every select item (its
own name, else a generated ``KSQL_COL_n``, as the sink's columns are named) and adds
``EMIT CHANGES`` to a query that says nothing. For example::

    CREATE TABLE OUTPUT WITH (KEY_FORMAT='KAFKA') AS SELECT
      TEST.F1 K1,
      COUNT(*) TOTAL
    FROM TEST TEST
    GROUP BY TEST.F1
    EMIT CHANGES

Expressions print as ``engine.plan.expr.format_sql`` prints them (ksqlDB's
ExpressionFormatter). Durations print in the largest unit that divides them: the parser
keeps milliseconds, not the unit the statement used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from engine.analysis.scope import column_name_for, rewrite
from engine.parser import ast
from engine.plan import expr as E

_UNITS = (("DAYS", 86_400_000), ("HOURS", 3_600_000), ("MINUTES", 60_000), ("SECONDS", 1000))
_JOINS = {"INNER": "INNER JOIN", "LEFT": "LEFT OUTER JOIN", "RIGHT": "RIGHT OUTER JOIN", "FULL": "FULL OUTER JOIN"}


def format_create_as_select(
    stmt: ast.CreateAsSelect, columns_of: Callable[[str], Iterable[str]], aliases: Sequence[str]
) -> str:
    """``stmt`` rewritten and printed as ksqlDB does (see the module docstring).

    ``columns_of(source)`` names the columns a source has (pseudo columns included), to
    qualify references the query left unqualified; ``aliases`` are the names of the query's
    output columns in order when its select list has no ``*`` (one that has prints each
    ``*`` as it is, and each other item under its alias or its column's name).
    """
    query = stmt.query
    sources = _sources(query.from_)
    owners: dict[str, list[str]] = {}
    for alias, name in sources:
        for column in columns_of(name):
            owners.setdefault(column, []).append(alias)
    qualify = _qualifier(owners)
    head = f"CREATE {stmt.kind} {E.format_identifier(stmt.name)}{_with(stmt.properties)} AS SELECT"
    lines = [head + _select(query.select, aliases, qualify)]
    lines.append("FROM " + _relation(query.from_, qualify))
    if query.window is not None:
        lines.append(f"WINDOW {_window(query.window)} ")
    if query.where is not None:
        lines.append("WHERE " + E.format_sql(qualify(query.where)))
    if query.group_by:
        lines.append("GROUP BY " + ", ".join(E.format_sql(qualify(g)) for g in query.group_by))
    if query.partition_by:
        lines.append("PARTITION BY " + ", ".join(E.format_sql(qualify(p)) for p in query.partition_by))
    if query.having is not None:
        lines.append("HAVING " + E.format_sql(qualify(query.having)))
    lines.append(f"EMIT {query.emit or 'CHANGES'}")
    return "\n".join(lines)


def _sources(relation: ast.Relation) -> list[tuple[str, str]]:
    """(alias, source name) of each source the FROM clause reads, left to right."""
    if isinstance(relation, ast.Join):
        return [*_sources(relation.left), *_sources(relation.right)]
    return [(relation.alias or relation.name, relation.name)]


def _qualifier(owners: Mapping[str, list[str]]) -> Callable[[E.Expr], E.Expr]:
    """Qualifies an unqualified column reference with the one source that has the column."""

    def qualified(node: E.Expr) -> E.Expr | None:
        if isinstance(node, E.ColumnRef) and node.source is None and len(owners.get(node.name, ())) == 1:
            return E.ColumnRef(node.name, source=owners[node.name][0])
        return None

    return lambda expr: rewrite(expr, qualified)


def _with(properties: Mapping[str, Any]) -> str:
    if not properties:
        return ""
    items = [f"{key.upper()}={_property(value)}" for key, value in sorted(properties.items())]
    return f" WITH ({', '.join(items)})"


def _property(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _select(items: Sequence[ast.SelectItem], aliases: Sequence[str], qualify: Callable[[E.Expr], E.Expr]) -> str:
    if len(items) == 1 and isinstance(items[0], ast.AllColumns):
        return " " + _star(items[0])
    named = iter(aliases)
    printed = []
    for item in items:
        if isinstance(item, ast.AllColumns):
            printed.append(_star(item))
            continue
        if isinstance(item, ast.StructAll):
            printed.append(f"{E.format_sql(qualify(item.base))}->*")
            continue
        name = next(named, None) or item.alias or column_name_for(item.expr)
        text = E.format_sql(qualify(item.expr))
        printed.append(text if name is None else f"{text} {E.format_identifier(name)}")
    return "\n" + ",\n".join(f"  {p}" for p in printed)


def _star(item: ast.AllColumns) -> str:
    return "*" if item.source is None else f"{E.format_identifier(item.source)}.*"


def _relation(relation: ast.Relation, qualify: Callable[[E.Expr], E.Expr]) -> str:
    if isinstance(relation, ast.AliasedSource):
        name = E.format_identifier(relation.name)
        return f"{name} {E.format_identifier(relation.alias) if relation.alias else name}"
    within = ""
    if relation.within is not None:
        w = relation.within
        span = (_duration(w.before_ms) if w.before_ms == w.after_ms
                else f"({_duration(w.before_ms)}, {_duration(w.after_ms)})")
        grace = "" if w.grace_ms is None else f" GRACE PERIOD {_duration(w.grace_ms)}"
        within = f" WITHIN {span}{grace}"
    return (f"{_relation(relation.left, qualify)}\n{_JOINS[relation.join_type]} "
            f"{_relation(relation.right, qualify)}{within} ON ({E.format_sql(qualify(relation.criteria))})")


def _window(window: ast.WindowExpr) -> str:
    parts = []
    if window.kind == "SESSION":
        parts.append(_duration(window.gap_ms or 0))
    else:
        parts.append(f"SIZE {_duration(window.size_ms or 0)}")
        if window.advance_ms is not None and window.kind == "HOPPING":
            parts.append(f"ADVANCE BY {_duration(window.advance_ms)}")
    if window.retention_ms is not None:
        parts.append(f"RETENTION {_duration(window.retention_ms)}")
    if window.grace_ms is not None:
        parts.append(f"GRACE PERIOD {_duration(window.grace_ms)}")
    return f"{window.kind} ( {' , '.join(parts)} )"


def _duration(ms: int) -> str:
    for unit, size in _UNITS:
        if ms and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} MILLISECONDS"


def format_create_source(stmt: ast.CreateSource, properties: Mapping[str, Any]) -> str:
    """``CREATE [OR REPLACE] [SOURCE] STREAM|TABLE [IF NOT EXISTS] name (columns) WITH (...)`` as
    ksqlDB's ``SqlFormatter`` prints it: columns as declared, types in their full names, the
    properties ``properties`` sorted by name."""
    head = "CREATE " + ("OR REPLACE " if stmt.or_replace else "") + ("SOURCE " if stmt.is_source else "")
    head += f"{stmt.kind} " + ("IF NOT EXISTS " if stmt.if_not_exists else "") + E.format_identifier(stmt.name)
    elements = ", ".join(_table_element(e) for e in stmt.elements)
    return f"{head}{f' ({elements})' if elements else ''}{_with(properties)};"


def _table_element(element: ast.TableElement) -> str:
    postfix = {"PRIMARY KEY": " PRIMARY KEY", "KEY": " KEY", "HEADERS": " HEADERS"}.get(element.constraint or "", "")
    if element.constraint == "HEADER":
        postfix = f" HEADER('{element.header_key}')"
    return f"{E.format_identifier(element.name)} {element.type}{postfix}"
