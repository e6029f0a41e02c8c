"""Join handlers, driven directly with keyed records (no Spark), plus one Spark run per kind."""

from __future__ import annotations

from typing import Any

import pytest

from engine.builders.joins import (
    GROUP_KEY,
    LEFT,
    RIGHT,
    JoinShape,
    StreamStreamHandler,
    StreamTableHandler,
    StreamWindows,
    TableTableHandler,
    resolve_closes,
)
from engine.runtime import rows as R
from engine.runtime.keyed import KeyedRecord

SHAPE = JoinShape(("K",), (("V", "L_V"),), (("V", "R_V"),))


def rec(side: int, seq: int, key: Any, value: Any, ts: int, *, deleted: bool = False) -> dict[str, Any]:
    return {
        "V": value, GROUP_KEY: (key,), R.SEQ: [seq], R.ROWTIME: ts, R.ROWPARTITION: 0,
        R.ROWOFFSET: seq, R.HEADERS: [], R.DELETED: deleted, R.WINDOWSTART: None, R.WINDOWEND: None,
    }


def drive(handler: Any, records: list[tuple[int, dict[str, Any]]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Feed records of one key in order, computing stream times as the processor sees them."""
    state: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    timeline = []
    stream_time = None
    side_times: list[int | None] = [None, None]
    for side, row in records:
        ts = row[R.ROWTIME]
        stream_time = ts if stream_time is None else max(stream_time, ts)
        side_times[side] = ts if side_times[side] is None else max(side_times[side], ts)  # type: ignore[type-var]
        timeline.append({"seq": row[R.SEQ], "ts": ts, "stream_time": stream_time, "partition": 0})
        out += handler.process(state, KeyedRecord(side, tuple(row[R.SEQ]), row, stream_time, tuple(side_times)))
    return out, timeline


def simple(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(r["K"], r["L_V"], r["R_V"], r[R.ROWTIME], r[R.DELETED]) for r in rows]


def test_stream_table_join_sees_the_table_as_of_each_stream_record() -> None:
    handler = StreamTableHandler(SHAPE, outer=False)
    out, _ = drive(handler, [
        (LEFT, rec(LEFT, 0, 1, "s0", 5)),
        (RIGHT, rec(RIGHT, 1, 1, "t1", 1)),
        (LEFT, rec(LEFT, 2, 1, "s1", 6)),
        (RIGHT, rec(RIGHT, 3, 1, None, 7, deleted=True)),
        (LEFT, rec(LEFT, 4, 1, "s2", 8)),
    ])
    assert simple(out) == [(1, "s1", "t1", 6, False)]


def test_stream_table_left_join_emits_every_stream_record() -> None:
    handler = StreamTableHandler(SHAPE, outer=True)
    out, _ = drive(handler, [(LEFT, rec(LEFT, 0, 1, "s0", 5)), (RIGHT, rec(RIGHT, 1, 1, "t", 9)),
                             (LEFT, rec(LEFT, 2, 1, "s1", 6))])
    assert simple(out) == [(1, "s0", None, 5, False), (1, "s1", "t", 6, False)]


def test_table_table_inner_join_emits_updates_and_a_delete_when_a_side_goes() -> None:
    handler = TableTableHandler(SHAPE, "INNER")
    out, _ = drive(handler, [
        (LEFT, rec(LEFT, 0, 1, "a", 1)),
        (RIGHT, rec(RIGHT, 1, 1, "x", 5)),
        (LEFT, rec(LEFT, 2, 1, "b", 3)),
        (RIGHT, rec(RIGHT, 3, 1, None, 6, deleted=True)),
        (LEFT, rec(LEFT, 4, 1, "c", 7)),
    ])
    assert simple(out) == [
        (1, "a", "x", 5, False), (1, "b", "x", 5, False), (1, None, None, 6, True),
    ]


def test_table_table_left_join_ignores_deletes_of_missing_rows() -> None:
    handler = TableTableHandler(SHAPE, "LEFT")
    out, _ = drive(handler, [
        (LEFT, rec(LEFT, 0, 1, None, 1, deleted=True)),
        (LEFT, rec(LEFT, 1, 1, "a", 2)),
        (RIGHT, rec(RIGHT, 2, 1, "x", 3)),
        (RIGHT, rec(RIGHT, 3, 1, None, 4, deleted=True)),
        (LEFT, rec(LEFT, 4, 1, None, 5, deleted=True)),
    ])
    assert simple(out) == [
        (1, "a", None, 2, False), (1, "a", "x", 3, False), (1, "a", None, 4, False),
        (1, None, None, 5, True),
    ]


def test_table_table_right_join_mirrors_the_left_join() -> None:
    handler = TableTableHandler(SHAPE, "RIGHT")
    out, _ = drive(handler, [(LEFT, rec(LEFT, 0, 1, "a", 1)), (RIGHT, rec(RIGHT, 1, 1, "x", 2)),
                             (LEFT, rec(LEFT, 2, 1, None, 3, deleted=True))])
    assert simple(out) == [(1, "a", "x", 2, False), (1, None, "x", 3, False)]


def test_table_table_full_join_deletes_when_both_sides_are_gone() -> None:
    handler = TableTableHandler(SHAPE, "FULL")
    out, _ = drive(handler, [(RIGHT, rec(RIGHT, 0, 1, "x", 1)),
                             (RIGHT, rec(RIGHT, 1, 1, None, 2, deleted=True))])
    assert simple(out) == [(1, None, "x", 1, False), (1, None, None, 2, True)]


def windows(before: int, after: int, grace: int | None) -> StreamWindows:
    retention = max(86_400_000, before + after) if grace is None else before + after + grace
    return StreamWindows(before, after, grace, retention)


def test_stream_stream_inner_join_matches_within_before_and_after() -> None:
    handler = StreamStreamHandler(SHAPE, "INNER", windows(10, 5, None))
    out, _ = drive(handler, [
        (LEFT, rec(LEFT, 0, 1, "l", 100)),
        (RIGHT, rec(RIGHT, 1, 1, "r_early", 90)),  # 100 - 10: in
        (RIGHT, rec(RIGHT, 2, 1, "r_late", 106)),  # 100 + 6: out
        (RIGHT, rec(RIGHT, 3, 1, "r_ok", 105)),
    ])
    assert simple(out) == [(1, "l", "r_early", 100, False), (1, "l", "r_ok", 105, False)]


def test_stream_stream_left_join_without_grace_emits_unmatched_records_at_once() -> None:
    handler = StreamStreamHandler(SHAPE, "LEFT", windows(10, 10, None))
    out, _ = drive(handler, [(LEFT, rec(LEFT, 0, 1, "l", 0)), (RIGHT, rec(RIGHT, 1, 1, "r", 5)),
                             (RIGHT, rec(RIGHT, 2, 1, "r2", 50))])
    assert simple(out) == [(1, "l", None, 0, False), (1, "l", "r", 5, False)]


def test_stream_stream_full_join_with_grace_waits_for_the_window_to_close() -> None:
    handler = StreamStreamHandler(SHAPE, "FULL", windows(10, 10, 5))
    out, timeline = drive(handler, [
        (LEFT, rec(LEFT, 0, 1, "l", 0)),
        (RIGHT, rec(RIGHT, 1, 1, "r", 30)),   # stream time 30 > 0 + 10 + 5: closes l
        (LEFT, rec(LEFT, 2, 1, "l2", 31)),     # matches r, cancelling its pending entry
    ])
    resolved = resolve_closes(out, timeline)
    assert simple(resolved) == [(1, "l", None, 0, False), (1, "l2", "r", 31, False)]
    assert [r[R.SEQ] for r in resolved] == [[1, 0, 0], [2, 1, 0]]


def test_stream_stream_outer_entry_closes_only_once_stream_time_exceeds_its_close() -> None:
    # l at 0 with WITHIN 10 and GRACE 5 closes after 0 + 10 + 5: stream time 15 keeps it
    # open (Kafka Streams compares strictly), 16 closes it.
    handler = StreamStreamHandler(SHAPE, "LEFT", windows(10, 10, 5))
    out, timeline = drive(handler, [
        (LEFT, rec(LEFT, 0, 1, "l", 0)),
        (RIGHT, rec(RIGHT, 1, 1, "r15", 15)),
        (RIGHT, rec(RIGHT, 2, 1, "r16", 16)),
    ])
    resolved = resolve_closes(out, timeline)
    assert simple(resolved) == [(1, "l", None, 0, False)]
    assert resolved[0][R.SEQ] == [2, 0, 0]


def test_stream_stream_late_unmatched_record_is_emitted_at_once_even_with_grace() -> None:
    handler = StreamStreamHandler(SHAPE, "LEFT", windows(10, 10, 100))
    out, timeline = drive(handler, [(RIGHT, rec(RIGHT, 0, 1, "r", 500)), (LEFT, rec(LEFT, 1, 1, "l", 100))])
    assert simple(resolve_closes(out, timeline)) == [(1, "l", None, 100, False)]


def test_stream_stream_store_expires_records_by_its_own_stream_time() -> None:
    handler = StreamStreamHandler(SHAPE, "INNER", windows(10, 10, 0))
    out, _ = drive(handler, [
        (LEFT, rec(LEFT, 0, 1, "l_new", 1000)),
        (LEFT, rec(LEFT, 1, 1, "l_old", 100)),  # left store time 1000: expired on arrival
        (RIGHT, rec(RIGHT, 2, 1, "r", 105)),
    ])
    assert simple(out) == []


@pytest.mark.parametrize("join_type", ["LEFT", "RIGHT", "FULL"])
def test_stream_stream_pending_entry_that_never_closes_is_not_emitted(join_type: str) -> None:
    handler = StreamStreamHandler(SHAPE, join_type, windows(10, 10, 10))
    side = RIGHT if join_type == "RIGHT" else LEFT
    out, timeline = drive(handler, [(side, rec(side, 0, 1, "x", 100))])
    assert resolve_closes(out, timeline) == []


# --------------------------------------------------------------------------- Spark runs


def _spark_join_records(spark: Any, join_type: str, grace: int | None) -> list[tuple[Any, ...]]:
    from engine.builders.context import BuildContext
    from engine.builders.walker import build
    from engine.data.records import TopicRecord
    from engine.plan import expr as E
    from engine.plan import steps as S
    from engine.plan.schema import LogicalSchema
    from engine.plan.steps_join import StreamStreamJoin
    from engine.runtime.adapter import BoundedRuntime

    formats = S.Formats(key_format="KAFKA", value_format="JSON")
    schema = LogicalSchema.parse("ID INT KEY, V STRING")
    rt = BoundedRuntime(spark)
    rt.produce([
        TopicRecord("l", 1, {"V": "l1"}, 0),
        TopicRecord("r", 2, {"V": "r2"}, 500),
        TopicRecord("l", 3, {"V": "l3"}, 2500),
        TopicRecord("r", 1, {"V": "r1"}, 2600),
        TopicRecord("r", 3, {"V": "r3"}, 3000),
        TopicRecord("l", 9, {"V": "l9"}, 10000),
    ])
    join = StreamStreamJoin(
        ctx="Join",
        left=S.StreamSource(ctx="KsqlTopic/Left", topic="l", formats=formats, source_schema=schema),
        right=S.StreamSource(ctx="KsqlTopic/Right", topic="r", formats=formats, source_schema=schema),
        join_type=join_type, left_alias="L", right_alias="R", key_column="ROWKEY",
        left_key=E.ColumnRef("ID"), right_key=E.ColumnRef("ID"),
        before_ms=1000, after_ms=1000, grace_ms=grace,
    )
    built = build(join, BuildContext(runtime=rt, query_id="Q"))
    assert [c.name for c in built.schema.key] == ["ROWKEY"]
    assert any(name.endswith(".Join.Left") for name, _ in built.internal_schemas)
    rows = sorted(built.df.collect(), key=lambda r: list(r[R.SEQ]))
    return [(r["ROWKEY"], r["L_V"], r["R_V"], r[R.ROWTIME]) for r in rows]


def test_spark_full_join_with_grace_emits_closed_windows_in_processing_order(spark: Any) -> None:
    assert _spark_join_records(spark, "FULL", 1000) == [
        (1, "l1", None, 0), (2, None, "r2", 500), (3, "l3", "r3", 3000), (1, None, "r1", 2600),
    ]


def test_spark_inner_join_emits_only_matches(spark: Any) -> None:
    assert _spark_join_records(spark, "INNER", None) == [(3, "l3", "r3", 3000)]
