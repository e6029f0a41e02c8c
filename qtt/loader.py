"""Read QTT files: JSON with comments, exact decimals, and format x config expansion.

A malformed file or case never stops the others from loading: it becomes a
``LoadProblem`` naming the file, the case and what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import decimal
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.data.records import Header, TopicRecord, Window
from qtt.model import (
    EMULATED_KSQL_VERSION,
    ExpectedException,
    FormatSpec,
    PostConditions,
    PostSource,
    PostTopic,
    QttCase,
    QttFormatError,
    TopicSpec,
    VersionBounds,
    parse_ksql_version,
)
from qtt.schemas import inputs_through_declared_schemas

WINDOW_TYPES = ("SESSION", "HOPPING", "TUMBLING")  # ksqlDB's WindowType
CONFIG_PLACEHOLDER = "{CONFIG}"
FORMAT_PLACEHOLDER = "{FORMAT}"
# What ksqlDB's runner puts for {FORMAT} in a case without a 'format' list: the statement then
# fails to parse, naming what is missing.
FORMAT_REPLACE_ERROR = "To use {FORMAT} in your statements please set the 'format' test case element"


@dataclass(frozen=True, slots=True)
class LoadProblem:
    """A file or case that could not be read; ``id`` is what reports list it under."""

    file: Path
    case_name: str | None
    index: int | None
    message: str

    @property
    def id(self) -> str:
        if self.case_name is not None:
            return f"{self.file.stem} - {self.case_name}"
        if self.index is not None:
            return f"{self.file.stem} - case #{self.index + 1}"
        return self.file.stem

    def __str__(self) -> str:
        where = str(self.file)
        if self.case_name is not None:
            where += f", case '{self.case_name}'"
        elif self.index is not None:
            where += f", case #{self.index + 1}"
        return f"{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class QttFile:
    """One loaded file: its runnable cases, its problems and the cases left out."""

    path: Path
    display_name: str
    cases: tuple[QttCase, ...]
    problems: tuple[LoadProblem, ...] = ()
    not_applicable: tuple[str, ...] = ()
    disabled: tuple[str, ...] = ()


# ---------------------------------------------------------------------------- JSON text


# A string, a line comment, a closed block comment, or a block comment never closed: the
# first that matches where the scan is, so comment marks inside strings stay text.
_STRING_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/|/\*', re.DOTALL)


def strip_json_comments(text: str) -> str:
    """Blank out ``//`` and ``/* */`` comments outside strings, keeping line and column."""
    if "/" not in text:
        return text
    return _STRING_OR_COMMENT.sub(lambda m: _blank(m, text), text)


def _blank(match: re.Match[str], text: str) -> str:
    found = match.group()
    if found.startswith('"'):
        return found
    if found == "/*":
        line = text.count("\n", 0, match.start()) + 1
        raise QttFormatError(f"Comment opened at line {line} is never closed with '*/'.")
    return "".join(c if c == "\n" else " " for c in found)


def parse_qtt_json(text: str) -> Any:
    """Parse QTT JSON text: comments allowed, numbers with a fraction read as Decimal."""
    stripped = strip_json_comments(text)
    try:
        return json.loads(stripped, parse_float=decimal.Decimal)
    except json.JSONDecodeError as exc:
        raise QttFormatError(
            f"Invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}."
        ) from None


# ---------------------------------------------------------------------------- discovery


def discover(paths: Iterable[str | Path]) -> list[tuple[Path, str]]:
    """QTT files under ``paths`` (files or folders) with their display names, sorted.

    Raises FileNotFoundError naming a path that does not exist.
    """
    found: list[tuple[Path, str]] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for file in sorted(path.rglob("*.json")):
                found.append((file, file.relative_to(path).as_posix()))
        elif path.is_file():
            found.append((path, path.name))
        else:
            raise FileNotFoundError(f"QTT path '{raw}' is neither a file nor a folder.")
    return found


def load_paths(paths: Iterable[str | Path], *, filter: str | None = None) -> list[QttFile]:
    """Load every QTT file under ``paths``; keep cases whose id contains ``filter``."""
    files = [load_file(path, display_name=name) for path, name in discover(paths)]
    if filter is None:
        return files
    return [_filtered(f, filter) for f in files]


