"""Date and time functions, with Java ``DateTimeFormatter`` patterns and ``ZoneId`` zones.

Patterns are compiled once by ``java_pattern`` into a ``DateTimePattern`` that formats
and parses engine values (parsing is case-insensitive, as ksqlDB builds its formatters
with ``parseCaseInsensitive``). Zones are read by ``java_zone`` with ``ZoneId.of``
rules: region ids through ``zoneinfo``, offsets such as ``+0200`` or ``-05:30``, ``Z``,
and ``UTC``/``GMT``/``UT`` with an optional offset.

The time-unit argument of DATEADD, DATESUB, TIMEADD, TIMESUB, TIMESTAMPADD and TIMESTAMPSUB
is an ``IntervalUnit`` at the SQL level. In signatures it is ``INTERVAL_UNIT`` (a STRING):
the typer gives an ``IntervalUnit`` expression the type STRING and the evaluator passes the
unit keyword (``DAYS``, ``HOUR``, ...; singular or plural, any case) as a ``str``.
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import re
import time as _time
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

from engine.data.values import (
    date_from_days,
    date_to_days,
    time_from_millis,
    time_to_millis,
    timestamp_from_millis,
    timestamp_to_millis,
)
from engine.errors import EvaluationError
from engine.functions.registry import scalar
from engine.plan import types as T

_V = TypeVar("_V")

INTERVAL_UNIT = T.STRING
"""Signature type of a time-unit argument: the evaluator passes the unit name as a string."""

MILLIS_PER_DAY = 86_400_000
NANOS_PER_DAY = MILLIS_PER_DAY * 1_000_000

# --------------------------------------------------------------------------- zones

_OFFSET = re.compile(r"([+-])(\d{1,2})(?::?(\d{2}))?(?::?(\d{2}))?")


def _offset_id(seconds: int) -> str:
    """Java's ``ZoneOffset.getId()``: ``Z``, ``+02:00`` or ``-05:30:15``."""
    if seconds == 0:
        return "Z"
    sign = "-" if seconds < 0 else "+"
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h:02d}:{m:02d}" + (f":{s:02d}" if s else "")


def _parse_offset(text: str) -> int | None:
    match = _OFFSET.fullmatch(text)
    if match is None:
        return None
    sign, hh, mm, ss = match.groups()
    if len(hh) == 1 and mm is not None:
        return None
    seconds = int(hh) * 3600 + int(mm or 0) * 60 + int(ss or 0)
    if int(mm or 0) > 59 or int(ss or 0) > 59 or seconds > 18 * 3600:
        return None
    return -seconds if sign == "-" else seconds


def fixed_zone(seconds: int, name: str | None = None) -> dt.timezone:
    """A fixed-offset zone whose name (pattern letter ``z``) is the Java zone id."""
    return dt.timezone(dt.timedelta(seconds=seconds), name or _offset_id(seconds))


@lru_cache(maxsize=512)
def java_zone(zone_id: str) -> dt.tzinfo:
    """The zone ``ZoneId.of(zone_id)`` denotes; raise EvaluationError for an unknown id."""
    text = zone_id.strip()
    if text == "Z":
        return fixed_zone(0)
    if text[:1] in "+-" and text:
        seconds = _parse_offset(text)
        if seconds is not None:
            return fixed_zone(seconds)
    for prefix in ("UTC", "GMT", "UT"):
        if text.startswith(prefix) and text[len(prefix) :][:1] in "+-" and len(text) > len(prefix):
            seconds = _parse_offset(text[len(prefix) :])
            if seconds is not None:
                return fixed_zone(seconds, prefix + _offset_id(seconds) if seconds else prefix)
    if text in ("UTC", "GMT", "UT"):
        return fixed_zone(0, text)
    try:
        return zoneinfo.ZoneInfo(text)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        pass
    raise EvaluationError(
        f"Unknown time zone '{zone_id}'; expected a region such as 'America/New_York' "
        "or an offset such as '+02:00'."
    )


UTC = fixed_zone(0, "UTC")

# Zone names accepted when parsing pattern letter 'z' (Java's short display names).
_ZONE_NAMES = {
    "UTC": "UTC",
    "GMT": "GMT",
    "UT": "UT",
    "Z": "Z",
    "PST": "America/Los_Angeles",
    "PDT": "America/Los_Angeles",
    "MST": "America/Denver",
    "MDT": "America/Denver",
    "CST": "America/Chicago",
    "CDT": "America/Chicago",
    "EST": "America/New_York",
    "EDT": "America/New_York",
    "AKST": "America/Anchorage",
    "AKDT": "America/Anchorage",
    "HST": "Pacific/Honolulu",
    "BST": "Europe/London",
    "IST": "Asia/Kolkata",
    "CET": "Europe/Paris",
    "CEST": "Europe/Paris",
    "EET": "Europe/Athens",
    "EEST": "Europe/Athens",
    "WET": "Europe/Lisbon",
    "WEST": "Europe/Lisbon",
    "JST": "Asia/Tokyo",
    "KST": "Asia/Seoul",
    "AEST": "Australia/Sydney",
    "AEDT": "Australia/Sydney",
}

# --------------------------------------------------------------------------- patterns

MONTHS = tuple(calendar.month_name[i] for i in range(1, 13))
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

_SUPPORTED_LETTERS = "GuyDMLdQqEaHkKhmsSnNAVzOXxZ"
# Version 2 of the formatting functions also formats the week-based fields (in the US
# definition of a week, which ksqlDB's default locale gives: Sunday first, a first week of one
# day), the day of the week as a localized number, the aligned day of the week in the month
# and the modified Julian day; these fields cannot be parsed.
_FORMAT_ONLY_LETTERS = "YwWecFg"
# The most letters of a run that DateTimeFormatter accepts (and the only counts, where a set).
_MAX_WIDTH = {
    "G": 5, "E": 5, "e": 5, "c": 5, "M": 5, "L": 5, "Q": 5, "q": 5,
    "a": 1, "d": 2, "h": 2, "H": 2, "k": 2, "K": 2, "m": 2, "s": 2,
    "D": 3, "F": 1, "w": 2, "W": 1, "S": 9, "z": 4, "X": 5, "x": 5, "Z": 5,
    "y": 19, "u": 19, "Y": 19, "n": 19, "N": 19, "A": 19, "g": 19,
}  # fmt: skip
_RESERVED = "#{}"


@dataclass(frozen=True, slots=True)
class PatternField:
    """A run of one pattern letter, e.g. ``yyyy`` is ``PatternField('y', 4)``."""

    letter: str
    width: int
    semantics: int = 1  # the version of the formatting functions that read the pattern


