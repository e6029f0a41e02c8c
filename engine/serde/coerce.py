"""Per-type converters between JSON-like QTT values and the engine's Python values.

``reader(type, path, ...)`` returns a function that coerces one JSON value (as the QTT loader
reads it: bool, int, decimal.Decimal, str, list, dict, None) to the engine's value for the
SQL type, as ksqlDB's JSON deserializer coerces (numbers between numeric types, numeric
strings to numbers, any scalar to STRING as its text, epoch numbers to DATE/TIME/TIMESTAMP,
base64 to BYTES, structs matched case-insensitively). ``writer(type)`` is the reverse.
Converters are built once per schema, so per-record work is a chain of direct calls.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
import math
import re
from collections.abc import Callable
from typing import Any

from engine.data.values import (
    date_from_days,
    date_to_days,
    format_double,
    time_from_millis,
    time_to_millis,
    timestamp_from_millis,
    timestamp_to_millis,
)
from engine.errors import RecordSerdeError
from engine.plan import types as T
from engine.serde.formats import describe

Converter = Callable[[Any], Any]

INTEGER_TEXT = re.compile(r"[+-]?\d+")
_INT_RANGES = {
    T.BaseType.INTEGER: (T.INT_MIN, T.INT_MAX),
    T.BaseType.BIGINT: (T.BIGINT_MIN, T.BIGINT_MAX),
}
_DECIMAL_CONTEXT = decimal.Context(prec=2000, rounding=decimal.ROUND_HALF_UP)


def _fail(path: str, sql_type: T.SqlType, value: Any, why: str = "") -> RecordSerdeError:
    extra = f" {why}" if why else ""
    return RecordSerdeError(
        f"Cannot deserialize field {path}: expected a value of type {sql_type}, "
        f"got {describe(value)}.{extra}"
    )


# --------------------------------------------------------------------------- readers


def _read_boolean(path: str, t: T.SqlType) -> Converter:
    def read(v: Any) -> Any:
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        raise _fail(path, t, v)

    return read


def _read_integral(path: str, t: T.SqlType) -> Converter:
    low, high = _INT_RANGES[t.base]

    def read(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, bool):
            raise _fail(path, t, v)
        if isinstance(v, int):
            result = v
        elif isinstance(v, decimal.Decimal | float):
            if not math.isfinite(v):
                raise _fail(path, t, v)
            result = int(v)  # Java's intValue()/longValue() truncate toward zero
        elif isinstance(v, str):
            if not INTEGER_TEXT.fullmatch(v):
                raise _fail(path, t, v, "The string is not an integer.")
            result = int(v)
        else:
            raise _fail(path, t, v)
        if not low <= result <= high:
            raise _fail(path, t, v, f"The number is out of range for {t}.")
        return result

    return read


def parse_java_double(text: str) -> float:
    """Parse a double as Java's Double.parseDouble does (trims, allows a d/f suffix)."""
    s = text.strip()
    if s in ("NaN", "Infinity", "+Infinity", "-Infinity"):
        return float(s.replace("Infinity", "inf").replace("NaN", "nan"))
    if s and s[-1] in "dDfF":
        s = s[:-1]
    if not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", s):
        raise ValueError(f"not a number: {text!r}")
    return float(s)


def _read_double(path: str, t: T.SqlType) -> Converter:
    def read(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, bool):
            raise _fail(path, t, v)
        if isinstance(v, int | float | decimal.Decimal):
            return float(v)
        if isinstance(v, str):
            try:
                return parse_java_double(v)
            except ValueError:
                raise _fail(path, t, v, "The string is not a number.") from None
        raise _fail(path, t, v)

    return read