def _filtered(file: QttFile, text: str) -> QttFile:
    return QttFile(
        path=file.path,
        display_name=file.display_name,
        cases=tuple(c for c in file.cases if text in c.id),
        problems=tuple(p for p in file.problems if text in p.id),
        not_applicable=tuple(n for n in file.not_applicable if text in n),
        disabled=tuple(n for n in file.disabled if text in n),
    )


def load_file(
    path: str | Path,
    *,
    display_name: str | None = None,
    version: str = EMULATED_KSQL_VERSION,
) -> QttFile:
    """Load one QTT file; problems are collected, never raised."""
    path = Path(path)
    name = display_name or path.name
    try:
        document = parse_qtt_json(path.read_text(encoding="utf-8"))
        raw_cases = _test_list(document)
    except (OSError, UnicodeDecodeError, QttFormatError) as exc:
        return QttFile(path, name, (), (LoadProblem(path, None, None, _reason(exc)),))

    cases: list[QttCase] = []
    problems: list[LoadProblem] = []
    not_applicable: list[str] = []
    disabled: list[str] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_cases):
        case_name = raw.get("name") if isinstance(raw, dict) else None
        case_name = case_name if isinstance(case_name, str) else None
        try:
            expanded = expand_case(raw, path, index)
            _check_has_records(raw)
        except QttFormatError as exc:
            problems.append(LoadProblem(path, case_name, index, str(exc)))
            continue
        duplicates = [c.id for c in expanded if c.id in seen]
        if duplicates:
            first = seen[duplicates[0]]
            problems.append(
                LoadProblem(
                    path,
                    case_name,
                    index,
                    f"Expanded case name '{duplicates[0]}' is already used by case "
                    f"#{first + 1}; expanded names must be unique.",
                )
            )
            continue
        for case in expanded:
            seen[case.id] = index
            if not case.enabled:
                disabled.append(case.id)
            elif not case.is_applicable(version):
                not_applicable.append(case.id)
            else:
                cases.append(case)
    return QttFile(
        path, name, tuple(cases), tuple(problems), tuple(not_applicable), tuple(disabled)
    )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, QttFormatError):
        return str(exc)
    if isinstance(exc, UnicodeDecodeError):
        return f"File is not UTF-8 text: {exc}."
    return f"File cannot be read: {exc}."


def _test_list(document: Any) -> list[Any]:
    if not isinstance(document, dict):
        raise QttFormatError(
            f"Expected a JSON object with a 'tests' list at the top, found {_kind(document)}."
        )
    tests = document.get("tests")
    if not isinstance(tests, list):
        raise QttFormatError(
            f"Expected the top-level key 'tests' to be a list of cases, found {_kind(tests)}."
        )
    if not tests:  # as ksqlDB's QttTestFile
        raise QttFormatError("The test file did not contain any tests: its 'tests' list is empty.")
    return tests


# ---------------------------------------------------------------------------- cases


def _check_has_records(raw: Any) -> None:
    """A case of a file needs records or an expected exception, as ksqlDB's TestCaseNode
    checks it: empty record lists count as none. (Cases kspark saves itself may have none.)"""
    if not isinstance(raw, dict) or raw.get("expectedException") is not None:
        return
    if not raw.get("inputs") and not raw.get("outputs"):
        raise QttFormatError(
            "Case has no 'inputs', 'outputs' or 'expectedException': "
            "outputs: no inputs, outputs or expectedException provided."
        )


