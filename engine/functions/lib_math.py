"""Numeric functions, with Java ``Math`` semantics.

Java never raises on double arithmetic: it answers NaN or an infinity. The helpers
``java_div`` and ``java_pow`` and the wrappers below give Python's ``math`` the same
behaviour, so ``LN(0)`` is ``-Infinity`` and ``SQRT(-1)`` is ``NaN`` as in ksqlDB.

DECIMAL parameters are declared with ``ANY_DECIMAL``, which matches every DECIMAL (and,
through the registry's widening, every integral type); the return type comes from the
actual argument type. Implementations accept ``int`` as well as ``decimal.Decimal`` values.
"""

from __future__ import annotations

import decimal
import math
import random
from collections.abc import Callable, Sequence

from engine.errors import EvaluationError
from engine.functions.registry import REGISTRY, scalar
from engine.functions.udaf import wrap_int, wrap_long
from engine.plan import types as T
from engine.plan.types import SqlType


class AnyDecimal(T.Decimal):
    """Signature-only type standing for every DECIMAL(p, s); it prints as ``DECIMAL``.

    It compares equal to any DECIMAL, so the registry matches a DECIMAL argument exactly and
    the evaluator sees no coercion to do (a concrete placeholder such as DECIMAL(38, 0) would
    make it rescale the argument). Keep it out of sets and dict keys: its hash cannot agree
    with every DECIMAL it equals.
    """

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(1000, 0)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, T.Decimal)

    def __ne__(self, other: object) -> bool:
        return not isinstance(other, T.Decimal)

    def __hash__(self) -> int:
        return hash(T.BaseType.DECIMAL)

    def __str__(self) -> str:
        return "DECIMAL"


ANY_DECIMAL = AnyDecimal()
"""Stands for every DECIMAL(p, s) in a signature; the return type follows the argument."""

LONG_MIN, LONG_MAX = T.BIGINT_MIN, T.BIGINT_MAX

# BigDecimal arithmetic is exact; Python's default context keeps only 28 digits.
_EXACT = decimal.Context(prec=2000, Emax=999_999, Emin=-999_999)

ReturnRule = Callable[[Sequence[SqlType | None]], SqlType]


# --------------------------------------------------------------------------- Java doubles


def java_div(a: float, b: float) -> float:
    """IEEE division as Java does it: ``x / 0.0`` is an infinity or NaN, never an error."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _odd_integer(x: float) -> bool:
    return math.isfinite(x) and x.is_integer() and int(x) % 2 == 1


def java_pow(base: float, exponent: float) -> float:
    """``Math.pow``: NaN and infinities where Python's ``math.pow`` raises."""
    if math.isnan(exponent):
        return math.nan
    if exponent == 0:
        return 1.0
    if math.isnan(base):
        return math.nan
    if math.isinf(exponent) and abs(base) == 1:
        return math.nan
    try:
        return math.pow(base, exponent)
    except ValueError:  # zero to a negative power, or a negative base to a fraction
        if base == 0:
            return math.copysign(math.inf, base) if _odd_integer(exponent) else math.inf
        return math.nan
    except OverflowError:
        return -math.inf if base < 0 and _odd_integer(exponent) else math.inf


def java_ln(x: float) -> float:
    """``Math.log``: -Infinity at zero, NaN below."""
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    return math.log(x)


def java_log10(x: float) -> float:
    """``Math.log10``: -Infinity at zero, NaN below."""
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    return math.log10(x)


def _nan_on_domain_error(op: Callable[[float], float]) -> Callable[[float], float]:
    def apply(x: float) -> float:
        try:
            return op(x)
        except ValueError:
            return math.nan

    return apply


def java_cbrt(x: float) -> float:
    """``Math.cbrt``: exact for perfect cubes (libm's ``cbrt`` can be one ulp off)."""
    if not math.isfinite(x) or x == 0:
        return x
    y = math.cbrt(x)
    return y - (y * y * y - x) / (3 * y * y)  # a Newton step fixes the last digit


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _sinh(x: float) -> float:
    try:
        return math.sinh(x)
    except OverflowError:
        return math.copysign(math.inf, x)


def _cosh(x: float) -> float:
    try:
        return math.cosh(x)
    except OverflowError:
        return math.inf


def to_java_long(x: float) -> int:
    """Java's ``(long) x`` for a double: truncates, NaN is 0, out of range saturates."""
    if math.isnan(x):
        return 0
    if x >= LONG_MAX:
        return LONG_MAX
    if x <= LONG_MIN:
        return LONG_MIN
    return int(x)


