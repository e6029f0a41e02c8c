"""JSON functions: parsing JSON text (as Jackson does) and TO_JSON_STRING.

JSON text is parsed with numbers as Python ``int`` (integral) or ``float`` and written
back compactly (``{"a":1}``) with doubles in Java form, as Jackson's ``toString`` does.

TO_JSON_STRING does not need the argument's SQL type at run time: the engine's value
representation already tells DECIMAL (``Decimal``) from DOUBLE (``float``), DATE / TIME /
TIMESTAMP / BYTES apart, and STRUCT dicts keep their fields in declared order.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import re
from collections.abc import Callable
from typing import Any

from engine.data.java_double import java_double_to_string
from engine.data.values import format_double, format_time, format_timestamp
from engine.errors import EvaluationError
from engine.functions.registry import Generic, scalar
from engine.plan import types as T

STRING = T.STRING

_MISSING = object()
_DECODER = json.JSONDecoder(parse_constant=lambda name: _reject_constant(name))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: str) -> Any:
    """Parse JSON text as Jackson's ``readTree`` does; ``_MISSING`` for empty or invalid text.

    Like Jackson, content after the first complete value is ignored.
    """
    stripped = text.lstrip(" \t\r\n")
    if not stripped:
        return _MISSING
    try:
        value, _end = _DECODER.raw_decode(stripped)
    except ValueError:
        return _MISSING
    return value


def read_json(text: str) -> Any:
    """``parse_json`` as ksqlDB's JSON functions read their input (version 2 of each): text
    that is not JSON fails, and so the whole expression (empty text is ``_MISSING``)."""
    value = parse_json(text)
    if value is _MISSING and text.lstrip(" \t\r\n"):
        raise EvaluationError(f"Invalid JSON format:{text}")
    return value


Reader = Callable[[str], Any]


def _versions(name: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``body(read, *args)`` as version 1 of ``name`` (reading with ``parse_json``)
    and version 2 (reading with ``read_json``); the body's docstring describes both."""

    def wrap(body: Callable[..., Any]) -> Callable[..., Any]:
        def lenient(*args: Any) -> Any:
            return body(parse_json, *args)

        def checked(*args: Any) -> Any:
            return body(read_json, *args)

        lenient.__doc__ = body.__doc__
        checked.__doc__ = f"{body.__doc__} Text that is not JSON fails."
        scalar(name, until=1, **kwargs)(lenient)
        scalar(name, since=2, **kwargs)(checked)
        return body

    return wrap


