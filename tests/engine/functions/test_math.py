from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import TypeCheckError
from engine.functions import REGISTRY
from engine.functions.lib_math import java_div, java_pow, java_round
from engine.plan import types as T
from engine.plan.types import SqlType


def call(name: str, types: Sequence[SqlType], *args: Any) -> Any:
    return REGISTRY.resolve(name, types).invoke(list(args))


def return_type(name: str, types: Sequence[SqlType]) -> SqlType:
    return REGISTRY.resolve(name, types).return_type


# --------------------------------------------------------------------------- ABS, SIGN


def test_abs_keeps_the_argument_type() -> None:
    assert call("ABS", [T.INTEGER], -4) == 4
    assert call("ABS", [T.DOUBLE], -2.5) == 2.5
    assert call("ABS", [T.Decimal(3, 2)], Decimal("-1.25")) == Decimal("1.25")
    assert return_type("ABS", [T.Decimal(3, 2)]) == T.Decimal(3, 2)


def test_abs_of_null_is_null() -> None:
    assert call("ABS", [T.BIGINT], None) is None


def test_sign_returns_integer_for_every_numeric_type() -> None:
    assert call("SIGN", [T.INTEGER], -7) == -1
    assert call("SIGN", [T.DOUBLE], 0.0) == 0
    assert call("SIGN", [T.Decimal(4, 1)], Decimal("12.5")) == 1
    assert return_type("SIGN", [T.DOUBLE]) == T.INTEGER
    assert call("SIGN", [T.DOUBLE], None) is None


def test_sign_of_nan_is_zero_like_a_java_int_cast() -> None:
    assert call("SIGN", [T.DOUBLE], math.nan) == 0


# --------------------------------------------------------------------------- CEIL, FLOOR


def test_ceil_and_floor_of_doubles() -> None:
    assert call("CEIL", [T.DOUBLE], 2.1) == 3.0
    assert call("FLOOR", [T.DOUBLE], -2.1) == -3.0
    assert call("CEIL", [T.DOUBLE], None) is None


def test_ceil_and_floor_of_decimals_keep_the_scale() -> None:
    up = call("CEIL", [T.Decimal(3, 1)], Decimal("4.2"))
    down = call("FLOOR", [T.Decimal(3, 1)], Decimal("-4.2"))
    assert (str(up), str(down)) == ("5.0", "-5.0")
    assert return_type("CEIL", [T.Decimal(3, 1)]) == T.Decimal(3, 1)


def test_ceil_of_integers_is_the_identity() -> None:
    assert call("CEIL", [T.INTEGER], 9) == 9
    assert return_type("FLOOR", [T.BIGINT]) == T.BIGINT


def test_ceil_of_infinity_stays_infinite() -> None:
    assert call("CEIL", [T.DOUBLE], math.inf) == math.inf


# --------------------------------------------------------------------------- ROUND, TRUNC


def test_round_double_returns_bigint_with_halves_up() -> None:
    assert return_type("ROUND", [T.DOUBLE]) == T.BIGINT
    assert call("ROUND", [T.DOUBLE], 2.5) == 3
    assert call("ROUND", [T.DOUBLE], -2.5) == -2
    assert call("ROUND", [T.DOUBLE], -2.6) == -3
    assert call("ROUND", [T.DOUBLE], None) is None


def test_round_double_to_places() -> None:
    assert call("ROUND", [T.DOUBLE, T.INTEGER], 3.14159, 2) == 3.14
    assert call("ROUND", [T.DOUBLE, T.INTEGER], 0.125, 2) == 0.13
    assert call("ROUND", [T.DOUBLE, T.INTEGER], 4.7, 20) == 4.7
    assert call("ROUND", [T.DOUBLE, T.INTEGER], 57.0, -1) == 60.0
    assert call("ROUND", [T.DOUBLE, T.INTEGER], 4.0, -1) == 0.0
    assert call("ROUND", [T.DOUBLE, T.INTEGER], 4.0, None) is None


