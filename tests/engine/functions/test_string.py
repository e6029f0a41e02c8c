"""String functions: ksqlDB semantics for positions, NULLs, Java regexes and UTF-16 lengths."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine.functions  # noqa: F401  (registers the libraries)
from engine.errors import EvaluationError, TypeCheckError
from engine.functions.lib_string import from_units, java_regex, to_units
from engine.functions.registry import REGISTRY
from engine.plan import types as T

_TYPES = {bool: T.BOOLEAN, int: T.INTEGER, float: T.DOUBLE, str: T.STRING, bytes: T.BYTES}


def call(name: str, *args: Any, types: list[Any] | None = None) -> Any:
    """Resolve ``name`` for the arguments' types (NULL typed as STRING) and invoke it."""
    if types is None:
        types = [T.STRING if a is None else _TYPES[type(a)] for a in args]
    return REGISTRY.resolve(name, types).invoke(list(args))


def test_concat_skips_nulls_and_joins_the_rest():
    assert call("CONCAT", "ks", None, "ql", "DB") == "ksqlDB"
    assert call("CONCAT", None, None) == ""


def test_concat_ws_uses_separator_and_skips_nulls():
    assert call("CONCAT_WS", "-", "a", None, "b") == "a-b"
    assert call("CONCAT_WS", None, "a", "b") is None
    assert call("CONCAT_WS", ", ", None) == ""


def test_concat_ws_takes_one_variadic_parameter_and_needs_two_arguments_at_run_time():
    # ksqlDB declares CONCAT_WS(STRING...) and CONCAT_WS(BYTES...): the separator is the
    # first of the values, and fewer than two values fail when the row is evaluated.
    sigs = {s.describe() for s in REGISTRY.signatures("CONCAT_WS")}
    assert sigs == {"CONCAT_WS(STRING...)", "CONCAT_WS(BYTES...)"}
    with pytest.raises(EvaluationError, match="^Function Concat_WS expects at least two input arguments.$"):
        call("CONCAT_WS", "-")
    with pytest.raises(EvaluationError, match="expects at least two input arguments"):
        call("CONCAT_WS", b"-")
    with pytest.raises(TypeCheckError, match=r"ambiguous method parameters \(\)"):
        REGISTRY.resolve("CONCAT_WS", [])


def test_concat_ws_version_1_kept_a_fixed_separator_for_saved_plans():
    [old] = [s for s in REGISTRY.signatures("CONCAT_WS", 1) if s.params[0] == T.STRING]
    assert old.describe() == "CONCAT_WS(STRING, STRING...)"
    assert REGISTRY.resolve("CONCAT_WS", [T.STRING], 1).invoke(["-"]) == ""


def test_case_functions_follow_unicode_rules():
    assert call("UCASE", "straße") == "STRASSE"
    assert call("LCASE", "ÄBC") == "äbc"
    assert call("UCASE", None) is None


def test_trim_strips_java_whitespace_and_control_characters():
    assert call("TRIM", "\t\n  pad me \r\x00") == "pad me"
    assert call("LTRIM", "  x  ") == "x  "
    assert call("RTRIM", "  x  ") == "  x"
    # Java's trim does not strip a non-breaking space.
    assert call("TRIM", "\u00a0x") == "\u00a0x"
    assert call("TRIM", None) is None


def test_initcap_capitalises_words_and_keeps_spacing():
    assert call("INITCAP", "hELLO   wide\tworld 9lives") == "Hello   Wide\tWorld 9lives"
    assert call("INITCAP", "snake_case") == "Snake_case"
    assert call("INITCAP", "") == ""
    assert call("INITCAP", None) is None


def test_len_counts_utf16_code_units():
    assert call("LEN", "abc") == 3
    assert call("LEN", "") == 0
    assert call("LEN", "a\U0001f600") == 3
    assert call("LEN", None, types=[T.STRING]) is None


@pytest.mark.parametrize(
    ("text", "pos", "length", "expected"),
    [
        ("streaming", 1, 6, "stream"),
        ("streaming", 7, 100, "ing"),
        ("streaming", -3, 2, "in"),
        ("streaming", 0, 3, "str"),
        ("streaming", -20, 3, "str"),
        ("streaming", 20, 3, ""),
        ("streaming", 3, -1, ""),
    ],
)
def test_substring_with_length_clamps_like_ksqldb(text, pos, length, expected):
    assert call("SUBSTRING", text, pos, length) == expected


