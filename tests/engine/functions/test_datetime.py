from __future__ import annotations

import datetime as dt
import time
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import EvaluationError, TypeCheckError
from engine.functions import REGISTRY
from engine.functions.lib_datetime import (
    PatternField,
    PatternLiteral,
    PatternOptional,
    java_pattern,
    java_zone,
    tokenize_java_pattern,
    unit_to_millis,
)
from engine.plan import types as T
from engine.plan.types import SqlType

S, INT, BI = T.STRING, T.INTEGER, T.BIGINT


def call(name: str, types: Sequence[SqlType], *args: Any) -> Any:
    return REGISTRY.resolve(name, types).invoke(list(args))


# --------------------------------------------------------------------------- pattern translator


def test_tokenizer_splits_fields_literals_and_quotes() -> None:
    assert tokenize_java_pattern("yyyy-MM-dd'T'HH:mm:ss.SSSX") == (
        PatternField("y", 4),
        PatternLiteral("-"),
        PatternField("M", 2),
        PatternLiteral("-"),
        PatternField("d", 2),
        PatternLiteral("T"),
        PatternField("H", 2),
        PatternLiteral(":"),
        PatternField("m", 2),
        PatternLiteral(":"),
        PatternField("s", 2),
        PatternLiteral("."),
        PatternField("S", 3),
        PatternField("X", 1),
    )


def test_tokenizer_reads_escaped_quotes_and_optional_sections() -> None:
    assert tokenize_java_pattern("HH''mm['at' z]") == (
        PatternField("H", 2),
        PatternLiteral("'"),
        PatternField("m", 2),
        PatternOptional((PatternLiteral("at"), PatternLiteral(" "), PatternField("z", 1))),
    )
    assert tokenize_java_pattern("'it''s'") == (PatternLiteral("it's"),)


def test_tokenizer_rejects_unknown_letters_and_open_quotes() -> None:
    with pytest.raises(EvaluationError, match="unsupported pattern letter 'b'"):
        tokenize_java_pattern("yyyy-bb")
    with pytest.raises(EvaluationError, match="unterminated quote"):
        tokenize_java_pattern("HH 'oops")


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("yyyy-MM-dd HH:mm:ss.SSS", "2009-03-07 05:04:09.250"),
        ("yy/M/d H:m:s", "09/3/7 5:4:9"),
        ("EEE, dd MMM yyyy", "Sat, 07 Mar 2009"),
        ("EEEE MMMM", "Saturday March"),
        ("hh:mm a", "05:04 AM"),
        ("D 'day' Q", "66 day 1"),
        ("yyyyMMddHHmmssSSS", "20090307050409250"),
    ],
)
def test_pattern_formats_a_local_datetime(pattern: str, expected: str) -> None:
    value = dt.datetime(2009, 3, 7, 5, 4, 9, 250_000)
    assert java_pattern(pattern).format(value) == expected


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("X", "+0530"),
        ("XX", "+0530"),
        ("XXX", "+05:30"),
        ("Z", "+0530"),
        ("ZZZZ", "GMT+05:30"),
        ("O", "GMT+5:30"),
        ("xxx", "+05:30"),
        ("z", "+05:30"),
    ],
)
def test_pattern_formats_zone_offsets(pattern: str, expected: str) -> None:
    value = dt.datetime(2020, 1, 1, tzinfo=java_zone("+05:30"))
    assert java_pattern(pattern).format(value) == expected


def test_pattern_prints_z_for_utc_offset_and_names_for_regions() -> None:
    utc = dt.datetime(2020, 1, 1, tzinfo=java_zone("Z"))
    assert java_pattern("XXX").format(utc) == "Z"
    assert java_pattern("xx").format(utc) == "+0000"
    paris = dt.datetime(2020, 7, 1, tzinfo=java_zone("Europe/Paris"))
    assert java_pattern("z VV").format(paris) == "CEST Europe/Paris"


def test_pattern_refuses_fields_the_value_lacks() -> None:
    with pytest.raises(EvaluationError, match="letter 'H'"):
        java_pattern("yyyy HH").format(dt.date(2020, 1, 1))
    with pytest.raises(EvaluationError, match="letter 'y'"):
        java_pattern("yyyy").format(dt.time(1, 2))


