"""Analysis of a SELECT: resolve the source and columns, expand ``*``, name and type columns.

The result, ``AnalyzedQuery``, holds only resolved, unqualified expressions: the logical
planner builds on it without looking at the AST again. This module sits above the others
of the package: it dispatches a FROM clause to ``joins`` and an aggregate query to
``aggregate``, both of which build on ``scope`` only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from engine.analysis.aggregate import EMIT_FINAL_UNWINDOWED, analyze_aggregate_query
from engine.analysis.joins import analyze_join
from engine.analysis.scope import (
    AnalyzedQuery,
    FromClause,
    Scope,
    SelectColumn,
    check_reserved_selected,
    check_self_alias,
    column_name_for,
    expressions_equal,
    find_select,
    generated_names,
    is_aggregate_call,
    is_table_function_call,
    name_columns,
    rewrite,
    source_column_names,
    source_columns,
    source_from_clause,
    struct_all_items,
)
from engine.errors import AnalysisError, TypeCheckError, UnsupportedFeatureError
from engine.expressions import infer_type
from engine.metastore import MetaStore
from engine.parser import ast
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.schema import WINDOW_BOUNDS, Column, Namespace
from engine.plan.types import SqlType

# Names callers have imported from here since before engine.analysis.scope existed.
__all__ = [
    "AnalyzedQuery",
    "FromClause",
    "Scope",
    "SelectColumn",
    "analyze_from",
    "analyze_query",
    "column_name_for",
    "expressions_equal",
    "find_select",
    "generated_names",
    "is_aggregate_call",
    "is_table_function_call",
    "name_columns",
    "rewrite",
    "source_columns",
]



def analyze_query(
    query: ast.Query, metastore: MetaStore, *, sink_name: str | None = None, transient: bool = False
) -> AnalyzedQuery:
    """Resolve a single-source, non-aggregate query.

    A ``transient`` query (a push query) writes no topic, so ksqlDB's rules for its
    projection differ: key columns need not be selected, and ``*`` over a windowed source
    also selects ``WINDOWSTART`` and ``WINDOWEND`` (after the key columns).
    """
    from_clause = analyze_from(query.from_, metastore)
    _check_lambda_arguments(query, from_clause)
    if query.window is not None or query.group_by or _selects_aggregate(query):
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
        try:
            where_type = infer_type(where, columns)
        except TypeCheckError as exc:
            raise TypeCheckError(f"Error in WHERE expression: {exc}", logged="Error in WHERE expression") from exc
        if where_type is not None and where_type != T.BOOLEAN:
            raise TypeCheckError(
                f"Type error in WHERE expression: Should evaluate to boolean but is "
                f"{E.format_sql(where)} ({where_type}) instead.",
                logged=f"Type error in WHERE expression: Should evaluate to boolean but is ({where_type}) instead.",
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
                raise AnalysisError(f"'{item.source}' is not a valid stream/table name or alias.")
            shown = [c for c in node_schema.columns if c.name in wanted and c.name not in from_clause.hidden]
            if len(from_clause.sources) > 1:
                shown = _in_join_source_order(shown, from_clause)
            expanded: list[tuple[str | None, E.Expr]] = [(c.name, E.ColumnRef(c.name)) for c in shown]
            if transient and from_clause.node.window is not None and item.source is None:
                keys = sum(1 for c in shown if c.namespace is Namespace.KEY)
                expanded[keys:keys] = [(None, E.ColumnRef(bound)) for bound in WINDOW_BOUNDS]
            items.extend(expanded)
        elif isinstance(item, ast.StructAll):
            items.extend(struct_all_items(item, scope))
        else:
            if not transient:
                check_self_alias(item)
            expr = scope.resolve(item.expr, clause="SELECT")
            _check_table_function_placement(expr)
            _check_no_aggregate(expr, "SELECT")
            alias_ = item.alias
            if alias_ is None and isinstance(expr, E.ColumnRef):
                alias_ = scope.aliases.get(expr.name)
            items.append((alias_, expr))

    select = name_columns(items, source_column_names(from_clause.sources), node_schema.types())
    if not transient:
        check_reserved_selected(items, select, set())

    table_functions = [
        e
        for s in select
        for e in E.walk(s.expression)
        if isinstance(e, E.FunctionCall) and is_table_function_call(e)
    ]
    if table_functions and from_clause.node.is_table:
        raise AnalysisError("Table source is not supported with table functions.")

    partition_by = None
    if query.partition_by:
        if from_clause.node.is_table:
            raise AnalysisError("PARTITION BY is not supported on a table source.")
        _check_no_duplicate(list(query.partition_by), lambda p: E.format_sql(p))
        if len(query.partition_by) > 1 and any(is_null_literal(p) for p in query.partition_by):
            raise AnalysisError("Cannot PARTITION BY multiple columns including NULL")
        partition_by = [scope.resolve(p, clause="PARTITION BY") for p in query.partition_by]
        _check_no_duplicate(
            partition_by,
            lambda p, a=alias: f"{a}.{p.name}" if a and isinstance(p, E.ColumnRef) else E.format_sql(p),
        )
        for p in partition_by:
            _check_no_aggregate(p, "PARTITION BY")
            if not is_null_literal(p):  # PARTITION BY NULL: the result has no key columns
                infer_type(p, columns)

    for s in select:
        _check_typed(s, columns)
    del alias
    if query.emit == "FINAL":  # ksqlDB's logical planner, once the projection is planned
        raise AnalysisError(EMIT_FINAL_UNWINDOWED)
    return AnalyzedQuery(from_clause, select, where, partition_by, table_functions, star)


def analyze_from(relation: ast.Relation, metastore: MetaStore) -> FromClause:
    """Resolve the FROM clause: one source, or a join (see engine.analysis.joins)."""
    if isinstance(relation, ast.Join):
        return analyze_join(relation, metastore)
    return source_from_clause(relation, metastore)


def _selects_aggregate(query: ast.Query) -> bool:
    return any(
        is_aggregate_call(node)
        for item in query.select
        if isinstance(item, ast.SelectColumn)
        for node in E.walk(item.expr)
    )


_JAVA_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


def _check_lambda_arguments(query: ast.Query, from_clause: FromClause) -> None:
    """ksqlDB's checks of lambda parameters before it analyses a query (its AstSanitizer): a
    parameter may not be named as a column of a source, nor as a parameter of a lambda it is in."""
    columns = {c.name for s in from_clause.sources for c in s.schema.columns}
    clauses = [i.expr for i in query.select if isinstance(i, ast.SelectColumn)]
    clauses += [query.where, query.having, *(query.group_by or ()), *(query.partition_by or ())]

    def visit(expr: E.Expr, outer: frozenset[str]) -> None:
        if isinstance(expr, E.Lambda):
            for param in expr.params:
                if param in columns:
                    raise AnalysisError(f"Lambda function argument can't be a column name: {param}")
            if outer & set(expr.params) or len(set(expr.params)) < len(expr.params):
                raise AnalysisError("Reusing lambda arguments in nested lambda is not allowed")
            # ksqlDB's code generator takes a used argument's name as a Java name, as it is.
            for used in sorted({n.name for n in E.walk(expr.body) if isinstance(n, E.LambdaVariable)}):
                if used in expr.params and not _JAVA_IDENTIFIER.fullmatch(used):
                    raise AnalysisError(f"Invalid lambda argument name: {used}")
            visit(expr.body, outer | set(expr.params))
            return
        for child in expr.children():
            visit(child, outer)

    for clause in clauses:
        if clause is not None:
            visit(clause, frozenset())


def _check_table_function_placement(expr: E.Expr) -> None:
    """ksqlDB's refusals of a table function inside another or inside a searched CASE, found
    walking one select item before its types are checked (its names print quoted)."""
    outer: str | None = None
    case: E.Case | None = None
    for node in E.walk(expr):
        if isinstance(node, E.Case) and node.operand is None:
            case = case or node
        if isinstance(node, E.FunctionCall) and is_table_function_call(node):
            if outer is not None:
                raise AnalysisError(f"Table functions cannot be nested: `{outer}`(`{node.name}`())")
            outer = node.name
            if case is not None:
                raise AnalysisError(f"Table functions cannot be used in CASE: {E.format_sql(case)}")


def _check_no_duplicate(exprs: list[E.Expr], text: Callable[[E.Expr], str]) -> None:
    """ksqlDB's refusal of an expression given twice in a PARTITION BY."""
    for i, expr in enumerate(exprs):
        if expr in exprs[:i]:
            raise AnalysisError(f"Duplicate PARTITION BY expression: {text(expr)}")