@dataclass(frozen=True, slots=True)
class PatternLiteral:
    """Text copied as is (quoted text, punctuation, spaces)."""

    text: str


@dataclass(frozen=True, slots=True)
class PatternOptional:
    """An optional section ``[...]``."""

    items: tuple[PatternItem, ...]


PatternItem = PatternField | PatternLiteral | PatternOptional


class _MissingField(Exception):
    """The value has no such field (a date has no hour); internal to formatting."""


def _check_width(letter: str, width: int) -> None:
    """Refuse a run of letters as ``DateTimeFormatterBuilder.appendPattern`` does."""
    if letter == "V" and width != 2:
        raise EvaluationError("Pattern letter count must be 2: V")
    if letter == "O" and width not in (1, 4):
        raise EvaluationError("Pattern letter count must be 1 or 4: O")
    if letter == "c" and width == 2:
        raise EvaluationError('Invalid pattern "cc"')
    if width > _MAX_WIDTH.get(letter, width):
        if letter in "yuYnNAg":
            raise EvaluationError(f"The minimum width must be from 1 to 19 inclusive but was {width}")
        if letter == "S":
            raise EvaluationError(f"Minimum width must be from 0 to 9 inclusive but was {width}")
        raise EvaluationError(f"Too many pattern letters: {letter}")


def tokenize_java_pattern(pattern: str, semantics: int = 1) -> tuple[PatternItem, ...]:
    """Split a ``DateTimeFormatter`` pattern into fields, literals and optional sections.

    From ``semantics`` 2 on (the formatting functions' version 2) the format-only letters are
    taken and runs longer than Java allows are refused in its words."""
    stack: list[list[PatternItem]] = [[]]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            end = i + 1
            text: list[str] = []
            while True:
                if end >= n:
                    raise EvaluationError(
                        f"Pattern '{pattern}' has an unterminated quote; close it with '."
                    )
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            stack[-1].append(PatternLiteral("".join(text) if end > i + 1 else "'"))
            i = end + 1
        elif c == "[":
            stack.append([])
            i += 1
        elif c == "]":
            if len(stack) == 1:
                raise EvaluationError(
                    f"Pattern '{pattern}' closes an optional section ']' it never opened."
                )
            items = tuple(stack.pop())
            stack[-1].append(PatternOptional(items))
            i += 1
        elif c.isascii() and c.isalpha():
            end = i
            while end < n and pattern[end] == c:
                end += 1
            if semantics >= 2 and c in _FORMAT_ONLY_LETTERS:
                pass
            elif c not in _SUPPORTED_LETTERS:
                raise EvaluationError(
                    f"Pattern '{pattern}' uses the unsupported pattern letter '{c}'; "
                    f"supported letters are {_SUPPORTED_LETTERS}."
                )
            if semantics >= 2:
                _check_width(c, end - i)
            stack[-1].append(PatternField(c, end - i, semantics))
            i = end
        elif c in _RESERVED:
            raise EvaluationError(f"Pattern '{pattern}' uses the reserved character '{c}'.")
        else:
            stack[-1].append(PatternLiteral(c))
            i += 1
    while len(stack) > 1:  # Java closes unterminated optional sections at the end
        items = tuple(stack.pop())
        stack[-1].append(PatternOptional(items))
    return tuple(stack[0])


def _pad(value: int, width: int) -> str:
    text = str(abs(value)).rjust(width, "0")
    return ("-" if value < 0 else "") + text


def _text(names: tuple[str, ...], index: int, width: int) -> str:
    name = names[index]
    if width == 4:
        return name
    if width == 5:
        return name[0]
    return name[:3]


def _offset_text(seconds: int, letter: str, width: int) -> str:
    if letter == "X" and seconds == 0:
        return "Z"
    sign = "-" if seconds < 0 else "+"
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    if width == 1:
        return f"{sign}{h:02d}" + (f"{m:02d}" if m else "")
    if width == 2:
        return f"{sign}{h:02d}{m:02d}"
    if width == 3:
        return f"{sign}{h:02d}:{m:02d}"
    if width == 4:
        return f"{sign}{h:02d}{m:02d}" + (f"{s:02d}" if s else "")
    return f"{sign}{h:02d}:{m:02d}" + (f":{s:02d}" if s else "")


def _gmt_text(seconds: int, long: bool, with_seconds: bool = False) -> str:
    if seconds == 0:
        return "GMT"
    sign = "-" if seconds < 0 else "+"
    h, rest = divmod(abs(seconds), 3600)
    m, sec = divmod(rest, 60)
    tail = f":{sec:02d}" if with_seconds and sec else ""  # formatting version 2, as Java
    if long:
        return f"GMT{sign}{h:02d}:{m:02d}{tail}"
    return f"GMT{sign}{h}" + (f":{m:02d}{tail}" if m or tail else "")


_JAVA_ZONE_NAMES_FILE = Path(__file__).with_name("java_zone_names.json")


@lru_cache(maxsize=1)
def _java_zone_names() -> dict[str, list[str | None]]:
    """Per zone id, the names Java's DateTimeFormatter prints for ``zzz`` and ``zzzz`` in the
    US locale: [standard short, standard long, daylight short, daylight long] (written by
    ``java engine/functions/java/ZoneNames.java``)."""
    return json.loads(_JAVA_ZONE_NAMES_FILE.read_text(encoding="utf-8"))


def _java_zone_text(value: dt.datetime, long: bool) -> str:
    """Pattern letter ``z`` as formatting version 2 prints it: the zone's display name in
    standard or daylight time, or its id where Java has no name (an offset, ``UT``)."""
    tz = value.tzinfo
    zone_id = getattr(tz, "key", None) or (tz.tzname(value) if tz is not None else None) or ""
    names = _java_zone_names().get(zone_id)
    if names is None:
        return zone_id
    daylight = bool(value.dst())
    name = names[2 + long] if daylight and names[2] is not None else names[long]
    return name or zone_id


def _zone_name(value: dt.datetime, width: int) -> str:
    tz = value.tzinfo
    if width == 2:  # VV
        return getattr(tz, "key", None) or (tz.tzname(value) if tz else "") or ""
    return value.tzname() or ""


def _us_day_of_week(value: dt.date) -> int:
    """The localized day of the week, Sunday first: 1 (Sunday) to 7 (Saturday)."""
    return (value.isoweekday() % 7) + 1


def _start_of_week_offset(day: int, dow: int) -> int:
    week_start = (day - dow) % 7
    return 7 - week_start if week_start + 1 > 1 else -week_start  # a first week of one day