def test_substring_without_length_takes_the_rest():
    assert call("SUBSTRING", "window", 4) == "dow"
    assert call("SUBSTRING", "window", -2) == "ow"
    assert call("SUBSTRING", None, 2, types=[T.STRING, T.INTEGER]) is None
    assert call("SUBSTRING", "abc", None, types=[T.STRING, T.INTEGER]) is None


def test_substring_counts_a_supplementary_character_as_two_units():
    assert call("SUBSTRING", "x\U0001f600y", 2, 2) == "\U0001f600"
    assert call("SUBSTRING", "x\U0001f600y", 4) == "y"


@given(st.text(alphabet=st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",))),
       st.integers(-30, 30), st.integers(0, 30))
def test_substring_of_bmp_text_matches_python_slicing(text, pos, length):
    start = max(len(text) + pos, 0) if pos < 0 else max(min(pos - 1, len(text)), 0)
    assert call("SUBSTRING", text, pos, length) == text[start : start + length]


@given(st.text())
def test_utf16_units_round_trip(text):
    assert from_units(to_units(text)) == text


def test_instr_finds_positions_forwards_and_backwards():
    text = "banana bandana"
    assert call("INSTR", text, "an") == 2
    assert call("INSTR", text, "an", 3) == 4
    assert call("INSTR", text, "an", 1, 3) == 9
    assert call("INSTR", text, "an", -1) == 12
    assert call("INSTR", text, "an", -1, 2) == 9
    assert call("INSTR", text, "xyz") == 0
    assert call("INSTR", text, "an", 1, 9) == 0


def test_instr_returns_zero_for_null_input():
    assert call("INSTR", None, "a") == 0
    assert call("INSTR", "abc", None) == 0


def test_instr_finds_nothing_for_a_non_positive_occurrence():
    assert call("INSTR", "abc", "a", 1, 0) == 0


@pytest.mark.parametrize(
    ("fn", "text", "size", "padding", "expected"),
    [
        ("LPAD", "id", 6, "xy", "xyxyid"),
        ("LPAD", "id", 5, "xy", "xyxid"),
        ("LPAD", "identity", 3, "xy", "ide"),
        ("RPAD", "id", 5, "xy", "idxyx"),
        ("RPAD", "identity", 3, "xy", "ide"),
        ("RPAD", "", 3, "ab", "aba"),
        ("LPAD", "id", 0, "x", ""),
        ("LPAD", "id", -1, "x", None),
        ("RPAD", "id", 4, "", None),
    ],
)
def test_pad_functions(fn, text, size, padding, expected):
    assert call(fn, text, size, padding) == expected


def test_pad_functions_return_null_for_null_arguments():
    assert call("LPAD", None, 3, "x", types=[T.STRING, T.INTEGER, T.STRING]) is None
    assert call("RPAD", "a", None, "x", types=[T.STRING, T.INTEGER, T.STRING]) is None


def test_replace_replaces_every_occurrence():
    assert call("REPLACE", "a-b-c", "-", "+") == "a+b+c"
    assert call("REPLACE", "abc", "", "|") == "|a|b|c|"
    assert call("REPLACE", "abc", None, "x") is None


def test_regexp_replace_supports_java_group_references():
    assert call("REGEXP_REPLACE", "2024-05-17", r"(\d+)-(\d+)-(\d+)", "$3/$2/$1") == "17/05/2024"
    assert call("REGEXP_REPLACE", "aaa", "a+?", "b") == "bbb"
    assert call("REGEXP_REPLACE", "cost", "o", "\\$") == "c$st"
    assert call("REGEXP_REPLACE", "xy", "(?<first>x)", "${first}${first}") == "xxy"
    assert call("REGEXP_REPLACE", None, "a", "b") is None


def test_regexp_replace_rejects_bad_group_reference():
    with pytest.raises(EvaluationError, match="group"):
        call("REGEXP_REPLACE", "abc", "(a)", "$2")
    with pytest.raises(EvaluationError, match="^Invalid regular expression pattern: \\(a$"):
        call("REGEXP_REPLACE", "abc", "(a", "x")


def test_regexp_extract_returns_first_match_or_group():
    assert call("REGEXP_EXTRACT", r"\d+", "order 66 and 99") == "66"
    assert call("REGEXP_EXTRACT", r"(\w+)@(\w+)", "mail bob@corp now", 2) == "corp"
    assert call("REGEXP_EXTRACT", r"\d+", "none") is None
    assert call("REGEXP_EXTRACT", None, "x") is None


def test_regexp_extract_all_returns_every_match():
    assert call("REGEXP_EXTRACT_ALL", r"\d", "a1b22c3") == ["1", "2", "2", "3"]
    assert call("REGEXP_EXTRACT_ALL", r"(\w)=(\d)", "a=1 b=2", 1) == ["a", "b"]
    assert call("REGEXP_EXTRACT_ALL", r"\d", "none") == []
    assert call("REGEXP_EXTRACT_ALL", r"\d", None) is None


def test_regexp_extract_version_2_uses_java_ascii_classes_and_dot():
    assert call("REGEXP_EXTRACT", r"\w+", "caf\u00e9") == "caf"
    assert call("REGEXP_EXTRACT_ALL", r"\d", "1\u0663") == ["1"]
    assert call("REGEXP_EXTRACT_ALL", r"\s", "a b\u00a0c") == [" "]
    assert call("REGEXP_EXTRACT_ALL", r"[\w.]+", "\u00e9a.b") == ["a.b"]
    assert call("REGEXP_EXTRACT", r"a.c", "a\u2028c") is None
    assert call("REGEXP_EXTRACT", r"(?s)a.c", "a\u2028c") == "a\u2028c"
    # Version 1, kept for saved plans, used Python's Unicode classes.
    assert REGISTRY.resolve("REGEXP_EXTRACT", [T.STRING, T.STRING], 1).invoke([r"\w+", "caf\u00e9"]) == "caf\u00e9"


def test_regexp_replace_and_split_version_2_use_java_ascii_classes():
    assert call("REGEXP_REPLACE", "caf\u00e9 1\u0663", r"\w", "_") == "___\u00e9 _\u0663"
    assert call("REGEXP_SPLIT_TO_ARRAY", "a\u00a0b c", r"\s") == ["a\u00a0b", "c"]
    assert call("REGEXP_SPLIT_TO_ARRAY", "a\u2028b", ".") == ["", "\u2028", ""]
    three = [T.STRING] * 3
    assert REGISTRY.resolve("REGEXP_REPLACE", three, 1).invoke(["caf\u00e9", r"\w", "_"]) == "____"
    assert REGISTRY.resolve("REGEXP_SPLIT_TO_ARRAY", three[:2], 1).invoke(["a\u00a0b", r"\s"]) == ["a", "b"]


def test_regexp_extract_version_2_gives_null_for_a_group_past_the_pattern():
    assert call("REGEXP_EXTRACT", "(a)", "a", 2) is None
    assert call("REGEXP_EXTRACT_ALL", "(a)", "a", 2) is None
    assert call("REGEXP_EXTRACT_ALL", "(a)(b)?", "aab", 2) == [None, "b"]
    with pytest.raises(EvaluationError, match="^No group -1$"):
        call("REGEXP_EXTRACT", "(a)", "a", -1)
    with pytest.raises(EvaluationError, match="^Invalid regular expression pattern: \\(a$"):
        call("REGEXP_EXTRACT_ALL", "(a", "a")
    with pytest.raises(EvaluationError):
        REGISTRY.resolve("REGEXP_EXTRACT", [T.STRING, T.STRING, T.INTEGER], 1).invoke(["(a)", "a", 2])


def test_regexp_split_to_array_keeps_empty_pieces():
    assert call("REGEXP_SPLIT_TO_ARRAY", "x1y22z", r"\d") == ["x", "y", "", "z"]
    assert call("REGEXP_SPLIT_TO_ARRAY", "-a-", "-") == ["", "a", ""]
    assert call("REGEXP_SPLIT_TO_ARRAY", "ab", "(x|y)") == ["ab"]
    # Java drops the leading empty piece of a zero-width match at the start.
    assert call("REGEXP_SPLIT_TO_ARRAY", "abc", "") == ["a", "b", "c", ""]
    assert call("REGEXP_SPLIT_TO_ARRAY", "", "-") == [""]
    assert call("REGEXP_SPLIT_TO_ARRAY", "a", None) is None


def test_java_regex_translates_java_only_syntax():
    assert java_regex(r"(?<year>\d{4})").match("2024").group("year") == "2024"
    assert java_regex(r"\p{Alpha}+").fullmatch("abcXYZ")
    assert java_regex(r"[\p{Digit}x]+").fullmatch("1x2")
    assert java_regex(r"\Qa.b\E").fullmatch("a.b")
    assert not java_regex(r"\Qa.b\E").fullmatch("axb")
    assert java_regex(r"(a)\k<n>".replace("(a)", "(?<n>a)")).fullmatch("aa")
    assert isinstance(java_regex("a"), re.Pattern)


def test_split_keeps_empty_pieces_and_splits_characters_on_empty_delimiter():
    assert call("SPLIT", ",a,,b,", ",") == ["", "a", "", "b", ""]
    assert call("SPLIT", "a::b", "::") == ["a", "b"]
    assert call("SPLIT", "abc", "") == ["a", "b", "c"]
    assert call("SPLIT", "", "") == [""]
    assert call("SPLIT", "", ",") == [""]
    assert call("SPLIT", None, ",") is None


def test_split_to_map_builds_entries_and_later_keys_win():
    assert call("SPLIT_TO_MAP", "k1=v1;k2=v2;k1=v3", ";", "=") == {"k1": "v3", "k2": "v2"}
    assert call("SPLIT_TO_MAP", "a=1;;noval;b=2=3", ";", "=") == {"a": "1", "b": "2"}
    assert call("SPLIT_TO_MAP", "", ";", "=") == {}
    assert call("SPLIT_TO_MAP", "a=1", "", "=") is None
    assert call("SPLIT_TO_MAP", "a=1", "=", "=") is None
    assert call("SPLIT_TO_MAP", "a=1", None, "=") is None


def test_mask_replaces_each_character_class():
    assert call("MASK", "Ab1-é") == "Xxn-x"
    assert call("MASK", "Ab1 z", "U", "l", "#", "_") == "Ul#_l"
    # A NULL mask character keeps that class unmasked.
    assert call("MASK", "Ab1", None, "*", None, None) == "A*1"
    assert call("MASK", None) is None


def test_mask_regions():
    assert call("MASK_LEFT", "Secret42", 3) == "Xxxret42"
    assert call("MASK_RIGHT", "Secret42", 3) == "Secrexnn"
    assert call("MASK_KEEP_LEFT", "Secret42", 3) == "Secxxxnn"
    assert call("MASK_KEEP_RIGHT", "Secret42", 3) == "Xxxxxt42"
    assert call("MASK_LEFT", "ab", 10) == "xx"
    assert call("MASK_KEEP_RIGHT", "ab", 10) == "ab"
    assert call("MASK_LEFT", "Ab1", 3, "*", "*", "*", "*") == "***"
    assert call("MASK_RIGHT", None, 2, types=[T.STRING, T.INTEGER]) is None


def test_mask_region_rejects_negative_count():
    with pytest.raises(EvaluationError) as raised:
        call("MASK_LEFT", "abc", -1)
    assert str(raised.value) == "function mask_left requires a non-negative number of characters to mask or skip"


def test_a_mask_of_more_or_less_than_one_character_fails_as_in_ksqldb_from_version_2():
    four = [T.STRING] * 4
    for name, head in [("MASK", [T.STRING]), ("MASK_KEEP_RIGHT", [T.STRING, T.INTEGER])]:
        args = ["Ab1", 1][: len(head)]
        for mask in ("**", ""):
            with pytest.raises(EvaluationError) as raised:
                REGISTRY.resolve(name, head + four).invoke([*args, mask, None, None, None])
            assert str(raised.value) == f"Invalid mask character. Must be only single character, but was '{mask}'"
        # Version 1, kept for saved plans, takes the first character of a longer mask.
        saved = REGISTRY.resolve(name, head + four, 1)
        assert saved.invoke([*args, "*#", None, None, None]).startswith("*")
    assert REGISTRY.current_semantics("MASK_LEFT") == 3


_MASK_REGIONS = ["MASK_LEFT", "MASK_RIGHT", "MASK_KEEP_LEFT", "MASK_KEEP_RIGHT"]


def test_mask_version_3_classes_characters_as_java_character_get_type():
    # Lu, Ll and Nd only: a letter number (XII), a titlecase letter, an other letter and a
    # modifier letter are "other"; Python's isupper/islower would call some of them cased.
    assert call("MASK", "\u216b\u01c5\u00aa\u02b0\u0663") == "----n"
    assert REGISTRY.resolve("MASK", [T.STRING], 2).invoke(["\u216b\u00aa"]) == "Xx"


def test_mask_version_3_walks_utf16_units_as_masker_does():
    # codePointAt at the high unit sees the whole character, then the low unit alone.
    assert call("MASK", "A\U0001d400b") == "XX-x"  # MATHEMATICAL BOLD CAPITAL A is Lu
    assert call("MASK", "\U0001f600") == "--"
    # A NULL mask appends the code point itself, so the low unit comes out twice.
    assert to_units(call("MASK", "\U0001d400", None, None, None, "-")) == to_units("\U0001d400") + "-"
    # Regions count UTF-16 units: the last two units are one emoji.
    assert call("MASK_RIGHT", "ab\U0001f600", 2) == "ab--"
    assert call("MASK_KEEP_LEFT", "ab\U0001f600", 2) == "ab--"
    assert call("MASK_LEFT", "\U0001f600bc", 2) == "--bc"
    assert REGISTRY.resolve("MASK_RIGHT", [T.STRING, T.INTEGER], 2).invoke(["ab\U0001f600", 2]) == "ax-"


def test_mask_version_3_refuses_a_mask_of_two_utf16_units_and_checks_masks_and_count_first():
    four = [T.STRING] * 4
    with pytest.raises(EvaluationError) as raised:
        call("MASK", "ab", "\U0001f600", None, None, None)
    assert str(raised.value) == "Invalid mask character. Must be only single character, but was '\U0001f600'"
    # ksqlDB checks the masks before it looks at the input, and the count as well.
    with pytest.raises(EvaluationError, match="^Invalid mask character"):
        REGISTRY.resolve("MASK", [T.STRING, *four]).invoke([None, "ab", None, None, None])
    for name in _MASK_REGIONS:
        with pytest.raises(EvaluationError, match=f"^function {name.lower()} requires a non-negative"):
            REGISTRY.resolve(name, [T.STRING, T.INTEGER]).invoke([None, -1])
        assert REGISTRY.resolve(name, [T.STRING, T.INTEGER]).invoke([None, 1]) is None
        assert REGISTRY.resolve(name, [T.STRING, T.INTEGER]).invoke(["ab", None]) is None


def test_chr_from_code_point_and_escape():
    assert call("CHR", 65) == "A"
    assert call("CHR", 0x1F600) == "\U0001f600"
    assert call("CHR", -5) is None
    assert call("CHR", 0x110000) is None
    assert call("CHR", "\\u0041") == "A"
    assert call("CHR", "\\ud83d\\ude00") == "\U0001f600"
    assert call("CHR", "0041") is None
    assert call("CHR", "\\u00zz") is None
    assert call("CHR", None) is None


def test_elt_picks_one_based_argument():
    assert call("ELT", 2, "zero", "one", "two") == "one"
    assert call("ELT", 0, "a") is None
    assert call("ELT", 3, "a", "b") is None
    assert call("ELT", 1, None, "b") is None
    assert call("ELT", None, "a", types=[T.INTEGER, T.STRING]) is None


def test_field_finds_one_based_position():
    assert call("FIELD", "b", "a", "b", "b") == 2
    assert call("FIELD", "z", "a", "b") == 0
    assert call("FIELD", None, None, "a") == 0


def test_md5_hashes_utf8_bytes_as_hex():
    assert call("MD5", "abc") == "900150983cd24fb0d6963f7d28e17f72"
    assert call("MD5", "") == "d41d8cd98f00b204e9800998ecf8427e"
    assert call("MD5", None) is None


def test_uuid_is_random_or_built_from_sixteen_bytes():
    first, second = call("UUID"), call("UUID")
    assert first != second
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}", first)
    assert call("UUID", bytes(range(16))) == "00010203-0405-0607-0809-0a0b0c0d0e0f"
    with pytest.raises(EvaluationError, match="16 bytes"):
        call("UUID", b"short")


