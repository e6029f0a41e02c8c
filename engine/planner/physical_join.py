"""Physical rule for joins: a JoinNode becomes the join step of its kind."""

from __future__ import annotations

from typing import Any

from engine.errors import InternalError
from engine.plan import steps as S
from engine.plan.steps_join import (
    ForeignKeyTableTableJoin,
    StreamStreamJoin,
    StreamTableJoin,
    TableTableJoin,
)
from engine.planner import logical_join as LJ
from engine.planner.physical import rule, to_steps


@rule(LJ.JoinNode)
def _join(node: LJ.JoinNode) -> S.Step:
    if node.kind == LJ.FOREIGN_KEY:
        return ForeignKeyTableTableJoin(
            ctx=node.ctx or "Join",
            left=to_steps(node.left),
            right=to_steps(node.right),
            join_type=node.join_type,
            left_alias=node.left_alias,
            right_alias=node.right_alias,
            key_column=node.key_column,
            foreign_key=node.left_key,
        )
    common: dict[str, Any] = dict(
        ctx=node.ctx or "Join",
        left=to_steps(node.left),
        right=to_steps(node.right),
        join_type=node.join_type,
        left_alias=node.left_alias,
        right_alias=node.right_alias,
        key_column=node.key_column,
        left_key=node.left_key,
        right_key=node.right_key,
    )
    if node.kind == LJ.STREAM_STREAM:
        if node.within is None:
            raise InternalError(f"Stream-stream join {node.ctx} has no window (a bug).")
        before, after, grace = node.within
        return StreamStreamJoin(before_ms=before, after_ms=after, grace_ms=grace, **common)
    if node.kind == LJ.STREAM_TABLE:
        return StreamTableJoin(**common)
    if node.kind == LJ.TABLE_TABLE:
        return TableTableJoin(**common)
    raise InternalError(f"Unknown join kind '{node.kind}' (a bug).")
