"""Aggregation handlers driven directly (no Spark): stream, window, session and table semantics."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from engine.builders.aggregate import (
    SessionAggregateHandler,
    StreamAggregateHandler,
    TableAggregateHandler,
    TableGroupByHandler,
    TimeWindowedAggregateHandler,
    compile_aggregate_calls,
)
from engine.builders.context import PROCESSING_LOG
from engine.builders.windows import overlapping_sessions, time_windows_for
from engine.errors import PlanError
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.steps import SelectExpression
from engine.plan.steps_aggregate import PAIRED, WindowSpec
from engine.runtime import rows as R
from engine.runtime.keyed import KeyedRecord

COLUMNS = {"K": T.STRING, "V": T.INTEGER, "ROWTIME": T.BIGINT}


def calls(*specs: tuple[str, str, tuple[E.Expr, ...]]) -> list[Any]:
    exprs = [
        SelectExpression(alias=alias, expression=E.FunctionCall(name, args, star=not args))
        for alias, name, args in specs
    ]
    return compile_aggregate_calls(exprs, COLUMNS, {})


def count_and_sum() -> list[Any]:
    return calls(("C", "COUNT", ()), ("S", "SUM", (E.ColumnRef("V"),)))


def row(key: str, value: int | None, ts: int, *, deleted: bool = False, **extra: Any) -> dict[str, Any]:
    out = {"K": key, "V": value, R.ROWTIME: ts, R.ROWPARTITION: 0, R.ROWOFFSET: None,
           R.HEADERS: [], R.DELETED: deleted, R.WINDOWSTART: None, R.WINDOWEND: None}
    out.update(extra)
    return out


def drive(handler: Any, records: Iterable[tuple[dict[str, Any], int]], key: str = "K") -> list[dict[str, Any]]:
    """Run records (row, stream time) through the handler keyed by ``key``, in input order."""
    states: dict[Any, dict[str, Any]] = defaultdict(dict)
    out = []
    for seq, (r, stream_time) in enumerate(records):
        seq_key = tuple(r[R.SEQ]) if R.SEQ in r else (seq,)
        out.extend(handler.process(states[r[key]], KeyedRecord(0, seq_key, r, stream_time)))
    return sorted(out, key=lambda o: o[R.SEQ])


def with_stream_time(rows: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    out, st = [], -1
    for r in rows:
        st = max(st, r[R.ROWTIME])
        out.append((r, st))
    return out


def test_stream_aggregate_emits_every_update_with_the_largest_timestamp_so_far() -> None:
    handler = StreamAggregateHandler(["K"], count_and_sum(), "q", "Aggregate")
    out = drive(handler, with_stream_time([row("a", 1, 10), row("b", 5, 3), row("a", 2, 7)]))
    assert [(o["K"], o["C"], o["S"], o[R.ROWTIME]) for o in out] == [
        ("a", 1, 1, 10), ("b", 1, 5, 3), ("a", 2, 3, 10),
    ]
    assert [o[R.SEQ] for o in out] == [[0], [1], [2]]


def test_count_of_a_column_skips_nulls_but_count_star_does_not() -> None:
    handler = StreamAggregateHandler(
        ["K"], calls(("C", "COUNT", (E.ColumnRef("V"),)), ("N", "COUNT", ())), "q", "Aggregate"
    )
    out = drive(handler, with_stream_time([row("a", None, 1), row("a", 4, 2)]))
    assert [(o["C"], o["N"]) for o in out] == [(0, 1), (1, 2)]


def test_tumbling_windows_put_a_record_in_the_window_holding_its_timestamp() -> None:
    spec = WindowSpec(type="TUMBLING", size_ms=10, grace_ms=100)
    handler = TimeWindowedAggregateHandler(["K"], count_and_sum(), "q", "Aggregate", window=spec)
    out = drive(handler, with_stream_time([row("a", 1, 3), row("a", 2, 12), row("a", 3, 9)]))
    assert [(o[R.WINDOWSTART], o[R.WINDOWEND], o["C"], o["S"]) for o in out] == [
        (0, 10, 1, 1), (10, 20, 1, 2), (0, 10, 2, 4),
    ]
    assert out[2][R.ROWTIME] == 9


def test_tumbling_windows_drop_records_after_the_grace_period() -> None:
    spec = WindowSpec(type="TUMBLING", size_ms=10, grace_ms=5)
    handler = TimeWindowedAggregateHandler(["K"], count_and_sum(), "q", "Aggregate", window=spec)
    out = drive(handler, with_stream_time([row("a", 1, 3), row("b", 1, 15), row("a", 1, 4), row("a", 1, 2)]))
    # stream time 15 closes [0, 10) at 15 - 5 = 10: the two later records for it are late
    assert [(o["K"], o[R.WINDOWSTART], o["C"]) for o in out] == [("a", 0, 1), ("b", 10, 1)]


def test_hopping_windows_update_each_window_in_start_order_with_indexed_seqs() -> None:
    spec = WindowSpec(type="HOPPING", size_ms=10, advance_ms=5, grace_ms=100)
    handler = TimeWindowedAggregateHandler(["K"], count_and_sum(), "q", "Aggregate", window=spec)
    out = drive(handler, with_stream_time([row("a", 1, 7)]))
    assert [(o[R.WINDOWSTART], o[R.WINDOWEND], o[R.SEQ]) for o in out] == [(0, 10, [0, 0]), (5, 15, [0, 1])]


def test_default_grace_is_a_day_minus_the_window_size() -> None:
    assert WindowSpec(type="TUMBLING", size_ms=1000).effective_grace_ms == 86_400_000 - 1000
    assert WindowSpec(type="SESSION", gap_ms=500).effective_grace_ms == 86_400_000 - 500
    assert WindowSpec(type="TUMBLING", size_ms=1000, grace_ms=0).effective_grace_ms == 0


def test_window_spec_refuses_an_advance_larger_than_the_size() -> None:
    with pytest.raises(PlanError, match="advance"):
        WindowSpec(type="HOPPING", size_ms=10, advance_ms=20)


def test_sessions_merge_and_the_merged_away_sessions_are_deleted_first() -> None:
    spec = WindowSpec(type="SESSION", gap_ms=15, grace_ms=1000)
    handler = SessionAggregateHandler(["K"], count_and_sum(), "q", "Aggregate", window=spec)
    out = drive(handler, with_stream_time([row("a", 1, 0), row("a", 2, 30), row("a", 4, 15)]))
    shape = [(o[R.WINDOWSTART], o[R.WINDOWEND], o[R.DELETED], o["C"], o[R.ROWTIME]) for o in out]
    assert shape == [
        (0, 0, False, 1, 0),
        (30, 30, False, 1, 30),
        (0, 0, True, None, 0),
        (30, 30, True, None, 30),
        (0, 30, False, 3, 30),
    ]
    assert [o[R.SEQ] for o in out][2:] == [[2, 0], [2, 1], [2, 2]]
    assert out[-1]["S"] == 7


def test_a_session_record_at_an_existing_single_point_session_overwrites_without_a_delete() -> None:
    spec = WindowSpec(type="SESSION", gap_ms=10, grace_ms=1000)
    handler = SessionAggregateHandler(["K"], count_and_sum(), "q", "Aggregate", window=spec)
    out = drive(handler, with_stream_time([row("a", 1, 5), row("a", 1, 5)]))
    assert [(o[R.DELETED], o["C"]) for o in out] == [(False, 1), (False, 2)]


def test_a_record_for_an_expired_session_is_dropped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    spec = WindowSpec(type="SESSION", gap_ms=5, grace_ms=10)
    handler = SessionAggregateHandler(["K"], count_and_sum(), "q", "Aggregate", window=spec)
    with caplog.at_level(logging.WARNING, logger=PROCESSING_LOG.name):
        # stream time 100 closes sessions ending before 100 - 10: the record at 50 is late
        out = drive(handler, with_stream_time([row("a", 1, 100), row("a", 2, 50)]))
    assert [(o[R.WINDOWSTART], o[R.WINDOWEND], o["C"]) for o in out] == [(100, 100, 1)]
    assert "q Aggregate: Skipping a record for the expired session [50, 50]." in caplog.text


def test_time_windows_for_matches_kafka_streams() -> None:
    assert time_windows_for(7, 10, 10) == [(0, 10)]
    assert time_windows_for(12, 10, 5) == [(5, 15), (10, 20)]
    assert time_windows_for(0, 10, 5) == [(0, 10)]


def test_overlapping_sessions_are_ordered_by_end() -> None:
    # The session state's tuples: (start, end, accumulators, passed).
    sessions = [(20, 25, [1, 5], False), (0, 12, [9, 1], False), (40, 50, [0, 0], False)]
    assert overlapping_sessions(sessions, 15, 5) == [1, 0]


def group_by_handler() -> TableGroupByHandler:
    return TableGroupByHandler([("G", lambda r: r["V"])], ["K", "V"], "q", "GroupBy")


def test_table_group_by_retracts_from_the_old_group_before_adding_to_the_new() -> None:
    handler = group_by_handler()
    out = drive(handler, [(row("k1", 1, 1), 1), (row("k1", 2, 2), 2), (row("k1", None, 3, deleted=True), 3)])
    assert [(o["G"], o[R.DELETED], o[PAIRED], o[R.SEQ]) for o in out] == [
        (1, False, False, [0, 1]),
        (1, True, False, [1, 0]),
        (2, False, False, [1, 1]),
        (2, True, False, [2, 0]),
    ]
    assert out[1]["V"] == 1 and out[1][R.ROWTIME] == 2


def test_table_group_by_pairs_a_change_within_one_group() -> None:
    handler = TableGroupByHandler([("G", lambda r: r["K"])], ["K", "V"], "q", "GroupBy")
    out = drive(handler, [(row("k1", 1, 1), 1), (row("k1", 5, 2), 2)])
    assert [(o[R.DELETED], o[PAIRED], o["V"]) for o in out] == [(False, False, 1), (True, True, 1), (False, False, 5)]


def test_table_group_by_ignores_a_delete_of_an_unknown_row() -> None:
    assert drive(group_by_handler(), [(row("k1", None, 1, deleted=True), 1)]) == []


def test_table_aggregate_undoes_retractions_and_emits_once_for_a_paired_change() -> None:
    handler = TableAggregateHandler(["K"], count_and_sum(), "q", "Aggregate")
    records = [
        (row("g", 1, 5, **{R.SEQ: [0, 1], PAIRED: False}), 5),
        (row("g", 1, 3, deleted=True, **{R.SEQ: [1, 0], PAIRED: True}), 5),
        (row("g", 4, 3, **{R.SEQ: [1, 1], PAIRED: False}), 5),
        (row("g", 4, 8, deleted=True, **{R.SEQ: [2, 0], PAIRED: False}), 8),
    ]
    out = drive(handler, records)
    assert [(o["C"], o["S"], o[R.ROWTIME], o[R.SEQ]) for o in out] == [(1, 1, 5, [0, 1]), (1, 4, 5, [1, 1]), (0, 0, 8, [2, 0])]


def test_compile_aggregate_calls_takes_trailing_literals_as_init_arguments() -> None:
    [topk] = calls(("T", "TOPK", (E.ColumnRef("V"), E.Literal(2, T.INTEGER))))
    acc = topk.aggregator.initial()
    for v in (3, 9, 1, 7):
        acc = topk.aggregator.add(acc, topk.value({"V": v}, "q", "x"))
    assert topk.aggregator.result(acc) == [9, 7]


def test_having_deletes_a_group_only_after_it_passed() -> None:
    handler = StreamAggregateHandler(
        ["K"], count_and_sum(), "q", "Aggregate", having=lambda r: r["S"] is not None and r["S"] > 2
    )
    out = drive(handler, with_stream_time([row("a", 1, 1), row("a", 5, 2), row("a", -9, 3), row("a", 1, 4)]))
    assert [(o[R.DELETED], o["S"]) for o in out] == [(False, 6), (True, None)]