def test_a_regex_that_does_not_compile_fails_in_ksqldbs_words():
    for name, args in [
        ("REGEXP_REPLACE", ("abc", "(b", "x")),
        ("REGEXP_EXTRACT_ALL", ("(b", "abc")),
        ("REGEXP_EXTRACT_ALL", ("(b", "abc", 1)),
        ("REGEXP_SPLIT_TO_ARRAY", ("abc", "(b")),
    ]:
        with pytest.raises(EvaluationError) as raised:
            call(name, *args)
        assert str(raised.value) == "Invalid regular expression pattern: (b"
    # REGEXP_EXTRACT lets the pattern's own error through, as ksqlDB's does.
    with pytest.raises(EvaluationError, match="is not valid"):
        call("REGEXP_EXTRACT", "(b", "abc")


# --------------------------------------------------------------------------- INITCAP and INSTR version 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the parts are words with the spaces after them: leading spaces are not kept
        ("  hello  wORLD ", "Hello  World "),
        ("   ", ""),
        ("x\ty\nz", "X\tY\nZ"),
        # Java's \s is space, tab and line breaks: other white space is part of the word
        ("a\u00a0b", "A\u00a0b"),
        ("a\u2003b\u0085c\u001cd", "A\u2003b\u0085c\u001cd"),
        # the whole string is lower-cased first, so a final sigma stays final
        ("ΟΔΟΣ ΟΔΟΣ", "Οδος Οδος"),
        # the first UTF-16 unit alone is upper-cased: a letter outside the BMP stays as it is
        ("\U00010428x yz", "\U00010428x Yz"),
        ("ßa ŉb", "SSa ʼNb"),
        ("İstanbul", "I\u0307stanbul"),
    ],
)
def test_initcap_version_2_takes_words_as_ksqldbs_body_does(text: str, expected: str) -> None:
    assert call("INITCAP", text) == expected


