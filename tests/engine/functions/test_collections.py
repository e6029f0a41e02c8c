from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import EvaluationError, TypeCheckError
from engine.functions import REGISTRY
from engine.plan import types as T
from engine.plan.types import SqlType

INTS = T.Array(T.INTEGER)
STRINGS = T.Array(T.STRING)
SMAP = T.Map(T.STRING, T.INTEGER)


def call(name: str, types: Sequence[SqlType], *args: Any) -> Any:
    return REGISTRY.resolve(name, types).invoke(list(args))


def return_type(name: str, types: Sequence[SqlType]) -> SqlType:
    return REGISTRY.resolve(name, types).return_type


# --------------------------------------------------------------------------- ARRAY_CONTAINS, POSITION


def test_array_contains_finds_values_and_nulls() -> None:
    assert call("ARRAY_CONTAINS", [STRINGS, T.STRING], ["x", "y"], "y") is True
    assert call("ARRAY_CONTAINS", [STRINGS, T.STRING], ["x", "y"], "z") is False
    assert call("ARRAY_CONTAINS", [STRINGS, T.STRING], ["x", None], None) is True


def test_array_contains_of_a_null_array_is_false() -> None:
    assert call("ARRAY_CONTAINS", [INTS, T.INTEGER], None, 1) is False


def test_array_contains_compares_nested_arrays_by_content() -> None:
    nested = T.Array(INTS)
    assert call("ARRAY_CONTAINS", [nested, INTS], [[1, 2], [3]], [3]) is True


def test_array_position_is_one_based_and_zero_when_missing() -> None:
    assert call("ARRAY_POSITION", [INTS, T.INTEGER], [5, 6, 6], 6) == 2
    assert call("ARRAY_POSITION", [INTS, T.INTEGER], [5, 6], 7) == 0
    assert call("ARRAY_POSITION", [INTS, T.INTEGER], None, 7) == 0
    assert call("ARRAY_POSITION", [INTS, T.INTEGER], [1, None], None) == 2


# --------------------------------------------------------------------------- set functions


def test_array_distinct_keeps_first_appearances() -> None:
    assert call("ARRAY_DISTINCT", [INTS], [3, 1, 3, None, 1, None]) == [3, 1, None]
    assert call("ARRAY_DISTINCT", [INTS], None) is None
    assert call("ARRAY_DISTINCT", [INTS], []) == []


def test_array_distinct_compares_maps_ignoring_order() -> None:
    maps = T.Array(SMAP)
    value = [{"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": 1}]
    assert call("ARRAY_DISTINCT", [maps], value) == [{"a": 1, "b": 2}, {"a": 1}]


def test_array_distinct_treats_nan_as_equal_to_itself() -> None:
    result = call("ARRAY_DISTINCT", [T.Array(T.DOUBLE)], [math.nan, 1.0, math.nan])
    assert len(result) == 2 and math.isnan(result[0])


def test_array_except_intersect_union() -> None:
    left, right = [4, 4, 5, 6, None], [6, 7, None]
    assert call("ARRAY_EXCEPT", [INTS, INTS], left, right) == [4, 5]
    assert call("ARRAY_INTERSECT", [INTS, INTS], left, right) == [6, None]
    assert call("ARRAY_UNION", [INTS, INTS], left, right) == [4, 5, 6, None, 7]


def test_set_functions_of_null_are_null() -> None:
    for name in ("ARRAY_EXCEPT", "ARRAY_INTERSECT", "ARRAY_UNION"):
        assert call(name, [INTS, INTS], None, [1]) is None, name
        assert call(name, [INTS, INTS], [1], None) is None, name


def test_array_concat_treats_one_null_side_as_empty() -> None:
    assert call("ARRAY_CONCAT", [INTS, INTS], [1, 1], [2]) == [1, 1, 2]
    assert call("ARRAY_CONCAT", [INTS, INTS], None, [2]) == [2]
    assert call("ARRAY_CONCAT", [INTS, INTS], [1], None) == [1]
    assert call("ARRAY_CONCAT", [INTS, INTS], None, None) is None


