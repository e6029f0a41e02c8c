"""Higher-order functions: TRANSFORM, FILTER and REDUCE over arrays and maps.

A lambda argument reaches the implementation as a plain Python callable taking the
lambda's parameters positionally (``(x) => ...`` for arrays, ``(k, v) => ...`` for maps,
with the state first for REDUCE). Errors the lambda raises propagate, so one bad element
makes the whole call NULL, as in ksqlDB.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.errors import EvaluationError
from engine.functions.java_hash import java_map_order
from engine.functions.registry import Generic, LambdaType, scalar
from engine.plan import types as T
from engine.plan.types import SqlType

_T = Generic("T")
_R = Generic("R")
_K = Generic("K")
_V = Generic("V")
_K2 = Generic("K2")
_V2 = Generic("V2")
_S = Generic("S")


@scalar("TRANSFORM", params=[T.Array(_T), LambdaType((_T,), _R)], returns=T.Array(_R))
def transform_array(array: list[Any], fn: Callable[[Any], Any]) -> list[Any]:
    """Apply the lambda to every element."""
    return [fn(v) for v in array]


@scalar(
    "TRANSFORM",
    params=[T.Map(_K, _V), LambdaType((_K, _V), _K2), LambdaType((_K, _V), _V2)],
    returns=T.Map(_K2, _V2),
)
def transform_map(
    value: dict[Any, Any],
    key_fn: Callable[[Any, Any], Any],
    value_fn: Callable[[Any, Any], Any],
) -> dict[Any, Any]:
    """Compute a new key and a new value from every entry; two equal new keys are an error."""
    out: dict[Any, Any] = {}
    for k, v in value.items():
        new_key = key_fn(k, v)
        if new_key in out:
            raise EvaluationError(
                f"TRANSFORM produced the key {new_key!r} twice; expected distinct keys."
            )
        out[new_key] = value_fn(k, v)
    return out


@scalar("FILTER", params=[T.Array(_T), LambdaType((_T,), T.BOOLEAN)], returns=T.Array(_T))
def filter_array(array: list[Any], fn: Callable[[Any], Any]) -> list[Any]:
    """The elements for which the lambda is true (NULL counts as false)."""
    return [v for v in array if fn(v) is True]


@scalar(
    "FILTER",
    params=[T.Map(_K, _V), LambdaType((_K, _V), T.BOOLEAN)],
    returns=T.Map(_K, _V),
)
def filter_map(value: dict[Any, Any], fn: Callable[[Any, Any], Any]) -> dict[Any, Any]:
    """The entries for which the lambda is true (NULL counts as false)."""
    return {k: v for k, v in value.items() if fn(k, v) is True}


@scalar(
    "REDUCE",
    params=[T.Array(_T), _S, LambdaType((_S, _T), _S)],
    returns=_S,
    null_propagating=False,
)
def reduce_array(array: list[Any] | None, state: Any, fn: Callable[[Any, Any], Any]) -> Any:
    """Fold the elements into the state; a NULL array gives the initial state, a NULL state NULL."""
    if state is None:
        return None
    if array is None:
        return state
    for v in array:
        state = fn(state, v)
    return state


@scalar(
    "REDUCE",
    params=[T.Map(_K, _V), _S, LambdaType((_S, _K, _V), _S)],
    returns=_S,
    null_propagating=False,
    until=1,
)
def reduce_map(value: dict[Any, Any] | None, state: Any, fn: Callable[[Any, Any, Any], Any]) -> Any:
    """Fold the entries into the state in the map's own order (version 1, for saved plans).

    A NULL map gives the initial state, a NULL state NULL.
    """
    if state is None:
        return None
    if value is None:
        return state
    for k, v in value.items():
        state = fn(state, k, v)
    return state


@scalar(
    "REDUCE",
    params=[T.Map(_K, _V), _S, LambdaType((_S, _K, _V), _S)],
    returns=_S,
    null_propagating=False,
    since=2,
    typed=True,
)
def reduce_map_hash_order(
    value: dict[Any, Any] | None,
    state: Any,
    fn: Callable[[Any, Any, Any], Any],
    *,
    arg_types: Sequence[SqlType | None] = (),
) -> Any:
    """Fold the entries into the state in Java's HashMap order, as ksqlDB iterates the map.

    A NULL map gives the initial state, a NULL state NULL.
    """
    if state is None:
        return None
    if value is None:
        return state
    for k, v in java_map_order(value, arg_types[0] if arg_types else None):
        state = fn(state, k, v)
    return state