def test_initcap_version_1_keeps_the_spacing_for_saved_plans() -> None:
    assert REGISTRY.resolve("INITCAP", [T.STRING], 1).invoke(["  a b"]) == "  A B"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("CORPORATE FLOOR", "OR", 3, 2), 14),
        (("CORPORATE FLOOR", "OR", -3, 2), 2),
        (("aaaa", "aa", 1, 2), 2),
        # an occurrence below 1 finds nothing
        (("abc", "b", 1, 0), 0),
        (("abc", "b", 1, -1), 0),
        # backwards, a match must end at or before the position: "aa" from -2 is not found
        (("aa", "aa", -2, 1), 0),
        (("aa", "aa", -1, 1), 1),
        # a position past either end finds nothing, an empty substring too
        (("abc", "", 4, 1), 0),
        (("abc", "c", -4, 1), 0),
        # an empty substring is found at the position, whatever the occurrence
        (("abc", "", 1, 2), 1),
        (("abc", "", 2, 3), 2),
        (("abc", "", -1, 1), 4),
        # positions count UTF-16 units
        (("\U0001F600ab", "b", 1, 1), 4),
        (("a\U0001F600b\U0001F600", "\U0001F600", -1, 2), 2),
        # backwards from the low half of a surrogate pair: the pair is not found
        (("\U0001F600", "\U0001F600", -2, 1), 0),
        (("\U0001F600", "\U0001F600", -1, 1), 1),
    ],
)
def test_instr_version_2_finds_as_ksqldbs_body_does(args: tuple[Any, ...], expected: int) -> None:
    assert call("INSTR", *args) == expected


