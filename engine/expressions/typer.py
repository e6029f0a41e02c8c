"""Type inference and type checking of expressions (ksqlDB's ExpressionTypeManager).

``infer_type`` gives the SQL type of an expression over a set of typed columns. The
``Typer`` behind it also remembers, per node, the facts the evaluator needs (resolved
functions, common types, lambda parameter types) so that compiling never re-derives them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.data.values import parse_timestamp_text
from engine.errors import AnalysisError, InternalError, TypeCheckError, UnknownFunctionError
from engine.expressions.cast import check_cast
from engine.expressions.coercion import common_type
from engine.expressions.operators import (
    COMPARISON_NAMES,
    arithmetic_result_type,
    comparable,
)
from engine.functions import REGISTRY
from engine.functions.registry import LambdaType, ResolvedFunction
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
)
from engine.plan.types import BaseType, SqlType

# BIGINT pseudo columns holding epoch millis: ksqlDB compares them with timestamp strings.
TIMESTAMP_PSEUDO_COLUMNS = frozenset({"ROWTIME", "WINDOWSTART", "WINDOWEND"})


def infer_type(
    expr: Expr,
    columns: Mapping[str, SqlType],
    *,
    lambda_vars: Mapping[str, SqlType] | None = None,
) -> SqlType | None:
    """The SQL type of ``expr``; None only for a bare NULL literal.

    Raises TypeCheckError for operands that do not fit their operator, UnknownFunctionError
    for unknown functions and AnalysisError for unknown columns.
    """
    return Typer(columns).type_of(expr, dict(lambda_vars or {}))


def describe(expr: Expr, sql_type: SqlType | None) -> str:
    """``expr (TYPE)`` as ksqlDB's messages show an operand."""
    return f"{format_sql(expr)} ({'NULL' if sql_type is None else sql_type})"


def is_timestamp_pseudo_column(expr: Expr, sql_type: SqlType | None) -> bool:
    """Whether ``expr`` is ROWTIME/WINDOWSTART/WINDOWEND held as BIGINT epoch millis."""
    return (
        isinstance(expr, ColumnRef)
        and expr.name.upper() in TIMESTAMP_PSEUDO_COLUMNS
        and sql_type == T.BIGINT
    )


