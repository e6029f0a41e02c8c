"""URL functions, following ``java.net.URI`` (parts) and ``URLEncoder``/``URLDecoder``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote, unquote_to_bytes

from engine.errors import EvaluationError
from engine.functions.registry import scalar
from engine.plan import types as T

STRING = T.STRING

# RFC 2396 appendix B, the grammar java.net.URI follows.
_URI = re.compile(r"^(?:([^:/?#]+):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$", re.S)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*$")
_HOST_PORT = re.compile(r"^(?:([^@]*)@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]*)(?::(\d*))?$")
# Characters java.net.URI refuses anywhere (it accepts other non-ASCII characters).
_ILLEGAL = re.compile(r'[\x00-\x20"<>\\^`{|}\x7f]|%(?![0-9A-Fa-f]{2})')


@dataclass(frozen=True, slots=True)
class Uri:
    """The parts of a URI as ``java.net.URI`` exposes them (raw, not decoded)."""

    scheme: str | None
    host: str | None
    port: int | None
    path: str | None
    query: str | None
    fragment: str | None


def parse_uri(text: str) -> Uri:
    """Split a URI into its parts; raise ``EvaluationError`` where java.net.URI would."""
    # Where java.net.URI throws, ksqlDB's URL functions fail with one message.
    invalid = EvaluationError(f"URL input has invalid syntax: {text}")
    if _ILLEGAL.search(text) is not None:
        raise invalid
    m = _URI.match(text)
    if m is None or not text:
        raise invalid
    scheme, authority, path, query, fragment = m.groups()
    if scheme is not None and not _SCHEME.match(scheme):
        raise invalid
    if "#" in (fragment or ""):
        raise invalid
    host: str | None = None
    port: int | None = None
    if authority is not None:
        hp = _HOST_PORT.match(authority)
        # java.net.URI keeps a registry-based authority it cannot split; host is then null.
        if hp is not None and hp.group(2):
            host = hp.group(2)
            if hp.group(3):
                port = int(hp.group(3))
    opaque = scheme is not None and authority is None and not path.startswith("/")
    return Uri(
        scheme=scheme,
        host=host,
        port=port,
        path=None if opaque else path,
        query=None if opaque else query,
        fragment=fragment,
    )


def _decoded(part: str | None) -> str | None:
    return None if part is None else unquote(part, errors="replace")


@scalar("URL_EXTRACT_PROTOCOL", params=[STRING], returns=STRING)
def url_extract_protocol(url: str) -> str | None:
    """The scheme of the URL, e.g. 'https', or NULL."""
    return parse_uri(url).scheme


@scalar("URL_EXTRACT_HOST", params=[STRING], returns=STRING)
def url_extract_host(url: str) -> str | None:
    """The host of the URL, or NULL."""
    return parse_uri(url).host


@scalar("URL_EXTRACT_PORT", params=[STRING], returns=T.INTEGER)
def url_extract_port(url: str) -> int | None:
    """The port of the URL, or NULL if it names none."""
    return parse_uri(url).port


@scalar("URL_EXTRACT_PATH", params=[STRING], returns=STRING)
def url_extract_path(url: str) -> str | None:
    """The decoded path of the URL ('' when it has none)."""
    return _decoded(parse_uri(url).path)


@scalar("URL_EXTRACT_QUERY", params=[STRING], returns=STRING)
def url_extract_query(url: str) -> str | None:
    """The decoded query string of the URL, or NULL."""
    return _decoded(parse_uri(url).query)


@scalar("URL_EXTRACT_FRAGMENT", params=[STRING], returns=STRING)
def url_extract_fragment(url: str) -> str | None:
    """The decoded fragment of the URL, or NULL."""
    return _decoded(parse_uri(url).fragment)


@scalar("URL_EXTRACT_PARAMETER", params=[STRING, STRING], returns=STRING)
def url_extract_parameter(url: str, name: str) -> str | None:
    """The value of the first query parameter ``name`` ('' if it has no value), or NULL."""
    query = _decoded(parse_uri(url).query)
    if query is None:
        return None
    for param in query.split("&"):
        key, sep, value = param.partition("=")
        if key == name:
            return value if sep else ""
    return None


_UNRESERVED = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-*_")


@scalar("URL_ENCODE_PARAM", params=[STRING], returns=STRING)
def url_encode_param(s: str) -> str:
    """Encode as application/x-www-form-urlencoded, as Java's URLEncoder does (UTF-8)."""
    out: list[str] = []
    for byte in s.encode("utf-8", "replace"):
        if byte in _UNRESERVED:
            out.append(chr(byte))
        elif byte == 0x20:
            out.append("+")
        else:
            out.append(f"%{byte:02X}")
    return "".join(out)


@scalar("URL_DECODE_PARAM", params=[STRING], returns=STRING)
def url_decode_param(s: str) -> str:
    """Decode application/x-www-form-urlencoded text, as Java's URLDecoder does (UTF-8)."""
    bad = re.search(r"%(?![0-9A-Fa-f]{2})", s)
    if bad is not None:
        raise EvaluationError(
            f"The string '{s}' has an incomplete or invalid escape at index {bad.start()}; "
            "expected '%' followed by two hex digits."
        )
    return unquote_to_bytes(s.replace("+", " ")).decode("utf-8", "replace")
