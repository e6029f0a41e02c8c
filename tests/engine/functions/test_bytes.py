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
        (b"\x00\xff", "hex", "00FF"),
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


def test_from_bytes_version_2_writes_hex_in_upper_case_as_print_hex_binary():
    assert call("FROM_BYTES", b"\x00\xff\x4b", "hex") == "00FF4B"
    assert REGISTRY.resolve("FROM_BYTES", [T.BYTES, T.STRING], 1).invoke([b"\x00\xff", "hex"]) == "00ff"


@pytest.mark.parametrize(
    ("text", "encoding", "message"),
    [
        ("0x4b", "hex", "contains illegal character for hexBinary: 0x4b"),
        ("4b5", "hex", "hexBinary needs to be even-length: 4b5"),
        ("YQ=", "base64", "Input byte array has wrong 4-byte ending unit"),
        ("=", "base64", "Input byte array has wrong 4-byte ending unit"),
        ("Y", "base64", "Last unit does not have enough valid bits"),
        ("YQ==YQ==", "base64", "Input byte array has incorrect ending byte at 4"),
        ("a-b_", "base64", "Illegal base64 character 2d"),
        ("S1N RTA", "base64", "Illegal base64 character 20"),
    ],
)
def test_to_bytes_version_2_reads_hex_and_base64_as_the_jdk_does(text, encoding, message):
    with pytest.raises(EvaluationError) as raised:
        call("TO_BYTES", text, encoding)
    assert str(raised.value) == message


def test_to_bytes_version_2_accepts_what_the_jdk_decoders_accept():
    assert call("TO_BYTES", "4B53", "hex") == b"KS"
    assert call("TO_BYTES", "YQ", "base64") == b"a"
    assert call("TO_BYTES", "YWI", "base64") == b"ab"
    assert call("TO_BYTES", "YQ==", "base64") == b"a"
    assert call("TO_BYTES", "", "base64") == b""
    # A lone surrogate has no UTF-8 form: Java writes '?'.
    assert call("TO_BYTES", "a\ud800", "utf8") == b"a?"
    # Version 1, kept for saved plans, took a 0x prefix.
    assert REGISTRY.resolve("TO_BYTES", [T.STRING, T.STRING], 1).invoke(["0x4b", "hex"]) == b"K"


@pytest.mark.parametrize(
    ("text", "source", "target", "expected"),
    [
        ("0x4b53", "hex", "utf8", "KS"),
        ("0x04b", "hex", "base64", "AEs="),  # an odd 0x form gains a leading 0
        ("X'4b53'", "hex", "ascii", "KS"),
        ("x''", "hex", "hex", None),
        ("\uff14\uff42", "hex", "base64", "Sw=="),  # Character.digit takes fullwidth digits
        ("S1N RTA", "base64", "utf8", "KSQL"),  # Commons Codec skips what is not base64
        ("S1NRTA==S1NR", "base64", "hex", "4b53514c"),  # and stops at the first pad
        ("a-_", "base64", "hex", "6bef"),  # and reads the URL-safe alphabet as well
        ("S", "base64", "hex", ""),  # a dangling character is dropped
        ("h\u00e9", "utf8", "hex", "68c3a9"),
        ("h\u00e9", "ascii", "hex", "683f"),
        ("h\u00e9", "utf8", "ascii", "h\ufffd\ufffd"),
        ("h\u00e9", "ascii", "utf8", "h?"),
        ("aGk=", "BASE64", "Ascii", "hi"),
    ],
)
def test_encode_version_2_follows_ksqldb_encoders(text, source, target, expected):
    if expected is None:
        with pytest.raises(EvaluationError, match="^Supported input and output encodings"):
            call("ENCODE", text, source, target)
    else:
        assert call("ENCODE", text, source, target) == expected


def test_encode_version_2_joins_the_encoding_names_and_has_no_pair_of_one_encoding():
    for same in ("utf8", "hex", "ascii", "base64"):
        with pytest.raises(EvaluationError) as raised:
            call("ENCODE", "61", same, same)
        assert str(raised.value) == "Supported input and output encodings are: hex, utf8, ascii and base64"
    # ksqlDB looks the two names up joined: 'hexu' + 'tf8' is 'hexutf8'.
    assert call("ENCODE", "4b53", "hexu", "tf8") == "KS"
    assert REGISTRY.resolve("ENCODE", [T.STRING] * 3, 1).invoke(["ab", "utf8", "utf8"]) == "ab"


@pytest.mark.parametrize(
    ("text", "message"),
    [("4b5", "Odd number of characters."), ("4bzz", "Illegal hexadecimal character z at index 2")],
)
def test_encode_version_2_fails_on_bad_hex_with_commons_codec_messages(text, message):
    with pytest.raises(EvaluationError) as raised:
        call("ENCODE", text, "hex", "utf8")
    assert str(raised.value) == message
