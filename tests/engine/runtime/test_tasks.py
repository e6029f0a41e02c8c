"""The streaming runtime's per-task processing against the bounded runtime's rules (no Spark).

A task sees its records in micro-batches; whatever the batch boundaries, its outputs must be
those of one pass over all records in input order (``process_keyed`` + ``resolve_closes``).
"""

from __future__ import annotations

import pickle
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.builders.joins import (
    GROUP_KEY,
    LEFT,
    RIGHT,
    JoinShape,
    StreamStreamHandler,
    StreamWindows,
    TableTableHandler,
    resolve_closes,
)
from engine.runtime import rows as R
from engine.runtime.closes import CLOSE, KIND, ORDER, PENDING, PENDING_ENTRY
from engine.runtime.keyed import KeyedRecord
from engine.runtime.tasks import Clock, Envelope, KeyedTask, SuppressBuffer

SHAPE = JoinShape(("K",), (("V", "L_V"),), (("V", "R_V"),))

Event = tuple[int, int, Any, int]  # side, key, value (None: delete), timestamp

events = st.lists(
    st.tuples(
        st.sampled_from([LEFT, RIGHT]),
        st.integers(0, 2),
        st.one_of(st.none(), st.integers(0, 99)),
        st.integers(0, 60),
    ),
    max_size=25,
)


def _row(seq: int, key: int, value: Any, ts: int) -> dict[str, Any]:
    return {
        "V": value, GROUP_KEY: (key,), R.SEQ: [seq], R.ROWTIME: ts, R.ROWPARTITION: 0,
        R.ROWOFFSET: seq, R.HEADERS: [], R.DELETED: value is None, R.WINDOWSTART: None,
        R.WINDOWEND: None,
    }