def _escape(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def dump_json(value: Any) -> str:
    """Write a parsed JSON value compactly, as Jackson's ``JsonNode.toString`` does."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_double(value)
    if isinstance(value, str):
        return _escape(value)
    if isinstance(value, list):
        return "[" + ",".join(dump_json(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_escape(k)}:{dump_json(v)}" for k, v in value.items()) + "}"
    raise EvaluationError(f"Cannot write the value {value!r} as JSON.")


def to_json_text(value: Any) -> str:
    """Serialise an engine value as ksqlDB's TO_JSON_STRING does.

    Decimals print plainly, doubles in Java form, DATE/TIME/TIMESTAMP as ISO strings, BYTES
    as base64 strings, STRUCT and MAP as objects (MAP keys as strings).
    """
    if value is None or isinstance(value, (bool, int, float, str)):
        return dump_json(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, (bytes, bytearray)):
        return _escape(base64.b64encode(bytes(value)).decode("ascii"))
    if isinstance(value, dt.datetime):
        return _escape(format_timestamp(value))
    if isinstance(value, dt.date):
        return _escape(value.isoformat())
    if isinstance(value, dt.time):
        return _escape(format_time(value))
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json_text(v) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{_escape(_key_text(k))}:{to_json_text(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    raise EvaluationError(f"TO_JSON_STRING cannot serialise the value {value!r}.")


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    text = to_json_text(key)
    return text[1:-1] if text.startswith('"') else text


@scalar("TO_JSON_STRING", params=[Generic("T")], returns=STRING, null_propagating=False, until=1)
def to_json_string(value: Any) -> str:
    """Serialise any value as JSON text; NULL gives 'null'."""
    return to_json_text(value)


def _utf16_order(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")  # String.compareTo's order


def to_json_text_java(value: Any) -> str:
    """TO_JSON_STRING since version 2, as ksqlDB's body writes through Jackson: STRUCT fields
    and MAP keys sorted (a TreeMap of their texts), a DOUBLE with ``Double.toString``'s digits,
    NaN and the infinities as JSON strings."""
    if isinstance(value, float):
        text = java_double_to_string(value)
        return f'"{text}"' if not math.isfinite(value) else text
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_json_text_java(v) for v in value) + "]"
    if isinstance(value, dict):
        items = sorted(((_key_text(k), v) for k, v in value.items()), key=lambda kv: _utf16_order(kv[0]))
        return "{" + ",".join(f"{_escape(k)}:{to_json_text_java(v)}" for k, v in items) + "}"
    return to_json_text(value)


@scalar("TO_JSON_STRING", params=[Generic("T")], returns=STRING, null_propagating=False, since=2)
def to_json_string_java(value: Any) -> str:
    """Serialise any value as JSON text, fields and keys sorted, as ksqlDB's Jackson writes it;
    NULL gives 'null'."""
    return to_json_text_java(value)


@scalar("IS_JSON_STRING", params=[STRING], returns=T.BOOLEAN, null_propagating=False)
def is_json_string(text: str | None) -> bool:
    """Whether the string is valid JSON; false for NULL."""
    return text is not None and parse_json(text) is not _MISSING


@_versions("JSON_ARRAY_LENGTH", params=[STRING], returns=T.INTEGER)
def json_array_length(read: Reader, text: str) -> int | None:
    """The number of elements of a JSON array, or NULL if the text is not one."""
    value = read(text)
    return len(value) if isinstance(value, list) else None


def _same_json_value(element: Any, wanted: Any) -> bool:
    if wanted is None:
        return element is None
    if isinstance(wanted, bool) or isinstance(element, bool):
        return element is wanted
    if isinstance(wanted, int):
        return type(element) is int and element == wanted
    if isinstance(wanted, float):
        return type(element) is float and element == wanted
    if isinstance(wanted, str):
        return isinstance(element, str) and element == wanted
    return False


@scalar(
    "JSON_ARRAY_CONTAINS",
    params=[STRING, Generic("T")],
    returns=T.BOOLEAN,
    null_propagating=False,
)
def json_array_contains(text: str | None, wanted: Any) -> bool:
    """Whether a JSON array has a top-level element equal to the value (same JSON type)."""
    if text is None:
        return False
    value = parse_json(text)
    if not isinstance(value, list):
        return False
    return any(_same_json_value(e, wanted) for e in value)


@_versions("JSON_CONCAT", params=[STRING], returns=STRING, variadic=True, null_propagating=False)
def json_concat(read: Reader, *texts: str | None) -> str | None:
    """Merge JSON objects (later keys win) or concatenate arrays (non-arrays become elements)."""
    if not texts or any(t is None for t in texts):
        return None
    values = [read(t) for t in texts if t is not None]
    if any(v is _MISSING for v in values):
        return None
    if all(isinstance(v, dict) for v in values):
        merged: dict[str, Any] = {}
        for v in values:
            merged.update(v)
        return dump_json(merged)
    items: list[Any] = []
    for v in values:
        items.extend(v if isinstance(v, list) else [v])
    return dump_json(items)


@_versions("JSON_ITEMS", params=[STRING], returns=T.Array(STRING))
def json_items(read: Reader, text: str) -> list[str] | None:
    """The elements of a JSON array, each as JSON text; NULL if the text is not an array."""
    value = parse_json(text)
    if not isinstance(value, list):
        if read is read_json and value is not None:  # ksqlDB reads a list; JSON null is none
            raise EvaluationError(f"Invalid JSON format:{text}")
        return None
    return [dump_json(v) for v in value]


@_versions("JSON_KEYS", params=[STRING], returns=T.Array(STRING))
def json_keys(read: Reader, text: str) -> list[str] | None:
    """The keys of a JSON object in order; NULL if the text is not an object."""
    value = read(text)
    return list(value) if isinstance(value, dict) else None


@_versions("JSON_RECORDS", params=[STRING], returns=T.Map(STRING, STRING))
def json_records(read: Reader, text: str) -> dict[str, str] | None:
    """The entries of a JSON object; string values as text, others as JSON text."""
    value = read(text)
    if not isinstance(value, dict):
        return None
    return {k: v if isinstance(v, str) else dump_json(v) for k, v in value.items()}


# --------------------------------------------------------------------------- EXTRACTJSONFIELD

_PATH_TOKEN = re.compile(
    r"""\.(?P<name>[^.\[\]]+)            # .name
      | \[\s*(?P<index>-?\d+)\s*\]       # [0]
      | \[\s*'(?P<sq>(?:[^'\\]|\\.)*)'\s*\]   # ['name']
      | \[\s*"(?P<dq>(?:[^"\\]|\\.)*)"\s*\]   # ["name"]
    """,
    re.VERBOSE,
)


def parse_json_path(path: str) -> list[str | int]:
    """Split a JsonPath like ``$.a.b[0]['c d']`` into keys and indexes."""
    text = path.strip()
    if not text.startswith("$"):
        raise EvaluationError(f"The JSON path '{path}' must start with '$'.")
    steps: list[str | int] = []
    pos = 1
    while pos < len(text):
        m = _PATH_TOKEN.match(text, pos)
        if m is None:
            raise EvaluationError(
                f"The JSON path '{path}' is not valid at position {pos}; expected '.name', "
                "'[index]' or \"['name']\"."
            )
        if m.group("name") is not None:
            steps.append(m.group("name"))
        elif m.group("index") is not None:
            steps.append(int(m.group("index")))
        else:
            quoted = m.group("sq") if m.group("sq") is not None else m.group("dq")
            steps.append(re.sub(r"\\(.)", r"\1", quoted))
        pos = m.end()
    return steps


@_versions("EXTRACTJSONFIELD", params=[STRING, STRING], returns=STRING)
def extract_json_field(read: Reader, text: str, path: str) -> str | None:
    """The value at the JsonPath: strings as text, other values as JSON text, NULL if absent."""
    steps = parse_json_path(path)
    node = read(text)
    if node is _MISSING:
        return None
    for step in steps:
        if isinstance(step, int) and isinstance(node, list):
            if not 0 <= step < len(node):
                return None
            node = node[step]
        elif isinstance(step, str) and isinstance(node, dict):
            if step not in node:
                return None
            node = node[step]
        else:
            return None
    if node is None:
        return None
    return node if isinstance(node, str) else dump_json(node)
