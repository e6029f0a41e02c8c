from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from engine.errors import EvaluationError
from engine.functions import REGISTRY
from engine.functions.registry import LambdaType
from engine.plan import types as T
from engine.plan.types import SqlType

INTS = T.Array(T.INTEGER)
MAP = T.Map(T.STRING, T.INTEGER)


def lam(*params: SqlType | None, result: SqlType | None = None) -> LambdaType:
    return LambdaType(tuple(params), result)


def call(name: str, types: Sequence[SqlType], *args: Any) -> Any:
    return REGISTRY.resolve(name, types).invoke(list(args))


# --------------------------------------------------------------------------- typing


def test_lambda_parameters_bind_from_the_collection() -> None:
    assert REGISTRY.lambda_param_types("TRANSFORM", [INTS, lam(None)], 1) == (T.INTEGER,)
    untyped = [MAP, lam(None, None), lam(None, None)]
    assert REGISTRY.lambda_param_types("TRANSFORM", untyped, 2) == (T.STRING, T.INTEGER)
    reduce_args = [MAP, T.BIGINT, lam(None, None, None)]
    assert REGISTRY.lambda_param_types("REDUCE", reduce_args, 2) == (
        T.BIGINT,
        T.STRING,
        T.INTEGER,
    )


def test_result_types_follow_the_lambda_bodies() -> None:
    typed = REGISTRY.resolve("TRANSFORM", [INTS, lam(T.INTEGER, result=T.STRING)])
    assert typed.return_type == T.Array(T.STRING)
    mapped = REGISTRY.resolve(
        "TRANSFORM",
        [
            MAP,
            lam(T.STRING, T.INTEGER, result=T.BIGINT),
            lam(T.STRING, T.INTEGER, result=T.BOOLEAN),
        ],
    )
    assert mapped.return_type == T.Map(T.BIGINT, T.BOOLEAN)
    filtered = REGISTRY.resolve("FILTER", [MAP, lam(T.STRING, T.INTEGER, result=T.BOOLEAN)])
    assert filtered.return_type == MAP
    folded = REGISTRY.resolve("REDUCE", [INTS, T.DOUBLE, lam(T.DOUBLE, T.INTEGER, result=T.DOUBLE)])
    assert folded.return_type == T.DOUBLE


def test_filter_needs_a_boolean_lambda() -> None:
    with pytest.raises(Exception, match="does not accept parameters"):
        REGISTRY.resolve("FILTER", [INTS, lam(T.INTEGER, result=T.STRING)])


# --------------------------------------------------------------------------- TRANSFORM


def test_transform_array_applies_the_lambda() -> None:
    types = [INTS, lam(T.INTEGER, result=T.INTEGER)]
    assert call("TRANSFORM", types, [1, 2, None], lambda x: None if x is None else x * 10) == [
        10,
        20,
        None,
    ]
    assert call("TRANSFORM", types, [], lambda x: x) == []
    assert call("TRANSFORM", types, None, lambda x: x) is None


def test_transform_array_fails_as_a_whole_when_the_lambda_fails() -> None:
    types = [INTS, lam(T.INTEGER, result=T.INTEGER)]
    with pytest.raises(TypeError):
        call("TRANSFORM", types, [1, None], lambda x: x + 1)


def test_transform_map_computes_keys_and_values() -> None:
    types = [
        MAP,
        lam(T.STRING, T.INTEGER, result=T.STRING),
        lam(T.STRING, T.INTEGER, result=T.INTEGER),
    ]
    result = call("TRANSFORM", types, {"a": 1, "b": 2}, lambda k, v: k.upper(), lambda k, v: v * v)
    assert result == {"A": 1, "B": 4}
    assert call("TRANSFORM", types, None, lambda k, v: k, lambda k, v: v) is None


def test_transform_map_refuses_duplicate_new_keys() -> None:
    types = [
        MAP,
        lam(T.STRING, T.INTEGER, result=T.STRING),
        lam(T.STRING, T.INTEGER, result=T.INTEGER),
    ]
    with pytest.raises(EvaluationError, match="produced the key 'same' twice"):
        call("TRANSFORM", types, {"a": 1, "b": 2}, lambda k, v: "same", lambda k, v: v)


# --------------------------------------------------------------------------- FILTER