@given(st.lists(st.integers(-5, 5)), st.lists(st.integers(-5, 5)))
def test_union_is_the_distinct_concatenation(a: list[int], b: list[int]) -> None:
    union = call("ARRAY_UNION", [INTS, INTS], a, b)
    assert union == call("ARRAY_DISTINCT", [INTS], a + b)
    assert set(call("ARRAY_INTERSECT", [INTS, INTS], a, b)) == set(a) & set(b)
    assert set(call("ARRAY_EXCEPT", [INTS, INTS], a, b)) == set(a) - set(b)


# --------------------------------------------------------------------------- ARRAY_REMOVE, SORT, ...


def test_array_remove_drops_every_equal_element() -> None:
    assert call("ARRAY_REMOVE", [STRINGS, T.STRING], ["a", "b", "a"], "a") == ["b"]
    assert call("ARRAY_REMOVE", [STRINGS, T.STRING], ["a", None], None) == ["a"]
    assert call("ARRAY_REMOVE", [STRINGS, T.STRING], None, "a") is None


def test_array_sort_puts_nulls_last_in_both_directions() -> None:
    assert call("ARRAY_SORT", [INTS], [3, None, 1, 2]) == [1, 2, 3, None]
    assert call("ARRAY_SORT", [INTS, T.STRING], [3, None, 1], "desc") == [3, 1, None]
    assert call("ARRAY_SORT", [STRINGS], ["b", "B", "a"]) == ["B", "a", "b"]
    assert call("ARRAY_SORT", [INTS], None) is None


def test_array_sort_with_an_unknown_direction_is_null() -> None:
    assert call("ARRAY_SORT", [INTS, T.STRING], [2, 1], "sideways") is None


def test_array_sort_of_nested_arrays_is_an_error() -> None:
    with pytest.raises(EvaluationError, match="primitive values only"):
        call("ARRAY_SORT", [T.Array(INTS)], [[2], [1]])


def test_array_max_and_min_skip_nulls() -> None:
    assert call("ARRAY_MAX", [INTS], [4, None, 9, -1]) == 9
    assert call("ARRAY_MIN", [INTS], [4, None, 9, -1]) == -1
    assert call("ARRAY_MAX", [T.Array(T.BOOLEAN)], [False, True]) is True
    assert call("ARRAY_MIN", [STRINGS], ["pear", "apple"]) == "apple"
    assert return_type("ARRAY_MAX", [T.Array(T.Decimal(4, 1))]) == T.Decimal(4, 1)


def test_array_max_of_empty_or_all_null_or_null_is_null() -> None:
    assert call("ARRAY_MAX", [INTS], []) is None
    assert call("ARRAY_MIN", [INTS], [None, None]) is None
    assert call("ARRAY_MAX", [INTS], None) is None


def test_array_length() -> None:
    assert call("ARRAY_LENGTH", [INTS], [1, None, 3]) == 3
    assert call("ARRAY_LENGTH", [INTS], []) == 0
    assert call("ARRAY_LENGTH", [INTS], None) is None
    assert return_type("ARRAY_LENGTH", [T.Array(SMAP)]) == T.INTEGER


def test_array_join_prints_java_text() -> None:
    doubles = T.Array(T.DOUBLE)
    assert call("ARRAY_JOIN", [doubles], [1.0, 1e7, None]) == "1.0,1.0E7,null"
    assert call("ARRAY_JOIN", [T.Array(T.BOOLEAN), T.STRING], [True, False], "|") == "true|false"
    dec = T.Array(T.Decimal(3, 2))
    assert call("ARRAY_JOIN", [dec, T.STRING], [Decimal("1.50")], None) == "1.50"
    assert call("ARRAY_JOIN", [INTS, T.STRING], None, ",") is None


