"""Analysis of aggregate queries: GROUP BY, aggregate calls, HAVING, windows and EMIT FINAL.

The FROM node's rows are grouped by the GROUP BY expressions (key columns named after the
column for a column reference, ``KSQL_COL_n`` otherwise) and aggregated into
``KSQL_AGG_VARIABLE_n`` columns. SELECT and HAVING are rewritten over that aggregate
output: grouping expressions become key references and aggregate calls become references
to their result column. Anything else they reference is ksqlDB's "not part of GROUP BY"
error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.analysis.scope import (
    KAFKA_VALUE_FORMAT_LIMITATION,
    AnalyzedQuery,
    FromClause,
    Scope,
    SelectColumn,
    check_reserved_selected,
    check_self_alias,
    generated_names,
    is_aggregate_call,
    is_table_function_call,
    name_columns,
    reserved_in_select,
    rewrite,
    source_column_names,
    struct_all_items,
)
from engine.errors import AnalysisError, TypeCheckError
from engine.expressions import infer_type
from engine.functions import REGISTRY
from engine.functions.udaf import aggregate_spec, table_aggregation_error
from engine.parser import ast
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.schema import PSEUDO_COLUMNS, WINDOW_BOUNDS
from engine.plan.steps_aggregate import WindowSpec

AGG_PREFIX = "KSQL_AGG_VARIABLE_"
_EITHER = "\nEither add the column(s) to the GROUP BY or remove them from the SELECT."

# ksqlDB's logical planner refuses an EMIT FINAL that is not a windowed aggregation.
EMIT_FINAL_UNWINDOWED = "EMIT FINAL is only supported for windowed aggregations."


@dataclass
class AggregateAnalysis:
    """What an aggregate query groups by and computes, with SELECT/HAVING rewritten over it."""

    group_by: list[tuple[str, E.Expr]]
    aggregates: list[tuple[str, E.FunctionCall]]
    having: E.Expr | None = None
    window: WindowSpec | None = None
    emit_final: bool = False
    original_group_by: list[E.Expr] = field(default_factory=list)


def window_spec(window: ast.WindowExpr) -> WindowSpec:
    """The plan's window from the parsed WINDOW clause."""
    if window.kind == "HOPPING" and window.advance_ms is not None and window.size_ms is not None:
        if window.advance_ms > window.size_ms:
            raise AnalysisError(
                f"A HOPPING window's ADVANCE BY ({window.advance_ms} ms) cannot be larger than "
                f"its SIZE ({window.size_ms} ms)."
            )
        if window.advance_ms <= 0:
            raise AnalysisError("A HOPPING window's ADVANCE BY must be positive.")
    span = window.gap_ms if window.kind == "SESSION" else window.size_ms
    if window.retention_ms is not None and span is not None:
        grace = window.grace_ms or 0
        if window.retention_ms < span + grace:
            raise AnalysisError(
                f"Retention period ({window.retention_ms} ms) must be greater than or equal to "
                f"the window size plus the grace period ({span + grace} ms)."
            )
    return WindowSpec(
        type=window.kind,
        size_ms=window.size_ms,
        advance_ms=window.advance_ms if window.kind == "HOPPING" else None,
        gap_ms=window.gap_ms,
        grace_ms=window.grace_ms,
        retention_ms=window.retention_ms,
    )


def _is_aggregate(expr: E.Expr) -> bool:
    return is_aggregate_call(expr)


def _contains_aggregate(expr: E.Expr) -> E.FunctionCall | None:
    for node in E.walk(expr):
        if _is_aggregate(node):
            assert isinstance(node, E.FunctionCall)
            return node
    return None


def collect_aggregates(exprs: list[E.Expr]) -> list[E.FunctionCall]:
    """The distinct outermost aggregate calls of the expressions, in order of appearance."""
    found: list[E.FunctionCall] = []

    def visit(expr: E.Expr) -> None:
        if _is_aggregate(expr):
            assert isinstance(expr, E.FunctionCall)
            for arg in expr.args:
                inner = _contains_aggregate(arg)
                if inner is not None:
                    raise AnalysisError(
                        f"Aggregate functions can not be nested: {expr.name}({inner.name}())"
                    )
            if expr not in found:
                found.append(expr)
            return
        for child in expr.children():
            visit(child)

    for e in exprs:
        visit(e)
    return found


def group_key_names(group_by: list[E.Expr], taken: set[str]) -> list[str]:
    """Internal key column names: the column's name for a column reference, else KSQL_COL_n."""
    used = set(taken) | {g.name for g in group_by if isinstance(g, E.ColumnRef)}
    next_name = generated_names(used)
    return [g.name if isinstance(g, E.ColumnRef) else next_name() for g in group_by]


