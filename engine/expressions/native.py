"""Compile plan expressions into Spark Columns with ksqlDB's semantics (lower layer).

``compile_native(expr, columns)`` returns a ``NativeExpression``: a ``pyspark.sql.Column``
when every node of the tree has an exact Spark equivalent, else ``column`` None and a
``reason`` naming the first node that has none (the step then evaluates that expression
with the Python evaluator, ``engine.expressions.evaluator``, which is the reference).

Spark runs in ANSI mode, where overflow, a zero divisor or a bad index raise; ksqlDB never
fails a query for one record. So the compiler only emits forms that cannot raise:

- INTEGER ``+ - *`` are computed as BIGINT and wrapped to 32 bits with bit operations;
  BIGINT ``+ - *`` as DECIMAL(38,0) and wrapped to 64 bits (Java's two's complement).
- Integer ``/`` and ``%`` (Java truncation, and ksqlDB logs a zero divisor), DOUBLE ``/``
  and ``%`` by a non-constant divisor and DECIMAL ``/ %`` fall back.
- A comparison with a NULL operand is false, not NULL (``coalesce(..., false)``); IN is
  two-valued; BETWEEN with a NULL operand is false.
- Array subscripts are 1-based, negative from the end, 0 or out of range NULL.
- Casts map to Spark only where the two agree on every value (widening numeric casts,
  integral and boolean to STRING); other casts fall back.

A constructed Column references the step's Spark column names (``spark_name``).

The compiler has *levels*, each frozen once a step version uses it (a planned case's physical
plan shows every form): level 1 is the above, used by the V2 filter, select, group-by and
aggregate steps. Level 2 (``streamFilterV3``, ``tableFilterV4``, ``streamSelectV3``,
``tableSelectV3``) adds, each exact against the evaluator:

- integer ``/`` and ``%`` by a non-zero constant divisor (Java truncation; ``/ -1`` wraps
  like negation), DOUBLE ``/`` and ``%`` by any divisor (IEEE results for a zero divisor,
  as Java gives them: an infinity signed by both operands, or NaN);
- ``LEN`` of a STRING (UTF-16 code units, as Java's ``length``), ``TRIM``/``LTRIM``/``RTRIM``
  (Java's ``trim``: every character up to U+0020), ``REPLACE`` with a constant non-empty
  search text, ``CONCAT_WS`` of STRINGs;
- ``SQRT``, ``SIGN`` (NaN is 0), ``CEIL``/``FLOOR`` of a DOUBLE, INTEGER or BIGINT, and
  ``ROUND`` of a DOUBLE (``Math.round``: halves towards positive infinity, saturating);
- ``TRUNC`` of a DOUBLE (Java's ``(long)`` cast), ``GREATEST``/``LEAST`` of INTEGERs, BIGINTs
  or STRINGs (NULLs skipped), ``AS_VALUE`` (the value itself) and ``ARRAY_LENGTH``.
"""

from __future__ import annotations

import decimal
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column
from pyspark.sql import functions as F

from engine.errors import InternalError, KsqlError
from engine.expressions.native_levels import (
    LEVEL_2_FUNCTIONS,
    NativeCall,
    level_2_covers,
    native_call,
    nonzero_integral_literal,
    nonzero_literal,
)
from engine.expressions.typer import Typer, is_timestamp_pseudo_column
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.types import BaseType, SqlType
from engine.runtime.convert import SPARK_MAX_DECIMAL_PRECISION, spark_type
from engine.runtime.rows import META_NAMES, spark_name

NATIVE = "native"

_INT_LIMIT = 1 << 31
_LONG_LIMIT = 1 << 63

# Types whose Spark representation is the plain Spark type of the same name.
_SIMPLE = frozenset(
    {
        BaseType.BOOLEAN,
        BaseType.INTEGER,
        BaseType.BIGINT,
        BaseType.DOUBLE,
        BaseType.STRING,
    }
)
_INTEGRAL = frozenset({BaseType.INTEGER, BaseType.BIGINT})
# Widening conversions Spark performs exactly (source base -> target bases).
_WIDENING: dict[BaseType, frozenset[BaseType]] = {
    BaseType.INTEGER: frozenset({BaseType.BIGINT, BaseType.DOUBLE}),
    BaseType.BIGINT: frozenset({BaseType.DOUBLE}),
}


