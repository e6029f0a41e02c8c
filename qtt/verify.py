"""Compare what the engine wrote and built with what a QTT case expects.

Numbers compare by value across int, Decimal and float (a Decimal is converted to float when
the other side is a float, then compared exactly); booleans are never numbers; object keys
compare exactly. A mismatch carries a one-line reason and renders a table of expected vs
actual records with the first difference marked.
"""

from __future__ import annotations

import base64
import dataclasses
import decimal
import io
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine.data.records import TopicInfo, TopicRecord
from engine.errors import KsqlError
from engine.facade.api import FormatDescription, SourceInfo
from engine.plan import types as T
from engine.plan.schema import LogicalSchema, Namespace
from qtt.model import FormatSpec, PostConditions, PostSource, PostTopic, TopicSpec

# ---------------------------------------------------------------------------- values


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | decimal.Decimal) and not isinstance(value, bool)


def numbers_equal(expected: Any, actual: Any) -> bool:
    """Compare two numbers by value: exact for int/Decimal, float-exact when a float is involved."""
    if isinstance(expected, float) or isinstance(actual, float):
        e, a = float(expected), float(actual)
        return e == a or (math.isnan(e) and math.isnan(a))
    return bool(expected == actual)


def _match_fields(expected: dict[Any, Any], actual: dict[Any, Any]) -> dict[Any, Any] | None:
    """Pair each expected field with an actual one: exact name first, else ignoring case.

    ksqlDB's QTT compares field names of JSON objects without regard to case (cases write
    ``{"json_v": ...}`` for a column ``JSON_V``); an exact match is always preferred. Like
    ksqlDB's comparator, which checks the field count and then reads each expected field
    from the actual object, an expected field found under no name reads as absent
    (``ABSENT``), which matches an expected null.
    """
    if set(expected) == set(actual):
        return {k: k for k in expected}
    if len(expected) != len(actual):
        return None
    by_upper: dict[str, Any] = {}
    for k in actual:
        upper = str(k).upper()
        if upper in by_upper:
            return None
        by_upper[upper] = k
    pairs: dict[Any, Any] = {}
    for k in expected:
        target = k if k in actual else by_upper.get(str(k).upper(), ABSENT)
        if target is ABSENT and expected[k] is None:
            pairs[k] = ABSENT
            continue
        if target is ABSENT or target in pairs.values():
            return None
        pairs[k] = target
    return pairs


ABSENT = object()  # an expected field the actual object does not have (reads as null)


def find_difference(expected: Any, actual: Any, path: str = "") -> str | None:
    """The path of the first place where ``actual`` differs from ``expected``, or None."""
    if expected is None or actual is None:
        return None if expected is None and actual is None else path
    if _is_number(expected) and _is_number(actual):
        return None if numbers_equal(expected, actual) else path
    if isinstance(expected, dict) and isinstance(actual, dict):
        matched = _match_fields(expected, actual)
        if matched is None:
            missing = [k for k in expected if k not in actual]
            extra = [k for k in actual if k not in expected]
            return _join(path, str((missing or extra)[0]))
        for k in expected:
            value = None if matched[k] is ABSENT else actual[matched[k]]
            sub = find_difference(expected[k], value, _join(path, str(k)))
            if sub is not None:
                return sub
        return None
    if isinstance(expected, list | tuple) and isinstance(actual, list | tuple):
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            sub = find_difference(e, a, f"{path}[{i}]")
            if sub is not None:
                return sub
        return (
            None if len(expected) == len(actual) else f"{path}[{min(len(expected), len(actual))}]"
        )
    if isinstance(expected, str) and isinstance(actual, decimal.Decimal):
        return None if text_matches_decimal(expected, actual) else path
    if isinstance(expected, str) and isinstance(actual, bytes | bytearray):
        # As ksqlDB's comparator reads a ByteBuffer: its base64 text.
        return None if base64.b64encode(actual).decode("ascii") == expected else path
    if type(expected) is not type(actual) and not (
        isinstance(expected, str) and isinstance(actual, str)
    ):
        return path
    return None if expected == actual else path


