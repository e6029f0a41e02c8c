"""The native expression compiler agrees with the Python evaluator (the reference), record by record."""

from __future__ import annotations

import math
from decimal import Decimal as D
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as ST

from engine.errors import InternalError
from engine.expressions import compile_expression
from engine.expressions.native import compile_native
from engine.parser.parser import parse_expression
from engine.plan import types as T
from engine.runtime.convert import spark_type

COLUMNS: dict[str, T.SqlType] = {
    "I": T.INTEGER,
    "B": T.BIGINT,
    "D": T.DOUBLE,
    "S": T.STRING,
    "DEC": T.Decimal(4, 2),
    "FLAG": T.BOOLEAN,
    "A": T.Array(T.INTEGER),
    "ST": T.Struct((T.Field("X", T.INTEGER), T.Field("Y", T.STRING))),
}

INT_MAX, INT_MIN = 2**31 - 1, -(2**31)
LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)

ROWS: list[dict[str, Any]] = [
    {"I": 1, "B": 10, "D": 1.5, "S": "abc", "DEC": D("1.25"), "FLAG": True, "A": [1, 2, 3], "ST": {"X": 7, "Y": "y"}},
    {"I": INT_MAX, "B": LONG_MAX, "D": -0.0, "S": "a%b_c", "DEC": D("-99.99"), "FLAG": False, "A": [], "ST": {"X": None, "Y": None}},
    {"I": INT_MIN, "B": LONG_MIN, "D": math.inf, "S": "", "DEC": D("0.00"), "FLAG": None, "A": [None, 5], "ST": None},
    {"I": None, "B": None, "D": None, "S": None, "DEC": None, "FLAG": None, "A": None, "ST": None},
    {"I": -7, "B": -3, "D": math.nan, "S": "Straße\nx", "DEC": D("12.50"), "FLAG": True, "A": [4], "ST": {"X": -1, "Y": "ABC"}},
]

NATIVE = [
    "I + 1",
    "I * 3",
    "I - 1",
    "-I",
    "B + 1",
    "B * B",
    "B - I",
    "-B",
    "D * 2",
    "D + I",
    "D / 2.0",
    "DEC + 1",
    "DEC * DEC",
    "DEC - DEC",
    "S + 'x'",
    "I > 0",
    "I = B",
    "D >= 1",
    "D = D",
    "D <> D",
    "D < I",
    "D BETWEEN 0 AND 2",
    "DEC < 2",
    "S <> 'abc'",
    "S IS DISTINCT FROM 'abc'",
    "I IS NOT DISTINCT FROM 1",
    "FLAG AND I > 0",
    "FLAG OR I > 0",
    "NOT FLAG",
    "S IS NULL",
    "I IS NOT NULL",
    "I IN (1, -7, NULL)",
    "I NOT IN (1, 2)",
    "S IN ('abc', '')",
    "I BETWEEN -10 AND 10",
    "I NOT BETWEEN -10 AND 10",
    "0 BETWEEN -1 AND D",
    "D NOT BETWEEN -1 AND 1",
    "S LIKE 'a%'",
    "S LIKE 'a\\%b\\_c' ESCAPE '\\'",
    "S NOT LIKE '_b%'",
    "S LIKE '%.%'",
    "CASE WHEN I > 0 THEN 'pos' WHEN I < 0 THEN 'neg' END",
    "CASE WHEN FLAG THEN B ELSE CAST(I AS BIGINT) END",
    "CASE I WHEN 1 THEN 'one' ELSE 'other' END",
    "CAST(I AS BIGINT)",
    "CAST(I AS STRING)",
    "CAST(B AS DOUBLE)",
    "CAST(FLAG AS STRING)",
    "A[1]",
    "A[-1]",
    "A[0]",
    "A[5]",
    "ST->X",
    "ST->Y",
    "UCASE(S)",
    "LCASE(ST->Y)",
    "CONCAT(S, ST->Y, 'z')",
    "IFNULL(I, 0)",
    "COALESCE(S, ST->Y, 'none')",
    "ABS(D)",
]

FALLBACK = {
    "I / 2": "integer /",
    "B % 3": "integer %",
    "D / D": "may be zero",
    "DEC / 3": "DECIMAL /",
    "LEN(S)": "function LEN",
    "CAST(S AS INTEGER)": "CAST from STRING",
    "ABS(I)": "function ABS runs in Python",  # version 2 (Java's Math.abs wrap) has no Spark form
    "S LIKE S": "varies per record",
    "S LIKE 'a\\Eb%'": "LIKE pattern with \\E in it",
    "D IN (1.5, 2.0)": "NaN",
    "D IS DISTINCT FROM 1.5": "NaN",
}


def _frame(spark, rows: list[dict[str, Any]]):
    schema = ST.StructType([ST.StructField(n, spark_type(t)) for n, t in COLUMNS.items()])
    return spark.createDataFrame([tuple(r[n] for n in COLUMNS) for r in rows], schema)