def test_array_join_of_other_elements_fails_as_ksqldbs_does_from_version_2() -> None:
    structs = T.Array(T.Struct((T.Field("A", T.INTEGER),)))
    with pytest.raises(EvaluationError) as raised:
        call("ARRAY_JOIN", [structs], [{"A": 1}])
    assert str(raised.value) == (
        "error: hit element of type org.apache.kafka.connect.data.Struct which is currently not supported"
    )
    with pytest.raises(EvaluationError, match="^error: hit element of type java.util.ArrayList which"):
        call("ARRAY_JOIN", [T.Array(INTS), T.STRING], [[1]], "-")
    # Only a present element fails, as ksqlDB checks each one.
    assert call("ARRAY_JOIN", [structs], [None, None]) == "null,null"
    # Version 1, kept for saved plans, prints them.
    assert REGISTRY.resolve("ARRAY_JOIN", [T.Array(INTS)], 1).invoke([[[1]]]) == "[1]"


def test_slice_is_one_based_and_inclusive() -> None:
    args = [INTS, T.INTEGER, T.INTEGER]
    assert call("SLICE", args, [10, 20, 30, 40], 2, 3) == [20, 30]
    assert call("SLICE", args, [10, 20, 30], None, 2) == [10, 20]
    assert call("SLICE", args, [10, 20, 30], 2, None) == [20, 30]
    assert call("SLICE", args, [10, 20, 30], 0, 2) is None
    assert call("SLICE", args, [10, 20, 30], 2, 4) is None
    assert call("SLICE", args, None, 1, 1) is None


def test_generate_series_counts_up_or_down() -> None:
    assert call("GENERATE_SERIES", [T.INTEGER, T.INTEGER], 2, 5) == [2, 3, 4, 5]
    assert call("GENERATE_SERIES", [T.INTEGER, T.INTEGER], 1, -1) == [1, 0, -1]
    assert call("GENERATE_SERIES", [T.BIGINT, T.BIGINT, T.INTEGER], 0, 10, 4) == [0, 4, 8]
    assert call("GENERATE_SERIES", [T.INTEGER, T.INTEGER, T.INTEGER], 5, 0, -5) == [5, 0]
    assert call("GENERATE_SERIES", [T.INTEGER, T.INTEGER], 7, 7) == [7]
    assert call("GENERATE_SERIES", [T.INTEGER, T.INTEGER], None, 7) is None
    assert return_type("GENERATE_SERIES", [T.BIGINT, T.BIGINT]) == T.Array(T.BIGINT)


def test_generate_series_rejects_zero_and_backward_steps_with_ksqldbs_messages() -> None:
    with pytest.raises(EvaluationError, match="^GENERATE_SERIES step cannot be zero$"):
        call("GENERATE_SERIES", [T.INTEGER, T.INTEGER, T.INTEGER], 1, 5, 0)
    with pytest.raises(EvaluationError, match="^GENERATE_SERIES step has wrong sign$"):
        call("GENERATE_SERIES", [T.INTEGER, T.INTEGER, T.INTEGER], 1, 5, -1)
    with pytest.raises(EvaluationError, match="^GENERATE_SERIES step has wrong sign$"):
        call("GENERATE_SERIES", [T.BIGINT, T.BIGINT, T.INTEGER], 5, 1, 1)
    # Version 2, kept for saved plans, has kspark's own wording.
    saved = REGISTRY.resolve("GENERATE_SERIES", [T.INTEGER, T.INTEGER, T.INTEGER], 2)
    with pytest.raises(EvaluationError, match="moves away"):
        saved.invoke([1, 5, -1])


INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def test_generate_series_of_ints_wraps_like_javas_int_arithmetic() -> None:
    ints = [T.INTEGER, T.INTEGER]
    # end - start wraps to -1: the step is -1, two values, the second wrapping past MIN.
    assert call("GENERATE_SERIES", ints, INT_MIN, INT_MAX) == [INT_MIN, INT_MAX]
    assert call("GENERATE_SERIES", ints, INT_MAX - 1, INT_MAX) == [INT_MAX - 1, INT_MAX]
    # 1 + (MAX / 1) wraps below zero: ArrayList refuses the capacity.
    with pytest.raises(EvaluationError, match="^Illegal Capacity: -2147483648$"):
        call("GENERATE_SERIES", [T.INTEGER, T.INTEGER, T.INTEGER], 0, INT_MAX, 1)
    # A step past the end wraps the next value, which is never reached.
    assert call("GENERATE_SERIES", [T.INTEGER, T.INTEGER, T.INTEGER], INT_MAX - 2, INT_MAX, 2) == [
        INT_MAX - 2,
        INT_MAX,
    ]


def test_generate_series_of_bigints_counts_in_an_int() -> None:
    longs = [T.BIGINT, T.BIGINT, T.INTEGER]
    # The count is 1 + (int) (diff / step): 2^32 + 2 truncates to 2, so three values.
    assert call("GENERATE_SERIES", longs, 0, 2**32 + 2, 1) == [0, 1, 2]
    assert call("GENERATE_SERIES", [T.BIGINT, T.BIGINT], LONG_MIN, LONG_MAX) == [LONG_MIN, LONG_MAX]
    # Version 2, kept for saved plans, counts in unbounded integers.
    saved = REGISTRY.resolve("GENERATE_SERIES", longs, 2)
    assert saved.invoke([LONG_MAX - 1, LONG_MAX, 1]) == [LONG_MAX - 1, LONG_MAX]


# --------------------------------------------------------------------------- maps


def test_entries_builds_k_v_structs_optionally_sorted() -> None:
    value = {"b": 2, "a": 1}
    assert call("ENTRIES", [SMAP, T.BOOLEAN], value, True) == [
        {"K": "a", "V": 1},
        {"K": "b", "V": 2},
    ]
    # Unsorted: Java's HashMap order; "a" (97) and "b" (98) are in buckets 1 and 2 of four.
    assert call("ENTRIES", [SMAP, T.BOOLEAN], value, False)[0] == {"K": "a", "V": 1}
    saved = REGISTRY.resolve("ENTRIES", [SMAP, T.BOOLEAN], 1)
    assert saved.invoke([value, False])[0] == {"K": "b", "V": 2}
    assert call("ENTRIES", [SMAP, T.BOOLEAN], None, True) is None
    assert return_type("ENTRIES", [T.Map(T.STRING, T.DOUBLE), T.BOOLEAN]) == T.Array(
        T.Struct((T.Field("K", T.STRING), T.Field("V", T.DOUBLE)))
    )


def test_entries_needs_string_keys() -> None:
    with pytest.raises(Exception, match="does not accept parameters"):
        REGISTRY.resolve("ENTRIES", [T.Map(T.INTEGER, T.INTEGER), T.BOOLEAN])


def test_map_keys_and_values() -> None:
    value = {"x": [1], "y": None}
    mtype = T.Map(T.STRING, INTS)
    assert call("MAP_KEYS", [mtype], value) == ["x", "y"]
    assert call("MAP_VALUES", [mtype], value) == [[1], None]
    assert call("MAP_KEYS", [mtype], {}) == []
    assert call("MAP_VALUES", [mtype], None) is None
    assert return_type("MAP_VALUES", [mtype]) == T.Array(INTS)


def test_map_keys_values_and_entries_walk_the_map_in_javas_hash_map_order() -> None:
    value = {"apple": 1, "kiwi": 2, "banana": 3, "fig": 4}
    # Four keys: a HashMap(4) grows to 8 buckets; banana is in 0, apple 1, kiwi 2, fig 5.
    assert call("MAP_KEYS", [SMAP], value) == ["banana", "apple", "kiwi", "fig"]
    assert call("MAP_VALUES", [SMAP], value) == [3, 1, 2, 4]
    assert [e["K"] for e in call("ENTRIES", [SMAP, T.BOOLEAN], value, False)] == [
        "banana", "apple", "kiwi", "fig",
    ]
    # Saved plans (version 1) keep the map's own order.
    assert REGISTRY.resolve("MAP_KEYS", [SMAP], 1).invoke([value]) == list(value)
    assert REGISTRY.resolve("MAP_VALUES", [SMAP], 1).invoke([value]) == [1, 2, 3, 4]


