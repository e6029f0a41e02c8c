"""How a pull query against a table finds its rows: key lookup, range scan or table scan.

    access = where_access(where, source, properties)    # WhereAccess, or PullQueryError
    access.kind                                           # "KEY_LOOKUP" / "RANGE_SCAN" / "TABLE_SCAN"
    access.keys                                           # KEY_LOOKUP: the key tuples, in WHERE order

The rules are ksqlDB's (``QueryFilterNode``, ``PullQueryRewriter``, ``LogicRewriter``,
``PullPhysicalPlanBuilder``), with its messages:

1. The WHERE is rewritten: ``BETWEEN`` as ``>=`` AND ``<=``, ``IN`` as ``=`` comparisons joined
   by OR, NOT pushed down to the comparisons (De Morgan), then the disjunctive normal form; each
   disjunct (a conjunction) is judged on its own.
2. A disjunct may hold only AND, comparisons and LIKE. A comparison has a column on one side and
   an expression without columns on the other; a key column is compared with ``=`` or a range
   (``<>`` and ``IS [NOT] DISTINCT FROM`` need a table scan), once; every column of a
   multi-column key appears; WINDOWSTART / WINDOWEND only on a windowed table. What breaks a
   rule needs a table scan: with ``ksql.query.pull.table.scan.enabled`` false it is refused
   with the rule's message (a few are refused either way).
3. Per disjunct the key constraint: every key column ``=`` a value (a lookup of that key), one
   STRING or BYTES key column compared by a range (a range scan), else none.
4. All disjuncts lookups: a key lookup; one disjunct with a range: a range scan (a table scan
   on a windowed table or with ``ksql.query.pull.range.scan.enabled`` false); else a table scan,
   refused when table scans are disabled.

The access kind decides what is refused; the rows are the same either way, since the whole
WHERE is evaluated on each row found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import AnalysisError, KsqlError
from engine.metastore.model import DataSource
from engine.plan import expr as X
from engine.plan import types as T
from engine.plan.schema import Column, Namespace

TABLE_SCAN_ENABLED = "ksql.query.pull.table.scan.enabled"
RANGE_SCAN_ENABLED = "ksql.query.pull.range.scan.enabled"
SYNTAX_HELP = " See https://cnfl.io/queries for more info.\nAdd EMIT CHANGES if you intended to issue a push query."
TABLE_SCAN_NEEDED = (  # ksqlDB's words, written out whole (the errors reference and its parity scan read them)
    "Query requires table scan to be enabled. Table scans can be enabled by setting ksql.query.pull.table.scan.enabled=true"
)
WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")
# ksqlDB's ComparisonExpression.Type names, as its messages show them.
OPERATOR_NAMES = {
    "=": "EQUAL", "<>": "NOT_EQUAL", "<": "LESS_THAN", "<=": "LESS_THAN_OR_EQUAL", ">": "GREATER_THAN",
    ">=": "GREATER_THAN_OR_EQUAL", "IS DISTINCT FROM": "IS_DISTINCT_FROM",
    "IS NOT DISTINCT FROM": "IS_NOT_DISTINCT_FROM",
}
WINDOW_BOUND_OPERATORS = ("=", ">", ">=", "<", "<=")
RANGE_OPERATORS = frozenset({">", ">=", "<", "<="})
NOT_KEY_OPERATORS = frozenset({"<>", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"})
# The Java class ksqlDB names for a LIKE pattern that is not a string.
_JAVA_NODE = {
    X.FunctionCall: "FunctionCall", X.ColumnRef: "UnqualifiedColumnReferenceExp", X.Arithmetic: "ArithmeticBinaryExpression",
    X.Cast: "Cast", X.Case: "SearchedCaseExpression", X.Dereference: "DereferenceExpression",
    X.Subscript: "SubscriptExpression",
}


class PullQueryError(AnalysisError):
    """A pull query that is refused (ksqlDB's message) or cannot be answered."""


@dataclass(frozen=True, slots=True)
class WhereAccess:
    """How the rows are found, and for a key lookup the keys (one tuple per disjunct)."""

    kind: str
    keys: tuple[tuple[Any, ...], ...] | None = None
    # RANGE_SCAN: the key store's range, ``(">=" or "<=", bound)``: ksqlDB reads [bound, end) for
    # ``>``/``>=`` and (start, bound] for ``<``/``<=``, taking the operator as written whichever
    # side the key is on (``'m' >= ID`` reads from 'm' on), then filters by the WHERE.
    range: tuple[str, Any] | None = None


def refusal(message: str, *, windowed: bool) -> PullQueryError:
    """ksqlDB's ``invalidWhereClauseException``: the reason, then what a pull query's WHERE needs."""
    extra = (
        "\n - (optionally) limits the time bounds of the windowed table."
        "\n\t Bounds on [`WINDOWSTART`, `WINDOWEND`] are supported"
        "\n\t Supported operators are [" + ", ".join(OPERATOR_NAMES[o] for o in WINDOW_BOUND_OPERATORS) + "]"
    ) if windowed else ""
    return PullQueryError(
        f"{message}. {SYNTAX_HELP}"
        "\nPull queries require a WHERE clause that:"
        "\n - includes a key equality expression, e.g. `SELECT * FROM X WHERE <key-column> = Y;`."
        "\n - in the case of a multi-column key, is a conjunction of equality expressions that cover all key columns."
        "\n - to support range expressions, e.g.,  SELECT * FROM X WHERE <key-column> < Y;`, range scans need to be enabled by setting ksql.query.pull.range.scan.enabled=true"
        f"{extra}"
        "\nIf more flexible queries are needed, , table scans can be enabled by setting ksql.query.pull.table.scan.enabled=true."
    )


def flag(properties: Mapping[str, Any], name: str, default: bool) -> bool:
    value = properties.get(name, default)
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


# ---------------------------------------------------------------------------- rewriting


def rewrite(where: X.Expr) -> X.Expr:
    """ksqlDB's ``PullQueryRewriter``: BETWEEN and IN rewritten, then the DNF."""
    return dnf(push_not(_expand(where)))


def _expand(node: X.Expr) -> X.Expr:
    """BETWEEN as ``>=`` AND ``<=``; IN as ``=`` comparisons joined by OR (NOT kept around them)."""
    match node:
        case X.Logical(op=op, left=left, right=right):
            return X.Logical(op, _expand(left), _expand(right))
        case X.Not(operand=operand):
            return X.Not(_expand(operand))
        case X.Between(value=value, low=low, high=high, negated=negated):
            both = X.Logical("AND", X.Comparison(">=", value, low), X.Comparison("<=", value, high))
            return X.Not(both) if negated else both
        case X.In(value=value, items=items, negated=negated):
            current: X.Expr | None = None
            for item in reversed(items):
                equal = X.Comparison("=", value, item)
                current = equal if current is None else X.Logical("OR", equal, current)
            assert current is not None, "an IN predicate without values is a parser bug"
            return X.Not(current) if negated else current
        case X.Like(negated=True):
            return X.Not(X.Like(node.value, node.pattern, node.escape, False))
    return node


def push_not(node: X.Expr, negated: bool = False) -> X.Expr:
    """ksqlDB's ``NotPropagator``: NOT moved down to the comparisons, columns and booleans."""
    match node:
        case X.Logical(op=op, left=left, right=right):
            flipped = ({"AND": "OR", "OR": "AND"}[op.upper()]) if negated else op.upper()
            return X.Logical(flipped, push_not(left, negated), push_not(right, negated))
        case X.Not(operand=operand):
            return push_not(operand, not negated)
        case X.Comparison() | X.ColumnRef():
            return X.Not(node) if negated else node
        case X.Literal(value=bool()):
            return X.Not(node) if negated else node
    return node  # as ksqlDB: any other term keeps no NOT


def dnf(node: X.Expr) -> X.Expr:
    """ksqlDB's distribution of AND over OR (``LogicRewriter.rewriteDNF``)."""
    if not isinstance(node, X.Logical):
        return node
    if not isinstance(node.left, X.Logical) and not isinstance(node.right, X.Logical):
        return node
    left, right = dnf(node.left), dnf(node.right)
    if node.op.upper() == "AND":
        if isinstance(left, X.Logical) and left.op.upper() == "OR":
            return X.Logical("OR", dnf(X.Logical("AND", left.left, right)), dnf(X.Logical("AND", left.right, right)))
        if isinstance(right, X.Logical) and right.op.upper() == "OR":
            return X.Logical("OR", dnf(X.Logical("AND", left, right.left)), dnf(X.Logical("AND", left, right.right)))
    return X.Logical(node.op.upper(), left, right)


def disjuncts(node: X.Expr) -> list[X.Expr]:
    if isinstance(node, X.Logical) and node.op.upper() == "OR":
        return disjuncts(node.left) + disjuncts(node.right)
    return [node]


# ---------------------------------------------------------------------------- judging


def _column_side(comparison: X.Comparison) -> tuple[X.ColumnRef | None, X.Expr]:
    if isinstance(comparison.right, X.ColumnRef):
        return comparison.right, comparison.left
    if isinstance(comparison.left, X.ColumnRef):
        return comparison.left, comparison.right
    return None, comparison.right


def _has_column(node: X.Expr) -> bool:
    return any(isinstance(n, X.ColumnRef) for n in X.walk(node))


def _key_text(keys: Sequence[Column]) -> str:
    return "[" + ", ".join(str(c) for c in keys) + "]"


class _Disjunct:
    """ksqlDB's ``Validator`` over one disjunct."""

    def __init__(self, source: DataSource, scans: bool) -> None:
        self.source = source
        self.scans = scans
        self.windowed = source.window_info is not None
        self.keys = list(source.schema.key)
        self.columns = {c.name: c for c in source.schema.columns}
        self.seen: list[int] = []
        self.keyed = False
        self.needs_scan = False

    def scan_or_refuse(self, message: str, *, windowed: bool) -> None:
        if not self.scans:
            raise refusal(message, windowed=windowed)
        self.needs_scan = True

    def find(self, name: str) -> Column | None:
        if name in self.columns:
            return self.columns[name]
        if name in ("ROWTIME", "ROWPARTITION", "ROWOFFSET"):
            return Column(name, T.BIGINT if name != "ROWPARTITION" else T.INTEGER)
        return None

    def visit(self, node: X.Expr) -> None:
        if not isinstance(node, X.Logical | X.Comparison | X.Like):
            raise refusal(f"Unsupported expression in WHERE clause: {X.format_sql(node)}", windowed=False)
        if isinstance(node, X.Logical):
            if node.op.upper() != "AND":
                self.scan_or_refuse(f"Only AND expressions are supported: {X.format_sql(node)}", windowed=False)
            self.visit(node.left)
            self.visit(node.right)
        elif isinstance(node, X.Comparison):
            self.comparison(node)
        else:
            self.like(node)

    def comparison(self, node: X.Comparison) -> None:
        column, other = _column_side(node)
        if column is None:
            self.scan_or_refuse("A comparison must directly reference a key column", windowed=self.windowed)
            return
        if _has_column(other):
            self.scan_or_refuse("A comparison must be between a key column and a resolvable expression",
                                windowed=self.windowed)
            return
        if column.name in WINDOW_BOUNDS:
            if node.op not in WINDOW_BOUND_OPERATORS:
                raise refusal(f"Unsupported `{column.name}` bounds: {OPERATOR_NAMES[node.op]}", windowed=True)
            if not self.windowed:
                raise refusal("Cannot use WINDOWSTART/WINDOWEND on non-windowed source", windowed=False)
            return
        found = self.find(column.name)
        if found is None:
            raise refusal(f"Bound on non-existent column `{column.name}`", windowed=self.windowed)
        if found.namespace is not Namespace.KEY:
            return
        if node.op in NOT_KEY_OPERATORS:
            self.scan_or_refuse(f"Bound on key columns '{_key_text(self.keys)}' must currently be '='",
                                windowed=self.windowed)
        index = [c.name for c in self.keys].index(found.name)
        if index in self.seen and not self.scans:
            raise refusal("A comparison condition on the key column cannot be combined with other comparisons "
                          "such as an IN predicate", windowed=self.windowed)
        if index not in self.seen:
            self.seen.append(index)
        self.keyed = True

    def like(self, node: X.Like) -> None:
        if not isinstance(node.value, X.ColumnRef):
            self.scan_or_refuse("Like condition must be between strings", windowed=self.windowed)
            return
        found = self.find(node.value.name)
        if found is None:
            raise refusal(f"Like condition on non-existent column `{node.value.name}`", windowed=self.windowed)
        if getattr(found.type, "base", None) is not T.BaseType.STRING:
            raise refusal("The column type for Like condition must be VARCHAR. The column type is "
                          f"{found.type.base.name}", windowed=self.windowed)
        pattern = node.pattern
        if not (isinstance(pattern, X.Literal) and (pattern.value is None or isinstance(pattern.value, str))):
            java = _JAVA_NODE.get(type(pattern), type(pattern).__name__)
            raise refusal(f"Like condition on non-string pattern io.confluent.ksql.execution.expression.tree.{java}",
                          windowed=self.windowed)


def _key_value(other: X.Expr, column: Column, comparison: X.Comparison) -> Any:
    """ksqlDB's ``resolveKey``: the compared value as the key column's type."""
    from engine.expressions.evaluator import compile_expression

    if isinstance(other, X.Literal):
        value = other.value
    else:
        try:
            value = compile_expression(X.Cast(other, column.type), {})({})
        except KsqlError as exc:
            raise PullQueryError(str(exc)) from None
    if value is None:
        raise PullQueryError(f"Primary key columns can not be NULL: {X.format_sql(comparison)}")
    return _coerce(value, column)


def _coerce(value: Any, column: Column) -> Any:
    """ksqlDB's strict coercion of a key value (widening only)."""
    import decimal

    base = getattr(column.type, "base", None)
    ok = False
    if base is T.BaseType.STRING:
        ok = isinstance(value, str)
    elif base in (T.BaseType.INTEGER, T.BaseType.BIGINT):
        limit = 2**31 if base is T.BaseType.INTEGER else 2**63
        ok = isinstance(value, int) and not isinstance(value, bool) and -limit <= value < limit
    elif base is T.BaseType.DOUBLE:
        ok = isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool)
        value = float(value) if ok else value
    elif base is T.BaseType.DECIMAL:
        ok = isinstance(value, int | decimal.Decimal) and not isinstance(value, bool)
        value = decimal.Decimal(value) if ok else value
    elif base is T.BaseType.BOOLEAN:
        ok = isinstance(value, bool)
    else:
        ok = True  # BYTES, temporal and structured keys: compared as they are
    if not ok:
        shown = "true" if value is True else "false" if value is False else value
        raise PullQueryError(f"'{shown}' can not be converted to the type of the key column: "
                             f"{column.name} {column.type} KEY")
    return value


