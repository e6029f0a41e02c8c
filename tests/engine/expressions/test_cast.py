from __future__ import annotations

import datetime as dt
from decimal import Decimal as D
from typing import Any

import pytest

from engine.errors import TypeCheckError
from engine.expressions import cast_value, coerce_value
from engine.expressions.cast import numeric_type_of_text
from engine.plan import types as T

STRUCT_AB = T.Struct((T.Field("A", T.INTEGER), T.Field("b", T.STRING)))


@pytest.mark.parametrize(
    ("value", "source", "target", "expected"),
    [
        ("42", T.STRING, T.INTEGER, 42),
        (" 42 ", T.STRING, T.BIGINT, 42),
        ("1.5", T.STRING, T.DOUBLE, 1.5),
        ("0.99", T.STRING, T.Decimal(2, 1), D("1.0")),
        ("true", T.STRING, T.BOOLEAN, True),
        ("nope", T.STRING, T.BOOLEAN, False),
        (2**31, T.BIGINT, T.INTEGER, -(2**31)),
        (3.9, T.DOUBLE, T.INTEGER, 3),
        (-1e30, T.DOUBLE, T.INTEGER, -(2**31)),
        (float("nan"), T.DOUBLE, T.BIGINT, 0),
        (-3.9, T.DOUBLE, T.BIGINT, -3),
        (1e30, T.DOUBLE, T.INTEGER, 2**31 - 1),
        (D("10.99"), T.Decimal(4, 2), T.INTEGER, 10),
        (D("0.01"), T.Decimal(4, 2), T.DOUBLE, 0.01),
        (0.01, T.DOUBLE, T.Decimal(2, 1), D("0.0")),
        (1, T.INTEGER, T.Decimal(2, 1), D("1.0")),
        (1.0, T.DOUBLE, T.STRING, "1.0"),
        (1e7, T.DOUBLE, T.STRING, "1.0E7"),
        (D("10.00"), T.Decimal(4, 2), T.STRING, "10.00"),
        (True, T.BOOLEAN, T.STRING, "true"),
        ([1, 3], T.Array(T.INTEGER), T.STRING, "[1, 3]"),
        ({"this": 1}, T.Map(T.STRING, T.INTEGER), T.STRING, "{this=1}"),
        ({"A": 1, "b": None}, STRUCT_AB, T.STRING, "Struct{A=1}"),
        (dt.date(1969, 12, 31), T.DATE, T.STRING, "1969-12-31"),
        (dt.time(0, 0, 5), T.TIME, T.STRING, "00:00:05"),
        (dt.datetime(2022, 4, 28, 21, 44, 47, 943000), T.TIMESTAMP, T.STRING, "2022-04-28T21:44:47.943"),
        ("2022-04-28T21:44:47.943Z", T.STRING, T.TIMESTAMP, dt.datetime(2022, 4, 28, 21, 44, 47, 943000)),
        ("2022-04-28", T.STRING, T.DATE, dt.date(2022, 4, 28)),
        ("10:11:12", T.STRING, T.TIME, dt.time(10, 11, 12)),
        (dt.datetime(2022, 4, 28, 10, 1), T.TIMESTAMP, T.DATE, dt.date(2022, 4, 28)),
        (dt.datetime(2022, 4, 28, 10, 1, 2, 3000), T.TIMESTAMP, T.TIME, dt.time(10, 1, 2, 3000)),
        (dt.date(2022, 4, 28), T.DATE, T.TIMESTAMP, dt.datetime(2022, 4, 28)),
        ([1, 2**31], T.Array(T.BIGINT), T.Array(T.STRING), ["1", "2147483648"]),
        ({"k": {"k2": "10"}}, T.Map(T.STRING, T.Map(T.STRING, T.STRING)),
         T.Map(T.STRING, T.Map(T.STRING, T.INTEGER)), {"k": {"k2": 10}}),
        ({"A": 1, "b": "x"}, STRUCT_AB, T.Struct((T.Field("A", T.STRING), T.Field("Z", T.STRING))),
         {"A": "1", "Z": None}),
        (None, T.STRING, T.INTEGER, None),
        (None, None, T.Array(T.INTEGER), None),
    ],
)
def test_cast_matrix(value: Any, source: T.SqlType | None, target: T.SqlType, expected: Any) -> None:
    result = cast_value(value, source, target)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7", T.INTEGER),
        ("-2147483648", T.INTEGER),
        ("2147483648", T.BIGINT),
        ("99999999999999999999", T.Decimal(20, 0)),
        ("2e1", T.Decimal(2, 0)),  # BigDecimal scale -1: not a whole number to ksqlDB
        ("2.0e1", T.INTEGER),  # scale 0
        ("1.50", T.Decimal(3, 2)),
        ("0.05", T.Decimal(2, 2)),
        ("-12.5", T.Decimal(3, 1)),
    ],
)
def test_numeric_text_takes_the_narrowest_literal_type(text: str, expected: T.SqlType) -> None:
    # ksqlDB's literal rules: whole numbers (BigDecimal scale 0) are INTEGER, then BIGINT,
    # then DECIMAL(n, 0); any other number (a fraction, or an exponent past its digits) is a
    # DECIMAL of its digits and scale, a negative scale taken as 0.
    assert numeric_type_of_text(text) == expected