@dataclass
class Typer:
    """Types expression trees over ``columns`` and records per-node facts by node identity."""

    columns: Mapping[str, SqlType]
    types: dict[int, SqlType | None] = field(default_factory=dict)
    functions: dict[int, ResolvedFunction] = field(default_factory=dict)
    lambda_params: dict[int, tuple[SqlType, ...]] = field(default_factory=dict)
    common: dict[int, Any] = field(default_factory=dict)
    # Keeps typed nodes alive so their ids stay unique while this Typer is in use.
    _nodes: list[Expr] = field(default_factory=list)

    def type_of(self, expr: Expr, scope: dict[str, SqlType]) -> SqlType | None:
        """Type ``expr`` with lambda variables ``scope`` in view; record it."""
        result = self._visit(expr, scope)
        self.types[id(expr)] = result
        self._nodes.append(expr)
        return result

    def known(self, expr: Expr) -> SqlType | None:
        """The recorded type of a node typed before."""
        try:
            return self.types[id(expr)]
        except KeyError:
            raise InternalError(f"Expression {format_sql(expr)} was not typed; this is a bug.") from None

    # ------------------------------------------------------------------ nodes

    def _visit(self, expr: Expr, scope: dict[str, SqlType]) -> SqlType | None:
        method = getattr(self, f"_{type(expr).__name__}", None)
        if method is None:
            raise InternalError(
                f"The typer does not know expression node {type(expr).__name__}; this is a bug."
            )
        return method(expr, scope)  # type: ignore[no-any-return]

    def _Literal(self, expr: Literal, scope: dict[str, SqlType]) -> SqlType | None:
        return None if expr.value is None else expr.type

    def _ColumnRef(self, expr: ColumnRef, scope: dict[str, SqlType]) -> SqlType | None:
        if expr.source is not None:
            raise InternalError(
                f"Column reference {format_sql(expr)} is still qualified; the analyser must "
                "resolve qualified columns before typing. This is a bug."
            )
        if expr.name in self.columns:
            return self.columns[expr.name]
        if expr.name in scope:
            return scope[expr.name]
        raise AnalysisError(f"Column '{expr.name}' cannot be resolved.")

    def _LambdaVariable(self, expr: LambdaVariable, scope: dict[str, SqlType]) -> SqlType | None:
        if expr.name in scope:
            return scope[expr.name]
        raise AnalysisError(f"Lambda variable '{expr.name}' is not defined by an enclosing lambda.")

    def _IntervalUnit(self, expr: IntervalUnit, scope: dict[str, SqlType]) -> SqlType | None:
        return T.STRING

    def _Lambda(self, expr: Lambda, scope: dict[str, SqlType]) -> SqlType | None:
        raise TypeCheckError(
            f"Lambda {format_sql(expr)} can only be used as an argument of a function that "
            "takes a lambda."
        )

    def _Dereference(self, expr: Dereference, scope: dict[str, SqlType]) -> SqlType | None:
        base = self.type_of(expr.base, scope)
        if not isinstance(base, T.Struct):
            raise TypeCheckError(f"Expected STRUCT type, got: {base}")
        found = base.field(expr.field)
        if found is None:
            raise TypeCheckError(
                f"Could not find field '{expr.field}' in '{format_sql(expr.base)}'. "
                f"Its fields are {', '.join(f.name for f in base.fields) or 'none'}."
            )
        return found.type

    def _Subscript(self, expr: Subscript, scope: dict[str, SqlType]) -> SqlType | None:
        base = self.type_of(expr.base, scope)
        index = self.type_of(expr.index, scope)
        if isinstance(base, T.Array):
            if index is not None and index.base not in (BaseType.INTEGER, BaseType.BIGINT):
                raise TypeCheckError(
                    f"Array index {describe(expr.index, index)} must be an INTEGER."
                )
            return base.item
        if isinstance(base, T.Map):
            if index is not None and not T.can_implicitly_cast(index, base.key):
                raise TypeCheckError(
                    f"Map key {describe(expr.index, index)} does not match the key type "
                    f"{base.key} of {format_sql(expr.base)}."
                )
            return base.value
        hint = (
            f" Use the dereference operator for STRUCTS: {format_sql(expr.base)}->{format_sql(expr.index)}"
            if isinstance(base, T.Struct)
            else ""
        )
        raise TypeCheckError(f"Subscript expression ({format_sql(expr)}) do not apply to {base}.{hint}")

    def _Negate(self, expr: Negate, scope: dict[str, SqlType]) -> SqlType | None:
        operand = self.type_of(expr.operand, scope)
        if operand is not None and not operand.is_numeric:
            raise TypeCheckError(
                f"Error processing expression: {format_sql(expr)}. "
                f"Unsupported arithmetic type for unary minus: {operand}."
            )
        return operand if operand is not None else T.INTEGER

    def _Arithmetic(self, expr: Arithmetic, scope: dict[str, SqlType]) -> SqlType | None:
        left = self.type_of(expr.left, scope)
        right = self.type_of(expr.right, scope)
        result = arithmetic_result_type(expr.op, left, right)
        if result is None:
            names = " ".join("NULL" if t is None else str(t.base.value) for t in (left, right))
            raise TypeCheckError(
                f"Error processing expression: {format_sql(expr)}. "
                f"Unsupported arithmetic types. {names}",
                logged="Error processing expression.",
            )
        return result

    def _Comparison(self, expr: Comparison, scope: dict[str, SqlType]) -> SqlType | None:
        left = self.type_of(expr.left, scope)
        right = self.type_of(expr.right, scope)
        if _is_null_literal(expr.left) or _is_null_literal(expr.right):
            lt, rt = (str(t.base.value) if t is not None else "NULL" for t in (left, right))
            raise TypeCheckError(
                f"Comparison with NULL not supported: {lt} {expr.op} {rt}\n"
                "Use 'IS NULL' or 'IS NOT NULL' instead."
            )
        self._check_comparable(expr.op, expr.left, left, expr.right, right)
        return T.BOOLEAN

    def _check_comparable(
        self, op: str, left: Expr, lt: SqlType | None, right: Expr, rt: SqlType | None
    ) -> None:
        if comparable(op, lt, rt):
            return
        # ksqlDB compares ROWTIME/WINDOWSTART/WINDOWEND with timestamp strings.
        if (is_timestamp_pseudo_column(left, lt) and rt == T.STRING) or (
            is_timestamp_pseudo_column(right, rt) and lt == T.STRING
        ):
            text = right if rt == T.STRING else left
            if isinstance(text, Literal) and isinstance(text.value, str):
                check_timestamp_literal(text.value)
            return
        name = COMPARISON_NAMES.get(op, op)
        raise TypeCheckError(
            f"Cannot compare {describe(left, lt)} to {describe(right, rt)} with {name}.",
            logged=f"Cannot compare {lt} to {rt} with {name}.",
        )

    def _boolean_operand(self, owner: Expr, operand: Expr, scope: dict[str, SqlType]) -> None:
        t = self.type_of(operand, scope)
        if t is not None and t != T.BOOLEAN:
            raise TypeCheckError(
                f"Operand {describe(operand, t)} of {format_sql(owner)} must be a BOOLEAN."
            )

    def _Logical(self, expr: Logical, scope: dict[str, SqlType]) -> SqlType | None:
        if expr.op not in ("AND", "OR"):
            raise InternalError(f"Unknown logical operator '{expr.op}'; expected AND or OR.")
        self._boolean_operand(expr, expr.left, scope)
        self._boolean_operand(expr, expr.right, scope)
        return T.BOOLEAN

    def _Not(self, expr: Not, scope: dict[str, SqlType]) -> SqlType | None:
        self._boolean_operand(expr, expr.operand, scope)
        return T.BOOLEAN

    def _IsNull(self, expr: IsNull, scope: dict[str, SqlType]) -> SqlType | None:
        self.type_of(expr.operand, scope)
        return T.BOOLEAN

    def _In(self, expr: In, scope: dict[str, SqlType]) -> SqlType | None:
        typed = [(e, self.type_of(e, scope)) for e in (expr.value, *expr.items)]
        target = common_type(typed)
        self.common[id(expr)] = target
        return T.BOOLEAN

    def _Between(self, expr: Between, scope: dict[str, SqlType]) -> SqlType | None:
        vt = self.type_of(expr.value, scope)
        for bound, op in ((expr.low, ">="), (expr.high, "<=")):
            bt = self.type_of(bound, scope)
            self._check_comparable(op, expr.value, vt, bound, bt)
        return T.BOOLEAN

    def _Like(self, expr: Like, scope: dict[str, SqlType]) -> SqlType | None:
        for operand in (expr.value, expr.pattern):
            t = self.type_of(operand, scope)
            if t is not None and t != T.STRING:
                raise TypeCheckError(
                    f"LIKE operand {describe(operand, t)} must be a STRING."
                )
        if expr.escape is not None and len(expr.escape) != 1:
            raise TypeCheckError(
                f"LIKE escape '{expr.escape}' must be exactly one character."
            )
        return T.BOOLEAN

    def _WhenClause(self, expr: Any, scope: dict[str, SqlType]) -> SqlType | None:
        raise InternalError("A WHEN clause is typed by its CASE; this is a bug.")

    def _Case(self, expr: Case, scope: dict[str, SqlType]) -> SqlType | None:
        if expr.operand is None:
            return self._searched_case(expr, scope)
        operand_type = None if expr.operand is None else self.type_of(expr.operand, scope)
        for when in expr.whens:
            ct = self.type_of(when.condition, scope)
            if expr.operand is None:
                if ct is not None and ct != T.BOOLEAN:
                    raise TypeCheckError(
                        "WHEN operand type should be boolean.\n"
                        f"Type for '{format_sql(when.condition)}' is {ct}"
                    )
            else:
                self._check_comparable("=", expr.operand, operand_type, when.condition, ct)
            self.types[id(when)] = None
        results = [(w.result, self.type_of(w.result, scope)) for w in expr.whens]
        if expr.default is not None:
            results.append((expr.default, self.type_of(expr.default, scope)))
        try:
            target = common_type(results)
        except TypeCheckError as exc:
            raise TypeCheckError(
                f"Invalid Case expression. Type for all 'THEN' clauses should be the same. {exc}"
            ) from exc
        if target is None:
            raise TypeCheckError(
                f"Invalid Case expression {format_sql(expr)}: all THEN and ELSE results are NULL; "
                "cast one of them to the desired type."
            )
        return target

    def _searched_case(self, expr: Case, scope: dict[str, SqlType]) -> SqlType | None:
        """ksqlDB's searched CASE: every WHEN a BOOLEAN, every non-NULL result of one type."""
        then: SqlType | None = None
        for when in expr.whens:
            ct = self.type_of(when.condition, scope)
            if ct is not None and ct != T.BOOLEAN:
                raise TypeCheckError(
                    "WHEN operand type should be boolean.\n"
                    f"Type for '{format_sql(when.condition)}' is {ct}"
                )
            self.types[id(when)] = None
            result = self.type_of(when.result, scope)
            if result is None:
                continue
            if then is None:
                then = result
            elif result != then:
                raise TypeCheckError(
                    "Invalid Case expression. Type for all 'THEN' clauses should be the same.\n"
                    f"THEN expression 'WHEN {format_sql(when.condition)} THEN {format_sql(when.result)}' "
                    f"has type: {result}.\nPrevious THEN expression(s) type: {then}."
                )
        default = self.type_of(expr.default, scope) if expr.default is not None else None
        if then is not None and default is not None and default != then:
            raise TypeCheckError(
                "Invalid Case expression. Type for the default clause should be the same as for 'THEN' "
                f"clauses.\nTHEN type: {then}.\nDEFAULT type: {default}."
            )
        if then is None and default is None:
            raise TypeCheckError("Invalid Case expression. All case branches have NULL type")
        return then or default

    def _Cast(self, expr: Cast, scope: dict[str, SqlType]) -> SqlType | None:
        source = self.type_of(expr.operand, scope)
        check_cast(source, expr.type)
        return expr.type

    def _CreateArray(self, expr: CreateArray, scope: dict[str, SqlType]) -> SqlType | None:
        if not expr.items:
            raise TypeCheckError(
                "Array constructor cannot be empty. Please supply at least one element "
                "(see https://github.com/confluentinc/ksql/issues/4239)."
            )
        item = common_type([(e, self.type_of(e, scope)) for e in expr.items])
        if item is None:
            raise TypeCheckError(
                "Cannot construct an array with all NULL elements "
                "(see https://github.com/confluentinc/ksql/issues/4239). As a workaround, you "
                "may cast a NULL value to the desired type."
            )
        return T.Array(item)

    def _CreateMap(self, expr: CreateMap, scope: dict[str, SqlType]) -> SqlType | None:
        if not expr.entries:
            raise TypeCheckError(
                "Map constructor cannot be empty. Please supply at least one key value pair "
                "(see https://github.com/confluentinc/ksql/issues/4239)."
            )
        keys = [(e.key, self.type_of(e.key, scope)) for e in expr.entries]
        values = [(e.value, self.type_of(e.value, scope)) for e in expr.entries]
        for e in expr.entries:
            self.types[id(e)] = None
        key = common_type(keys)
        if key is None:
            raise TypeCheckError(
                "Cannot construct a map with all NULL keys (see https://github.com/confluentinc/ksql/issues/4239). "
                "As a workaround, you may cast a NULL key to the desired type."
            )
        value = common_type(values)
        if value is None:
            raise TypeCheckError(
                "Cannot construct a map with all NULL values (see https://github.com/confluentinc/ksql/issues/4239). "
                "As a workaround, you may cast a NULL value to the desired type."
            )
        return T.Map(key, value)

    def _CreateStruct(self, expr: CreateStruct, scope: dict[str, SqlType]) -> SqlType | None:
        seen: set[str] = set()
        fields: list[T.Field] = []
        for f in expr.fields:
            if f.name in seen:
                raise TypeCheckError(f"Duplicate field names found in STRUCT: '{f.name}'.")
            seen.add(f.name)
            t = self.type_of(f.value, scope)
            self.types[id(f)] = None
            # ksqlDB gives a bare NULL field no type; STRING is the closest schema it can get.
            fields.append(T.Field(f.name, t if t is not None else T.STRING))
        return T.Struct(tuple(fields))

    def _FunctionCall(self, expr: FunctionCall, scope: dict[str, SqlType]) -> SqlType | None:
        if REGISTRY.kind_of(expr.name) is None:
            raise UnknownFunctionError(
                f"Can't find any functions with the name '{expr.name.upper()}'."
            )
        arg_types: list[SqlType | None] = []
        for arg in expr.args:
            if isinstance(arg, Lambda):
                arg_types.append(LambdaType(params=(None,) * len(arg.params), result=None))
            else:
                arg_types.append(self.type_of(arg, scope))
        for i, arg in enumerate(expr.args):
            if not isinstance(arg, Lambda):
                continue
            params = REGISTRY.lambda_param_types(expr.name, arg_types, i, expr.semantics)
            if len(params) != len(arg.params):
                raise TypeCheckError(
                    f"Lambda {format_sql(arg)} of {expr.name.upper()} takes {len(arg.params)} "
                    f"parameter(s); expected {len(params)}."
                )
            inner = dict(scope)
            inner.update(zip(arg.params, params, strict=True))
            body = self.type_of(arg.body, inner)
            self.lambda_params[id(arg)] = tuple(params)
            self.types[id(arg)] = arg_types[i] = LambdaType(tuple(params), body)
        # ksqlDB's messages name a time-unit keyword's type INTERVAL UNIT.
        labels = [_INTERVAL_UNIT_LABEL if isinstance(arg, IntervalUnit) else None for arg in expr.args]
        resolved = REGISTRY.resolve(
            expr.name, arg_types, expr.semantics,
            arg_labels=labels if any(label is not None for label in labels) else None,
        )
        self.functions[id(expr)] = resolved
        return resolved.return_type