def expand_case(raw: Any, file: Path, index: int) -> list[QttCase]:
    """Expand one raw case over its ``format`` x ``config`` lists."""
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected a case to be a JSON object, found {_kind(raw)}.")
    name = _required(raw, "name", str, "case")
    statements = _string_list(raw, "statements", required=True)
    if not statements:
        raise QttFormatError("Key 'statements' is empty; expected at least one statement.")
    formats: list[str | None] = [*_string_list(raw, "format")] or [None]
    configs: list[str | None] = [*_string_list(raw, "config")] or [None]
    properties = _optional(raw, "properties", dict, "case") or {}
    config_key: str | None = None
    if configs != [None]:
        # ksqlDB's runner takes the one property whose value is {CONFIG} in any letter case.
        placeholders = [
            k for k, v in properties.items() if isinstance(v, str) and v.upper() == CONFIG_PLACEHOLDER
        ]
        if len(placeholders) != 1:
            raise QttFormatError(
                f"Case has a 'config' list, so exactly one property must have the value "
                f"'{CONFIG_PLACEHOLDER}'; found {len(placeholders)}."
            )
        config_key = placeholders[0]
    inputs = _records(raw, "inputs")
    outputs_raw = _list(raw, "outputs")
    outputs = _records(raw, "outputs")
    if not any(k in raw for k in ("inputs", "outputs", "expectedException")):
        raise QttFormatError(
            "Case has neither 'inputs', 'outputs' nor 'expectedException'; "
            "expected at least one of them."
        )
    with_headers = frozenset(i for i, r in enumerate(outputs_raw) if "headers" in r)
    topics = tuple(_topic(t, i) for i, t in enumerate(_list(raw, "topics")))
    # ksqlDB's runner writes the inputs with their topic's declared schema (32-bit floats).
    inputs = tuple(inputs_through_declared_schemas(inputs, topics))
    expected = _expected_exception(raw.get("expectedException"))
    post = _post(raw.get("post"))
    versions = _versions(raw.get("versions"))
    enabled = _optional(raw, "enabled", bool, "case")

    cases: list[QttCase] = []
    stem = file.stem
    for fmt in formats:
        for config in configs:
            case_id = f"{stem} - {name}"
            if fmt is not None:
                case_id += f" - {fmt}"
            stmts = tuple(s.replace(FORMAT_PLACEHOLDER, fmt or FORMAT_REPLACE_ERROR) for s in statements)
            props = dict(properties)
            if config is not None and config_key is not None:
                case_id += f" - {config_key}={config}"
                props[config_key] = config
            cases.append(
                QttCase(
                    id=case_id,
                    name=name,
                    file=file,
                    index=index,
                    statements=stmts,
                    properties=props,
                    topics=topics,
                    inputs=inputs,
                    outputs=outputs,
                    expected_exception=expected,
                    post=post,
                    versions=versions,
                    enabled=enabled is not False,
                    format=fmt,
                    config=config,
                    outputs_with_headers=with_headers,
                )
            )
    ids = [c.id for c in cases]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise QttFormatError(
            f"Expansion gives the case name '{repeated[0]}' more than once; "
            f"'format' and 'config' entries must be unique."
        )
    return cases


def _records(raw: Mapping[str, Any], key: str) -> tuple[TopicRecord, ...]:
    return tuple(_record(r, key, i) for i, r in enumerate(_list(raw, key)))


def _record(raw: Any, list_name: str, index: int) -> TopicRecord:
    where = f"{list_name}[{index}]"
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected {where} to be a JSON object, found {_kind(raw)}.")
    topic = _required(raw, "topic", str, where)
    if "value" not in raw:
        raise QttFormatError(f"Record {where} has no 'value'; use null for a tombstone.")
    timestamp = _optional(raw, "timestamp", int, where)
    window = _window(raw.get("window"), where)
    headers = _headers(raw.get("headers"), where)
    return TopicRecord(
        topic=topic,
        key=raw.get("key"),
        value=raw["value"],
        timestamp=timestamp,
        window=window,
        headers=headers,
    )


def _window(raw: Any, where: str) -> Window | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected {where}.window to be an object, found {_kind(raw)}.")
    # As ksqlDB's WindowData: start and end are Java longs (0 when absent), the type is required.
    start = _optional(raw, "start", int, f"{where}.window") or 0
    end = _optional(raw, "end", int, f"{where}.window") or 0
    kind = _required(raw, "type", str, f"{where}.window")
    if kind.upper() not in ("TIME", "SESSION"):
        raise QttFormatError(
            f"Window type '{kind}' in {where} is not known; expected TIME or SESSION."
        )
    return Window(start=start, end=end, type=kind.upper())


