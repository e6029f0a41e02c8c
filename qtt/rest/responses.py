"""Judge a server's answers against a REST QTT case's expected responses and error.

Every function returns None when the actual answer matches, else a one-line reason.

- **Admin responses** (``/ksql``): the expected entity is a *subset* of the one the server
  sent for the statement: each expected field must be there with an equal value (objects
  recursively, lists element by element), and fields the case does not name (commandId,
  commandStatus...) are free.
- **Query responses** (``/query``, ksqlDB's streamed form): the header's ``schema`` exactly
  (other header fields as a subset), then the rows: in order for push queries, in key order
  for pull queries (both sides sorted, since a pull query's order follows partitions), a
  row's ``tombstone`` flag included (a row in ksqlDB's protobuf form: its ``protobufBytes``
  exactly); then the ``finalMessage`` when the case gives one.
  Values compare as the QTT harness compares records (``qtt.verify``): numbers by value,
  booleans never numbers.
- **Errors**: the error body's ``@type`` must be the expected entity class's (or a
  subclass's), its ``message`` must contain the expected message and the HTTP status must
  be the expected status.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from qtt.rest.model import ERROR_TYPES, ExpectedError
from qtt.verify import find_difference, show

_UNSUPPORTED = (
    re.compile(r"Unsupported feature: (?P<feature>.+?)\.?$", re.DOTALL),
    re.compile(r"kspark does not support (?P<feature>.+?) yet", re.DOTALL),
    re.compile(r"kspark cannot (?P<feature>[^:;]+?) yet", re.DOTALL),
    # "...; pull queries are not supported yet." (the clause before it names the feature)
    re.compile(r"(?P<feature>[^.;:]+?) (?:is|are) not (?:supported yet|yet supported)"),
)


def short(value: Any, limit: int = 80) -> str:
    """Compact one-line text of a JSON value, cut at ``limit`` characters."""
    text = " ".join(show(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def clip(text: str, limit: int = 200) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# ---------------------------------------------------------------------------- values


def subset_difference(expected: Any, actual: Any, path: str = "") -> str | None:
    """Where ``actual`` fails to hold ``expected`` (objects as subsets), or None."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return path or "<root>"
        for key, value in expected.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                return where
            sub = subset_difference(value, actual[key], where)
            if sub is not None:
                return sub
        return None
    if isinstance(expected, list | tuple):
        if not isinstance(actual, list | tuple) or len(actual) != len(expected):
            return path or "<root>"
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            sub = subset_difference(e, a, f"{path}[{i}]")
            if sub is not None:
                return sub
        return None
    return find_difference(expected, actual, path or "<root>")


def _at(value: Any, path: str) -> Any:
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        try:
            value = value[int(part[1:-1])] if part.startswith("[") else value[part]
        except (KeyError, IndexError, TypeError, ValueError):
            return "<absent>"
    return value


def _mismatch(label: str, expected: Any, actual: Any, path: str) -> str:
    where = "" if path == "<root>" else f" {path}"
    return (
        f"{label}{where} expected {short(_at(expected, path))} "
        f"but was {short(_at(actual, path))}"
    )


# ---------------------------------------------------------------------------- admin


def admin_difference(expected: Mapping[str, Any], entities: Any) -> str | None:
    """The /ksql answer to one statement (a list of entities) against the expected entity."""
    if not isinstance(entities, list) or not entities:
        return f"expected a {expected.get('@type', 'KSQL')} entity but the answer was {short(entities)}"
    entity = entities[0]
    path = subset_difference(expected, entity)
    if path is None:
        return None
    if path == "@type":
        return f"expected a {expected['@type']} entity but got {short(entity.get('@type'))}"
    return _mismatch("entity", expected, entity, path)


# ---------------------------------------------------------------------------- queries


def split_messages(messages: Sequence[Any]) -> dict[str, Any]:
    """A streamed query answer's parts: ``header``, ``rows``, ``final``, ``errors``, ``other``."""
    parts: dict[str, Any] = {"header": None, "rows": [], "final": None, "errors": [], "other": []}
    for message in messages:
        if not isinstance(message, Mapping):
            parts["other"].append(message)
        elif "header" in message:
            parts["header"] = message["header"]
        elif "row" in message:
            parts["rows"].append(message["row"])
        elif "finalMessage" in message:
            parts["final"] = message["finalMessage"]
        elif "errorMessage" in message:
            parts["errors"].append(message["errorMessage"])
        else:
            parts["other"].append(message)
    return parts


