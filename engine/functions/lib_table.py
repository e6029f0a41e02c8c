"""Table functions: each call returns a list of values, one output row per value.

A NULL argument yields no rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.errors import EvaluationError
from engine.functions.lib_math import ANY_DECIMAL
from engine.functions.registry import Generic, table_function
from engine.plan import types as T
from engine.plan.types import SqlType

_T = Generic("T")


@table_function("EXPLODE", params=[T.Array(_T)], returns=_T)
def explode(array: list[Any] | None) -> list[Any]:
    """One row per element of the array."""
    return [] if array is None else list(array)


def _decimal_item(args: Sequence[SqlType | None]) -> SqlType:
    array = args[0]
    return array.item if isinstance(array, T.Array) else T.STRING


@table_function("EXPLODE", params=[T.Array(ANY_DECIMAL)], returns=_decimal_item)
def explode_decimals(array: list[Any] | None) -> list[Any]:
    """One row per element of an array of DECIMALs, typed as the array's elements (ksqlDB
    declares this overload beside the generic one)."""
    return explode(array)


@table_function("CUBE_EXPLODE", params=[T.Array(_T)], returns=T.Array(_T), until=1)
def cube_explode(array: list[Any] | None) -> list[list[Any]]:
    """One row per combination of the elements kept or replaced by NULL (2^n rows).

    Rows count in binary with the first element as the most significant bit, from all-NULL
    to all-kept; a NULL element has only one state, so duplicate rows are not produced.
    """
    if array is None:
        return []
    n = len(array)
    null_bits = sum(1 << (n - 1 - j) for j, v in enumerate(array) if v is None)
    rows: list[list[Any]] = []
    for mask in range(1 << n):
        if mask & null_bits:
            continue
        rows.append([v if mask >> (n - 1 - j) & 1 else None for j, v in enumerate(array)])
    return rows


CUBE_MAX_COLUMNS = 20


@table_function("CUBE_EXPLODE", params=[T.Array(_T)], returns=T.Array(_T), since=2)
def cube_explode_bounded(array: list[Any] | None) -> list[list[Any]]:
    """One row per combination of at most 20 elements kept or replaced by NULL; more fail."""
    if array is not None and len(array) > CUBE_MAX_COLUMNS:
        raise EvaluationError(
            f"cube_explode: too many columns ({len(array)}); max is {CUBE_MAX_COLUMNS}"
        )
    return cube_explode(array)
