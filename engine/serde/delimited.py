"""The DELIMITED format: one CSV record of primitive fields, in column order.

Parsing and quoting follow Apache Commons CSV as ksqlDB configures it (``CSVFormat.DEFAULT``
with a custom delimiter, minimal quoting): a field is quoted when it contains the delimiter,
a quote or a line break, starts with a character up to ``#``, ends with whitespace, is empty
and first, or is first and does not start with a letter or digit. Empty fields read as NULL.
"""

from __future__ import annotations

import base64
import binascii
import decimal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.data.values import (
    date_from_days,
    date_to_days,
    format_double,
    time_from_millis,
    time_to_millis,
    timestamp_from_millis,
    timestamp_to_millis,
)
from engine.errors import RecordSerdeError
from engine.plan import types as T
from engine.plan.schema import Column
from engine.serde.base import RecordSerde
from engine.serde.coerce import INTEGER_TEXT, fit_decimal, parse_java_double, scalar_text
from engine.serde.formats import DELIMITER, FormatInfo, parse_delimiter

_QUOTE = '"'


def parse_record(text: str, delimiter: str) -> list[str]:
    """The fields of the first CSV record in ``text`` (Commons CSV rules, no escape char)."""
    n = len(text)
    i = 0
    while i < n and text[i] in "\r\n":
        i += 1  # Commons CSV skips empty lines
    fields: list[str] = []
    while True:
        if i < n and text[i] == _QUOTE:
            i += 1
            buf: list[str] = []
            while True:
                if i >= n:
                    raise RecordSerdeError(
                        f"Cannot parse the DELIMITED record {text!r}: a quoted field is not "
                        "closed before the end of the record."
                    )
                ch = text[i]
                if ch == _QUOTE:
                    if i + 1 < n and text[i + 1] == _QUOTE:
                        buf.append(_QUOTE)
                        i += 2
                        continue
                    i += 1
                    while i < n and text[i] != delimiter and text[i] not in "\r\n":
                        if not text[i].isspace():
                            raise RecordSerdeError(
                                f"Cannot parse the DELIMITED record {text!r}: invalid character "
                                f"{text[i]!r} between a quoted field and the delimiter."
                            )
                        i += 1
                    break
                buf.append(ch)
                i += 1
            fields.append("".join(buf))
        else:
            j = i
            while j < n and text[j] != delimiter and text[j] not in "\r\n":
                j += 1
            fields.append(text[i:j])
            i = j
        if i >= n or text[i] in "\r\n":
            return fields
        i += 1  # the delimiter


def _needs_quotes(value: str, first: bool, delimiter: str) -> bool:
    if not value:
        return first
    c = value[0]
    if first and not (c.isascii() and c.isalnum()):
        return True
    if c <= "#":
        return True
    for ch in value:
        if ch == delimiter or ch == _QUOTE or ch == "\n" or ch == "\r":
            return True
    return value[-1] <= " "


def format_record(fields: Sequence[str | None], delimiter: str) -> str:
    """One CSV record; None prints as an empty unquoted field."""
    out: list[str] = []
    for index, value in enumerate(fields):
        if value is None:
            out.append("")
        elif _needs_quotes(value, index == 0, delimiter):
            out.append(_QUOTE + value.replace(_QUOTE, _QUOTE * 2) + _QUOTE)
        else:
            out.append(value)
    return delimiter.join(out)


# --------------------------------------------------------------------------- fields


def _parse_int(low: int, high: int) -> Callable[[str], Any]:
    def parse(s: str) -> Any:
        if not INTEGER_TEXT.fullmatch(s):
            raise ValueError("It is not an integer.")
        value = int(s)
        if not low <= value <= high:
            raise ValueError("It is out of range.")
        return value

    return parse


def _parse_bytes(s: str) -> bytes:
    try:
        return base64.b64decode(s, validate=True)
    except binascii.Error as exc:
        raise ValueError(f"Value is not a valid Base64 encoded string: {s}") from exc