_DECIMAL_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def text_matches_decimal(expected: str, actual: decimal.Decimal) -> bool:
    """An expected text against an actual decimal, as ksqlDB's runner compares them
    (``new BigDecimal(text).equals(actual)``): the same value with the same scale, so
    ``"005.4"`` matches 5.4 but ``"5.40"`` does not."""
    if not _DECIMAL_TEXT.fullmatch(expected) or not actual.is_finite():
        return False
    number = decimal.Decimal(expected)
    return number == actual and number.as_tuple().exponent == actual.as_tuple().exponent


def values_equal(expected: Any, actual: Any) -> bool:
    """True when ``actual`` matches ``expected`` under the harness's equality rules."""
    return find_difference(expected, actual) is None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _get(value: Any, path: str) -> Any:
    """The sub-value at ``path`` (as find_difference writes it), or a marker when absent."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        try:
            if part.startswith("["):
                value = value[int(part[1:-1])]
            else:
                value = value[part]
        except (KeyError, IndexError, TypeError):
            return _ABSENT
    return value


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()


def show(value: Any) -> str:
    """Compact JSON-like text for a key, value or header list (Decimals keep their digits)."""
    if value is _ABSENT:
        return "<absent>"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bytes):
        return "b64:" + base64.b64encode(value).decode("ascii")
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{show(str(k))}:{show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(show(v) for v in value) + "]"
    return str(value)


# ---------------------------------------------------------------------------- records


def _headers_view(record: TopicRecord) -> list[dict[str, Any]]:
    return [{"KEY": h.key, "VALUE": h.value} for h in record.headers]


def _window_view(record: TopicRecord) -> dict[str, Any] | None:
    w = record.window
    return None if w is None else {"start": w.start, "end": w.end, "type": w.type.upper()}


def record_difference(
    expected: TopicRecord, actual: TopicRecord, *, compare_headers: bool
) -> str | None:
    """The first differing field of two records (``key``, ``window``, ``value.X``...), or None."""
    checks: list[tuple[str, Any, Any]] = [
        ("key", expected.key, actual.key),
        ("window", _window_view(expected), _window_view(actual)),
        ("value", expected.value, actual.value),
    ]
    if expected.timestamp is not None:
        checks.append(("timestamp", expected.timestamp, actual.timestamp))
    if compare_headers:
        checks.append(("headers", _headers_view(expected), _headers_view(actual)))
    for name, e, a in checks:
        if name == "window" or name == "headers" or name == "timestamp":
            diff = None if e == a else name
        else:
            diff = find_difference(e, a, name)
        if diff is not None:
            return diff
    return None


def _field_value(record: TopicRecord, path: str) -> Any:
    root, _, rest = path.partition(".")
    root, bracket, tail = root.partition("[")
    views = {
        "key": record.key,
        "value": record.value,
        "window": _window_view(record),
        "timestamp": record.timestamp,
        "headers": _headers_view(record),
    }
    value = views.get(root)
    sub = (bracket + tail + ("." + rest if rest else "")) if bracket else rest
    return _get(value, sub) if sub else value


@dataclass(frozen=True, slots=True)
class TopicComparison:
    """Expected vs actual records of one topic, with the first difference if any."""

    topic: str
    expected: tuple[TopicRecord, ...]
    actual: tuple[TopicRecord, ...]
    headers_compared: tuple[bool, ...]
    first_difference: int | None = None
    field: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Verification:
    """The outcome of verifying one case: ``ok`` or a list of reasons with comparisons."""

    reasons: tuple[str, ...] = ()
    comparisons: tuple[TopicComparison, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.reasons

    @property
    def reason(self) -> str:
        """The first reason (one line), with a count of the others."""
        if not self.reasons:
            return ""
        more = len(self.reasons) - 1
        return self.reasons[0] + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")

    def render(self, *, color: bool = False, width: int = 140) -> str:
        """All reasons, then a table of expected vs actual records for each differing topic."""
        return render_verification(self, color=color, width=width)


def verify_outputs(
    expected: Sequence[TopicRecord],
    actual: Mapping[str, Sequence[TopicRecord]],
    *,
    headers_at: frozenset[int] = frozenset(),
    strict: bool = False,
) -> Verification:
    """Compare per topic: same count and matching records in order.

    ``headers_at`` holds the indexes (in ``expected``) of records whose headers are compared.
    In ``strict`` mode a topic that received records the case did not expect fails.
    """
    by_topic: dict[str, list[tuple[int, TopicRecord]]] = {}
    for i, record in enumerate(expected):
        by_topic.setdefault(record.topic, []).append((i, record))
    reasons: list[str] = []
    comparisons: list[TopicComparison] = []
    for topic, items in by_topic.items():
        exp = tuple(r for _, r in items)
        hdr = tuple(i in headers_at for i, _ in items)
        act = tuple(actual.get(topic, ()))
        comparison = _compare_topic(topic, exp, act, hdr)
        comparisons.append(comparison)
        if comparison.reason is not None:
            reasons.append(comparison.reason)
    if strict:
        for topic, records in actual.items():
            if topic not in by_topic and records:
                reason = (
                    f"Topic '{topic}' received {len(records)} record"
                    f"{'s' * (len(records) != 1)} but the case expects none on it."
                )
                reasons.append(reason)
                comparisons.append(
                    TopicComparison(topic, (), tuple(records), (), 0, "unexpected", reason)
                )
    return Verification(tuple(reasons), tuple(comparisons))


def _compare_topic(
    topic: str,
    expected: tuple[TopicRecord, ...],
    actual: tuple[TopicRecord, ...],
    headers: tuple[bool, ...],
) -> TopicComparison:
    for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
        diff = record_difference(e, a, compare_headers=headers[i])
        if diff is not None:
            reason = (
                f"Topic '{topic}' record {i + 1} of {len(expected)}: {diff} expected "
                f"{_short(show(_field_value(e, diff)))} but was {_short(show(_field_value(a, diff)))}."
            )
            if len(expected) != len(actual):
                reason += f" (Also {len(actual)} records instead of {len(expected)}.)"
            return TopicComparison(topic, expected, actual, headers, i, diff, reason)
    if len(expected) != len(actual):
        reason = (
            f"Topic '{topic}' expected {len(expected)} record{'s' * (len(expected) != 1)} "
            f"but got {len(actual)}."
        )
        return TopicComparison(
            topic, expected, actual, headers, min(len(expected), len(actual)), "count", reason
        )
    return TopicComparison(topic, expected, actual, headers)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---------------------------------------------------------------------------- reading outputs

_Convert = Callable[[Any], Any]


def avro_decimals_as_numbers(
    produced: Mapping[str, Sequence[TopicRecord]], sources: Sequence[SourceInfo]
) -> dict[str, Sequence[TopicRecord]]:
    """The produced records with the DECIMALs of AVRO keys and values as numbers.

    ksqlDB's runner reads an AVRO output with the Avro deserializer, whose decimals are
    BigDecimals. kspark's bounded runtime keeps an AVRO decimal in its topic as the text of
    its digits (what the existing sink steps write, and saved plans replay), so the harness
    reads that text back as the decimal it denotes, as the Kafka runtime's AVRO reader does.
    The topic's schema is the one of the first AVRO source on it with a DECIMAL anywhere.
    """
    result: dict[str, Sequence[TopicRecord]] = dict(produced)
    done: set[str] = set()
    for source in sources:
        if source.topic in done or source.topic not in produced:
            continue
        key = _avro_columns_reader(source, key=True)
        value = _avro_columns_reader(source, key=False)
        if key is None and value is None:
            continue
        done.add(source.topic)
        result[source.topic] = [
            dataclasses.replace(
                r,
                key=r.key if key is None else key(r.key),
                value=r.value if value is None else value(r.value),
            )
            for r in produced[source.topic]
        ]
    return result


def _avro_columns_reader(source: SourceInfo, *, key: bool) -> _Convert | None:
    fmt = source.key_format if key else source.value_format
    if fmt.format.upper() != "AVRO":
        return None
    columns = (
        source.schema.key
        if key
        else tuple(c for c in source.schema.columns if c.namespace is Namespace.VALUE)
    )
    readers = {c.name: r for c in columns if (r := _decimal_text_reader(c.type)) is not None}
    if not readers:
        return None
    if len(columns) == 1 and (key or "UNWRAP_SINGLES" in fmt.features):
        return readers[columns[0].name]

    def read_record(v: Any) -> Any:
        if not isinstance(v, dict):
            return v
        return {k: readers[k](x) if k in readers else x for k, x in v.items()}

    return read_record


def _decimal_text_reader(t: T.SqlType) -> _Convert | None:
    """A converter of a QTT-form value of type ``t`` whose decimal texts become decimals
    (None when ``t`` holds no DECIMAL)."""
    if isinstance(t, T.Decimal):
        return lambda v: decimal.Decimal(v) if isinstance(v, str) and _DECIMAL_TEXT.fullmatch(v) else v
    if isinstance(t, T.Array):
        item = _decimal_text_reader(t.item)
        if item is None:
            return None
        return lambda v: [item(x) for x in v] if isinstance(v, list) else v
    if isinstance(t, T.Map):
        value = _decimal_text_reader(t.value)
        if value is None:
            return None
        return lambda v: {k: value(x) for k, x in v.items()} if isinstance(v, dict) else v
    if isinstance(t, T.Struct):
        fields = {f.name: r for f in t.fields if (r := _decimal_text_reader(f.type)) is not None}
        if not fields:
            return None
        return lambda v: (
            {k: fields[k](x) if k in fields else x for k, x in v.items()} if isinstance(v, dict) else v
        )
    return None


# ---------------------------------------------------------------------------- rendering


def _record_text(record: TopicRecord | None, *, headers: bool) -> str:
    if record is None:
        return "-"
    parts = [f"key={show(record.key)}"]
    if record.window is not None:
        parts.append(
            f"window={record.window.type.upper()}[{record.window.start},{record.window.end})"
        )
    parts.append(f"value={show(record.value)}")
    if record.timestamp is not None:
        parts.append(f"ts={record.timestamp}")
    if headers or record.headers:
        parts.append(f"headers={show(_headers_view(record))}")
    return " ".join(parts)


def render_comparison(comparison: TopicComparison, *, context: int = 20) -> Table:
    """A rich table of expected vs actual records of one topic, first difference marked."""
    table = Table(
        title=f"topic {comparison.topic}: expected {len(comparison.expected)}, "
        f"actual {len(comparison.actual)}",
        show_lines=False,
        expand=False,
    )
    table.add_column("#", justify="right")
    table.add_column("expected", overflow="fold")
    table.add_column("actual", overflow="fold")
    table.add_column("", no_wrap=True)
    rows = max(len(comparison.expected), len(comparison.actual))
    first = comparison.first_difference if comparison.first_difference is not None else rows
    start = max(0, first - context // 2)
    stop = min(rows, start + context)
    if start > 0:
        table.add_row("...", f"({start} matching records)", "", "")
    for i in range(start, stop):
        e = comparison.expected[i] if i < len(comparison.expected) else None
        a = comparison.actual[i] if i < len(comparison.actual) else None
        hdr = comparison.headers_compared[i] if i < len(comparison.headers_compared) else False
        marker = Text("")
        style = ""
        if i == comparison.first_difference:
            marker = Text(f"<- {comparison.field}", style="bold red")
            style = "red"
        elif i > first:
            style = "dim"
        table.add_row(
            str(i + 1),
            Text(_record_text(e, headers=hdr), style=style),
            Text(_record_text(a, headers=hdr), style=style),
            marker,
        )
    if stop < rows:
        table.add_row("...", f"({rows - stop} more)", "", "")
    return table


def render_verification(
    verification: Verification, *, color: bool = False, width: int = 140
) -> str:
    """The reasons and the comparison tables as text."""
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width,
        force_terminal=color,
        color_system="standard" if color else None,
        highlight=False,
    )
    for reason in verification.reasons:
        console.print(f"- {reason}", markup=False)
    for comparison in verification.comparisons:
        if comparison.reason is not None:
            console.print(render_comparison(comparison))
    return buffer.getvalue()


# ---------------------------------------------------------------------------- post-conditions


class EngineView(Protocol):
    """The part of the engine post-conditions read."""

    def source(self, name: str) -> SourceInfo | None: ...

    def topics(self) -> dict[str, TopicInfo]: ...


def check_post(
    post: PostConditions, engine: EngineView, declared: Sequence[TopicSpec] = ()
) -> list[str]:
    """Reasons why the post-conditions do not hold (empty when they all do). ``declared`` are
    the case's topics: a listed topic's schema ids are the ids the case declared for it."""
    reasons: list[str] = []
    for expected in post.sources:
        reasons.extend(_check_source(expected, engine.source(expected.name)))
    if post.blacklist is not None or post.topics:
        topics = engine.topics()
        if post.blacklist is not None:
            try:
                pattern = re.compile(post.blacklist)
            except re.error as exc:
                reasons.append(f"Topic blacklist '{post.blacklist}' is not a valid regex: {exc}.")
            else:
                # ksqlDB's runner tests each topic with Pattern.asPredicate: found anywhere.
                hits = sorted(t for t in topics if pattern.search(t))
                if hits:
                    reasons.append(
                        f"Topic '{hits[0]}' exists but matches the blacklist '{post.blacklist}'."
                    )
        described = _topic_formats(engine)
        internal_formats = getattr(engine, "internal_topic_formats", None)
        internal = set(internal_formats()) if internal_formats is not None else set()
        for expected_topic in post.topics:
            reasons.extend(
                _check_topic(
                    expected_topic, topics.get(expected_topic.name), described.get(expected_topic.name)
                )
            )
            reasons.extend(_check_schema_ids(expected_topic, declared))
            if expected_topic.name not in internal:
                # kspark keeps a join's or an aggregate's state in Spark: it serializes no record to
                # the internal (repartition, changelog) topics ksqlDB's Kafka Streams writes, so no
                # schema is registered for them; their formats are checked above.
                reasons.extend(_check_registered_schemas(expected_topic, engine))
    return reasons


def _check_registered_schemas(expected: PostTopic, engine: Any) -> list[str]:
    """A schema a listed topic states equals the latest one registered under the topic's
    ``<topic>-key`` or ``<topic>-value`` subject in the engine's registry, as ksqlDB's runner
    compares them: parsed (a JSON tree for AVRO and JSON_SR, a proto file for PROTOBUF).
    One it leaves out (or gives as null) is not checked."""
    reasons: list[str] = []
    if not hasattr(engine, "schema_registry_url"):
        return []  # a view of an engine without a registry of its own (replay-ksqldb's): see its docs
    url = getattr(engine, "schema_registry_url", None)
    for label, want in (("key", expected.key_schema), ("value", expected.value_schema)):
        if want is None:
            continue
        subject = f"{expected.name}-{label}"
        got = latest_registered_schema(url, subject) if url else None
        if got is None:
            reasons.append(f"Topic '{expected.name}' has no {label} schema registered under {subject} "
                           f"but expected {_schema_text(want)}.")
        elif not schemas_equal(want, got):
            reasons.append(f"Topic '{expected.name}' has {label} schema {_schema_text(got)} registered under "
                           f"{subject} but expected {_schema_text(want)}.")
    return reasons


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """The latest schema of a subject: its registry type and its text."""

    schema_type: str
    text: str


def latest_registered_schema(url: str, subject: str) -> RegisteredSchema | None:
    """The latest schema registered under ``subject`` at ``url``; None when there is none."""
    from engine.serde.registry import registry_client

    try:
        registered = registry_client(url).get_latest_version(subject)
    except Exception:  # the client's SchemaRegistryError (40401: no such subject)
        return None
    schema = registered.schema
    return RegisteredSchema(str(schema.schema_type or "AVRO").upper(), str(schema.schema_str))


def schemas_equal(expected: Any, actual: RegisteredSchema) -> bool:
    """ksqlDB's comparison of a case's schema (a JSON value, or the text of a proto file)
    with a registered one: JSON trees for AVRO and JSON schemas, proto files parsed for PROTOBUF."""
    if actual.schema_type == "PROTOBUF":
        return isinstance(expected, str) and _proto_file(expected) == _proto_file(actual.text)
    try:
        registered = json.loads(actual.text, parse_float=decimal.Decimal)
    except ValueError:
        return False
    if isinstance(expected, str):  # a schema given as text: ksqlDB's TextNode of a JSON string
        try:
            expected = json.loads(expected, parse_float=decimal.Decimal)
        except ValueError:
            return False
    return _json_equal(expected, registered)


def _json_equal(a: Any, b: Any) -> bool:
    """JSON trees equal as Jackson's nodes are: same keys in any order, numbers by value and kind."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if _is_number(a) and _is_number(b):
        return isinstance(a, int) == isinstance(b, int) and a == b
    return bool(type(a) is type(b) and a == b)


