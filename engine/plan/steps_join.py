"""Join steps: stream-stream (windowed), stream-table, table-table and foreign-key joins.

Each join step names both inputs, the join type, the aliases that prefix each side's
columns in the output (``""`` keeps an input's names, as for the left input of an n-way
join whose columns are already prefixed), the output key column and the expressions that
compute the join key on each side. Evaluating a key expression that is not the input's
key column is the pre-join repartition. A foreign-key join has no key expressions: it
names the left expression that gives the right table's primary key.

The output schema is a pure function of the inputs' schemas and the step
(``join_output_schema``), so planner and builders agree on it. This module imports no
pyspark.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, ClassVar

from engine.errors import PlanError
from engine.plan.constraints import NOT_NEGATIVE, OneOf
from engine.plan.expr import Expr
from engine.plan.schema import PSEUDO_COLUMNS, WINDOW_BOUNDS, Column, LogicalSchema, Namespace
from engine.plan.steps import Step, WindowInfo, register_step, step_dataclass
from engine.plan.types import SqlType

JOIN_TYPES = ("INNER", "LEFT", "RIGHT", "FULL")
STREAM_TABLE_JOIN_TYPES = ("INNER", "LEFT")
FOREIGN_KEY_JOIN_TYPES = ("INNER", "LEFT")
Milliseconds = Annotated[int, NOT_NEGATIVE]
# ksqlDB's default grace for joins declared without GRACE PERIOD (Kafka Streams' legacy
# JoinWindows.of): the window store keeps records for at least a day.
LEGACY_RETENTION_MS = 24 * 60 * 60 * 1000


def _check_join_type(step: Step, join_type: str, allowed: Sequence[str]) -> None:
    if join_type not in allowed:
        raise PlanError(
            f"Step {step.TYPE} has the join type '{join_type}'; expected one of {', '.join(allowed)}."
        )


@register_step
@step_dataclass
class StreamStreamJoin(Step):
    """Joins two streams on a key within a time window (WITHIN before/after, optional grace)."""

    TYPE: ClassVar[str] = "streamStreamJoinV1"
    left: Step
    right: Step
    join_type: Annotated[str, OneOf(JOIN_TYPES)]
    left_alias: str
    right_alias: str
    key_column: str
    left_key: Expr
    right_key: Expr
    before_ms: Milliseconds
    after_ms: Milliseconds
    grace_ms: Milliseconds | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_join_type(self, self.join_type, JOIN_TYPES)
        if self.before_ms < 0 or self.after_ms < 0 or (self.grace_ms or 0) < 0:
            raise PlanError(
                f"Step {self.ctx} has a negative join window ({self.before_ms}, {self.after_ms}, "
                f"grace {self.grace_ms}); expected durations of zero or more milliseconds."
            )

    @property
    def retention_ms(self) -> int:
        """How long the window stores keep records, behind the store's stream time."""
        size = self.before_ms + self.after_ms
        if self.grace_ms is None:
            return max(LEGACY_RETENTION_MS, size)
        return size + self.grace_ms


@register_step
@step_dataclass
class StreamTableJoin(Step):
    """Joins each stream record to the table row of its key as of that record (INNER or LEFT)."""

    TYPE: ClassVar[str] = "streamTableJoinV1"
    left: Step
    right: Step
    join_type: Annotated[str, OneOf(STREAM_TABLE_JOIN_TYPES)]
    left_alias: str
    right_alias: str
    key_column: str
    left_key: Expr
    right_key: Expr

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_join_type(self, self.join_type, STREAM_TABLE_JOIN_TYPES)


@register_step
@step_dataclass
class TableTableJoin(Step):
    """Joins two tables on their primary keys; every change emits the new result or a delete."""

    TYPE: ClassVar[str] = "tableTableJoinV1"
    left: Step
    right: Step
    join_type: Annotated[str, OneOf(JOIN_TYPES)]
    left_alias: str
    right_alias: str
    key_column: str
    left_key: Expr
    right_key: Expr

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_join_type(self, self.join_type, JOIN_TYPES)


@register_step
@step_dataclass
class ForeignKeyTableTableJoin(Step):
    """Joins each left table row to the right table row whose primary key its foreign key names.

    ``foreign_key`` is computed over the left input's own columns; the output is keyed by
    the left table's primary key (``key_column``), so many left rows may join one right row.
    """

    TYPE: ClassVar[str] = "foreignKeyTableTableJoinV1"
    left: Step
    right: Step
    join_type: Annotated[str, OneOf(FOREIGN_KEY_JOIN_TYPES)]
    left_alias: str
    right_alias: str
    key_column: str
    foreign_key: Expr

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_join_type(self, self.join_type, FOREIGN_KEY_JOIN_TYPES)

JoinStep = StreamStreamJoin | StreamTableJoin | TableTableJoin | ForeignKeyTableTableJoin

PSEUDO_NAMES = tuple(PSEUDO_COLUMNS)


def prefixed(alias: str, name: str) -> str:
    """The name a side's column takes in the join output (``A_ID``); no alias keeps it."""
    return f"{alias}_{name}" if alias else name


def side_columns(
    schema: LogicalSchema, alias: str, window: WindowInfo | None
) -> tuple[list[tuple[str, str, SqlType]], list[tuple[str, str, SqlType]]]:
    """(input name, output name, type) of one side: visible columns, then hidden pseudo columns.

    Visible: key columns, window bounds of a windowed input, value and header columns.
    Hidden: the side's ROWTIME, ROWPARTITION and ROWOFFSET (``A.ROWTIME``); a side that is
    itself a join (no alias) already carries its sources' pseudo columns as columns.
    """
    visible = [(c.name, prefixed(alias, c.name), c.type) for c in schema.key]
    if window is not None and alias:
        visible += [(n, prefixed(alias, n), t) for n, t in WINDOW_BOUNDS.items()]
    visible += [
        (c.name, prefixed(alias, c.name), c.type) for c in schema.columns if c.namespace is not Namespace.KEY
    ]
    hidden = [(n, prefixed(alias, n), t) for n, t in PSEUDO_COLUMNS.items()] if alias else []
    return visible, hidden


def join_output_schema(
    left: LogicalSchema,
    right: LogicalSchema,
    *,
    left_alias: str,
    right_alias: str,
    key_columns: Sequence[tuple[str, SqlType]],
    left_window: WindowInfo | None = None,
    right_window: WindowInfo | None = None,
    inherited_hidden: Sequence[str] = (),
) -> tuple[LogicalSchema, tuple[str, ...]]:
    """The join's output schema (key columns first) and the names of its hidden columns.

    A side column whose output name is a key column is not repeated as a value;
    ``inherited_hidden`` names columns of an input join that stay hidden.
    """
    key_names = {n for n, _ in key_columns}
    columns = [Column(n, t, Namespace.KEY) for n, t in key_columns]
    hidden: list[str] = []
    taken = set(key_names)
    for schema, alias, window in ((left, left_alias, left_window), (right, right_alias, right_window)):
        visible, pseudo = side_columns(schema, alias, window)
        for _, out, t in visible:
            if out not in taken:
                taken.add(out)
                columns.append(Column(out, t))
                if out in inherited_hidden:
                    hidden.append(out)
        for _, out, t in pseudo:
            if out not in taken:
                taken.add(out)
                hidden.append(out)
                columns.append(Column(out, t))
    return LogicalSchema(tuple(columns)), tuple(hidden)