def _compute_week(offset: int, day: int) -> int:
    return (7 + offset + (day - 1)) // 7


def _us_week_of_month(value: dt.date) -> int:
    return _compute_week(_start_of_week_offset(value.day, _us_day_of_week(value)), value.day)


def _us_week_based(value: dt.date) -> tuple[int, int]:
    """(week-based year, week of the week-based year) in the US definition of weeks."""
    doy = value.timetuple().tm_yday
    offset = _start_of_week_offset(doy, _us_day_of_week(value))
    week = _compute_week(offset, doy)
    if week == 0:
        year, week = _us_week_based(value - dt.timedelta(days=doy))
        return value.year - 1, week
    year_length = 366 if calendar.isleap(value.year) else 365
    new_year_week = _compute_week(offset, year_length + 1)
    if week >= new_year_week:
        return value.year + 1, week - new_year_week + 1
    return value.year, week


def _format_week_field(value: dt.date, letter: str, width: int) -> str:
    if letter in "ec":
        dow = _us_day_of_week(value)
        if width <= 2:
            return _pad(dow, width)
        return _text(WEEKDAYS, value.weekday(), width)
    if letter == "F":
        return str((value.day - 1) % 7 + 1)
    if letter == "g":
        return _pad(value.toordinal() - dt.date(1858, 11, 17).toordinal(), width)
    if letter == "W":
        return str(_us_week_of_month(value))
    year, week = _us_week_based(value)
    if letter == "w":
        return _pad(week, width)
    if width == 2:
        return f"{year % 100:02d}"
    if width >= 4 and year > 10**width - 1:
        return "+" + str(year)
    return _pad(year, width)


