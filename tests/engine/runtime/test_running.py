"""Vectorised running aggregates (``engine.runtime.running``) against a record-at-a-time
reference written as V1's handler computes (Java's int and long wrapping, doubles added in
input order from 0.0, NULLs skipped), over records split into micro-batches at random and
handed over out of order within each batch."""

from __future__ import annotations

import math
import random
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.runtime import rows as R
from engine.runtime.running import (
    HAS_PREVIOUS,
    RunningCall,
    arg_column,
    has_column,
    input_order,
    previous_column,
    result_column,
    run_group,
    run_group_with_previous,
    run_task,
)

INT = st.integers(-(2**31), 2**31 - 1)
BIGINT = st.integers(-(2**63), 2**63 - 1)
DOUBLE = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([-0.0, 0.1, 1e308])
CALLS = [
    RunningCall("COUNT", False, 0),
    RunningCall("COUNT", True, 0),
    RunningCall("SUM", True, 32),
    RunningCall("SUM", True, 64),
    RunningCall("SUM", True, 0),
    RunningCall("AVG", True, 32),
    RunningCall("AVG", True, 64),
    RunningCall("AVG", True, 0),
    RunningCall("MIN", True, 32),
    RunningCall("MAX", True, 64),
]
# The argument each call reads: (strategy, zero) by bits
_ARGS = {32: INT, 64: BIGINT, 0: DOUBLE}


def _wrap(value: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half


def _reference(calls: list[RunningCall], records: list[dict[str, Any]]) -> list[list[Any]]:
    """Each record's results, one record at a time."""
    out = []
    accs: list[Any] = [None] * len(calls)
    for r in records:
        row = []
        for i, call in enumerate(calls):
            v = r["args"][i]
            acc = accs[i]
            if call.function == "COUNT":
                acc = (acc or 0) + (1 if not call.has_argument or v is not None else 0)
                result: Any = acc
            elif call.function in ("SUM", "AVG"):
                count, total = acc or (0, 0.0 if call.bits == 0 else 0)
                if v is not None:
                    count, total = count + 1, total + v
                acc = (count, total)
                wrapped = total if call.bits == 0 else _wrap(total, call.bits)
                if call.function == "SUM":
                    result = wrapped
                else:
                    result = 0.0 if count == 0 else float(wrapped) / count
            else:
                pick = max if call.function == "MAX" else min
                acc = v if acc is None else (acc if v is None else pick(acc, v))
                result = acc
            accs[i] = acc
            row.append(result)
        out.append(row)
    return out


def _frame(calls: list[RunningCall], records: list[dict[str, Any]]) -> pd.DataFrame:
    data: dict[str, Any] = {"K": ["k"] * len(records)}
    for i, call in enumerate(calls):
        values = [r["args"][i] for r in records]
        zero: Any = 0.0 if call.bits == 0 else 0
        data[arg_column(i)] = pd.Series(
            [zero if v is None else v for v in values], dtype="float64" if call.bits == 0 else "int64"
        )
        data[has_column(i)] = [v is not None for v in values]
    data[R.SEQ] = [[0, r["seq"]] for r in records]
    data[R.ROWTIME] = [r["ts"] for r in records]
    data[R.ROWPARTITION] = [0] * len(records)
    return pd.DataFrame(data)


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, float):
        return (math.isnan(want) and math.isnan(got)) or (got == want and math.copysign(1, got) == math.copysign(1, want))
    return got == want


@st.composite
def _batches(draw: Any) -> tuple[list[dict[str, Any]], list[int], int]:
    n = draw(st.integers(1, 30))
    records = [
        {
            "seq": i,
            "ts": draw(st.integers(0, 10_000)),
            "args": [draw(st.none() | _ARGS[c.bits]) for c in CALLS],
        }
        for i in range(n)
    ]
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=4))) if n > 1 else []
    return records, cuts, draw(st.integers(0, 2**16))


@settings(max_examples=80, deadline=None)
@given(_batches())
def test_results_over_micro_batches_equal_the_record_at_a_time_reference(drawn: Any) -> None:
    records, cuts, seed = drawn
    want = _reference(CALLS, records)
    state = None
    got: list[list[Any]] = []
    rowtimes: list[int] = []
    for start, end in zip([0, *cuts], [*cuts, len(records)], strict=True):
        batch = records[start:end]
        random.Random(seed).shuffle(batch)  # a batch's records come in any order
        out, state = run_group(CALLS, ["K"], _frame(CALLS, batch), state)
        assert [s[1] for s in out[R.SEQ]] == sorted(r["seq"] for r in batch)
        got += [[out[result_column(i)][j] for i in range(len(CALLS))] for j in range(len(batch))]
        rowtimes += [int(t) for t in out[R.ROWTIME]]
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        for call, a, b in zip(CALLS, g, w, strict=True):
            assert _same(a, b), f"record {index}, {call}: {a!r} != {b!r}"
    assert rowtimes == [max(r["ts"] for r in records[: i + 1]) for i in range(len(records))]