def one_pass(handler: Any, evs: list[Event]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The bounded runtime's view: stream time over all records, one state per key."""
    states: dict[int, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    clock = Clock()
    for seq, (side, key, value, ts) in enumerate(evs):
        clock.advance(side, ts, 2)
        timeline.append({"seq": [seq], "ts": ts, "stream_time": clock.stream_time, "partition": 0})
        record = KeyedRecord(side, (seq,), _row(seq, key, value, ts), clock.stream_time, tuple(clock.side_times))
        out += handler.process(states.setdefault(key, {}), record)
    return out, timeline


def in_batches(task: KeyedTask, evs: list[Event], cuts: list[int]) -> list[dict[str, Any]]:
    """The streaming runtime's view: the same records in micro-batches, state carried over."""
    envelopes = [
        Envelope(pickle.dumps((key,)), side, (seq,), ts, pickle.dumps(_row(seq, key, value, ts)))
        for seq, (side, key, value, ts) in enumerate(evs)
    ]
    groups: dict[bytes, dict[str, Any]] = {}
    clock, outer = Clock(), {}
    out: list[dict[str, Any]] = []
    bounds = sorted({0, len(envelopes), *(c % (len(envelopes) + 1) for c in cuts)})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        batch = envelopes[lo:hi]
        out += task.process(reversed(batch), groups, clock, outer)  # arrival order within a batch is free
        # State crosses a batch boundary through the state store: as bytes.
        groups = pickle.loads(pickle.dumps(groups))
        clock, outer = pickle.loads(pickle.dumps((clock, outer)))
    return sorted(out, key=lambda r: r[R.SEQ])


def as_tuples(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r[R.SEQ], r["K"], r["L_V"], r["R_V"], r[R.ROWTIME], r[R.DELETED]) for r in sorted(rows, key=lambda r: r[R.SEQ])]


@settings(max_examples=300, deadline=None)
@given(
    evs=events,
    cuts=st.lists(st.integers(0, 30), max_size=4),
    join_type=st.sampled_from(["INNER", "LEFT", "RIGHT", "FULL"]),
    before=st.integers(0, 10),
    after=st.integers(0, 10),
    grace=st.integers(0, 10),
)
def test_outer_join_closes_in_micro_batches_equal_one_bounded_pass(
    evs: list[Event], cuts: list[int], join_type: str, before: int, after: int, grace: int
) -> None:
    streams = [e for e in evs if e[2] is not None]
    windows = StreamWindows(before, after, grace, before + after + grace)
    out, timeline = one_pass(StreamStreamHandler(SHAPE, join_type, windows), streams)
    expected = as_tuples(resolve_closes(out, timeline))
    task = KeyedTask(StreamStreamHandler(SHAPE, join_type, windows), sides=2, closes=True)
    assert as_tuples(in_batches(task, streams, cuts)) == expected


@settings(max_examples=200, deadline=None)
@given(evs=events, cuts=st.lists(st.integers(0, 30), max_size=4), join_type=st.sampled_from(["INNER", "LEFT", "FULL"]))
def test_table_join_in_micro_batches_equals_one_bounded_pass(
    evs: list[Event], cuts: list[int], join_type: str
) -> None:
    expected, _ = one_pass(TableTableHandler(SHAPE, join_type), evs)
    got = in_batches(KeyedTask(TableTableHandler(SHAPE, join_type), sides=2), evs, cuts)
    assert as_tuples(got) == as_tuples(expected)


def test_the_record_that_advances_stream_time_past_a_close_emits_the_entry_with_its_seq() -> None:
    # Left outer join, window [ts, ts], grace 0: the left record at 10 waits in the outer
    # store; the next batch's record at 11 (another key) advances stream time past its close.
    handler = StreamStreamHandler(SHAPE, "LEFT", StreamWindows(0, 0, 0, 0))
    task = KeyedTask(handler, sides=2, closes=True)
    got = in_batches(task, [(LEFT, 1, 7, 10), (RIGHT, 2, 8, 11)], [1])
    assert as_tuples(got) == [([1, 0, 0], 1, 7, None, 10, False)]


class _PutsEntries:
    """A handler that puts each record with a ``close`` time in the outer store, unjoined."""

    def process(self, state: dict[str, Any], record: KeyedRecord) -> list[dict[str, Any]]:
        row = record.row
        if row["close"] is None:
            return []
        return [_entry(row["V"], row[R.ROWTIME], list(record.seq), row["close"])]


def _entry(value: int, ts: int, put: list[int], close: int) -> dict[str, Any]:
    return {
        "V": value, R.ROWTIME: ts, R.ROWPARTITION: 0, KIND: PENDING_ENTRY, PENDING: put, CLOSE: close,
        ORDER: 1,
    }


def test_only_a_record_at_stream_time_emits_the_closed_entries() -> None:
    # Stream time is 20 from the first record; the out-of-order record at 10 puts an entry that
    # closes at 15. The next out-of-order record (12) emits nothing; the record at 20 does.
    evs = [(0, 20, None), (1, 10, 15), (2, 12, None), (3, 20, None)]
    envelopes = [
        Envelope(b"k", LEFT, (seq,), ts, pickle.dumps({"V": seq, R.ROWTIME: ts, "close": close}))
        for seq, ts, close in evs
    ]
    outer: dict[tuple[int, ...], dict[str, Any]] = {}
    out = KeyedTask(_PutsEntries(), sides=2, closes=True).process(envelopes, {}, Clock(), outer)
    assert out == [{"V": 1, R.ROWTIME: 10, R.ROWPARTITION: 0, R.SEQ: [3, 0, 0]}]
    assert outer == {}
    # The bounded runtime's rule gives the same.
    timeline = [{"seq": [seq], "ts": ts, "stream_time": 20, "partition": 0} for seq, ts, _ in evs]
    assert resolve_closes([_entry(1, 10, [1], 15)], timeline) == out


def test_a_task_without_closes_never_emits_the_closed_entries() -> None:
    # Only an outer join's task (closes=True) closes entries: another task's record at stream
    # time leaves whatever the outer store holds alone.
    outer: dict[tuple[int, ...], dict[str, Any]] = {(0,): _entry(0, 10, [0], 15)}
    envelopes = [Envelope(b"k", LEFT, (1,), 20, pickle.dumps({"V": 1, R.ROWTIME: 20, "close": None}))]
    out = KeyedTask(_PutsEntries(), sides=2).process(envelopes, {}, Clock(), outer)
    assert out == []
    assert outer == {(0,): _entry(0, 10, [0], 15)}


def _update(seq: int, key: str, start: int, end: int, ts: int, deleted: bool = False) -> tuple[str, dict[str, Any]]:
    return key, {
        "K": key, R.SEQ: [seq], R.ROWTIME: ts, R.WINDOWSTART: start, R.WINDOWEND: end,
        R.DELETED: deleted,
    }


def test_suppress_emits_each_window_once_when_stream_time_reaches_end_plus_grace() -> None:
    buffer = SuppressBuffer(grace_ms=5)
    first = buffer.process([_update(0, "a", 0, 10, 3), _update(1, "b", 0, 10, 4), _update(2, "a", 0, 10, 9)])
    assert first == []
    closed = buffer.process([_update(3, "c", 10, 20, 15)])
    assert [(r["K"], r[R.SEQ]) for r in closed] == [("a", [3, 0]), ("b", [3, 1])]
    assert closed[0][R.ROWTIME] == 9  # the window's latest result, not the closing record's
    assert buffer.process([_update(4, "c", 10, 20, 16)]) == []


def test_suppress_never_emits_a_window_whose_latest_result_is_a_delete() -> None:
    buffer = SuppressBuffer(grace_ms=0)
    buffer.process([_update(0, "a", 0, 10, 3), _update(1, "a", 0, 10, 4, deleted=True)])
    assert buffer.process([_update(2, "b", 10, 20, 12)]) == []
    assert buffer.windows == {("b", 10, 20): _update(2, "b", 10, 20, 12)[1]}


def test_suppress_with_retention_skips_windows_that_expired_before_they_closed() -> None:
    # size 10, grace 2, retention 12: [0, 10) closes at 12 and stream time hits 12 exactly;
    # [10, 20) closes at 22, but stream time jumps to 40 and the store no longer holds it.
    buffer = SuppressBuffer(grace_ms=2, retention_ms=12)
    assert buffer.process([_update(0, "a", 0, 10, 1), _update(1, "b", 0, 10, 5)]) == []
    closed = buffer.process([_update(2, "a", 10, 20, 12)])
    assert [(r["K"], r[R.WINDOWSTART]) for r in closed] == [("a", 0), ("b", 0)]
    assert buffer.process([_update(3, "a", 40, 50, 40)]) == []
    assert buffer.windows == {("a", 40, 50): _update(3, "a", 40, 50, 40)[1]}


def test_suppress_buffers_pickled_before_retention_existed_never_expire() -> None:
    buffer = SuppressBuffer(grace_ms=0)
    del buffer.__dict__["retention_ms"]
    buffer.process([_update(0, "a", 0, 10, 3)])
    assert [r["K"] for r in buffer.process([_update(1, "b", 90, 100, 95)])] == ["a"]
