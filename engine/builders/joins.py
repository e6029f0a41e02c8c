"""Builders of join steps, and the per-key join handlers the runtime's keyed operator runs.

Every join groups both inputs by the join key (evaluating a key expression that is not
the input's key is the pre-join repartition) and lets a handler see one key's records in
input order. The handlers reproduce Kafka Streams' join processors as ksqlDB 7.x uses them:

- stream-table: a stream record joins the table row of its key as of that record; table
  updates emit nothing.
- table-table: every change on either side emits the new result for its key, or a delete
  when the result disappears (Kafka Streams' KTable-KTable join processors, including
  when they stay silent).
- foreign-key table-table: two passes, Kafka Streams' KIP-213 processors run synchronously
  as in ksqlDB's QTT. Per left key, row changes become subscription events for foreign
  keys; per foreign key, the right row joins its subscribers (a right change fans out to
  all of them, a subscription emits its own result).
- stream-stream: each side keeps a window store; a record joins the other side's records
  within (before, after). Without GRACE PERIOD an unmatched record of an outer side is
  emitted at once (the legacy eager semantics); with GRACE PERIOD it waits in the shared
  "outer store" until the window closes by stream time.

Outer-store closes are decided across keys: Kafka Streams emits every closed entry of the
store (all keys, ordered by timestamp, then right before left) when a record whose
timestamp equals the stream time arrives. A handler only sees its key, so it emits the
unmatched record as *pending* (with the stream time after which it closes) and a *cancel*
marker when a later record of its key matches it; the runtime's ``keyed_with_closes``
emits the entries as they close (the rule is stated in ``engine.runtime.closes``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.builders.context import BuildContext, Built, log_processing_error
from engine.builders.walker import builds
from engine.errors import EvaluationError
from engine.expressions import compile_expression, infer_type
from engine.plan import types as T
from engine.plan.schema import Column, LogicalSchema
from engine.plan.steps_join import (
    ForeignKeyTableTableJoin,
    StreamStreamJoin,
    StreamTableJoin,
    TableTableJoin,
    join_output_schema,
    side_columns,
)
from engine.runtime import keyed as K
from engine.runtime import rows as R
from engine.runtime.closes import (  # noqa: F401 - resolve_closes: the rule's plain statement
    CANCEL,
    CLOSE,
    INTERNAL_COLUMNS,
    KIND,
    ORDER,
    PENDING,
    PENDING_ENTRY,
    RESULT,
    resolve_closes,
)

LEFT, RIGHT = 0, 1

Row = dict[str, Any]


@dataclass(frozen=True)
class JoinShape:
    """How a pair of side rows becomes an output row."""

    key_columns: tuple[str, ...]
    left: tuple[tuple[str, str], ...]  # (input name, output name), key columns excluded
    right: tuple[tuple[str, str], ...]

    def row(
        self,
        key: Sequence[Any],
        left: Row | None,
        right: Row | None,
        *,
        ts: int,
        seq: Sequence[int],
        trigger: Row,
    ) -> Row:
        """The joined row for ``key``; a missing side gives nulls."""
        out: Row = dict(zip(self.key_columns, key, strict=True))
        for side, names in ((left, self.left), (right, self.right)):
            for src, dst in names:
                out[dst] = None if side is None else side.get(src)
        window = left if left is not None and left.get(R.WINDOWSTART) is not None else right
        out.update(
            {
                R.SEQ: list(seq),
                R.ROWTIME: ts,
                R.ROWPARTITION: trigger.get(R.ROWPARTITION),
                R.ROWOFFSET: trigger.get(R.ROWOFFSET),
                R.HEADERS: trigger.get(R.HEADERS),
                R.DELETED: False,
                R.WINDOWSTART: None if window is None else window.get(R.WINDOWSTART),
                R.WINDOWEND: None if window is None else window.get(R.WINDOWEND),
            }
        )
        return out

    def tombstone(self, key: Sequence[Any], *, ts: int, seq: Sequence[int], trigger: Row) -> Row:
        """A delete of the result row of ``key``."""
        out = self.row(key, None, None, ts=ts, seq=seq, trigger=trigger)
        out[R.DELETED] = True
        return out


def join_shape(
    left: Built, right: Built, left_alias: str, right_alias: str, key_columns: Sequence[str]
) -> JoinShape:
    """Column mapping of a join of ``left`` and ``right``."""
    keys = set(key_columns)

    def mapping(side: Built, alias: str) -> tuple[tuple[str, str], ...]:
        visible, hidden = side_columns(side.schema, alias, side.window)
        return tuple((src, dst) for src, dst, _ in (*visible, *hidden) if dst not in keys)

    return JoinShape(tuple(key_columns), mapping(left, left_alias), mapping(right, right_alias))


# --------------------------------------------------------------------------- handlers


@dataclass
class StreamTableHandler:
    """Stream (side 0) joined to the table (side 1) as of each stream record."""

    shape: JoinShape
    outer: bool

    def process(self, state: dict[str, Any], record: K.KeyedRecord) -> list[Row]:
        row = record.row
        if record.side == RIGHT:
            state["table"] = None if row[R.DELETED] else row
            return []
        table = state.get("table")
        if table is None and not self.outer:
            return []
        key = state_key(row, state)
        return [self.shape.row(key, row, table, ts=row[R.ROWTIME], seq=record.seq, trigger=row)]


def state_key(row: Row, state: dict[str, Any]) -> tuple[Any, ...]:
    """The join key of the group, which the builder's group-key function stored in the row."""
    return row[GROUP_KEY]


