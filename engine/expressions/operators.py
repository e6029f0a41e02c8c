"""Typing rules and implementations of arithmetic and comparison operators (Java semantics).

Integers wrap like Java ``int``/``long``; integer ``/`` truncates toward zero and ``%``
takes the dividend's sign; DOUBLE follows IEEE 754; DECIMAL results follow ksqlDB's
precision/scale rules and are rounded HALF_UP to the result scale.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Callable
from typing import Any

from engine.expressions.cast import (
    DECIMAL_CONTEXT,
    decimal_of,
    to_decimal,
    wrap_bigint,
    wrap_int,
)
from engine.plan import types as T
from engine.plan.types import BaseType, SqlType

COMPARISON_NAMES = {
    "=": "EQUAL",
    "<>": "NOT_EQUAL",
    "<": "LESS_THAN",
    "<=": "LESS_THAN_OR_EQUAL",
    ">": "GREATER_THAN",
    ">=": "GREATER_THAN_OR_EQUAL",
    "IS DISTINCT FROM": "IS_DISTINCT_FROM",
    "IS NOT DISTINCT FROM": "IS_NOT_DISTINCT_FROM",
}
EQUALITY_OPS = frozenset({"=", "<>", "IS DISTINCT FROM", "IS NOT DISTINCT FROM"})

_TEMPORAL = (BaseType.TIMESTAMP, BaseType.DATE)


def _cap(precision: int, scale: int) -> T.Decimal:
    precision = max(1, min(precision, 1000))
    return T.Decimal(precision, min(scale, precision))


def decimal_result_type(op: str, left: T.Decimal, right: T.Decimal) -> T.Decimal:
    """ksqlDB's DECIMAL result type of ``left op right``."""
    p1, s1, p2, s2 = left.precision, left.scale, right.precision, right.scale
    if op in ("+", "-"):
        scale = max(s1, s2)
        return _cap(scale + max(p1 - s1, p2 - s2) + 1, scale)
    if op == "*":
        return _cap(p1 + p2 + 1, s1 + s2)
    if op == "/":
        scale = max(6, s1 + p2 + 1)
        return _cap(p1 - s1 + s2 + scale, scale)
    if op == "%":
        scale = max(s1, s2)
        return _cap(min(p1 - s1, p2 - s2) + scale, scale)
    raise ValueError(f"Unknown arithmetic operator '{op}'; expected one of + - * / %.")


def arithmetic_result_type(op: str, left: SqlType | None, right: SqlType | None) -> SqlType | None:
    """The result type of ``left op right``, or None when the operand types are not supported."""
    if left is None and right is None:
        return None
    left = left if left is not None else right
    right = right if right is not None else left
    assert left is not None and right is not None
    if left.is_numeric and right.is_numeric:
        if BaseType.DOUBLE in (left.base, right.base):
            return T.DOUBLE
        if BaseType.DECIMAL in (left.base, right.base):
            return decimal_result_type(
                op, T.decimal_for_integral(left), T.decimal_for_integral(right)
            )
        if BaseType.BIGINT in (left.base, right.base):
            return T.BIGINT
        return T.INTEGER
    if op == "+" and left.base is BaseType.STRING and right.base is BaseType.STRING:
        return T.STRING
    return None


