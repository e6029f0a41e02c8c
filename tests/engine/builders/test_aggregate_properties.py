"""Property tests: random record sequences through the aggregation handlers vs a plain model."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.builders.aggregate import (
    StreamAggregateHandler,
    TableAggregateHandler,
    TableGroupByHandler,
    TimeWindowedAggregateHandler,
    compile_aggregate_calls,
)
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.steps import SelectExpression
from engine.plan.steps_aggregate import WindowSpec
from engine.runtime import rows as R
from engine.runtime.keyed import KeyedRecord

COLUMNS = {"K": T.STRING, "G": T.INTEGER, "V": T.INTEGER, "ROWTIME": T.BIGINT}


def count_and_sum() -> list[Any]:
    return compile_aggregate_calls(
        [
            SelectExpression(alias="C", expression=E.FunctionCall("COUNT", (), star=True)),
            SelectExpression(alias="S", expression=E.FunctionCall("SUM", (E.ColumnRef("V"),))),
        ],
        COLUMNS,
        {},
    )


def make_row(key: Any, value: int | None, ts: int, seq: list[int], *, deleted: bool = False, **extra: Any) -> dict[str, Any]:
    out = {"K": key, "V": value, R.SEQ: seq, R.ROWTIME: ts, R.ROWPARTITION: 0, R.ROWOFFSET: None,
           R.HEADERS: [], R.DELETED: deleted, R.WINDOWSTART: None, R.WINDOWEND: None}
    out.update(extra)
    return out


def run_keyed(handler: Any, rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """What process_keyed does: group by key, each group in seq order, stream time over all."""
    stream_time: dict[tuple[int, ...], int] = {}
    st_now = -(2**63)
    for r in sorted(rows, key=lambda r: r[R.SEQ]):
        st_now = max(st_now, r[R.ROWTIME])
        stream_time[tuple(r[R.SEQ])] = st_now
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[r[key]].append(r)
    out = []
    for members in groups.values():
        state: dict[str, Any] = {}
        for r in sorted(members, key=lambda r: r[R.SEQ]):
            seq = tuple(r[R.SEQ])
            out.extend(handler.process(state, KeyedRecord(0, seq, r, stream_time[seq])))
    return sorted(out, key=lambda o: o[R.SEQ])


records = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-5, 5), st.integers(0, 60)),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(records)
def test_stream_aggregation_matches_a_running_count_and_sum(recs: list[tuple[str, int, int]]) -> None:
    rows = [make_row(k, v, ts, [i]) for i, (k, v, ts) in enumerate(recs)]
    out = run_keyed(StreamAggregateHandler(["K"], count_and_sum(), "q", "A"), rows, "K")
    counts: dict[str, int] = defaultdict(int)
    sums: dict[str, int] = defaultdict(int)
    times: dict[str, int] = {}
    expected = []
    for k, v, ts in recs:
        counts[k] += 1
        sums[k] += v
        times[k] = max(times.get(k, ts), ts)
        expected.append((k, counts[k], sums[k], times[k]))
    assert [(o["K"], o["C"], o["S"], o[R.ROWTIME]) for o in out] == expected


@settings(max_examples=60, deadline=None)
@given(records, st.integers(0, 15))
def test_tumbling_windows_match_a_model_with_grace(recs: list[tuple[str, int, int]], grace: int) -> None:
    size = 10
    rows = [make_row(k, v, ts, [i]) for i, (k, v, ts) in enumerate(recs)]
    spec = WindowSpec(type="TUMBLING", size_ms=size, grace_ms=grace)
    out = run_keyed(TimeWindowedAggregateHandler(["K"], count_and_sum(), "q", "A", window=spec), rows, "K")
    stream_time = -1
    counts: dict[tuple[str, int], int] = defaultdict(int)
    expected = []
    for k, _, ts in recs:
        stream_time = max(stream_time, ts)
        start = ts - ts % size
        if start + size > stream_time - grace:
            counts[(k, start)] += 1
            expected.append((k, start, start + size, counts[(k, start)]))
    assert [(o["K"], o[R.WINDOWSTART], o[R.WINDOWEND], o["C"]) for o in out] == expected


table_changes = st.lists(
    st.tuples(st.sampled_from(["k1", "k2", "k3"]), st.one_of(st.none(), st.integers(0, 2)), st.integers(0, 9)),
    max_size=30,
)


@settings(max_examples=80, deadline=None)
@given(table_changes)
def test_table_aggregation_retracts_before_adding_and_matches_a_recount(
    changes: list[tuple[str, int | None, int]],
) -> None:
    """Group a table by G (None deletes the row); COUNT and SUM(V) of each group after every change."""
    rows = [
        make_row(k, v, i, [i], deleted=g is None, G=g)
        for i, (k, g, v) in enumerate(changes)
    ]
    grouper = TableGroupByHandler([("G", lambda r: r["G"])], ["K", "V"], "q", "GroupBy")
    grouped = run_keyed(grouper, rows, "K")
    out = run_keyed(TableAggregateHandler(["G"], count_and_sum(), "q", "A"), grouped, "G")

    table: dict[str, tuple[int, int]] = {}
    seen_groups: set[int] = set()
    expected = []

    def totals(g: int) -> tuple[int, int, int]:
        members = [v for gg, v in table.values() if gg == g]
        return (g, len(members), sum(members))

    for k, g, v in changes:
        old = table.get(k)
        if g is None:
            table.pop(k, None)
        else:
            table[k] = (g, v)
        if old is not None and old[0] != g:
            expected.append(totals(old[0]))
        if g is not None:
            expected.append(totals(g))
            seen_groups.add(g)
    assert [(o["G"], o["C"], o["S"]) for o in out] == expected
