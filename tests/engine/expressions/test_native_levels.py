"""The planner's view of the native compiler's levels (no Spark): which expressions hold a
form that only level 2 runs in Spark. It must agree with the compiler itself."""

from __future__ import annotations

import pytest

from engine.expressions.native_levels import level_2_forms
from engine.parser.parser import parse_expression
from tests.engine.expressions.test_native import (
    COLUMNS,
    FALLBACK,
    LEVEL_2,
    LEVEL_2_FALLBACK,
    NATIVE,
)


@pytest.mark.parametrize("text", LEVEL_2)
def test_an_expression_level_2_runs_in_spark_holds_a_level_2_form(text: str) -> None:
    assert level_2_forms([parse_expression(text)], COLUMNS)


# The level-1 fallbacks that level 2 leaves in Python too (the others are in LEVEL_2's forms).
STILL_PYTHON = [
    "DEC / 3",
    "CAST(S AS INTEGER)",
    "ABS(I)",
    "S LIKE S",
    "S LIKE 'a\\Eb%'",
    "D IN (1.5, 2.0)",
    "D IS DISTINCT FROM 1.5",
]


def test_the_level_1_fallbacks_are_either_level_2_forms_or_still_python() -> None:
    assert all(t in STILL_PYTHON or level_2_forms([parse_expression(t)], COLUMNS) for t in FALLBACK)


@pytest.mark.parametrize("text", [*NATIVE, *LEVEL_2_FALLBACK, *STILL_PYTHON])
def test_an_expression_level_2_builds_as_level_1_holds_none(text: str) -> None:
    assert level_2_forms([parse_expression(text)], COLUMNS) == []


def test_the_forms_are_named_by_their_sql() -> None:
    forms = level_2_forms([parse_expression("CONCAT(UCASE(TRIM(S)), CAST(I / 2 AS STRING))")], COLUMNS)
    assert forms == ["TRIM(S)", "(I / 2)"]


def test_an_untyped_expression_holds_none() -> None:
    assert level_2_forms([parse_expression("LEN(NO_SUCH_COLUMN)")], COLUMNS) == []


def test_a_form_inside_a_lambda_does_not_count() -> None:
    # Both levels run a lambda in Python, LEN in its body included.
    assert level_2_forms([parse_expression("TRANSFORM(A, X => LEN(CAST(X AS STRING)))")], COLUMNS) == []
    assert level_2_forms([parse_expression("ARRAY_LENGTH(TRANSFORM(A, X => X / 2))")], COLUMNS) == [
        "ARRAY_LENGTH(TRANSFORM(A, (X) => (X / 2)))"
    ]
