"""Compile expressions into Python closures evaluated once per record (lower layer).

``compile_expression`` types the tree once, resolves functions, casts and coercions,
folds constant operator sub-trees, and returns ``fn(row) -> value``. Inside, every node
is a closure ``(row, scope) -> value`` where ``scope`` holds the values of the lambda
variables in view. A failure while evaluating raises EvaluationError naming the failing
sub-expression and its cause.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from engine.data.values import (
    parse_date_text,
    parse_time_text,
    parse_timestamp_text,
    timestamp_to_millis,
)
from engine.errors import EvaluationError, InternalError, KsqlError
from engine.expressions.cast import make_cast, make_coercion, make_text_literal_conversion
from engine.expressions.coercion import is_string_literal
from engine.expressions.operators import (
    arithmetic_impl,
    comparison_impl,
    comparison_key_type,
    negate_impl,
    to_timestamp,
)
from engine.expressions.typer import Typer, is_timestamp_pseudo_column
from engine.functions.registry import FunctionKind, ResolvedFunction
from engine.plan import types as T
from engine.plan.expr import (
    Arithmetic,
    Between,
    Case,
    Cast,
    ColumnRef,
    Comparison,
    CreateArray,
    CreateMap,
    CreateStruct,
    Dereference,
    Expr,
    FunctionCall,
    In,
    IntervalUnit,
    IsNull,
    Lambda,
    LambdaVariable,
    Like,
    Literal,
    Logical,
    Negate,
    Not,
    Subscript,
    format_sql,
    walk,
)
from engine.plan.types import BaseType, SqlType

Row = Mapping[str, Any]
Scope = Mapping[str, Any]
NodeFn = Callable[[Row, Scope], Any]
Converter = Callable[[Any], Any]

_EMPTY: dict[str, Any] = {}
_NON_CONSTANT = (ColumnRef, LambdaVariable, FunctionCall, Lambda)


def compile_expression(expr: Expr, columns: Mapping[str, SqlType]) -> Callable[[Row], Any]:
    """Compile ``expr`` over ``columns`` into ``fn(row) -> value``.

    Raises the typer's errors at compile time; the returned function raises
    EvaluationError when one record cannot be evaluated.
    """
    fn, _ = compile_typed(expr, columns)
    return fn


def compile_typed(
    expr: Expr, columns: Mapping[str, SqlType]
) -> tuple[Callable[[Row], Any], SqlType | None]:
    """Like ``compile_expression``, also returning the expression's type."""
    typer = Typer(columns)
    sql_type = typer.type_of(expr, {})
    node = _Compiler(typer).compile(expr)

    def evaluate(row: Row) -> Any:
        return node(row, _EMPTY)

    return evaluate, sql_type


def _guard(expr: Expr, fn: NodeFn) -> NodeFn:
    """Turn unexpected exceptions of ``fn`` into EvaluationErrors that name ``expr``."""
    return _naming(expr, fn, KsqlError)


def _failing(expr: Expr, fn: NodeFn) -> NodeFn:
    """``fn`` whose every failure is an EvaluationError naming ``expr``: ksqlDB's
    ``ksql.nested.error.set.null=false``, where a failing call or cast fails the whole
    expression (which its step sets to NULL) instead of being NULL itself."""
    return _naming(expr, fn, EvaluationError)


def _naming(expr: Expr, fn: NodeFn, passing: type[Exception]) -> NodeFn:
    """``fn`` with every exception but a ``passing`` one raised as an EvaluationError naming ``expr``."""

    def named(row: Row, scope: Scope) -> Any:
        try:
            return fn(row, scope)
        except passing:
            raise
        except Exception as exc:
            raise EvaluationError(
                f"Error evaluating {format_sql(expr)}: {type(exc).__name__}: {exc}"
            ) from exc

    return named


def _const(value: Any) -> NodeFn:
    return lambda row, scope: value


def _is_constant(expr: Expr) -> bool:
    return not any(isinstance(node, _NON_CONSTANT) for node in walk(expr))