def _headers(raw: Any, where: str) -> tuple[Header, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise QttFormatError(f"Expected {where}.headers to be a list, found {_kind(raw)}.")
    headers: list[Header] = []
    for i, h in enumerate(raw):
        hw = f"{where}.headers[{i}]"
        if not isinstance(h, dict):
            raise QttFormatError(f"Expected {hw} to be an object, found {_kind(h)}.")
        key = _required(h, "KEY", str, hw)
        value = h.get("VALUE")
        if value is None:
            headers.append(Header(key, None))
            continue
        if not isinstance(value, str):
            raise QttFormatError(
                f"Expected {hw}.VALUE to be a base64 string, found {_kind(value)}."
            )
        try:
            headers.append(Header(key, base64.b64decode(value, validate=True)))
        except (binascii.Error, ValueError):
            raise QttFormatError(f"Header value '{value}' in {hw} is not valid base64.") from None
    return tuple(headers)


def _topic(raw: Any, index: int) -> TopicSpec:
    where = f"topics[{index}]"
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected {where} to be a JSON object, found {_kind(raw)}.")
    name = _required(raw, "name", str, where)
    # ksqlDB's TopicNode reads no "format" or "schema" key (older files' spellings): they are
    # ignored, as every key its model does not read.
    return TopicSpec(
        name=name,
        key_format=_format_name(raw.get("keyFormat"), f"{where}.keyFormat"),
        value_format=_format_name(raw.get("valueFormat"), f"{where}.valueFormat"),
        key_schema=raw.get("keySchema"),
        value_schema=raw.get("valueSchema"),
        key_schema_id=_optional(raw, "keySchemaId", int, where),
        value_schema_id=_optional(raw, "valueSchemaId", int, where),
        partitions=_optional(raw, "partitions", int, where) or 1,
        replicas=_optional(raw, "replicas", int, where),
        key_serde_features=tuple(_string_list(raw, "keySerdeFeatures", where=where)),
        value_serde_features=tuple(_string_list(raw, "valueSerdeFeatures", where=where)),
        key_schema_references=_schema_references(raw.get("keySchemaReferences"), f"{where}.keySchemaReferences"),
        value_schema_references=_schema_references(
            raw.get("valueSchemaReferences"), f"{where}.valueSchemaReferences"
        ),
    )


def _schema_references(raw: Any, where: str) -> tuple[dict[str, Any], ...] | None:
    """A topic's schema references as ksqlDB's SchemaReferencesNode reads them: each an object
    with ``name``, a required ``format`` and a required ``schema``."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise QttFormatError(f"Expected {where} to be a list, found {_kind(raw)}.")
    references = []
    for i, ref in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(ref, dict):
            raise QttFormatError(f"Expected {at} to be an object, found {_kind(ref)}.")
        for key in ("format", "schema"):
            if ref.get(key) is None:
                raise QttFormatError(f"Required key '{key}' is missing from {at}.")
        _optional(ref, "name", str, at)
        _required(ref, "format", str, at)
        references.append(dict(ref))
    return tuple(references)


def _format_name(raw: Any, where: str) -> str | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict) and isinstance(raw.get("format"), str):
        return str(raw["format"])
    raise QttFormatError(f"Expected {where} to be a format name, found {_kind(raw)}.")


def read_format_node(raw: Any, where: str, *, key: bool) -> FormatSpec:
    """A post topic's expected key or value format, as ksqlDB reads its KeyFormat or
    ValueFormat: ``format``, ``properties``, ``features`` and, for a key, ``windowInfo``
    (``type`` and ``size`` in seconds); other keys are ignored. The whole format is compared:
    what is absent is none. (A bare format name stands for the format without anything else.)"""
    if isinstance(raw, str):
        return FormatSpec(format=raw, properties={}, features=(), exact_window=key, whole=True)
    if not isinstance(raw, dict):
        raise QttFormatError(
            f"Expected {where} to be a format name or an object with 'format', found {_kind(raw)}."
        )
    fmt = _required(raw, "format", str, where)
    props = _optional(raw, "properties", dict, where) or {}
    features = _string_list(raw, "features", where=where) if "features" in raw else []
    window_type: str | None = None
    window_size: int | None = None
    window = raw.get("windowInfo") if key else None
    if window is not None:
        at = f"{where}.windowInfo"
        if not isinstance(window, dict):
            raise QttFormatError(f"Expected {at} to be an object with 'type', found {_kind(window)}.")
        window_type = _required(window, "type", str, at).upper()
        if window_type not in ("TUMBLING", "HOPPING", "SESSION"):
            raise QttFormatError(
                f"Window type '{window_type}' in {at} is not known; expected TUMBLING, HOPPING or SESSION."
            )
        size = window.get("size")
        if size is not None:
            if isinstance(size, bool) or not isinstance(size, int | float | decimal.Decimal):
                raise QttFormatError(f"Expected {at}.size to be a duration in seconds, found {_kind(size)}.")
            window_size = int(decimal.Decimal(str(size)) * 1000)  # a Java Duration read from seconds
    return FormatSpec(
        format=fmt,
        properties={str(k): v for k, v in props.items()},
        features=tuple(features),
        window_type=window_type,
        window_size=window_size,
        exact_window=key,
        whole=True,
    )


def _expected_exception(raw: Any) -> ExpectedException | None:
    if raw is None:
        return None
    where = "expectedException"
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected {where} to be an object, found {_kind(raw)}.")
    expected = ExpectedException(
        type=_optional(raw, "type", str, where),
        message=_optional(raw, "message", str, where),
        cause=_optional(raw, "cause", str, where),
        cause_message=_optional(raw, "causeMessage", str, where),
    )
    # ksqlDB's ExpectedExceptionNode, with its MissingFieldException's words.
    if expected.type is None and expected.message is None:
        raise QttFormatError("test must define 'expectedException.type or expectedException.message' field")
    if expected.cause_message is not None and expected.cause is None:
        raise QttFormatError("test must define 'expectedException.cause' field")
    return expected


def _post(raw: Any) -> PostConditions:
    if raw is None:
        return PostConditions()
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected 'post' to be an object, found {_kind(raw)}.")
    sources = tuple(_post_source(s, i) for i, s in enumerate(_list(raw, "sources", "post")))
    topics_raw = raw.get("topics")
    blacklist: str | None = None
    topics: tuple[PostTopic, ...] = ()
    if topics_raw is not None:
        if not isinstance(topics_raw, dict):
            raise QttFormatError(
                f"Expected post.topics to be an object, found {_kind(topics_raw)}."
            )
        blacklist = _optional(topics_raw, "blacklist", str, "post.topics")
        if blacklist is not None:  # ksqlDB compiles it when it reads the case
            try:
                re.compile(blacklist)
            except re.error as exc:
                raise QttFormatError(f"blacklist: not valid regex: '{blacklist}' ({exc}).") from None
        topics = tuple(
            _post_topic(t, i) for i, t in enumerate(_list(topics_raw, "topics", "post.topics"))
        )
    return PostConditions(sources=sources, topics=topics, blacklist=blacklist)


def _post_source(raw: Any, index: int) -> PostSource:
    where = f"post.sources[{index}]"
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected {where} to be an object, found {_kind(raw)}.")
    kind = _required(raw, "type", str, where)  # required, as ksqlDB's SourceNode
    if kind.upper() not in ("STREAM", "TABLE"):
        raise QttFormatError(
            f"Source type '{kind}' in {where} is not known; expected STREAM or TABLE."
        )

    def features(key: str) -> tuple[str, ...] | None:
        return tuple(_string_list(raw, key, where=where)) if key in raw else None

    value_format = _optional(raw, "valueFormat", str, where)  # a format name, as ksqlDB reads it
    return PostSource(
        name=_required(raw, "name", str, where),
        type=kind.upper(),
        schema=_optional(raw, "schema", str, where),
        key_format=_source_key_format(raw.get("keyFormat"), f"{where}.keyFormat"),
        value_format=FormatSpec(format=value_format) if value_format is not None else None,
        key_features=features("keyFeatures"),
        value_features=features("valueFeatures"),
        is_source=_optional(raw, "isSource", bool, where),
    )


def _source_key_format(raw: Any, where: str) -> FormatSpec | None:
    """A source's expected key format as ksqlDB's KeyFormatNode reads it: ``format``,
    ``windowType`` and ``windowSize``, all optional; the window is always compared (absent:
    the key must not be windowed) and other keys are ignored."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected {where} to be an object with 'format', found {_kind(raw)}.")
    window_type = _optional(raw, "windowType", str, where)
    if window_type is not None and window_type.upper() not in WINDOW_TYPES:
        raise QttFormatError(
            f"Window type '{window_type}' in {where} is not known; expected one of {', '.join(WINDOW_TYPES)}."
        )
    return FormatSpec(
        format=_optional(raw, "format", str, where),
        window_type=window_type.upper() if window_type is not None else None,
        window_size=_optional(raw, "windowSize", int, where),
        exact_window=True,
    )