@dataclass(frozen=True)
class NativeExpression:
    """An expression compiled for Spark: its Column, or None and why it falls back."""

    sql: str
    column: Column | None
    reason: str

    @property
    def is_native(self) -> bool:
        return self.column is not None

    def report(self) -> str:
        """``native`` or ``fallback: <reason>``, as ``kspark explain`` prints it."""
        return NATIVE if self.column is not None else f"fallback: {self.reason}"


class _Fallback(Exception):
    """A node with no exact Spark equivalent; the message says which and why."""


LEVELS = (1, 2)


def compile_native(
    expr: E.Expr,
    columns: Mapping[str, SqlType],
    *,
    user_columns: Collection[str] | None = None,
    level: int = 1,
) -> NativeExpression:
    """Compile ``expr`` over ``columns`` into a Spark Column, or say why it cannot be.

    ``user_columns`` names the row's own columns; any other name in ``columns`` is a pseudo
    column (ROWTIME, ROWPARTITION, ROWOFFSET, WINDOWSTART, WINDOWEND), read from the row's
    meta column of that name. ``None`` means every name is a user column. ``level`` is the
    compiler level the step version was built with (see the module's docstring).
    """
    if level not in LEVELS:
        raise InternalError(f"Native expression compiler level {level} is unknown; known levels: {LEVELS} (a bug).")
    sql = E.format_sql(expr)
    typer = Typer(columns)
    try:
        typer.type_of(expr, {})
    except KsqlError as exc:
        return NativeExpression(sql, None, f"not typed here ({exc})")
    try:
        column = _Compiler(typer, user_columns, level).compile(expr)
    except _Fallback as exc:
        return NativeExpression(sql, None, str(exc))
    return NativeExpression(sql, column, NATIVE)


def _simple(t: SqlType | None) -> bool:
    return t is not None and (
        t.base in _SIMPLE
        or (isinstance(t, T.Decimal) and t.precision <= SPARK_MAX_DECIMAL_PRECISION)
    )


def _no_null(column: Column) -> Column:
    return F.coalesce(column, F.lit(False))