def test_round_decimal_without_places_drops_the_scale() -> None:
    assert return_type("ROUND", [T.Decimal(30, 12)]) == T.Decimal(18, 0)
    value = Decimal("98765432109876543.500000000000")
    assert call("ROUND", [T.Decimal(30, 12)], value) == Decimal("98765432109876544")
    assert str(call("ROUND", [T.Decimal(3, 1)], Decimal("-7.5"))) == "-7"


def test_round_decimal_to_places_keeps_the_scale() -> None:
    value = Decimal("98765432109876543.123456789012")
    assert return_type("ROUND", [T.Decimal(30, 12), T.INTEGER]) == T.Decimal(30, 12)
    assert str(call("ROUND", [T.Decimal(30, 12), T.INTEGER], value, 3)) == (
        "98765432109876543.123000000000"
    )
    assert str(call("ROUND", [T.Decimal(30, 12), T.INTEGER], value, -2)) == (
        "98765432109876500.000000000000"
    )


def test_round_of_a_tiny_decimal_to_negative_places_is_zero() -> None:
    assert str(call("ROUND", [T.Decimal(5, 4), T.INTEGER], Decimal("0.0004"), -3)) == "0.0000"


def test_round_of_nan_to_places_is_an_error() -> None:
    with pytest.raises(Exception, match="NaN|nan"):
        call("ROUND", [T.DOUBLE, T.INTEGER], math.nan, 2)


def test_round_of_an_integer_keeps_it() -> None:
    assert call("ROUND", [T.INTEGER], 12) == 12


def test_trunc_drops_digits_towards_zero() -> None:
    assert call("TRUNC", [T.DOUBLE], -3.9) == -3
    assert return_type("TRUNC", [T.DOUBLE]) == T.BIGINT
    assert call("TRUNC", [T.DOUBLE, T.INTEGER], 2.789, 1) == 2.7
    assert str(call("TRUNC", [T.Decimal(6, 3)], Decimal("-12.999"))) == "-12"
    assert str(call("TRUNC", [T.Decimal(6, 3), T.INTEGER], Decimal("12.999"), 2)) == "12.990"
    assert call("TRUNC", [T.INTEGER], 7) == 7
    assert call("TRUNC", [T.DOUBLE], None) is None


def test_trunc_of_nan_is_zero_like_a_java_long_cast() -> None:
    assert call("TRUNC", [T.DOUBLE], math.nan) == 0


# --------------------------------------------------------------------------- DOUBLE functions


@pytest.mark.parametrize("arg_type", [T.INTEGER, T.BIGINT, T.DOUBLE])
def test_double_functions_accept_every_numeric_type(arg_type: SqlType) -> None:
    assert return_type("SQRT", [arg_type]) == T.DOUBLE
    assert call("SQRT", [arg_type], 16) == 4.0


def test_java_double_semantics_instead_of_errors() -> None:
    assert math.isnan(call("SQRT", [T.DOUBLE], -4.0))
    assert call("LN", [T.INTEGER], 0) == -math.inf
    assert math.isnan(call("LN", [T.BIGINT], -1))
    assert call("LOG", [T.DOUBLE], 0.0) == -math.inf
    assert call("EXP", [T.DOUBLE], 1000.0) == math.inf
    assert math.isnan(call("ASIN", [T.DOUBLE], 1.5))
    assert math.isnan(call("SIN", [T.DOUBLE], math.inf))
    assert call("COT", [T.INTEGER], 0) == math.inf
    assert call("SINH", [T.DOUBLE], -1000.0) == -math.inf
    assert call("COSH", [T.DOUBLE], -1000.0) == math.inf


def test_double_functions_of_null_are_null() -> None:
    for name in (
        "SQRT",
        "CBRT",
        "EXP",
        "LN",
        "LOG",
        "SIN",
        "COS",
        "TAN",
        "COT",
        "ASIN",
        "ACOS",
        "ATAN",
        "SINH",
        "COSH",
        "TANH",
        "DEGREES",
        "RADIANS",
    ):
        assert call(name, [T.DOUBLE], None) is None, name