def check_group_by(group_by: list[E.Expr], alias: str) -> None:
    """Refuse aggregate calls and duplicates in GROUP BY."""
    seen: list[E.Expr] = []
    for g in group_by:
        call = _contains_aggregate(g)
        if call is not None:
            raise AnalysisError(
                f"GROUP BY does not support aggregate functions: {call.name} is an aggregate function."
            )
        if g in seen:
            text = f"{alias}.{g.name}" if isinstance(g, E.ColumnRef) else E.format_sql(g)
            raise AnalysisError(f"Duplicate GROUP BY expression: {text}")
        seen.append(g)


def rewrite_over_aggregate(
    expr: E.Expr, group_by: list[tuple[str, E.Expr]], aggregates: list[tuple[str, E.FunctionCall]]
) -> E.Expr:
    """Replace grouping expressions by key references and aggregate calls by their results."""
    by_expr: dict[E.Expr, str] = {}
    for name, call in aggregates:
        by_expr.setdefault(call, name)
    for name, g in group_by:
        by_expr.setdefault(g, name)
    return rewrite(expr, lambda e: E.ColumnRef(by_expr[e]) if e in by_expr else None)


def foreign_columns(expr: E.Expr, allowed: set[str]) -> list[str]:
    """Column names an expression over the aggregate output references but may not."""
    return [
        n.name
        for n in E.walk(expr)
        if isinstance(n, E.ColumnRef) and n.name not in allowed
    ]


def resolve_aggregates(
    calls: list[E.FunctionCall],
    columns: dict[str, T.SqlType],
    *,
    table_source: bool,
) -> list[tuple[str, E.FunctionCall, T.SqlType]]:
    """Type every aggregate call; refuse ones a table source cannot undo."""
    out: list[tuple[str, E.FunctionCall, T.SqlType]] = []
    not_undoable: list[str] = []
    for i, call in enumerate(calls):
        arg_types = [infer_type(a, columns) for a in call.args]
        spec = aggregate_spec(call.name, arg_types, call.semantics)
        for position, init in enumerate(call.args[spec.column_args:], start=spec.column_args + 1):
            if not isinstance(init, E.Literal | E.Negate):
                # ksqlDB's words (its UdafUtil), the position 1-based; ksqlDB reports it as the
                # cause of its failure to create the aggregate, and so does kspark.
                cause = AnalysisError(
                    f"Parameter {position} passed to function {call.name} must be a literal constant, "
                    f"but was expression: '{E.format_sql(init)}'"
                )
                raise AnalysisError(
                    f"Failed to create aggregate function: {E.format_sql(call)}\n{cause}"
                ) from cause
        if table_source and not spec.supports_undo:
            not_undoable.append(call.name)
        out.append((f"{AGG_PREFIX}{i}", call, spec.return_type))
    if not_undoable:
        raise table_aggregation_error(not_undoable)
    return out


def check_projection_keys(
    select: list[tuple[str, E.Expr]],
    group_by: list[tuple[str, E.Expr]],
    originals: list[E.Expr],
    sink_name: str | None,
) -> None:
    """ksqlDB's rules for key columns in the projection of an aggregate."""
    missing: list[E.Expr] = []
    for (name, _), original in zip(group_by, originals, strict=True):
        matches = [a for a, e in select if e == E.ColumnRef(name)]
        if not matches:
            missing.append(original)
        elif len(matches) > 1:
            shown = [f"`{m}`" for m in matches]
            raise AnalysisError(
                "The projection contains a key column more than once: "
                f"{', '.join(shown[:-1])} and {shown[-1]}.\n"
                "Each key column must only be in the projection once. If you intended to copy the "
                "key into the value, then consider using the AS_VALUE function to indicate which "
                "key reference should be copied."
            )
    if missing:
        texts = [E.format_sql(g) for g in missing]
        listed = texts[0] if len(texts) == 1 else ", ".join(texts[:-1]) + " and " + texts[-1]
        noun = "expression" if len(texts) == 1 else "expressions"
        raise AnalysisError(
            f"The query used to build `{sink_name or 'the sink'}` must include the grouping "
            f"{noun} {listed} in its projection (eg, SELECT {', '.join(texts)}...)."
        )
    key_refs = {E.ColumnRef(n) for n, _ in group_by}
    if all(e in key_refs for _, e in select):
        raise AnalysisError("The projection contains no value columns.")


def window_bound_columns(window: WindowSpec | None) -> set[str]:
    """WINDOWSTART and WINDOWEND are selectable exactly when the aggregate is windowed."""
    return set(WINDOW_BOUNDS) if window is not None else set()