def _format_field(value: dt.date | dt.time, f: PatternField) -> str:
    letter, width = f.letter, f.width
    has_date = isinstance(value, dt.date)
    has_time = isinstance(value, dt.time | dt.datetime)
    if letter in _FORMAT_ONLY_LETTERS:
        if not has_date:
            raise _MissingField(letter)
        return _format_week_field(value, letter, width)  # type: ignore[arg-type]
    if letter in "GuyDMLdQqE" and not has_date:
        raise _MissingField(letter)
    if letter in "aHkKhmsSnNA" and not has_time:
        raise _MissingField(letter)
    if letter in "VzOXxZ" and not (isinstance(value, dt.datetime) and value.tzinfo is not None):
        raise _MissingField(letter)
    if letter == "G":
        return "Anno Domini" if width == 4 else ("A" if width == 5 else "AD")
    if letter in "uy":
        year = value.year  # type: ignore[union-attr]
        if width == 2:
            return f"{year % 100:02d}"
        if width >= 4 and year > 10**width - 1:
            return "+" + str(year)
        return _pad(year, width)
    if letter == "D":
        return _pad(value.timetuple().tm_yday, width)  # type: ignore[union-attr]
    if letter in "ML":
        month = value.month  # type: ignore[union-attr]
        return _pad(month, width) if width <= 2 else _text(MONTHS, month - 1, width)
    if letter == "d":
        return _pad(value.day, width)  # type: ignore[union-attr]
    if letter in "Qq":
        quarter = (value.month - 1) // 3 + 1  # type: ignore[union-attr]
        if width <= 2 or (width == 5 and f.semantics >= 2):  # 5: the narrow text, the digit
            return _pad(quarter, 1 if width == 5 else width)
        return (
            f"Q{quarter}"
            if width == 3
            else f"{quarter}{['st', 'nd', 'rd', 'th'][quarter - 1]} quarter"
        )
    if letter == "E":
        return _text(WEEKDAYS, value.weekday(), width)  # type: ignore[union-attr]
    hour, minute, second = value.hour, value.minute, value.second  # type: ignore[union-attr]
    micros = value.microsecond  # type: ignore[union-attr]
    if letter == "a":
        return "AM" if hour < 12 else "PM"
    if letter == "H":
        return _pad(hour, width)
    if letter == "k":
        return _pad(hour or 24, width)
    if letter == "K":
        return _pad(hour % 12, width)
    if letter == "h":
        return _pad(hour % 12 or 12, width)
    if letter == "m":
        return _pad(minute, width)
    if letter == "s":
        return _pad(second, width)
    if letter == "S":
        return (
            f"{micros * 1000:09d}"[:width]
            if width <= 9
            else f"{micros * 1000:09d}".ljust(width, "0")
        )
    if letter == "n":
        return _pad(micros * 1000, width)
    if letter == "N":
        return _pad(((hour * 60 + minute) * 60 + second) * 1_000_000_000 + micros * 1000, width)
    if letter == "A":
        return _pad(((hour * 60 + minute) * 60 + second) * 1000 + micros // 1000, width)
    assert isinstance(value, dt.datetime)
    offset = value.utcoffset()
    seconds = int(offset.total_seconds()) if offset is not None else 0
    if letter == "V":
        return _zone_name(value, 2)
    if letter == "z":
        if f.semantics >= 2:
            return _java_zone_text(value, width == 4)
        return _zone_name(value, width)
    if letter == "O":
        return _gmt_text(seconds, width == 4, f.semantics >= 2)
    if letter in "Xx":
        return _offset_text(seconds, letter, width)
    # letter == "Z"
    if width <= 3:
        return _offset_text(seconds, "x", 2)
    if width == 4:
        return _gmt_text(seconds, True, f.semantics >= 2)
    return _offset_text(seconds, "X", 5)


# --------------------------------------------------------------------------- parsing

_NUMERIC_REGEX = {1: r"\d{1,2}", 2: r"\d{2}"}


def _field_regex(f: PatternField) -> str:
    letter, width = f.letter, f.width
    if letter in _FORMAT_ONLY_LETTERS:
        raise EvaluationError(f"The pattern letter '{letter}' formats only; it cannot be parsed.")
    if letter in "uy":
        if width == 2:
            return r"\d{2}"
        return rf"[+-]?\d{{{width},10}}"
    if letter in "ML" and width >= 3:
        names = [m if width == 4 else m[:3] for m in MONTHS]
        return "|".join(names)
    if letter == "E":
        names = [d if width == 4 else d[:3] for d in WEEKDAYS]
        return "|".join(names)
    if letter in "MLdHkKhms":
        return _NUMERIC_REGEX.get(width, rf"\d{{{width}}}")
    if letter == "D":
        return r"\d{1,3}" if width == 1 else rf"\d{{{width},3}}"
    if letter in "Qq":
        return r"\d" if width <= 2 else (r"Q\d" if width == 3 else r"\d(?:st|nd|rd|th) quarter")
    if letter == "S":
        return rf"\d{{{width}}}"
    if letter in "nNA":
        return rf"\d{{{width},19}}"
    if letter == "a":
        return "AM|PM"
    if letter == "G":
        return "AD|BC|Anno Domini|Before Christ|A|B"
    if letter in "Xx":
        z = "Z|" if letter == "X" else ""
        return z + r"[+-]\d{2}(?::?\d{2})?(?::?\d{2})?"
    if letter == "Z":
        if width == 4:
            return r"GMT(?:[+-]\d{2}:\d{2})?"
        return r"Z|[+-]\d{2}:?\d{2}(?::?\d{2})?"
    if letter == "O":
        return r"GMT(?:[+-]\d{1,2}(?::\d{2})?)?"
    # V and z: a zone id or a short zone name
    return r"[A-Za-z][A-Za-z0-9_/+\-]*(?:[+-]\d{1,2}(?::?\d{2})?)?"


@dataclass
class ParsedFields:
    """Field values read from a text; None where the pattern had no such field."""

    year: int | None = None
    month: int | None = None
    day: int | None = None
    day_of_year: int | None = None
    hour: int | None = None
    hour_of_ampm: int | None = None
    pm: bool | None = None
    minute: int | None = None
    second: int | None = None
    nanos: int | None = None
    zone: dt.tzinfo | None = None
    weekday: int | None = None

    def date(
        self,
        *,
        default_year: int | None = None,
        default_month: int | None = None,
        default_day: int | None = None,
    ) -> dt.date:
        """The date these fields denote (Java SMART resolution: a too-large day is clamped)."""
        year = self.year if self.year is not None else default_year
        if year is None:
            raise EvaluationError("Text does not contain a year.")
        if self.year is None and self.month is None and self.day_of_year == 366:
            # As ksqlDB's timestamp parser: the default year (1970) has no day 366.
            raise EvaluationError("Leap day cannot be parsed without supplying the year field")
        if self.day_of_year is not None and self.month is None:
            result = dt.date(year, 1, 1) + dt.timedelta(days=self.day_of_year - 1)
            if result.year != year:
                raise EvaluationError(f"Day of year {self.day_of_year} is invalid for year {year}.")
        else:
            month = self.month if self.month is not None else default_month
            day = self.day if self.day is not None else default_day
            if month is None or day is None:
                raise EvaluationError("Text does not contain a complete date (month and day).")
            if not 1 <= month <= 12:
                raise EvaluationError(f"Invalid month {month}; expected 1 to 12.")
            if not 1 <= day <= 31:
                raise EvaluationError(f"Invalid day of month {day}; expected 1 to 31.")
            if not 1 <= year <= 9999:
                raise EvaluationError(f"Year {year} is out of the supported range 1 to 9999.")
            result = dt.date(year, month, min(day, calendar.monthrange(year, month)[1]))
        if self.weekday is not None and result.weekday() != self.weekday:
            raise EvaluationError(f"Day of week {WEEKDAYS[self.weekday]} does not match {result}.")
        return result

    def time(self) -> dt.time:
        """The time of day these fields denote; missing minutes, seconds and fraction are 0."""
        hour = self.hour
        if hour is None and self.hour_of_ampm is not None:
            hour = self.hour_of_ampm % 12 + (12 if self.pm else 0)
        if hour is None:
            if self.minute is not None or self.second is not None:
                raise EvaluationError("Text contains minutes or seconds but no hour.")
            hour = 0
        minute, second = self.minute or 0, self.second or 0
        if not 0 <= hour <= 23:
            raise EvaluationError(f"Invalid hour {hour}; expected 0 to 23.")
        if not 0 <= minute <= 59:
            raise EvaluationError(f"Invalid minute {minute}; expected 0 to 59.")
        if not 0 <= second <= 59:
            raise EvaluationError(f"Invalid second {second}; expected 0 to 59.")
        # Engine TIME and TIMESTAMP values carry milliseconds: the finer digits are dropped.
        millis = (self.nanos or 0) // 1_000_000
        return dt.time(hour, minute, second, millis * 1000)


def _zone_from_text(text: str) -> dt.tzinfo:
    if text.upper() in _ZONE_NAMES:
        return java_zone(_ZONE_NAMES[text.upper()])
    return java_zone(text)


def _offset_from_text(text: str) -> dt.tzinfo:
    upper = text.upper()
    if upper == "Z":
        return fixed_zone(0)
    if upper.startswith("GMT"):
        rest = upper[3:]
        return fixed_zone(0, "GMT") if not rest else java_zone("GMT" + rest)
    seconds = _parse_offset(text)
    if seconds is None:
        raise EvaluationError(f"Invalid zone offset '{text}'.")
    return fixed_zone(seconds)


def _apply(fields: ParsedFields, f: PatternField, text: str) -> None:
    letter, width = f.letter, f.width
    if letter in "uy":
        fields.year = 2000 + int(text) if width == 2 else int(text)
    elif letter in "ML":
        if width >= 3:
            names = [m.upper() if width == 4 else m[:3].upper() for m in MONTHS]
            fields.month = names.index(text.upper()) + 1
        else:
            fields.month = int(text)
    elif letter == "d":
        fields.day = int(text)
    elif letter == "D":
        fields.day_of_year = int(text)
    elif letter == "E":
        names = [d.upper() if width == 4 else d[:3].upper() for d in WEEKDAYS]
        fields.weekday = names.index(text.upper())
    elif letter == "H":
        fields.hour = int(text)
    elif letter == "k":
        fields.hour = int(text) % 24
    elif letter in "Kh":
        fields.hour_of_ampm = int(text)
    elif letter == "a":
        fields.pm = text.upper() == "PM"
    elif letter == "m":
        fields.minute = int(text)
    elif letter == "s":
        fields.second = int(text)
    elif letter == "S":
        fields.nanos = int(text.ljust(9, "0")[:9])
    elif letter == "n":
        fields.nanos = int(text)
    elif letter == "A":
        millis = int(text)
        fields.hour, rest = divmod(millis, 3_600_000)
        fields.minute, rest = divmod(rest, 60_000)
        fields.second, ms = divmod(rest, 1000)
        fields.nanos = ms * 1_000_000
    elif letter in "VzO":
        fields.zone = _offset_from_text(text) if letter == "O" else _zone_from_text(text)
    elif letter in "XxZ":
        fields.zone = _offset_from_text(text)


class DateTimePattern:
    """A Java ``DateTimeFormatter`` pattern compiled for formatting and parsing."""

    def __init__(self, pattern: str, semantics: int = 1) -> None:
        self.pattern = pattern
        self.items = tokenize_java_pattern(pattern, semantics)
        self._fields: list[PatternField] = []
        self._matcher: re.Pattern[str] | None = None

    @property
    def matcher(self) -> re.Pattern[str]:
        if self._matcher is None:
            self._fields = []
            self._matcher = re.compile(self._regex(self.items), re.IGNORECASE)
        return self._matcher

    def _regex(self, items: tuple[PatternItem, ...]) -> str:
        parts: list[str] = []
        for item in items:
            if isinstance(item, PatternLiteral):
                parts.append(re.escape(item.text))
            elif isinstance(item, PatternOptional):
                parts.append("(?:" + self._regex(item.items) + ")?")
            else:
                parts.append(f"(?P<f{len(self._fields)}>{_field_regex(item)})")
                self._fields.append(item)
        return "".join(parts)

    def format(self, value: dt.date | dt.time) -> str:
        """Format a date, a time or a datetime (aware when the pattern prints a zone)."""
        try:
            return self._format(self.items, value)
        except _MissingField as exc:
            kind = type(value).__name__
            raise EvaluationError(
                f"Pattern '{self.pattern}' uses the letter '{exc.args[0]}', which a {kind} value "
                "does not have."
            ) from None

    def _format(self, items: tuple[PatternItem, ...], value: dt.date | dt.time) -> str:
        out: list[str] = []
        for item in items:
            if isinstance(item, PatternLiteral):
                out.append(item.text)
            elif isinstance(item, PatternOptional):
                try:
                    out.append(self._format(item.items, value))
                except _MissingField:
                    pass
            else:
                out.append(_format_field(value, item))
        return "".join(out)

    def parse(self, text: str) -> ParsedFields:
        """Read the fields of ``text``, which must match the whole pattern."""
        match = self.matcher.fullmatch(text)
        if match is None:
            raise EvaluationError(
                f"Text '{text}' could not be parsed with the pattern '{self.pattern}'."
            )
        fields = ParsedFields()
        for i, f in enumerate(self._fields):
            group = match.group(f"f{i}")
            if group is not None:
                _apply(fields, f, group)
        return fields


@lru_cache(maxsize=512)
def java_pattern(pattern: str, semantics: int = 1) -> DateTimePattern:
    """Compile a Java ``DateTimeFormatter`` pattern such as ``yyyy-MM-dd'T'HH:mm:ss.SSSXXX``."""
    return DateTimePattern(pattern, semantics)


# --------------------------------------------------------------------------- conversions


def _to_zone(ts: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
    return ts.replace(tzinfo=dt.UTC).astimezone(zone)


def format_timestamp_in_zone(
    ts: dt.datetime, pattern: str, zone_id: str = "UTC", semantics: int = 1
) -> str:
    """Format a TIMESTAMP (naive UTC) as seen in a zone."""
    return java_pattern(pattern, semantics).format(_to_zone(ts, java_zone(zone_id)))


def parse_timestamp_in_zone(text: str, pattern: str, zone_id: str = "UTC") -> dt.datetime:
    """Parse a TIMESTAMP; a zone in the text wins over ``zone_id``. Missing fields default to 1970-01-01 00:00."""
    fields = java_pattern(pattern).parse(text)
    local = dt.datetime.combine(
        fields.date(default_year=1970, default_month=1, default_day=1), fields.time()
    )
    zone = fields.zone or java_zone(zone_id)
    aware = _localize(local, zone)
    return aware.astimezone(dt.UTC).replace(tzinfo=None)


def _localize(local: dt.datetime, zone: dt.tzinfo) -> dt.datetime:
    # fold=0 matches Java's ZonedDateTime.ofLocal: an ambiguous local time takes the earlier
    # offset, and one in a gap is read with the offset before the gap (so it moves later).
    return local.replace(tzinfo=zone, fold=0)


_UNIT_NANOS = {
    "NANOSECOND": 1,
    "MICROSECOND": 1_000,
    "MILLISECOND": 1_000_000,
    "SECOND": 1_000_000_000,
    "MINUTE": 60_000_000_000,
    "HOUR": 3_600_000_000_000,
    "DAY": 86_400_000_000_000,
}


def unit_nanos(unit: str) -> int:
    """Nanoseconds in one ``unit`` (``DAYS``, ``hour``, ``MILLISECONDS``, ...)."""
    key = unit.strip().upper()
    key = key[:-1] if key.endswith("S") else key
    if key not in _UNIT_NANOS:
        raise EvaluationError(
            f"Unknown time unit '{unit}'; expected one of DAYS, HOURS, MINUTES, SECONDS, "
            "MILLISECONDS, MICROSECONDS or NANOSECONDS."
        )
    return _UNIT_NANOS[key]


def _java_long_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def unit_to_millis(unit: str, amount: int) -> int:
    """Java's ``TimeUnit.toMillis(amount)``: units below a millisecond truncate towards zero."""
    nanos = unit_nanos(unit)
    if nanos < 1_000_000:
        return _java_long_div(amount, 1_000_000 // nanos)
    return amount * (nanos // 1_000_000)


# --------------------------------------------------------------------------- UNIX_*, FROM_*


@scalar("UNIX_DATE", params=[], returns=T.INTEGER)
def unix_date_now() -> int:
    """Days since 1970-01-01 of the current UTC date."""
    return _time.time_ns() // (NANOS_PER_DAY)


@scalar("UNIX_DATE", params=[T.DATE], returns=T.INTEGER)
def unix_date(value: dt.date) -> int:
    """Days since 1970-01-01 of a DATE."""
    return date_to_days(value)


@scalar("UNIX_TIMESTAMP", params=[], returns=T.BIGINT)
def unix_timestamp_now() -> int:
    """Milliseconds since the epoch, now."""
    return _time.time_ns() // 1_000_000


@scalar("UNIX_TIMESTAMP", params=[T.TIMESTAMP], returns=T.BIGINT)
def unix_timestamp(value: dt.datetime) -> int:
    """Milliseconds since the epoch of a TIMESTAMP."""
    return timestamp_to_millis(value)


@scalar("FROM_UNIXTIME", params=[T.BIGINT], returns=T.TIMESTAMP)
def from_unixtime(millis: int) -> dt.datetime:
    """The TIMESTAMP ``millis`` milliseconds after the epoch."""
    return _checked(lambda: timestamp_from_millis(millis), f"{millis} milliseconds")


@scalar("FROM_DAYS", params=[T.INTEGER], returns=T.DATE)
def from_days(days: int) -> dt.date:
    """The DATE ``days`` days after 1970-01-01."""
    return _checked(lambda: date_from_days(days), f"{days} days")


def _checked(make: Callable[[], _V], what: str) -> _V:
    try:
        return make()
    except OverflowError:
        raise EvaluationError(f"{what} since the epoch is outside the supported range.") from None


# --------------------------------------------------------------------------- format / parse


def _java_time_text(value: dt.time) -> str:
    """``LocalTime.toString``: ``HH:mm``, then ``:ss`` and a fraction of 3 or 6 digits when set."""
    text = f"{value.hour:02d}:{value.minute:02d}"
    if value.second or value.microsecond:
        text += f":{value.second:02d}"
    if value.microsecond:
        text += f".{value.microsecond // 1000:03d}" if value.microsecond % 1000 == 0 else f".{value.microsecond:06d}"
    return text


def _java_timestamp_text(value: dt.datetime) -> str:
    """``java.sql.Timestamp.toString`` in UTC: ``yyyy-mm-dd hh:mm:ss.f``, the fraction without
    trailing zeros (one digit at least)."""
    fraction = f"{value.microsecond * 1000:09d}".rstrip("0") or "0"
    return f"{value:%Y-%m-%d %H:%M:%S}.{fraction}"


def _failing_as(context: str, compute: Callable[[], _V]) -> _V:
    """Run ``compute``; a failure reads as ksqlDB's function words it: ``context``, a colon and
    the cause."""
    try:
        return compute()
    except EvaluationError as exc:
        raise EvaluationError(f"{context}: {exc}") from exc


@scalar("FORMAT_DATE", params=[T.DATE, T.STRING], returns=T.STRING, until=1)
def format_date(value: dt.date, pattern: str) -> str:
    """Format a DATE with a Java pattern such as ``yyyy-MM-dd``."""
    return _failing_as(
        f"Failed to format date {value.isoformat()} with formatter '{pattern}'",
        lambda: java_pattern(pattern).format(value),
    )


@scalar("FORMAT_DATE", params=[T.DATE, T.STRING], returns=T.STRING, since=2)
def format_date_v2(value: dt.date, pattern: str) -> str:
    """Format a DATE with a Java pattern such as ``yyyy-MM-dd``; week fields too (version 2)."""
    return _failing_as(
        f"Failed to format date {value.isoformat()} with formatter '{pattern}'",
        lambda: java_pattern(pattern, 2).format(value),
    )


@scalar("PARSE_DATE", params=[T.STRING, T.STRING], returns=T.DATE, until=1)
def parse_date(text: str, pattern: str) -> dt.date:
    """Parse a DATE with a Java pattern; a missing day of month is 1."""
    return _failing_as(
        f"Failed to parse date '{text}' with formatter '{pattern}'",
        lambda: java_pattern(pattern).parse(text).date(default_day=1),
    )


@scalar("PARSE_DATE", params=[T.STRING, T.STRING], returns=T.DATE, since=2)
def parse_date_midnight(text: str, pattern: str) -> dt.date:
    """Parse a DATE with a Java pattern; a time other than midnight fails.

    A missing day of month is 1."""

    def parse() -> dt.date:
        fields = java_pattern(pattern).parse(text)
        if fields.time() != dt.time(0):
            raise EvaluationError("Date format contains time field.")
        return fields.date(default_day=1)

    return _failing_as(f"Failed to parse date '{text}' with formatter '{pattern}'", parse)


@scalar("FORMAT_TIME", params=[T.TIME, T.STRING], returns=T.STRING, until=1)
def format_time(value: dt.time, pattern: str) -> str:
    """Format a TIME with a Java pattern such as ``HH:mm:ss``."""
    return _failing_as(
        f"Failed to format time {_java_time_text(value)} with formatter '{pattern}'",
        lambda: java_pattern(pattern).format(value),
    )


@scalar("FORMAT_TIME", params=[T.TIME, T.STRING], returns=T.STRING, since=2)
def format_time_v2(value: dt.time, pattern: str) -> str:
    """Format a TIME with a Java pattern such as ``HH:mm:ss``; week fields too (version 2)."""
    return _failing_as(
        f"Failed to format time {_java_time_text(value)} with formatter '{pattern}'",
        lambda: java_pattern(pattern, 2).format(value),
    )


@scalar("PARSE_TIME", params=[T.STRING, T.STRING], returns=T.TIME, until=1)
def parse_time(text: str, pattern: str) -> dt.time:
    """Parse a TIME with a Java pattern."""
    return _parse_time(text, pattern, dates_fail=False)


@scalar("PARSE_TIME", params=[T.STRING, T.STRING], returns=T.TIME, since=2)
def parse_time_only(text: str, pattern: str) -> dt.time:
    """Parse a TIME with a Java pattern; a pattern with date fields fails."""
    return _parse_time(text, pattern, dates_fail=True)


def _parse_time(text: str, pattern: str, *, dates_fail: bool) -> dt.time:
    def parse() -> dt.time:
        fields = java_pattern(pattern).parse(text)
        dated = (fields.year, fields.month, fields.day, fields.day_of_year, fields.weekday)
        if dates_fail and any(f is not None for f in dated):
            raise EvaluationError("Time format contains date field.")
        if fields.hour is None and fields.hour_of_ampm is None:
            raise EvaluationError(f"Text '{text}' has no hour for the pattern '{pattern}'.")
        return fields.time()

    return _failing_as(f"Failed to parse time '{text}' with formatter '{pattern}'", parse)


@scalar("FORMAT_TIMESTAMP", params=[T.TIMESTAMP, T.STRING], returns=T.STRING, until=1)
def format_timestamp(value: dt.datetime, pattern: str) -> str:
    """Format a TIMESTAMP in UTC with a Java pattern."""
    return _failing_as(
        f"Failed to format timestamp {_java_timestamp_text(value)} with formatter '{pattern}'",
        lambda: format_timestamp_in_zone(value, pattern),
    )


@scalar("FORMAT_TIMESTAMP", params=[T.TIMESTAMP, T.STRING], returns=T.STRING, since=2)
def format_timestamp_v2(value: dt.datetime, pattern: str) -> str:
    """Format a TIMESTAMP in UTC with a Java pattern; week fields too (version 2)."""
    return _failing_as(
        f"Failed to format timestamp {_java_timestamp_text(value)} with formatter '{pattern}'",
        lambda: format_timestamp_in_zone(value, pattern, semantics=2),
    )


@scalar("FORMAT_TIMESTAMP", params=[T.TIMESTAMP, T.STRING, T.STRING], returns=T.STRING, until=1)
def format_timestamp_zone(value: dt.datetime, pattern: str, zone: str) -> str:
    """Format a TIMESTAMP as seen in a time zone."""
    return _failing_as(
        f"Failed to format timestamp {_java_timestamp_text(value)} at timeZone '{zone}' "
        f"with formatter '{pattern}'",
        lambda: format_timestamp_in_zone(value, pattern, zone),
    )


@scalar("FORMAT_TIMESTAMP", params=[T.TIMESTAMP, T.STRING, T.STRING], returns=T.STRING, since=2)
def format_timestamp_zone_v2(value: dt.datetime, pattern: str, zone: str) -> str:
    """Format a TIMESTAMP as seen in a time zone; week fields too (version 2)."""
    return _failing_as(
        f"Failed to format timestamp {_java_timestamp_text(value)} at timeZone '{zone}' "
        f"with formatter '{pattern}'",
        lambda: format_timestamp_in_zone(value, pattern, zone, semantics=2),
    )


@scalar("PARSE_TIMESTAMP", params=[T.STRING, T.STRING], returns=T.TIMESTAMP)
def parse_timestamp(text: str, pattern: str) -> dt.datetime:
    """Parse a TIMESTAMP, read in UTC unless the text has a zone."""
    return _failing_as(
        f"Failed to parse timestamp '{text}' with formatter '{pattern}'",
        lambda: parse_timestamp_in_zone(text, pattern),
    )


@scalar("PARSE_TIMESTAMP", params=[T.STRING, T.STRING, T.STRING], returns=T.TIMESTAMP)
def parse_timestamp_zone(text: str, pattern: str, zone: str) -> dt.datetime:
    """Parse a TIMESTAMP, read in ``zone`` unless the text has a zone."""
    return _failing_as(
        f"Failed to parse timestamp '{text}' at timezone '{zone}' with formatter '{pattern}'",
        lambda: parse_timestamp_in_zone(text, pattern, zone),
    )


@scalar("DATETOSTRING", params=[T.INTEGER, T.STRING], returns=T.STRING, until=1)
def datetostring(days: int, pattern: str) -> str:
    """Format days since the epoch with a Java pattern (legacy form of FORMAT_DATE)."""
    return _failing_as(
        f"Failed to format date {days} with formatter '{pattern}'",
        lambda: java_pattern(pattern).format(from_days(days)),
    )


@scalar("DATETOSTRING", params=[T.INTEGER, T.STRING], returns=T.STRING, since=2)
def datetostring_v2(days: int, pattern: str) -> str:
    """Format days since the epoch with a Java pattern (legacy form of FORMAT_DATE); week fields too (version 2)."""
    return _failing_as(
        f"Failed to format date {days} with formatter '{pattern}'",
        lambda: java_pattern(pattern, 2).format(from_days(days)),
    )


@scalar("STRINGTODATE", params=[T.STRING, T.STRING], returns=T.INTEGER)
def stringtodate(text: str, pattern: str) -> int:
    """Parse a date to days since the epoch (legacy form of PARSE_DATE)."""
    return _failing_as(
        f"Failed to parse date '{text}' with formatter '{pattern}'",
        lambda: date_to_days(java_pattern(pattern).parse(text).date()),
    )


@scalar("TIMESTAMPTOSTRING", params=[T.BIGINT, T.STRING], returns=T.STRING, until=1)
def timestamptostring(millis: int, pattern: str) -> str:
    """Format epoch milliseconds in UTC (legacy form of FORMAT_TIMESTAMP)."""
    return _failing_as(
        f"Failed to format timestamp {millis} with formatter '{pattern}'",
        lambda: format_timestamp_in_zone(from_unixtime(millis), pattern),
    )


@scalar("TIMESTAMPTOSTRING", params=[T.BIGINT, T.STRING], returns=T.STRING, since=2)
def timestamptostring_v2(millis: int, pattern: str) -> str:
    """Format epoch milliseconds in UTC (legacy form of FORMAT_TIMESTAMP); week fields too (version 2)."""
    return _failing_as(
        f"Failed to format timestamp {millis} with formatter '{pattern}'",
        lambda: format_timestamp_in_zone(from_unixtime(millis), pattern, semantics=2),
    )


@scalar("TIMESTAMPTOSTRING", params=[T.BIGINT, T.STRING, T.STRING], returns=T.STRING, until=1)
def timestamptostring_zone(millis: int, pattern: str, zone: str) -> str:
    """Format epoch milliseconds as seen in a time zone."""
    return _failing_as(
        f"Failed to format timestamp {millis} at timeZone '{zone}' with formatter '{pattern}'",
        lambda: format_timestamp_in_zone(from_unixtime(millis), pattern, zone),
    )


@scalar("TIMESTAMPTOSTRING", params=[T.BIGINT, T.STRING, T.STRING], returns=T.STRING, since=2)
def timestamptostring_zone_v2(millis: int, pattern: str, zone: str) -> str:
    """Format epoch milliseconds as seen in a time zone; week fields too (version 2)."""
    return _failing_as(
        f"Failed to format timestamp {millis} at timeZone '{zone}' with formatter '{pattern}'",
        lambda: format_timestamp_in_zone(from_unixtime(millis), pattern, zone, semantics=2),
    )


@scalar("STRINGTOTIMESTAMP", params=[T.STRING, T.STRING], returns=T.BIGINT)
def stringtotimestamp(text: str, pattern: str) -> int:
    """Parse a timestamp to epoch milliseconds, read in UTC unless the text has a zone."""
    return _failing_as(
        f"Failed to parse timestamp '{text}' with formatter '{pattern}'",
        lambda: timestamp_to_millis(parse_timestamp_in_zone(text, pattern)),
    )


@scalar("STRINGTOTIMESTAMP", params=[T.STRING, T.STRING, T.STRING], returns=T.BIGINT)
def stringtotimestamp_zone(text: str, pattern: str, zone: str) -> int:
    """Parse a timestamp to epoch milliseconds, read in ``zone`` unless the text has a zone."""
    return _failing_as(
        f"Failed to parse timestamp '{text}' at timezone '{zone}' with formatter '{pattern}'",
        lambda: timestamp_to_millis(parse_timestamp_in_zone(text, pattern, zone)),
    )


@scalar("CONVERT_TZ", params=[T.TIMESTAMP, T.STRING, T.STRING], returns=T.TIMESTAMP)
def convert_tz(value: dt.datetime, from_zone: str, to_zone: str) -> dt.datetime:
    """Shift a TIMESTAMP by the difference of two zones' offsets at that instant."""
    instant = value.replace(tzinfo=dt.UTC)
    try:
        target_zone, source_zone = java_zone(to_zone), java_zone(from_zone)
    except EvaluationError as exc:
        raise EvaluationError(f"Invalid time zone: {exc}") from exc
    source = instant.astimezone(source_zone).utcoffset() or dt.timedelta()
    target = instant.astimezone(target_zone).utcoffset() or dt.timedelta()
    return value + (target - source)


# --------------------------------------------------------------------------- arithmetic


def _date_add(unit: str, amount: int, value: dt.date) -> dt.date:
    millis = date_to_days(value) * MILLIS_PER_DAY + unit_to_millis(unit, amount)
    return _checked(lambda: date_from_days(_java_long_div(millis, MILLIS_PER_DAY)), f"{millis} ms")


def _time_add(unit: str, amount: int, value: dt.time) -> dt.time:
    nanos = (time_to_millis(value) * 1_000_000 + amount * unit_nanos(unit)) % NANOS_PER_DAY
    return time_from_millis(nanos // 1_000_000)


def _timestamp_add(unit: str, amount: int, value: dt.datetime) -> dt.datetime:
    millis = timestamp_to_millis(value) + unit_to_millis(unit, amount)
    return _checked(lambda: timestamp_from_millis(millis), f"{millis} milliseconds")


for _amount in (T.INTEGER, T.BIGINT):

    @scalar("DATEADD", params=[INTERVAL_UNIT, _amount, T.DATE], returns=T.DATE, until=1)
    def dateadd(unit: str, amount: int, value: dt.date) -> dt.date:
        """Add an interval of a time unit to a DATE (whole days are kept)."""
        return _date_add(unit, amount, value)

    @scalar("DATESUB", params=[INTERVAL_UNIT, _amount, T.DATE], returns=T.DATE, until=1)
    def datesub(unit: str, amount: int, value: dt.date) -> dt.date:
        """Subtract an interval of a time unit from a DATE."""
        return _date_add(unit, -amount, value)

    @scalar("TIMEADD", params=[INTERVAL_UNIT, _amount, T.TIME], returns=T.TIME, until=1)
    def timeadd(unit: str, amount: int, value: dt.time) -> dt.time:
        """Add an interval to a TIME, wrapping around midnight."""
        return _time_add(unit, amount, value)

    @scalar("TIMESUB", params=[INTERVAL_UNIT, _amount, T.TIME], returns=T.TIME, until=1)
    def timesub(unit: str, amount: int, value: dt.time) -> dt.time:
        """Subtract an interval from a TIME, wrapping around midnight."""
        return _time_add(unit, -amount, value)

    @scalar("TIMESTAMPADD", params=[INTERVAL_UNIT, _amount, T.TIMESTAMP], returns=T.TIMESTAMP, until=1)
    def timestampadd(unit: str, amount: int, value: dt.datetime) -> dt.datetime:
        """Add an interval to a TIMESTAMP."""
        return _timestamp_add(unit, amount, value)

    @scalar("TIMESTAMPSUB", params=[INTERVAL_UNIT, _amount, T.TIMESTAMP], returns=T.TIMESTAMP, until=1)
    def timestampsub(unit: str, amount: int, value: dt.datetime) -> dt.datetime:
        """Subtract an interval from a TIMESTAMP."""
        return _timestamp_add(unit, -amount, value)


_LONG_MAX = 2**63 - 1


def _saturated_nanos(unit: str, amount: int) -> int:
    """Java's ``TimeUnit.toNanos(amount)``: past a long's range it saturates at Long.MAX_VALUE
    or Long.MIN_VALUE instead of overflowing."""
    scale = unit_nanos(unit)
    limit = _LONG_MAX // scale
    if amount > limit:
        return _LONG_MAX
    if amount < -limit:
        return -_LONG_MAX - 1
    return amount * scale


def _time_plus_nanos(value: dt.time, nanos: int) -> dt.time:
    """``LocalTime.plusNanos``: the nano of day moved by ``nanos``, around midnight."""
    return time_from_millis(((time_to_millis(value) * 1_000_000 + nanos) % NANOS_PER_DAY) // 1_000_000)


# Version 2: the interval is an INT, as in ksqlDB's bodies (a BIGINT interval is refused at
# planning); TIMEADD/TIMESUB move by TimeUnit.toNanos, which saturates for intervals of more
# than about 106,751 days (2,562,047 hours, 153,722,867 minutes).


@scalar("DATEADD", params=[INTERVAL_UNIT, T.INTEGER, T.DATE], returns=T.DATE, since=2)
def dateadd_int(unit: str, amount: int, value: dt.date) -> dt.date:
    """Add an INT interval of a time unit to a DATE (whole days are kept)."""
    return _date_add(unit, amount, value)


@scalar("DATESUB", params=[INTERVAL_UNIT, T.INTEGER, T.DATE], returns=T.DATE, since=2)
def datesub_int(unit: str, amount: int, value: dt.date) -> dt.date:
    """Subtract an INT interval of a time unit from a DATE."""
    return _date_add(unit, -amount, value)


@scalar("TIMEADD", params=[INTERVAL_UNIT, T.INTEGER, T.TIME], returns=T.TIME, since=2)
def timeadd_int(unit: str, amount: int, value: dt.time) -> dt.time:
    """Add an INT interval to a TIME, around midnight, as LocalTime.plus(unit.toNanos(n))."""
    return _time_plus_nanos(value, _saturated_nanos(unit, amount))


@scalar("TIMESUB", params=[INTERVAL_UNIT, T.INTEGER, T.TIME], returns=T.TIME, since=2)
def timesub_int(unit: str, amount: int, value: dt.time) -> dt.time:
    """Subtract an INT interval from a TIME, around midnight, as LocalTime.minus(unit.toNanos(n))."""
    return _time_plus_nanos(value, -_saturated_nanos(unit, amount))


@scalar("TIMESTAMPADD", params=[INTERVAL_UNIT, T.INTEGER, T.TIMESTAMP], returns=T.TIMESTAMP, since=2)
def timestampadd_int(unit: str, amount: int, value: dt.datetime) -> dt.datetime:
    """Add an INT interval to a TIMESTAMP."""
    return _timestamp_add(unit, amount, value)


@scalar("TIMESTAMPSUB", params=[INTERVAL_UNIT, T.INTEGER, T.TIMESTAMP], returns=T.TIMESTAMP, since=2)
def timestampsub_int(unit: str, amount: int, value: dt.datetime) -> dt.datetime:
    """Subtract an INT interval from a TIMESTAMP."""
    return _timestamp_add(unit, -amount, value)
