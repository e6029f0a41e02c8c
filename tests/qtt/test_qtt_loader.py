from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from engine.data.records import Header, Window
from qtt.loader import (
    discover,
    expand_case,
    load_file,
    load_paths,
    parse_qtt_json,
    strip_json_comments,
)
from qtt.model import EMULATED_KSQL_VERSION, QttFormatError, VersionBounds


def write(path: Path, text: str | dict[str, Any]) -> Path:
    path.write_text(text if isinstance(text, str) else json.dumps(text), encoding="utf-8")
    return path


def case(name: str = "echo", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "statements": ["ECHO src TO dst;"],
        "inputs": [{"topic": "src", "key": "a", "value": {"N": 1}}],
        "outputs": [{"topic": "dst", "key": "a", "value": {"N": 1}}],
    }
    body.update(extra)
    return body


# ---------------------------------------------------------------------------- JSON text


def test_line_and_block_comments_are_ignored() -> None:
    text = """
    // leading comment
    {"a": 1, /* inline
       over two lines */ "b": [2, 3] // trailing
    }
    """
    assert parse_qtt_json(text) == {"a": 1, "b": [2, 3]}


def test_comment_markers_inside_strings_survive() -> None:
    text = '{"url": "https://example.org/x", "c": "/* not a comment */", "q": "say \\"//\\""}'
    assert parse_qtt_json(text) == {
        "url": "https://example.org/x",
        "c": "/* not a comment */",
        "q": 'say "//"',
    }


def test_stripping_comments_keeps_line_numbers_for_errors() -> None:
    text = '/* one\ntwo */\n{"a": 1,\n "b": }'
    assert strip_json_comments(text).count("\n") == text.count("\n")
    with pytest.raises(QttFormatError, match="line 4"):
        parse_qtt_json(text)


def test_unclosed_block_comment_is_an_error_naming_its_line() -> None:
    with pytest.raises(QttFormatError, match="line 2.*never closed"):
        parse_qtt_json('{"a": 1}\n/* oops')


def test_numbers_with_a_fraction_are_exact_decimals_and_integers_stay_int() -> None:
    value = parse_qtt_json('{"d": 1.50, "i": 3, "e": 1e2, "neg": -0.1}')
    assert value["d"] == Decimal("1.50") and str(value["d"]) == "1.50"
    assert type(value["i"]) is int
    assert value["e"] == Decimal("100")
    assert value["neg"] == Decimal("-0.1")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(json_values, st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=20))
def test_any_json_document_with_comments_parses_back_to_itself(value: Any, note: str) -> None:
    text = f"/* {note.replace('*/', '')} */ {json.dumps(value)} // {note}"
    assert parse_qtt_json(text) == value


# ---------------------------------------------------------------------------- expansion


def test_case_without_format_or_config_keeps_file_stem_and_name(tmp_path: Path) -> None:
    [only] = expand_case(case("plain"), tmp_path / "my-file.json", 0)
    assert only.id == "my-file - plain"
    assert only.format is None and only.config is None


def test_expansion_runs_every_format_and_config_pair_in_order(tmp_path: Path) -> None:
    raw = case(
        "pairs",
        format=["JSON", "AVRO"],
        config=["true", "false"],
        properties={"ksql.some.flag": "{CONFIG}", "other": "x"},
        statements=["CREATE STREAM S WITH (value_format='{FORMAT}');"],
    )
    cases = expand_case(raw, tmp_path / "f.json", 3)
    assert [c.id for c in cases] == [
        "f - pairs - JSON - ksql.some.flag=true",
        "f - pairs - JSON - ksql.some.flag=false",
        "f - pairs - AVRO - ksql.some.flag=true",
        "f - pairs - AVRO - ksql.some.flag=false",
    ]
    assert cases[2].statements == ("CREATE STREAM S WITH (value_format='AVRO');",)
    assert cases[1].properties == {"ksql.some.flag": "false", "other": "x"}
    assert all(c.index == 3 and c.name == "pairs" for c in cases)


def test_config_needs_exactly_one_placeholder_property(tmp_path: Path) -> None:
    with pytest.raises(QttFormatError, match="exactly one property"):
        expand_case(case(config=["a"], properties={"p": "x"}), tmp_path / "f.json", 0)


def test_duplicate_expanded_names_are_an_error_naming_them(tmp_path: Path) -> None:
    path = write(tmp_path / "dups.json", {"tests": [case("same"), case("other"), case("same")]})
    loaded = load_file(path)
    assert [c.id for c in loaded.cases] == ["dups - same", "dups - other"]
    [problem] = loaded.problems
    assert "'dups - same'" in problem.message and problem.index == 2
    assert "dups.json" in str(problem) and "case 'same'" in str(problem)