def test_pattern_parses_case_insensitively_and_rejects_extra_text() -> None:
    fields = java_pattern("dd-MMM-yyyy").parse("05-fEb-2021")
    assert (fields.year, fields.month, fields.day) == (2021, 2, 5)
    with pytest.raises(EvaluationError, match="could not be parsed"):
        java_pattern("dd-MMM-yyyy").parse("05-Feb-2021 extra")


def test_pattern_parses_adjacent_numbers_and_two_digit_years() -> None:
    fields = java_pattern("yyMMddHHmm").parse("9912312359")
    assert fields.date() == dt.date(2099, 12, 31)
    assert fields.time() == dt.time(23, 59)


def test_parsed_day_beyond_month_end_is_clamped_like_java_smart_mode() -> None:
    assert java_pattern("yyyy-MM-dd").parse("2023-02-30").date() == dt.date(2023, 2, 28)
    with pytest.raises(EvaluationError, match="Invalid month 13"):
        java_pattern("yyyy-MM-dd").parse("2023-13-01").date()


@given(st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)))
def test_format_then_parse_returns_the_same_millisecond(value: dt.datetime) -> None:
    value = value.replace(microsecond=value.microsecond // 1000 * 1000, fold=0)
    pattern = java_pattern("yyyy-MM-dd'T'HH:mm:ss.SSS")
    fields = pattern.parse(pattern.format(value))
    assert dt.datetime.combine(fields.date(), fields.time()) == value


# --------------------------------------------------------------------------- zones


def test_java_zone_reads_offsets_prefixes_and_regions() -> None:
    jan = dt.datetime(2020, 1, 1)
    assert java_zone("+02").utcoffset(jan) == dt.timedelta(hours=2)
    assert java_zone("-0330").utcoffset(jan) == dt.timedelta(hours=-3, minutes=-30)
    assert java_zone("UTC+01:00").utcoffset(jan) == dt.timedelta(hours=1)
    assert java_zone("GMT").utcoffset(jan) == dt.timedelta(0)
    assert java_zone("Asia/Tokyo").utcoffset(jan) == dt.timedelta(hours=9)


def test_java_zone_rejects_unknown_ids() -> None:
    with pytest.raises(EvaluationError, match="Unknown time zone 'Mars/Olympus'"):
        java_zone("Mars/Olympus")
    with pytest.raises(EvaluationError, match="Unknown time zone"):
        java_zone("+25:00")


# --------------------------------------------------------------------------- functions


def test_unix_date_and_unix_timestamp() -> None:
    assert call("UNIX_DATE", [T.DATE], dt.date(1970, 2, 1)) == 31
    assert call("UNIX_DATE", [T.DATE], None) is None
    assert call("UNIX_TIMESTAMP", [T.TIMESTAMP], dt.datetime(1970, 1, 1, 0, 0, 1, 500_000)) == 1500
    assert call("UNIX_TIMESTAMP", [T.TIMESTAMP], dt.datetime(1969, 12, 31, 23, 59, 59)) == -1000
    now = int(time.time() * 1000)
    assert abs(call("UNIX_TIMESTAMP", []) - now) < 60_000
    assert call("UNIX_DATE", []) == now // 86_400_000


def test_from_unixtime_and_from_days() -> None:
    assert call("FROM_UNIXTIME", [BI], 86_400_123) == dt.datetime(1970, 1, 2, 0, 0, 0, 123_000)
    assert call("FROM_DAYS", [INT], -1) == dt.date(1969, 12, 31)
    assert call("FROM_DAYS", [INT], None) is None
    with pytest.raises(EvaluationError, match="outside the supported range"):
        call("FROM_DAYS", [INT], 10**9)


def test_format_and_parse_date() -> None:
    assert call("FORMAT_DATE", [T.DATE, S], dt.date(2024, 2, 29), "dd.MM.yyyy") == "29.02.2024"
    assert call("PARSE_DATE", [S, S], "29.02.2024", "dd.MM.yyyy") == dt.date(2024, 2, 29)
    assert call("PARSE_DATE", [S, S], "Mar 2024", "MMM yyyy") == dt.date(2024, 3, 1)
    assert call("PARSE_DATE", [S, S], None, "yyyy") is None
    with pytest.raises(EvaluationError):
        call("PARSE_DATE", [S, S], "2024", "yyyy")


def test_format_and_parse_time() -> None:
    assert call("FORMAT_TIME", [T.TIME, S], dt.time(13, 5, 7, 8000), "hh:mm:ss.SSS a") == (
        "01:05:07.008 PM"
    )
    assert call("PARSE_TIME", [S, S], "01:05 PM", "hh:mm a") == dt.time(13, 5)
    assert call("PARSE_TIME", [S, S], "23", "HH") == dt.time(23, 0)
    assert call("FORMAT_TIME", [T.TIME, S], None, "HH") is None
    with pytest.raises(EvaluationError, match="letter 'd'"):
        call("FORMAT_TIME", [T.TIME, S], dt.time(1, 2), "dd HH")


def test_format_timestamp_in_utc_and_in_a_zone() -> None:
    ts = dt.datetime(2021, 7, 4, 16, 30, 15, 42_000)
    assert call("FORMAT_TIMESTAMP", [T.TIMESTAMP, S], ts, "yyyy-MM-dd HH:mm:ss.SSS") == (
        "2021-07-04 16:30:15.042"
    )
    assert call("FORMAT_TIMESTAMP", [T.TIMESTAMP, S, S], ts, "HH:mm z", "America/Chicago") == (
        "11:30 CDT"
    )
    assert call("FORMAT_TIMESTAMP", [T.TIMESTAMP, S, S], ts, "HH:mm", None) is None


def test_parse_timestamp_uses_the_zone_argument_unless_the_text_has_one() -> None:
    pattern = "yyyy-MM-dd HH:mm"
    assert call("PARSE_TIMESTAMP", [S, S], "2021-07-04 16:30", pattern) == dt.datetime(
        2021, 7, 4, 16, 30
    )
    assert call("PARSE_TIMESTAMP", [S, S, S], "2021-07-04 16:30", pattern, "+03:00") == (
        dt.datetime(2021, 7, 4, 13, 30)
    )
    with_zone = "yyyy-MM-dd HH:mmXXX"
    assert call(
        "PARSE_TIMESTAMP", [S, S, S], "2021-07-04 16:30-02:00", with_zone, "+03:00"
    ) == dt.datetime(2021, 7, 4, 18, 30)


def test_parse_timestamp_defaults_missing_fields_to_the_epoch() -> None:
    assert call("PARSE_TIMESTAMP", [S, S], "07:45", "HH:mm") == dt.datetime(1970, 1, 1, 7, 45)


def test_parse_timestamp_reads_zone_names() -> None:
    assert call("PARSE_TIMESTAMP", [S, S], "2021-01-15 08:00 EST", "yyyy-MM-dd HH:mm z") == (
        dt.datetime(2021, 1, 15, 13, 0)
    )


def test_parse_timestamp_of_bad_text_is_an_error() -> None:
    with pytest.raises(EvaluationError, match="could not be parsed"):
        call("PARSE_TIMESTAMP", [S, S], "yesterday", "yyyy-MM-dd")


def test_legacy_string_and_number_forms() -> None:
    assert call("DATETOSTRING", [INT, S], 365, "yyyy/MM/dd") == "1971/01/01"
    assert call("STRINGTODATE", [S, S], "1971/01/01", "yyyy/MM/dd") == 365
    assert call("TIMESTAMPTOSTRING", [BI, S], 1_000, "HH:mm:ss") == "00:00:01"
    assert call("TIMESTAMPTOSTRING", [BI, S, S], 0, "yyyy-MM-dd HH", "Asia/Kolkata") == (
        "1970-01-01 05"
    )
    assert call("STRINGTOTIMESTAMP", [S, S], "1970-01-01 00:00:02", "yyyy-MM-dd HH:mm:ss") == 2000
    assert call("STRINGTOTIMESTAMP", [S, S, S], "1970-01-01 01", "yyyy-MM-dd HH", "+01:00") == 0
    assert call("STRINGTODATE", [S, S], None, "yyyy") is None


def test_convert_tz_shifts_by_the_offset_difference() -> None:
    ts = dt.datetime(2022, 1, 10, 12, 0)
    assert call("CONVERT_TZ", [T.TIMESTAMP, S, S], ts, "UTC", "Asia/Kolkata") == dt.datetime(
        2022, 1, 10, 17, 30
    )
    assert call("CONVERT_TZ", [T.TIMESTAMP, S, S], ts, "+0100", "-0100") == dt.datetime(
        2022, 1, 10, 10, 0
    )
    assert call("CONVERT_TZ", [T.TIMESTAMP, S, S], None, "UTC", "UTC") is None
    with pytest.raises(EvaluationError, match="Unknown time zone"):
        call("CONVERT_TZ", [T.TIMESTAMP, S, S], ts, "UTC", "Nowhere")


# --------------------------------------------------------------------------- arithmetic


def test_unit_to_millis_truncates_like_java_time_unit() -> None:
    assert unit_to_millis("SECONDS", 3) == 3000
    assert unit_to_millis("hour", 1) == 3_600_000
    assert unit_to_millis("MICROSECONDS", 2500) == 2
    assert unit_to_millis("NANOSECONDS", -1_500_000) == -1
    with pytest.raises(EvaluationError, match="Unknown time unit 'FORTNIGHTS'"):
        unit_to_millis("FORTNIGHTS", 1)


def test_dateadd_and_datesub() -> None:
    day = dt.date(2000, 2, 28)
    assert call("DATEADD", [S, INT, T.DATE], "DAYS", 2, day) == dt.date(2000, 3, 1)
    assert call("DATESUB", [S, INT, T.DATE], "DAY", 59, day) == dt.date(1999, 12, 31)
    assert call("DATEADD", [S, INT, T.DATE], "HOURS", 47, day) == dt.date(2000, 2, 29)
    assert call("DATEADD", [S, INT, T.DATE], "DAYS", None, day) is None


def test_timeadd_and_timesub_wrap_around_midnight() -> None:
    assert call("TIMEADD", [S, INT, T.TIME], "MINUTES", 90, dt.time(23, 0)) == dt.time(0, 30)
    assert call("TIMESUB", [S, INT, T.TIME], "SECONDS", 1, dt.time(0, 0)) == dt.time(23, 59, 59)
    assert call("TIMESUB", [S, INT, T.TIME], "SECONDS", 1, None) is None


def test_timestampadd_and_timestampsub() -> None:
    ts = dt.datetime(2020, 12, 31, 23, 59, 59, 999_000)
    assert call("TIMESTAMPADD", [S, INT, T.TIMESTAMP], "MILLISECONDS", 1, ts) == dt.datetime(
        2021, 1, 1
    )
    assert call("TIMESTAMPSUB", [S, INT, T.TIMESTAMP], "DAYS", 366, ts) == dt.datetime(
        2019, 12, 31, 23, 59, 59, 999_000
    )
    assert call("TIMESTAMPADD", [S, INT, T.TIMESTAMP], "DAYS", 1, None) is None


def test_interval_functions_reject_a_non_unit_first_argument() -> None:
    with pytest.raises(Exception, match="does not accept parameters"):
        REGISTRY.resolve("TIMESTAMPADD", [T.TIMESTAMP, INT, T.TIMESTAMP])


def test_format_and_parse_failures_read_as_ksqldbs_functions_word_them() -> None:
    # ksqlDB's message, then the cause; the call is NULL and the message is the processing
    # log's entry.
    date, time_, ts = dt.date(2024, 2, 29), dt.time(13, 5, 7, 8000), dt.datetime(2024, 2, 29, 1, 2, 3, 40000)
    failures = [
        (("FORMAT_DATE", [T.DATE, S], date, "yyyy-b"), "Failed to format date 2024-02-29 with formatter 'yyyy-b': "),
        (("PARSE_DATE", [S, S], "x", "yyyy"), "Failed to parse date 'x' with formatter 'yyyy': "),
        (("FORMAT_TIME", [T.TIME, S], time_, "HH-b"), "Failed to format time 13:05:07.008 with formatter 'HH-b': "),
        (("PARSE_TIME", [S, S], "12", "mm"), "Failed to parse time '12' with formatter 'mm': "),
        (("FORMAT_TIMESTAMP", [T.TIMESTAMP, S], ts, "b"), "Failed to format timestamp 2024-02-29 01:02:03.04 with formatter 'b': "),
        (
            ("FORMAT_TIMESTAMP", [T.TIMESTAMP, S, S], ts, "yyyy", "Mars/Olympus"),
            "Failed to format timestamp 2024-02-29 01:02:03.04 at timeZone 'Mars/Olympus' with formatter 'yyyy': ",
        ),
        (("PARSE_TIMESTAMP", [S, S], "x", "yyyy"), "Failed to parse timestamp 'x' with formatter 'yyyy': "),
        (
            ("PARSE_TIMESTAMP", [S, S, S], "2024", "yyyy", "Mars/Olympus"),
            "Failed to parse timestamp '2024' at timezone 'Mars/Olympus' with formatter 'yyyy': ",
        ),
        (("DATETOSTRING", [INT, S], 3, "b"), "Failed to format date 3 with formatter 'b': "),
        (("STRINGTODATE", [S, S], "x", "yyyy"), "Failed to parse date 'x' with formatter 'yyyy': "),
        (("TIMESTAMPTOSTRING", [BI, S], 5, "b"), "Failed to format timestamp 5 with formatter 'b': "),
        (
            ("TIMESTAMPTOSTRING", [BI, S, S], 5, "yyyy", "Mars/Olympus"),
            "Failed to format timestamp 5 at timeZone 'Mars/Olympus' with formatter 'yyyy': ",
        ),
        (("STRINGTOTIMESTAMP", [S, S], "x", "yyyy"), "Failed to parse timestamp 'x' with formatter 'yyyy': "),
        (
            ("STRINGTOTIMESTAMP", [S, S, S], "2024", "yyyy", "Mars/Olympus"),
            "Failed to parse timestamp '2024' at timezone 'Mars/Olympus' with formatter 'yyyy': ",
        ),
        (("CONVERT_TZ", [T.TIMESTAMP, S, S], ts, "UTC", "Mars/Olympus"), "Invalid time zone: "),
    ]
    for (name, types, *args), prefix in failures:
        with pytest.raises(EvaluationError) as raised:
            call(name, types, *args)
        assert str(raised.value).startswith(prefix), (name, str(raised.value))
    # Whole seconds and whole times print as LocalTime and Timestamp do.
    with pytest.raises(EvaluationError, match=r"^Failed to format time 13:05 with"):
        call("FORMAT_TIME", [T.TIME, S], dt.time(13, 5), "b")
    with pytest.raises(EvaluationError, match=r"^Failed to format timestamp 2024-02-29 00:00:00.0 with"):
        call("FORMAT_TIMESTAMP", [T.TIMESTAMP, S], dt.datetime(2024, 2, 29), "b")


def test_parse_date_with_a_time_and_parse_time_with_a_date_fail_from_version_2() -> None:
    with pytest.raises(EvaluationError) as raised:
        call("PARSE_DATE", [S, S], "2024-02-29 10:30", "yyyy-MM-dd HH:mm")
    assert str(raised.value) == (
        "Failed to parse date '2024-02-29 10:30' with formatter 'yyyy-MM-dd HH:mm': "
        "Date format contains time field."
    )
    assert call("PARSE_DATE", [S, S], "2024-02-29 00:00", "yyyy-MM-dd HH:mm") == dt.date(2024, 2, 29)
    with pytest.raises(EvaluationError) as raised:
        call("PARSE_TIME", [S, S], "2024-02-29 10:30", "yyyy-MM-dd HH:mm")
    assert str(raised.value) == (
        "Failed to parse time '2024-02-29 10:30' with formatter 'yyyy-MM-dd HH:mm': "
        "Time format contains date field."
    )
    # Version 1, kept for saved plans, drops the other part.
    assert REGISTRY.resolve("PARSE_DATE", [S, S], 1).invoke(["2024-02-29 10:30", "yyyy-MM-dd HH:mm"]) == dt.date(2024, 2, 29)
    assert REGISTRY.resolve("PARSE_TIME", [S, S], 1).invoke(["2024-02-29 10:30", "yyyy-MM-dd HH:mm"]) == dt.time(10, 30)


def test_a_leap_day_of_the_year_without_a_year_fails_as_ksqldbs_timestamp_parser_does() -> None:
    with pytest.raises(EvaluationError) as raised:
        call("PARSE_TIMESTAMP", [S, S], "366", "D")
    assert str(raised.value) == (
        "Failed to parse timestamp '366' with formatter 'D': "
        "Leap day cannot be parsed without supplying the year field"
    )
    assert call("PARSE_TIMESTAMP", [S, S], "2024 366", "yyyy D") == dt.datetime(2024, 12, 31)


# --------------------------------------------------------------------------- formatting version 2


def _format_v2(millis: int, pattern: str) -> str:
    return REGISTRY.resolve("TIMESTAMPTOSTRING", [T.BIGINT, T.STRING], 2).invoke([millis, pattern])


# DateTimeFormatter's results in the US definition of weeks (Sunday first, first week of one day).
@pytest.mark.parametrize(
    ("day", "week_based", "fields"),
    [
        ("2024-12-28", "2024-W52-7", "2024 24 7 Sat Saturday S|4 7 60672|4 4"),
        ("2024-12-29", "2025-W01-1", "2025 25 1 Sun Sunday S|5 1 60673|4 4"),
        ("2020-12-31", "2021-W01-5", "2021 21 5 Thu Thursday T|5 3 59214|4 4"),
        ("2022-01-01", "2022-W01-7", "2022 22 7 Sat Saturday S|1 1 59580|1 1"),
        ("2023-05-31", "2023-W22-4", "2023 23 4 Wed Wednesday W|5 3 60095|2 2"),
        ("1858-11-17", "1858-W47-4", "1858 58 4 Wed Wednesday W|3 3 0|4 4"),
    ],
)
def test_formatting_version_2_prints_the_week_fields(day: str, week_based: str, fields: str) -> None:
    noon = dt.datetime.fromisoformat(day + "T15:04:05")
    millis = int((noon - dt.datetime(1970, 1, 1)).total_seconds() * 1000)
    assert _format_v2(millis, "YYYY-'W'ww-e") == week_based
    assert _format_v2(millis, "Y YY c ccc cccc ccccc|W F g|QQQQQ qqqqq") == fields


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("EEEEEE", "Too many pattern letters: E"),
        ("ddd", "Too many pattern letters: d"),
        ("aa", "Too many pattern letters: a"),
        ("www", "Too many pattern letters: w"),
        ("SSSSSSSSSS", "Minimum width must be from 0 to 9 inclusive but was 10"),
        ("VVV", "Pattern letter count must be 2: V"),
        ("OO", "Pattern letter count must be 1 or 4: O"),
        ("cc", 'Invalid pattern "cc"'),
        ("y" * 20, "The minimum width must be from 1 to 19 inclusive but was 20"),
    ],
)
def test_formatting_version_2_refuses_runs_java_refuses(pattern: str, message: str) -> None:
    with pytest.raises(EvaluationError) as raised:
        _format_v2(0, pattern)
    assert str(raised.value) == f"Failed to format timestamp 0 with formatter '{pattern}': {message}"