def non_aggregate_error(clause: str, offending: list[E.Expr]) -> AnalysisError:
    """ksqlDB's error for SELECT or HAVING expressions that are not grouped or aggregated."""
    texts = ", ".join(E.format_sql(e) for e in offending)
    if clause == "HAVING":
        return AnalysisError(
            f"Non-aggregate HAVING expression not part of GROUP BY: {texts}\n"
            "Consider switching the HAVING clause to a WHERE clause before the GROUP BY."
        )
    return AnalysisError(f"Non-aggregate SELECT expression(s) not part of GROUP BY: {texts}{_EITHER}")


def _check_functions_exist(exprs: list[E.Expr]) -> None:
    """An unknown function is named before the aggregate rules, which cannot classify it."""
    for expr in exprs:
        for node in E.walk(expr):
            if isinstance(node, E.FunctionCall) and REGISTRY.kind_of(node.name) is None:
                REGISTRY.signatures(node.name)  # raises ksqlDB's "Can't find any functions"


def check_boolean(expr: E.Expr, columns: dict[str, T.SqlType], clause: str) -> None:
    """A WHERE or HAVING condition must be boolean."""
    if clause == "WHERE":
        try:
            t = infer_type(expr, columns)
        except TypeCheckError as exc:
            raise TypeCheckError(f"Error in WHERE expression: {exc}", logged="Error in WHERE expression") from exc
    else:
        t = infer_type(expr, columns)
    if t is not None and t != T.BOOLEAN:
        raise TypeCheckError(
            f"Type error in {clause} expression: Should evaluate to boolean but is "
            f"{E.format_sql(expr)} ({t}) instead.",
            logged=f"Type error in {clause} expression: Should evaluate to boolean but is ({t}) instead.",
        )