GROUP_KEY = "__join_key"


@dataclass
class TableTableHandler:
    """Kafka Streams' KTable-KTable join processors for one key (both sides are changelogs)."""

    shape: JoinShape
    join_type: str

    def process(self, state: dict[str, Any], record: K.KeyedRecord) -> list[Row]:
        row = record.row
        this, other = ("L", "R") if record.side == LEFT else ("R", "L")
        old = state.get(this)
        new = None if row[R.DELETED] else row
        state[this] = new
        other_row = state.get(other)
        ts = row[R.ROWTIME]
        key = row[GROUP_KEY]
        # Which processor runs: a RIGHT join is a LEFT join with the sides swapped.
        outer_this = self.join_type == "FULL" or (
            self.join_type == "LEFT" and this == "L") or (self.join_type == "RIGHT" and this == "R")
        outer_other = self.join_type == "FULL" or (
            self.join_type == "LEFT" and this == "R") or (self.join_type == "RIGHT" and this == "L")
        if other_row is None:
            if not outer_this or (new is None and old is None):
                return []
            result_ts = ts
        else:
            result_ts = max(ts, other_row[R.ROWTIME])
        if new is None and (other_row is None or not outer_other):
            return [self.shape.tombstone(key, ts=result_ts, seq=record.seq, trigger=row)]
        left, right = (new, other_row) if this == "L" else (other_row, new)
        return [self.shape.row(key, left, right, ts=result_ts, seq=record.seq, trigger=row)]


@dataclass(frozen=True)
class StreamWindows:
    """The join window of a stream-stream join, in milliseconds."""

    before: int
    after: int
    grace: int | None
    retention: int

    def bounds(self, side: int, ts: int) -> tuple[int, int]:
        """Timestamps of the other side's records that ``ts`` on ``side`` joins."""
        if side == LEFT:
            return ts - self.before, ts + self.after
        return ts - self.after, ts + self.before

    def look_ahead(self, side: int) -> int:
        """How far after a record of ``side`` a match may still be timestamped."""
        return self.after if side == LEFT else self.before