@pytest.fixture(scope="module")
def frame(spark):
    return _frame(spark, ROWS)


def _disagreements(frame, rows: list[dict[str, Any]], texts: list[str], level: int) -> list[str]:
    """Compile every text at ``level`` and run them in one Spark job over ``rows``: each
    expression that is not native, and each value that differs from the evaluator's."""
    compiled = [(text, compile_native(parse_expression(text), COLUMNS, level=level)) for text in texts]
    not_native = [f"{text}: {c.reason}" for text, c in compiled if c.column is None]
    if not_native:
        return not_native
    got = frame.select(*[c.column.alias(f"c{i}") for i, (_, c) in enumerate(compiled)]).collect()
    mismatches = []
    for i, (text, _) in enumerate(compiled):
        reference = compile_expression(parse_expression(text), COLUMNS)
        for row, spark_row in zip(rows, got, strict=True):
            g, w = spark_row[i], reference(row)
            if not _same(g, w):
                mismatches.append(f"{text} over {row}: Spark gave {g!r}, the evaluator {w!r}")
    return mismatches


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b if a is not None and b is not None else a is b


def test_native_expressions_agree_with_the_evaluator(frame):
    disagreements = _disagreements(frame, ROWS, NATIVE, level=1)
    assert not disagreements, "\n".join(disagreements)


@pytest.mark.parametrize(("text", "reason"), sorted(FALLBACK.items()))
def test_expression_without_an_exact_spark_form_falls_back_with_its_reason(spark, text, reason):
    compiled = compile_native(parse_expression(text), COLUMNS)
    assert compiled.column is None
    assert compiled.report().startswith("fallback: ") and reason in compiled.report()


def test_integer_overflow_wraps_like_java(frame):
    compiled = compile_native(parse_expression("I + 1"), COLUMNS)
    assert frame.select(compiled.column).collect()[1][0] == INT_MIN
    compiled = compile_native(parse_expression("B * 2"), COLUMNS)
    assert frame.select(compiled.column).collect()[1][0] == -2


def test_comparing_rowtime_with_a_timestamp_text_falls_back_on_either_side(spark):
    columns = {**COLUMNS, "ROWTIME": T.BIGINT}
    for text in ("ROWTIME > '2020-01-01'", "'2020-01-01' < ROWTIME"):
        compiled = compile_native(parse_expression(text), columns)
        assert compiled.column is None
        assert "comparing ROWTIME with a timestamp text" in compiled.report()


def test_a_native_form_follows_the_overload_not_the_version_a_call_records(spark, monkeypatch):
    from engine.functions import REGISTRY
    from engine.functions.registry import Signature
    from engine.plan import expr as E

    # UCASE at version 2 with a new BYTES overload: a call planned at version 2 on a STRING
    # resolves to the STRING overload, unchanged since version 1, and keeps its Spark form.
    # LOG's version 2 changed its overloads, which have no Spark form.
    ucase = [*REGISTRY.signatures("UCASE"), Signature("UCASE", (T.BYTES,), T.BYTES, bytes.upper, since=2)]
    monkeypatch.setitem(REGISTRY._by_name, "UCASE", ucase)
    later = E.FunctionCall("UCASE", (E.ColumnRef("S"),), semantics=2)
    assert compile_native(later, COLUMNS).column is not None
    log = compile_native(parse_expression("LOG(D)"), COLUMNS)
    assert log.column is None and "function LOG runs in Python" in log.report()


# --------------------------------------------------------------------------- level 2

LEVEL_2_ROWS: list[dict[str, Any]] = [
    *ROWS,
    {"I": -2, "B": -9, "D": 2.5, "S": " \t\x00a b\x1f ", "DEC": None, "FLAG": None, "A": None, "ST": None},
    {"I": 9, "B": 7, "D": -2.5, "S": "x\U0001f600y\u2028 ", "DEC": None, "FLAG": None, "A": None, "ST": None},
    {"I": 0, "B": 0, "D": 0.49999999999999994, "S": "aaa", "DEC": None, "FLAG": None, "A": None, "ST": None},
    {"I": 3, "B": 1, "D": -0.5000000000000001, "S": "\u00a0a\u00a0", "DEC": None, "FLAG": None, "A": None, "ST": None},
    {"I": 5, "B": 2, "D": 4503599627370497.0, "S": "ab", "DEC": None, "FLAG": None, "A": None, "ST": None},
    {"I": -5, "B": -2, "D": -1e300, "S": "a", "DEC": None, "FLAG": None, "A": None, "ST": None},
    {"I": 6, "B": 3, "D": -math.inf, "S": "b", "DEC": None, "FLAG": None, "A": None, "ST": None},
    {"I": 0, "B": 0, "D": None, "S": None, "DEC": None, "FLAG": None, "A": None, "ST": None},
    {"I": -6, "B": -3, "D": -1e-20, "S": "c", "DEC": None, "FLAG": None, "A": None, "ST": None},
]

