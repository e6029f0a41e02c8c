"""Read REST QTT files: QTT's JSON (comments, exact decimals) with REST case keys.

    files = load_rest_paths(["tests/rest_cases"], filter="push")

The file holds ``{"comments": [...]?, "tests": [case, ...]}``. A case has ``name`` and
``statements`` and may have ``inputs``, ``outputs`` and ``topics`` (in QTT's record and
topic forms), ``format`` (each entry replaces ``{FORMAT}`` in the statements and makes its
own case), ``properties`` (sent with every request), ``responses`` (one per statement, in
order), ``expectedError``, ``inputConditions``, ``testPullWithProtoFormat`` (pull queries
answered in ksqlDB's protobuf form), ``enabled``, ``notes`` and ``comment``. Other keys are
ignored, as ksqlDB's test JSON mapper ignores unknown properties; ``RestCase.ignored_keys``
names them.
A malformed file or case never stops the others from loading: it becomes a ``LoadProblem``
naming the file, the case and what is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from qtt.loader import (
    FORMAT_PLACEHOLDER,
    LoadProblem,
    _kind,
    _list,
    _optional,
    _records,
    _required,
    _string_list,
    _test_list,
    _topic,
    discover,
    parse_qtt_json,
)
from qtt.model import QttFormatError
from qtt.rest.model import ERROR_TYPES, ExpectedError, ExpectedResponse, RestCase, RestFile

CASE_KEYS = frozenset(
    {
        "name",
        "statements",
        "inputs",
        "outputs",
        "topics",
        "format",
        "properties",
        "responses",
        "expectedError",
        "inputConditions",
        "testPullWithProtoFormat",
        "enabled",
        "notes",
        "comment",
    }
)
QUERY_MESSAGE_KEYS = frozenset({"header", "row", "finalMessage", "errorMessage"})


def load_rest_paths(paths: Iterable[str | Path], *, filter: str | None = None) -> list[RestFile]:
    """Load every REST QTT file under ``paths``; keep cases whose id contains ``filter``.

    Raises FileNotFoundError naming a path that does not exist.
    """
    files = [load_rest_file(path, display_name=name) for path, name in discover(paths)]
    if filter is None:
        return files
    return [
        RestFile(
            f.path,
            f.display_name,
            tuple(c for c in f.cases if filter in c.id),
            tuple(p for p in f.problems if filter in p.id),
            tuple(d for d in f.disabled if filter in d),
        )
        for f in files
    ]


def load_rest_file(path: str | Path, *, display_name: str | None = None) -> RestFile:
    """Load one REST QTT file; problems are collected, never raised."""
    path = Path(path)
    name = display_name or path.name
    try:
        raw_cases = _test_list(parse_qtt_json(path.read_text(encoding="utf-8")))
    except UnicodeDecodeError as exc:
        return RestFile(path, name, (), (LoadProblem(path, None, None, f"File is not UTF-8 text: {exc}."),))
    except OSError as exc:
        return RestFile(path, name, (), (LoadProblem(path, None, None, f"File cannot be read: {exc}."),))
    except QttFormatError as exc:
        return RestFile(path, name, (), (LoadProblem(path, None, None, str(exc)),))
    cases: list[RestCase] = []
    problems: list[LoadProblem] = []
    disabled: list[str] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_cases):
        case_name = raw.get("name") if isinstance(raw, dict) else None
        case_name = case_name if isinstance(case_name, str) else None
        try:
            expanded = expand_rest_case(raw, path, index)
            repeated = [c.id for c in expanded if c.id in seen]
            if repeated:
                raise QttFormatError(
                    f"Case id '{repeated[0]}' is already used by an earlier case; "
                    "case names must be unique in a file."
                )
        except QttFormatError as exc:
            problems.append(LoadProblem(path, case_name, index, str(exc)))
            continue
        for case in expanded:
            seen.add(case.id)
            if case.enabled:
                cases.append(case)
            else:
                disabled.append(case.id)
    return RestFile(path, name, tuple(cases), tuple(problems), tuple(disabled))


def expand_rest_case(raw: Any, file: Path, index: int) -> list[RestCase]:
    """One raw case, expanded over its ``format`` list (one case without it)."""
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected a case to be a JSON object, found {_kind(raw)}.")
    ignored = tuple(sorted(set(raw) - CASE_KEYS))
    name = _required(raw, "name", str, "case")
    statements = _string_list(raw, "statements", required=True)
    if not statements:
        raise QttFormatError("Key 'statements' is empty; expected at least one statement.")
    formats: list[str | None] = [*_string_list(raw, "format")] or [None]
    properties = _optional(raw, "properties", dict, "case") or {}
    responses = tuple(_response(r, i) for i, r in enumerate(_list(raw, "responses")))
    if len(responses) > len(statements):
        raise QttFormatError(
            f"Case has {len(responses)} responses for {len(statements)} statements; "
            "expected at most one response per statement."
        )
    outputs_raw = _list(raw, "outputs")
    with_headers = frozenset(
        i for i, r in enumerate(outputs_raw) if isinstance(r, dict) and "headers" in r
    )
    conditions = _optional(raw, "inputConditions", dict, "case") or {}
    wait_push = _optional(conditions, "waitForActivePushQuery", bool, "inputConditions")
    common: dict[str, Any] = {
        "name": name,
        "file": file,
        "index": index,
        "topics": tuple(_topic(t, i) for i, t in enumerate(_list(raw, "topics"))),
        "inputs": _records(raw, "inputs"),
        "outputs": _records(raw, "outputs"),
        "outputs_with_headers": with_headers,
        "responses": responses,
        "expected_error": _expected_error(raw.get("expectedError")),
        "wait_for_active_push_query": bool(wait_push),
        "enabled": _optional(raw, "enabled", bool, "case") is not False,
        "pull_protobuf": bool(_optional(raw, "testPullWithProtoFormat", bool, "case")),
        "ignored_keys": ignored,
    }
    cases = []
    for fmt in formats:
        case_id = f"{file.stem} - {name}"
        stmts = tuple(statements)
        props = dict(properties)
        if fmt is not None:
            case_id += f" - {fmt}"
            stmts = tuple(s.replace(FORMAT_PLACEHOLDER, fmt) for s in stmts)
        cases.append(RestCase(id=case_id, statements=stmts, properties=props, format=fmt, **common))
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise QttFormatError("Key 'format' lists a format more than once; entries must be unique.")
    return cases


def _response(raw: Any, index: int) -> ExpectedResponse:
    where = f"responses[{index}]"
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in ("admin", "query"):
        raise QttFormatError(
            f"Expected {where} to be an object with one key, 'admin' or 'query', found "
            f"{_kind(raw) if not isinstance(raw, dict) else 'keys ' + ', '.join(map(repr, raw))}."
        )
    if "admin" in raw:
        admin = raw["admin"]
        if not isinstance(admin, dict):
            raise QttFormatError(f"Expected {where}.admin to be an object, found {_kind(admin)}.")
        return ExpectedResponse(admin=admin)
    query = raw["query"]
    if not isinstance(query, list):
        raise QttFormatError(f"Expected {where}.query to be a list, found {_kind(query)}.")
    for i, message in enumerate(query):
        _query_message(message, f"{where}.query[{i}]")
    return ExpectedResponse(query=tuple(query))


def _query_message(raw: Any, where: str) -> None:
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in QUERY_MESSAGE_KEYS:
        found = _kind(raw) if not isinstance(raw, dict) else "keys " + ", ".join(map(repr, raw))
        raise QttFormatError(
            f"Expected {where} to be an object with one key of "
            f"{', '.join(sorted(QUERY_MESSAGE_KEYS))}, found {found}."
        )
    key, value = next(iter(raw.items()))
    if key == "header":
        if not isinstance(value, dict):
            raise QttFormatError(f"Expected {where}.header to be an object, found {_kind(value)}.")
        _optional(value, "schema", str, f"{where}.header")
        _optional(value, "protoSchema", str, f"{where}.header")
    elif key == "row":
        if not isinstance(value, dict):
            raise QttFormatError(f"Expected {where}.row to be an object, found {_kind(value)}.")
        if "protobufBytes" in value:  # a row in ksqlDB's protobuf form: the message, base64
            _required(value, "protobufBytes", str, f"{where}.row")
        else:
            _required(value, "columns", list, f"{where}.row")
        _optional(value, "tombstone", bool, f"{where}.row")
    elif key == "finalMessage" and not isinstance(value, str):
        raise QttFormatError(f"Expected {where}.finalMessage to be a string, found {_kind(value)}.")


def _expected_error(raw: Any) -> ExpectedError | None:
    if raw is None:
        return None
    where = "expectedError"
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected {where} to be an object, found {_kind(raw)}.")
    error_type = _optional(raw, "type", str, where)
    if error_type is not None and error_type not in ERROR_TYPES:
        raise QttFormatError(
            f"Error type '{error_type}' in {where} is not known; expected one of "
            f"{', '.join(sorted(ERROR_TYPES))}."
        )
    return ExpectedError(
        type=error_type,
        message=_optional(raw, "message", str, where),
        status=_optional(raw, "status", int, where),
    )

