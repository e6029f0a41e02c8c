"""Step versions that exist for ksqlDB's saved plans: behaviours of old ksqlDB releases that
no step kspark's planner produces has.

``engine.ksqldb_import`` translates a ksqlDB step into one of these when its behaviour
differs from every other kspark step version; kspark's planner never produces them. They
are frozen like every other step version.

- ``streamGroupByJoinedKeyV1`` / ``tableGroupByJoinedKeyV1``: ksqlDB's ``streamGroupByV1``
  and ``tableGroupByV1`` with several grouping expressions (ksqlDB 5.5 and 6.0, before
  multi-column keys): one STRING key, the text of each grouping value (Java's
  ``toString``, as ``CAST(.. AS STRING)``) joined with ``|+|``; a row one of whose grouping
  values is null is dropped.
- ``tableAggregateTwoUpdatesV1``: ksqlDB's ``tableAggregateV1`` as the releases before
  Kafka Streams' KIP-904 (ksqlDB 7.4 and earlier) ran it: a table row that changes but stays
  in its group is retracted and added as two records, and each emits the group's result (the
  one after the retraction, then the one after the addition), where ``tableAggregateV1``
  emits only the second.

This module imports no pyspark.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from engine.errors import PlanError
from engine.plan.constraints import NON_EMPTY
from engine.plan.expr import Expr
from engine.plan.steps import Formats, SelectExpression, Step, register_step, step_dataclass
from engine.plan.steps_aggregate import _check_aggregations as check_aggregations

JOINED_KEY_SEPARATOR = "|+|"
"""What ksqlDB put between the grouping values of a one-column multi-expression key."""


def _check_joined(step: Step, exprs: tuple[Expr, ...]) -> None:
    if len(exprs) < 2:
        raise PlanError(
            f"Step {step.TYPE} joins several grouping expressions into one key, got {len(exprs)}; "
            "one expression is a plain grouping step."
        )


@register_step
@step_dataclass
class StreamGroupByJoinedKey(Step):
    """Re-keys a stream by one STRING key: its grouping values' texts joined with '|+|'."""

    TYPE: ClassVar[str] = "streamGroupByJoinedKeyV1"
    source: Step
    key_name: Annotated[str, NON_EMPTY]
    group_by_expressions: tuple[Expr, ...]
    internal_formats: Formats

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_joined(self, self.group_by_expressions)


@register_step
@step_dataclass
class TableGroupByJoinedKey(Step):
    """Re-keys a table by one STRING key: its grouping values' texts joined with '|+|'."""

    TYPE: ClassVar[str] = "tableGroupByJoinedKeyV1"
    source: Step
    key_name: Annotated[str, NON_EMPTY]
    group_by_expressions: tuple[Expr, ...]
    internal_formats: Formats

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_joined(self, self.group_by_expressions)


@register_step
@step_dataclass
class TableAggregateTwoUpdates(Step):
    """Aggregates a grouped table; a change within a group emits after retraction and after addition."""

    TYPE: ClassVar[str] = "tableAggregateTwoUpdatesV1"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)
