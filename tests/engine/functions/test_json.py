"""JSON functions: Jackson-like parsing and writing, JsonPath extraction, TO_JSON_STRING."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import engine.functions  # noqa: F401  (registers the libraries)
from engine.errors import EvaluationError
from engine.functions.lib_json import dump_json, parse_json, parse_json_path
from engine.functions.registry import REGISTRY
from engine.plan import types as T


def call(name: str, *args: Any, types: list[Any]) -> Any:
    """Resolve ``name`` for the given argument types and invoke it."""
    return REGISTRY.resolve(name, types).invoke(list(args))


def s(name: str, *args: Any) -> Any:
    """Call a function whose arguments are all STRING."""
    return call(name, *args, types=[T.STRING] * len(args))


def v1(name: str, *args: Any) -> Any:
    """Call version 1 of a function whose arguments are all STRING (what saved plans run)."""
    return REGISTRY.resolve(name, [T.STRING] * len(args), 1).invoke(list(args))


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("JSON_ARRAY_LENGTH", ("[",)),
        ("JSON_KEYS", ("{oops",)),
        ("JSON_RECORDS", ("{oops",)),
        ("JSON_CONCAT", ("[1]", "oops")),
        ("EXTRACTJSONFIELD", ("not json", "$.a")),
        ("JSON_ITEMS", ("{}",)),
    ],
)
def test_text_that_is_not_json_fails_in_ksqldbs_words_from_version_2(name: str, args: tuple[str, ...]) -> None:
    # The whole expression is then NULL, with the message in the processing log, as in ksqlDB.
    bad = args[1] if name == "JSON_CONCAT" else args[0]
    with pytest.raises(EvaluationError) as raised:
        s(name, *args)
    assert str(raised.value) == f"Invalid JSON format:{bad}"
    assert REGISTRY.current_semantics(name) == 2
    # Empty text is no JSON value, which the functions answer with NULL.
    if name != "JSON_ITEMS":
        empty = ("", "$.a") if name == "EXTRACTJSONFIELD" else ("",) * len(args)
        assert s(name, *empty) is None


def test_extractjsonfield_returns_text_for_strings_and_json_for_the_rest():
    doc = '{"user": {"name": "ann", "tags": ["x", {"k": 1.50}], "age": 7, "nil": null}}'
    assert s("EXTRACTJSONFIELD", doc, "$.user.name") == "ann"
    assert s("EXTRACTJSONFIELD", doc, "$.user.age") == "7"
    assert s("EXTRACTJSONFIELD", doc, "$.user.tags[1]") == '{"k":1.5}'
    assert s("EXTRACTJSONFIELD", doc, "$.user.tags") == '["x",{"k":1.5}]'
    assert s("EXTRACTJSONFIELD", doc, "$['user']['tags'][0]") == "x"
    assert s("EXTRACTJSONFIELD", doc, "$.user.nil") is None


def test_extractjsonfield_returns_null_for_missing_paths_and_bad_json():
    assert s("EXTRACTJSONFIELD", '{"a": [1]}', "$.b") is None
    assert s("EXTRACTJSONFIELD", '{"a": [1]}', "$.a[3]") is None
    assert s("EXTRACTJSONFIELD", '{"a": [1]}', "$.a.b") is None
    assert v1("EXTRACTJSONFIELD", "not json", "$.a") is None
    assert s("EXTRACTJSONFIELD", None, "$.a") is None


def test_json_path_parsing_and_errors():
    assert parse_json_path("$.a['b c'][2].d") == ["a", "b c", 2, "d"]
    assert parse_json_path("$") == []
    with pytest.raises(EvaluationError, match="must start with"):
        parse_json_path("a.b")
    with pytest.raises(EvaluationError, match="not valid"):
        parse_json_path("$.a[")


def test_is_json_string():
    assert s("IS_JSON_STRING", "[1, 2]") is True
    assert s("IS_JSON_STRING", '"quoted"') is True
    assert s("IS_JSON_STRING", " 12 ") is True
    assert s("IS_JSON_STRING", "bare") is False
    assert s("IS_JSON_STRING", "") is False
    assert s("IS_JSON_STRING", "NaN") is False
    assert s("IS_JSON_STRING", None) is False


def test_json_array_length():
    assert s("JSON_ARRAY_LENGTH", "[1, [2, 3], {}]") == 3
    assert s("JSON_ARRAY_LENGTH", "[]") == 0
    assert s("JSON_ARRAY_LENGTH", '{"a": 1}') is None
    assert v1("JSON_ARRAY_LENGTH", "[") is None
    assert s("JSON_ARRAY_LENGTH", None) is None


def test_json_array_contains_matches_value_and_json_type():
    arr = '[1, 2.5, "3", true, null, [7]]'
    assert call("JSON_ARRAY_CONTAINS", arr, 1, types=[T.STRING, T.INTEGER]) is True
    assert call("JSON_ARRAY_CONTAINS", arr, 2.5, types=[T.STRING, T.DOUBLE]) is True
    assert call("JSON_ARRAY_CONTAINS", arr, "3", types=[T.STRING, T.STRING]) is True
    assert call("JSON_ARRAY_CONTAINS", arr, True, types=[T.STRING, T.BOOLEAN]) is True
    assert call("JSON_ARRAY_CONTAINS", arr, None, types=[T.STRING, T.STRING]) is True
    assert call("JSON_ARRAY_CONTAINS", arr, 3, types=[T.STRING, T.INTEGER]) is False
    assert call("JSON_ARRAY_CONTAINS", arr, 7, types=[T.STRING, T.INTEGER]) is False
    assert call("JSON_ARRAY_CONTAINS", "[1.0]", 1, types=[T.STRING, T.INTEGER]) is False
    assert call("JSON_ARRAY_CONTAINS", "[0]", False, types=[T.STRING, T.BOOLEAN]) is False
    assert call("JSON_ARRAY_CONTAINS", "{}", 1, types=[T.STRING, T.INTEGER]) is False
    assert call("JSON_ARRAY_CONTAINS", None, 1, types=[T.STRING, T.INTEGER]) is False


def test_json_concat_merges_objects_and_concatenates_arrays():
    assert s("JSON_CONCAT", '{"a": 1, "b": 1}', '{"b": {"c": 2}}') == '{"a":1,"b":{"c":2}}'
    assert s("JSON_CONCAT", "[1]", "[[2]]", "[]") == "[1,[2]]"
    assert s("JSON_CONCAT", '"x"', '{"a": 1}') == '["x",{"a":1}]'
    assert s("JSON_CONCAT", "null", "[true]") == "[null,true]"
    assert v1("JSON_CONCAT", "[1]", "oops") is None
    assert s("JSON_CONCAT", "[1]", None) is None


def test_json_items_keys_and_records():
    assert s("JSON_ITEMS", '[{"a": 1}, "s", 2.0]') == ['{"a":1}', '"s"', "2.0"]
    assert s("JSON_ITEMS", "[]") == []
    assert v1("JSON_ITEMS", "{}") is None
    assert s("JSON_ITEMS", "null") is None
    assert s("JSON_KEYS", '{"z": 1, "a": {"n": 2}}') == ["z", "a"]
    assert s("JSON_KEYS", "[1]") is None
    assert s("JSON_KEYS", None) is None
    assert s("JSON_RECORDS", '{"n": 1, "s": "text", "o": {"x": [1]}}') == {
        "n": "1",
        "s": "text",
        "o": '{"x":[1]}',
    }
    assert s("JSON_RECORDS", "{}") == {}
    assert s("JSON_RECORDS", "") is None


def test_dump_json_writes_compact_jackson_style():
    assert dump_json({"a": [1, 2.0, 1e20, None, "q\"\n"], "b": False}) == (
        '{"a":[1,2.0,1.0E20,null,"q\\"\\n"],"b":false}'
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(json_values)
def test_dump_json_output_parses_back_to_the_same_value(value):
    assert json.loads(dump_json(value)) == value
    assert parse_json(dump_json(value)) == value


@pytest.mark.parametrize(
    ("value", "sql_type", "expected"),
    [
        (None, T.INTEGER, "null"),
        (42, T.INTEGER, "42"),
        (True, T.BOOLEAN, "true"),
        (0.1, T.DOUBLE, "0.1"),
        (12345678.9, T.DOUBLE, "1.23456789E7"),
        (decimal.Decimal("10.50"), T.Decimal(4, 2), "10.50"),
        (decimal.Decimal("1E+3"), T.Decimal(4, 0), "1000"),
        ('say "hi"', T.STRING, '"say \\"hi\\""'),
        (b"\x01\x02", T.BYTES, '"AQI="'),
        (dt.date(2001, 2, 3), T.DATE, '"2001-02-03"'),
        (dt.time(7, 5), T.TIME, '"07:05"'),
        (dt.time(7, 5, 9, 250000), T.TIME, '"07:05:09.250"'),
        (dt.datetime(2001, 2, 3, 4, 5, 6, 7000), T.TIMESTAMP, '"2001-02-03T04:05:06.007"'),
        ([1, None], T.Array(T.INTEGER), "[1,null]"),
        ({"k": [0.5]}, T.Map(T.STRING, T.Array(T.DOUBLE)), '{"k":[0.5]}'),
        (
            {"Z": 1, "a": {"B": None}},
            T.Struct((T.Field("Z", T.INTEGER), T.Field("a", T.Struct((T.Field("B", T.STRING),))))),
            '{"Z":1,"a":{"B":null}}',
        ),
        ({1: "one"}, T.Map(T.INTEGER, T.STRING), '{"1":"one"}'),
    ],
)
def test_to_json_string_serialises_each_type(value, sql_type, expected):
    assert call("TO_JSON_STRING", value, types=[sql_type]) == expected


def test_to_json_string_version_2_sorts_fields_and_keys_and_writes_jdk_doubles() -> None:
    from engine.functions import REGISTRY
    from engine.plan import types as T

    struct = T.Struct((T.Field("b", T.INTEGER), T.Field("A", T.Array(T.DOUBLE))))
    v2 = REGISTRY.resolve("TO_JSON_STRING", [struct], 2)
    value = {"b": 1, "A": [124920860860690064.0, float("nan"), float("-inf"), 1.5]}
    assert v2.invoke([value]) == '{"A":[1.24920860860690064E17,"NaN","-Infinity",1.5],"b":1}'
    keyed = REGISTRY.resolve("TO_JSON_STRING", [T.Map(T.INTEGER, T.STRING)], 2)
    assert keyed.invoke([{10: "x", 9: None}]) == '{"10":"x","9":null}'  # keys sorted as text
    # keys sort by UTF-16 unit as String.compareTo does: a surrogate pair before U+FFFD
    texts = REGISTRY.resolve("TO_JSON_STRING", [T.Map(T.STRING, T.INTEGER)], 2)
    assert texts.invoke([{"\ufffd": 2, "\U0001F600": 1}]) == '{"\U0001F600":1,"\ufffd":2}'



def test_to_json_string_version_1_keeps_the_written_order_for_saved_plans() -> None:
    from engine.functions import REGISTRY
    from engine.plan import types as T

    struct = T.Struct((T.Field("b", T.INTEGER), T.Field("A", T.DOUBLE)))
    assert REGISTRY.resolve("TO_JSON_STRING", [struct], 1).invoke([{"b": 1, "A": 1.0}]) == '{"b":1,"A":1.0}'
