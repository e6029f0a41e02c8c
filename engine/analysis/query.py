"""Analysis of a SELECT: resolve the source and columns, expand ``*``, name and type columns.

The result, ``AnalyzedQuery``, holds only resolved, unqualified expressions: the logical
planner builds on it without looking at the AST again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.errors import AnalysisError, TypeCheckError, UnsupportedFeatureError
from engine.expressions import infer_type
from engine.functions import REGISTRY, FunctionKind
from engine.metastore import DataSource, MetaStore
from engine.parser import ast
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.schema import PSEUDO_COLUMNS, WINDOW_BOUNDS, Namespace
from engine.plan.types import SqlType


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
                )
            return E.ColumnRef(names[expr.name])
        if expr.name in self.columns:
            return E.ColumnRef(expr.name)
        candidates = sorted(
            {f"{alias}.{expr.name}": names[expr.name] for alias, names in self.qualified.items() if expr.name in names}.items()
        )
        targets = {target for _, target in candidates}
        if len(targets) == 1:
            return E.ColumnRef(targets.pop())
        if len(targets) > 1:
            raise AnalysisError(
                f"Column '{expr.name}' is ambiguous. Could be "
                + " or ".join(name for name, _ in candidates)
                + "."
            )
        if clause == "WHERE" and expr.name in ("WINDOWSTART", "WINDOWEND"):
            raise AnalysisError(f"Error in WHERE expression: Unknown column {expr.name}.")
        raise AnalysisError(f"{clause} column '{expr.name}' cannot be resolved.")


@dataclass
class FromClause:
    """What the FROM clause contributes: the logical node it reads, its sources and scope."""

    node: Any  # engine.planner.logical.LogicalNode (imported lazily: the planner imports us)
    sources: list[DataSource]
    scope: Scope
    alias: str
    hidden: frozenset[str] = frozenset()  # selectable columns that ``*`` leaves out


def _rewrite(expr: E.Expr, fn: Callable[[E.Expr], E.Expr | None]) -> E.Expr:
    """Bottom-up rewrite: ``fn`` returns a replacement or None to keep (children rewritten)."""
    replaced = fn(expr)
    if replaced is not None:
        return replaced
    import dataclasses

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


RESERVED_ALIASES = frozenset({*PSEUDO_COLUMNS, *WINDOW_BOUNDS})


def name_columns(
    items: Sequence[tuple[str | None, E.Expr]], source_names: set[str]
) -> list[SelectColumn]:
    """Name the select items as ksqlDB does.

    An alias wins; a column keeps its name; a struct field access takes the field name,
    suffixed ``_1``, ``_2``... when that name is taken by a source column or an earlier
    output; anything else is ``KSQL_COL_n`` with the smallest n not taken.
    """
    taken = set(source_names) | {a for a, _ in items if a is not None}
    taken |= {e.name for a, e in items if a is None and isinstance(e, E.ColumnRef)}
    next_name = generated_names(taken)
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
        elif isinstance(expr, E.Dereference):
            name = expr.field
            suffix = 0
            while name in taken and (name in seen or name in source_names):
                suffix += 1
                name = f"{expr.field}_{suffix}"
            taken.add(name)
        else:
            name = next_name()
        if name in seen:
            raise AnalysisError(f"Duplicate column name in the projection: `{name}`.")
        seen.add(name)
        select.append(SelectColumn(name, expr))
    return select


def is_aggregate_call(expr: E.Expr) -> bool:
    return isinstance(expr, E.FunctionCall) and REGISTRY.kind_of(expr.name) is FunctionKind.AGGREGATE


def is_table_function_call(expr: E.Expr) -> bool:
    return isinstance(expr, E.FunctionCall) and REGISTRY.kind_of(expr.name) is FunctionKind.TABLE


def analyze_query(
    query: ast.Query, metastore: MetaStore, *, sink_name: str | None = None, transient: bool = False
) -> AnalyzedQuery:
    """Resolve a single-source, non-aggregate query.

    A ``transient`` query (a push query) writes no topic, so ksqlDB's rules for its
    projection differ: key columns need not be selected, and ``*`` over a windowed source
    also selects ``WINDOWSTART`` and ``WINDOWEND`` (after the key columns).
    """
    from_clause = analyze_from(query.from_, metastore)
    if query.window is not None or query.group_by or _selects_aggregate(query):
        from engine.analysis.aggregate import analyze_aggregate_query

        return analyze_aggregate_query(query, from_clause, sink_name=sink_name, transient=transient)
    if query.having is not None:
        raise AnalysisError("HAVING requires a GROUP BY clause.")
    scope = from_clause.scope
    columns = scope.columns
    node_schema = from_clause.node.schema
    alias = from_clause.alias

    where = None
    if query.where is not None:
        where = scope.resolve(query.where, clause="WHERE")
        _check_no_aggregate(where, "WHERE")
        _check_null_arithmetic(where, columns)
        where_type = infer_type(where, columns)
        if where_type is not None and where_type != T.BOOLEAN:
            raise TypeCheckError(
                f"Type error in WHERE expression: Should evaluate to boolean but is "
                f"{E.format_sql(where)} ({where_type}) instead."
            )

    items: list[tuple[str | None, E.Expr]] = []
    star = False
    for item in query.select:
        if isinstance(item, ast.AllColumns):
            star = True
            if item.source is None:
                wanted = {c.name for c in node_schema.columns}
            elif item.source in scope.qualified:
                wanted = set(scope.qualified[item.source].values())
            else:
                raise AnalysisError(f"Source '{item.source}' in '{item.source}.*' is not in the query.")
            shown = [c for c in node_schema.columns if c.name in wanted and c.name not in from_clause.hidden]
            expanded: list[tuple[str | None, E.Expr]] = [(c.name, E.ColumnRef(c.name)) for c in shown]
            if transient and from_clause.node.window is not None and item.source is None:
                keys = sum(1 for c in shown if c.namespace is Namespace.KEY)
                expanded[keys:keys] = [(None, E.ColumnRef(bound)) for bound in WINDOW_BOUNDS]
            items.extend(expanded)
        else:
            expr = scope.resolve(item.expr, clause="SELECT")
            _check_no_aggregate(expr, "SELECT")
            alias_ = item.alias
            if alias_ is None and isinstance(expr, E.ColumnRef):
                alias_ = scope.aliases.get(expr.name)
            items.append((alias_, expr))

    select = name_columns(items, {c.name for c in node_schema.columns})

    table_functions = [
        e
        for s in select
        for e in E.walk(s.expression)
        if isinstance(e, E.FunctionCall) and is_table_function_call(e)
    ]
    if table_functions and from_clause.node.is_table:
        raise AnalysisError("Table functions cannot be used with a table source.")

    partition_by = None
    if query.partition_by:
        if from_clause.node.is_table:
            raise AnalysisError("PARTITION BY is not supported on a table source.")
        partition_by = [scope.resolve(p, clause="PARTITION BY") for p in query.partition_by]
        for p in partition_by:
            _check_no_aggregate(p, "PARTITION BY")
            infer_type(p, columns)

    for s in select:
        _check_typed(s, columns)
    del alias
    return AnalyzedQuery(from_clause, select, where, partition_by, table_functions, star)


def analyze_from(relation: Any, metastore: MetaStore) -> FromClause:
    """Resolve the FROM clause: one source, or a join (see engine.analysis.joins)."""
    from engine.planner import logical as L

    if isinstance(relation, ast.Join):
        from engine.analysis.joins import analyze_join

        return analyze_join(relation, metastore)
    source = metastore.get(relation.name)
    if source is None:
        raise AnalysisError(f"{relation.name} does not exist.")
    alias = relation.alias or relation.name
    node = L.SourceNode(
        schema=source.schema, is_table=source.is_table, window=source.window_info, source=source
    )
    return FromClause(node, [source], Scope.of_source(source, alias), alias)


def _selects_aggregate(query: ast.Query) -> bool:
    return any(
        is_aggregate_call(node)
        for item in query.select
        if isinstance(item, ast.SelectColumn)
        for node in E.walk(item.expr)
    )


def _check_no_aggregate(expr: E.Expr, clause: str) -> None:
    for node in E.walk(expr):
        if is_aggregate_call(node):
            if clause == "SELECT":
                raise UnsupportedFeatureError("aggregate functions")
            raise AnalysisError(f"Aggregate functions can not be used in the {clause} clause.")


def _check_null_arithmetic(expr: E.Expr, columns: Mapping[str, SqlType]) -> None:
    """ksqlDB refuses arithmetic with a NULL literal operand (``1 + NULL``), whatever the other side."""
    for node in E.walk(expr):
        if not isinstance(node, E.Arithmetic):
            continue
        sides = (node.left, node.right)
        if not any(isinstance(side, E.Literal) and side.value is None for side in sides):
            continue
        names = []
        for side in sides:
            side_type = None if isinstance(side, E.Literal) and side.value is None else infer_type(side, columns)
            names.append("null" if side_type is None else str(side_type))
        raise TypeCheckError(
            f"Error processing expression: {E.format_sql(node)}. "
            f"Arithmetic on types {names[0]} and {names[1]} are not supported."
        )


def _check_typed(column: SelectColumn, columns: Mapping[str, SqlType]) -> None:
    _check_null_arithmetic(column.expression, columns)
    t = infer_type(column.expression, columns)
    if t is None:
        raise AnalysisError(
            f"Can't infer a type of null. Please explicitly cast it to a required type, "
            f"e.g. CAST(null AS VARCHAR). Column: {column.alias}."
        )


def expressions_equal(a: E.Expr, b: E.Expr) -> bool:
    return a == b


def find_select(select: Sequence[SelectColumn], expr: E.Expr) -> SelectColumn | None:
    for s in select:
        if expressions_equal(s.expression, expr):
            return s
    return None
