"""EMIT FINAL on the bounded runtime agrees with the Kafka runtime's buffer, with and without
the window store's retention (tableSuppressV2 / tableSuppressV1)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.plan import types as T
from engine.plan.schema import Column, LogicalSchema, Namespace
from engine.runtime import rows as R
from engine.runtime.suppress import suppress_until_window_closes
from engine.runtime.tasks import SuppressBuffer

SCHEMA = LogicalSchema((Column("K", T.STRING, Namespace.KEY), Column("N", T.BIGINT)))
SIZE = 10

updates = st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 60)), min_size=1, max_size=12)


def _rows(events: list[tuple[str, int]], grace: int = 0) -> list[dict[str, Any]]:
    """Aggregate updates as a windowed aggregate emits them: late records (whose window
    closed at the stream time so far) were dropped before the suppression."""
    rows: list[dict[str, Any]] = []
    stream_time = None
    for seq, (key, ts) in enumerate(events):
        stream_time = ts if stream_time is None else max(stream_time, ts)
        start = ts - ts % SIZE
        if start + SIZE + grace <= stream_time and ts < stream_time:
            continue
        rows.append({
            "K": key, "N": seq, R.SEQ: [seq], R.ROWTIME: ts, R.ROWPARTITION: 0,
            R.WINDOWSTART: start, R.WINDOWEND: start + SIZE, R.DELETED: False,
        })
    return rows


def _bounded(spark: Any, rows: list[dict[str, Any]], grace: int, retention: int | None) -> list[tuple[Any, ...]]:
    df = spark.createDataFrame(
        rows,
        "K string, N long, __seq array<long>, ROWTIME long, ROWPARTITION int, "
        "WINDOWSTART long, WINDOWEND long, __deleted boolean",
    )
    out = suppress_until_window_closes(df, SCHEMA, grace, retention_ms=retention).collect()
    return sorted((r["K"], r["WINDOWSTART"], r["N"], tuple(r[R.SEQ])) for r in out)


def _buffered(rows: list[dict[str, Any]], grace: int, retention: int | None) -> list[tuple[Any, ...]]:
    buffer = SuppressBuffer(grace_ms=grace, retention_ms=retention)
    out = buffer.process([(r["K"], dict(r)) for r in rows])
    return sorted((r["K"], r[R.WINDOWSTART], r["N"], tuple(r[R.SEQ])) for r in out)


@pytest.mark.parametrize("retention", [None, SIZE + 2])
def test_a_jump_past_a_close_skips_the_window_only_with_retention(spark: Any, retention: int | None) -> None:
    rows = _rows([("a", 1), ("b", 5), ("a", 12), ("a", 40)], 2)
    got = _bounded(spark, rows, 2, retention)
    windows = [(k, start) for k, start, _, _ in got]
    assert windows == ([("a", 0), ("a", 10), ("b", 0)] if retention is None else [("a", 0), ("b", 0)])
    assert got == _buffered(rows, 2, retention)


@pytest.mark.long
@settings(max_examples=15, deadline=None)
@given(events=updates, grace=st.integers(0, 5), keep=st.booleans())
def test_bounded_suppression_equals_the_kafka_buffer(spark: Any, events: list[tuple[str, int]], grace: int, keep: bool) -> None:
    retention = None if keep else SIZE + grace
    rows = _rows(events, grace)
    assert _bounded(spark, rows, grace, retention) == _buffered(rows, grace, retention)