def _proto_file(text: str) -> Any:
    """A proto file parsed (its syntax, messages, fields and options), without its comments and
    layout; the text itself, spaces collapsed, when it does not parse."""
    try:
        from proto_schema_parser.parser import Parser

        return _without_comments(Parser().parse(text))
    except Exception:  # not a proto file the parser reads: compare the text
        return " ".join(text.split())


def _without_comments(node: Any) -> Any:
    from proto_schema_parser import ast as P

    if isinstance(node, list):
        return [_without_comments(n) for n in node if not isinstance(n, P.Comment)]
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return dataclasses.replace(node, **{
            f.name: _without_comments(getattr(node, f.name)) for f in dataclasses.fields(node) if f.init
        })
    return node


def _schema_text(schema: Any) -> str:
    text = schema.text if isinstance(schema, RegisteredSchema) else (
        schema if isinstance(schema, str) else json.dumps(schema, default=str))
    return _short(" ".join(text.split()), 200)


def _check_source(expected: PostSource, actual: SourceInfo | None) -> list[str]:
    name = expected.name
    if actual is None:
        return [f"Source '{name}' does not exist after the case ran."]
    reasons: list[str] = []
    if expected.type is not None and expected.type.upper() != actual.kind.upper():
        reasons.append(
            f"Source '{name}' is a {actual.kind.upper()} but expected a {expected.type}."
        )
    if expected.schema is not None:
        try:
            schema = LogicalSchema.parse(expected.schema)
        except KsqlError as exc:
            reasons.append(f"Expected schema of source '{name}' cannot be parsed: {exc}")
        else:
            if schema != actual.schema:
                reasons.append(
                    f"Source '{name}' has schema '{actual.schema}' but expected '{schema}'."
                )
    reasons.extend(_check_format(f"Source '{name}' key", expected.key_format, actual.key_format))
    reasons.extend(
        _check_format(f"Source '{name}' value", expected.value_format, actual.value_format)
    )
    for label, want, got in (
        ("key", expected.key_features, actual.key_format.features),
        ("value", expected.value_features, actual.value_format.features),
    ):
        if want is not None and set(want) != set(got):
            reasons.append(
                f"Source '{name}' has {label} features {sorted(got)} but expected {sorted(want)}."
            )
    if expected.is_source is not None and expected.is_source != actual.is_source:
        reasons.append(
            f"Source '{name}' has isSource={actual.is_source} but expected {expected.is_source}."
        )
    return reasons