def test_regular_values_of_double_functions() -> None:
    assert call("CBRT", [T.INTEGER], -27) == -3.0
    assert call("EXP", [T.INTEGER], 0) == 1.0
    assert call("LN", [T.DOUBLE], math.e) == 1.0
    assert call("LOG", [T.DOUBLE], math.e) == 1.0
    assert call("DEGREES", [T.DOUBLE], math.pi) == 180.0
    assert call("RADIANS", [T.INTEGER], 180) == math.pi
    assert call("COS", [T.INTEGER], 0) == 1.0
    assert call("TAN", [T.DOUBLE], 0.0) == 0.0
    assert call("ATAN", [T.INTEGER], 1) == pytest.approx(math.pi / 4)
    assert call("ACOS", [T.INTEGER], 1) == 0.0
    assert call("TANH", [T.INTEGER], 0) == 0.0


def test_log_with_a_base() -> None:
    assert call("LOG", [T.INTEGER, T.INTEGER], 2, 8) == pytest.approx(3.0)
    assert call("LOG", [T.DOUBLE, T.DOUBLE], 10.0, 1.0) == 0.0
    assert call("LOG", [T.DOUBLE, T.DOUBLE], 15.0, 0.0) == -math.inf
    assert math.isnan(call("LOG", [T.DOUBLE, T.DOUBLE], 15.0, -13.0))
    assert call("LOG", [T.INTEGER, T.INTEGER], None, 5) is None


@pytest.mark.parametrize("base", [1, 0, -15])
def test_log_in_a_base_of_one_or_at_most_zero_is_nan_as_in_ksqldb(base: int) -> None:
    assert math.isnan(call("LOG", [T.INTEGER, T.INTEGER], base, 13))


def test_log_version_1_stays_in_plans_saved_with_it() -> None:
    """Version 1 took one argument as base 10 and divided by ln(1) for a base of 1."""
    assert REGISTRY.current_semantics("LOG") == 3  # 3: ties of casts as in ksqlDB
    assert REGISTRY.resolve("LOG", [T.INTEGER], 1).invoke([1000]) == pytest.approx(3.0)
    assert REGISTRY.resolve("LOG", [T.INTEGER, T.INTEGER], 1).invoke([1, 5]) == math.inf
    assert REGISTRY.resolve("LOG", [T.INTEGER], 2).invoke([1000]) == pytest.approx(math.log(1000))


def test_power_follows_java() -> None:
    assert call("POWER", [T.INTEGER, T.INTEGER], 2, 10) == 1024.0
    assert call("POWER", [T.INTEGER, T.INTEGER], 4, -1) == 0.25
    assert call("POWER", [T.DOUBLE, T.DOUBLE], 0.0, -1.0) == math.inf
    assert math.isnan(call("POWER", [T.DOUBLE, T.DOUBLE], -8.0, 1 / 3))
    assert call("POWER", [T.BIGINT, T.BIGINT], 3, None) is None


def test_atan2_takes_y_then_x() -> None:
    assert call("ATAN2", [T.INTEGER, T.INTEGER], 1, 0) == pytest.approx(math.pi / 2)
    assert call("ATAN2", [T.DOUBLE, T.DOUBLE], None, 1.0) is None


def test_pi_and_random() -> None:
    assert call("PI", []) == math.pi
    assert all(0.0 <= call("RANDOM", []) < 1.0 for _ in range(20))


def test_java_div_and_pow_edge_cases() -> None:
    assert java_div(-1.0, 0.0) == -math.inf
    assert java_div(1.0, -0.0) == -math.inf
    assert math.isnan(java_div(0.0, 0.0))
    assert math.isnan(java_pow(1.0, math.inf))
    assert java_pow(math.nan, 0.0) == 1.0
    assert java_pow(-0.0, -3.0) == -math.inf
    assert java_pow(-10.0, 401.0) == -math.inf


@given(st.floats(min_value=-1e15, max_value=1e15))
def test_java_round_is_floor_of_value_plus_half(x: float) -> None:
    assert java_round(x) == math.floor(Decimal(x) + Decimal("0.5"))