def test_duplicate_formats_within_one_case_are_an_error(tmp_path: Path) -> None:
    with pytest.raises(QttFormatError, match="'f - x - JSON' more than once"):
        expand_case(case("x", format=["JSON", "JSON"]), tmp_path / "f.json", 0)


# ---------------------------------------------------------------------------- records and keys


def test_records_read_key_window_headers_and_timestamp(tmp_path: Path) -> None:
    raw = case(
        inputs=[
            {
                "topic": "src",
                "value": None,
                "timestamp": 42,
                "window": {"start": 0, "end": 10, "type": "session"},
                "headers": [{"KEY": "h", "VALUE": "AQI="}, {"KEY": "n", "VALUE": None}],
            }
        ]
    )
    [c] = expand_case(raw, tmp_path / "f.json", 0)
    [record] = c.inputs
    assert record.key is None and record.value is None and record.timestamp == 42
    assert record.window == Window(0, 10, "SESSION")
    assert record.headers == (Header("h", b"\x01\x02"), Header("n", None))


def test_only_outputs_that_list_headers_are_marked_for_header_comparison(tmp_path: Path) -> None:
    raw = case(
        outputs=[
            {"topic": "dst", "value": 1},
            {"topic": "dst", "value": 2, "headers": []},
        ]
    )
    [c] = expand_case(raw, tmp_path / "f.json", 0)
    assert c.outputs_with_headers == frozenset({1})


def test_declared_topics_read_formats_partitions_and_ignore_the_old_format_and_schema_keys(
    tmp_path: Path,
) -> None:
    # ksqlDB's TopicNode reads no "format" or "schema": they are ignored, as unknown keys are.
    raw = case(
        topics=[
            {"name": "a", "keyFormat": "KAFKA", "valueFormat": "AVRO", "partitions": 4},
            {"name": "b", "format": "DELIMITED", "schema": {"type": "string"}, "valueSchemaId": 7},
        ]
    )
    [c] = expand_case(raw, tmp_path / "f.json", 0)
    a, b = (t.to_topic_info() for t in c.topics)
    assert (a.key_format, a.value_format, a.partitions) == ("KAFKA", "AVRO", 4)
    assert (b.value_format, b.value_schema, b.partitions) == (None, None, 1)
    assert b.properties == {"valueSchemaId": 7}
    assert c.topic_names() == ["a", "b", "src", "dst"]


def test_expected_exception_and_post_conditions_are_read(tmp_path: Path) -> None:
    raw = {
        "name": "err",
        "statements": ["X;"],
        "expectedException": {"type": "a.b.C", "message": "bad", "cause": "a.b.D", "causeMessage": "worse"},
        "post": {
            "sources": [
                {
                    "name": "S",
                    "type": "table",
                    "schema": "K STRING KEY",
                    "keyFormat": {"format": "KAFKA", "windowType": "SESSION"},
                    "valueFeatures": ["UNWRAP_SINGLES"],
                }
            ],
            "topics": {
                "blacklist": ".*-tmp",
                "topics": [{"name": "t", "keyFormat": {"format": "KAFKA"}, "valueFormat": {"format": "JSON"},
                            "partitions": 2}],
            },
        },
    }
    [c] = expand_case(raw, tmp_path / "f.json", 0)
    assert c.expected_exception is not None
    assert (c.expected_exception.type, c.expected_exception.cause_message) == ("a.b.C", "worse")
    [source] = c.post.sources
    assert source.type == "TABLE" and source.key_format is not None
    assert source.key_format.window_type == "SESSION"
    assert source.value_features == ("UNWRAP_SINGLES",) and source.key_features is None
    assert c.post.blacklist == ".*-tmp" and c.post.topics[0].partitions == 2


# ---------------------------------------------------------------------------- malformed input


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"statements": ["X;"], "inputs": []}, "Required key 'name' is missing"),
        ({"name": "n", "inputs": []}, "Required key 'statements' is missing"),
        ({"name": "n", "statements": ["X;"]}, "neither 'inputs', 'outputs' nor"),
        ({"name": "n", "statements": "X;", "inputs": []}, "'statements' in case to be a list"),
        (
            {"name": "n", "statements": ["X;"], "inputs": [{"topic": "t"}]},
            "inputs[0] has no 'value'",
        ),
        (
            {
                "name": "n",
                "statements": ["X;"],
                "outputs": [{"topic": "t", "value": 1, "timestamp": "x"}],
            },
            "'timestamp' in outputs[0] to be an integer",
        ),
        (
            {
                "name": "n",
                "statements": ["X;"],
                "inputs": [{"topic": "t", "value": 1, "headers": [{"KEY": "k", "VALUE": "@@"}]}],
            },
            "not valid base64",
        ),
        (
            {
                "name": "n",
                "statements": ["X;"],
                "inputs": [
                    {"topic": "t", "value": 1, "window": {"start": 0, "end": 1, "type": "HOP"}}
                ],
            },
            "Window type 'HOP'",
        ),
        (
            {"name": "n", "statements": ["X;"], "expectedException": {}},
            "test must define 'expectedException.type or expectedException.message' field",
        ),
        ("just a string", "case to be a JSON object"),
    ],
)
def test_malformed_case_gives_a_clear_problem(tmp_path: Path, raw: Any, fragment: str) -> None:
    path = write(tmp_path / "bad.json", {"tests": [raw, case("fine")]})
    loaded = load_file(path)
    [problem] = loaded.problems
    assert fragment in problem.message
    assert [c.id for c in loaded.cases] == ["bad - fine"]


