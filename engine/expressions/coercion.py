"""Common types of expression lists (ARRAY[...], MAP(...), CASE branches, IN lists).

Follows ksqlDB's CoercionUtil: the first non-NULL item sets the target type; later items
widen it; a STRING literal converts to the target type when its text parses as one
(``ARRAY[1, '2']`` is ``ARRAY<INTEGER>``); a non-string literal converts to STRING when
the target is STRING; structs merge their fields.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.data.values import parse_date_text, parse_time_text, parse_timestamp_text
from engine.errors import TypeCheckError
from engine.expressions.cast import numeric_type_of_text, parse_boolean_exact
from engine.plan import types as T
from engine.plan.expr import Expr, Literal, format_sql
from engine.plan.types import BaseType, SqlType


def is_string_literal(expr: Expr) -> bool:
    """Whether ``expr`` is a non-NULL STRING literal."""
    return isinstance(expr, Literal) and expr.value is not None and expr.type == T.STRING


def common_type(items: Sequence[tuple[Expr, SqlType | None]]) -> SqlType | None:
    """The common type of typed expressions; None when every item is a NULL literal."""
    target: SqlType | None = None
    for expr, sql_type in items:
        if sql_type is None:
            continue
        if target is None:
            target = sql_type
            continue
        target = _widen_with(expr, sql_type, target)
    return target


def _incompatible(expr: Expr, source: SqlType, target: SqlType) -> TypeCheckError:
    return TypeCheckError(
        f"operator does not exist: {target} = {source} ({format_sql(expr)})\n"
        "Hint: You might need to add explicit type casts."
    )


def _widen_with(expr: Expr, source: SqlType, target: SqlType) -> SqlType:
    if is_string_literal(expr) and target.base is not BaseType.STRING:
        return _string_literal_as(expr, target)
    if target.base is BaseType.STRING and isinstance(expr, Literal):
        return target
    merged = merge_types(source, target)
    if merged is None:
        raise _incompatible(expr, source, target)
    return merged


def _string_literal_as(expr: Expr, target: SqlType) -> SqlType:
    assert isinstance(expr, Literal)
    text: str = expr.value
    base = target.base
    try:
        if target.is_numeric:
            found = numeric_type_of_text(text)
            return T.widen_numeric(target, found)
        if base is BaseType.BOOLEAN:
            parse_boolean_exact(text)
            return target
        if base is BaseType.TIMESTAMP:
            parse_timestamp_text(text)
            return target
        if base is BaseType.DATE:
            parse_date_text(text)
            return target
        if base is BaseType.TIME:
            parse_time_text(text)
            return target
    except ValueError:
        raise TypeCheckError(f'invalid input syntax for type {target}: "{text}".') from None
    raise _incompatible(expr, T.STRING, target)


def merge_types(a: SqlType, b: SqlType) -> SqlType | None:
    """The type both ``a`` and ``b`` widen to, or None when there is none."""
    if a == b:
        return a
    if a.is_numeric and b.is_numeric:
        return T.widen_numeric(a, b)
    if isinstance(a, T.Array) and isinstance(b, T.Array):
        item = merge_types(a.item, b.item)
        return None if item is None else T.Array(item)
    if isinstance(a, T.Map) and isinstance(b, T.Map):
        key, value = merge_types(a.key, b.key), merge_types(a.value, b.value)
        return None if key is None or value is None else T.Map(key, value)
    if isinstance(a, T.Struct) and isinstance(b, T.Struct):
        fields: list[T.Field] = []
        for f in b.fields:
            other = a.field(f.name)
            if other is None:
                fields.append(f)
                continue
            merged = merge_types(other.type, f.type)
            if merged is None:
                return None
            fields.append(T.Field(f.name, merged))
        fields.extend(f for f in a.fields if b.field(f.name) is None)
        return T.Struct(tuple(fields))
    if T.can_implicitly_cast(a, b):
        return b
    if T.can_implicitly_cast(b, a):
        return a
    return None