def _java_div(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("/ by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _java_mod(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("/ by zero")
    return a - b * _java_div(a, b)


def _double_div(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _double_mod(a: float, b: float) -> float:
    if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    if math.isinf(b):
        return a
    return math.fmod(a, b)


def _integral_op(op: str, wrap: Callable[[int], int]) -> Callable[[Any, Any], Any]:
    if op == "+":
        return lambda a, b: wrap(a + b)
    if op == "-":
        return lambda a, b: wrap(a - b)
    if op == "*":
        return lambda a, b: wrap(a * b)
    if op == "/":
        return lambda a, b: wrap(_java_div(a, b))
    return lambda a, b: wrap(_java_mod(a, b))


def _double_op(op: str) -> Callable[[Any, Any], Any]:
    if op == "+":
        return lambda a, b: float(a) + float(b)
    if op == "-":
        return lambda a, b: float(a) - float(b)
    if op == "*":
        return lambda a, b: float(a) * float(b)
    if op == "/":
        return lambda a, b: _double_div(float(a), float(b))
    return lambda a, b: _double_mod(float(a), float(b))


def _decimal_op(op: str, result: T.Decimal) -> Callable[[Any, Any], Any]:
    p, s = result.precision, result.scale
    ctx = DECIMAL_CONTEXT
    if op == "+":
        return lambda a, b: to_decimal(ctx.add(decimal_of(a), decimal_of(b)), p, s)
    if op == "-":
        return lambda a, b: to_decimal(ctx.subtract(decimal_of(a), decimal_of(b)), p, s)
    if op == "*":
        return lambda a, b: to_decimal(ctx.multiply(decimal_of(a), decimal_of(b)), p, s)
    divide_ctx = decimal.Context(prec=p, rounding=decimal.ROUND_HALF_UP, Emax=999_999, Emin=-999_999)

    def divide(a: Any, b: Any) -> decimal.Decimal:
        divisor = decimal_of(b)
        if divisor == 0:
            raise ZeroDivisionError("Division by zero")
        return to_decimal(divide_ctx.divide(decimal_of(a), divisor), p, s)

    def remainder(a: Any, b: Any) -> decimal.Decimal:
        divisor = decimal_of(b)
        if divisor == 0:
            raise ZeroDivisionError("Division by zero")
        return to_decimal(ctx.remainder(decimal_of(a), divisor), p, s)

    return divide if op == "/" else remainder


def arithmetic_impl(op: str, result: SqlType) -> Callable[[Any, Any], Any]:
    """The non-null implementation of ``op`` producing a value of ``result`` type."""
    base = result.base
    if base is BaseType.STRING:
        return lambda a, b: a + b
    if base is BaseType.INTEGER:
        return _integral_op(op, wrap_int)
    if base is BaseType.BIGINT:
        return _integral_op(op, wrap_bigint)
    if base is BaseType.DOUBLE:
        return _double_op(op)
    assert isinstance(result, T.Decimal)
    return _decimal_op(op, result)


def negate_impl(operand: SqlType) -> Callable[[Any], Any]:
    """The non-null implementation of unary minus."""
    if operand.base is BaseType.INTEGER:
        return lambda v: wrap_int(-v)
    if operand.base is BaseType.BIGINT:
        return lambda v: wrap_bigint(-v)
    return lambda v: -v


# --------------------------------------------------------------------------- comparison


def comparable(op: str, left: SqlType | None, right: SqlType | None) -> bool:
    """Whether ksqlDB accepts ``left op right`` (ComparisonUtil's rules)."""
    if left is None or right is None:
        return True
    lb, rb = left.base, right.base
    if left.is_numeric:
        return right.is_numeric
    if lb is BaseType.STRING:
        return rb in (BaseType.STRING, BaseType.TIMESTAMP, BaseType.DATE, BaseType.TIME)
    if lb in _TEMPORAL:
        return rb in (BaseType.STRING, BaseType.TIMESTAMP, BaseType.DATE)
    if lb is BaseType.TIME:
        return rb in (BaseType.TIME, BaseType.STRING)
    if lb in (BaseType.BOOLEAN, BaseType.BYTES):
        return rb is lb
    if lb in (BaseType.ARRAY, BaseType.MAP, BaseType.STRUCT) and op in EQUALITY_OPS:
        return T.can_implicitly_cast(left, right) or T.can_implicitly_cast(right, left)
    return False


def comparison_key_type(left: SqlType | None, right: SqlType | None) -> SqlType | None:
    """The type both sides are converted to before comparing (None: compare as they are)."""
    if left is None or right is None:
        return None
    bases = {left.base, right.base}
    if BaseType.TIMESTAMP in bases or (BaseType.DATE in bases and left.base is not right.base):
        return T.TIMESTAMP
    if BaseType.DATE in bases:
        return T.DATE
    if BaseType.TIME in bases:
        return T.TIME
    return None


def to_timestamp(value: Any) -> dt.datetime:
    """A DATE or TIMESTAMP value as a TIMESTAMP (dates at midnight)."""
    if isinstance(value, dt.datetime):
        return value
    return dt.datetime(value.year, value.month, value.day)


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def comparison_impl(op: str) -> Callable[[Any, Any], Any]:
    """Compare two values (already converted to a common representation).

    As in ksqlDB, a NULL operand makes every comparison false, except IS [NOT] DISTINCT FROM.
    """
    if op == "IS DISTINCT FROM":
        return lambda a, b: (a is None) != (b is None) if a is None or b is None else a != b
    if op == "IS NOT DISTINCT FROM":
        return lambda a, b: (a is None) == (b is None) if a is None or b is None else a == b
    compare = _COMPARE[op]
    return lambda a, b: False if a is None or b is None else compare(a, b)
