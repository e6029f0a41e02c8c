"""Value helpers shared by the serdes, the evaluator and the functions (lower layer).

Java formatting matters: ksqlDB prints doubles with ``Double.toString`` and timestamps
with ISO formats, and those strings appear in outputs (CAST to STRING, DELIMITED values).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re

EPOCH = dt.datetime(1970, 1, 1)
EPOCH_DATE = dt.date(1970, 1, 1)


def format_double(value: float) -> str:
    """Format a double as Java's ``Double.toString`` does (``1.0``, ``1.0E7``, ``1.5E-4``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(value)
        if "e" in text or "E" in text:
            text = f"{value:f}"
        if "." not in text:
            text += ".0"
        return text
    # Shortest round-trip digits (as repr finds them), laid out in Java's scientific form.
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    text = "".join(str(d) for d in digits)
    point = len(text) + int(exponent) - 1
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{point}"


def timestamp_from_millis(millis: int) -> dt.datetime:
    """A naive UTC datetime for epoch milliseconds."""
    return EPOCH + dt.timedelta(milliseconds=millis)


def timestamp_to_millis(value: dt.datetime) -> int:
    """Epoch milliseconds of a naive UTC (or aware) datetime."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    delta = value - EPOCH
    return (delta.days * 86_400_000) + (delta.seconds * 1000) + (delta.microseconds // 1000)


def date_from_days(days: int) -> dt.date:
    """The date ``days`` after 1970-01-01."""
    return EPOCH_DATE + dt.timedelta(days=days)


def date_to_days(value: dt.date) -> int:
    """Days since 1970-01-01."""
    return (value - EPOCH_DATE).days


def time_from_millis(millis: int) -> dt.time:
    """A time of day from milliseconds after midnight."""
    millis %= 86_400_000
    return (dt.datetime.min + dt.timedelta(milliseconds=millis)).time()


def time_to_millis(value: dt.time) -> int:
    """Milliseconds after midnight."""
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def format_timestamp(value: dt.datetime) -> str:
    """ksqlDB's default TIMESTAMP text: ``yyyy-MM-dd'T'HH:mm:ss.SSS``."""
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}"


def format_time(value: dt.time) -> str:
    """ksqlDB's default TIME text: ``HH:mm`` or ``HH:mm:ss`` or ``HH:mm:ss.SSS`` (Java LocalTime)."""
    text = f"{value.hour:02d}:{value.minute:02d}"
    if value.second or value.microsecond:
        text += f":{value.second:02d}"
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}"
    return text


_PARTIAL_TIMESTAMP = re.compile(
    r"(?P<year>\d{4})(?:-(?P<month>\d{2})(?:-(?P<day>\d{2})"
    r"(?:T(?P<hour>\d{2})(?::(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d{1,9}))?)?)?)?)?)?"
    r"(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)?"
)


def parse_timestamp_text(text: str) -> dt.datetime:
    """Parse ksqlDB's (partial) ISO timestamp text, e.g. ``2018``, ``2018-01-01T00:00:00.001+0445``.

    Missing fields take their minimum; a zone offset converts the result to UTC.
    Raises ValueError when the text is not a timestamp.
    """
    match = _PARTIAL_TIMESTAMP.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"'{text}' is not a timestamp of the form yyyy-MM-dd'T'HH:mm:ss.SSS.")
    g = match.groupdict()
    fraction = (g["fraction"] or "0").ljust(6, "0")[:6]
    value = dt.datetime(
        int(g["year"]),
        int(g["month"] or 1),
        int(g["day"] or 1),
        int(g["hour"] or 0),
        int(g["minute"] or 0),
        int(g["second"] or 0),
        int(fraction),
    )
    zone = g["zone"]
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
        value = value - offset if zone[0] == "+" else value + offset
    return value


def parse_date_text(text: str) -> dt.date:
    """Parse ISO date text ``yyyy-MM-dd``; raises ValueError otherwise."""
    return dt.date.fromisoformat(text.strip())


def parse_time_text(text: str) -> dt.time:
    """Parse ISO time text ``HH:mm[:ss[.SSS]]``; raises ValueError otherwise."""
    value = dt.time.fromisoformat(text.strip())
    if value.tzinfo is not None:
        raise ValueError(f"'{text}' is a time with a zone; expected a local time.")
    return value


def format_date(value: dt.date) -> str:
    """ksqlDB's DATE text: ``yyyy-MM-dd``."""
    return value.isoformat()