def java_round(x: float) -> int:
    """``Math.round``: the nearest long, halves towards positive infinity."""
    if not math.isfinite(x):
        return to_java_long(x)
    exact = decimal.Decimal(x) + decimal.Decimal("0.5")
    return max(LONG_MIN, min(LONG_MAX, int(exact.to_integral_value(rounding=decimal.ROUND_FLOOR))))


# --------------------------------------------------------------------------- decimals


def as_decimal(x: int | decimal.Decimal) -> decimal.Decimal:
    """An integral or decimal engine value as a ``decimal.Decimal``."""
    return x if isinstance(x, decimal.Decimal) else decimal.Decimal(int(x))


def round_to_scale(x: decimal.Decimal, scale: int, rounding: str) -> decimal.Decimal:
    """``BigDecimal.setScale(scale, rounding)`` where it drops digits; fewer digits stay as they are."""
    if scale >= -int(x.as_tuple().exponent):
        return x
    if x.is_zero() or scale < -(x.adjusted() + 2):
        return decimal.Decimal((0, (0,), -scale)) if scale >= 0 else decimal.Decimal(0)
    return x.quantize(decimal.Decimal((0, (1,), -scale)), rounding=rounding, context=_EXACT)


def _half_towards_positive(x: decimal.Decimal) -> str:
    # ksqlDB's ROUND mirrors Math.round: a tie goes towards positive infinity.
    return decimal.ROUND_HALF_DOWN if x.is_signed() else decimal.ROUND_HALF_UP


def _decimal_type(arg: SqlType | None) -> T.Decimal:
    if arg is None:
        return T.Decimal(10, 0)
    return T.decimal_for_integral(arg)


def _same_decimal(args: Sequence[SqlType | None]) -> SqlType:
    return _decimal_type(args[0])


def _integral_decimal(args: Sequence[SqlType | None]) -> SqlType:
    d = _decimal_type(args[0])
    return T.Decimal(max(1, d.precision - d.scale), 0)


def _keep_scale(x: decimal.Decimal, rounded: decimal.Decimal) -> decimal.Decimal:
    exponent = int(x.as_tuple().exponent)
    return rounded.quantize(decimal.Decimal(1).scaleb(exponent, _EXACT), context=_EXACT)


def _round_double(x: float, places: int, rounding: str | None) -> float:
    if not math.isfinite(x):
        raise EvaluationError(f"Cannot round the double value {x!r} to {places} decimal places.")
    exact = decimal.Decimal(repr(x))  # BigDecimal.valueOf(double) starts from Double.toString
    mode = rounding or _half_towards_positive(exact)
    return float(round_to_scale(exact, places, mode))


# --------------------------------------------------------------------------- ABS, SIGN


@scalar("ABS", params=[T.INTEGER], returns=T.INTEGER, until=1)
def abs_int(x: int) -> int:
    """Absolute value."""
    return abs(x)


@scalar("ABS", params=[T.BIGINT], returns=T.BIGINT, until=1)
def abs_bigint(x: int) -> int:
    """Absolute value."""
    return abs(x)


@scalar("ABS", params=[T.INTEGER], returns=T.INTEGER, since=2)
def abs_int_java(x: int) -> int:
    """Absolute value; the smallest INTEGER stays itself, as Java's Math.abs wraps."""
    return wrap_int(abs(x))


@scalar("ABS", params=[T.BIGINT], returns=T.BIGINT, since=2)
def abs_bigint_java(x: int) -> int:
    """Absolute value; the smallest BIGINT stays itself, as Java's Math.abs wraps."""
    return wrap_long(abs(x))


@scalar("ABS", params=[ANY_DECIMAL], returns=_same_decimal)
def abs_decimal(x: decimal.Decimal) -> decimal.Decimal:
    """Absolute value."""
    return abs(as_decimal(x))


@scalar("ABS", params=[T.DOUBLE], returns=T.DOUBLE)
def abs_double(x: float) -> float:
    """Absolute value."""
    return abs(float(x))


def _signum(x: float | decimal.Decimal) -> int:
    if isinstance(x, float) and math.isnan(x):
        return 0
    return (x > 0) - (x < 0)


for _t in (T.INTEGER, T.BIGINT, ANY_DECIMAL, T.DOUBLE):
    scalar("SIGN", params=[_t], returns=T.INTEGER, description="The sign: -1, 0 or 1.")(_signum)


# --------------------------------------------------------------------------- CEIL, FLOOR


def _integral_identity(x: int) -> int:
    return int(x)