def test_malformed_file_is_one_problem_and_other_files_still_load(tmp_path: Path) -> None:
    write(tmp_path / "a_broken.json", '{"tests": [ {"name": "x",, } ]}')
    write(tmp_path / "b_no_tests.json", {"cases": []})
    write(tmp_path / "c_good.json", {"tests": [case("ok")]})
    broken, no_tests, good = load_paths([tmp_path])
    assert "Invalid JSON at line 1" in broken.problems[0].message
    assert broken.problems[0].id == "a_broken"
    assert "'tests'" in no_tests.problems[0].message
    assert [c.id for c in good.cases] == ["c_good - ok"]


def test_discover_walks_folders_sorted_and_rejects_missing_paths(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "b.json", {"tests": []})
    write(tmp_path / "a.json", {"tests": []})
    write(tmp_path / "notes.txt", "ignored")
    assert [name for _, name in discover([tmp_path])] == ["a.json", "sub/b.json"]
    with pytest.raises(FileNotFoundError, match="nowhere"):
        discover([tmp_path / "nowhere"])


# ---------------------------------------------------------------------------- skipped cases


def test_disabled_and_out_of_version_cases_are_counted_apart(tmp_path: Path) -> None:
    path = write(
        tmp_path / "v.json",
        {
            "tests": [
                case("old", versions={"max": "6.2.0"}),
                case("future", versions={"min": "99.0.0"}),
                case("current", versions={"min": "7.0.0", "max": EMULATED_KSQL_VERSION}),
                case("off", enabled=False, format=["JSON", "AVRO"]),
            ]
        },
    )
    loaded = load_file(path)
    assert [c.id for c in loaded.cases] == ["v - current"]
    assert loaded.not_applicable == ("v - old", "v - future")
    assert loaded.disabled == ("v - off - JSON", "v - off - AVRO")


def test_version_bounds_are_inclusive_and_ignore_suffixes() -> None:
    assert VersionBounds(min="7.4.0", max="7.4.0").contains("7.4.0")
    assert VersionBounds(max="7.4.0-SNAPSHOT").contains("7.4.0")
    assert not VersionBounds(max="7.3").contains("7.4.0")
    assert not VersionBounds(min="7.4.1").contains("7.4.0")


def test_filter_keeps_matching_cases_only(tmp_path: Path) -> None:
    write(tmp_path / "f.json", {"tests": [case("alpha"), case("beta")]})
    [loaded] = load_paths([tmp_path], filter="bet")
    assert [c.id for c in loaded.cases] == ["f - beta"]


def _scan_comments(text: str) -> str | None:
    """Comments blanked by a character-by-character scan (None: a block comment never closed)."""
    out, i, in_string = [], 0, False
    while i < len(text):
        ch = text[i]
        if in_string:
            out.append(text[i : i + 2] if ch == "\\" else ch)
            in_string = ch != '"'
            i += 2 if ch == "\\" else 1
        elif ch == '"':
            in_string = True
            out.append(ch)
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = len(text) if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return None
            out.append("".join(c if c == "\n" else " " for c in text[i : end + 2]))
            i = end + 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


_PIECES = st.sampled_from(['"', '\\"', "\\\\", "//", "/*", "*/", "/", "*", "\n", "a"])


@given(st.lists(_PIECES, max_size=16).map("".join))
@example('"\\"//"')
@example('"//" /* "*/ x')
@example('"\\\\" // c\n"a"')
@example("a\n/* b")
@settings(max_examples=400)
def test_stripping_comments_matches_a_character_scan(text: str) -> None:
    # Texts whose strings all close: an unclosed string is a JSON error either way.
    assume(_closes_strings(text))
    expected = _scan_comments(text)
    if expected is None:
        with pytest.raises(QttFormatError, match="never closed"):
            strip_json_comments(text)
    else:
        assert strip_json_comments(text) == expected


def _closes_strings(text: str) -> bool:
    i, in_string = 0, False
    while i < len(text):
        if in_string and text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            in_string = not in_string
        elif not in_string and text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif not in_string and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return True
            i = end + 2
            continue
        i += 1
    return not in_string