def test_cast_to_decimal_keeps_the_target_scale() -> None:
    assert str(cast_value(D("1"), T.Decimal(1, 0), T.Decimal(5, 3))) == "1.000"


def test_cast_to_a_decimal_too_small_overflows_in_ksqldbs_words() -> None:
    with pytest.raises(ArithmeticError) as raised:
        cast_value("123.45", T.STRING, T.Decimal(4, 2))
    assert str(raised.value) == (
        "Numeric field overflow: A field with precision 4 and scale 2 must round to an absolute "
        "value less than 10^2. Got 123.45"
    )


@pytest.mark.parametrize(
    ("value", "source", "target"),
    [
        ("abc", T.STRING, T.INTEGER),
        ("1.5", T.STRING, T.INTEGER),
        ("99999999999", T.STRING, T.INTEGER),
        (10, T.INTEGER, T.Decimal(2, 1)),
        ("x", T.STRING, T.DOUBLE),
        ("not a date", T.STRING, T.DATE),
    ],
)
def test_cast_of_unconvertible_value_raises(value: Any, source: T.SqlType, target: T.SqlType) -> None:
    with pytest.raises((ValueError, ArithmeticError)):
        cast_value(value, source, target)


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (T.STRING, T.Array(T.INTEGER)),
        (T.STRING, T.Map(T.STRING, T.INTEGER)),
        (T.BOOLEAN, T.INTEGER),
        (T.INTEGER, T.TIMESTAMP),
        (T.TIME, T.DATE),
        (T.BYTES, T.STRING),
    ],
)
def test_unsupported_casts_are_type_errors(source: T.SqlType, target: T.SqlType) -> None:
    with pytest.raises(TypeCheckError, match=f"Cast of {source}"):
        cast_value(None, source, target)


def test_coerce_widens_numbers() -> None:
    assert coerce_value(1, T.INTEGER, T.DOUBLE) == 1.0
    assert isinstance(coerce_value(1, T.INTEGER, T.DOUBLE), float)
    assert coerce_value(3, T.INTEGER, T.Decimal(12, 2)) == D("3.00")
    assert str(coerce_value(3, T.INTEGER, T.Decimal(12, 2))) == "3.00"
    assert coerce_value([1, None], T.Array(T.INTEGER), T.Array(T.DOUBLE)) == [1.0, None]


def test_coerce_of_an_int_array_to_a_bigint_array_keeps_the_list() -> None:
    values = [1, None, -(2**31)]
    assert coerce_value(values, T.Array(T.INTEGER), T.Array(T.BIGINT)) is values


def test_coerce_to_a_map_converts_element_wise_only_from_a_map() -> None:
    # A STRING is not a map: its coercion to a MAP is the unsupported cast, not a map's.
    with pytest.raises(TypeCheckError, match=r"^Cast of STRING to MAP<STRING, INTEGER> is not supported\.$"):
        coerce_value("{}", T.STRING, T.Map(T.STRING, T.INTEGER))