@dataclass
class StreamStreamHandler:
    """Kafka Streams' KStream-KStream join processors (both sides) for one key."""

    shape: JoinShape
    join_type: str
    windows: StreamWindows
    outer_sides: frozenset[int] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        self.outer_sides = frozenset(
            {"INNER": (), "LEFT": (LEFT,), "RIGHT": (RIGHT,), "FULL": (LEFT, RIGHT)}[self.join_type]
        )

    def process(self, state: dict[str, Any], record: K.KeyedRecord) -> list[Row]:
        row, side, w = record.row, record.side, self.windows
        ts, seq = row[R.ROWTIME], list(record.seq)
        other = RIGHT if side == LEFT else LEFT
        stores: dict[int, list[tuple[int, Row]]] = state.setdefault("stores", {LEFT: [], RIGHT: []})
        pending: dict[tuple[int, ...], tuple[int, int]] = state.setdefault("pending", {})
        key = row[GROUP_KEY]
        lo, hi = w.bounds(side, ts)
        other_time = record.side_times[other] if len(record.side_times) > other else None
        # A window store only returns records that are not expired by its own stream time.
        floor = None if other_time is None else other_time - w.retention
        matches = sorted(
            (e for e in stores[other] if lo <= e[0] <= hi and (floor is None or e[0] > floor)),
            key=lambda e: e[0],
        )
        out: list[Row] = []
        left: Row | None
        right: Row | None
        for i, (other_ts, other_row) in enumerate(matches):
            left, right = (row, other_row) if side == LEFT else (other_row, row)
            out.append(
                self.shape.row(key, left, right, ts=max(ts, other_ts), seq=seq + [1, i], trigger=row)
            )
            for pid, (p_side, p_ts) in list(pending.items()):
                if p_side == other and p_ts == other_ts:
                    del pending[pid]
                    out.append({KIND: CANCEL, PENDING: list(pid), R.SEQ: seq, R.DELETED: False})
        stores[side].append((ts, row))
        own_time = record.side_times[side] if len(record.side_times) > side else ts
        if own_time is not None:
            stores[side] = [e for e in stores[side] if e[0] > own_time - w.retention]
        if matches or side not in self.outer_sides:
            return out
        alone_left, alone_right = (row, None) if side == LEFT else (None, row)
        unmatched = self.shape.row(key, alone_left, alone_right, ts=ts, seq=seq + [1, 0], trigger=row)
        if w.grace is None or ts + w.look_ahead(side) < record.stream_time:
            return out + [unmatched]
        pending[tuple(seq)] = (side, ts)
        unmatched.update(
            {
                KIND: PENDING_ENTRY,
                PENDING: seq,
                CLOSE: ts + w.look_ahead(side) + w.grace,
                ORDER: 0 if side == RIGHT else 1,
            }
        )
        return out + [unmatched]


# --------------------------------------------------------------------------- foreign keys

FK_OP = "__fk_op"  # what a subscription event asks of the foreign-key group
FK_VALUE = "__fk_value"  # the foreign key the event is for (None: the left row has none)
# Kafka Streams' SubscriptionWrapper instructions (KIP-213; null foreign keys as in KIP-962).
UNSUBSCRIBE = 0  # DELETE_KEY_NO_PROPAGATE
DELETE = 1  # DELETE_KEY_AND_PROPAGATE
SUBSCRIBE = 2  # PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE
SUBSCRIBE_IF_MATCH = 3  # PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE
NO_FOREIGN_KEY = "\0nofk"  # group of the events of one left key whose foreign key is null


def subscription_columns(fk_type: T.SqlType) -> tuple[Column, ...]:
    """The internal columns a subscription event adds to the left row."""
    return (Column(FK_OP, T.INTEGER), Column(FK_VALUE, fk_type))