class _Compiler:
    """Builds Spark Columns from a tree the Typer has typed."""

    def __init__(self, typer: Typer, user_columns: Collection[str] | None = None, level: int = 1) -> None:
        self.typer = typer
        self.user_columns = user_columns
        self.level = level

    def type_of(self, expr: E.Expr) -> SqlType | None:
        return self.typer.known(expr)

    def compile(self, expr: E.Expr) -> Column:
        method = getattr(self, f"_{type(expr).__name__}", None)
        if method is None:
            raise _Fallback(f"{type(expr).__name__} has no Spark form yet ({E.format_sql(expr)})")
        column: Column = method(expr)
        return column

    def _as(self, expr: E.Expr, target: SqlType | None) -> Column:
        """``expr`` as a value of ``target``, where Spark converts exactly."""
        column = self.compile(expr)
        source = self.type_of(expr)
        if target is None or source == target:
            return column
        if source is None:  # a NULL literal
            if not _simple(target):
                raise _Fallback(f"NULL of type {target} has no Spark form yet")
            return column.cast(spark_type(target))
        if target.base in _WIDENING.get(source.base, frozenset()):
            return column.cast(spark_type(target))
        if isinstance(expr, E.Literal) and source.base is BaseType.DECIMAL and target == T.DOUBLE:
            return F.lit(float(expr.value))  # as the evaluator converts it: nearest double
        raise _Fallback(f"converting {source} to {target} in {E.format_sql(expr)}")

    # ------------------------------------------------------------------ leaves

    def _Literal(self, expr: E.Literal) -> Column:
        if expr.value is None:
            return F.lit(None)
        if not _simple(expr.type):
            raise _Fallback(f"a {expr.type} literal has no Spark form yet")
        assert expr.type is not None
        return F.lit(expr.value).cast(spark_type(expr.type))

    def _ColumnRef(self, expr: E.ColumnRef) -> Column:
        if expr.name not in self.typer.columns:
            raise _Fallback(f"{expr.name} is a lambda variable")
        if self.user_columns is not None and expr.name not in self.user_columns:
            if expr.name not in META_NAMES:
                raise _Fallback(f"{expr.name} is neither a column of the row nor a pseudo column")
            return F.col(expr.name)  # a pseudo column: the row's meta column of that name
        return F.col(spark_name(expr.name))

    # ------------------------------------------------------------------ access

    def _Dereference(self, expr: E.Dereference) -> Column:
        return self.compile(expr.base).getField(expr.field)

    def _Subscript(self, expr: E.Subscript) -> Column:
        base_type = self.type_of(expr.base)
        if not isinstance(base_type, T.Array):
            raise _Fallback(f"map subscript {E.format_sql(expr)} has no Spark form yet")
        items = self.compile(expr.base)
        index = self._as(expr.index, T.INTEGER)
        size = F.size(items)
        # 1-based from the start, -1 the last; 0 and out of range are NULL (never an error).
        inside = (index != 0) & (F.abs(index.cast("bigint")) <= size)
        position = F.when(index > 0, index - 1).otherwise(size + index)
        return F.when(items.isNotNull() & inside, F.get(items, position))

    # ------------------------------------------------------------------ arithmetic

    def _Negate(self, expr: E.Negate) -> Column:
        t = self.type_of(expr.operand)
        operand = self.compile(expr.operand)
        if t is not None and t.base is BaseType.DOUBLE:
            return -operand
        if t is not None and t.base in _INTEGRAL:
            return self._negated(operand, t)
        raise _Fallback(f"negating a {t} value")

    def _negated(self, operand: Column, t: SqlType) -> Column:
        """``-operand`` of an INTEGER or BIGINT, wrapping as Java does (-MIN_VALUE is MIN_VALUE)."""
        if t.base is BaseType.INTEGER:
            return self._wrap(F.lit(0).cast("bigint") - operand.cast("bigint"), t)
        exact = F.lit(0).cast("decimal(19,0)") - operand.cast("decimal(19,0)")
        return self._wrap(exact.cast("decimal(38,0)"), t)

    def _Arithmetic(self, expr: E.Arithmetic) -> Column:
        result = self.type_of(expr)
        if result is None:
            raise _Fallback(f"untyped arithmetic {E.format_sql(expr)}")
        op = expr.op
        if result.base is BaseType.DOUBLE:
            left, right = self._as(expr.left, T.DOUBLE), self._as(expr.right, T.DOUBLE)
            if op in ("/", "%"):
                divisor = expr.right
                if not nonzero_literal(divisor):
                    if self.level >= 2:
                        return _java_double_divide(left, right) if op == "/" else _java_double_mod(left, right)
                    raise _Fallback(f"DOUBLE {op} by a divisor that may be zero (IEEE results)")
                return left / right if op == "/" else left % right
            return _binary(op, left, right)
        if result.base in _INTEGRAL:
            if op in ("/", "%") and self.level >= 2 and nonzero_integral_literal(expr.right):
                return self._integral_divide(expr, result)
            if op not in ("+", "-", "*"):
                raise _Fallback(f"integer {op} (Java truncation; a zero divisor is logged)")
            if result.base is BaseType.INTEGER:
                left, right = self._as(expr.left, T.BIGINT), self._as(expr.right, T.BIGINT)
                return self._wrap(_binary(op, left, right), result)
            wide = "decimal(38,0)"
            left = self._as(expr.left, T.BIGINT).cast("decimal(19,0)")
            right = self._as(expr.right, T.BIGINT).cast("decimal(19,0)")
            return self._wrap(_binary(op, left, right).cast(wide), result)
        if isinstance(result, T.Decimal):
            if op not in ("+", "-", "*") or result.precision > SPARK_MAX_DECIMAL_PRECISION:
                raise _Fallback(f"DECIMAL {op} to {result} (rounding differs from Spark)")
            left, right = self._decimal(expr.left), self._decimal(expr.right)
            return _binary(op, left, right).cast(spark_type(result))
        if result.base is BaseType.STRING and op == "+":
            return F.concat(self.compile(expr.left), self.compile(expr.right))
        raise _Fallback(f"{result} {op}")

    def _integral_divide(self, expr: E.Arithmetic, result: SqlType) -> Column:
        """Integer ``/`` or ``%`` by a non-zero constant: Java truncates towards zero, and
        ``MIN / -1`` wraps (Spark's ANSI ``div`` would fail on it: it is a negation here)."""
        target = T.INTEGER if result.base is BaseType.INTEGER else T.BIGINT
        left, right = self._as(expr.left, target), self._as(expr.right, target)
        assert isinstance(expr.right, E.Literal)
        if expr.op == "%":
            return left % right
        if int(expr.right.value) == -1:
            return self._negated(left, target)
        return F.call_function("div", left, right).cast(spark_type(target))

    def _decimal(self, expr: E.Expr) -> Column:
        t = self.type_of(expr)
        column = self.compile(expr)
        if isinstance(t, T.Decimal) and t.precision <= SPARK_MAX_DECIMAL_PRECISION:
            return column
        if t is not None and t.base in _INTEGRAL:
            return column.cast(spark_type(T.decimal_for_integral(t)))
        raise _Fallback(f"a {t} operand in DECIMAL arithmetic")

    @staticmethod
    def _wrap(exact: Column, t: SqlType) -> Column:
        return wrap_integral(exact, t)

    # ------------------------------------------------------------------ predicates

    def _sides(self, left: E.Expr, right: E.Expr) -> tuple[Column, Column]:
        lt, rt = self.type_of(left), self.type_of(right)
        if is_timestamp_pseudo_column(left, lt) or is_timestamp_pseudo_column(right, rt):
            if BaseType.STRING in (getattr(lt, "base", None), getattr(rt, "base", None)):
                raise _Fallback("comparing ROWTIME with a timestamp text")
        if lt is None or rt is None or lt == rt:
            if lt is not None and not _simple(lt) and lt.base not in (BaseType.DATE, BaseType.TIMESTAMP):
                raise _Fallback(f"comparing {lt} values")
            return self.compile(left), self.compile(right)
        if lt.is_numeric and rt.is_numeric and _simple(lt) and _simple(rt):
            # Spark widens int/bigint/decimal/double exactly as the evaluator does (to
            # DOUBLE when one side is DOUBLE, else exactly).
            return self.compile(left), self.compile(right)
        raise _Fallback(f"comparing {lt} with {rt}")

    def _has_double(self, *exprs: E.Expr) -> bool:
        return any(getattr(self.type_of(e), "base", None) is BaseType.DOUBLE for e in exprs)

    def _Comparison(self, expr: E.Comparison) -> Column:
        left, right = self._sides(expr.left, expr.right)
        op = expr.op
        if self._has_double(expr.left, expr.right):
            # Java (and the evaluator): NaN equals nothing and orders with nothing; Spark
            # orders NaN above every number and makes NaN = NaN true.
            if op in ("IS DISTINCT FROM", "IS NOT DISTINCT FROM"):
                raise _Fallback(f"{op} on DOUBLE values (NaN)")
            nan = F.isnan(left) | F.isnan(right)
            if op == "<>":
                return _no_null((left != right) | nan)
            return _no_null(_compare(op, left, right) & ~nan)
        if op == "IS NOT DISTINCT FROM":
            return left.eqNullSafe(right)
        if op == "IS DISTINCT FROM":
            return ~left.eqNullSafe(right)
        return _no_null(_compare(op, left, right))

    def _Logical(self, expr: E.Logical) -> Column:
        left, right = self.compile(expr.left), self.compile(expr.right)
        return left & right if expr.op == "AND" else left | right

    def _Not(self, expr: E.Not) -> Column:
        return ~self.compile(expr.operand)

    def _IsNull(self, expr: E.IsNull) -> Column:
        operand = self.compile(expr.operand)
        return operand.isNotNull() if expr.negated else operand.isNull()

    def _In(self, expr: E.In) -> Column:
        target = self.typer.common.get(id(expr))
        if not isinstance(target, SqlType) or not _simple(target) or not expr.items:
            raise _Fallback(f"IN over {target}")
        if target.base is BaseType.DOUBLE:
            raise _Fallback("IN over DOUBLE values (NaN)")
        value = self._as(expr.value, target)
        found = F.lit(False)
        for item in expr.items:
            found = found | _no_null(value == self._as(item, target))
        return ~found if expr.negated else found

    def _Between(self, expr: E.Between) -> Column:
        value, low = self._sides(expr.value, expr.low)
        _, high = self._sides(expr.value, expr.high)
        inside = _no_null((low <= value) & (value <= high))
        if self._has_double(expr.value, expr.low, expr.high):
            inside = inside & ~(F.isnan(value) | F.isnan(low) | F.isnan(high))
        return ~inside if expr.negated else inside

    def _Like(self, expr: E.Like) -> Column:
        pattern = expr.pattern
        if not isinstance(pattern, E.Literal):
            raise _Fallback("LIKE with a pattern that varies per record")
        if pattern.value is None:
            return F.lit(expr.negated)
        regex = _like_java_regex(pattern.value, expr.escape)
        if regex is None:
            raise _Fallback("LIKE pattern with \\E in it, or ending with its escape character")
        matched = _no_null(self.compile(expr.value).rlike(regex))
        return ~matched if expr.negated else matched

    def _Case(self, expr: E.Case) -> Column:
        result_type = self.type_of(expr)
        if result_type is not None and not _simple(result_type):
            raise _Fallback(f"CASE of {result_type}")
        chained: Column | None = None
        for when in expr.whens:
            if expr.operand is None:
                condition = self.compile(when.condition)
            else:
                if self._has_double(expr.operand, when.condition):
                    raise _Fallback("simple CASE over DOUBLE values (NaN)")
                left, right = self._sides(expr.operand, when.condition)
                condition = left == right
            value = self._as(when.result, result_type)
            chained = F.when(condition, value) if chained is None else chained.when(condition, value)
        assert chained is not None
        if expr.default is not None:
            return chained.otherwise(self._as(expr.default, result_type))
        return chained

    def _Cast(self, expr: E.Cast) -> Column:
        # The Spark forms below (NULL, widening, integral or boolean to STRING) behave alike in
        # every version of CAST (engine.expressions.cast: version 2 changed STRING to DATE, version 3
        # DOUBLE to STRING and DECIMAL and STRING to BYTES).
        source, target = self.type_of(expr.operand), expr.type
        if not expr.error_null:
            raise _Fallback("CAST whose failure fails the whole expression (ksql.nested.error.set.null=false)")
        operand = self.compile(expr.operand)
        if expr.null_text and target.base is BaseType.STRING and source is not None and source != target:
            if source.base in (*_INTEGRAL, BaseType.BOOLEAN):
                return F.coalesce(operand.cast("string"), F.lit("null"))
            raise _Fallback(f"CAST from {source} to {target} with NULL as 'null'")
        if source is None:
            if not _simple(target):
                raise _Fallback(f"CAST(NULL AS {target})")
            return operand.cast(spark_type(target))
        if source == target:
            return operand
        if target.base in _WIDENING.get(source.base, frozenset()):
            return operand.cast(spark_type(target))
        if target.base is BaseType.STRING and source.base in (*_INTEGRAL, BaseType.BOOLEAN):
            return operand.cast("string")
        raise _Fallback(f"CAST from {source} to {target}")

    # ------------------------------------------------------------------ functions

    def _FunctionCall(self, expr: E.FunctionCall) -> Column:
        resolved = self.typer.functions.get(id(expr))
        name = expr.name.upper()
        if not expr.error_null:
            raise _Fallback(f"function {name} whose failure fails the whole expression (ksql.nested.error.set.null=false)")
        if resolved is None:
            raise _Fallback(f"function {name} runs in Python")
        native = _FUNCTIONS.get((name, resolved.signature.since))
        if native is None and self.level >= 2:
            key, call = native_call(expr, resolved)
            form = _FUNCTIONS_2.get(key)
            if form is not None:
                if not level_2_covers(key, call):
                    raise _Fallback(f"function {name} runs in Python for ({', '.join(map(str, call.params))})")
                return form(self._args(expr, resolved.param_types), call)
        if native is None:
            raise _Fallback(f"function {name} runs in Python")
        return native(self._args(expr, resolved.param_types), resolved.return_type)

    def _args(self, expr: E.FunctionCall, params: Sequence[SqlType | None]) -> list[Column]:
        """The call's arguments, each as a value of its parameter's type."""
        return [self._as(a, p) for a, p in zip(expr.args, params, strict=True)]