def test_instr_version_1_refuses_an_occurrence_below_one_for_saved_plans() -> None:
    with pytest.raises(EvaluationError, match="occurrence"):
        REGISTRY.resolve("INSTR", [T.STRING, T.STRING, T.INTEGER, T.INTEGER], 1).invoke(["abc", "b", 1, 0])


def _instr_model(text: str, sub: str, position: int, occurrence: int) -> int:
    """INSTR as ksqlDB's body defines it, for BMP text and a non-empty substring: forwards,
    the n-th match starting at or after the position; backwards (position -q), the n-th match
    from the end among those ending at or before the q-th character from the end."""
    if position == 0 or abs(position) > len(text):
        return 0
    starts = [i for i in range(len(text) - len(sub) + 1) if text.startswith(sub, i)]
    if position > 0:
        found = [i for i in starts if i >= position - 1]
    else:
        found = [i for i in reversed(starts) if i + len(sub) <= len(text) + position + 1]
    return found[occurrence - 1] + 1 if len(found) >= occurrence else 0


@given(
    st.text(alphabet="abc", max_size=8),
    st.text(alphabet="abc", min_size=1, max_size=3),
    st.integers(min_value=-9, max_value=9),
    st.integers(min_value=1, max_value=3),
)
def test_instr_version_2_matches_its_definition(text: str, sub: str, position: int, occurrence: int) -> None:
    types = [T.STRING, T.STRING, T.INTEGER, T.INTEGER]
    got = REGISTRY.resolve("INSTR", types, 2).invoke([text, sub, position, occurrence])
    assert got == _instr_model(text, sub, position, occurrence)