def _constraint(disjunct: X.Expr, source: DataSource) -> tuple[str, tuple[Any, ...]] | None:
    """ksqlDB's ``KeyValueExtractor``: ("=", key) or (range op, key), None for no key constraint."""
    keys = list(source.schema.key)
    names = [c.name for c in keys]
    contents: list[Any] = [None] * len(keys)
    operators: dict[int, str] = {}
    for node in X.walk(disjunct):
        if not isinstance(node, X.Comparison):
            continue
        column, other = _column_side(node)
        if column is None or column.name not in names:
            continue
        index = names.index(column.name)
        value = _key_value(other, keys[index], node)
        if operators.get(index) == "=":
            continue
        if node.op == "=" or index not in operators:
            contents[index] = value
            operators[index] = node.op  # as ksqlDB keeps it: not turned round for a key on the right
    if not operators:
        return None
    if len(operators) > 1:
        return ("=", tuple(contents)) if all(op == "=" for op in operators.values()) else None
    op = operators[0] if 0 in operators else next(iter(operators.values()))
    if op == "=":
        return "=", tuple(contents)
    if op in RANGE_OPERATORS and getattr(keys[0].type, "base", None) in (T.BaseType.STRING, T.BaseType.BYTES):
        return op, tuple(contents)
    return None