@dataclass
class ForeignKeySubscriptionHandler:
    """Left side of a foreign-key join, per left key: turns row changes into subscription events.

    Kafka Streams' subscription-send processor: a change of the foreign key unsubscribes
    the old one (``seq + [0]``), then the new row subscribes, or the delete propagates
    (``seq + [1]``). An INNER join ignores a new row without foreign key; a LEFT join
    sends it (and deletes) to the null-foreign-key group of its left key.
    """

    foreign_key: Callable[[Row], Any]
    outer: bool

    def process(self, state: dict[str, Any], record: K.KeyedRecord) -> list[Row]:
        row = record.row
        new = None if row[R.DELETED] else row
        new_fk = None if new is None else self.foreign_key(new)
        existed, old_fk = state.get("exists", False), state.get("fk")
        state["exists"], state["fk"] = new is not None, new_fk
        changed = hashable(new_fk) != hashable(old_fk)
        seq = list(record.seq)

        def event(op: int, fk: Any, step: int) -> Row:
            return {**row, FK_OP: op, FK_VALUE: fk, R.SEQ: [*seq, step]}

        if self.outer:
            if not existed:
                return [] if new is None else [event(SUBSCRIBE, new_fk, 1)]
            out = [event(UNSUBSCRIBE, old_fk, 0)] if old_fk is not None and changed else []
            return out + [event(SUBSCRIBE, new_fk, 1)]
        if not existed:
            return [] if new_fk is None else [event(SUBSCRIBE_IF_MATCH, new_fk, 1)]
        if old_fk is None:
            return [] if new_fk is None else [event(SUBSCRIBE, new_fk, 1)]
        if new_fk is None:
            return [event(DELETE, old_fk, 1)]
        out = [event(UNSUBSCRIBE, old_fk, 0)] if changed else []
        return out + [event(SUBSCRIBE, new_fk, 1)]


@dataclass
class ForeignKeyJoinHandler:
    """Right side of a foreign-key join, per foreign key: the right row and its subscribers.

    A right change emits the result of every subscriber (by serialized left key, at the
    right record's ``seq + [rank]``, with its timestamp); a subscription emits its own
    result at the event's seq, timestamped with the later of the left and right rows.
    """

    shape: JoinShape
    join_type: str
    left_key: str  # the left table's primary key column, in the left row

    def process(self, state: dict[str, Any], record: K.KeyedRecord) -> list[Row]:
        row, outer = record.row, self.join_type == "LEFT"
        subscribers: dict[Any, tuple[bytes, Row]] = state.setdefault("subscribers", {})
        if record.side == RIGHT:
            old = state.get("right")
            new = None if row[R.DELETED] else row
            state["right"] = new
            if old is None and new is None:
                return []
            ts = row[R.ROWTIME]
            out: list[Row] = []
            ranked = sorted(subscribers.values(), key=lambda s: s[0])
            for rank, (_, left) in enumerate(ranked):
                key, seq = (left[self.left_key],), [*record.seq, rank]
                if new is None and not outer:
                    out.append(self.shape.tombstone(key, ts=ts, seq=seq, trigger=row))
                else:
                    out.append(self.shape.row(key, left, new, ts=ts, seq=seq, trigger=row))
            return out
        op, key = row[FK_OP], (row[self.left_key],)
        right = state.get("right")
        ts = row[R.ROWTIME] if right is None else max(row[R.ROWTIME], right[R.ROWTIME])
        if op in (UNSUBSCRIBE, DELETE):
            subscribers.pop(hashable(key), None)
            if op == UNSUBSCRIBE:
                return []
            return [self.shape.tombstone(key, ts=ts, seq=record.seq, trigger=row)]
        if row[R.DELETED]:
            return [self.shape.tombstone(key, ts=ts, seq=record.seq, trigger=row)]
        if row[FK_VALUE] is not None:
            subscribers[hashable(key)] = (serialized_order(key[0]), row)
        if right is None:
            if op == SUBSCRIBE_IF_MATCH:
                return []
            if not outer:
                return [self.shape.tombstone(key, ts=ts, seq=record.seq, trigger=row)]
        return [self.shape.row(key, row, right, ts=ts, seq=record.seq, trigger=row)]