def test_filter_array_keeps_elements_where_the_lambda_is_true() -> None:
    types = [INTS, lam(T.INTEGER, result=T.BOOLEAN)]
    keep_big = lambda x: None if x is None else x > 2  # noqa: E731
    assert call("FILTER", types, [1, 3, None, 5], keep_big) == [3, 5]
    assert call("FILTER", types, [], keep_big) == []
    assert call("FILTER", types, None, keep_big) is None


def test_filter_map_keeps_entries_where_the_lambda_is_true() -> None:
    types = [MAP, lam(T.STRING, T.INTEGER, result=T.BOOLEAN)]
    value = {"keep": 1, "drop": 2, "also": 3}
    assert call("FILTER", types, value, lambda k, v: v % 2 == 1) == {"keep": 1, "also": 3}
    assert call("FILTER", types, None, lambda k, v: True) is None


# --------------------------------------------------------------------------- REDUCE


def test_reduce_array_folds_from_the_initial_state() -> None:
    types = [INTS, T.INTEGER, lam(T.INTEGER, T.INTEGER, result=T.INTEGER)]
    assert call("REDUCE", types, [1, 2, 3], 10, lambda s, x: s + x) == 16
    assert call("REDUCE", types, [], 10, lambda s, x: s + x) == 10


def test_reduce_array_folds_in_order() -> None:
    types = [T.Array(T.STRING), T.STRING, lam(T.STRING, T.STRING, result=T.STRING)]
    assert call("REDUCE", types, ["b", "c"], "a", lambda s, x: s + x) == "abc"


def test_reduce_of_a_null_collection_is_the_initial_state() -> None:
    types = [INTS, T.INTEGER, lam(T.INTEGER, T.INTEGER, result=T.INTEGER)]
    assert call("REDUCE", types, None, 4, lambda s, x: s + x) == 4


def test_reduce_with_a_null_initial_state_is_null() -> None:
    types = [INTS, T.INTEGER, lam(T.INTEGER, T.INTEGER, result=T.INTEGER)]
    assert call("REDUCE", types, [1], None, lambda s, x: x) is None


def test_reduce_map_passes_state_key_and_value() -> None:
    types = [MAP, T.INTEGER, lam(T.INTEGER, T.STRING, T.INTEGER, result=T.INTEGER)]
    value = {"ab": 5, "abc": 7}
    assert call("REDUCE", types, value, 0, lambda s, k, v: s + len(k) * v) == 31
    assert call("REDUCE", types, None, 9, lambda s, k, v: s) == 9
    assert call("REDUCE", types, value, None, lambda s, k, v: s) is None


def test_reduce_map_walks_the_entries_in_javas_hash_map_order() -> None:
    types = [MAP, T.STRING, lam(T.STRING, T.STRING, T.INTEGER, result=T.STRING)]
    value = {"apple": 1, "kiwi": 2, "banana": 3, "fig": 4}
    # A HashMap sized for four keys has 8 buckets after its first resize: "banana" hashes
    # to bucket 0, "apple" to 1, "kiwi" to 2 and "fig" to 5.
    assert call("REDUCE", types, value, "", lambda s, k, v: s + k[0]) == "bakf"


def test_reduce_map_order_depends_on_the_key_type() -> None:
    ints = T.Map(T.INTEGER, T.INTEGER)
    types = [ints, T.INTEGER, lam(T.INTEGER, T.INTEGER, T.INTEGER, result=T.INTEGER)]
    # Two keys: four buckets; 8 is in bucket 0, 3 in bucket 3.
    assert call("REDUCE", types, {3: 1, 8: 2}, 0, lambda s, k, v: s * 10 + v) == 21


def test_reduce_map_version_one_keeps_the_maps_own_order() -> None:
    types = [MAP, T.STRING, lam(T.STRING, T.STRING, T.INTEGER, result=T.STRING)]
    saved = REGISTRY.resolve("REDUCE", types, semantics=1)
    value = {"apple": 1, "kiwi": 2, "banana": 3, "fig": 4}
    assert saved.invoke([value, "", lambda s, k, v: s + k[0]]) == "akbf"
    # Reducing an array did not change: its calls still record version 1.
    arrays = [INTS, T.INTEGER, lam(T.INTEGER, T.INTEGER, result=T.INTEGER)]
    assert REGISTRY.settled_semantics("REDUCE", arrays, 2) == 1
    assert REGISTRY.settled_semantics("REDUCE", types, 2) == 2