def _check_format(label: str, expected: FormatSpec | None, actual: FormatDescription) -> list[str]:
    if expected is None:
        return []
    reasons: list[str] = []
    if expected.format is not None and expected.format.upper() != actual.format.upper():
        reasons.append(f"{label} format is {actual.format} but expected {expected.format}.")
    if expected.whole:
        return reasons + _check_whole_format(label, expected, actual)
    for k, v in expected.properties.items():
        got = format_property(actual, k)
        if not _property_equal(k, got, str(v)):
            reasons.append(f"{label} format property '{k}' is {got!r} but expected {v!r}.")
    if expected.features is not None and set(expected.features) != set(actual.features):
        reasons.append(
            f"{label} features are {sorted(actual.features)} but expected {sorted(expected.features)}."
        )
    if (expected.window_type is not None or expected.exact_window) and (
        (actual.window_type or "").upper() != (expected.window_type or "").upper()
    ):
        reasons.append(
            f"{label} window type is {actual.window_type or 'none'} but expected {expected.window_type or 'none'}."
        )
    if (expected.window_size is not None or expected.exact_window) and actual.window_size_ms != expected.window_size:
        reasons.append(
            f"{label} window size is {actual.window_size_ms} ms but expected {expected.window_size} ms."
        )
    return reasons