def wrap_integral(exact: Column, t: SqlType) -> Column:
    """An exact integral result (BIGINT for INTEGER, DECIMAL(38,0) for BIGINT) wrapped into
    Java's 32- or 64-bit two's complement."""
    if t.base is BaseType.INTEGER:
        low = (exact + F.lit(_INT_LIMIT)).bitwiseAND(F.lit((1 << 32) - 1))
        return (low - F.lit(_INT_LIMIT)).cast("int")
    limit = F.lit(decimal.Decimal(_LONG_LIMIT)).cast("decimal(38,0)")
    span = F.lit(decimal.Decimal(1 << 64)).cast("decimal(38,0)")
    return (F.pmod(exact + limit, span) - limit).cast("bigint")


def _binary(op: str, left: Column, right: Column) -> Column:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    return left * right


def _compare(op: str, left: Column, right: Column) -> Column:
    if op == "=":
        return left == right
    if op == "<>":
        return left != right
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    return left >= right


def _like_java_regex(pattern: str, escape: str | None) -> str | None:
    """A Java regex matching exactly what ksqlDB's LIKE pattern matches (None: cannot quote)."""
    out: list[str] = ["(?s)^"]
    literal: list[str] = []

    def flush() -> None:
        if literal:
            out.append("\\Q" + "".join(literal) + "\\E")
            literal.clear()

    chars = iter(pattern)
    for c in chars:
        if escape is not None and c == escape:
            nxt = next(chars, None)
            if nxt is None:
                return None  # fails each record (see like_regex): the Python evaluator logs it
            literal.append(nxt)
        elif c in "%_":
            flush()
            out.append(".*" if c == "%" else ".")
        else:
            literal.append(c)
    flush()
    out.append("\\z")
    regex = "".join(out)
    if re.search(r"\\E", "".join(p[2:-2] for p in out if p.startswith("\\Q"))):
        return None
    return regex