def serialized_order(value: Any) -> bytes:
    """Bytes that sort like the KAFKA-format serialization of a key (the store's scan order)."""
    if isinstance(value, bool) or value is None:
        return repr(value).encode()
    if isinstance(value, int):
        return (value & (2**64 - 1)).to_bytes(8, "big")
    if isinstance(value, float):
        return struct.pack(">d", value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return value
    return repr(value).encode("utf-8")


# --------------------------------------------------------------------------- builders


def _key_function(
    expr: Any, side: Built, ctx: BuildContext, where: str
) -> Callable[[Row], tuple[Any, ...] | None]:
    fn = compile_expression(expr, side.expression_columns())
    query_id, stream = ctx.query_id, not side.is_table
    # A windowed key joins only records of the same window (session windows: same bounds).
    bounds = () if side.window is None else (
        (R.WINDOWSTART, R.WINDOWEND) if side.window.type == "SESSION" else (R.WINDOWSTART,)
    )

    def key_of(row: Row) -> tuple[Any, ...] | None:
        if stream and row[R.DELETED]:
            return None  # Kafka Streams' stream joins drop records with a null value
        try:
            value = fn(row)
        except EvaluationError as exc:
            log_processing_error(query_id, where, str(exc))
            return None
        if value is None:
            return None  # Kafka Streams drops records whose join key is null
        # The handlers read the key back from the row (the envelope pickles it after this).
        row[GROUP_KEY] = (value,)
        return (hashable(value), *(row[b] for b in bounds))

    return key_of


def hashable(value: Any) -> Any:
    """A hashable stand-in for a key value (arrays and maps as tagged tuples)."""
    if isinstance(value, list):
        return ("__list", tuple(hashable(v) for v in value))
    if isinstance(value, dict):
        return ("__map", tuple((k, hashable(v)) for k, v in value.items()))
    return value


def _key_type(step: Any, left: Built) -> T.SqlType:
    t = infer_type(step.left_key, left.expression_columns())
    assert t is not None
    return t


def _schema(step: Any, left: Built, right: Built, key_columns: Sequence[tuple[str, T.SqlType]]) -> LogicalSchema:
    schema, _ = join_output_schema(
        left.schema, right.schema, left_alias=step.left_alias, right_alias=step.right_alias,
        key_columns=key_columns, left_window=left.window, right_window=right.window,
    )
    return schema


def _describe(schema: LogicalSchema) -> str:
    return ", ".join(str(c) for c in schema.columns)


def _internal(step: Any, ctx: BuildContext, left: Built, right: Built, stores: Sequence[tuple[str, Built]]) -> tuple[tuple[str, str], ...]:
    own = tuple(
        (f"{ctx.query_id}.{step.ctx}.{name}", _describe(side.schema)) for name, side in stores
    )
    return left.internal_schemas + right.internal_schemas + own


def _inputs(step: Any, left: Built, right: Built, ctx: BuildContext) -> list[K.KeyedInput]:
    return [
        K.KeyedInput(left.df, left.schema, LEFT, _key_function(step.left_key, left, ctx, step.ctx)),
        K.KeyedInput(right.df, right.schema, RIGHT, _key_function(step.right_key, right, ctx, step.ctx)),
    ]


@builds(StreamTableJoin)
def build_stream_table_join(step: StreamTableJoin, *, left: Built, right: Built, ctx: BuildContext) -> Built:
    schema = _schema(step, left, right, [(step.key_column, _key_type(step, left))])
    shape = join_shape(left, right, step.left_alias, step.right_alias, [step.key_column])
    handler = StreamTableHandler(shape, outer=step.join_type == "LEFT")
    df = ctx.runtime.keyed(_inputs(step, left, right, ctx), handler=handler, output_schema=schema, name=step.ctx)
    return Built(
        df=df, schema=schema, is_table=False, window=left.window,
        internal_schemas=_internal(step, ctx, left, right, [("Left", left), ("Right", right)]),
    )


@builds(TableTableJoin)
def build_table_table_join(step: TableTableJoin, *, left: Built, right: Built, ctx: BuildContext) -> Built:
    schema = _schema(step, left, right, [(step.key_column, _key_type(step, left))])
    shape = join_shape(left, right, step.left_alias, step.right_alias, [step.key_column])
    handler = TableTableHandler(shape, step.join_type)
    df = ctx.runtime.keyed(_inputs(step, left, right, ctx), handler=handler, output_schema=schema, name=step.ctx)
    return Built(
        df=df, schema=schema, is_table=True, window=left.window,
        internal_schemas=_internal(step, ctx, left, right, [("Left", left), ("Right", right)]),
    )


def stream_windows(step: StreamStreamJoin) -> StreamWindows:
    """The handler's view of a stream-stream join step's window."""
    return StreamWindows(step.before_ms, step.after_ms, step.grace_ms, step.retention_ms)


@builds(StreamStreamJoin)
def build_stream_stream_join(step: StreamStreamJoin, *, left: Built, right: Built, ctx: BuildContext) -> Built:
    schema = _schema(step, left, right, [(step.key_column, _key_type(step, left))])
    shape = join_shape(left, right, step.left_alias, step.right_alias, [step.key_column])
    handler = StreamStreamHandler(shape, step.join_type, stream_windows(step))
    inputs = _inputs(step, left, right, ctx)
    internal = _internal(step, ctx, left, right, [("Left", left), ("Right", right)])
    if step.grace_ms is None or step.join_type == "INNER":
        df = ctx.runtime.keyed(inputs, handler=handler, output_schema=schema, name=step.ctx)
        return Built(df=df, schema=schema, window=left.window, internal_schemas=internal)
    df = ctx.runtime.keyed_with_closes(inputs, handler=handler, output_schema=schema, name=step.ctx)
    internal += ((f"{ctx.query_id}.{step.ctx}.Outer", _describe(schema)),)
    return Built(df=df, schema=schema, window=left.window, internal_schemas=internal)


def _foreign_key_function(expr: Any, side: Built, ctx: BuildContext, where: str) -> Callable[[Row], Any]:
    fn = compile_expression(expr, side.expression_columns())
    query_id = ctx.query_id

    def foreign_key(row: Row) -> Any:
        try:
            return fn(row)
        except EvaluationError as exc:
            log_processing_error(query_id, where, str(exc))
            return None

    return foreign_key


def _column_key(name: str) -> Callable[[Row], tuple[Any, ...] | None]:
    def key_of(row: Row) -> tuple[Any, ...] | None:
        value = row.get(name)
        return None if value is None else (hashable(value),)

    return key_of


def _subscription_key(left_key: str) -> Callable[[Row], tuple[Any, ...] | None]:
    def key_of(row: Row) -> tuple[Any, ...] | None:
        fk = row[FK_VALUE]
        if fk is None:
            # Events without foreign key join no right row: one group per left key.
            return (NO_FOREIGN_KEY, hashable(row[left_key]))
        return (hashable(fk),)

    return key_of


@builds(ForeignKeyTableTableJoin)
def build_foreign_key_table_table_join(
    step: ForeignKeyTableTableJoin, *, left: Built, right: Built, ctx: BuildContext
) -> Built:
    left_pk, right_pk = left.schema.key[0], right.schema.key[0]
    schema = _schema(step, left, right, [(step.key_column, left_pk.type)])
    shape = join_shape(left, right, step.left_alias, step.right_alias, [step.key_column])
    fk_type = infer_type(step.foreign_key, left.expression_columns())
    assert fk_type is not None
    events_schema = LogicalSchema(left.schema.columns + subscription_columns(fk_type))
    outer = step.join_type == "LEFT"
    subscribe = ForeignKeySubscriptionHandler(
        _foreign_key_function(step.foreign_key, left, ctx, step.ctx), outer
    )
    events = ctx.runtime.keyed(
        [K.KeyedInput(left.df, left.schema, LEFT, _column_key(left_pk.name))],
        handler=subscribe, output_schema=events_schema, name=f"{step.ctx}_subscriptions",
    )
    handler = ForeignKeyJoinHandler(shape, step.join_type, left_pk.name)
    df = ctx.runtime.keyed(
        [
            K.KeyedInput(events, events_schema, LEFT, _subscription_key(left_pk.name)),
            K.KeyedInput(right.df, right.schema, RIGHT, _column_key(right_pk.name)),
        ],
        handler=handler, output_schema=schema, name=step.ctx,
    )
    own = (
        (f"{ctx.query_id}.{step.ctx}.SubscriptionStore", _describe(events_schema)),
        (f"{ctx.query_id}.{step.ctx}.ResponseStore", _describe(schema)),
    )
    return Built(
        df=df, schema=schema, is_table=True, window=None,
        internal_schemas=_internal(step, ctx, left, right, [("Left", left), ("Right", right)]) + own,
    )