def _register_ceil_floor(name: str, op: Callable[[float], float], rounding: str) -> None:
    doc = f"{name.title()} of a number; integral types are returned unchanged."
    scalar(name, params=[T.INTEGER], returns=T.INTEGER, description=doc)(_integral_identity)
    scalar(name, params=[T.BIGINT], returns=T.BIGINT, description=doc)(_integral_identity)

    def double(x: float) -> float:
        x = float(x)
        return x if not math.isfinite(x) else float(op(x))

    def dec(x: decimal.Decimal) -> decimal.Decimal:
        d = as_decimal(x)
        return _keep_scale(d, round_to_scale(d, 0, rounding))

    # DECIMAL before DOUBLE: a DECIMAL argument fits both at the same cost, the first wins.
    scalar(name, params=[ANY_DECIMAL], returns=_same_decimal, description=doc)(dec)
    scalar(name, params=[T.DOUBLE], returns=T.DOUBLE, description=doc)(double)


_register_ceil_floor("CEIL", math.ceil, decimal.ROUND_CEILING)
_register_ceil_floor("FLOOR", math.floor, decimal.ROUND_FLOOR)


# --------------------------------------------------------------------------- ROUND, TRUNC


@scalar("ROUND", params=[T.BIGINT], returns=T.BIGINT)
def round_bigint(x: int) -> int:
    """An integral value is already rounded."""
    return int(x)


@scalar("ROUND", params=[T.INTEGER], returns=T.BIGINT)
def round_int(x: int) -> int:
    """An integral value is already rounded; an INTEGER comes back as a BIGINT."""
    return int(x)


@scalar("ROUND", params=[ANY_DECIMAL], returns=_integral_decimal)
def round_decimal(x: decimal.Decimal) -> decimal.Decimal:
    """Round to an integral DECIMAL; halves round towards positive infinity."""
    d = as_decimal(x)
    return round_to_scale(d, 0, _half_towards_positive(d))


@scalar("ROUND", params=[ANY_DECIMAL, T.INTEGER], returns=_same_decimal)
def round_decimal_places(x: decimal.Decimal, places: int) -> decimal.Decimal:
    """Round to ``places`` decimal places, keeping the argument's scale."""
    d = as_decimal(x)
    return _keep_scale(d, round_to_scale(d, places, _half_towards_positive(d)))


@scalar("ROUND", params=[T.DOUBLE], returns=T.BIGINT)
def round_double(x: float) -> int:
    """The nearest BIGINT; halves round towards positive infinity (``Math.round``)."""
    return java_round(float(x))


@scalar("ROUND", params=[T.DOUBLE, T.INTEGER], returns=T.DOUBLE)
def round_double_places(x: float, places: int) -> float:
    """Round to ``places`` decimal places (negative: to the left of the point)."""
    return _round_double(float(x), places, None)


@scalar("TRUNC", params=[T.INTEGER], returns=T.INTEGER, until=1)
def trunc_int(x: int) -> int:
    """An integral value is already truncated."""
    return int(x)


@scalar("TRUNC", params=[T.INTEGER], returns=T.BIGINT, since=2)
def trunc_int_to_bigint(x: int) -> int:
    """An integral value is already truncated; an INTEGER comes back as a BIGINT (ksqlDB's)."""
    return int(x)


@scalar("TRUNC", params=[T.BIGINT], returns=T.BIGINT)
def trunc_bigint(x: int) -> int:
    """An integral value is already truncated."""
    return int(x)


@scalar("TRUNC", params=[ANY_DECIMAL], returns=_integral_decimal)
def trunc_decimal(x: decimal.Decimal) -> decimal.Decimal:
    """Drop the fractional part (towards zero)."""
    return round_to_scale(as_decimal(x), 0, decimal.ROUND_DOWN)


@scalar("TRUNC", params=[ANY_DECIMAL, T.INTEGER], returns=_same_decimal)
def trunc_decimal_places(x: decimal.Decimal, places: int) -> decimal.Decimal:
    """Truncate towards zero to ``places`` decimal places, keeping the argument's scale."""
    d = as_decimal(x)
    return _keep_scale(d, round_to_scale(d, places, decimal.ROUND_DOWN))


@scalar("TRUNC", params=[T.DOUBLE], returns=T.BIGINT)
def trunc_double(x: float) -> int:
    """Drop the fractional part (towards zero)."""
    return to_java_long(float(x))


@scalar("TRUNC", params=[T.DOUBLE, T.INTEGER], returns=T.DOUBLE)
def trunc_double_places(x: float, places: int) -> float:
    """Truncate towards zero to ``places`` decimal places."""
    return _round_double(float(x), places, decimal.ROUND_DOWN)


# --------------------------------------------------------------------------- DOUBLE functions

