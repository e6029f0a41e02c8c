"""CAST and implicit coercion of engine values between SQL types (ksqlDB/Java semantics).

``make_cast`` / ``make_coercion`` build a converter once per (source, target) pair, so the
evaluator resolves every conversion at compile time. Converters raise ValueError or
ArithmeticError for a value that cannot be converted; the evaluator wraps those in
EvaluationError.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
from collections.abc import Callable
from typing import Any

from engine.data.java_double import java_double_to_string
from engine.data.values import (
    format_date,
    format_double,
    format_time,
    format_timestamp,
    parse_date_text,
    parse_time_text,
    parse_timestamp_text,
)
from engine.errors import TypeCheckError, newer_behaviour_error
from engine.plan import types as T
from engine.plan.types import BaseType, SqlType

Converter = Callable[[Any], Any]

# Wide enough for every DECIMAL(p, s) with p <= 1000, so exact operations stay exact.
DECIMAL_CONTEXT = decimal.Context(
    prec=2100, rounding=decimal.ROUND_HALF_UP, Emax=999_999, Emin=-999_999
)

_TRUE_WORDS = frozenset({"true", "t", "yes", "y"})
_FALSE_WORDS = frozenset({"false", "f", "no", "n"})
_INTEGER_TEXT = re.compile(r"[+-]?\d+")


def _identity(value: Any) -> Any:
    return value


# --------------------------------------------------------------------------- Java numbers


def wrap_int(value: int) -> int:
    """Wrap an integer to Java ``int`` (32-bit two's complement)."""
    return ((value + 2**31) % 2**32) - 2**31


def wrap_bigint(value: int) -> int:
    """Wrap an integer to Java ``long`` (64-bit two's complement)."""
    return ((value + 2**63) % 2**64) - 2**63


def _double_to_integral(value: float, low: int, high: int) -> int:
    # Java's narrowing of a double saturates at the bounds and maps NaN to 0.
    if math.isnan(value):
        return 0
    if value >= high:
        return high
    if value <= low:
        return low
    return int(value)


def to_decimal(value: decimal.Decimal, precision: int, scale: int) -> decimal.Decimal:
    """Round ``value`` HALF_UP to ``scale`` and check it fits DECIMAL(precision, scale)."""
    rounded = value.quantize(decimal.Decimal(1).scaleb(-scale), context=DECIMAL_CONTEXT)
    if rounded != 0 and rounded.adjusted() >= precision - scale:
        raise ArithmeticError(
            f"Numeric field overflow: A field with precision {precision} and scale {scale} "
            f"must round to an absolute value less than 10^{precision - scale}. Got {format_decimal(value)}"
        )
    return rounded


def decimal_of(value: Any) -> decimal.Decimal:
    """The exact decimal of an int, float (via its shortest text, as Java) or Decimal."""
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ArithmeticError(f"Cannot convert the double {format_double(value)} to a DECIMAL.")
        return decimal.Decimal(repr(value))
    return decimal.Decimal(value)


def format_decimal(value: decimal.Decimal) -> str:
    """A DECIMAL as plain text keeping its scale (Java ``toPlainString``)."""
    return format(value, "f")


# --------------------------------------------------------------------------- to string


def java_string(
    value: Any, sql_type: SqlType | None, double_text: Callable[[float], str] = format_double
) -> str:
    """The text Java's ``toString`` gives a value of this type (as CAST(... AS STRING) does).

    ``double_text`` writes a DOUBLE: ``java_double_to_string`` is the JDK's own digits (CAST
    since version 3); the default is the shortest text that reads back, as version 1 wrote.
    """
    if value is None:
        return "null"
    base = sql_type.base if sql_type is not None else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if base is BaseType.DOUBLE or isinstance(value, float):
        return double_text(float(value))
    if isinstance(value, decimal.Decimal):
        return format_decimal(value)
    if isinstance(value, dt.datetime):
        return format_timestamp(value)
    if isinstance(value, dt.date):
        return format_date(value)
    if isinstance(value, dt.time):
        return format_time(value)
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        item = sql_type.item if isinstance(sql_type, T.Array) else None
        return "[" + ", ".join(java_string(v, item, double_text) for v in value) + "]"
    if isinstance(sql_type, T.Struct) and isinstance(value, dict):
        # Kafka Connect's Struct.toString skips null fields.
        parts = [
            f"{f.name}={java_string(value.get(f.name), f.type, double_text)}"
            for f in sql_type.fields
            if value.get(f.name) is not None
        ]
        return "Struct{" + ",".join(parts) + "}"
    if isinstance(value, dict):
        kt = sql_type.key if isinstance(sql_type, T.Map) else None
        vt = sql_type.value if isinstance(sql_type, T.Map) else None
        return "{" + ", ".join(
            f"{java_string(k, kt, double_text)}={java_string(v, vt, double_text)}" for k, v in value.items()
        ) + "}"
    return str(value)


# --------------------------------------------------------------------------- from string


def parse_boolean_exact(text: str) -> bool:
    """Parse a BOOLEAN literal text (true/false/t/f/yes/no/y/n); ValueError otherwise."""
    word = text.strip().lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    raise ValueError(f'invalid input syntax for type BOOLEAN: "{text}"')


def _parse_integral(text: str, type_name: str, low: int, high: int) -> int:
    stripped = text.strip()
    if not _INTEGER_TEXT.fullmatch(stripped):
        raise ValueError(f'invalid input syntax for type {type_name}: "{text}"')
    value = int(stripped)
    if not low <= value <= high:
        raise ValueError(f'value "{text}" is out of range for type {type_name}')
    return value


def parse_double(text: str) -> float:
    """Parse a DOUBLE as Java's Double.parseDouble does (NaN, Infinity, exponents)."""
    stripped = text.strip()
    if stripped.endswith(("d", "D", "f", "F")):
        stripped = stripped[:-1]
    if stripped.lstrip("+-") in ("NaN", "Infinity"):
        return float(stripped.replace("Infinity", "inf"))
    try:
        if stripped.lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise ValueError
        return float(stripped)
    except ValueError:
        raise ValueError(f'invalid input syntax for type DOUBLE: "{text}"') from None


def parse_decimal(text: str) -> decimal.Decimal:
    """Parse decimal text as Java's ``new BigDecimal(text)``."""
    try:
        value = decimal.Decimal(text.strip())
    except decimal.InvalidOperation:
        raise ValueError(f'invalid input syntax for type DECIMAL: "{text}"') from None
    if not value.is_finite():
        raise ValueError(f'invalid input syntax for type DECIMAL: "{text}"')
    return value


def numeric_type_of_text(text: str) -> SqlType:
    """The narrowest numeric type of a number written as text (ksqlDB's literal rules)."""
    value = parse_decimal(text)
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    if exponent >= 0:
        # Whole to ksqlDB only at BigDecimal scale 0: '2e1' (scale -1) is DECIMAL(2, 0).
        integral = int(value)
        if exponent == 0 and T.INT_MIN <= integral <= T.INT_MAX:
            return T.INTEGER
        if exponent == 0 and T.BIGINT_MIN <= integral <= T.BIGINT_MAX:
            return T.BIGINT
        return T.Decimal(min(len(str(abs(integral))), 1000), 0)
    scale = -exponent
    precision = max(len(digits), scale)
    return T.Decimal(min(precision, 1000), min(scale, 1000))


# --------------------------------------------------------------------------- CAST


def cast_supported(source: SqlType | None, target: SqlType) -> bool:
    """Whether ksqlDB allows ``CAST(<source> AS <target>)``."""
    if source is None or source == target:
        return True
    sb, tb = source.base, target.base
    if tb is BaseType.STRING:
        return sb is not BaseType.BYTES
    if sb is BaseType.STRING:
        return tb in (
            BaseType.BYTES,
            BaseType.BOOLEAN,
            BaseType.INTEGER,
            BaseType.BIGINT,
            BaseType.DOUBLE,
            BaseType.DECIMAL,
            BaseType.TIMESTAMP,
            BaseType.DATE,
            BaseType.TIME,
        )
    if source.is_numeric and target.is_numeric:
        return True
    if sb is BaseType.TIMESTAMP:
        return tb in (BaseType.DATE, BaseType.TIME)
    if sb is BaseType.DATE:
        return tb is BaseType.TIMESTAMP
    if isinstance(source, T.Array) and isinstance(target, T.Array):
        return cast_supported(source.item, target.item)
    if isinstance(source, T.Map) and isinstance(target, T.Map):
        return cast_supported(source.key, target.key) and cast_supported(source.value, target.value)
    if isinstance(source, T.Struct) and isinstance(target, T.Struct):
        for f in target.fields:
            src = source.field(f.name)
            if src is not None and not cast_supported(src.type, f.type):
                return False
        return True
    return False


def check_cast(source: SqlType | None, target: SqlType) -> None:
    """Raise TypeCheckError when ksqlDB does not support the CAST."""
    if not cast_supported(source, target):
        raise TypeCheckError(f"Cast of {source} to {target} is not supported.")


def _null_safe(fn: Converter) -> Converter:
    def convert(value: Any) -> Any:
        return None if value is None else fn(value)

    return convert


# Versions of CAST's behaviour (``Cast.semantics`` in a plan, 1 in plans saved before CAST
# was versioned), each with the casts it changed, named by their target type. A new plan
# records, per CAST, the latest version that changed casts to its target type, so a change
# leaves the plans of the other casts as they were.
_CAST_CHANGES: tuple[tuple[int, Callable[[SqlType], bool]], ...] = (
    # 2: STRING to DATE reads ksqlDB's partial timestamp text ('1970-01', '2020-05-01T10:00')
    # and takes its UTC day; version 1 read only yyyy-MM-dd.
    (2, lambda t: _mentions(t, BaseType.DATE)),
    # 3: a DOUBLE becomes text with the JDK's Double.toString digits (java_double_to_string),
    # not the shortest text that reads back; a DOUBLE becomes a DECIMAL from its exact binary
    # value rounded to the precision first, then to the scale (DecimalUtil's two HALF_UP
    # steps), not from its shortest text; STRING to BYTES decodes base64 (refused before).
    (3, lambda t: any(_mentions(t, b) for b in (BaseType.STRING, BaseType.DECIMAL, BaseType.BYTES))),
)
CAST_SEMANTICS = max(version for version, _ in _CAST_CHANGES)


def _mentions(t: SqlType, base: BaseType) -> bool:
    if t.base is base:
        return True
    if isinstance(t, T.Array):
        return _mentions(t.item, base)
    if isinstance(t, T.Map):
        return _mentions(t.key, base) or _mentions(t.value, base)
    if isinstance(t, T.Struct):
        return any(_mentions(f.type, base) for f in t.fields)
    return False


def cast_semantics(target: SqlType, newest: int = CAST_SEMANTICS) -> int:
    """The version of CAST's behaviour a new plan records for a cast to ``target``, among
    versions up to ``newest`` (an earlier release's newest, for a service that keeps it)."""
    return max((v for v, changed in _CAST_CHANGES if changed(target) and v <= newest), default=1)


# The source types whose cast to STRING is Java's String.valueOf when ksqlDB's
# ksql.cast.strings.preserve.nulls is false (CastEvaluator.castToString): a NULL becomes 'null'.
# DECIMAL, TIMESTAMP, TIME and DATE have their own null-safe formatters, so NULL stays NULL.
_VALUE_OF_SOURCES = frozenset({
    BaseType.BOOLEAN, BaseType.INTEGER, BaseType.BIGINT, BaseType.DOUBLE,
    BaseType.ARRAY, BaseType.MAP, BaseType.STRUCT,
})


def make_cast(
    source: SqlType | None, target: SqlType, semantics: int = 1, *, null_text: bool = False
) -> Converter:
    """A converter applying CAST semantics from ``source`` to ``target`` (NULL stays NULL),
    as version ``semantics`` of CAST's behaviour does (``CAST_SEMANTICS``).

    ``null_text``: ksqlDB's ``ksql.cast.strings.preserve.nulls=false``, where a NULL cast to
    STRING from one of ``_VALUE_OF_SOURCES`` is the text 'null', also inside a collection cast.
    """
    if semantics > CAST_SEMANTICS:
        raise newer_behaviour_error("A CAST", semantics, CAST_SEMANTICS)
    check_cast(source, target)
    if source is None or source == target:
        if isinstance(target, T.Decimal) and source is None:
            return _null_safe(lambda v: to_decimal(decimal_of(v), target.precision, target.scale))
        return _identity
    fn = _cast_fn(source, target, semantics, null_text)
    if null_text and target.base is BaseType.STRING and source.base in _VALUE_OF_SOURCES:
        return lambda v: "null" if v is None else fn(v)
    return _null_safe(fn)


def _cast_fn(source: SqlType, target: SqlType, semantics: int, null_text: bool = False) -> Converter:
    sb, tb = source.base, target.base
    if tb is BaseType.STRING:
        if sb is BaseType.STRING:
            return _identity
        if semantics >= 3:
            return lambda v: java_string(v, source, java_double_to_string)
        return lambda v: java_string(v, source)
    if sb is BaseType.STRING:
        return _from_string(target, semantics)
    if source.is_numeric and target.is_numeric:
        if semantics >= 3 and sb is BaseType.DOUBLE and isinstance(target, T.Decimal):
            p, s = target.precision, target.scale
            return lambda v: double_to_decimal(v, p, s)
        return _numeric_cast(source, target)
    if sb is BaseType.TIMESTAMP and tb is BaseType.DATE:
        return lambda v: v.date()
    if sb is BaseType.TIMESTAMP and tb is BaseType.TIME:
        return lambda v: v.time()
    if sb is BaseType.DATE and tb is BaseType.TIMESTAMP:
        return lambda v: dt.datetime(v.year, v.month, v.day)
    if isinstance(source, T.Array) and isinstance(target, T.Array):
        item = make_cast(source.item, target.item, semantics, null_text=null_text)
        return lambda v: [item(x) for x in v]
    if isinstance(source, T.Map) and isinstance(target, T.Map):
        key = make_cast(source.key, target.key, semantics, null_text=null_text)
        val = make_cast(source.value, target.value, semantics, null_text=null_text)
        return lambda v: {key(k): val(x) for k, x in v.items()}
    if isinstance(source, T.Struct) and isinstance(target, T.Struct):
        return _struct_converter(source, target, lambda s, t: make_cast(s, t, semantics, null_text=null_text))
    raise TypeCheckError(f"Cast of {source} to {target} is not supported.")


def _struct_converter(
    source: T.Struct, target: T.Struct, make: Callable[[SqlType, SqlType], Converter]
) -> Converter:
    plan: list[tuple[str, Converter | None]] = []
    for f in target.fields:
        src = source.field(f.name)
        plan.append((f.name, None if src is None else make(src.type, f.type)))

    def convert(value: dict[str, Any]) -> dict[str, Any]:
        return {name: None if fn is None else fn(value.get(name)) for name, fn in plan}

    return convert


def _from_string(target: SqlType, semantics: int) -> Converter:
    tb = target.base
    if tb is BaseType.BOOLEAN:
        # CAST is lenient like Java's Boolean.parseBoolean: anything but true-words is false.
        return lambda v: v.strip().lower() in _TRUE_WORDS
    if tb is BaseType.INTEGER:
        return lambda v: _parse_integral(v, "INTEGER", T.INT_MIN, T.INT_MAX)
    if tb is BaseType.BIGINT:
        return lambda v: _parse_integral(v, "BIGINT", T.BIGINT_MIN, T.BIGINT_MAX)
    if tb is BaseType.DOUBLE:
        return parse_double
    if isinstance(target, T.Decimal):
        p, s = target.precision, target.scale
        return lambda v: to_decimal(parse_decimal(v), p, s)
    if tb is BaseType.TIMESTAMP:
        return parse_timestamp_text
    if tb is BaseType.DATE:
        return parse_date_text if semantics < 2 else _partial_date
    if tb is BaseType.TIME:
        return parse_time_text
    if tb is BaseType.BYTES:
        return parse_base64
    raise TypeCheckError(f"Cast of STRING to {target} is not supported.")


_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?")


def parse_base64(text: str) -> bytes:
    """CAST of STRING to BYTES: the trimmed text decoded as basic base64 (Java's
    ``Base64.getDecoder()``: padding optional, no other characters)."""
    import base64

    stripped = text.strip()
    if len(stripped) % 4 == 1 or not _BASE64_TEXT.fullmatch(stripped):
        raise ValueError(f"Illegal base64 text: '{text}'")
    return base64.b64decode(stripped + "=" * (-len(stripped) % 4))


def double_to_decimal(value: float, precision: int, scale: int) -> decimal.Decimal:
    """CAST of DOUBLE to DECIMAL(p, s) since version 3, as ksqlDB's ``DecimalUtil.cast``:
    the double's exact binary value rounded HALF_UP to ``precision`` significant digits,
    refused when that reaches 10^(p - s), then rounded HALF_UP to ``scale``."""
    if math.isnan(value) or math.isinf(value):
        raise ArithmeticError(f"Cannot convert the double {format_double(value)} to a DECIMAL.")
    exact = decimal.Decimal(value)
    context = decimal.Context(prec=precision, rounding=decimal.ROUND_HALF_UP, Emax=999_999, Emin=-999_999)
    rounded = context.plus(exact)
    if rounded != 0 and rounded.adjusted() >= precision - scale:
        raise ArithmeticError(
            f"Numeric field overflow: A field with precision {precision} and scale {scale} "
            f"must round to an absolute value less than 10^{precision - scale}. Got {format_decimal(rounded)}"
        )
    return rounded.quantize(decimal.Decimal(1).scaleb(-scale), context=DECIMAL_CONTEXT)


def _partial_date(text: str) -> dt.date:
    """CAST's STRING to DATE since version 2: ksqlDB's partial timestamp text, its UTC day."""
    return parse_timestamp_text(text).date()


def _numeric_cast(source: SqlType, target: SqlType) -> Converter:
    sb, tb = source.base, target.base
    if tb is BaseType.INTEGER:
        if sb is BaseType.DOUBLE:
            return lambda v: _double_to_integral(v, T.INT_MIN, T.INT_MAX)
        return lambda v: wrap_int(int(v))
    if tb is BaseType.BIGINT:
        if sb is BaseType.DOUBLE:
            return lambda v: _double_to_integral(v, T.BIGINT_MIN, T.BIGINT_MAX)
        return lambda v: wrap_bigint(int(v))
    if tb is BaseType.DOUBLE:
        return float
    assert isinstance(target, T.Decimal)
    p, s = target.precision, target.scale
    return lambda v: to_decimal(decimal_of(v), p, s)


def cast_value(value: Any, source: SqlType | None, target: SqlType) -> Any:
    """Apply CAST semantics to one value; ValueError/ArithmeticError if it cannot convert."""
    return make_cast(source, target)(value)


# --------------------------------------------------------------------------- implicit coercion


def make_coercion(source: SqlType | None, target: SqlType) -> Converter:
    """A converter for implicit widening (INTEGER -> BIGINT -> DECIMAL -> DOUBLE, element-wise)."""
    if source is None or source == target:
        return _identity
    if source.is_numeric and target.is_numeric:
        if target.base is BaseType.DOUBLE:
            return _null_safe(float)
        if isinstance(target, T.Decimal):
            p, s = target.precision, target.scale
            return _null_safe(lambda v: to_decimal(decimal_of(v), p, s))
        return _identity  # INTEGER -> BIGINT: both Python ints
    if isinstance(source, T.Array) and isinstance(target, T.Array):
        item = make_coercion(source.item, target.item)
        if item is _identity:
            return _identity
        return _null_safe(lambda v: [item(x) for x in v])
    if isinstance(source, T.Map) and isinstance(target, T.Map):
        key, val = make_coercion(source.key, target.key), make_coercion(source.value, target.value)
        if key is _identity and val is _identity:
            return _identity
        return _null_safe(lambda v: {key(k): val(x) for k, x in v.items()})
    if isinstance(source, T.Struct) and isinstance(target, T.Struct):
        return _null_safe(_struct_converter(source, target, make_coercion))
    if target.base is BaseType.STRING:
        return _null_safe(lambda v: java_string(v, source))
    if source.base is BaseType.STRING:
        return _null_safe(_from_string(target, 1))  # implicit coercions are not versioned
    return _identity


def coerce_value(value: Any, source: SqlType | None, target: SqlType) -> Any:
    """Widen one value implicitly from ``source`` to ``target`` (e.g. INTEGER 1 -> DOUBLE 1.0)."""
    return make_coercion(source, target)(value)


def make_text_literal_conversion(target: SqlType) -> Converter:
    """Convert a STRING literal's text to ``target`` as a common-type member (``'2e1'`` -> 20)."""
    if target.is_numeric:

        def number(text: str) -> Any:
            value = parse_decimal(text)
            if target.base is BaseType.DOUBLE:
                return float(value)
            if isinstance(target, T.Decimal):
                return to_decimal(value, target.precision, target.scale)
            if value != value.to_integral_value():
                raise ValueError(f'invalid input syntax for type {target}: "{text}"')
            return int(value)

        return _null_safe(number)
    if target.base is BaseType.BOOLEAN:
        return _null_safe(parse_boolean_exact)
    return make_cast(T.STRING, target)