@settings(max_examples=50, deadline=None)
@given(_batches())
def test_each_record_also_gets_the_results_its_group_had_before_it(drawn: Any) -> None:
    """streamAggregateV4's HAVING sees both sides of each update: a record's previous results
    are the record before it's, across micro-batches, and none before the group's first."""
    records, cuts, seed = drawn
    want = _reference(CALLS, records)
    state = None
    got: list[list[Any]] = []
    before: list[list[Any]] = []
    had: list[bool] = []
    for start, end in zip([0, *cuts], [*cuts, len(records)], strict=True):
        batch = records[start:end]
        random.Random(seed).shuffle(batch)
        out, state = run_group_with_previous(CALLS, ["K"], _frame(CALLS, batch), state)
        got += [[out[result_column(i)][j] for i in range(len(CALLS))] for j in range(len(batch))]
        before += [[out[previous_column(i)][j] for i in range(len(CALLS))] for j in range(len(batch))]
        had += [bool(h) for h in out[HAS_PREVIOUS]]
    assert had == [False] + [True] * (len(records) - 1)
    assert all(v is None for v in before[0])
    for index in range(1, len(records)):
        for call, a, b in zip(CALLS, before[index], want[index - 1], strict=True):
            assert _same(a, b), f"record {index}, {call}: previous {a!r} != {b!r}"
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        for call, a, b in zip(CALLS, g, w, strict=True):
            assert _same(a, b), f"record {index}, {call}: {a!r} != {b!r}"


@settings(max_examples=50, deadline=None)
@given(_batches(), st.lists(st.sampled_from(["a", "b", "c"]), min_size=30, max_size=30), st.booleans())
def test_a_tasks_rows_come_in_input_order_across_groups_with_each_groups_results(
    drawn: Any, groups: list[str], previous: bool
) -> None:
    """streamAggregateV4's task: records of several groups per micro-batch, handed over in
    any order; the rows come back in input order, each with its own group's running results
    (and the group's results before it), the groups' states kept between batches."""
    records, cuts, seed = drawn
    for r in records:
        r["group"] = groups[r["seq"]]
    want = {g: iter(_reference(CALLS, [r for r in records if r["group"] == g])) for g in set(groups)}
    states: dict[bytes, tuple[Any, ...]] = {}
    rows: list[pd.DataFrame] = []
    for start, end in zip([0, *cuts], [*cuts, len(records)], strict=True):
        batch = records[start:end]
        random.Random(seed).shuffle(batch)
        frame = _frame(CALLS, batch).assign(K=[r["group"] for r in batch])
        rows.append(run_task(CALLS, ["K"], frame, states, previous=previous))
    out = pd.concat(rows, ignore_index=True)
    assert [s[1] for s in out[R.SEQ]] == list(range(len(records)))
    assert list(out["K"]) == [r["group"] for r in records]
    assert len(states) == len({r["group"] for r in records})
    before: dict[str, list[Any] | None] = {}
    for index, group in enumerate(out["K"]):
        w = next(want[group])
        for i, call in enumerate(CALLS):
            assert _same(out[result_column(i)][index], w[i]), f"record {index}, {call}"
            if previous:
                b = before.get(group)
                assert _same(out[previous_column(i)][index], None if b is None else b[i]), f"record {index}, {call}"
        if previous:
            assert bool(out[HAS_PREVIOUS][index]) == (group in before)
        before[group] = w
    assert previous == (HAS_PREVIOUS in out.columns)


def test_sum_of_ints_wraps_like_java_int_and_keeps_the_exact_total_in_its_state() -> None:
    call = RunningCall("SUM", True, 32)
    records = [{"seq": i, "ts": 0, "args": [2**31 - 1]} for i in range(3)]
    out, state = run_group([call], ["K"], _frame([call], records), None)
    assert list(out[result_column(0)]) == [2**31 - 1, -2, 2**31 - 3]
    assert state[1] == 3 * (2**31 - 1)


def test_min_stays_null_until_a_value_comes_across_batches() -> None:
    call = RunningCall("MIN", True, 64)
    out, state = run_group([call], ["K"], _frame([call], [{"seq": 0, "ts": 0, "args": [None]}]), None)
    assert out[result_column(0)] == [None]
    out, state = run_group([call], ["K"], _frame([call], [{"seq": 1, "ts": 0, "args": [None]}, {"seq": 2, "ts": 0, "args": [-5]}]), state)
    assert out[result_column(0)] == [None, -5]
    assert state[1] == -5


def test_records_are_ordered_by_their_seq_as_tuples() -> None:
    assert input_order([[2, 0], [1, 9], [1, 10]]) == [1, 2, 0]


def test_a_call_without_a_running_form_is_refused() -> None:
    with pytest.raises(ValueError, match="no running form"):
        RunningCall("COLLECT_LIST", True, 0)
    with pytest.raises(ValueError, match="INT or BIGINT"):
        RunningCall("MAX", True, 0)


@pytest.mark.parametrize("previous", [False, True])
def test_each_row_carries_its_records_headers_when_the_frame_has_them(previous: bool) -> None:
    """The aggregate versions that forward headers hand each record's headers in: its row
    gets them back, in input order across groups; a frame without them gives rows without."""
    call = RunningCall("COUNT", False, 0)
    records = [{"seq": i, "ts": i, "args": [None]} for i in range(4)]
    headers = [[{"KEY": "trace", "VALUE": bytes([i])}] if i % 2 == 0 else [] for i in range(4)]
    frame = _frame([call], records).assign(K=["a", "b", "a", "b"])
    plain = run_task([call], ["K"], frame.iloc[::-1], {}, previous=previous)
    assert R.HEADERS not in plain.columns
    out = run_task([call], ["K"], frame.assign(**{R.HEADERS: headers}).iloc[::-1], {}, previous=previous)
    assert [list(h) for h in out[R.HEADERS]] == headers
    assert list(out[result_column(0)]) == [1, 1, 2, 2]