def _in_join_source_order(shown: list[Column], from_clause: FromClause) -> list[Column]:
    """A join's ``*`` as ksqlDB expands it: the key columns, then every source's columns in
    the order of the sources, each source's key columns, window bounds, then values (an
    n-way join's inner key columns do not come first)."""
    rank: dict[str, int] = {}
    for source in from_clause.sources:
        names = from_clause.scope.qualified.get(source.name, {})
        own = [c.name for c in source.schema.columns if c.namespace is Namespace.KEY]
        own += list(WINDOW_BOUNDS) if source.window_info is not None else []
        own += [c.name for c in source.schema.columns if c.namespace is not Namespace.KEY]
        for column in (*own, *names):
            if column in names:
                rank.setdefault(names[column], len(rank))
    keys = [c for c in shown if c.namespace is Namespace.KEY]
    values = [c for c in shown if c.namespace is not Namespace.KEY]
    return keys + sorted(values, key=lambda c: rank.get(c.name, len(rank)))


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
    try:
        t = infer_type(column.expression, columns)
    except TypeCheckError as exc:
        if str(exc).startswith("Cast of "):
            raise TypeCheckError(f"Invalid Select: {exc}") from exc
        raise
    if t is None:
        raise AnalysisError(
            f"Can't infer a type of null. Please explicitly cast it to a required type, "
            f"e.g. CAST(null AS VARCHAR). Column: {column.alias}."
        )


def is_null_literal(expr: E.Expr) -> bool:
    """``NULL`` as written, e.g. in ``PARTITION BY NULL``, which removes the key columns."""
    return isinstance(expr, E.Literal) and expr.value is None
