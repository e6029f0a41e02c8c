"""NULL-handling functions, GREATEST / LEAST and GEO_DISTANCE."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pytest

import engine.functions  # noqa: F401  (registers the libraries)
from engine.errors import EvaluationError
from engine.functions.registry import REGISTRY
from engine.plan import types as T


def call(name: str, *args: Any, types: list[Any]) -> Any:
    """Resolve ``name`` for the given argument types and invoke it."""
    return REGISTRY.resolve(name, types).invoke(list(args))


def test_ifnull_returns_fallback_only_for_null():
    assert call("IFNULL", None, "x", types=[T.STRING, T.STRING]) == "x"
    assert call("IFNULL", "v", "x", types=[T.STRING, T.STRING]) == "v"
    assert call("IFNULL", None, None, types=[T.INTEGER, T.INTEGER]) is None


def test_ifnull_result_type_follows_the_arguments():
    resolved = REGISTRY.resolve("IFNULL", [T.Array(T.STRING), T.Array(T.STRING)])
    assert resolved.return_type == T.Array(T.STRING)


def test_coalesce_returns_first_non_null():
    assert call("COALESCE", None, None, 3, 4, types=[T.INTEGER] * 4) == 3
    assert call("COALESCE", None, types=[T.STRING]) is None
    assert call("COALESCE", 0, 1, types=[T.INTEGER] * 2) == 0


def test_nullif_returns_null_when_equal():
    assert call("NULLIF", "a", "a", types=[T.STRING, T.STRING]) is None
    assert call("NULLIF", "a", "b", types=[T.STRING, T.STRING]) == "a"
    assert call("NULLIF", None, "b", types=[T.STRING, T.STRING]) is None
    assert call("NULLIF", 5, None, types=[T.INTEGER, T.INTEGER]) == 5


@pytest.mark.parametrize(
    ("sql_type", "values", "greatest", "least"),
    [
        (T.INTEGER, [3, None, -7, 11], 11, -7),
        (T.BIGINT, [2**40, -(2**62)], 2**40, -(2**62)),
        (T.DOUBLE, [1.5, None, -0.25], 1.5, -0.25),
        (T.STRING, ["pear", "Apple", "apple"], "pear", "Apple"),
        (T.DATE, [dt.date(2020, 1, 2), dt.date(1999, 5, 6)], dt.date(2020, 1, 2), dt.date(1999, 5, 6)),
        (T.TIME, [dt.time(23, 0), dt.time(1, 2, 3)], dt.time(23, 0), dt.time(1, 2, 3)),
        (
            T.TIMESTAMP,
            [dt.datetime(2000, 1, 1), None, dt.datetime(2000, 1, 1, 0, 0, 1)],
            dt.datetime(2000, 1, 1, 0, 0, 1),
            dt.datetime(2000, 1, 1),
        ),
    ],
)
def test_greatest_and_least_skip_nulls(sql_type, values, greatest, least):
    types = [sql_type] * len(values)
    assert call("GREATEST", *values, types=types) == greatest
    assert call("LEAST", *values, types=types) == least


def test_greatest_and_least_of_only_nulls_is_null():
    assert call("GREATEST", None, None, types=[T.INTEGER, T.INTEGER]) is None
    assert call("LEAST", None, types=[T.STRING]) is None


def test_greatest_of_decimals_widens_the_result_type():
    types = [T.Decimal(5, 2), T.Decimal(7, 4)]
    resolved = REGISTRY.resolve("GREATEST", types)
    assert resolved.return_type == T.Decimal(7, 4)
    values = [decimal.Decimal("123.45"), decimal.Decimal("999.9999")]
    assert resolved.invoke(values) == decimal.Decimal("999.9999")
    assert call("LEAST", *values, types=types) == decimal.Decimal("123.45")


def test_bytes_compare_as_java_signed_bytes():
    types = [T.BYTES, T.BYTES, T.BYTES]
    assert call("GREATEST", b"\x01", b"\x7f", b"\x80", types=types) == b"\x7f"
    assert call("LEAST", b"\x01", b"\x7f", b"\x80", types=types) == b"\x80"
    assert call("GREATEST", b"a", b"ab", None, types=types) == b"ab"


def test_geo_distance_in_kilometers_and_miles():
    args = (48.8566, 2.3522, 51.5074, -0.1278)
    km = call("GEO_DISTANCE", *args, types=[T.DOUBLE] * 4)
    assert km == pytest.approx(343.56, abs=0.1)
    assert call("GEO_DISTANCE", *args, "KM", types=[T.DOUBLE] * 4 + [T.STRING]) == km
    miles = call("GEO_DISTANCE", *args, "miles", types=[T.DOUBLE] * 4 + [T.STRING])
    assert miles == pytest.approx(km * 3959 / 6371)
    assert call("GEO_DISTANCE", *args, None, types=[T.DOUBLE] * 4 + [T.STRING]) == km


def test_geo_distance_edge_cases():
    assert call("GEO_DISTANCE", 10.0, 20.0, 10.0, 20.0, types=[T.DOUBLE] * 4) == 0.0
    antipodal = call("GEO_DISTANCE", 0.0, 0.0, 0.0, 180.0, types=[T.DOUBLE] * 4)
    assert antipodal == pytest.approx(math.pi * 6371)
    assert call("GEO_DISTANCE", None, 0.0, 0.0, 0.0, types=[T.DOUBLE] * 4) is None


def test_geo_distance_rejects_bad_coordinates_and_units():
    with pytest.raises(EvaluationError, match="latitude"):
        call("GEO_DISTANCE", 91.0, 0.0, 0.0, 0.0, types=[T.DOUBLE] * 4)
    with pytest.raises(EvaluationError, match="longitude"):
        call("GEO_DISTANCE", 0.0, 0.0, 0.0, -181.0, types=[T.DOUBLE] * 4)
    with pytest.raises(EvaluationError, match="unit"):
        call("GEO_DISTANCE", 0.0, 0.0, 1.0, 1.0, "parsecs", types=[T.DOUBLE] * 4 + [T.STRING])


def test_geo_distance_failures_read_as_ksqldb_words_them():
    five = [T.DOUBLE] * 4 + [T.STRING]
    with pytest.raises(EvaluationError) as raised:
        call("GEO_DISTANCE", 91.0, 0.0, 0.0, 0.0, types=[T.DOUBLE] * 4)
    assert str(raised.value) == "valid latitude values for GeoDistance function are in the range of -90 to 90 decimal degrees"
    with pytest.raises(EvaluationError) as raised:
        call("GEO_DISTANCE", 0.0, 0.0, 0.0, -181.0, "km", types=five)
    assert str(raised.value) == (
        "valid longitude values for GeoDistance function are in the range of -180 to +180 decimal degrees"
    )
    with pytest.raises(EvaluationError) as raised:
        call("GEO_DISTANCE", 0.0, 0.0, 1.0, 1.0, "parsecs", types=five)
    assert str(raised.value) == (
        "GeoDistance function units parameter must be one of mi, mile, miles, km, kilometer, "
        "kilometers, kilometre or kilometres. Values are case-insensitive."
    )


def test_geo_distance_takes_ksqldbs_unit_names_from_version_2():
    five = [T.DOUBLE] * 4 + [T.STRING]
    args = (0.0, 0.0, 1.0, 1.0)
    km = call("GEO_DISTANCE", *args, types=[T.DOUBLE] * 4)
    assert call("GEO_DISTANCE", *args, " Kilometres ", types=five) == km
    assert call("GEO_DISTANCE", *args, "  ", types=five) == km
    with pytest.raises(EvaluationError, match="units parameter"):
        call("GEO_DISTANCE", *args, "minutes", types=five)
    # Version 1, kept for saved plans, reads any unit starting with 'mi' as miles.
    saved = REGISTRY.resolve("GEO_DISTANCE", five, 1)
    assert saved.invoke([*args, "minutes"]) == pytest.approx(km * 3959 / 6371)


def test_nullif_version_2_compares_as_java_equals():
    d = [T.DOUBLE, T.DOUBLE]
    assert call("NULLIF", math.nan, math.nan, types=d) is None
    assert call("NULLIF", 0.0, -0.0, types=d) == 0.0
    assert call("NULLIF", 1.5, 1.5, types=d) is None
    assert call("NULLIF", 1.5, None, types=d) == 1.5
    assert call("NULLIF", None, None, types=d) is None
    dec = [T.Decimal(3, 1), T.Decimal(3, 1)]
    assert call("NULLIF", decimal.Decimal("1.0"), decimal.Decimal("1.00"), types=dec) == decimal.Decimal("1.0")
    arr = [T.Array(T.DOUBLE), T.Array(T.DOUBLE)]
    assert call("NULLIF", [math.nan, None], [math.nan, None], types=arr) is None
    assert call("NULLIF", [0.0], [-0.0], types=arr) == [0.0]
    m = [T.Map(T.STRING, T.INTEGER)] * 2
    assert call("NULLIF", {"a": 1, "b": None}, {"b": None, "a": 1}, types=m) is None
    assert call("NULLIF", {"a": 1}, {"a": 1, "b": None}, types=m) == {"a": 1}
    saved = REGISTRY.resolve("NULLIF", d, 1)
    assert math.isnan(saved.invoke([math.nan, math.nan]))
    assert saved.invoke([0.0, -0.0]) is None