def _window_millis(other: X.Expr) -> int:
    """ksqlDB's ``asInstant``: a window bound as epoch millis (a timestamp text was read already)."""
    from engine.expressions.evaluator import compile_expression

    if isinstance(other, X.Literal) and isinstance(other.value, str):
        return _timestamp_millis(other.value)
    if isinstance(other, X.Literal):
        value = other.value
    else:
        try:
            value = compile_expression(other, {})({})
        except KsqlError:
            value = None
    if not isinstance(value, int) or isinstance(value, bool):
        raise refusal("Window bounds must resolve to an INT, BIGINT, or STRING containing a datetime",
                      windowed=True)
    return value


def _timestamp_millis(text: str) -> int:
    """A (partial) timestamp text as epoch millis, refused in ksqlDB's words (its
    ``PartialStringToTimestampParser``) when it is none."""
    import datetime as dt

    from engine.data.values import parse_timestamp_text
    from engine.expressions.typer import TIMESTAMP_TEXT_HELP

    try:
        value = parse_timestamp_text(text)
    except ValueError as exc:
        raise PullQueryError(f"Failed to parse timestamp '{text}': {exc}{TIMESTAMP_TEXT_HELP}") from None
    return (value - dt.datetime(1970, 1, 1)) // dt.timedelta(milliseconds=1)


