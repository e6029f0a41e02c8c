"""Properties of the plan schema: what the serde writes validates, and the verdicts are sound."""

from __future__ import annotations

import decimal
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.schema import Column, LogicalSchema, Namespace
from qtt.plans.schema import BREAKING, compare_schemas, generate_schema, validate_plan_file

SCHEMA = generate_schema()


def definition(name: str) -> dict[str, Any]:
    """A schema whose root is one definition of the plan schema."""
    return {"$defs": SCHEMA["$defs"], "$ref": f"#/$defs/{name}"}


# ----------------------------------------------------------------------------- strategies

NAMES = st.sampled_from(["A", "b", "COL_1", "with space", "back`tick", "SELECT"])
PRIMITIVES = st.sampled_from(
    [T.BOOLEAN, T.INTEGER, T.BIGINT, T.DOUBLE, T.STRING, T.BYTES, T.DATE, T.TIME, T.TIMESTAMP]
)
DECIMAL_TYPES = st.integers(1, 38).flatmap(
    lambda p: st.integers(0, p).map(lambda s: T.Decimal(p, s))
)
SQL_TYPES = st.recursive(
    PRIMITIVES | DECIMAL_TYPES,
    lambda inner: st.one_of(
        inner.map(T.Array),
        st.builds(T.Map, inner, inner),
        st.lists(st.tuples(NAMES, inner), max_size=3, unique_by=lambda f: f[0]).map(
            lambda fs: T.Struct(tuple(T.Field(n, t) for n, t in fs))
        ),
    ),
    max_leaves=6,
)


def _decimal_literal(value: decimal.Decimal) -> E.Literal:
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(-exponent, 0)
    return E.Literal(value, T.Decimal(max(len(digits), scale, 1), scale))


# Literals of every type the serde encodes (engine.plan.expr.literal_to_json).
LITERALS = st.one_of(
    st.booleans().map(lambda v: E.Literal(v, T.BOOLEAN)),
    st.integers(T.INT_MIN, T.INT_MAX).map(lambda v: E.Literal(v, T.INTEGER)),
    st.integers(T.BIGINT_MIN, T.BIGINT_MAX + 1).map(lambda v: E.Literal(v, T.BIGINT)),
    st.floats().map(lambda v: E.Literal(v, T.DOUBLE)),
    st.decimals(allow_nan=False, allow_infinity=False).map(_decimal_literal),
    st.text(max_size=8).map(lambda v: E.Literal(v, T.STRING)),
    st.binary(max_size=8).map(lambda v: E.Literal(v, T.BYTES)),
    st.just(E.Literal(None, None)),
)
COLUMNS = st.builds(E.ColumnRef, NAMES, st.none() | st.sampled_from(["S", "t1"]))


def _extend(children: st.SearchStrategy[E.Expr]) -> st.SearchStrategy[E.Expr]:
    items = st.lists(children, max_size=3).map(tuple)
    return st.one_of(
        st.builds(E.Arithmetic, st.sampled_from(E.ARITHMETIC_OPS), children, children),
        st.builds(E.Comparison, st.sampled_from(E.COMPARISON_OPS), children, children),
        st.builds(E.Logical, st.sampled_from(E.LOGICAL_OPS), children, children),
        st.builds(E.Not, children),
        st.builds(E.Negate, children),
        st.builds(E.IsNull, children, st.booleans()),
        st.builds(E.In, children, items, st.booleans()),
        st.builds(E.Between, children, children, children, st.booleans()),
        st.builds(E.Like, children, children, st.none() | st.just("!"), st.booleans()),
        st.builds(E.Dereference, children, NAMES),
        st.builds(E.Subscript, children, children),
        st.builds(E.Cast, children, SQL_TYPES),
        st.builds(
            E.Case,
            st.none() | children,
            st.lists(st.builds(E.WhenClause, children, children), min_size=1, max_size=2).map(
                tuple
            ),
            st.none() | children,
        ),
        st.builds(E.FunctionCall, st.sampled_from(["ABS", "CONCAT"]), items, st.booleans()),
        st.builds(
            lambda unit, rest: E.FunctionCall("TIMESTAMPADD", (E.IntervalUnit(unit), *rest)),
            st.sampled_from(E.INTERVAL_UNITS),
            items,
        ),
        st.builds(E.CreateArray, items),
        st.builds(
            E.CreateMap, st.lists(st.builds(E.MapEntry, children, children), max_size=2).map(tuple)
        ),
        st.builds(
            E.CreateStruct,
            st.lists(st.builds(E.StructField, NAMES, children), max_size=2).map(tuple),
        ),
        st.builds(
            lambda params, body: E.Lambda(
                tuple(params), E.Arithmetic("+", body, E.LambdaVariable(params[0]))
            ),
            st.lists(st.sampled_from(["X", "Y"]), min_size=1, max_size=2, unique=True),
            children,
        ),
    )


EXPRESSIONS = st.recursive(LITERALS | COLUMNS, _extend, max_leaves=8)