def _check_whole_format(label: str, expected: FormatSpec, actual: FormatDescription) -> list[str]:
    """The properties, features and window of a format compared whole, as ksqlDB's KeyFormat
    and ValueFormat equality compares them: what the case leaves out must be absent."""
    reasons: list[str] = []
    want = {k: _property_text(v) for k, v in expected.properties.items()}
    got = ksqldb_format_properties(actual)
    if want != got:
        reasons.append(f"{label} format properties are {got} but expected {want}.")
    if set(expected.features or ()) != set(actual.features):
        reasons.append(
            f"{label} features are {sorted(actual.features)} but expected {sorted(expected.features or ())}."
        )
    if expected.exact_window:
        if (actual.window_type or "").upper() != (expected.window_type or "").upper():
            reasons.append(
                f"{label} window type is {actual.window_type or 'none'} but expected "
                f"{expected.window_type or 'none'}."
            )
        elif actual.window_size_ms != expected.window_size:
            reasons.append(
                f"{label} window size is {actual.window_size_ms} ms but expected {expected.window_size} ms."
            )
    return reasons


def format_differences(label: str, expected: FormatSpec, actual: FormatDescription) -> list[str]:
    """Why ``actual`` is not the whole format ``expected`` describes (``read_format_node``)."""
    return _check_format(label, expected, actual)


