"""Windowed key bytes as Kafka Streams writes them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import RecordSerdeError
from engine.serde.windowed import (
    decode_session_window_key,
    decode_time_window_key,
    encode_session_window_key,
    encode_time_window_key,
)

times = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def test_a_time_window_key_is_the_key_then_the_big_endian_start() -> None:
    assert encode_time_window_key(b"k", 1) == b"k" + bytes(7) + b"\x01"
    assert encode_time_window_key(b"\x00\x00\x00\x07", 0x0102030405060708) == (
        b"\x00\x00\x00\x07\x01\x02\x03\x04\x05\x06\x07\x08"
    )


def test_a_session_window_key_is_the_key_then_end_then_start() -> None:
    assert encode_session_window_key(b"k", 1, 2) == b"k" + bytes(7) + b"\x02" + bytes(7) + b"\x01"


@given(key=st.binary(), start=times)
def test_time_window_keys_round_trip(key: bytes, start: int) -> None:
    assert decode_time_window_key(encode_time_window_key(key, start)) == (key, start)


@given(key=st.binary(), start=times, length=st.integers(min_value=0, max_value=2**40))
def test_session_window_keys_round_trip(key: bytes, start: int, length: int) -> None:
    end = min(start + length, 2**63 - 1)
    assert decode_session_window_key(encode_session_window_key(key, start, end)) == (key, start, end)


def test_negative_times_are_signed() -> None:
    assert decode_time_window_key(b"k" + b"\xff" * 8) == (b"k", -1)


def test_too_short_bytes_are_refused_with_their_length() -> None:
    with pytest.raises(RecordSerdeError, match="at least 8 bytes .*got 7"):
        decode_time_window_key(bytes(7))
    with pytest.raises(RecordSerdeError, match="at least 16 bytes .*got 15"):
        decode_session_window_key(bytes(15))


def test_a_session_cannot_end_before_it_starts() -> None:
    with pytest.raises(RecordSerdeError, match=r"cannot end \(1\) before it starts \(2\)"):
        encode_session_window_key(b"k", 2, 1)
