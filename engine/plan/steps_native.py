"""Stateless step versions whose builders run their expressions as Spark Columns.

Same fields and meaning as their V1 versions in ``steps.py``; the V2 builders
(``engine.builders.native``) compile each expression to a Spark Column where it has an exact
Spark form and evaluate only the others in Python. The planner picks these for new
queries; saved plans keep their V1 steps and builders.

This module imports no pyspark.
"""

from __future__ import annotations

from typing import ClassVar

from engine.plan.expr import Expr
from engine.plan.steps import (
    SelectExpression,
    Step,
    _check_unique_aliases,
    register_step,
    step_dataclass,
)


@register_step
@step_dataclass
class StreamFilterV2(Step):
    """Keeps the stream records for which the predicate is true (Spark Columns)."""

    TYPE: ClassVar[str] = "streamFilterV2"
    source: Step
    predicate: Expr


@register_step
@step_dataclass
class TableFilterV2(Step):
    """Keeps matching table rows, others become deletes (Spark Columns)."""

    TYPE: ClassVar[str] = "tableFilterV2"
    source: Step
    predicate: Expr


@register_step
@step_dataclass
class StreamSelectV2(Step):
    """Projects each stream record onto new value columns, keeping the keys (Spark Columns)."""

    TYPE: ClassVar[str] = "streamSelectV2"
    source: Step
    key_column_names: tuple[str, ...]
    select_expressions: tuple[SelectExpression, ...]

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_unique_aliases(self.TYPE, self.key_column_names, self.select_expressions)


@register_step
@step_dataclass
class TableSelectV2(Step):
    """Projects each table row onto new value columns, keeping the keys (Spark Columns)."""

    TYPE: ClassVar[str] = "tableSelectV2"
    source: Step
    key_column_names: tuple[str, ...]
    select_expressions: tuple[SelectExpression, ...]

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_unique_aliases(self.TYPE, self.key_column_names, self.select_expressions)
