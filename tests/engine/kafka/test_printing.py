"""PRINT's record lines and format detection (no broker needed)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from engine.kafka.consume import ConsumedRecord
from engine.kafka.printing import (
    NO_DATA,
    RecordPrinter,
    fitting_formats,
    format_rowtime,
    java_double,
    print_lines,
)
from engine.serde.windowed import encode_session_window_key, encode_time_window_key


def _record(key: bytes | None, value: bytes | None, *, timestamp: int = 1_614_861_296_789, partition: int = 0) -> ConsumedRecord:
    return ConsumedRecord(topic="t", partition=partition, offset=0, timestamp=timestamp, key=key, value=value)


def test_a_record_line_shows_rowtime_key_value_and_partition() -> None:
    printer = RecordPrinter()
    line = printer.format(_record(b"user_1", b'{"ID":1,"NAME":"a"}', partition=3))
    assert line == 'rowtime: 2021/03/04 12:34:56.789 Z, key: user_1, value: {"ID":1,"NAME":"a"}, partition: 3'
    assert printer.format_lines() == ["Key format: KAFKA_STRING", "Value format: JSON or KAFKA_STRING"]


def test_rowtime_is_utc_with_milliseconds_or_na() -> None:
    assert format_rowtime(1) == "1970/01/01 00:00:00.001 Z"
    assert format_rowtime(-1) == "N/A"


def test_numbers_are_recognised_only_when_the_bytes_are_not_text() -> None:
    assert fitting_formats(struct.pack(">i", 7), key=True) == ("KAFKA_INT",)
    assert fitting_formats(struct.pack(">q", 7), key=False) == ("KAFKA_BIGINT", "KAFKA_DOUBLE")
    assert fitting_formats(b"abcd", key=False) == ("KAFKA_STRING",)
    assert fitting_formats(b"12345678", key=False) == ("JSON", "KAFKA_STRING")


def test_a_key_shows_in_the_first_format_still_possible() -> None:
    printer = RecordPrinter()
    assert "key: 42," in printer.format(_record(struct.pack(">q", 42), b"x"))
    assert printer.key_formats == ("KAFKA_BIGINT", "KAFKA_DOUBLE")
    texts = RecordPrinter()
    texts.format(_record(b"7", b"x"))  # JSON or KAFKA_STRING
    assert texts.key_formats == ("JSON", "KAFKA_STRING")
    assert "key: seven," in texts.format(_record(b"seven", b"x"))
    assert texts.key_formats == ("KAFKA_STRING",)


def test_values_narrow_to_the_formats_every_value_fits() -> None:
    printer = RecordPrinter()
    printer.format(_record(None, b"123"))
    assert printer.value_formats == ("JSON", "KAFKA_STRING")
    line = printer.format(_record(None, b"a,b,c"))  # DELIMITED text is no JSON
    assert printer.value_formats == ("KAFKA_STRING",)
    assert "value: a,b,c," in line


def test_nulls_show_as_null_and_leave_the_format_unknown() -> None:
    printer = RecordPrinter()
    line = printer.format(_record(None, None))
    assert line == "rowtime: 2021/03/04 12:34:56.789 Z, key: <null>, value: <null>, partition: 0"
    assert printer.format_lines() == [f"Key format: {NO_DATA}", f"Value format: {NO_DATA}"]


def test_time_windowed_keys_show_the_window_start() -> None:
    printer = RecordPrinter()
    key = encode_time_window_key(b"user_1", 1_581_323_504_000)
    assert "key: [user_1@1581323504000/-]," in printer.format(_record(key, b"1"))
    assert printer.key_formats == ("HOPPING(KAFKA_STRING)", "TUMBLING(KAFKA_STRING)")


def test_session_windowed_keys_show_start_and_end() -> None:
    printer = RecordPrinter()
    key = encode_session_window_key(struct.pack(">i", 9), 1_000, 5_000)
    assert "key: [9@1000/5000]," in printer.format(_record(key, b"1"))
    assert printer.key_formats == ("SESSION(KAFKA_INT)",)


def test_bytes_no_format_fits_are_unrecognised() -> None:
    printer = RecordPrinter()
    line = printer.format(_record(None, b"\x00\xff\x01"))
    assert printer.value_formats == ("UNRECOGNISED_BYTES",)
    assert "value: \x00\ufffd\x01," in line


def test_a_value_that_fits_none_of_the_remaining_formats_makes_them_unrecognised() -> None:
    printer = RecordPrinter()
    printer.format(_record(None, b'{"a":1}'))
    printer.format(_record(None, struct.pack(">i", 1)))
    assert printer.format_lines()[1] == "Value format: UNRECOGNISED_BYTES"


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.5, "1.5"), (100.0, "100.0"), (1e10, "1.0E10"), (12345678.0, "1.2345678E7"),
     (1.5e-5, "1.5E-5"), (-0.0, "-0.0"), (float("nan"), "NaN"), (float("-inf"), "-Infinity")],
)
def test_doubles_print_as_java_does(value: float, text: str) -> None:
    assert java_double(value) == text


def test_print_lines_start_with_the_formats_then_show_every_interval_th_record_up_to_the_limit() -> None:
    records = [_record(f"k{i}".encode(), f'{{"N":{i}}}'.encode(), timestamp=1 + i) for i in range(10)]
    lines = list(print_lines(iter(records), interval=3, limit=2))
    assert lines == [
        "Key format: KAFKA_STRING",
        "Value format: JSON or KAFKA_STRING",
        'rowtime: 1970/01/01 00:00:00.001 Z, key: k0, value: {"N":0}, partition: 0',
        'rowtime: 1970/01/01 00:00:00.004 Z, key: k3, value: {"N":3}, partition: 0',
    ]


def test_print_lines_stop_reading_at_the_limit() -> None:
    read: list[int] = []

    def endless() -> Iterator[ConsumedRecord]:
        n = 0
        while True:
            read.append(n)
            yield _record(b"k", b"v", timestamp=1 + n)
            n += 1

    assert len(list(print_lines(endless(), limit=2))) == 4
    assert read == [0, 1]
    assert list(print_lines(endless(), limit=0)) == []