def test_sorted_entries_compare_keys_by_utf16_code_units_as_java_does() -> None:
    # U+1F600 is the surrogate pair D83D DE00, which sorts before U+FFFD in Java.
    value = {"\ufffd": 1, "\U0001F600": 2}
    assert [e["V"] for e in call("ENTRIES", [SMAP, T.BOOLEAN], value, True)] == [2, 1]


def test_map_union_prefers_the_second_map() -> None:
    assert call("MAP_UNION", [SMAP, SMAP], {"a": 1, "b": 2}, {"b": None, "c": 3}) == {
        "a": 1,
        "b": None,
        "c": 3,
    }
    assert call("MAP_UNION", [SMAP, SMAP], None, {"c": 3}) == {"c": 3}
    assert call("MAP_UNION", [SMAP, SMAP], None, None) is None


def test_as_map_pairs_keys_with_values() -> None:
    args = [STRINGS, INTS]
    assert call("AS_MAP", args, ["p", "q"], [7, 8, 9]) == {"p": 7, "q": 8}
    assert call("AS_MAP", args, ["p", "q"], [7]) == {"p": 7, "q": None}
    assert call("AS_MAP", args, None, [1]) is None
    assert return_type("AS_MAP", args) == T.Map(T.STRING, T.INTEGER)


def test_generate_series_of_bigints_takes_an_integer_step() -> None:
    resolved = REGISTRY.resolve("GENERATE_SERIES", [T.BIGINT, T.BIGINT, T.INTEGER])
    assert resolved.signature.params == (T.BIGINT, T.BIGINT, T.INTEGER)
    assert resolved.return_type == T.Array(T.BIGINT)
    assert resolved.invoke([2**40, 2**40 + 5, 2]) == [2**40, 2**40 + 2, 2**40 + 4]
    assert resolved.invoke([10, 4, -3]) == [10, 7, 4]


def test_generate_series_takes_an_integer_step_as_ksqldb_does():
    assert REGISTRY.resolve("GENERATE_SERIES", [T.INTEGER, T.BIGINT, T.INTEGER]).return_type == T.Array(T.BIGINT)
    with pytest.raises(TypeCheckError, match=r"^Function 'generate_series' does not accept parameters \(BIGINT, BIGINT, BIGINT\)"):
        REGISTRY.resolve("GENERATE_SERIES", [T.BIGINT, T.BIGINT, T.BIGINT])
    assert REGISTRY.resolve("GENERATE_SERIES", [T.BIGINT, T.BIGINT, T.BIGINT], 1).invoke([1, 5, 2]) == [1, 3, 5]


def test_array_join_version_3_writes_doubles_with_the_jdks_digits() -> None:
    doubles = T.Array(T.DOUBLE)
    join = REGISTRY.resolve("ARRAY_JOIN", [doubles], 3)
    assert join.invoke([[124920860860690064.0, None, 0.5, 1e7]]) == "1.24920860860690064E17,null,0.5,1.0E7"
    join_with = REGISTRY.resolve("ARRAY_JOIN", [doubles, T.STRING], 3)
    assert join_with.invoke([[5e-324, 2.0**-127], "|"]) == "4.9E-324|5.8774717541114375E-39"
    # versions 1 and 2 keep the shortest text for saved plans
    for version in (1, 2):
        old = REGISTRY.resolve("ARRAY_JOIN", [doubles], version)
        assert old.invoke([[124920860860690064.0]]) == "1.2492086086069006E17"