def _row_key(row: Any) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def query_difference(
    expected: Sequence[Mapping[str, Any]], actual: Sequence[Any], *, pull: bool
) -> str | None:
    """A streamed query answer against the expected messages."""
    exp, act = split_messages(expected), split_messages(actual)
    if act["errors"] and not exp["errors"]:
        error = act["errors"][0]
        return f"the query failed: {clip(error_message(error))}"
    if exp["header"] is not None:
        if act["header"] is None:
            return "expected a header but the answer had none"
        schema_e, schema_a = exp["header"].get("schema"), act["header"].get("schema")
        if schema_e is not None and schema_e != schema_a:
            return f"header schema expected {schema_e!r} but was {schema_a!r}"
        rest = {k: v for k, v in exp["header"].items() if k != "schema"}
        path = subset_difference(rest, act["header"])
        if path is not None:
            return _mismatch("header", rest, act["header"], path)
    rows_e, rows_a = list(exp["rows"]), list(act["rows"])
    if pull:
        rows_e.sort(key=_row_key)
        rows_a.sort(key=_row_key)
    for i, (e, a) in enumerate(zip(rows_e, rows_a, strict=False)):
        reason = _row_difference(e, a)
        if reason is not None:
            count = "" if len(rows_e) == len(rows_a) else f" ({len(rows_a)} rows instead of {len(rows_e)})"
            order = " in key order" if pull else ""
            return f"row {i + 1} of {len(rows_e)}{order}: {reason}{count}"
    if len(rows_e) != len(rows_a):
        extra = rows_a[len(rows_e)] if len(rows_a) > len(rows_e) else None
        more = f"; the first extra row is {short(extra)}" if extra is not None else ""
        return f"expected {len(rows_e)} rows but got {len(rows_a)}{more}"
    if exp["errors"]:
        path = subset_difference(exp["errors"], act["errors"])
        if path is not None:
            return _mismatch("errorMessage", exp["errors"], act["errors"], path)
    if exp["final"] is not None and exp["final"] != act["final"]:
        return f"finalMessage expected {exp['final']!r} but was {short(act['final'])}"
    return None


def _row_difference(expected: Mapping[str, Any], actual: Any) -> str | None:
    if not isinstance(actual, Mapping):
        return f"expected a row object but got {short(actual)}"
    if "protobufBytes" in expected:  # ksqlDB's protobuf form: the message's bytes exactly
        if expected["protobufBytes"] != actual.get("protobufBytes"):
            return (
                f"protobufBytes expected {expected['protobufBytes']!r} "
                f"but were {short(actual.get('protobufBytes', actual))}"
            )
        return None
    columns_e, columns_a = expected.get("columns"), actual.get("columns")
    path = find_difference(columns_e, columns_a, "columns")
    if path is not None:
        if path == "columns" or not isinstance(columns_a, list) or len(columns_a) != len(columns_e or []):
            return f"columns expected {short(columns_e)} but were {short(columns_a)}"
        return _mismatch("", {"columns": columns_e}, {"columns": columns_a}, path).strip()
    if bool(expected.get("tombstone", False)) != bool(actual.get("tombstone", False)):
        return (
            f"tombstone expected {bool(expected.get('tombstone', False))} "
            f"but was {bool(actual.get('tombstone', False))} for {short(columns_a)}"
        )
    return None


# ---------------------------------------------------------------------------- errors


def error_message(body: Any) -> str:
    """The message of an error body (or the body itself as text)."""
    if isinstance(body, Mapping) and isinstance(body.get("message"), str):
        return str(body["message"])
    return short(body, 300)


def error_difference(expected: ExpectedError, status: int, body: Any) -> str | None:
    """An error answer (``status``, parsed ``body``) against the expected error."""
    problems = []
    kinds = ERROR_TYPES[expected.type] if expected.type is not None else None
    actual_type = body.get("@type") if isinstance(body, Mapping) else None
    if expected.type is not None and kinds is not None and actual_type not in kinds:
        problems.append(
            f"error type expected {expected.type.rsplit('.', 1)[-1]} "
            f"(@type {' or '.join(sorted(kinds))}) but was {short(actual_type)}"
        )
    message = error_message(body)
    if expected.message is not None and expected.message not in message:
        problems.append(
            f"error message expected to contain {clip(expected.message, 160)!r} "
            f"but was {clip(message)!r}"
        )
    if expected.status is not None and expected.status != status:
        problems.append(f"HTTP status expected {expected.status} but was {status}")
    return "; ".join(problems) or None


def unsupported_feature(message: str) -> str | None:
    """The feature an error message says kspark does not support, or None."""
    for pattern in _UNSUPPORTED:
        match = pattern.search(message)
        if match is not None:
            return " ".join(match.group("feature").split())
    return None
