"""NULL handling, GREATEST / LEAST over any comparable type, and GEO_DISTANCE.

DECIMAL parameters use ``ANY_DECIMAL`` (the same stand-in as ``lib_math``): any DECIMAL or
integral argument matches it and the result type is computed from the actual arguments;
implementations accept ``int`` and ``decimal.Decimal`` values alike.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable, Sequence
from typing import Any

from engine.errors import EvaluationError
from engine.functions.registry import Generic, scalar
from engine.plan import types as T
from engine.plan.types import SqlType

ANY_DECIMAL = T.Decimal(1000, 0)
"""Stands for every DECIMAL(p, s) in a signature; the return type follows the arguments."""

_T = Generic("T")


# --------------------------------------------------------------------------- NULL handling


@scalar("IFNULL", params=[_T, _T], returns=_T, null_propagating=False)
def ifnull(value: Any, fallback: Any) -> Any:
    """``value`` unless it is NULL, else ``fallback``."""
    return fallback if value is None else value


@scalar("COALESCE", params=[_T, _T], returns=_T, variadic=True, null_propagating=False)
def coalesce(*values: Any) -> Any:
    """The first non-NULL argument, or NULL."""
    return next((v for v in values if v is not None), None)


@scalar("NULLIF", params=[_T, _T], returns=_T, null_propagating=False, until=1)
def nullif(value: Any, other: Any) -> Any:
    """NULL if both arguments are equal, else the first one."""
    if value is not None and other is not None and value == other:
        return None
    return value


def java_equals(a: Any, b: Any) -> bool:
    """Java's ``Object.equals`` for the engine's values: a DOUBLE equals by its bits
    (``Double.equals``: NaN equals NaN, 0.0 does not equal -0.0), a DECIMAL by value and scale
    (``BigDecimal.equals``: 1.0 does not equal 1.00), lists, maps and structs element by
    element; NULL equals only NULL inside them."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, float) and isinstance(b, float)):
            return False
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, decimal.Decimal) or isinstance(b, decimal.Decimal):
        return (
            isinstance(a, decimal.Decimal)
            and isinstance(b, decimal.Decimal)
            and a == b
            and a.as_tuple().exponent == b.as_tuple().exponent
        )
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(java_equals(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(java_equals(v, b[k]) for k, v in a.items())
    return bool(a == b)


@scalar("NULLIF", params=[_T, _T], returns=_T, null_propagating=False, since=2)
def nullif_java(value: Any, other: Any) -> Any:
    """NULL if both arguments are equal as Java's ``equals`` has it, else the first one.

    A DOUBLE NaN equals NaN, 0.0 does not equal -0.0, a DECIMAL's scale counts."""
    if value is None or java_equals(value, other):
        return None
    return value


# --------------------------------------------------------------------------- GREATEST / LEAST


def _signed_bytes_key(b: bytes) -> bytes:
    # Java's ByteBuffer.compareTo compares bytes as signed values.
    return bytes(x ^ 0x80 for x in b)


def _widest_decimal(args: Sequence[SqlType | None]) -> SqlType:
    present = [a for a in args if a is not None]
    if not present:
        return T.Decimal(10, 0)
    result = T.decimal_for_integral(present[0])
    for a in present[1:]:
        result = T.widen_numeric(result, T.decimal_for_integral(a))  # type: ignore[assignment]
    return result


def _pick(values: tuple[Any, ...], choose: Callable[..., Any], key: Any = None) -> Any:
    present = [v for v in values if v is not None]
    if not present:
        return None
    return choose(present, key=key) if key is not None else choose(present)


def _register_extreme(name: str, choose: Callable[..., Any]) -> None:
    doc = f"The {'largest' if choose is max else 'smallest'} non-NULL argument, or NULL."
    plain = [T.INTEGER, T.BIGINT, T.STRING, T.DATE, T.TIME, T.TIMESTAMP]
    for t in plain:
        scalar(
            name, params=[t, t], returns=t, variadic=True, null_propagating=False, description=doc
        )(lambda *v: _pick(v, choose))
    scalar(
        name,
        params=[T.DOUBLE, T.DOUBLE],
        returns=T.DOUBLE,
        variadic=True,
        null_propagating=False,
        description=doc,
    )(lambda *v: _pick(tuple(None if x is None else float(x) for x in v), choose))
    scalar(
        name,
        params=[ANY_DECIMAL, ANY_DECIMAL],
        returns=_widest_decimal,
        variadic=True,
        null_propagating=False,
        description=doc,
    )(lambda *v: _pick(tuple(None if x is None else decimal.Decimal(x) for x in v), choose))
    scalar(
        name,
        params=[T.BYTES, T.BYTES],
        returns=T.BYTES,
        variadic=True,
        null_propagating=False,
        description=doc,
    )(lambda *v: _pick(v, choose, key=_signed_bytes_key))


_register_extreme("GREATEST", max)
_register_extreme("LEAST", min)


# --------------------------------------------------------------------------- GEO_DISTANCE

EARTH_RADIUS_KM = 6371.0
EARTH_RADIUS_MILES = 3959.0


_MILES_NAMES = ("mi", "mile", "miles")
_KM_NAMES = ("km", "kilometer", "kilometers", "kilometre", "kilometres")
_UNITS_MESSAGE = (
    "GeoDistance function units parameter must be one of "
    + ", ".join((*_MILES_NAMES, *_KM_NAMES)[:-1]) + f" or {_KM_NAMES[-1]}"
    + ". Values are case-insensitive."
)
_JAVA_BLANKS = "".join(chr(c) for c in range(33))  # what Java's String.trim removes


def _radius(unit: str | None) -> float:
    """Version 1: a unit starting with 'mi' or 'km' in any case."""
    if unit is None or not unit:
        return EARTH_RADIUS_KM
    lowered = unit.lower()
    if lowered.startswith("mi"):
        return EARTH_RADIUS_MILES
    if lowered.startswith("km"):
        return EARTH_RADIUS_KM
    raise EvaluationError(_UNITS_MESSAGE)


def _ksqldb_radius(unit: str | None) -> float:
    """Version 2, as ksqlDB: a blank unit is kilometers, else one of its unit names (trimmed,
    in any case)."""
    name = (unit or "").strip(_JAVA_BLANKS).lower()
    if not name or name in _KM_NAMES:
        return EARTH_RADIUS_KM
    if name in _MILES_NAMES:
        return EARTH_RADIUS_MILES
    raise EvaluationError(_UNITS_MESSAGE)


def _check_coordinates(lat1: float, lon1: float, lat2: float, lon2: float) -> None:
    if not (-90 <= lat1 <= 90 and -90 <= lat2 <= 90):
        raise EvaluationError(
            "valid latitude values for GeoDistance function are in the range of -90 to 90 decimal degrees"
        )
    if not (-180 <= lon1 <= 180 and -180 <= lon2 <= 180):
        raise EvaluationError(
            "valid longitude values for GeoDistance function are in the range of -180 to +180 "
            "decimal degrees"
        )


@scalar("GEO_DISTANCE", params=[T.DOUBLE] * 4, returns=T.DOUBLE)
def geo_distance(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """The great-circle distance between two points, in kilometers."""
    lat1, lon1, lat2, lon2 = float(lat1), float(lon1), float(lat2), float(lon2)
    _check_coordinates(lat1, lon1, lat2, lon2)
    return _distance(lat1, lon1, lat2, lon2, EARTH_RADIUS_KM)


@scalar(
    "GEO_DISTANCE",
    params=[T.DOUBLE] * 4 + [T.STRING],
    returns=T.DOUBLE,
    null_propagating=False,
    until=1,
)
def geo_distance_unit(
    lat1: float | None,
    lon1: float | None,
    lat2: float | None,
    lon2: float | None,
    unit: str | None,
) -> float | None:
    """The great-circle distance in 'KM' or 'MI' (a NULL unit means kilometers)."""
    if lat1 is None or lon1 is None or lat2 is None or lon2 is None:
        return None
    lat1, lon1, lat2, lon2 = float(lat1), float(lon1), float(lat2), float(lon2)
    _check_coordinates(lat1, lon1, lat2, lon2)
    return _distance(lat1, lon1, lat2, lon2, _radius(unit))


@scalar(
    "GEO_DISTANCE",
    params=[T.DOUBLE] * 4 + [T.STRING],
    returns=T.DOUBLE,
    null_propagating=False,
    since=2,
)
def geo_distance_named_unit(
    lat1: float | None,
    lon1: float | None,
    lat2: float | None,
    lon2: float | None,
    unit: str | None,
) -> float | None:
    """The great-circle distance in miles or kilometers, named as ksqlDB names them.

    The unit is mi, mile or miles, km, kilometer(s) or kilometre(s), in any case; a NULL or
    blank unit means kilometers."""
    if lat1 is None or lon1 is None or lat2 is None or lon2 is None:
        return None
    lat1, lon1, lat2, lon2 = float(lat1), float(lon1), float(lat2), float(lon2)
    _check_coordinates(lat1, lon1, lat2, lon2)
    return _distance(lat1, lon1, lat2, lon2, _ksqldb_radius(unit))


def _distance(lat1: float, lon1: float, lat2: float, lon2: float, radius: float) -> float:
    # Java's Math.toRadians (x / 180 * PI) and this evaluation order reproduce ksqlDB's
    # results to the last bit.
    delta_lat = _to_radians(lat2 - lat1)
    delta_lon = _to_radians(lon2 - lon1)
    a = (
        math.sin(delta_lat / 2) ** 2
        + math.sin(delta_lon / 2) ** 2 * math.cos(_to_radians(lat1)) * math.cos(_to_radians(lat2))
    )
    return radius * (2 * math.asin(math.sqrt(a)))


def _to_radians(degrees: float) -> float:
    return degrees / 180.0 * math.pi