_UNARY_DOUBLE: dict[str, tuple[Callable[[float], float], str]] = {
    "SQRT": (_nan_on_domain_error(math.sqrt), "Square root."),
    "CBRT": (java_cbrt, "Cube root."),
    "EXP": (_exp, "e raised to the power of the argument."),
    "LN": (java_ln, "Natural logarithm."),
    "SIN": (_nan_on_domain_error(math.sin), "Sine of an angle in radians."),
    "COS": (_nan_on_domain_error(math.cos), "Cosine of an angle in radians."),
    "TAN": (_nan_on_domain_error(math.tan), "Tangent of an angle in radians."),
    "COT": (_nan_on_domain_error(lambda x: java_div(1.0, math.tan(x))), "Cotangent."),
    "ASIN": (_nan_on_domain_error(math.asin), "Arc sine, in radians."),
    "ACOS": (_nan_on_domain_error(math.acos), "Arc cosine, in radians."),
    "ATAN": (math.atan, "Arc tangent, in radians."),
    "SINH": (_sinh, "Hyperbolic sine."),
    "COSH": (_cosh, "Hyperbolic cosine."),
    "TANH": (math.tanh, "Hyperbolic tangent."),
    "DEGREES": (math.degrees, "Radians converted to degrees."),
    "RADIANS": (math.radians, "Degrees converted to radians."),
}

_NUMERIC_PARAMS = (T.INTEGER, T.BIGINT, T.DOUBLE)


def _on_doubles(op: Callable[..., float]) -> Callable[..., float]:
    def apply(*args: float) -> float:
        return op(*(float(a) for a in args))

    return apply


for _name, (_op, _doc) in _UNARY_DOUBLE.items():
    for _t in _NUMERIC_PARAMS:
        scalar(_name, params=[_t], returns=T.DOUBLE, description=_doc)(_on_doubles(_op))


def _log_base_v1(base: float, value: float) -> float:
    return java_div(java_ln(value), java_ln(base))


def _log_base(base: float, value: float) -> float:
    """ksqlDB's: NaN for a base of 1 or at most 0, else ln(value) / ln(base)."""
    if base <= 0 or base == 1:
        return math.nan
    return java_div(java_ln(value), java_ln(base))


# LOG's version 1 took one argument as base 10 and divided by ln(1) = 0 for a base of 1; its
# version 2 is ksqlDB's: the natural logarithm, and NaN for a base of 1 or at most 0. Plans
# saved with version 1 keep it (engine.functions.registry).
_IN_A_BASE = "Logarithm of the second argument in the base of the first."
_LOG_VERSIONS: tuple[tuple[int, int | None, int, Callable[..., float], str], ...] = (
    # (since, until, arity, implementation, description)
    (1, 1, 1, java_log10, "Base-10 logarithm."),
    (2, None, 1, java_ln, "Natural logarithm."),
    (1, 1, 2, _log_base_v1, _IN_A_BASE),
    (2, None, 2, _log_base, _IN_A_BASE),
)
for _t in _NUMERIC_PARAMS:
    for _since, _until, _arity, _log, _doc in _LOG_VERSIONS:
        scalar(
            "LOG", params=[_t] * _arity, returns=T.DOUBLE, description=_doc, since=_since, until=_until
        )(_on_doubles(_log))
    scalar(
        "POWER",
        params=[_t, _t],
        returns=T.DOUBLE,
        description="The first argument raised to the power of the second.",
    )(_on_doubles(java_pow))
    scalar(
        "ATAN2",
        params=[_t, _t],
        returns=T.DOUBLE,
        description="Angle of the point (x, y) given as (y, x), in radians.",
    )(_on_doubles(math.atan2))


# ksqlDB ranks the overloads a call reaches only through implicit casts without a cost:
# ROUND(INTEGER, INTEGER) fits ROUND(DOUBLE, INTEGER) and ROUND(DECIMAL, INTEGER) alike and is
# ambiguous, as are LOG, POWER and ATAN2 of an INTEGER and a BIGINT. Earlier versions took
# the shortest widening; saved plans keep them.
REGISTRY.declare_ksqldb_ties("ROUND", since=2)
REGISTRY.declare_ksqldb_ties("TRUNC", since=3)
REGISTRY.declare_ksqldb_ties("LOG", since=3)
REGISTRY.declare_ksqldb_ties("POWER", since=2)
REGISTRY.declare_ksqldb_ties("ATAN2", since=2)


@scalar("PI", params=[], returns=T.DOUBLE)
def pi() -> float:
    """The constant pi."""
    return math.pi


@scalar("RANDOM", params=[], returns=T.DOUBLE)
def random_double() -> float:
    """A random DOUBLE in [0.0, 1.0)."""
    return random.random()