def test_formatting_version_1_keeps_its_results_for_saved_plans() -> None:
    v1 = REGISTRY.resolve("TIMESTAMPTOSTRING", [T.BIGINT, T.STRING], 1)
    assert v1.invoke([0, "QQQQQ"]) == "1st quarter"
    assert v1.invoke([0, "EEEEEE"]) == "Thu"
    with pytest.raises(EvaluationError, match="unsupported pattern letter 'w'"):
        v1.invoke([0, "ww"])


def test_the_week_fields_format_but_do_not_parse() -> None:
    parse = REGISTRY.resolve("PARSE_DATE", [T.STRING, T.STRING])
    with pytest.raises(EvaluationError, match="unsupported pattern letter 'w'"):
        parse.invoke(["2024-01", "yyyy-ww"])


@pytest.mark.parametrize(
    ("millis", "zone", "expected"),
    [
        (0, "UTC", "UTC|Coordinated Universal Time"),
        (0, "GMT", "GMT|Greenwich Mean Time"),
        # 1970 in London was UTC+1 all year, standard time: Java names the zone, not the era
        (0, "Europe/London", "GMT|Greenwich Mean Time"),
        (1_000_000_000_000, "Asia/Kolkata", "IST|India Standard Time"),
        (1_700_000_000_456, "Australia/Lord_Howe", "LHDT|Lord Howe Daylight Time"),
        (1_604_215_800_000, "America/Los_Angeles", "PDT|Pacific Daylight Time"),
        (1_604_215_800_000, "Etc/GMT+5", "GMT-05:00|GMT-05:00"),
        (0, "+05:30", "+05:30|+05:30"),
        (0, "UTC+01:00", "UTC+01:00|UTC+01:00"),
    ],
)
def test_formatting_version_2_names_zones_as_java_does(millis: int, zone: str, expected: str) -> None:
    resolved = REGISTRY.resolve("TIMESTAMPTOSTRING", [T.BIGINT, T.STRING, T.STRING], 2)
    assert resolved.invoke([millis, "zzz|zzzz", zone]) == expected


