"""PRINT: records as ksqlDB's ``PRINT topic`` shows them, guessing the key and value formats.

    printer = RecordPrinter()
    lines = [printer.format(r) for r in records]
    printer.format_lines()   # ['Key format: KAFKA_BIGINT or KAFKA_DOUBLE', 'Value format: JSON or KAFKA_STRING']
    lines[0]                 # 'rowtime: 2021/03/04 12:34:56.789 Z, key: 1, value: {"A":1}, partition: 0'

    for line in print_topic(bootstrap, "orders", from_beginning=True, limit=10):
        print(line)          # PRINT 'orders' FROM BEGINNING LIMIT 10;

Like ksqlDB, PRINT knows no schema: it tries each format on the bytes and keeps, record
after record, the formats every non-null key (value) so far fits; a record is shown in the
first format still possible. kspark's rules, a simple version of ksqlDB's:

- ``KAFKA_STRING``: UTF-8 text without control characters (tab, CR and LF allowed).
- ``JSON``: text that parses as JSON; shown as it is.
- ``KAFKA_INT`` (4 bytes), ``KAFKA_BIGINT`` and ``KAFKA_DOUBLE`` (8 bytes): big-endian
  numbers, only when the bytes are not text (real numbers start with zero bytes).
- Keys only: ``TUMBLING(F)`` / ``HOPPING(F)`` (inner key in format F, then an 8-byte
  window start) and ``SESSION(F)`` (inner key, 8-byte end, 8-byte start), when the
  window bounds are plausible times (year 1970 to 9999); shown ``[key@start/-]`` for time
  windows (the end is not stored) and ``[key@start/end]`` for sessions.
- Bytes no format fits: ``UNRECOGNISED_BYTES``, shown as UTF-8 with replacement characters.
  Schema-registry formats (AVRO, PROTOBUF, JSON_SR) are not recognised.

Null keys and values show as ``<null>`` and tell nothing about the format; before any
non-null one the format line reads ``¯\\_(ツ)_/¯ - no data processed``. ``rowtime`` is the
record timestamp in UTC, ``yyyy/MM/dd HH:mm:ss.SSS Z``, or ``N/A`` when it has none.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from decimal import Decimal

from engine.kafka.admin import TopicAdmin
from engine.kafka.consume import NO_TIMESTAMP, ConsumedRecord, follow_topic
from engine.serde.windowed import (
    SESSION_SUFFIX,
    TIME_SUFFIX,
    decode_session_window_key,
    decode_time_window_key,
)

NO_DATA = "¯\\_(ツ)_/¯ - no data processed"
UNRECOGNISED = "UNRECOGNISED_BYTES"
NULL = "<null>"
_MAX_TIME = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z

Decoder = Callable[[bytes], "str | None"]  # the shown text, or None when the bytes do not fit


def _text(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(ord(c) < 0x20 and c not in "\t\r\n" or ord(c) == 0x7F for c in text):
        return None
    return text


def _json(data: bytes) -> str | None:
    text = _text(data)
    if text is None or not text.strip():
        return None
    try:
        json.loads(text)
    except ValueError:
        return None
    return text


def _number(size: int, decode: Callable[[bytes], str]) -> Decoder:
    def decoder(data: bytes) -> str | None:
        if len(data) != size or _text(data) is not None:
            return None
        return decode(data)

    return decoder


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` writes it (``1.5``, ``100.0``, ``1.0E10``, ``NaN``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        return repr(value)  # positional, with '.0' for whole numbers, in this range
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()  # shortest round-trip digits
    digits = "".join(map(str, digit_tuple))
    assert isinstance(exponent, int)
    stripped = digits.rstrip("0") or "0"
    exponent += len(digits) - len(stripped)
    power = len(stripped) - 1 + exponent
    return f"{'-' if sign else ''}{stripped[0]}.{stripped[1:] or '0'}E{power}"


PLAIN: dict[str, Decoder] = {
    "JSON": _json,
    "KAFKA_INT": _number(4, lambda b: str(struct.unpack(">i", b)[0])),
    "KAFKA_BIGINT": _number(8, lambda b: str(struct.unpack(">q", b)[0])),
    "KAFKA_DOUBLE": _number(8, lambda b: java_double(struct.unpack(">d", b)[0])),
    "KAFKA_STRING": _text,
}


def _plausible(time: int) -> bool:
    return 0 <= time <= _MAX_TIME


def _time_windowed(inner: Decoder) -> Decoder:
    def decoder(data: bytes) -> str | None:
        if len(data) <= TIME_SUFFIX:
            return None
        key, start = decode_time_window_key(data)
        shown = inner(key)
        return None if shown is None or not _plausible(start) else f"[{shown}@{start}/-]"

    return decoder


def _session_windowed(inner: Decoder) -> Decoder:
    def decoder(data: bytes) -> str | None:
        if len(data) <= SESSION_SUFFIX:
            return None
        key, start, end = decode_session_window_key(data)
        shown = inner(key)
        if shown is None or not (_plausible(start) and _plausible(end) and start <= end):
            return None
        return f"[{shown}@{start}/{end}]"

    return decoder


KEY_FORMATS: dict[str, Decoder] = {
    **{f"SESSION({name})": _session_windowed(d) for name, d in PLAIN.items()},
    **{f"HOPPING({name})": _time_windowed(d) for name, d in PLAIN.items()},
    **{f"TUMBLING({name})": _time_windowed(d) for name, d in PLAIN.items()},
    **PLAIN,
}
VALUE_FORMATS: dict[str, Decoder] = dict(PLAIN)


def fitting_formats(data: bytes, *, key: bool) -> tuple[str, ...]:
    """The names of the formats ``data`` fits, most specific first."""
    formats = KEY_FORMATS if key else VALUE_FORMATS
    return tuple(name for name, decode in formats.items() if decode(data) is not None)


def render(data: bytes | None, format_name: str) -> str:
    """``data`` shown in ``format_name`` (``<null>`` for None)."""
    if data is None:
        return NULL
    decoder = KEY_FORMATS.get(format_name)
    shown = decoder(data) if decoder is not None else None
    return shown if shown is not None else data.decode("utf-8", errors="replace")


def format_rowtime(timestamp: int) -> str:
    """A record timestamp as PRINT shows it: ``2021/03/04 12:34:56.789 Z`` (UTC)."""
    if timestamp == NO_TIMESTAMP:
        return "N/A"
    moment = datetime.fromtimestamp(timestamp / 1000, tz=UTC)
    return moment.strftime("%Y/%m/%d %H:%M:%S.") + f"{timestamp % 1000:03d} Z"


class _Guess:
    """The formats every non-null datum so far fits (None: no data yet)."""

    def __init__(self, key: bool) -> None:
        self.key = key
        self.formats: tuple[str, ...] | None = None

    def show(self, data: bytes | None) -> str:
        if data is None:
            return NULL
        fits = fitting_formats(data, key=self.key)
        if self.formats is None:
            self.formats = fits or (UNRECOGNISED,)
        elif self.formats != (UNRECOGNISED,):
            self.formats = tuple(f for f in self.formats if f in fits) or (UNRECOGNISED,)
        return render(data, self.formats[0])

    def line(self) -> str:
        return " or ".join(self.formats) if self.formats else NO_DATA


class RecordPrinter:
    """Formats consumed records as PRINT does, narrowing the key and value formats as it goes."""

    def __init__(self) -> None:
        self._key = _Guess(key=True)
        self._value = _Guess(key=False)

    def format(self, record: ConsumedRecord) -> str:
        """``rowtime: ..., key: ..., value: ..., partition: N`` for one record."""
        key = self._key.show(record.key)
        value = self._value.show(record.value)
        return (
            f"rowtime: {format_rowtime(record.timestamp)}, key: {key}, value: {value}, "
            f"partition: {record.partition}"
        )

    @property
    def key_formats(self) -> tuple[str, ...]:
        return self._key.formats or ()

    @property
    def value_formats(self) -> tuple[str, ...]:
        return self._value.formats or ()

    def format_lines(self) -> list[str]:
        """``Key format: ...`` and ``Value format: ...`` for the records formatted so far."""
        return [f"Key format: {self._key.line()}", f"Value format: {self._value.line()}"]


def print_lines(
    records: Iterable[ConsumedRecord], *, interval: int = 1, limit: int | None = None
) -> Iterator[str]:
    """PRINT's output for ``records``: the format lines, then every ``interval``-th record.

    The format lines come once, before the first record line, guessed from the records
    read so far. Every record narrows the guess, shown or not; the first, the
    ``interval + 1``-th, ... are shown, and reading stops once ``limit`` are shown.
    """
    if interval < 1:
        raise ValueError(f"interval must be at least 1, got {interval}.")
    if limit is not None and limit <= 0:
        return
    printer = RecordPrinter()
    shown = 0
    for index, record in enumerate(records):
        line = printer.format(record)
        if index % interval:
            continue
        if shown == 0:
            yield from printer.format_lines()
        yield line
        shown += 1
        if limit is not None and shown >= limit:
            return


def print_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    from_beginning: bool = False,
    interval: int = 1,
    limit: int | None = None,
    stop: Callable[[], bool] | None = None,
) -> Iterator[str]:
    """``PRINT topic [FROM BEGINNING] [INTERVAL n] [LIMIT n]``: lines as records arrive.

    Runs until ``limit`` records are shown or ``stop()`` is true (checked every half
    second). A topic that does not exist under ``topic`` but does under another case is
    read under that one when exactly one matches (an unquoted name is upper-cased by the
    parser, as ksqlDB's PRINT allows). Raises ``KafkaClientError`` for a missing topic.
    """
    names = TopicAdmin(bootstrap_servers).list_topics()
    if topic not in names:
        matches = [name for name in names if name.lower() == topic.lower()]
        if len(matches) == 1:
            topic = matches[0]
    records = follow_topic(bootstrap_servers, topic, from_beginning=from_beginning, stop=stop)
    try:
        yield from print_lines(records, interval=interval, limit=limit)
    finally:
        getattr(records, "close", lambda: None)()  # the consumer closes now, not when collected
