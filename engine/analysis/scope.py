"""What the analyses of a query share: its scope, FROM clause, result and naming rules.

``query`` (the dispatch), ``joins`` and ``aggregate`` build on this module and never on
each other's internals; it imports none of them, so the analysis imports form no circle.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import AnalysisError, KsqlError
from engine.expressions.typer import infer_type
from engine.functions import REGISTRY, FunctionKind
from engine.metastore import DataSource, MetaStore
from engine.parser import ast
from engine.plan import expr as E
from engine.plan.schema import PSEUDO_COLUMNS, WINDOW_BOUNDS
from engine.plan.types import SqlType, Struct
from engine.planner import logical as L


@dataclass(frozen=True)
class SelectColumn:
    """One output column: its name and its resolved expression."""

    alias: str
    expression: E.Expr


@dataclass
class AnalyzedQuery:
    """A resolved single-source query."""

    from_clause: FromClause
    select: list[SelectColumn]
    where: E.Expr | None
    partition_by: list[E.Expr] | None
    table_functions: list[E.FunctionCall] = field(default_factory=list)
    star_expanded: bool = False
    aggregation: Any = None  # engine.analysis.aggregate.AggregateAnalysis of a GROUP BY query

    @property
    def is_table(self) -> bool:
        return self.aggregation is not None or bool(self.from_clause.node.is_table)

    @property
    def source_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.name for s in self.from_clause.sources))

    @property
    def node(self) -> Any:
        return self.from_clause.node


def source_columns(source: DataSource) -> dict[str, SqlType]:
    """Columns an expression over the source may reference, pseudo columns included."""
    columns: dict[str, SqlType] = dict(PSEUDO_COLUMNS)
    if source.window_info is not None:
        columns.update(WINDOW_BOUNDS)
    columns.update(source.schema.types())
    return columns


@dataclass
class Scope:
    """Resolves column references of a query against the columns of its FROM clause.

    ``qualified`` maps each source name and alias to {column name -> name in the FROM
    node's schema}; unqualified names resolve when exactly one source has them. A single
    source maps names to themselves; a join maps ``A.ID`` to ``A_ID``.
    """

    columns: dict[str, SqlType]
    qualified: dict[str, dict[str, str]]
    # Join scopes: the name an unaliased selected column gets (``T.NAME`` -> ``NAME`` when
    # no other source has NAME, else ``T_NAME``).
    aliases: dict[str, str] = field(default_factory=dict)

    @staticmethod
    def of_source(source: DataSource, alias: str) -> Scope:
        columns = source_columns(source)
        names = {n: n for n in columns}
        return Scope(columns, {alias: names, source.name: names})

    def resolve(self, expr: E.Expr, *, clause: str) -> E.Expr:
        return _rewrite(expr, lambda e: self._column(e, clause))

    def _column(self, expr: E.Expr, clause: str) -> E.Expr | None:
        if not isinstance(expr, E.ColumnRef):
            return None
        if expr.source is not None:
            names = self.qualified.get(expr.source)
            if names is None:
                raise AnalysisError(
                    f"{clause} column '{expr.source}.{expr.name}' cannot be resolved: "
                    f"'{expr.source}' is not a valid stream/table name or alias."
                )
            if expr.name not in names:
                raise AnalysisError(
                    f"{clause} column '{expr.source}.{expr.name}' cannot be resolved."
                    + _applied_on_input(clause, f"{expr.source}.{expr.name}"),
                    node=expr,
                )
            return E.ColumnRef(names[expr.name])
        if expr.name in self.columns:
            return E.ColumnRef(expr.name)
        # Each column once, named by the first qualifier that has it: a source's alias comes
        # before its name (ksqlDB lists the aliases only).
        by_target: dict[str, str] = {}
        for alias, names in self.qualified.items():
            if expr.name in names:
                by_target.setdefault(names[expr.name], f"{alias}.{expr.name}")
        if len(by_target) == 1:
            return E.ColumnRef(next(iter(by_target)))
        if len(by_target) > 1:
            raise AnalysisError(
                f"Column '{expr.name}' is ambiguous. Could be "
                + " or ".join(sorted(by_target.values()))
                + ".",
                node=expr,
                preparing=True,
            )
        if clause == "WHERE" and expr.name in ("WINDOWSTART", "WINDOWEND"):
            raise AnalysisError(f"Error in WHERE expression: Unknown column {expr.name}.")
        raise AnalysisError(
            f"{clause} column '{expr.name}' cannot be resolved." + _applied_on_input(clause, expr.name), node=expr
        )


# What ksqlDB adds when it refuses a KAFKA-formatted value source in a JOIN or a GROUP BY.
KAFKA_VALUE_FORMAT_LIMITATION = (
    "The KAFKA format is primarily intended for use as a key format. It can be used as a value format, "
    "but can not be used in any operation that requires a repartition or changelog topic.\n"
    "Removing this limitation requires enhancements to the core of KSQL. This will come in a future "
    "release. Until then, avoid using the KAFKA format for values.\n"
    "If you have an existing topic with KAFKA formatted values you can duplicate the data and serialize "
    "using Avro or JSON with a statement such as: \n\n"
    "'CREATE STREAM <new-stream-name> WITH(VALUE_FORMAT='Avro') AS SELECT * FROM "
    "<existing-kafka-formated-stream-name>;'\n"
    "For more info see https://github.com/confluentinc/ksql/issues/3060"
)

def _applied_on_input(clause: str, column: str) -> str:
    """ksqlDB's hint for an unknown PARTITION BY column: the clause reads the input's columns."""
    if clause != "PARTITION BY":
        return ""
    return f" '{column}' must be a column in the source schema since PARTITION BY is applied on the input."


@dataclass
class FromClause:
    """What the FROM clause contributes: the logical node it reads, its sources and scope."""

    node: Any  # an engine.planner.logical.LogicalNode (a JoinNode for a join)
    sources: list[DataSource]
    scope: Scope
    alias: str
    hidden: frozenset[str] = frozenset()  # selectable columns that ``*`` leaves out


def _rewrite(expr: E.Expr, fn: Callable[[E.Expr], E.Expr | None]) -> E.Expr:
    """Bottom-up rewrite: ``fn`` returns a replacement or None to keep (children rewritten)."""
    replaced = fn(expr)
    if replaced is not None:
        return replaced
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(expr):  # type: ignore[arg-type]
        value = getattr(expr, f.name)
        if isinstance(value, E.Expr):
            changes[f.name] = _rewrite(value, fn)
        elif isinstance(value, tuple) and value and all(isinstance(v, E.Expr) for v in value):
            changes[f.name] = tuple(_rewrite(v, fn) for v in value)
    return dataclasses.replace(expr, **changes) if changes else expr  # type: ignore[type-var]


rewrite = _rewrite


def column_name_for(expr: E.Expr) -> str | None:
    """The name ksqlDB gives an unaliased select expression, or None for a generated one."""
    if isinstance(expr, E.ColumnRef):
        return expr.name
    if isinstance(expr, E.Dereference):
        return expr.field
    return None


def generated_names(taken: set[str]) -> Callable[[], str]:
    """KSQL_COL_n names, skipping names already used."""
    counter = [0]

    def next_name() -> str:
        while True:
            name = f"KSQL_COL_{counter[0]}"
            counter[0] += 1
            if name not in taken:
                taken.add(name)
                return name

    return next_name


_NUMBERED_NAME = re.compile(r"(.*?)(?:_([0-9]+))?")


def column_alias_generator(taken: Iterable[str]) -> Callable[[E.Expr], str]:
    """ksqlDB's names for unaliased expressions and new key columns (its
    ``ColumnNames.columnAliasGenerator``), over the names in ``taken``.

    A struct field ``s->f`` is named after the field's stem (``F`` for ``F`` and ``F_2``
    alike, else ``F_1``, ``F_2``, ...), any other expression ``KSQL_COL_n``. Names ending in
    ``_<digits>`` hold that number of their stem (a bare stem holds 0); each name drawn is
    the stem's smallest number not held and above the last drawn, so one generator never
    draws a name twice. Names given as aliases are not held: only ``taken``.
    """
    held: dict[str, set[int]] = {}
    for name in taken:
        found = _NUMBERED_NAME.fullmatch(name)
        assert found is not None
        held.setdefault(found.group(1), set()).add(int(found.group(2) or 0))
    following: dict[str, int] = {}

    def draw(stem: str, *, bare_zero: bool) -> str:
        index = following.get(stem, 0)
        while index in held.get(stem, set()):
            index += 1
        following[stem] = index + 1
        return stem if index == 0 and bare_zero else f"{stem}_{index}"

    def name_for(expr: E.Expr) -> str:
        if isinstance(expr, E.Dereference):
            stem = _NUMBERED_NAME.fullmatch(expr.field)
            assert stem is not None
            return draw(stem.group(1), bare_zero=stem.group(1) != "KSQL_COL")
        return draw("KSQL_COL", bare_zero=False)

    return name_for


RESERVED_ALIASES = frozenset({*PSEUDO_COLUMNS, *WINDOW_BOUNDS})


def source_column_names(sources: Iterable[DataSource]) -> set[str]:
    """The names generated aliases avoid: every column of the query's sources, under its own
    name (a join's sources unprefixed; pseudo columns are not among them)."""
    return {c.name for source in sources for c in source.schema.columns}


def name_columns(
    items: Sequence[tuple[str | None, E.Expr]], source_names: set[str],
    types: Mapping[str, SqlType] | None = None,
) -> list[SelectColumn]:
    """Name the select items as ksqlDB's AstSanitizer does.

    An alias wins; a column keeps its name (a join's column is named by the caller's alias);
    any other expression draws a name from one ``column_alias_generator`` over
    ``source_names``, the sources' own columns, in select order. A name given twice is
    ksqlDB's schema error, naming the second column with its type (typed over ``types``,
    the FROM clause's columns).
    """
    generated = column_alias_generator(source_names)
    select: list[SelectColumn] = []
    seen: set[str] = set()
    for alias, expr in items:
        if alias is not None:
            if alias in RESERVED_ALIASES:
                raise AnalysisError(
                    f"`{alias}` is a reserved column name. You cannot use it as an alias for a column."
                )
            name = alias
        elif isinstance(expr, E.ColumnRef):
            name = expr.name
        else:
            name = generated(expr)
        if name in seen:
            raise AnalysisError(f"Duplicate value columns found in schema: {_typed(name, expr, types)}")
        seen.add(name)
        select.append(SelectColumn(name, expr))
    return select


def _typed(name: str, expr: E.Expr, types: Mapping[str, SqlType] | None) -> str:
    """```NAME` TYPE`` as ksqlDB prints a schema's column, or only the name when the
    expression has no type here (a bare NULL, or one that fails to type: that error comes
    later, from the typer)."""
    try:
        sql_type = infer_type(expr, types or {})
    except KsqlError:
        sql_type = None
    return f"`{name}`" if sql_type is None else f"`{name}` {sql_type}"


def struct_all_items(item: ast.StructAll, scope: Scope) -> list[tuple[str | None, E.Expr]]:
    """``base->*``: one column per field of the struct ``base``, named by the field, as ksqlDB's
    projection resolves it."""
    base = scope.resolve(item.base, clause="SELECT")
    found = _struct_of(base, scope)
    return [(f.name, E.Dereference(base, f.name)) for f in found.fields]


def _struct_of(expr: E.Expr, scope: Scope) -> Struct:
    """The struct type of ``expr->*``'s base, with ksqlDB's errors for a column or field that is
    no struct (any other expression is typed as usual)."""
    if isinstance(expr, E.ColumnRef):
        found = infer_type(expr, scope.columns)
        if not isinstance(found, Struct):
            raise AnalysisError(f"Column {expr.name} is not a STRUCT type.")
        return found
    if isinstance(expr, E.Dereference):
        parent = _struct_of(expr.base, scope)
        field = next((f for f in parent.fields if f.name == expr.field), None)
        if field is None:
            raise AnalysisError(f"Field {expr.field} was not found on STRUCT.")
        if not isinstance(field.type, Struct):
            raise AnalysisError(f"Field {expr.field} is not a STRUCT type.")
        return field.type
    found = infer_type(expr, scope.columns)
    if not isinstance(found, Struct):
        raise AnalysisError(f"Expression {E.format_sql(expr)} is not a STRUCT type.")
    return found


def reserved_in_select(name: str) -> AnalysisError:
    """ksqlDB's error for a persistent query selecting a pseudo column or window bound under
    its own name (``SELECT ROWTIME``, ``SELECT A.ROWTIME AS ROWTIME``)."""
    return AnalysisError(f"Reserved column name in select: `{name}`. Please remove or alias the column.")


def check_reserved_selected(
    items: Sequence[tuple[str | None, E.Expr]], select: Sequence[SelectColumn], allowed: set[str]
) -> None:
    """Refuse unaliased select items named after a pseudo column or window bound."""
    for (alias, _), column in zip(items, select, strict=True):
        if alias is None and column.alias in RESERVED_ALIASES and column.alias not in allowed:
            raise reserved_in_select(column.alias)


def check_self_alias(item: ast.SelectColumn) -> None:
    """``S.ROWTIME AS ROWTIME`` selects the pseudo column under its own name."""
    if (
        item.alias in RESERVED_ALIASES and isinstance(item.expr, E.ColumnRef)
        and item.expr.name == item.alias
    ):
        raise reserved_in_select(item.alias)


def is_aggregate_call(expr: E.Expr) -> bool:
    return isinstance(expr, E.FunctionCall) and REGISTRY.kind_of(expr.name) is FunctionKind.AGGREGATE


def is_table_function_call(expr: E.Expr) -> bool:
    return isinstance(expr, E.FunctionCall) and REGISTRY.kind_of(expr.name) is FunctionKind.TABLE


def expressions_equal(a: E.Expr, b: E.Expr) -> bool:
    return a == b


def find_select(select: Sequence[SelectColumn], expr: E.Expr) -> SelectColumn | None:
    for s in select:
        if expressions_equal(s.expression, expr):
            return s
    return None


def source_from_clause(relation: ast.AliasedSource, metastore: MetaStore) -> FromClause:
    """The FROM clause of a single source (``FROM S`` or ``FROM S AS A``)."""
    source = metastore.get(relation.name)
    if source is None:
        raise AnalysisError(f"{relation.name} does not exist.")
    alias = relation.alias or relation.name
    node = L.SourceNode(
        schema=source.schema, is_table=source.is_table, window=source.window_info, source=source
    )
    return FromClause(node, [source], Scope.of_source(source, alias), alias)