def _post_topic(raw: Any, index: int) -> PostTopic:
    where = f"post.topics.topics[{index}]"
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected {where} to be an object, found {_kind(raw)}.")
    for key in ("keyFormat", "valueFormat"):  # required, as ksqlDB's PostTopicNode
        if raw.get(key) is None:
            raise QttFormatError(f"Required key '{key}' is missing from {where}.")
    partitions = _optional(raw, "partitions", int, where)
    if partitions is not None and partitions < 1:
        raise QttFormatError(f"Partition count must be positive, but was: {partitions} (in {where}).")
    return PostTopic(
        name=_required(raw, "name", str, where),
        key_format=read_format_node(raw["keyFormat"], f"{where}.keyFormat", key=True),
        value_format=read_format_node(raw["valueFormat"], f"{where}.valueFormat", key=False),
        partitions=partitions,
        key_schema=raw.get("keySchema"),
        value_schema=raw.get("valueSchema"),
        key_schema_id=_optional(raw, "keySchemaId", int, where),
        value_schema_id=_optional(raw, "valueSchemaId", int, where),
    )


def _versions(raw: Any) -> VersionBounds:
    if raw is None:
        return VersionBounds()
    if not isinstance(raw, dict):
        raise QttFormatError(f"Expected 'versions' to be an object, found {_kind(raw)}.")
    bounds = VersionBounds(
        min=_optional(raw, "min", str, "versions"), max=_optional(raw, "max", str, "versions")
    )
    for v in (bounds.min, bounds.max):
        if v is not None:
            parse_ksql_version(v)
    return bounds


