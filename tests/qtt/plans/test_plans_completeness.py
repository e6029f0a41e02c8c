"""Completeness of the planned cases: step versions, expression operators, functions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.steps import STEP_TYPES
from qtt.plans import completeness as C
from qtt.plans.completeness import (
    check_completeness,
    evaluator_operators,
    functions_in,
    operators_in,
    step_types_in,
)
from qtt.plans.layout import DEFAULT_ROOT, PLAN_FILE, case_dirs, saved_versions
from qtt.plans.verify import VerifyReport

ROOT = Path(__file__).resolve().parents[3] / DEFAULT_ROOT


def _plan(*expressions: E.Expr) -> list[dict]:
    """A serialised statement plan whose one step carries ``expressions``."""
    return [
        {
            "query": {
                "queryId": "Q",
                "root": {
                    "@type": "streamSelectV1",
                    "ctx": "Project",
                    "selectExpressions": [
                        {"alias": f"C{i}", "expression": E.to_json(e)} for i, e in enumerate(expressions)
                    ],
                },
            }
        }
    ]


def _col(name: str) -> E.ColumnRef:
    return E.ColumnRef(name)


def _int(value: int) -> E.Literal:
    return E.Literal(value, T.INTEGER)


def test_operators_in_names_the_variant_each_node_uses() -> None:
    plans = _plan(
        E.Comparison("IS DISTINCT FROM", _col("A"), _col("B")),
        E.Like(_col("S"), E.Literal("a!%", T.STRING), escape="!", negated=True),
        E.In(_col("A"), (_int(1),), negated=True),
        E.Case(_col("A"), (E.WhenClause(_int(1), _int(2)),)),
        E.FunctionCall("EXPLODE", (_col("XS"),)),
        E.FunctionCall("COUNT", (), star=True),
        E.FunctionCall("UCASE", (_col("S"),)),
    )
    found = operators_in(plans)
    assert {
        "comparison", "comparison IS DISTINCT FROM", "like", "like NOT", "like ESCAPE",
        "in", "in NOT", "case", "case simple", "call", "call table", "call aggregate",
        "call scalar", "column", "literal",
    } <= found
    assert "when" not in found  # a part of CASE, not an operator of its own
    assert "comparison =" not in found and "case searched" not in found
    assert functions_in(plans) == {"EXPLODE", "COUNT", "UCASE"}


def test_evaluator_operators_are_derived_from_the_expression_classes() -> None:
    operators = evaluator_operators()
    assert {f"comparison {op}" for op in E.Comparison.OPS} <= operators
    assert {f"arithmetic {op}" for op in E.Arithmetic.OPS} <= operators
    assert {"logical AND", "logical OR", "isNull NOT", "between NOT", "like ESCAPE"} <= operators
    assert {"call scalar", "call aggregate", "call table", "case simple", "case searched"} <= operators
    assert not {"when", "mapEntry", "structField"} & operators


def _coverable() -> set[str]:
    """Every registered step version a planned case can use (not the allowed ones)."""
    return set(STEP_TYPES) - set(C.NOT_YET_COVERABLE)


def test_a_missing_operator_fails_and_is_named_in_the_problems_and_the_summary() -> None:
    used = evaluator_operators() - {"comparison IS DISTINCT FROM"}
    result = check_completeness(_coverable(), operators_used=used)
    assert not result.ok
    assert result.operators is not None
    assert result.operators.missing == ("comparison IS DISTINCT FROM",)
    assert "Expression operator 'comparison IS DISTINCT FROM' has no planned case" in result.render()
    assert "comparison IS DISTINCT FROM (missing)" in result.summary()
    assert result.to_json()["operators"]["missing"] == ["comparison IS DISTINCT FROM"]


def test_an_allowed_operator_passes_with_its_reason_and_a_stale_entry_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(C, "OPERATORS_NOT_YET_COVERABLE", {"arithmetic %": "no case yet"})
    result = check_completeness(_coverable(), operators_used=evaluator_operators() - {"arithmetic %"})
    assert result.ok
    assert "arithmetic % (allowed: no case yet)" in result.summary()
    stale = check_completeness(_coverable(), operators_used=evaluator_operators())
    assert not stale.ok
    assert "OPERATORS_NOT_YET_COVERABLE" in stale.render()


def test_function_coverage_is_reported_without_failing() -> None:
    result = check_completeness(
        _coverable(), operators_used=evaluator_operators(), functions_used={"ucase"}
    )
    assert result.ok
    assert result.functions is not None
    assert result.functions.to_json()["covered"] == ["UCASE"]
    assert "LCASE" in result.functions.uncovered
    assert "registered functions appear in a planned case" in result.summary()


def test_the_verify_report_json_carries_the_coverage() -> None:
    result = check_completeness(
        _coverable() - {"streamFilterV1"}, operators_used={"literal"}, functions_used=set()
    )
    report = VerifyReport(completeness=result)
    data = json.loads(json.dumps(report.to_json()))
    assert data["ok"] is False
    assert data["completeness"]["missing"] == ["streamFilterV1"]
    assert "comparison <>" in data["completeness"]["operators"]["missing"]
    assert "streamFilterV1" in report.render()


def test_the_committed_planned_cases_cover_every_step_version_and_operator() -> None:
    plans: list = []
    for case_dir in case_dirs(ROOT):
        for version in saved_versions(case_dir):
            plans += json.loads((version.path / PLAN_FILE).read_text(encoding="utf-8"))["plans"]
    result = check_completeness(step_types_in(plans), operators_used=operators_in(plans))
    assert result.ok, result.render()
