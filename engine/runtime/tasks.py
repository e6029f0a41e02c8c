"""Sequential, per-task processing of keyed steps: what a Kafka Streams task does.

The streaming runtime runs every stateful step as Kafka Streams runs a sub-topology: records
are routed to a *task* (a hash of their group key modulo the query's task count), and a task
sees its records one at a time in input order (``__seq``). The task keeps the state of each
of its groups, its stream time (the largest record timestamp seen so far, overall and per
input side), and for EMIT FINAL and outer joins the entries that wait for stream time to
pass them. This module holds that logic as plain Python over plain state objects, so that
it is tested without Spark against the bounded runtime's DataFrame passes
(``keyed.process_keyed``, ``closes.resolve_closes``, ``suppress.suppress_until_window_closes``);
``engine.runtime.kafka`` keeps the state objects in Spark's state store between micro-batches.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.runtime import rows as R
from engine.runtime.closes import CANCEL, CLOSE, KIND, ORDER, PENDING, PENDING_ENTRY
from engine.runtime.keyed import KeyedHandler, KeyedRecord

Row = dict[str, Any]


@dataclass
class Clock:
    """A task's stream time: the largest timestamp so far, overall and per input side."""

    stream_time: int | None = None
    side_times: list[int | None] = field(default_factory=list)

    def advance(self, side: int, ts: int, sides: int) -> None:
        """Take one record's timestamp into account (before the record is processed)."""
        while len(self.side_times) < sides:
            self.side_times.append(None)
        self.stream_time = ts if self.stream_time is None else max(self.stream_time, ts)
        current = self.side_times[side]
        self.side_times[side] = ts if current is None else max(current, ts)


@dataclass(frozen=True, slots=True)
class Envelope:
    """One input record of a keyed task: group key bytes, side, seq, timestamp, pickled row."""

    group: bytes
    side: int
    seq: tuple[int, ...]
    ts: int
    row: bytes


def _without_internals(row: Row) -> Row:
    return {k: v for k, v in row.items() if k not in (KIND, PENDING, CLOSE, ORDER)}


@dataclass
class KeyedTask:
    """Runs a keyed handler over one task's records, in seq order, across micro-batches.

    ``groups`` maps a group key (bytes) to its handler state; ``outer`` holds the pending
    outer-join entries (by the seq of the record that put them) when ``closes`` is on.
    """

    handler: KeyedHandler
    sides: int
    closes: bool = False

    def process(
        self,
        envelopes: Iterable[Envelope],
        groups: MutableMapping[bytes, dict[str, Any]],
        clock: Clock,
        outer: dict[tuple[int, ...], Row],
    ) -> list[Row]:
        """The output rows of ``envelopes``; updates ``groups``, ``clock`` and ``outer`` in place."""
        out: list[Row] = []
        for env in sorted(envelopes, key=lambda e: e.seq):
            clock.advance(env.side, env.ts, self.sides)
            assert clock.stream_time is not None
            if self.closes and env.ts == clock.stream_time:
                out.extend(self._close(env.seq, clock.stream_time, outer))
            state = groups.get(env.group)
            if state is None:
                state = {}
                groups[env.group] = state
            record = KeyedRecord(
                env.side, env.seq, pickle.loads(env.row), clock.stream_time, tuple(clock.side_times)
            )
            for produced in self.handler.process(state, record):
                kind = produced.get(KIND) if self.closes else None
                if kind == PENDING_ENTRY:
                    outer[tuple(produced[PENDING])] = produced
                elif kind == CANCEL:
                    outer.pop(tuple(produced[PENDING]), None)
                else:
                    out.append(_without_internals(produced) if self.closes else produced)
        return out

    @staticmethod
    def _close(seq: tuple[int, ...], stream_time: int, outer: dict[tuple[int, ...], Row]) -> list[Row]:
        """Entries closed by the record at ``seq`` whose timestamp is the stream time."""
        closing = [pid for pid, entry in outer.items() if entry[CLOSE] < stream_time]
        entries = sorted(
            (outer.pop(pid) for pid in closing),
            key=lambda e: (e[R.ROWTIME], e[ORDER], list(e[PENDING])),
        )
        emitted = []
        for rank, entry in enumerate(entries):
            row = _without_internals(entry)
            row[R.SEQ] = [*seq, 0, rank]
            emitted.append(row)
        return emitted


@dataclass
class SuppressBuffer:
    """EMIT FINAL for one task: the latest result per window, emitted once the window closes.

    Kafka Streams' suppress processor: stream time is the largest timestamp of the updates
    reaching it; after buffering an update, every window whose end plus grace is at most the
    stream time is emitted (window end, key, window start order) with the seq of the update
    that closed it plus an index. Deletes are buffered but never emitted. With
    ``retention_ms`` (tableSuppressV2), a closed window that started more than the retention
    before stream time has expired from the window store and is dropped instead of emitted.
    """

    grace_ms: int
    stream_time: int | None = None
    windows: dict[tuple[str, int, int], Row] = field(default_factory=dict)
    retention_ms: int | None = None

    def process(self, updates: Sequence[tuple[str, Row]]) -> list[Row]:
        """``updates``: (key as JSON text, row) pairs; returns the final rows they close."""
        out: list[Row] = []
        for key, row in sorted(updates, key=lambda u: u[1][R.SEQ]):
            ts = row[R.ROWTIME]
            self.stream_time = ts if self.stream_time is None else max(self.stream_time, ts)
            self.windows[(key, row[R.WINDOWSTART], row[R.WINDOWEND])] = row
            closed = sorted(
                (w for w in self.windows if w[2] + self.grace_ms <= self.stream_time),
                key=lambda w: (w[2], w[0], w[1]),
            )
            index = 0
            for window in closed:
                final = self.windows.pop(window)
                if final[R.DELETED] or self._expired(window[1]):
                    continue
                emitted = dict(final)
                emitted[R.SEQ] = [*row[R.SEQ], index]
                index += 1
                out.append(emitted)
        return out

    def _expired(self, window_start: int) -> bool:
        # buffers pickled before the field existed have no retention
        retention = getattr(self, "retention_ms", None)
        assert self.stream_time is not None
        return retention is not None and window_start < self.stream_time - retention