# Forms only level 2 compiles natively: level 1 (the V2 steps' compiler) keeps them in Python.
LEVEL_2 = [
    "I / 2",
    "I / -1",
    "I % 3",
    "I % -1",
    "B / 3",
    "B / -1",
    "B % 2",
    "I / 2 + B % 4",
    "D / D",
    "D / I",
    "I / D",
    "D % D",
    "D % I",
    "D / 0.0",
    "LEN(S)",
    "TRIM(S)",
    "LTRIM(S)",
    "RTRIM(S)",
    "REPLACE(S, 'a', 'xy')",
    "REPLACE(S, 'a', ST->Y)",
    "CONCAT_WS('-', S, ST->Y, 'z')",
    "CONCAT_WS(ST->Y, S, S)",
    "SQRT(D)",
    "SQRT(I)",
    "SQRT(B)",
    "SIGN(D)",
    "SIGN(I)",
    "SIGN(B)",
    "CEIL(D)",
    "FLOOR(D)",
    "CEIL(I)",
    "FLOOR(B)",
    "ROUND(D)",
    "ROUND(D * 10)",
    "TRUNC(D)",
    "TRUNC(D * 1e10)",
    "GREATEST(I, 3, NULL)",
    "LEAST(B, CAST(I AS BIGINT), CAST(-5 AS BIGINT))",
    "GREATEST(S, ST->Y)",
    "LEAST(S, 'b')",
    "AS_VALUE(S)",
    "AS_VALUE(ST->X)",
    "ARRAY_LENGTH(A)",
]

LEVEL_2_FALLBACK = {
    "I / 0": "integer /",
    "I % B": "integer %",
    "I / B": "integer /",
    "REPLACE(S, '', 'x')": "function REPLACE runs in Python for",
    "REPLACE(S, S, 'x')": "function REPLACE runs in Python for",
    "ROUND(D, 2)": "function ROUND runs in Python for",
    "ROUND(DEC)": "function ROUND runs in Python for",
    "SIGN(DEC)": "function SIGN runs in Python for",
    "GREATEST(D, 1.5)": "function GREATEST runs in Python for",
    "LEAST(DEC, DEC)": "function LEAST runs in Python for",
    "LEN(TO_BYTES(S, 'utf8'))": "function LEN runs in Python for",
    "CONCAT_WS(S)": "function CONCAT_WS runs in Python for",
    "DEC / 3": "DECIMAL /",
}


@pytest.fixture(scope="module")
def level_2_frame(spark):
    return _frame(spark, LEVEL_2_ROWS)


def test_level_2_native_expressions_agree_with_the_evaluator(level_2_frame):
    disagreements = _disagreements(level_2_frame, LEVEL_2_ROWS, LEVEL_2, level=2)
    assert not disagreements, "\n".join(disagreements)


def test_level_1_keeps_the_level_2_forms_in_python(spark):
    # Level 1 is frozen with the V2 steps: a saved plan's physical plan must not change.
    native_at_1 = [text for text in LEVEL_2 if compile_native(parse_expression(text), COLUMNS).is_native]
    assert native_at_1 == []


@pytest.mark.parametrize(("text", "reason"), sorted(LEVEL_2_FALLBACK.items()))
def test_level_2_falls_back_where_spark_differs_with_its_reason(spark, text, reason):
    compiled = compile_native(parse_expression(text), COLUMNS, level=2)
    assert compiled.column is None
    assert reason in compiled.report()


def test_an_unknown_compiler_level_is_refused_with_the_known_ones(spark):
    with pytest.raises(InternalError, match=r"level 3 is unknown; known levels: \(1, 2\) \(a bug\)"):
        compile_native(parse_expression("I + 1"), COLUMNS, level=3)


_DOUBLES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, -0.5, 1.5, -1.5, 0.0, -0.0, 2.0**52 + 1, -(2.0**53), 0.49999999999999994]),
    st.integers(-(10**6), 10**6).map(lambda n: n / 4),
)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.tuples(st.one_of(st.none(), _DOUBLES), st.one_of(st.none(), _DOUBLES)), min_size=40, max_size=40))
def test_level_2_double_forms_agree_with_the_evaluator_on_random_doubles(spark, pairs):
    columns = {"X": T.DOUBLE, "Y": T.DOUBLE}
    texts = ["ROUND(X)", "TRUNC(X)", "FLOOR(X)", "CEIL(X)", "SIGN(X)", "SQRT(X)", "X / Y", "X % Y"]
    frame = spark.createDataFrame(pairs, "X double, Y double")
    compiled = [compile_native(parse_expression(t), columns, level=2) for t in texts]
    got = frame.select(*[c.column.alias(f"c{i}") for i, c in enumerate(compiled)]).collect()
    for i, text in enumerate(texts):
        reference = compile_expression(parse_expression(text), columns)
        for (x, y), row in zip(pairs, got, strict=True):
            want = reference({"X": x, "Y": y})
            assert _same(row[i], want), f"{text} with X={x!r}, Y={y!r}: Spark gave {row[i]!r}, the evaluator {want!r}"