def _property_text(value: Any) -> str:
    """A property value as ksqlDB's Map<String, String> reads it from JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def ksqldb_format_properties(actual: FormatDescription) -> dict[str, str]:
    """A format's properties by ksqlDB's names and in ksqlDB's spelling (nullableRepresentation
    lower-cased), with the one ksqlDB adds to every PROTOBUF format, unwrapPrimitives=true,
    which is how kspark's PROTOBUF serdes always read wrapper types."""
    names = {v: k for k, v in _KSQLDB_PROPERTY_NAMES.items()}
    out: dict[str, str] = {}
    for name, value in actual.properties.items():
        ksqldb = names.get(name, name)
        text = str(value)
        out[ksqldb] = text.lower() if ksqldb == "nullableRepresentation" else text
    if actual.format.upper() == "PROTOBUF":
        out.setdefault("unwrapPrimitives", "true")
    return out


# ksqlDB's names of format properties (as its plans and QTT cases write them) -> kspark's.
_KSQLDB_PROPERTY_NAMES = {
    "fullSchemaName": "schema_full_name",
    "nullableRepresentation": "nullable_representation",
    "schemaId": "schema_id",
}
# Properties kspark's serdes always behave by: its PROTOBUF formats read the
# google.protobuf wrapper types as their primitives, what ksqlDB's unwrapPrimitives=true does.
_IMPLIED_PROPERTIES = {
    ("PROTOBUF", "unwrapPrimitives"): "true",
    ("PROTOBUF_NOSR", "unwrapPrimitives"): "true",
}


