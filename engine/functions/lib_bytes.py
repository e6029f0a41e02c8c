"""BYTES functions and the string <-> bytes encodings (hex, utf8, ascii, base64)."""

from __future__ import annotations

import base64
import binascii
import struct

from engine.errors import EvaluationError
from engine.functions.lib_string import concat_ws_inputs, pad, substring_bounds
from engine.functions.registry import scalar
from engine.plan import types as T

STRING, INTEGER, BYTES = T.STRING, T.INTEGER, T.BYTES

ENCODINGS = ("hex", "utf8", "ascii", "base64")


def _encoding(name: str) -> str:
    key = name.lower()
    if key not in ENCODINGS:
        raise EvaluationError(
            f"Unknown encoding type '{name}'. Supported formats are 'hex', 'utf8', 'ascii', and 'base64'."
        )
    return key


def string_to_bytes(s: str, encoding: str) -> bytes:
    """Decode text in the named encoding into bytes (the inverse of ``bytes_to_string``)."""
    enc = _encoding(encoding)
    if enc == "utf8":
        return s.encode("utf-8", "surrogatepass")
    if enc == "ascii":
        # Java's getBytes(US_ASCII) replaces unmappable characters with '?'.
        return s.encode("ascii", "replace")
    if enc == "hex":
        text = s[2:] if s[:2] in ("0x", "0X") else s
        try:
            return binascii.unhexlify(text)
        except (binascii.Error, ValueError) as exc:
            raise EvaluationError(
                f"The string '{s}' is not valid hex: expected an even number of hex digits."
            ) from exc
    try:
        # Java's basic decoder accepts missing padding.
        return base64.b64decode(s + "=" * (-len(s) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise EvaluationError(f"The string '{s}' is not valid base64.") from exc


def bytes_to_string(b: bytes, encoding: str) -> str:
    """Encode bytes as text in the named encoding."""
    enc = _encoding(encoding)
    if enc == "utf8":
        return b.decode("utf-8", "replace")
    if enc == "ascii":
        return "".join(chr(c) if c < 0x80 else "\ufffd" for c in b)
    if enc == "hex":
        return b.hex()
    return base64.b64encode(b).decode("ascii")


@scalar("TO_BYTES", params=[STRING, STRING], returns=BYTES)
def to_bytes(s: str, encoding: str) -> bytes:
    """Convert a string to bytes using the encoding (hex, utf8, ascii or base64)."""
    return string_to_bytes(s, encoding)


@scalar("FROM_BYTES", params=[BYTES, STRING], returns=STRING)
def from_bytes(b: bytes, encoding: str) -> str:
    """Convert bytes to a string using the encoding (hex, utf8, ascii or base64)."""
    return bytes_to_string(b, encoding)


@scalar("ENCODE", params=[STRING, STRING, STRING], returns=STRING)
def encode(s: str, input_encoding: str, output_encoding: str) -> str:
    """Re-encode a string from one encoding (hex, utf8, ascii, base64) to another."""
    if input_encoding.lower() not in ENCODINGS or output_encoding.lower() not in ENCODINGS:
        raise EvaluationError("Supported input and output encodings are: hex, utf8, ascii and base64")
    return bytes_to_string(string_to_bytes(s, input_encoding), output_encoding)


# --------------------------------------------------------------------------- BYTES overloads


@scalar("CONCAT", params=[BYTES], returns=BYTES, variadic=True, null_propagating=False)
def concat_bytes(*parts: bytes | None) -> bytes:
    """Concatenate the byte arrays, skipping NULLs."""
    return b"".join(p for p in parts if p is not None)


@scalar(
    "CONCAT_WS", params=[BYTES, BYTES], returns=BYTES, variadic=True, null_propagating=False,
    until=1,
)
def concat_ws_bytes(separator: bytes | None, *parts: bytes | None) -> bytes | None:
    """Join the non-NULL byte arrays with the separator; NULL if the separator is NULL."""
    if separator is None:
        return None
    return separator.join(p for p in parts if p is not None)


@scalar("CONCAT_WS", params=[BYTES], returns=BYTES, variadic=True, null_propagating=False, since=2)
def concat_ws_bytes_values(*inputs: bytes | None) -> bytes | None:
    """Join the non-NULL byte arrays after the first with the first as separator; NULL if
    the separator is NULL; fewer than two values are an error (ksqlDB's ``BYTES...``)."""
    concat_ws_inputs(inputs)
    separator = inputs[0]
    if separator is None:
        return None
    return separator.join(p for p in inputs[1:] if p is not None)


@scalar("LEN", params=[BYTES], returns=INTEGER)
def length_bytes(b: bytes) -> int:
    """The number of bytes."""
    return len(b)


@scalar("SUBSTRING", params=[BYTES, INTEGER], returns=BYTES)
def substring_bytes_from(b: bytes, pos: int) -> bytes:
    """The bytes from 1-based position ``pos`` (negative counts from the end)."""
    start, end = substring_bounds(len(b), pos, None)
    return b[start:end]


@scalar("SUBSTRING", params=[BYTES, INTEGER, INTEGER], returns=BYTES)
def substring_bytes(b: bytes, pos: int, count: int) -> bytes:
    """Up to ``count`` bytes from 1-based position ``pos``."""
    start, end = substring_bounds(len(b), pos, count)
    return b[start:end]


@scalar("SPLIT", params=[BYTES, BYTES], returns=T.Array(BYTES))
def split_bytes(b: bytes, delimiter: bytes) -> list[bytes]:
    """Split around a delimiter, keeping empty pieces; an empty delimiter splits every byte."""
    if not delimiter:
        return [b[i : i + 1] for i in range(len(b))] if b else [b""]
    return b.split(delimiter)


@scalar("LPAD", params=[BYTES, INTEGER, BYTES], returns=BYTES)
def lpad_bytes(b: bytes, target: int, padding: bytes) -> bytes | None:
    """Left-pad with repeated ``padding`` to ``target`` bytes (truncates longer input)."""
    if target < 0 or not padding:
        return None
    return _pad_bytes(b, target, padding, left=True)


@scalar("RPAD", params=[BYTES, INTEGER, BYTES], returns=BYTES)
def rpad_bytes(b: bytes, target: int, padding: bytes) -> bytes | None:
    """Right-pad with repeated ``padding`` to ``target`` bytes (truncates longer input)."""
    if target < 0 or not padding:
        return None
    return _pad_bytes(b, target, padding, left=False)


def _pad_bytes(b: bytes, target: int, padding: bytes, *, left: bool) -> bytes:
    # Latin-1 maps bytes to code points one to one, so the string padding applies as is.
    text = pad(b.decode("latin-1"), target, padding.decode("latin-1"), left)
    return text.encode("latin-1")


# --------------------------------------------------------------------------- numbers from bytes

_BYTE_ORDERS = {"BIG_ENDIAN": ">", "LITTLE_ENDIAN": "<"}


def _unpack(b: bytes, fmt: str, size: int, byte_order: str) -> int | float:
    order = _BYTE_ORDERS.get(byte_order.upper())
    if order is None:
        raise EvaluationError(
            f"Byte order must be BIG_ENDIAN or LITTLE_ENDIAN. Unknown byte order '{byte_order}'."
        )
    if len(b) != size:
        raise EvaluationError(f"Number of bytes must be equal to {size}, but found {len(b)}")
    value: int | float = struct.unpack(order + fmt, b)[0]
    return value


@scalar("INT_FROM_BYTES", params=[BYTES], returns=INTEGER)
def int_from_bytes(b: bytes) -> int:
    """The INTEGER in 4 big-endian bytes."""
    return int(_unpack(b, "i", 4, "BIG_ENDIAN"))


@scalar("INT_FROM_BYTES", params=[BYTES, STRING], returns=INTEGER)
def int_from_bytes_order(b: bytes, byte_order: str) -> int:
    """The INTEGER in 4 bytes of the given byte order."""
    return int(_unpack(b, "i", 4, byte_order))


@scalar("BIGINT_FROM_BYTES", params=[BYTES], returns=T.BIGINT)
def bigint_from_bytes(b: bytes) -> int:
    """The BIGINT in 8 big-endian bytes."""
    return int(_unpack(b, "q", 8, "BIG_ENDIAN"))


@scalar("BIGINT_FROM_BYTES", params=[BYTES, STRING], returns=T.BIGINT)
def bigint_from_bytes_order(b: bytes, byte_order: str) -> int:
    """The BIGINT in 8 bytes of the given byte order."""
    return int(_unpack(b, "q", 8, byte_order))


@scalar("DOUBLE_FROM_BYTES", params=[BYTES], returns=T.DOUBLE)
def double_from_bytes(b: bytes) -> float:
    """The DOUBLE in 8 big-endian bytes."""
    return float(_unpack(b, "d", 8, "BIG_ENDIAN"))


@scalar("DOUBLE_FROM_BYTES", params=[BYTES, STRING], returns=T.DOUBLE)
def double_from_bytes_order(b: bytes, byte_order: str) -> float:
    """The DOUBLE in 8 bytes of the given byte order."""
    return float(_unpack(b, "d", 8, byte_order))