def _concat(args: list[Column], _: SqlType) -> Column:
    return F.concat_ws("", *args)


def _coalesce(args: list[Column], _: SqlType) -> Column:
    return F.coalesce(*args)


def _abs(args: list[Column], returns: SqlType) -> Column:
    if returns.base is not BaseType.DOUBLE:
        raise _Fallback("ABS of an integral (Java keeps MIN_VALUE; Spark's ANSI mode fails)")
    return F.abs(args[0])


# ksqlDB functions whose Spark built-in agrees on every value (NULL in, NULL out where
# ksqlDB propagates NULL; CONCAT and COALESCE skip NULLs as Spark's do), by name and the
# version since which the overload they match behaves so (``Signature.since``): a call
# planned with a later version of the function keeps the form while its overload is unchanged.
_FUNCTIONS: dict[tuple[str, int], Callable[[list[Column], SqlType], Column]] = {
    ("UCASE", 1): lambda args, _: F.upper(args[0]),
    ("LCASE", 1): lambda args, _: F.lower(args[0]),
    ("CONCAT", 1): _concat,
    ("IFNULL", 1): _coalesce,
    ("COALESCE", 1): _coalesce,
    ("ABS", 1): _abs,
}


# --------------------------------------------------------------------------- level 2

_DOUBLE_INTEGRAL = float(1 << 52)  # every DOUBLE at least this large is integral
_NAN, _INF = float("nan"), float("inf")