def format_property(actual: FormatDescription, name: str) -> str | None:
    """A format property by ksqlDB's name (``fullSchemaName``) or kspark's (``schema_full_name``)."""
    implied = _IMPLIED_PROPERTIES.get((actual.format.upper(), name))
    if implied is not None:
        return implied
    value = actual.properties.get(_KSQLDB_PROPERTY_NAMES.get(name, name))
    return None if value is None else str(value)


def _property_equal(name: str, actual: str | None, expected: str) -> bool:
    if actual is None:
        return False
    if _KSQLDB_PROPERTY_NAMES.get(name, name) == "nullable_representation":
        return actual.upper() == expected.upper()  # ksqlDB writes 'optional', accepts any case
    return actual == expected


def _topic_formats(engine: Any) -> dict[str, tuple[FormatDescription, FormatDescription]]:
    """Per topic, the key and value formats of the first source on it: as ksqlDB's runner
    describes a topic, by the source that reads or writes it (an engine without ``sources``
    describes none); an internal topic by the formats its query gave it."""
    sources = getattr(engine, "sources", None)
    described: dict[str, tuple[FormatDescription, FormatDescription]] = {}
    for source in sources() if sources is not None else ():
        described.setdefault(source.topic, (source.key_format, source.value_format))
    internal = getattr(engine, "internal_topic_formats", None)
    for name, formats in (internal() if internal is not None else {}).items():
        described.setdefault(name, formats)
    return described