def check_timestamp_texts(where: X.Expr) -> None:
    """ksqlDB's ``StatementRewriteForMagicPseudoTimestamp``, the first step of its pull-query
    rewrite: a text compared with ROWTIME, WINDOWSTART or WINDOWEND must be a timestamp."""
    pseudo = ("ROWTIME", *WINDOW_BOUNDS)

    def is_pseudo(node: X.Expr) -> bool:
        return isinstance(node, X.ColumnRef) and node.name in pseudo

    for node in X.walk(where):
        sides: tuple[X.Expr, ...] = ()
        if isinstance(node, X.Comparison):
            sides = (node.right,) if is_pseudo(node.left) else (node.left,) if is_pseudo(node.right) else ()
        elif isinstance(node, X.Between) and is_pseudo(node.value):
            sides = (node.low, node.high)
        for side in sides:
            if isinstance(side, X.Literal) and isinstance(side.value, str):
                _timestamp_millis(side.value)


def check_window_bounds(disjunct: X.Expr) -> None:
    """ksqlDB's ``WindowBoundsExtractor`` over one disjunct of a windowed table's WHERE: per
    bound column at most one lower, one upper and one equality bound, an equality alone, and
    each bound a number or a timestamp text."""
    seen: dict[str, set[str]] = {name: set() for name in WINDOW_BOUNDS}
    for node in X.walk(disjunct):
        if not isinstance(node, X.Comparison):
            continue
        if isinstance(node.right, X.ColumnRef):
            column, other, inverted = node.right, node.left, True
        elif isinstance(node.left, X.ColumnRef):
            column, other, inverted = node.left, node.right, False
        else:
            continue
        if column.name not in WINDOW_BOUNDS:
            continue
        bounds = seen[column.name]
        added = False
        if node.op == "=":
            _window_millis(other)
            added = "=" not in bounds
            bounds.add("=")
        simple = node.op
        if node.op in RANGE_OPERATORS:
            simple = "<" if (node.op in ("<", "<=")) != inverted else ">"
            _window_millis(other)
            added = simple not in bounds
            bounds.add(simple)
        if "=" in bounds and len(bounds) > 1:
            shown = node
            if isinstance(other, X.Literal) and isinstance(other.value, str):
                millis = X.Literal(_timestamp_millis(other.value), T.BIGINT)
                shown = X.Comparison(node.op, millis, column) if inverted else X.Comparison(node.op, column, millis)
            raise refusal(f"`{X.format_sql(shown)}` cannot be combined with other `{column.name}` bounds",
                          windowed=True)
        if not added:
            raise refusal(f"Duplicate `{column.name}` bounds on: {OPERATOR_NAMES[simple]}", windowed=True)