def _java_double_divide(left: Column, right: Column) -> Column:
    """Java's ``x / y`` on doubles: a zero divisor gives NaN (for 0 or NaN) or an infinity
    whose sign is the XOR of both signs, -0.0 counting as negative (Spark's ANSI ``/`` fails)."""
    negative_zero = right.cast("string").startswith("-")  # read only when right == 0
    by_zero = (
        F.when(F.isnan(left) | (left == 0), F.lit(_NAN))
        .when((left < 0) != negative_zero, F.lit(-_INF))
        .otherwise(F.lit(_INF))
    )
    return F.when(left.isNull() | right.isNull(), F.lit(None).cast("double")).when(right == 0, by_zero).otherwise(left / right)


def _java_double_mod(left: Column, right: Column) -> Column:
    """Java's ``x % y`` on doubles: NaN for a zero divisor (Spark's ANSI ``%`` fails)."""
    null = left.isNull() | right.isNull()
    return F.when(null, F.lit(None).cast("double")).when(right == 0, F.lit(_NAN)).otherwise(left % right)


_JAVA_WHITESPACE = "".join(chr(c) for c in range(0x21))  # what Java's String.trim() strips


def _trim(side: str) -> Callable[[list[Column], NativeCall], Column]:
    fn = {"both": F.trim, "leading": F.ltrim, "trailing": F.rtrim}[side]
    return lambda args, _: fn(args[0], F.lit(_JAVA_WHITESPACE))


