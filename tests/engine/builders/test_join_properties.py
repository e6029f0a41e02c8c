"""Property tests: join handlers against small plain-Python reference models (no Spark)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

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


def run_per_key(handler: Any, evs: list[Event]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What process_keyed does: stream times over all records, one handler state per key."""
    states: dict[int, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    timeline: list[dict[str, Any]] = []
    stream_time: int | None = None
    side_times: list[int | None] = [None, None]
    for seq, (side, key, value, ts) in enumerate(evs):
        stream_time = ts if stream_time is None else max(stream_time, ts)
        current = side_times[side]
        side_times[side] = ts if current is None else max(current, ts)
        row = {
            "V": value, GROUP_KEY: (key,), R.SEQ: [seq], R.ROWTIME: ts, R.ROWPARTITION: 0,
            R.ROWOFFSET: seq, R.HEADERS: [], R.DELETED: value is None, R.WINDOWSTART: None,
            R.WINDOWEND: None,
        }
        timeline.append({"seq": [seq], "ts": ts, "stream_time": stream_time, "partition": 0})
        record = KeyedRecord(side, (seq,), row, stream_time, tuple(side_times))
        out += handler.process(states.setdefault(key, {}), record)
    return out, timeline


def as_tuples(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    ordered = sorted(rows, key=lambda r: r[R.SEQ])
    return [(r["K"], r["L_V"], r["R_V"], r[R.ROWTIME]) for r in ordered]


# ------------------------------------------------------------------ stream-stream


def reference_stream_stream(
    evs: list[Event], join_type: str, before: int, after: int, grace: int | None
) -> list[tuple[Any, ...]]:
    """Kafka Streams' KStream-KStream join processors, simulated over all keys at once."""
    outer_sides = {"INNER": (), "LEFT": (LEFT,), "RIGHT": (RIGHT,), "FULL": (LEFT, RIGHT)}[join_type]
    retention = max(86_400_000, before + after) if grace is None else before + after + grace
    stores: dict[int, list[tuple[int, int, Any]]] = {LEFT: [], RIGHT: []}
    observed: dict[int, int | None] = {LEFT: None, RIGHT: None}
    outer_store: list[tuple[int, int, int, int, int, Any]] = []  # ts, order, seq, side, key, value
    stream_time: int | None = None
    out: list[tuple[Any, ...]] = []

    def pair(side: int, key: int, mine: Any, theirs: Any, ts: int) -> tuple[Any, ...]:
        return (key, mine, theirs, ts) if side == LEFT else (key, theirs, mine, ts)

    for seq, (side, key, value, ts) in enumerate(evs):
        if value is None:
            continue  # streams drop null values before the join (the source does)
        other = RIGHT if side == LEFT else LEFT
        look = after if side == LEFT else before
        stream_time = ts if stream_time is None else max(stream_time, ts)
        current = observed[side]
        observed[side] = ts if current is None else max(current, ts)
        if grace is not None and ts == stream_time:
            closed = sorted(
                (e for e in outer_store
                 if e[0] + (after if e[3] == LEFT else before) + grace < stream_time),
                key=lambda e: e[:3],
            )
            for e in closed:
                outer_store.remove(e)
                out.append(pair(e[3], e[4], e[5], None, e[0]))
        lo, hi = (ts - before, ts + after) if side == LEFT else (ts - after, ts + before)
        floor = None if observed[other] is None else observed[other] - retention  # type: ignore[operator]
        matches = sorted(
            (e for e in stores[other]
             if e[1] == key and lo <= e[0] <= hi and (floor is None or e[0] > floor)),
            key=lambda e: e[0],
        )
        for other_ts, _, other_value in matches:
            out.append(pair(side, key, value, other_value, max(ts, other_ts)))
            outer_store = [
                e for e in outer_store if not (e[3] == other and e[4] == key and e[0] == other_ts)
            ]
        stores[side].append((ts, key, value))
        if not matches and side in outer_sides:
            if grace is None or ts + look < stream_time:
                out.append(pair(side, key, value, None, ts))
            else:
                outer_store.append((ts, 0 if side == RIGHT else 1, seq, side, key, value))
    return out


@settings(max_examples=300, deadline=None)
@given(
    evs=events,
    join_type=st.sampled_from(["INNER", "LEFT", "RIGHT", "FULL"]),
    before=st.integers(0, 10),
    after=st.integers(0, 10),
    grace=st.one_of(st.none(), st.integers(0, 10)),
)
def test_stream_stream_handler_matches_the_global_reference(
    evs: list[Event], join_type: str, before: int, after: int, grace: int | None
) -> None:
    retention = max(86_400_000, before + after) if grace is None else before + after + grace
    handler = StreamStreamHandler(SHAPE, join_type, StreamWindows(before, after, grace, retention))
    streams = [e for e in evs if e[2] is not None]
    out, timeline = run_per_key(handler, streams)
    got = as_tuples(resolve_closes(out, timeline))
    assert got == reference_stream_stream(streams, join_type, before, after, grace)


# ------------------------------------------------------------------ stream-table


@settings(max_examples=200, deadline=None)
@given(evs=events, outer=st.booleans())
def test_stream_table_handler_joins_the_latest_table_row_before_each_record(
    evs: list[Event], outer: bool
) -> None:
    out, _ = run_per_key(StreamTableHandler(SHAPE, outer=outer), evs)
    table: dict[int, Any] = {}
    expected = []
    for side, key, value, ts in evs:
        if side == RIGHT:
            table[key] = value
        elif table.get(key) is not None or outer:
            expected.append((key, value, table.get(key), ts))
    assert as_tuples(out) == expected


# ------------------------------------------------------------------ table-table


@settings(max_examples=300, deadline=None)
@given(evs=events, join_type=st.sampled_from(["INNER", "LEFT", "RIGHT", "FULL"]))
def test_table_table_changelog_materialises_to_the_join_of_the_inputs(
    evs: list[Event], join_type: str
) -> None:
    out, _ = run_per_key(TableTableHandler(SHAPE, join_type), evs)
    materialised: dict[int, tuple[Any, Any]] = {}
    for row in sorted(out, key=lambda r: r[R.SEQ]):
        if row[R.DELETED]:
            materialised.pop(row["K"], None)
        else:
            materialised[row["K"]] = (row["L_V"], row["R_V"])
    left: dict[int, Any] = {}
    right: dict[int, Any] = {}
    for side, key, value, _ in evs:
        (left if side == LEFT else right)[key] = value
    expected = {}
    for key in set(left) | set(right):
        lv, rv = left.get(key), right.get(key)
        keep = {
            "INNER": lv is not None and rv is not None,
            "LEFT": lv is not None,
            "RIGHT": rv is not None,
            "FULL": lv is not None or rv is not None,
        }[join_type]
        if keep:
            expected[key] = (lv, rv)
    assert materialised == expected
