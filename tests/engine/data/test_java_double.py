"""Double.toString as the JDKs ksqlDB runs on print doubles (engine.data.java_double)."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.data.java_double import java_double_to_string


def _from_bits(bits: str) -> float:
    return struct.unpack(">d", bytes.fromhex(bits))[0]


# The JDK 17 text of doubles where it is not the shortest text that reads back (Python's repr).
@pytest.mark.parametrize(
    ("bits", "java"),
    [
        # integers below 2^63: the integer's own digits
        ("437bbcedc70a32e9", "1.24920860860690064E17"),
        ("c381477a19647d2c", "-1.55637258933740928E17"),
        ("436c198ff77467ca", "6.3275243764137552E16"),
        # from 2^58 on, the digits past the double's precision rounded away first
        ("43b2378865189001", "1.31266778418695398E18"),
        ("43d729257e96a472", "6.6756254501637837E18"),
        # the digit loop stopping one digit late
        ("3800000000000000", "5.8774717541114375E-39"),
        ("4800000000000000", "6.805647338418769E38"),
        ("7bc0000000000000", "1.2181642514249999E288"),
        ("0002000000000000", "2.781342323134002E-309"),
        # subnormals
        ("0000000000000001", "4.9E-324"),
        ("0000000000000020", "1.58E-322"),
    ],
)
def test_the_jdk_digits_where_they_are_not_the_shortest(bits: str, java: str) -> None:
    value = _from_bits(bits)
    assert repr(value).upper().replace("E+", "E") != java
    assert java_double_to_string(value) == java


@pytest.mark.parametrize(
    ("value", "java"),
    [
        (0.1, "0.1"),
        (1.0, "1.0"),
        (100.0, "100.0"),
        (1234567.0, "1234567.0"),
        (9999999.0, "9999999.0"),
        (1e7, "1.0E7"),
        (12345678.9, "1.23456789E7"),
        (0.001, "0.001"),
        (0.0001, "1.0E-4"),
        (1 / 3, "0.3333333333333333"),
        (-2.5, "-2.5"),
        (2.0**63, "9.223372036854776E18"),
        (1.7976931348623157e308, "1.7976931348623157E308"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
    ],
)
def test_plain_and_scientific_layout(value: float, java: str) -> None:
    assert java_double_to_string(value) == java


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_the_text_reads_back_to_the_same_double(value: float) -> None:
    text = java_double_to_string(value)
    assert float(text) == value
    assert math.copysign(1.0, float(text)) == math.copysign(1.0, value)


@given(st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v != 0))
def test_scientific_form_outside_one_thousandth_to_ten_million(value: float) -> None:
    text = java_double_to_string(value)
    mantissa = text.split("E")[0]
    assert "." in mantissa and not mantissa.endswith(".")
    assert ("E" in text) == (not 1e-3 <= abs(value) < 1e7)


@given(st.integers(min_value=1, max_value=2**53))
def test_integers_a_double_holds_exactly_print_their_digits(n: int) -> None:
    value = float(n)
    text = java_double_to_string(value)
    assert float(text) == value
    if n < 10**7:
        assert text == f"{n}.0"
