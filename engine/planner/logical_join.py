"""Logical join node: two inputs (a source or a join, then a source) joined on one key."""

from __future__ import annotations

from dataclasses import dataclass

from engine.plan import expr as E
from engine.planner.logical import LogicalNode

STREAM_STREAM, STREAM_TABLE, TABLE_TABLE = "STREAM_STREAM", "STREAM_TABLE", "TABLE_TABLE"
# A table-table join whose left operand is a non-key expression (``left_key`` is the
# foreign key, ``right_key`` the right table's primary key; the result keeps the left key).
FOREIGN_KEY = "FOREIGN_KEY"


@dataclass(frozen=True, kw_only=True)
class JoinNode(LogicalNode):
    """Joins ``left`` and ``right``; output columns are prefixed by each side's alias.

    ``left_key``/``right_key`` compute the join key over each input's own columns;
    ``key_equivalents`` names the output columns equal to the key by construction, and
    ``missing_key_message`` is the error (with ``{sink}``) when a projection drops the key.
    ``hidden`` columns (``A_ROWTIME``...) are selectable but not part of ``*``.
    ``key_equivalence`` holds the expressions the key equals (ksqlDB's join equivalence set)
    and ``viable_keys`` the output columns among them, in ksqlDB's order of preference;
    ``synthetic_key`` says the key equals no source column (``ROWKEY``).
    """

    left: LogicalNode
    right: LogicalNode
    kind: str
    join_type: str
    left_alias: str
    right_alias: str
    key_column: str
    left_key: E.Expr
    right_key: E.Expr
    within: tuple[int, int, int | None] | None = None
    key_equivalents: tuple[tuple[str, frozenset[str]], ...] = ()
    hidden: tuple[str, ...] = ()
    missing_key_message: str = ""
    key_equivalence: frozenset[E.Expr] = frozenset()
    viable_keys: tuple[str, ...] = ()
    synthetic_key: bool = False