def analyze_aggregate_query(
    query: ast.Query, from_clause: FromClause, *, sink_name: str | None, transient: bool = False
) -> AnalyzedQuery:
    """Resolve a query with GROUP BY, aggregate calls, HAVING or a WINDOW clause.

    A ``transient`` query (a push query) need not select its grouping columns.
    """
    node = from_clause.node
    scope = from_clause.scope
    window = window_spec(query.window) if query.window is not None else None
    if query.emit == "FINAL" and window is None:
        raise AnalysisError(EMIT_FINAL_UNWINDOWED)
    if window is not None and node.is_table:
        raise AnalysisError("Windowing not supported for table aggregations.")
    if query.partition_by:
        raise AnalysisError("PARTITION BY can not be used together with GROUP BY.")
    for source in from_clause.sources:
        if source.formats.value_format == "KAFKA":
            raise AnalysisError(
                f"Source(s) {source.name} are using the 'KAFKA' value format. "
                "This format does not yet support GROUP BY.\n" + KAFKA_VALUE_FORMAT_LIMITATION
            )
    # ksqlDB cannot select the window bounds of an aggregate over a join.
    joined = len(from_clause.sources) > 1
    bounds = set() if joined else window_bound_columns(window) - set(scope.columns)
    select_scope = Scope(
        {**scope.columns, **{b: WINDOW_BOUNDS[b] for b in bounds}},
        {q: {**names, **{b: b for b in bounds}} for q, names in scope.qualified.items()},
        scope.aliases,
    )

    where = None
    if query.where is not None:
        where = scope.resolve(query.where, clause="WHERE")
        if _contains_aggregate(where) is not None:
            raise AnalysisError("Aggregate functions can not be used in the WHERE clause.")
        check_boolean(where, scope.columns, "WHERE")

    if not transient and window is None:
        # Before GROUP BY resolves: ``SELECT WINDOWSTART ... GROUP BY WINDOWSTART`` is this error.
        for item in query.select:
            if (
                isinstance(item, ast.SelectColumn) and item.alias is None
                and isinstance(item.expr, E.ColumnRef) and item.expr.name in WINDOW_BOUNDS
            ):
                raise reserved_in_select(item.expr.name)
    group_exprs = [select_scope.resolve(g, clause="GROUP BY") for g in query.group_by or ()]
    check_group_by(group_exprs, from_clause.alias)

    items: list[tuple[str | None, E.Expr]] = []
    for item in query.select:
        if isinstance(item, ast.AllColumns):
            items.extend((c.name, E.ColumnRef(c.name)) for c in node.schema.columns)
        elif isinstance(item, ast.StructAll):
            items.extend(struct_all_items(item, select_scope))
        else:
            if not transient and window is None:
                check_self_alias(item)
            expr = select_scope.resolve(item.expr, clause="SELECT")
            alias_ = item.alias
            if alias_ is None and isinstance(expr, E.ColumnRef):
                # A join's column keeps its own name unless another source has it too.
                alias_ = select_scope.aliases.get(expr.name)
            items.append((alias_, expr))
    select = name_columns(items, source_column_names(from_clause.sources), node.schema.types())
    if not transient:
        check_reserved_selected(items, select, window_bound_columns(window))
    having = select_scope.resolve(query.having, clause="HAVING") if query.having is not None else None

    _check_functions_exist([*group_exprs, *(s.expression for s in select), *([having] if having else [])])
    if any(is_table_function_call(n) for s in select for n in E.walk(s.expression)):
        raise AnalysisError("Table functions cannot be used with aggregations.")
    calls = collect_aggregates([s.expression for s in select] + ([having] if having else []))
    if not group_exprs and calls and transient and window is None:
        # A push query aggregates a stream without GROUP BY as ksqlDB does: every row in one
        # group, under a constant key it does not select.
        group_exprs = [E.Literal(1, T.INTEGER)]
    if not group_exprs:
        if calls:
            ungrouped = [
                x.expression for x in select
                if _contains_aggregate(x.expression) is None
                and any(isinstance(n, E.ColumnRef) for n in E.walk(x.expression))
            ]
            if ungrouped:
                raise non_aggregate_error("SELECT", ungrouped)
            # ksqlDB counts COUNT(*)'s rows by ROWTIME and names the call so.
            listed = ", ".join(
                f"{c.name}(ROWTIME)" if c.star else E.format_sql(c) for c in calls
            )
            raise AnalysisError(
                f"CREATE TABLE AS SELECT statement does not support aggregate function "
                f"[{listed}] without a GROUP BY clause."
            )
        raise AnalysisError("WINDOW clause requires a GROUP BY clause.")
    if not calls:
        raise AnalysisError("GROUP BY requires aggregate functions in either the SELECT or HAVING clause.")

    columns = node.columns()
    having_outside_calls = [having] if having is not None else []
    for expr in [*group_exprs, *having_outside_calls, *(a for c in calls for a in c.args), *([where] if where else [])]:
        for ref in E.walk(expr):
            if isinstance(ref, E.ColumnRef) and ref.name in bounds:
                raise AnalysisError(
                    f"Window bounds column {ref.name} can only be used in the SELECT clause of "
                    "windowed aggregations and can not be passed to aggregate functions.\n"
                    "See https://github.com/confluentinc/ksql/issues/4397"
                )
    taken = {c.name for c in node.schema.columns} - {
        g.name for g in group_exprs if isinstance(g, E.ColumnRef)
    }
    key_names = group_key_names(group_exprs, taken)
    group_by = list(zip(key_names, group_exprs, strict=True))
    for _, g in group_by:
        infer_type(g, columns)
    typed = resolve_aggregates(calls, columns, table_source=bool(node.is_table))
    aggregates = [(name, call) for name, call, _ in typed]

    out_columns: dict[str, T.SqlType] = dict(PSEUDO_COLUMNS)
    out_columns.update({n: t for n, t in ((n, infer_type(g, columns)) for n, g in group_by) if t})
    out_columns.update({name: t for name, _, t in typed})
    if window is not None:
        out_columns.update(WINDOW_BOUNDS)
    allowed = {n for n, _ in group_by} | {n for n, _ in aggregates} | window_bound_columns(window)

    rewritten: list[SelectColumn] = []
    offending: list[E.Expr] = []
    for s in select:
        expr = rewrite_over_aggregate(s.expression, group_by, aggregates)
        if foreign_columns(expr, allowed):
            offending.append(s.expression)
        rewritten.append(SelectColumn(s.alias, expr))
    if offending:
        raise non_aggregate_error("SELECT", offending)

    having_expr = None
    if having is not None:
        having_expr = rewrite_over_aggregate(having, group_by, aggregates)
        foreign = foreign_columns(having_expr, allowed)
        if foreign:
            raise non_aggregate_error("HAVING", [E.ColumnRef(foreign[0])])
        try:
            # Typed as written, so a type error names SUM(V), not its result column.
            infer_type(having, {**columns, **{b: WINDOW_BOUNDS[b] for b in bounds}})
        except TypeCheckError as exc:
            raise TypeCheckError(f"Error in HAVING expression: {exc}", logged="Error in HAVING expression") from exc
        check_boolean(having_expr, out_columns, "HAVING")

    if not transient:
        check_projection_keys(
            [(s.alias, s.expression) for s in rewritten], group_by, group_exprs, sink_name
        )
    for s in rewritten:
        if infer_type(s.expression, out_columns) is None:
            raise AnalysisError(
                "Can't infer a type of null. Please explicitly cast it to a required type, "
                f"e.g. CAST(null AS VARCHAR). Column: {s.alias}."
            )
    aggregation = AggregateAnalysis(
        group_by=group_by,
        aggregates=aggregates,
        having=having_expr,
        window=window,
        emit_final=query.emit == "FINAL",
        original_group_by=group_exprs,
    )
    return AnalyzedQuery(from_clause, rewritten, where, None, aggregation=aggregation)