def _check_schema_ids(expected: PostTopic, declared: Sequence[TopicSpec]) -> list[str]:
    """A schema id a listed topic states is the id the case declared for the topic. One it
    leaves out is not checked: ksqlDB's runner compares it with the broker's topic, where a
    sink the case declares with an id may hold none (saved plans of ksqlDB record such sinks
    without one), and kspark's bounded runtime has no such topic record to compare with."""
    topic = next((t for t in declared if t.name == expected.name), None)
    reasons = []
    for label, want, got in (
        ("key", expected.key_schema_id, topic.key_schema_id if topic else None),
        ("value", expected.value_schema_id, topic.value_schema_id if topic else None),
    ):
        if want is not None and want != got:
            reasons.append(f"Topic '{expected.name}' has {label} schema id {got} but expected {want}.")
    return reasons


def _check_topic(
    expected: PostTopic,
    actual: TopicInfo | None,
    described: tuple[FormatDescription, FormatDescription] | None = None,
) -> list[str]:
    name = expected.name
    if actual is None:
        return [f"Topic '{name}' does not exist after the case ran."]
    reasons: list[str] = []
    for i, (label, want, got) in enumerate(
        (("key", expected.key_format, actual.key_format), ("value", expected.value_format, actual.value_format))
    ):
        if want is not None and described is not None:
            reasons.extend(_check_format(f"Topic '{name}' {label}", want, described[i]))
        elif want is not None and (got or "").upper() != (want.format or "").upper():
            reasons.append(f"Topic '{name}' has {label} format {got} but expected {want.format}.")
    if expected.partitions is not None and expected.partitions != actual.partitions:
        reasons.append(
            f"Topic '{name}' has {actual.partitions} partitions but expected {expected.partitions}."
        )
    return reasons