def test_coerce_fills_missing_struct_fields_with_null() -> None:
    wide = T.Struct((T.Field("A", T.BIGINT), T.Field("Z", T.STRING)))
    assert coerce_value({"A": 1}, T.Struct((T.Field("A", T.INTEGER),)), wide) == {"A": 1, "Z": None}


def test_map_casts_need_both_key_and_value_casts_supported() -> None:
    from engine.expressions.cast import cast_supported

    assert cast_supported(T.Map(T.STRING, T.INTEGER), T.Map(T.STRING, T.BIGINT))
    assert not cast_supported(T.Map(T.STRING, T.INTEGER), T.Map(T.Array(T.INTEGER), T.INTEGER))
    assert not cast_supported(T.Map(T.STRING, T.INTEGER), T.Map(T.STRING, T.Array(T.INTEGER)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [("NaN", "nan"), (" -Infinity ", "-inf"), ("+Infinity", "inf")],
)
def test_cast_of_java_double_words_to_double(text: str, expected: str) -> None:
    # Java's Double.parseDouble: "NaN" and "Infinity", optionally signed, around whitespace.
    result = cast_value(text, T.STRING, T.DOUBLE)
    assert isinstance(result, float)
    assert repr(result) == expected


@pytest.mark.parametrize("text", ["nan", "inf", "-infinity", "INFINITY"])
def test_cast_of_python_double_words_to_double_raises(text: str) -> None:
    with pytest.raises(ValueError, match=f'^invalid input syntax for type DOUBLE: "{text}"$'):
        cast_value(text, T.STRING, T.DOUBLE)


@pytest.mark.parametrize(
    ("text", "day"),
    [("1970-01-10", dt.date(1970, 1, 10)), ("1970-01", dt.date(1970, 1, 1)), ("1970", dt.date(1970, 1, 1)),
     ("1970-01-10T23:30", dt.date(1970, 1, 10)), ("1970-01-10T00:30+0100", dt.date(1970, 1, 9))],
)
def test_cast_version_2_reads_partial_date_text_as_its_utc_day(text: str, day: dt.date) -> None:
    from engine.expressions.cast import make_cast

    assert make_cast(T.STRING, T.DATE, 2)(text) == day


def test_cast_version_1_stays_for_plans_saved_with_it_and_reads_only_full_dates() -> None:
    from engine.expressions.cast import make_cast

    assert make_cast(T.STRING, T.DATE)("1970-01-10") == dt.date(1970, 1, 10)
    with pytest.raises(ValueError, match="1970-01"):
        make_cast(T.STRING, T.DATE)("1970-01")
    # a version reaches the casts of a container's items
    assert make_cast(T.Array(T.STRING), T.Array(T.DATE), 2)(["1970-02"]) == [dt.date(1970, 2, 1)]


def test_a_cast_records_the_latest_version_that_changed_casts_to_its_type() -> None:
    from engine.expressions.cast import CAST_SEMANTICS, cast_semantics, make_cast

    assert cast_semantics(T.DATE) == cast_semantics(T.Map(T.INTEGER, T.DATE)) == 2
    assert cast_semantics(T.INTEGER) == cast_semantics(T.Array(T.TIMESTAMP)) == 1
    assert cast_semantics(T.STRING) == cast_semantics(T.Map(T.STRING, T.DATE)) == 3
    assert cast_semantics(T.Decimal(4, 2)) == cast_semantics(T.BYTES) == 3
    with pytest.raises(TypeCheckError, match=f"version {CAST_SEMANTICS + 1} of its behaviour"):
        make_cast(T.STRING, T.DATE, CAST_SEMANTICS + 1)


# --------------------------------------------------------------------------- CAST version 3


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (124920860860690064.0, "1.24920860860690064E17"),
        (2.0**-127, "5.8774717541114375E-39"),
        (5e-324, "4.9E-324"),
        (0.1, "0.1"),
        (1e7, "1.0E7"),
    ],
)
def test_cast_version_3_writes_a_double_with_the_jdks_digits(value: float, text: str) -> None:
    from engine.expressions.cast import make_cast

    assert make_cast(T.DOUBLE, T.STRING, 3)(value) == text
    assert make_cast(T.Array(T.DOUBLE), T.STRING, 3)([value, None]) == f"[{text}, null]"
    assert make_cast(T.Map(T.STRING, T.DOUBLE), T.STRING, 3)({"k": value}) == f"{{k={text}}}"