# ---------------------------------------------------------------------------- helpers

_KINDS: dict[type, str] = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "an integer",
    bool: "a boolean",
    decimal.Decimal: "a decimal number",
    type(None): "null",
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    text = _KINDS.get(type(value), type(value).__name__)
    return f"{text} ({_short(value)})" if isinstance(value, str | int | decimal.Decimal) else text


def _short(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _is(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _required(raw: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in raw:
        raise QttFormatError(f"Required key '{key}' is missing from {where}.")
    value = raw[key]
    if not _is(value, kind):
        raise QttFormatError(
            f"Expected '{key}' in {where} to be {_KINDS.get(kind, kind.__name__)}, "
            f"found {_kind(value)}."
        )
    return value


def _optional(raw: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if raw.get(key) is None:
        return None
    return _required(raw, key, kind, where)


def _list(raw: Mapping[str, Any], key: str, where: str = "case") -> Sequence[Any]:
    value = raw.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise QttFormatError(f"Expected '{key}' in {where} to be a list, found {_kind(value)}.")
    return value


def _string_list(
    raw: Mapping[str, Any], key: str, *, required: bool = False, where: str = "case"
) -> list[str]:
    if required and key not in raw:
        raise QttFormatError(f"Required key '{key}' is missing from {where}.")
    items = _list(raw, key, where)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            raise QttFormatError(
                f"Expected {key}[{i}] in {where} to be a string, found {_kind(item)}."
            )
    return list(items)