def _utf16_length(args: list[Column], _: NativeCall) -> Column:
    return F.shiftright(F.octet_length(F.encode(args[0], "UTF-16BE")), 1).cast("int")


def _floor_or_ceil(fn: Callable[[Column], Column]) -> Callable[[list[Column], NativeCall], Column]:
    def build(args: list[Column], call: NativeCall) -> Column:
        x = args[0]
        if call.returns.base in _INTEGRAL:
            return x
        # Spark's FLOOR of a DOUBLE is a BIGINT (saturating); doubles this large are integral.
        return F.when(F.abs(x) < F.lit(_DOUBLE_INTEGRAL), fn(x).cast("double")).otherwise(x)

    return build


def _round_double(args: list[Column], _: NativeCall) -> Column:
    x = args[0]
    floor = F.floor(x)
    up = F.when((x - floor.cast("double")) >= F.lit(0.5), F.lit(1)).otherwise(F.lit(0)).cast("bigint")
    # NaN, infinities and doubles past 2^52: Spark's FLOOR saturates as Math.round does.
    return F.when(F.abs(x) < F.lit(_DOUBLE_INTEGRAL), floor + up).otherwise(floor)


def _trunc_double(args: list[Column], _: NativeCall) -> Column:
    """Java's ``(long) x``: towards zero, NaN is 0, out of range saturates (Spark's ANSI cast fails)."""
    x, limit = args[0], float(1 << 63)
    return (
        F.when(F.isnan(x), F.lit(0).cast("bigint"))
        .when(x >= F.lit(limit), F.lit((1 << 63) - 1))
        .when(x <= F.lit(-limit), F.lit(-(1 << 63)))
        .otherwise(x.cast("bigint"))
    )


def _sign(args: list[Column], call: NativeCall) -> Column:
    x = args[0]
    sign = F.signum(x).cast("int")
    is_double = call.params[0] is not None and call.params[0].base is BaseType.DOUBLE
    return F.when(F.isnan(x), F.lit(0)).otherwise(sign) if is_double else sign


# The Spark form of each function level 2 runs natively; which calls each covers is
# ``LEVEL_2_FUNCTIONS`` (``native_levels``), which the planner reads too.
_FUNCTIONS_2: dict[tuple[str, int], Callable[[list[Column], NativeCall], Column]] = {
    ("LEN", 1): _utf16_length,
    ("TRIM", 1): _trim("both"),
    ("LTRIM", 1): _trim("leading"),
    ("RTRIM", 1): _trim("trailing"),
    ("REPLACE", 1): lambda args, _: F.replace(*args),
    ("CONCAT_WS", 1): lambda args, _: F.call_function("concat_ws", *args),
    ("CONCAT_WS", 2): lambda args, _: F.call_function("concat_ws", *args),
    ("SQRT", 1): lambda args, _: F.sqrt(args[0].cast("double")),
    ("SIGN", 1): _sign,
    ("CEIL", 1): _floor_or_ceil(F.ceil),
    ("FLOOR", 1): _floor_or_ceil(F.floor),
    ("ROUND", 1): _round_double,
    ("TRUNC", 1): _trunc_double,
    ("GREATEST", 1): lambda args, _: F.greatest(*args),
    ("LEAST", 1): lambda args, _: F.least(*args),
    ("AS_VALUE", 1): lambda args, _: args[0],
    ("ARRAY_LENGTH", 1): lambda args, _: F.when(args[0].isNotNull(), F.size(args[0])),
}
if _FUNCTIONS_2.keys() != LEVEL_2_FUNCTIONS.keys():
    raise InternalError(
        f"Level-2 functions without a Spark form or a rule: {sorted(_FUNCTIONS_2.keys() ^ LEVEL_2_FUNCTIONS.keys())} (a bug)."
    )
