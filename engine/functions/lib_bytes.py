"""BYTES functions and the string <-> bytes encodings (hex, utf8, ascii, base64)."""

from __future__ import annotations

import base64
import binascii
import re
import struct
import unicodedata
from collections.abc import Callable

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


@scalar("TO_BYTES", params=[STRING, STRING], returns=BYTES, until=1)
def to_bytes(s: str, encoding: str) -> bytes:
    """Convert a string to bytes using the encoding (hex, utf8, ascii or base64)."""
    return string_to_bytes(s, encoding)


@scalar("FROM_BYTES", params=[BYTES, STRING], returns=STRING, until=1)
def from_bytes(b: bytes, encoding: str) -> str:
    """Convert bytes to a string using the encoding (hex, utf8, ascii or base64)."""
    return bytes_to_string(b, encoding)


@scalar("ENCODE", params=[STRING, STRING, STRING], returns=STRING, until=1)
def encode(s: str, input_encoding: str, output_encoding: str) -> str:
    """Re-encode a string from one encoding (hex, utf8, ascii, base64) to another."""
    if input_encoding.lower() not in ENCODINGS or output_encoding.lower() not in ENCODINGS:
        raise EvaluationError("Supported input and output encodings are: hex, utf8, ascii and base64")
    return bytes_to_string(string_to_bytes(s, input_encoding), output_encoding)


# --------------------------------------------------------------------------- Java's codecs
# Version 2 of TO_BYTES, FROM_BYTES and ENCODE: the codecs ksqlDB's bodies call, each as it
# behaves. TO_BYTES/FROM_BYTES use BytesUtils (jakarta DatatypeConverter for hex, the JDK's
# java.util.Base64); ENCODE uses Commons Codec (Hex, the lenient Base64).


def _java_utf8(s: str) -> bytes:
    """``String.getBytes(UTF_8)``: a lone surrogate becomes '?'."""
    return s.encode("utf-8", "replace")


def _java_ascii(s: str) -> bytes:
    """``String.getBytes(US_ASCII)``: every character outside ASCII becomes '?'."""
    return s.encode("ascii", "replace")


def _java_ascii_text(b: bytes) -> str:
    """``new String(bytes, US_ASCII)``: bytes above 0x7F become U+FFFD."""
    return "".join(chr(c) if c < 0x80 else "\ufffd" for c in b)


def _datatype_parse_hex(s: str) -> bytes:
    """jakarta ``DatatypeConverter.parseHexBinary``: an even number of ASCII hex digits."""
    if len(s) % 2:
        raise EvaluationError(f"hexBinary needs to be even-length: {s}")
    if not all(c in "0123456789abcdefABCDEF" for c in s):
        raise EvaluationError(f"contains illegal character for hexBinary: {s}")
    return bytes.fromhex(s)


_JDK_BASE64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def _jdk_base64_decode(s: str) -> bytes:
    """``java.util.Base64.getDecoder().decode(String)``: the basic alphabet only, padding
    optional but, where present, a complete unit's end; nothing may follow it."""
    src = s.encode("latin-1", "replace")
    out = bytearray()
    bits, shift, i, n = 0, 18, 0, len(src)
    while i < n:
        c = chr(src[i])
        i += 1
        if c == "=":
            if (shift == 6 and (i == n or chr(src[i]) != "=")) or shift == 18:
                raise EvaluationError("Input byte array has wrong 4-byte ending unit")
            if shift == 6:
                i += 1
            break
        value = _JDK_BASE64.get(c)
        if value is None:
            raise EvaluationError(f"Illegal base64 character {src[i - 1]:x}")
        bits |= value << shift
        shift -= 6
        if shift < 0:
            out += bytes(((bits >> 16) & 0xFF, (bits >> 8) & 0xFF, bits & 0xFF))
            bits, shift = 0, 18
    if shift == 6:
        out.append((bits >> 16) & 0xFF)
    elif shift == 0:
        out += bytes(((bits >> 16) & 0xFF, (bits >> 8) & 0xFF))
    elif shift == 12:
        raise EvaluationError("Last unit does not have enough valid bits")
    if i < n:
        raise EvaluationError(f"Input byte array has incorrect ending byte at {i}")
    return bytes(out)


def _bytes_utils_decode(s: str, encoding: str) -> bytes:
    enc = _encoding(encoding)
    if enc == "hex":
        return _datatype_parse_hex(s)
    if enc == "utf8":
        return _java_utf8(s)
    if enc == "ascii":
        return _java_ascii(s)
    return _jdk_base64_decode(s)


def _bytes_utils_encode(b: bytes, encoding: str) -> str:
    enc = _encoding(encoding)
    if enc == "hex":
        return b.hex().upper()  # DatatypeConverter.printHexBinary
    if enc == "utf8":
        return b.decode("utf-8", "replace")
    if enc == "ascii":
        return _java_ascii_text(b)
    return base64.b64encode(b).decode("ascii")


@scalar("TO_BYTES", params=[STRING, STRING], returns=BYTES, since=2)
def to_bytes_java(s: str, encoding: str) -> bytes:
    """Convert a string to bytes in the encoding as ksqlDB's BytesUtils does.

    Hex is an even number of hex digits (no 0x prefix), base64 the JDK's basic decoder."""
    return _bytes_utils_decode(s, encoding)


