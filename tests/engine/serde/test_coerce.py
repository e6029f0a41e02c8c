"""Coercion of JSON-like values to text (``json_text``, ``scalar_text``): the edges."""

from __future__ import annotations

import datetime as dt
import re

import pytest

from engine.errors import RecordSerdeError
from engine.serde.coerce import json_text, scalar_text


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_double_that_is_not_finite_cannot_be_written_as_json(value: float) -> None:
    message = f"Cannot write the double {value!r} as JSON: it is not finite."
    with pytest.raises(RecordSerdeError, match=f"^{re.escape(message)}$"):
        json_text(value)


def test_bytes_read_as_a_string_are_base64_and_other_values_their_str() -> None:
    assert scalar_text(b"\x01\x02") == "AQI="
    assert scalar_text([b"\xff", None]) == "[/w==, null]"
    assert scalar_text(dt.date(2020, 1, 2)) == "2020-01-02"


def test_a_decimal_field_read_from_text_that_is_no_number_names_why() -> None:
    from engine.plan import types as T
    from engine.serde.coerce import reader

    read = reader(T.Decimal(4, 2), "AMOUNT")
    assert str(read("12.5")) == "12.50"
    with pytest.raises(RecordSerdeError, match="The string is not a decimal number"):
        read("twelve")


def test_bytes_are_written_as_base64_and_text_already_written_stays_as_it_is() -> None:
    from engine.plan import types as T
    from engine.serde.coerce import writer

    write = writer(T.BYTES)
    assert write(b"\x01\x02") == "AQI="
    assert write("AQI=") == "AQI="
    assert write(None) is None