def fit_decimal(value: decimal.Decimal, t: T.Decimal) -> decimal.Decimal:
    """Rescale to the type's scale (half-up) and check the precision, as ksqlDB's ensureFit."""
    if not value.is_finite():
        raise ValueError(f"Cannot fit decimal '{value}' into {t}: it is not a finite number.")
    scaled = value.quantize(decimal.Decimal(1).scaleb(-t.scale), context=_DECIMAL_CONTEXT)
    digits = len(scaled.as_tuple().digits)
    int_digits = max(digits + int(scaled.as_tuple().exponent), 0) if scaled else 0
    if int_digits > t.precision - t.scale:
        raise ValueError(
            f"Cannot fit decimal '{value}' into {t} without rounding. "
            f"(Requires {int_digits + t.scale},{t.scale})"
        )
    return scaled


def _read_decimal(path: str, t: T.Decimal) -> Converter:
    def read(v: Any) -> Any:
        if v is None:
            return None
        if isinstance(v, bool):
            raise _fail(path, t, v)
        if isinstance(v, decimal.Decimal):
            d = v
        elif isinstance(v, int):
            d = decimal.Decimal(v)
        elif isinstance(v, float):
            d = decimal.Decimal(repr(v))
        elif isinstance(v, str):
            try:
                d = decimal.Decimal(v)
            except decimal.InvalidOperation:
                raise _fail(path, t, v, "The string is not a decimal number.") from None
        else:
            raise _fail(path, t, v)
        try:
            return fit_decimal(d, t)
        except ValueError as exc:
            raise _fail(path, t, v, str(exc)) from None

    return read