_INTERVAL_UNIT_LABEL = "INTERVAL UNIT"


def _is_null_literal(expr: Expr) -> bool:
    """``NULL`` as written: ksqlDB types it as no type, and refuses to compare with it."""
    return isinstance(expr, Literal) and expr.value is None


# ksqlDB's help after a timestamp text it cannot read (its PartialStringToTimestampParser).
TIMESTAMP_TEXT_HELP = (
    "\nRequired format is: \"yyyy-MM-dd'T'HH:mm:ss.SSS\", with an optional numeric 4-digit timezone, "
    "for example: '2020-05-26T23:59:58.000' or with tz: '2020-05-26T23:59:58.000+0200'. "
    "A trailing 'Z' instead of tz indicates the zero UTC offset. "
    "Partials are also supported, for example \"2020-05-26\""
)


def check_timestamp_literal(text: str) -> None:
    """Raise ``TypeCheckError`` in ksqlDB's words when ``text``, compared with ROWTIME,
    WINDOWSTART or WINDOWEND, is no (partial) timestamp: ksqlDB turns such a literal into epoch
    millis when the statement is planned, so it refuses the statement, not the records."""
    try:
        parse_timestamp_text(text)
    except ValueError as exc:
        raise TypeCheckError(f"Failed to parse timestamp '{text}': {exc}{TIMESTAMP_TEXT_HELP}") from None
    zone = _zone_problem(text)
    if zone is not None:
        raise TypeCheckError(f"Failed to parse timestamp '{text}': {zone}{TIMESTAMP_TEXT_HELP}")


def _zone_problem(text: str) -> str | None:
    """Why Java's ``ZoneId.of`` refuses the numeric zone offset of a timestamp text (None: it
    has none, or a valid one), in ksqlDB's words ("Failed to parse timezone ...")."""
    _, has_time, time = text.strip().partition("T")
    at = next((i for i, c in enumerate(time) if c in "+-"), -1) if has_time else -1
    if at < 0:
        return None
    zone = time[at:]
    digits = zone[1:].replace(":", "")
    sign = -1 if zone[0] == "-" else 1
    hours, minutes = sign * int(digits[:2] or 0), sign * int(digits[2:4] or 0)
    if not -18 <= hours <= 18:
        problem = f"Zone offset hours not in valid range: value {hours} is not in the range -18 to 18"
    elif not -59 <= minutes <= 59:
        problem = f"Zone offset minutes not in valid range: value {minutes} is not in the range -59 to 59"
    elif abs(hours) == 18 and minutes != 0:
        problem = "Zone offset not in valid range: -18:00 to +18:00"
    else:
        return None
    return f"Failed to parse timezone '{zone}': {problem}"