# -------------------------------------------------------------- the serde's output validates


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EXPRESSIONS)
def test_every_expression_the_serde_writes_validates(expr: E.Expr) -> None:
    data = E.to_json(expr)
    assert validate_plan_file(data, definition("Expr")) == []


@settings(max_examples=150, deadline=None)
@given(LITERALS)
def test_every_literal_encoding_validates_and_reads_back(literal: E.Literal) -> None:
    data = E.to_json(literal)
    assert validate_plan_file(data, definition("Expr")) == []
    back = E.from_json(data)
    assert isinstance(back, E.Literal) and back.type == literal.type
    if isinstance(literal.value, float) and math.isnan(literal.value):
        assert isinstance(back.value, float) and math.isnan(back.value)
    else:
        assert back.value == literal.value


@pytest.mark.parametrize(
    ("type_text", "value"),
    [
        ("INTEGER", 2**31),  # out of the INTEGER range
        ("INTEGER", "1"),  # a string where a number is written
        ("DOUBLE", 1.5),  # DOUBLE is written as its repr text
        ("DOUBLE", "1,5"),
        ("DECIMAL(3, 1)", 1.5),  # DECIMAL is written as exact text
        ("BOOLEAN", "true"),
        ("BYTES", "not base64!"),
        ("DATE", 19000),  # no literal of this type is ever written
        (None, 1),  # a NULL literal carries no value
    ],
)
def test_a_literal_in_another_encoding_is_refused(type_text: str | None, value: Any) -> None:
    data = {"kind": "literal", "type": type_text, "value": value}
    assert validate_plan_file(data, definition("Expr")) != []


@settings(max_examples=80, deadline=None)
@given(SQL_TYPES)
def test_every_sql_type_text_validates(sql_type: T.SqlType) -> None:
    assert validate_plan_file(str(sql_type), definition("SqlType")) == []


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(NAMES, SQL_TYPES, st.sampled_from(list(Namespace)), st.none() | NAMES),
        max_size=4,
        unique_by=lambda c: c[0],
    )
)
def test_every_logical_schema_text_validates(
    columns: list[tuple[str, T.SqlType, Namespace, str | None]],
) -> None:
    schema = LogicalSchema(
        tuple(
            Column(n, t, ns, key if ns is Namespace.HEADERS else None)
            for n, t, ns, key in columns
        )
    )
    assert validate_plan_file(str(schema), definition("LogicalSchema")) == []


@pytest.mark.parametrize("text", ["INT", "ARRAY<STRING", "MAP<STRING>", "DECIMAL(0, 0)", "FLOAT"])
def test_a_type_text_the_serde_never_writes_is_refused(text: str) -> None:
    assert validate_plan_file(text, definition("SqlType")) != []


# ----------------------------------------------------------------- the verdicts are sound

VALUES = ["A", "B", "C", "D"]


@st.composite
def small_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """A closed object schema with an enum, a bounded number and an optional flag."""
    properties: dict[str, Any] = {
        "kind": {"type": "string", "enum": draw(st.lists(st.sampled_from(VALUES), min_size=1, unique=True))},
        "size": {"type": draw(st.sampled_from(["integer", "number", "string"]))},
    }
    if draw(st.booleans()):
        properties["size"]["minimum"] = draw(st.integers(-2, 2))
    if draw(st.booleans()):
        properties["flag"] = {"type": "boolean"}
    required = draw(st.lists(st.sampled_from(sorted(properties)), unique=True))
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(required),
        "additionalProperties": draw(st.sampled_from([False, False, True])),
    }


DOCUMENTS = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(VALUES),
        "size": st.sampled_from([-3, 0, 1, 2.5, "x"]),
        "flag": st.booleans(),
        "other": st.just(1),
    },
)


@settings(max_examples=150, deadline=None)
@given(small_schemas(), small_schemas(), st.lists(DOCUMENTS, min_size=1, max_size=10))
def test_without_a_breaking_verdict_every_old_document_stays_valid(
    old: dict[str, Any], new: dict[str, Any], documents: list[dict[str, Any]]
) -> None:
    changes = compare_schemas(old, new)
    if any(c.verdict == BREAKING for c in changes):
        return
    old_validator, new_validator = Draft202012Validator(old), Draft202012Validator(new)
    for document in documents:
        if old_validator.is_valid(document):
            assert new_validator.is_valid(document), (document, [c.render() for c in changes])


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.sampled_from(VALUES), min_size=1, unique=True),
    st.lists(st.sampled_from(VALUES), min_size=1, unique=True),
)
def test_an_enum_change_is_breaking_exactly_when_a_value_is_lost(
    old_values: list[str], new_values: list[str]
) -> None:
    old = {"enum": old_values}
    new = {"enum": new_values}
    verdicts = {c.verdict for c in compare_schemas(old, new)}
    assert (BREAKING in verdicts) == (not set(old_values) <= set(new_values))