def _field_parser(t: T.SqlType) -> Callable[[str], Any]:
    if isinstance(t, T.Decimal):

        def parse_decimal(s: str) -> Any:
            try:
                return fit_decimal(decimal.Decimal(s), t)
            except decimal.InvalidOperation as exc:
                raise ValueError("not a decimal") from exc

        return parse_decimal
    int_parse = _parse_int(T.INT_MIN, T.INT_MAX)
    long_parse = _parse_int(T.BIGINT_MIN, T.BIGINT_MAX)
    parsers: dict[T.BaseType, Callable[[str], Any]] = {
        # Java's Boolean.parseBoolean: anything but "true" (any case) is false.
        T.BaseType.BOOLEAN: lambda s: s.lower() == "true",
        T.BaseType.INTEGER: int_parse,
        T.BaseType.BIGINT: long_parse,
        T.BaseType.DOUBLE: parse_java_double,
        T.BaseType.STRING: lambda s: s,
        T.BaseType.BYTES: _parse_bytes,
        T.BaseType.DATE: lambda s: date_from_days(int_parse(s)),
        T.BaseType.TIME: lambda s: time_from_millis(int_parse(s)),
        T.BaseType.TIMESTAMP: lambda s: timestamp_from_millis(long_parse(s)),
    }
    return parsers[t.base]


def _field_formatter(t: T.SqlType) -> Callable[[Any], str]:
    if isinstance(t, T.Decimal):

        def format_decimal(v: Any) -> str:
            d = v if isinstance(v, decimal.Decimal) else decimal.Decimal(str(v))
            return format(fit_decimal(d, t), "f")

        return format_decimal
    formatters: dict[T.BaseType, Callable[[Any], str]] = {
        T.BaseType.BOOLEAN: lambda v: "true" if v else "false",
        T.BaseType.INTEGER: str,
        T.BaseType.BIGINT: str,
        T.BaseType.DOUBLE: lambda v: format_double(float(v)),
        T.BaseType.STRING: str,
        T.BaseType.BYTES: lambda v: base64.b64encode(bytes(v)).decode("ascii"),
        T.BaseType.DATE: lambda v: str(date_to_days(v)),
        T.BaseType.TIME: lambda v: str(time_to_millis(v)),
        T.BaseType.TIMESTAMP: lambda v: str(timestamp_to_millis(v)),
    }
    return formatters[t.base]


class DelimitedSerde(RecordSerde):
    """DELIMITED keys and values: QTT form is the record text, e.g. ``"1,abc,2.5"``."""

    def __init__(
        self, fmt: FormatInfo, columns: Sequence[Column], wrapped: bool, is_key: bool
    ) -> None:
        super().__init__(fmt, columns, wrapped, is_key)
        text = fmt.get(DELIMITER) or ","
        # Properties hold the SQL text ('TAB', '|'); accept an already-parsed character too.
        self.delimiter = text if len(text) == 1 else parse_delimiter(text)
        self._parsers = tuple((c.name, c.type, _field_parser(c.type)) for c in self.columns)
        self._formatters = tuple((c.name, _field_formatter(c.type)) for c in self.columns)

    def deserialize(self, data: Any) -> dict[str, Any] | None:
        if data is None:
            return None
        if isinstance(data, bytes):
            data = data.decode("utf-8")
        elif not isinstance(data, str):
            data = scalar_text(data)
        fields = parse_record(data, self.delimiter)
        if len(fields) != len(self._parsers):
            raise RecordSerdeError(
                f"Column count mismatch on deserialization of the {self.what} {data!r}: "
                f"expected {len(self._parsers)} columns ({', '.join(self.names)}), "
                f"got {len(fields)}."
            )
        row: dict[str, Any] = {}
        for (name, sql_type, parse), text in zip(self._parsers, fields, strict=True):
            if text == "":
                row[name] = None
                continue
            try:
                row[name] = parse(text)
            except (ValueError, OverflowError) as exc:
                raise RecordSerdeError(
                    f"Cannot deserialize field {name} of the {self.what} {data!r}: "
                    f"{text!r} is not a valid {sql_type}. {exc}"
                ) from None
        return row

    def serialize(self, row: Mapping[str, Any] | None) -> Any:
        if row is None:
            return None
        values = [row.get(name) for name in self.names]
        if self.is_key and all(v is None for v in values):
            return None
        try:
            texts = [
                None if v is None else fmt(v)
                for v, (_, fmt) in zip(values, self._formatters, strict=True)
            ]
        except (ValueError, TypeError, AttributeError) as exc:
            raise RecordSerdeError(
                f"Cannot serialize the {self.what} row {dict(row)!r}: {exc}"
            ) from None
        return format_record(texts, self.delimiter)

    def to_bytes(self, data: Any) -> bytes | None:
        if data is None:
            return None
        if not isinstance(data, str):
            data = scalar_text(data)
        return data.encode("utf-8")

    def from_bytes(self, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordSerdeError(f"The {self.what} bytes are not valid UTF-8: {exc}.") from None