@scalar("FROM_BYTES", params=[BYTES, STRING], returns=STRING, since=2)
def from_bytes_java(b: bytes, encoding: str) -> str:
    """Convert bytes to a string in the encoding as ksqlDB's BytesUtils does (upper-case hex)."""
    return _bytes_utils_encode(b, encoding)


def _java_char_digit16(c: str) -> int:
    """``Character.digit(c, 16)``: any Unicode decimal digit, ASCII and fullwidth a-f/A-F."""
    if c in "abcdef" or c in "ABCDEF":
        return int(c, 16)
    if "\uff21" <= c <= "\uff26" or "\uff41" <= c <= "\uff46":
        return (ord(c) - 0xFF21 if c <= "\uff26" else ord(c) - 0xFF41) + 10
    return unicodedata.decimal(c, -1)


def _codec_hex_decode(s: str) -> bytes:
    """Commons Codec ``Hex.decodeHex``: an even number of characters, each a hex digit."""
    units = s.encode("utf-16-le", "surrogatepass")
    chars = [chr(int.from_bytes(units[i : i + 2], "little")) for i in range(0, len(units), 2)]
    if len(chars) % 2:
        raise EvaluationError("Odd number of characters.")
    out = bytearray()
    for i in range(0, len(chars), 2):
        high, low = _java_char_digit16(chars[i]), _java_char_digit16(chars[i + 1])
        for index, digit in ((i, high), (i + 1, low)):
            if digit < 0:
                raise EvaluationError(f"Illegal hexadecimal character {chars[index]} at index {index}")
        out.append(high << 4 | low)
    return bytes(out)


# Java's regex '.' stops at these line terminators.
_JAVA_LINE_TERMINATORS = "\n\r\u0085\u2028\u2029"
_HEX_0X = re.compile(f"0x[^{_JAVA_LINE_TERMINATORS}]*")
_HEX_QUOTED = re.compile(f"[xX]'[^{_JAVA_LINE_TERMINATORS}]*'")


def _hex_strip(s: str) -> str:
    """ENCODE's ``hexStrip``: '0x...' loses its prefix (gaining a '0' when the digits are
    odd), "X'...'" its quotes; anything else is left as it is."""
    length = len(s.encode("utf-16-le", "surrogatepass")) // 2
    if _HEX_0X.fullmatch(s):
        return "0" + s[2:] if length % 2 else s[2:]
    if _HEX_QUOTED.fullmatch(s):
        return s[2:-1]
    return s


_CODEC_BASE64 = {**_JDK_BASE64, "-": 62, "_": 63}


def _codec_base64_decode(s: str) -> bytes:
    """Commons Codec ``Base64.decodeBase64`` (lenient): characters outside both alphabets
    are skipped, the first '=' ends the data, a dangling single character is dropped."""
    out = bytearray()
    bits, count = 0, 0
    for byte in s.encode("utf-8", "replace"):
        c = chr(byte)
        if c == "=":
            break
        value = _CODEC_BASE64.get(c)
        if value is None:
            continue
        bits = (bits << 6) | value
        count += 1
        if count == 4:
            out += bytes(((bits >> 16) & 0xFF, (bits >> 8) & 0xFF, bits & 0xFF))
            bits, count = 0, 0
    if count == 2:
        out.append((bits >> 4) & 0xFF)
    elif count == 3:
        out += bytes(((bits >> 10) & 0xFF, (bits >> 2) & 0xFF))
    return bytes(out)


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


_ENCODERS: dict[str, Callable[[str], str]] = {
    "hexascii": lambda s: _java_ascii_text(_codec_hex_decode(_hex_strip(s))),
    "hexutf8": lambda s: _codec_hex_decode(_hex_strip(s)).decode("utf-8", "replace"),
    "hexbase64": lambda s: _b64(_codec_hex_decode(_hex_strip(s))),
    "utf8ascii": lambda s: _java_ascii_text(_java_utf8(s)),
    "utf8hex": lambda s: _java_utf8(s).hex(),
    "utf8base64": lambda s: _b64(_java_utf8(s)),
    "asciiutf8": lambda s: _java_ascii(s).decode("utf-8", "replace"),
    "asciihex": lambda s: _java_ascii(s).hex(),
    "asciibase64": lambda s: _b64(_java_ascii(s)),
    "base64ascii": lambda s: _java_ascii_text(_codec_base64_decode(s)),
    "base64utf8": lambda s: _codec_base64_decode(s).decode("utf-8", "replace"),
    "base64hex": lambda s: _codec_base64_decode(s).hex(),
}


@scalar("ENCODE", params=[STRING, STRING, STRING], returns=STRING, since=2)
def encode_java(s: str, input_encoding: str, output_encoding: str) -> str:
    """Re-encode a string with one of ksqlDB's twelve ENCODE encoders (hex, utf8, ascii, base64).

    The two lower-cased names joined must name an encoder (a pair of one encoding is none);
    hex input may be '0x...' or "X'...'", base64 input is read leniently (Commons Codec)."""
    encoder = _ENCODERS.get(input_encoding.lower() + output_encoding.lower())
    if encoder is None:
        raise EvaluationError("Supported input and output encodings are: hex, utf8, ascii and base64")
    return encoder(s)


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