def where_access(where: X.Expr | None, source: DataSource, properties: Mapping[str, Any]) -> WhereAccess:
    """How ksqlDB answers a pull query with this WHERE against the table ``source``; raises
    ``PullQueryError`` with ksqlDB's message where it refuses it."""
    scans = flag(properties, TABLE_SCAN_ENABLED, True)
    windowed = source.window_info is not None
    if where is None:
        if not scans:
            raise refusal("Missing WHERE clause", windowed=windowed)
        return WhereAccess("TABLE_SCAN")
    check_timestamp_texts(where)
    parts = disjuncts(rewrite(where))
    needs_scan = False
    for part in parts:
        judged = _Disjunct(source, scans)
        judged.visit(part)
        if judged.needs_scan:
            needs_scan = True
            break
        if not judged.keyed:
            if scans:
                needs_scan = True
                break
            raise refusal(f"WHERE clause missing key column for disjunct: {X.format_sql(part)}", windowed=windowed)
        if judged.seen and len(judged.seen) != len(judged.keys):
            if scans:
                needs_scan = True
                break
            specified = ", ".join(f"`{judged.keys[i].name}`" for i in judged.seen)
            raise refusal(f"Multi-column sources must specify every key in the WHERE clause. Specified: "
                          f"[{specified}] Expected: {_key_text(judged.keys)}", windowed=windowed)
    kind = "TABLE_SCAN"
    keys: tuple[tuple[Any, ...], ...] | None = None
    key_range: tuple[str, Any] | None = None
    if not needs_scan:
        constraints = []
        for part in parts:  # as ksqlDB extracts them: the key, then the window bounds, per disjunct
            constraints.append(_constraint(part, source))
            if windowed:
                check_window_bounds(part)
        if all(c is not None and c[0] == "=" for c in constraints):
            kind, keys = "KEY_LOOKUP", tuple(c[1] for c in constraints if c is not None)
        elif len(constraints) == 1 and constraints[0] is not None:
            if flag(properties, RANGE_SCAN_ENABLED, True) and not windowed:
                op, (bound,) = constraints[0]
                kind, key_range = "RANGE_SCAN", (">=" if op in (">", ">=") else "<=", bound)
    if kind == "TABLE_SCAN" and not scans:
        raise PullQueryError(TABLE_SCAN_NEEDED + "\nAdd EMIT CHANGES if you intended to issue a push query.")
    return WhereAccess(kind, keys, key_range)


def check_star_alone(query: Any, kind: str) -> None:
    """ksqlDB's ``QueryProjectNode``: ``*`` only as the whole SELECT list of a ``kind`` (Pull,
    Scalable push) query."""
    from engine.parser import ast

    items = list(query.select)
    if len(items) > 1 and any(isinstance(item, ast.AllColumns) for item in items):
        raise PullQueryError(f"{kind} queries only support wildcards in the projects if they are the only expression")


def check_scalable_push(query: Any, source: DataSource, where: X.Expr | None) -> None:
    """What ksqlDB refuses in a scalable push query's WHERE and SELECT (its logical plan is a
    pull query's, with table scans enabled: ``PushQueryConfigPlannerOptions``)."""
    where_access(where, source, {TABLE_SCAN_ENABLED: True})
    check_star_alone(query, "Scalable push")