@given(st.decimals(min_value=-(10**6), max_value=10**6, places=4, allow_nan=False))
def test_round_decimal_is_within_half_a_unit(x: Decimal) -> None:
    rounded = call("ROUND", [T.Decimal(11, 4)], x)
    assert abs(rounded - x) <= Decimal("0.5")
    assert rounded == rounded.to_integral_value()


def test_decimal_overloads_match_decimals_exactly_without_rescaling() -> None:
    resolved = REGISTRY.resolve("ROUND", [T.Decimal(4, 2), T.INTEGER])
    assert resolved.signature.describe() == "ROUND(DECIMAL, INTEGER)"
    assert resolved.param_types[0] == T.Decimal(4, 2)
    assert not (T.Decimal(4, 2) != resolved.param_types[0])
    assert REGISTRY.resolve("CEIL", [T.Decimal(9, 3)]).signature.describe() == "CEIL(DECIMAL)"
    assert REGISTRY.resolve("ROUND", [T.INTEGER]).return_type == T.BIGINT


def test_round_and_trunc_of_an_integer_return_a_bigint_like_ksqldb() -> None:
    assert REGISTRY.resolve("ROUND", [T.INTEGER]).signature.params == (T.INTEGER,)
    assert return_type("ROUND", [T.INTEGER]) == T.BIGINT
    assert call("ROUND", [T.INTEGER], -3) == -3
    assert return_type("TRUNC", [T.INTEGER]) == T.BIGINT
    assert call("TRUNC", [T.INTEGER], 2**31 - 1) == 2**31 - 1
    assert call("TRUNC", [T.INTEGER], None) is None


def test_trunc_of_an_integer_planned_at_version_1_stays_an_integer() -> None:
    assert REGISTRY.resolve("TRUNC", [T.INTEGER], 1).return_type == T.INTEGER
    assert REGISTRY.settled_semantics("TRUNC", [T.DOUBLE], 2) == 1  # other overloads unchanged
    assert REGISTRY.settled_semantics("TRUNC", [T.INTEGER], 2) == 2


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("ROUND", [T.INTEGER, T.INTEGER]),
        ("ROUND", [T.BIGINT, T.INTEGER]),
        ("TRUNC", [T.INTEGER, T.INTEGER]),
        ("LOG", [T.INTEGER, T.BIGINT]),
        ("POWER", [T.BIGINT, T.INTEGER]),
        ("ATAN2", [T.INTEGER, T.BIGINT]),
        ("CORRELATION", [T.INTEGER, T.BIGINT]),
    ],
)
def test_calls_that_fit_two_overloads_only_through_casts_are_ambiguous_as_in_ksqldb(name, args):
    from engine.functions.udaf import aggregate_spec

    resolve = aggregate_spec if name == "CORRELATION" else REGISTRY.resolve
    described = ", ".join(str(a) for a in args)
    with pytest.raises(TypeCheckError, match=rf"^Function '{name.lower()}' cannot be resolved due to ambiguous method parameters \({described}\)\."):
        resolve(name, args)
    # Saved plans keep the version that took the shortest widening.
    old = REGISTRY.current_semantics(name) - 1
    assert resolve(name, args, old) is not None


def test_round_of_integers_still_resolves_with_one_argument_or_a_decimal():
    assert REGISTRY.resolve("ROUND", [T.INTEGER]).return_type == T.BIGINT
    assert REGISTRY.resolve("ROUND", [T.Decimal(5, 2), T.INTEGER]).return_type == T.Decimal(5, 2)
    assert REGISTRY.resolve("ROUND", [T.DOUBLE, T.INTEGER]).return_type == T.DOUBLE


def test_abs_of_the_smallest_integral_stays_itself_as_javas_math_abs() -> None:
    assert call("ABS", [T.INTEGER], -(2**31)) == -(2**31)
    assert call("ABS", [T.BIGINT], -(2**63)) == -(2**63)
    assert call("ABS", [T.INTEGER], -(2**31) + 1) == 2**31 - 1


def test_abs_version_1_keeps_the_unwrapped_value_for_saved_plans() -> None:
    assert REGISTRY.resolve("ABS", [T.INTEGER], 1).invoke([-(2**31)]) == 2**31
    assert REGISTRY.current_semantics("ABS") == 2
