"""BYTES functions and the hex / utf8 / ascii / base64 encodings."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine.functions  # noqa: F401  (registers the libraries)
from engine.errors import EvaluationError
from engine.functions.registry import REGISTRY
from engine.plan import types as T

_TYPES = {bool: T.BOOLEAN, int: T.INTEGER, float: T.DOUBLE, str: T.STRING, bytes: T.BYTES}


def call(name: str, *args: Any, types: list[Any] | None = None) -> Any:
    """Resolve ``name`` for the arguments' types (NULL typed as BYTES) and invoke it."""
    if types is None:
        types = [T.BYTES if a is None else _TYPES[type(a)] for a in args]
    return REGISTRY.resolve(name, types).invoke(list(args))


@pytest.mark.parametrize(
    ("text", "encoding", "expected"),
    [
        ("4b53", "hex", b"KS"),
        ("4B53", "HEX", b"KS"),
        ("", "hex", b""),
        ("h\u00e9", "utf8", b"h\xc3\xa9"),
        ("h\u00e9", "ascii", b"h?"),
        ("S1NRTA==", "base64", b"KSQL"),
        ("S1NRTA", "Base64", b"KSQL"),
    ],
)
def test_to_bytes_decodes_each_encoding(text, encoding, expected):
    assert call("TO_BYTES", text, encoding) == expected


@pytest.mark.parametrize(
    ("data", "encoding", "expected"),
    [
        (b"\x00\xff", "hex", "00ff"),
        (b"h\xc3\xa9", "utf8", "h\u00e9"),
        (b"ok\xff", "ascii", "ok\ufffd"),
        (b"KSQL", "base64", "S1NRTA=="),
        (b"", "base64", ""),
    ],
)
def test_from_bytes_encodes_each_encoding(data, encoding, expected):
    assert call("FROM_BYTES", data, encoding) == expected


def test_conversions_return_null_for_null_input():
    assert call("TO_BYTES", None, "hex", types=[T.STRING, T.STRING]) is None
    assert call("FROM_BYTES", None, "hex", types=[T.BYTES, T.STRING]) is None


def test_conversions_reject_unknown_encoding_and_bad_input():
    with pytest.raises(EvaluationError) as raised:
        call("TO_BYTES", "abc", "utf16")
    assert str(raised.value) == "Unknown encoding type 'utf16'. Supported formats are 'hex', 'utf8', 'ascii', and 'base64'."
    with pytest.raises(EvaluationError, match="hex"):
        call("TO_BYTES", "abc", "hex")
    with pytest.raises(EvaluationError, match="base64"):
        call("TO_BYTES", "!!!", "base64")


@given(st.binary(), st.sampled_from(["hex", "base64"]))
def test_bytes_round_trip_through_text_encodings(data, encoding):
    text = call("FROM_BYTES", data, encoding)
    assert call("TO_BYTES", text, encoding) == data


def test_encode_converts_between_encodings():
    assert call("ENCODE", "KSQL", "utf8", "hex") == "4b53514c"
    assert call("ENCODE", "4b53514c", "hex", "base64") == "S1NRTA=="
    assert call("ENCODE", "S1NRTA==", "base64", "ascii") == "KSQL"
    assert call("ENCODE", None, "hex", "utf8", types=[T.STRING] * 3) is None
    with pytest.raises(EvaluationError) as raised:
        call("ENCODE", "x", "utf8", "rot13")
    assert str(raised.value) == "Supported input and output encodings are: hex, utf8, ascii and base64"


def test_bytes_overloads_of_string_functions():
    assert call("CONCAT", b"ab", None, b"c") == b"abc"
    assert call("CONCAT_WS", b"-", b"a", None, b"b") == b"a-b"
    assert call("CONCAT_WS", None, b"a", types=[T.BYTES, T.BYTES]) is None
    assert call("LEN", b"\x00\x01\x02") == 3
    assert call("SUBSTRING", b"abcdef", 2, 3) == b"bcd"
    assert call("SUBSTRING", b"abcdef", -2) == b"ef"
    assert call("SUBSTRING", b"abc", 9, 3) == b""


def test_split_bytes_keeps_empty_pieces():
    assert call("SPLIT", b"a,,b,", b",") == [b"a", b"", b"b", b""]
    assert call("SPLIT", b"ab", b"") == [b"a", b"b"]
    assert call("SPLIT", b"", b"") == [b""]
    assert call("SPLIT", None, b",") is None


@pytest.mark.parametrize(
    ("fn", "data", "size", "padding", "expected"),
    [
        ("LPAD", b"ok", 5, b"\x00\x01", b"\x00\x01\x00ok"),
        ("RPAD", b"ok", 5, b"\x00\x01", b"ok\x00\x01\x00"),
        ("LPAD", b"okay", 2, b"-", b"ok"),
        ("RPAD", b"okay", 0, b"-", b""),
        ("LPAD", b"ok", -1, b"-", None),
        ("RPAD", b"ok", 4, b"", None),
    ],
)
def test_pad_bytes(fn, data, size, padding, expected):
    assert call(fn, data, size, padding) == expected


def test_numbers_from_bytes_with_byte_order():
    assert call("INT_FROM_BYTES", b"\x00\x00\x01\x00") == 256
    assert call("INT_FROM_BYTES", b"\x00\x01\x00\x00", "LITTLE_ENDIAN") == 256
    assert call("INT_FROM_BYTES", b"\xff\xff\xff\xff") == -1
    assert call("BIGINT_FROM_BYTES", b"\x00" * 7 + b"\x2a") == 42
    assert call("DOUBLE_FROM_BYTES", b"\x3f\xf8" + b"\x00" * 6) == 1.5
    assert call("INT_FROM_BYTES", None) is None
    with pytest.raises(EvaluationError) as raised:
        call("INT_FROM_BYTES", b"\x01")
    assert str(raised.value) == "Number of bytes must be equal to 4, but found 1"
    with pytest.raises(EvaluationError) as raised:
        call("BIGINT_FROM_BYTES", b"\x00" * 8, "MIDDLE")
    assert str(raised.value) == "Byte order must be BIG_ENDIAN or LITTLE_ENDIAN. Unknown byte order 'MIDDLE'."
