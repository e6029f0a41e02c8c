"""Property: parsing the formatted text of an expression gives the expression back."""

from __future__ import annotations

import decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.expressions.cast import cast_semantics
from engine.functions import REGISTRY
from engine.parser import parse_expression
from engine.plan import expr as E
from engine.plan import types as T

NAMES = st.sampled_from(["A", "B", "COL_1", "KEY", "MAP", "SELECT", "mixedCase", "with space"])
PARAMS = st.sampled_from(["X", "Y", "Z"])
FUNCTIONS = st.sampled_from(["ABS", "CONCAT", "F"])


def _decimal_literal(value: decimal.Decimal) -> E.Literal:
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = -exponent
    return E.Literal(value, T.Decimal(max(len(digits), scale, 1), scale))


# Literals as the parser types them: the type follows from the text.
LITERALS = st.one_of(
    st.integers(T.INT_MIN, T.INT_MAX).map(lambda v: E.Literal(v, T.INTEGER)),
    st.integers(T.INT_MAX + 1, T.BIGINT_MAX).map(lambda v: E.Literal(v, T.BIGINT)),
    st.integers(T.BIGINT_MIN, T.INT_MIN - 1).map(lambda v: E.Literal(v, T.BIGINT)),
    st.decimals(places=3, min_value=-1000, max_value=1000, allow_nan=False, allow_infinity=False)
    .filter(lambda d: d.as_tuple().exponent == -3)  # type: ignore[union-attr]
    .map(_decimal_literal),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: E.Literal(v, T.DOUBLE)),
    st.text(max_size=5).map(lambda v: E.Literal(v, T.STRING)),
    st.booleans().map(lambda v: E.Literal(v, T.BOOLEAN)),
    st.just(E.Literal(None, None)),
)
COLUMNS = st.builds(E.ColumnRef, NAMES, st.none() | st.sampled_from(["S", "t1"]))
TYPES = st.sampled_from(
    [
        T.INTEGER,
        T.STRING,
        T.Decimal(4, 2),
        T.Array(T.BIGINT),
        T.Map(T.STRING, T.DOUBLE),
        T.Struct((T.Field("a", T.INTEGER), T.Field("B", T.Array(T.DATE)))),
    ]
)


def _not_numeric_literal(e: E.Expr) -> bool:
    # "-1" and "-1[2]" start with the literal -1 (as in ksqlDB), so Negate cannot wrap them.
    while isinstance(e, E.Subscript | E.Dereference):
        e = e.base
    return not (
        isinstance(e, E.Literal)
        and isinstance(e.value, int | float | decimal.Decimal)
        and not isinstance(e.value, bool)
    )


def _extend(children: st.SearchStrategy[E.Expr]) -> st.SearchStrategy[E.Expr]:
    lists = st.lists(children, min_size=1, max_size=3).map(tuple)
    return st.one_of(
        st.builds(E.Arithmetic, st.sampled_from(sorted(E.Arithmetic.OPS)), children, children),
        st.builds(E.Comparison, st.sampled_from(sorted(E.Comparison.OPS)), children, children),
        st.builds(E.Logical, st.sampled_from(["AND", "OR"]), children, children),
        st.builds(E.Not, children),
        children.filter(_not_numeric_literal).map(E.Negate),
        st.builds(E.IsNull, children, st.booleans()),
        st.builds(E.In, children, lists, st.booleans()),
        st.builds(E.Between, children, children, children, st.booleans()),
        st.builds(
            E.Like, children, children, st.none() | st.sampled_from(["!", "'"]), st.booleans()
        ),
        st.builds(E.Dereference, children, NAMES),
        st.builds(E.Subscript, children, children),
        # a parsed CAST records the version of CAST's behaviour for its target type
        st.builds(lambda c, t: E.Cast(c, t, semantics=cast_semantics(t)), children, TYPES),
        st.builds(
            E.Case,
            st.none() | children,
            st.lists(st.builds(E.WhenClause, children, children), min_size=1, max_size=2).map(
                tuple
            ),
            st.none() | children,
        ),
        st.builds(
            lambda name, args: E.FunctionCall(name, args, semantics=REGISTRY.current_semantics(name)),
            FUNCTIONS,
            st.lists(children, max_size=3).map(tuple),
        ),
        st.just(E.FunctionCall("COUNT", (), star=True)),
        st.builds(
            lambda unit, rest: E.FunctionCall(
                "TIMESTAMPADD", (E.IntervalUnit(unit), *rest),
                semantics=REGISTRY.current_semantics("TIMESTAMPADD"),
            ),
            st.sampled_from(["SECONDS", "DAYS", "MILLISECONDS"]),
            st.lists(children, max_size=2),
        ),
        st.builds(E.CreateArray, st.lists(children, max_size=3).map(tuple)),
        st.builds(
            E.CreateMap,
            st.lists(st.builds(E.MapEntry, children, children), max_size=2).map(tuple),
        ),
        st.builds(
            E.CreateStruct,
            st.lists(
                st.builds(E.StructField, NAMES, children), max_size=2, unique_by=lambda f: f.name
            ).map(tuple),
        ),
        st.builds(_lambda_call, st.lists(PARAMS, min_size=1, max_size=2, unique=True), children),
    )


def _lambda_call(params: list[str], body: E.Expr) -> E.Expr:
    # The body uses the parameters so that LambdaVariable nodes are exercised.
    uses = E.Arithmetic("+", body, E.LambdaVariable(params[-1]))
    return E.FunctionCall("TRANSFORM", (E.ColumnRef("A"), E.Lambda(tuple(params), uses)))


EXPRESSIONS = st.recursive(st.one_of(LITERALS, COLUMNS), _extend, max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
def test_parse_of_format_sql_gives_the_expression_back(expr: E.Expr) -> None:
    text = E.format_sql(expr)
    assert parse_expression(text) == expr, text


def test_format_sql_separates_a_double_minus_so_it_is_not_a_comment() -> None:
    expr = E.Negate(E.Negate(E.ColumnRef("A")))
    assert E.format_sql(expr) == "- -A"
    assert parse_expression(E.format_sql(expr)) == expr


def test_format_sql_keeps_doubles_doubles() -> None:
    assert E.format_sql(E.Literal(1.5, T.DOUBLE)) == "1.5E0"
    assert parse_expression("1.5E0") == E.Literal(1.5, T.DOUBLE)