def test_formatting_version_2_writes_the_seconds_of_an_offset() -> None:
    resolved = REGISTRY.resolve("TIMESTAMPTOSTRING", [T.BIGINT, T.STRING, T.STRING], 2)
    assert resolved.invoke([-4_150_222_444_247, "O OOOO ZZZZ", "Europe/London"]) == (
        "GMT-0:01:15 GMT-00:01:15 GMT-00:01:15"
    )


def test_time_unit_functions_take_an_int_interval_from_version_2() -> None:
    for name, value_type in [
        ("DATEADD", T.DATE), ("DATESUB", T.DATE), ("TIMEADD", T.TIME), ("TIMESUB", T.TIME),
        ("TIMESTAMPADD", T.TIMESTAMP), ("TIMESTAMPSUB", T.TIMESTAMP),
    ]:
        with pytest.raises(TypeCheckError, match=f"^Function '{name.lower()}' does not accept parameters"):
            REGISTRY.resolve(name, [S, BI, value_type])
        assert REGISTRY.resolve(name, [S, BI, value_type], 1).signature.params[1] == BI


def test_timeadd_version_2_saturates_time_unit_to_nanos() -> None:
    # DAYS.toNanos(200000) is past a long: Long.MAX_VALUE nanoseconds, 23:47:16.854775807
    # of a day, are added instead.
    assert call("TIMEADD", [S, INT, T.TIME], "DAYS", 200_000, dt.time(1, 0)) == dt.time(0, 47, 16, 854_000)
    assert call("TIMESUB", [S, INT, T.TIME], "HOURS", -2_147_483_648, dt.time(1, 0)) == dt.time(0, 47, 16, 854_000)
    assert call("TIMESUB", [S, INT, T.TIME], "MINUTES", 2_147_483_647, dt.time(1, 0)) == dt.time(1, 12, 43, 145_000)
    assert call("TIMEADD", [S, INT, T.TIME], "DAYS", 106_751, dt.time(1, 0)) == dt.time(1, 0)
    saved = REGISTRY.resolve("TIMEADD", [S, INT, T.TIME], 1)
    assert saved.invoke(["DAYS", 200_000, dt.time(1, 0)]) == dt.time(1, 0)


def test_datesub_truncates_towards_zero_days() -> None:
    epoch = dt.date(1970, 1, 1)
    assert call("DATESUB", [S, INT, T.DATE], "HOURS", 1, epoch) == epoch
    assert call("DATESUB", [S, INT, T.DATE], "HOURS", 25, epoch) == dt.date(1969, 12, 31)