def _then(fn: NodeFn, convert: Converter | None) -> NodeFn:
    if convert is None:
        return fn
    return lambda row, scope: convert(fn(row, scope))


LIKE_ENDS_WITH_ESCAPE = "LIKE pattern must not end with escape character"


def like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    """The regular expression of a LIKE pattern: ``%`` any run, ``_`` one character.

    A pattern whose last character is an unescaped ``escape`` fails each record it is
    evaluated for, as ksqlDB's LikeEvaluator does.
    """
    out: list[str] = []
    chars = iter(pattern)
    for c in chars:
        if escape is not None and c == escape:
            nxt = next(chars, None)
            if nxt is None:
                raise EvaluationError(LIKE_ENDS_WITH_ESCAPE)
            out.append(re.escape(nxt))
        elif c == "%":
            out.append(".*")
        elif c == "_":
            out.append(".")
        else:
            out.append(re.escape(c))
    return re.compile("".join(out), re.DOTALL)


@lru_cache(maxsize=256)
def cached_like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    """``like_regex`` with a cache, for patterns that vary per record.

    Defined with its own name so that closures pickle it by reference (Spark ships them).
    """
    return like_regex(pattern, escape)


class _Compiler:
    """Builds node closures from a tree the Typer has typed."""

    def __init__(self, typer: Typer) -> None:
        self.typer = typer

    def type_of(self, expr: Expr) -> SqlType | None:
        return self.typer.known(expr)

    def compile(self, expr: Expr) -> NodeFn:
        method = getattr(self, f"_{type(expr).__name__}", None)
        if method is None:
            raise InternalError(
                f"The evaluator does not know expression node {type(expr).__name__}; this is a bug."
            )
        fn: NodeFn = method(expr)
        if not isinstance(expr, Literal | ColumnRef | LambdaVariable):
            fn = _guard(expr, fn)
        if not isinstance(expr, Literal) and _is_constant(expr):
            try:
                value = fn(_EMPTY, _EMPTY)
            except KsqlError:
                return fn  # fails for every record: keep failing at run time, per record
            return _const(value)
        return fn

    def _converted(self, expr: Expr, target: SqlType | None) -> NodeFn:
        """``expr`` converted to ``target`` as a common-type member (see coercion.py)."""
        fn = self.compile(expr)
        source = self.type_of(expr)
        if target is None or source is None or source == target:
            return fn
        if is_string_literal(expr) and target.base is not BaseType.STRING:
            converted = _then(fn, make_text_literal_conversion(target))
        else:
            converted = _then(fn, make_coercion(source, target))
        return self._fold(expr, converted)

    def _fold(self, expr: Expr, fn: NodeFn) -> NodeFn:
        if _is_constant(expr):
            try:
                return _const(fn(_EMPTY, _EMPTY))
            except Exception:
                return _guard(expr, fn)
        return _guard(expr, fn)

    # ------------------------------------------------------------------ leaves

    def _Literal(self, expr: Literal) -> NodeFn:
        return _const(expr.value)

    def _ColumnRef(self, expr: ColumnRef) -> NodeFn:
        name = expr.name
        if name in self.typer.columns:
            return lambda row, scope: row.get(name)
        return lambda row, scope: scope[name]

    def _LambdaVariable(self, expr: LambdaVariable) -> NodeFn:
        name = expr.name
        return lambda row, scope: scope[name]

    def _IntervalUnit(self, expr: IntervalUnit) -> NodeFn:
        return _const(expr.unit)

    def _Lambda(self, expr: Lambda) -> NodeFn:
        raise InternalError(f"Lambda {format_sql(expr)} outside a function call; this is a bug.")

    # ------------------------------------------------------------------ access

    def _Dereference(self, expr: Dereference) -> NodeFn:
        base, name = self.compile(expr.base), expr.field

        def dereference(row: Row, scope: Scope) -> Any:
            value = base(row, scope)
            return None if value is None else value.get(name)

        return dereference

    def _Subscript(self, expr: Subscript) -> NodeFn:
        base = self.compile(expr.base)
        base_type = self.type_of(expr.base)
        if isinstance(base_type, T.Map):
            key = self._converted(expr.index, base_type.key)

            def map_get(row: Row, scope: Scope) -> Any:
                m, k = base(row, scope), key(row, scope)
                return None if m is None else m.get(k)

            return map_get
        index = self.compile(expr.index)

        def array_get(row: Row, scope: Scope) -> Any:
            items, i = base(row, scope), index(row, scope)
            if items is None or i is None:
                return None
            position = i - 1 if i >= 0 else len(items) + i
            return items[position] if 0 <= position < len(items) else None

        return array_get

    # ------------------------------------------------------------------ arithmetic

    def _Negate(self, expr: Negate) -> NodeFn:
        operand = self.compile(expr.operand)
        operand_type = self.type_of(expr.operand) or T.INTEGER
        impl = negate_impl(operand_type)

        def negate(row: Row, scope: Scope) -> Any:
            v = operand(row, scope)
            return None if v is None else impl(v)

        return negate

    def _Arithmetic(self, expr: Arithmetic) -> NodeFn:
        left, right = self.compile(expr.left), self.compile(expr.right)
        result = self.type_of(expr)
        assert result is not None
        impl = arithmetic_impl(expr.op, result)

        def arithmetic(row: Row, scope: Scope) -> Any:
            a = left(row, scope)
            b = right(row, scope)
            if a is None or b is None:
                if scope:
                    # Inside a lambda body ksqlDB's generated Java unboxes operands: a NULL
                    # fails the whole lambda function call (which then yields NULL).
                    raise _LambdaNull(format_sql(expr))
                return None
            return impl(a, b)

        return arithmetic

    # ------------------------------------------------------------------ predicates

    def _comparison_sides(self, left: Expr, right: Expr) -> tuple[NodeFn, NodeFn]:
        """Both sides converted to one comparable representation."""
        lt, rt = self.type_of(left), self.type_of(right)
        lf, rf = self.compile(left), self.compile(right)
        if is_timestamp_pseudo_column(left, lt) and rt == T.STRING:
            return lf, self._fold(right, _then(rf, _millis_of_text))
        if is_timestamp_pseudo_column(right, rt) and lt == T.STRING:
            return self._fold(left, _then(lf, _millis_of_text)), rf
        key = comparison_key_type(lt, rt)
        if key is not None:
            return (
                self._fold(left, _then(lf, _temporal_converter(lt, key))),
                self._fold(right, _then(rf, _temporal_converter(rt, key))),
            )
        if lt is not None and rt is not None and T.DOUBLE in (lt, rt) and lt != rt:
            return _then(lf, _to_float), _then(rf, _to_float)
        return lf, rf

    def _Comparison(self, expr: Comparison) -> NodeFn:
        left, right = self._comparison_sides(expr.left, expr.right)
        impl = comparison_impl(expr.op)
        # Unlike arithmetic, a comparison with NULL inside a lambda is just false in ksqlDB.
        return lambda row, scope: impl(left(row, scope), right(row, scope))

    def _Logical(self, expr: Logical) -> NodeFn:
        left, right = self.compile(expr.left), self.compile(expr.right)
        if expr.op == "AND":

            def logical_and(row: Row, scope: Scope) -> Any:
                a = left(row, scope)
                if a is False:
                    return False
                b = right(row, scope)
                if b is False:
                    return False
                return None if a is None or b is None else True

            return logical_and

        def logical_or(row: Row, scope: Scope) -> Any:
            a = left(row, scope)
            if a is True:
                return True
            b = right(row, scope)
            if b is True:
                return True
            return None if a is None or b is None else False

        return logical_or

    def _Not(self, expr: Not) -> NodeFn:
        operand = self.compile(expr.operand)

        def logical_not(row: Row, scope: Scope) -> Any:
            v = operand(row, scope)
            return None if v is None else not v

        return logical_not

    def _IsNull(self, expr: IsNull) -> NodeFn:
        operand = self.compile(expr.operand)
        if expr.negated:
            return lambda row, scope: operand(row, scope) is not None
        return lambda row, scope: operand(row, scope) is None

    def _In(self, expr: In) -> NodeFn:
        target = self.typer.common.get(id(expr))
        value = self._converted(expr.value, target)
        if target == T.DOUBLE:
            value = _then(value, _to_float)
        items = [self._converted(item, target) for item in expr.items]
        negated = expr.negated

        # As in ksqlDB, IN is two-valued: a NULL value or NULL items never match.
        def in_list(row: Row, scope: Scope) -> Any:
            v = value(row, scope)
            found = False
            if v is not None:
                for item in items:
                    x = item(row, scope)
                    if x is not None and x == v:
                        found = True
                        break
            return not found if negated else found

        return in_list

    def _Between(self, expr: Between) -> NodeFn:
        value_lo, low = self._comparison_sides(expr.value, expr.low)
        value_hi, high = self._comparison_sides(expr.value, expr.high)
        negated = expr.negated

        # As in ksqlDB, a NULL operand makes BETWEEN false (and NOT BETWEEN true).
        def between(row: Row, scope: Scope) -> Any:
            lo, hi = low(row, scope), high(row, scope)
            v1 = value_lo(row, scope)
            v2 = v1 if value_hi is value_lo else value_hi(row, scope)
            inside = (
                v1 is not None and lo is not None and hi is not None and lo <= v1 and v2 <= hi
            )
            return not inside if negated else inside

        return between

    def _Like(self, expr: Like) -> NodeFn:
        value = self.compile(expr.value)
        negated, escape = expr.negated, expr.escape
        if isinstance(expr.pattern, Literal):
            if expr.pattern.value is None:
                return _const(negated)
            try:
                regex = like_regex(expr.pattern.value, escape)
            except EvaluationError as exc:
                problem = exc

                def pattern_of(row: Row, scope: Scope) -> re.Pattern[str] | None:
                    raise EvaluationError(str(problem))
            else:
                pattern_of = lambda row, scope: regex  # noqa: E731
        else:
            pattern = self.compile(expr.pattern)

            def pattern_of(row: Row, scope: Scope) -> re.Pattern[str] | None:
                p = pattern(row, scope)
                return None if p is None else cached_like_regex(p, escape)

        def like(row: Row, scope: Scope) -> Any:
            v, regex = value(row, scope), pattern_of(row, scope)
            matched = v is not None and regex is not None and regex.fullmatch(v) is not None
            return not matched if negated else matched

        return like

    def _Case(self, expr: Case) -> NodeFn:
        result_type = self.type_of(expr)
        branches: list[tuple[NodeFn, NodeFn]] = []
        for when in expr.whens:
            if expr.operand is None:
                condition = self.compile(when.condition)
            else:
                left, right = self._comparison_sides(expr.operand, when.condition)
                equal = comparison_impl("=")
                condition = _equal_fn(left, right, equal)
            branches.append((condition, self._converted(when.result, result_type)))
        default = (
            _const(None) if expr.default is None else self._converted(expr.default, result_type)
        )

        def case(row: Row, scope: Scope) -> Any:
            for condition, result in branches:
                if condition(row, scope) is True:
                    return result(row, scope)
            return default(row, scope)

        return case

    def _Cast(self, expr: Cast) -> NodeFn:
        operand = self.compile(expr.operand)
        cast = make_cast(self.type_of(expr.operand), expr.type, expr.semantics, null_text=expr.null_text)
        if cast is None:
            return operand
        if not expr.error_null:
            return _failing(expr, lambda row, scope: cast(operand(row, scope)))

        def cast_or_null(row: Row, scope: Scope) -> Any:
            value = operand(row, scope)
            try:
                return cast(value)
            except Exception:  # noqa: BLE001 - ksqlDB's CAST yields NULL for bad input
                return None

        return cast_or_null

    # ------------------------------------------------------------------ constructors

    def _CreateArray(self, expr: CreateArray) -> NodeFn:
        array_type = self.type_of(expr)
        assert isinstance(array_type, T.Array)
        items = [self._converted(item, array_type.item) for item in expr.items]
        return lambda row, scope: [item(row, scope) for item in items]

    def _CreateMap(self, expr: CreateMap) -> NodeFn:
        map_type = self.type_of(expr)
        assert isinstance(map_type, T.Map)
        entries = [
            (self._converted(e.key, map_type.key), self._converted(e.value, map_type.value))
            for e in expr.entries
        ]
        return lambda row, scope: {k(row, scope): v(row, scope) for k, v in entries}

    def _CreateStruct(self, expr: CreateStruct) -> NodeFn:
        fields = [(f.name, self.compile(f.value)) for f in expr.fields]
        return lambda row, scope: {name: fn(row, scope) for name, fn in fields}

    # ------------------------------------------------------------------ functions

    def _FunctionCall(self, expr: FunctionCall) -> NodeFn:
        resolved: ResolvedFunction = self.typer.functions[id(expr)]
        if resolved.signature.kind is FunctionKind.AGGREGATE:
            raise InternalError(
                f"Aggregate call {format_sql(expr)} reached the scalar evaluator; aggregates "
                "must be planned as aggregation steps. This is a bug."
            )
        args: list[NodeFn] = []
        for i, arg in enumerate(expr.args):
            if isinstance(arg, Lambda):
                args.append(self._lambda(arg))
                continue
            fn = self.compile(arg)
            source, target = self.type_of(arg), resolved.param_types[i]
            if target is not None and source is not None and source != target:
                fn = _then(fn, make_coercion(source, target))
            args.append(fn)
        invoke = resolved.bound()  # a stateful function's own instance for this call site
        if not expr.error_null:
            return _failing(expr, lambda row, scope: invoke([a(row, scope) for a in args]))

        def call(row: Row, scope: Scope) -> Any:
            values = [a(row, scope) for a in args]
            try:
                return invoke(values)
            except Exception:  # noqa: BLE001
                # ksqlDB wraps every function call: a failing call yields NULL for that call
                # only, so e.g. one bad element of an ARRAY constructor is NULL, not the array.
                return None

        return call

    def _lambda(self, expr: Lambda) -> NodeFn:
        body = self.compile(expr.body)
        params = expr.params

        def make_callable(row: Row, scope: Scope) -> Callable[..., Any]:
            def call(*values: Any) -> Any:
                inner = dict(scope)
                inner.update(zip(params, values, strict=True))
                return body(row, inner)

            return call

        return make_callable


class _LambdaNull(Exception):
    """A NULL operand inside a lambda body, which fails the enclosing function call."""


def _equal_fn(left: NodeFn, right: NodeFn, equal: Callable[[Any, Any], Any]) -> NodeFn:
    return lambda row, scope: equal(left(row, scope), right(row, scope))


def _to_float(value: Any) -> Any:
    return None if value is None else float(value)


def _millis_of_text(value: Any) -> Any:
    return None if value is None else timestamp_to_millis(parse_timestamp_text(value))


def _temporal_converter(source: SqlType | None, key: SqlType) -> Converter | None:
    if source is None or source == key:
        return None
    if source.base is BaseType.STRING:
        if key.base is BaseType.TIMESTAMP:
            return lambda v: None if v is None else parse_timestamp_text(v)
        if key.base is BaseType.DATE:
            return lambda v: None if v is None else parse_date_text(v)
        return lambda v: None if v is None else parse_time_text(v)
    if source.base is BaseType.DATE and key.base is BaseType.TIMESTAMP:
        return lambda v: None if v is None else to_timestamp(v)
    return None
