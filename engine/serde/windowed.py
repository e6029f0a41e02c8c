"""Windowed key bytes as Kafka Streams writes them, and so as ksqlDB's windowed keys look.

A time window (tumbling or hopping) key is the inner key's bytes followed by the window
start as an 8-byte big-endian signed integer (epoch ms); the window end is not stored
(it is start + the window size, known from the query). A session window key is the inner
key's bytes, then the 8-byte end, then the 8-byte start.
"""

from __future__ import annotations

import struct

from engine.errors import RecordSerdeError

_LONG = struct.Struct(">q")
_TWO_LONGS = struct.Struct(">qq")
TIME_SUFFIX = _LONG.size
SESSION_SUFFIX = _TWO_LONGS.size


def encode_time_window_key(key: bytes, start: int) -> bytes:
    """``key`` + window start (big-endian int64)."""
    return bytes(key) + _LONG.pack(start)


def decode_time_window_key(data: bytes) -> tuple[bytes, int]:
    """``(inner key bytes, window start)`` of a time-windowed key."""
    if len(data) < TIME_SUFFIX:
        raise RecordSerdeError(
            f"A time-windowed key needs at least {TIME_SUFFIX} bytes (the window start), got {len(data)}."
        )
    (start,) = _LONG.unpack_from(data, len(data) - TIME_SUFFIX)
    return bytes(data[:-TIME_SUFFIX]), start


def encode_session_window_key(key: bytes, start: int, end: int) -> bytes:
    """``key`` + window end + window start (big-endian int64 each)."""
    if end < start:
        raise RecordSerdeError(f"A session window cannot end ({end}) before it starts ({start}).")
    return bytes(key) + _TWO_LONGS.pack(end, start)


def decode_session_window_key(data: bytes) -> tuple[bytes, int, int]:
    """``(inner key bytes, window start, window end)`` of a session-windowed key."""
    if len(data) < SESSION_SUFFIX:
        raise RecordSerdeError(
            f"A session-windowed key needs at least {SESSION_SUFFIX} bytes (window end and start), "
            f"got {len(data)}."
        )
    end, start = _TWO_LONGS.unpack_from(data, len(data) - SESSION_SUFFIX)
    return bytes(data[:-SESSION_SUFFIX]), start, end