def json_text(v: Any) -> str:
    """Compact JSON text of a JSON-like value, as Jackson writes it (``{"a":1}``).

    Decimals keep their exact digits and scale, which ``json.dumps`` cannot do.
    """
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise RecordSerdeError(f"Cannot write the double {v!r} as JSON: it is not finite.")
        return repr(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, bytes):
        return json.dumps(base64.b64encode(v).decode("ascii"))
    if isinstance(v, dict):
        return "{" + ",".join(f"{json_text(str(k))}:{json_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list | tuple):
        return "[" + ",".join(json_text(x) for x in v) + "]"
    raise RecordSerdeError(f"Cannot write {describe(v)} as JSON: unsupported Python type.")


def scalar_text(v: Any) -> str:
    """The text ksqlDB gives a JSON value coerced to STRING (``asText``, arrays element-wise)."""
    if isinstance(v, str):
        return v
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return format_double(v)
    if isinstance(v, int | decimal.Decimal):
        return str(v)
    if isinstance(v, dict):
        return json_text(v)
    if isinstance(v, list):
        return "[" + ", ".join(scalar_text(x) for x in v) + "]"
    if isinstance(v, bytes):
        return base64.b64encode(v).decode("ascii")
    return str(v)


def _read_string(path: str, t: T.SqlType) -> Converter:
    def read(v: Any) -> Any:
        if v is None or isinstance(v, str):
            return v
        return scalar_text(v)

    return read


def _read_bytes(path: str, t: T.SqlType) -> Converter:
    def read(v: Any) -> Any:
        if v is None or isinstance(v, bytes):
            return v
        if isinstance(v, str):
            try:
                return base64.b64decode(v, validate=True)
            except (binascii.Error, ValueError):
                # ksqlDB's JSON deserializer's words (its message names no field).
                raise RecordSerdeError(f"Value is not a valid Base64 encoded string: {v}") from None
        raise _fail(path, t, v)

    return read


def _integral_of(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, decimal.Decimal) and v.is_finite() and v == v.to_integral_value():
        return int(v)
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and INTEGER_TEXT.fullmatch(v):
        return int(v)
    return None


def _read_temporal(path: str, t: T.SqlType) -> Converter:
    native, convert = {
        T.BaseType.DATE: (dt.date, date_from_days),
        T.BaseType.TIME: (dt.time, time_from_millis),
        T.BaseType.TIMESTAMP: (dt.datetime, timestamp_from_millis),
    }[t.base]
    unit = {T.BaseType.DATE: "days", T.BaseType.TIME: "milliseconds of the day"}.get(
        t.base, "epoch milliseconds"
    )

    def read(v: Any) -> Any:
        if v is None:
            return None
        # datetime is a subclass of date: a DATE column must not accept a datetime unchanged.
        if type(v) is native:
            return v
        n = _integral_of(v)
        if n is None:
            raise _fail(path, t, v, f"Expected {unit} as an integer.")
        try:
            return convert(n)
        except OverflowError:
            raise _fail(path, t, v, "The value is out of range.") from None

    return read


def struct_lookup(obj: dict[str, Any], name: str, upper: dict[str, Any] | None) -> Any:
    """A field of a JSON object for a column/field name, as ksqlDB matches it.

    Exact name first, then the object's keys upper-cased (unquoted SQL names are upper-case,
    so ``foo`` in the data matches column ``FOO``, but a quoted ``foo`` column only matches
    ``foo``).
    """
    if name in obj:
        return obj[name]
    if upper is None:
        return None
    return upper.get(name)


def upper_keys(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's fields keyed by upper-cased name (later keys win, like ksqlDB)."""
    return {str(k).upper(): v for k, v in obj.items()}


def protobuf_default(t: T.SqlType) -> Any:
    """The value protobuf reads for an absent field of this type (None if it has no default)."""
    return {
        T.BaseType.BOOLEAN: False,
        T.BaseType.INTEGER: 0,
        T.BaseType.BIGINT: 0,
        T.BaseType.DOUBLE: 0.0,
        T.BaseType.STRING: "",
    }.get(t.base, [] if isinstance(t, T.Array) else {} if isinstance(t, T.Map) else None)


def reader(t: T.SqlType, path: str, *, proto_defaults: bool = False) -> Converter:
    """A converter from a JSON-like value to the engine value of type ``t``."""
    base = reader_without_default(t, path, proto_defaults=proto_defaults)
    if not proto_defaults:
        return base
    default = protobuf_default(t)
    if default is None:
        return base

    def read_or_default(v: Any) -> Any:
        if v is None:
            return default.copy() if isinstance(default, list | dict) else default
        return base(v)

    return read_or_default


def reader_without_default(t: T.SqlType, path: str, *, proto_defaults: bool = False) -> Converter:
    """Like ``reader`` but keeps NULL as NULL at this level."""
    if isinstance(t, T.Decimal):
        return _read_decimal(path, t)
    if isinstance(t, T.Array):
        item = reader(t.item, f"{path}[]", proto_defaults=proto_defaults)

        def read_array(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, list):
                raise _fail(path, t, v)
            return [item(x) for x in v]

        return read_array
    if isinstance(t, T.Map):
        key = reader(t.key, f"{path}{{key}}")
        value = reader(t.value, f"{path}{{}}", proto_defaults=proto_defaults)

        def read_map(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                raise _fail(path, t, v)
            return {key(k): value(x) for k, x in v.items()}

        return read_map
    if isinstance(t, T.Struct):
        return struct_reader(t, path, proto_defaults=proto_defaults)
    factory = _PRIMITIVE_READERS[t.base]
    return factory(path, t)


def struct_reader(t: T.Struct, path: str, *, proto_defaults: bool = False) -> Converter:
    """A converter from a JSON object to a STRUCT dict (fields case-insensitively matched)."""
    fields = tuple(
        (f.name, reader(f.type, f"{path}.{f.name}", proto_defaults=proto_defaults))
        for f in t.fields
    )
    names = frozenset(f.name for f in t.fields)

    def read_struct(v: Any) -> Any:
        if v is None:
            return None
        if not isinstance(v, dict):
            raise _fail(path, t, v)
        upper = None if names.issubset(v) else upper_keys(v)
        return {name: conv(struct_lookup(v, name, upper)) for name, conv in fields}

    return read_struct


_PRIMITIVE_READERS: dict[T.BaseType, Callable[[str, T.SqlType], Converter]] = {
    T.BaseType.BOOLEAN: _read_boolean,
    T.BaseType.INTEGER: _read_integral,
    T.BaseType.BIGINT: _read_integral,
    T.BaseType.DOUBLE: _read_double,
    T.BaseType.STRING: _read_string,
    T.BaseType.BYTES: _read_bytes,
    T.BaseType.DATE: _read_temporal,
    T.BaseType.TIME: _read_temporal,
    T.BaseType.TIMESTAMP: _read_temporal,
}


# --------------------------------------------------------------------------- writers


def _write_error(t: T.SqlType, v: Any) -> RecordSerdeError:
    return RecordSerdeError(
        f"Cannot serialize {describe(v)} as {t}: the value does not have the column's type."
    )


def _identity(v: Any) -> Any:
    return v


def _write_double(v: Any) -> Any:
    """Doubles as floats; NaN and infinities as the strings Jackson writes for them."""
    if v is None:
        return None
    f = float(v)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "Infinity" if f > 0 else "-Infinity"
    return f


def _write_bytes(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return base64.b64encode(bytes(v)).decode("ascii")


def _write_date(v: Any) -> Any:
    return date_to_days(v) if isinstance(v, dt.date) else v


def _write_time(v: Any) -> Any:
    return time_to_millis(v) if isinstance(v, dt.time) else v


def _write_timestamp(v: Any) -> Any:
    return timestamp_to_millis(v) if isinstance(v, dt.datetime) else v


def _write_decimal(t: T.Decimal) -> Converter:
    def write(v: Any) -> Any:
        if v is None:
            return None
        d = (
            v
            if isinstance(v, decimal.Decimal)
            else decimal.Decimal(repr(v) if isinstance(v, float) else v)
        )
        try:
            return fit_decimal(d, t)
        except ValueError as exc:
            raise RecordSerdeError(f"Cannot serialize {describe(v)}: {exc}") from None

    return write


_PRIMITIVE_WRITERS: dict[T.BaseType, Converter] = {
    T.BaseType.BOOLEAN: _identity,
    T.BaseType.INTEGER: _identity,
    T.BaseType.BIGINT: _identity,
    T.BaseType.DOUBLE: _write_double,
    T.BaseType.STRING: _identity,
    T.BaseType.BYTES: _write_bytes,
    T.BaseType.DATE: _write_date,
    T.BaseType.TIME: _write_time,
    T.BaseType.TIMESTAMP: _write_timestamp,
}


def writer(t: T.SqlType, *, proto_defaults: bool = False) -> Converter:
    """A converter from the engine value of type ``t`` to its JSON-like QTT form."""
    base = writer_without_default(t, proto_defaults=proto_defaults)
    default = protobuf_default(t) if proto_defaults else None
    if default is None:
        return base

    def write_or_default(v: Any) -> Any:
        if v is None:
            return default.copy() if isinstance(default, list | dict) else default
        return base(v)

    return write_or_default


def writer_without_default(t: T.SqlType, *, proto_defaults: bool = False) -> Converter:
    """Like ``writer`` but keeps NULL as NULL at this level."""
    if isinstance(t, T.Decimal):
        return _write_decimal(t)
    if isinstance(t, T.Array):
        item = writer(t.item, proto_defaults=proto_defaults)

        def write_array(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, list | tuple):
                raise _write_error(t, v)
            return [item(x) for x in v]

        return write_array
    if isinstance(t, T.Map):
        key = writer(t.key)
        value = writer(t.value, proto_defaults=proto_defaults)

        def write_map(v: Any) -> Any:
            if v is None:
                return None
            if not isinstance(v, dict):
                raise _write_error(t, v)
            return {scalar_text(key(k)): value(x) for k, x in v.items()}

        return write_map
    if isinstance(t, T.Struct):
        return struct_writer(t, proto_defaults=proto_defaults)
    return _PRIMITIVE_WRITERS[t.base]


def struct_writer(t: T.Struct, *, proto_defaults: bool = False) -> Converter:
    """A converter from a STRUCT dict to a JSON object with the fields in schema order."""
    fields = tuple((f.name, writer(f.type, proto_defaults=proto_defaults)) for f in t.fields)

    def write_struct(v: Any) -> Any:
        if v is None:
            return None
        if not isinstance(v, dict):
            raise _write_error(t, v)
        return {name: conv(v.get(name)) for name, conv in fields}

    return write_struct