def test_cast_versions_1_and_2_keep_the_shortest_double_text_for_saved_plans() -> None:
    from engine.expressions.cast import make_cast

    for version in (1, 2):
        assert make_cast(T.DOUBLE, T.STRING, version)(124920860860690064.0) == "1.2492086086069006E17"


@pytest.mark.parametrize(
    ("value", "target", "expected"),
    [
        # the exact binary value is below the half, so it rounds down (2.67499999...)
        (2.675, T.Decimal(3, 2), D("2.67")),
        (-2.675, T.Decimal(3, 2), D("-2.67")),
        (0.285, T.Decimal(2, 2), D("0.28")),
        (9.995, T.Decimal(3, 2), D("9.99")),
        # rounded to the precision first (1.00499... -> 1.005), then HALF_UP to the scale
        (1.005, T.Decimal(4, 2), D("1.01")),
        (0.125, T.Decimal(3, 2), D("0.13")),
        (12345.678, T.Decimal(5, 0), D("12346")),
        (0.1, T.Decimal(10, 2), D("0.10")),
        (1.0, T.Decimal(5, 3), D("1.000")),
    ],
)
def test_cast_version_3_of_a_double_to_decimal_starts_from_its_exact_value(
    value: float, target: T.Decimal, expected: D
) -> None:
    from engine.expressions.cast import make_cast

    result = make_cast(T.DOUBLE, target, 3)(value)
    assert result == expected and str(result) == str(expected)


def test_cast_version_1_of_a_double_to_decimal_starts_from_its_shortest_text() -> None:
    from engine.expressions.cast import make_cast

    assert make_cast(T.DOUBLE, T.Decimal(3, 2), 1)(2.675) == D("2.68")


@pytest.mark.parametrize(
    ("value", "target", "got"),
    [
        (99.995, T.Decimal(4, 2), "100.0"),
        (1e20, T.Decimal(5, 2), "100000000000000000000"),
        (10.0, T.Decimal(3, 2), "10"),
    ],
)
def test_cast_version_3_of_a_double_overflows_on_the_value_rounded_to_the_precision(
    value: float, target: T.Decimal, got: str
) -> None:
    from engine.expressions.cast import make_cast

    with pytest.raises(ArithmeticError) as raised:
        make_cast(T.DOUBLE, target, 3)(value)
    assert str(raised.value).endswith(f"less than 10^{target.precision - target.scale}. Got {got}")


def test_cast_version_3_of_nan_to_decimal_fails() -> None:
    from engine.expressions.cast import make_cast

    with pytest.raises(ArithmeticError, match="NaN"):
        make_cast(T.DOUBLE, T.Decimal(3, 2), 3)(float("nan"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("AQID", b"\x01\x02\x03"),
        (" AQID ", b"\x01\x02\x03"),
        ("AQI", b"\x01\x02"),
        ("AQ==", b"\x01"),
        ("AQ", b"\x01"),
        ("", b""),
    ],
)
def test_cast_of_a_string_to_bytes_decodes_base64(text: str, expected: bytes) -> None:
    from engine.expressions.cast import make_cast

    assert make_cast(T.STRING, T.BYTES, 3)(text) == expected


@pytest.mark.parametrize("text", ["A", "AQ=", "AQ==AQ==", "AQ!D", "AQIDB"])
def test_cast_of_text_that_is_not_base64_to_bytes_fails(text: str) -> None:
    from engine.expressions.cast import make_cast

    with pytest.raises(ValueError, match="base64"):
        make_cast(T.STRING, T.BYTES, 3)(text)
