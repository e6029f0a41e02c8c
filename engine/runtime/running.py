"""Running aggregates of one group's records, vectorised: one update per input record.

``streamAggregateV3`` on the Kafka runtime hands each micro-batch's records of one group
(``transformWithStateInPandas``, grouped by the grouping key) to :func:`run_group`, which
orders them by input position and computes every result of every record at once with
numpy's accumulations, starting from the state the group's earlier records left. The
semantics are V1's (``StreamAggregateHandler`` in ``engine.builders.aggregate``) and the
bounded runtime's window functions (``streamAggregateV2``):

- COUNT(*) counts records, COUNT(x) the non-NULL values of x;
- SUM of INT or BIGINT values is exact, then wrapped like Java's int or long (a running
  int64 total wraps modulo 2^64, which agrees with every narrower wrap); SUM of DOUBLEs adds
  them in input order from 0.0, one addition at a time; NULLs add nothing;
- AVG is the wrapped sum as a double over the count, 0.0 while nothing is counted;
- MIN and MAX of INT or BIGINT skip NULLs and are NULL until a value has come;
- ROWTIME is the largest record timestamp of the group so far.

The input frame holds, per record, the key columns, ``arg<i>`` (the i-th call's argument,
NULL made 0) and ``has<i>`` (whether it was non-NULL), ``__seq``, ``ROWTIME`` and
``ROWPARTITION`` (and ``__headers``, for the versions whose output records carry the
triggering record's headers: each output row gets its record's). A group's state is a tuple:
its ROWTIME, then one entry per call.

:func:`run_task` (``streamAggregateV4``) takes a task's records of every group at once and
gives their rows in input order across groups, as ksqlDB's task emits them (``run_group``
alone, grouped by Spark, gives each group's rows together). With ``previous`` each record
also gets the results its group had before it (``prev<i>``, and ``__has_prev``, false for a
group's first record ever; :func:`run_group_with_previous`), so that HAVING can be evaluated
on both sides of each update in Spark; that state is :func:`run_group`'s followed by the
group's latest results.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from engine.runtime import rows as R

FUNCTIONS = frozenset({"COUNT", "SUM", "AVG", "MIN", "MAX"})
_LONG_MIN, _LONG_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class RunningCall:
    """One aggregate call: its function, whether it has an argument, and the argument's kind.

    ``bits`` is 32 for INT, 64 for BIGINT and 0 for DOUBLE (or for COUNT, whose argument's
    type does not matter).
    """

    function: str
    has_argument: bool
    bits: int

    def __post_init__(self) -> None:
        if self.function not in FUNCTIONS:
            raise ValueError(f"{self.function} has no running form")
        if self.function in ("MIN", "MAX") and self.bits == 0:
            raise ValueError(f"{self.function} runs over INT or BIGINT only")

    def initial(self) -> Any:
        if self.function == "AVG":
            return (0, 0.0 if self.bits == 0 else 0)
        if self.function in ("MIN", "MAX"):
            return None
        return 0.0 if self.function == "SUM" and self.bits == 0 else 0


def arg_column(i: int) -> str:
    return f"arg{i}"


def has_column(i: int) -> str:
    return f"has{i}"


def _wrapped(total: np.ndarray, bits: int) -> np.ndarray:
    return total.astype(np.int32) if bits == 32 else total


def _running_sum(values: np.ndarray, has: np.ndarray, start: Any, bits: int) -> np.ndarray:
    """The running total after each value, from ``start``: int64 wrapping, or doubles added
    one at a time in order (``cumsum`` accumulates sequentially)."""
    if bits == 0:
        steps = np.where(has, values.astype(np.float64), 0.0)
        return np.cumsum(np.concatenate(([float(start)], steps)))[1:]
    steps = np.where(has, values.astype(np.int64), 0)
    return np.cumsum(np.concatenate((np.array([start], dtype=np.int64), steps)), dtype=np.int64)[1:]


def _run_call(call: RunningCall, values: np.ndarray, has: np.ndarray, state: Any) -> tuple[Any, Any]:
    """The call's result for each record (an array, or a list holding None) and its new state."""
    n = len(has)
    if call.function == "COUNT":
        counts = state + (np.cumsum(has, dtype=np.int64) if call.has_argument else np.arange(1, n + 1, dtype=np.int64))
        return counts, int(counts[-1])
    if call.function == "SUM":
        total = _running_sum(values, has, state, call.bits)
        last = float(total[-1]) if call.bits == 0 else int(total[-1])
        return (total if call.bits == 0 else _wrapped(total, call.bits)), last
    if call.function == "AVG":
        count0, total0 = state
        counts = count0 + np.cumsum(has, dtype=np.int64)
        total = _running_sum(values, has, total0, call.bits)
        sums = total if call.bits == 0 else _wrapped(total, call.bits).astype(np.float64)
        avg = np.where(counts == 0, 0.0, sums / np.maximum(counts, 1).astype(np.float64))
        last_total = float(total[-1]) if call.bits == 0 else int(total[-1])
        return avg, (int(counts[-1]), last_total)
    # MIN / MAX: skip NULLs, NULL until the first value
    maximum = call.function == "MAX"
    fill = _LONG_MIN if maximum else _LONG_MAX
    start = fill if state is None else state
    masked = np.where(has, values.astype(np.int64), fill)
    accumulate = np.maximum.accumulate if maximum else np.minimum.accumulate
    extreme = accumulate(np.concatenate((np.array([start], dtype=np.int64), masked)))[1:]
    seen = np.cumsum(has, dtype=np.int64) > 0 if state is None else np.ones(n, dtype=bool)
    results = [int(v) if s else None for v, s in zip(extreme, seen, strict=True)]
    return results, (int(extreme[-1]) if bool(seen[-1]) else None)


def input_order(seqs: Sequence[Any]) -> list[int]:
    """The records' positions sorted by their input-order keys (``__seq``, compared as tuples)."""
    keys = [tuple(s) for s in seqs]
    return sorted(range(len(keys)), key=keys.__getitem__)


def _in_input_order(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``'s records sorted by ``__seq`` (the frame itself when they already are)."""
    order = input_order(frame[R.SEQ].tolist())
    return frame if order == list(range(len(order))) else frame.iloc[order]


def run_group(
    calls: Sequence[RunningCall], key_columns: Sequence[str], frame: pd.DataFrame, state: tuple[Any, ...] | None,
    *, ordered: bool = False,
) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """One group's records -> an output row per record (key columns, ``result<i>`` per call,
    ``__seq``, ``ROWTIME``, ``ROWPARTITION``, as columns in input order) and the group's new
    state (``ordered``: the records are in input order already)."""
    if not ordered:
        frame = _in_input_order(frame)
    ts0, accs = (_LONG_MIN, [c.initial() for c in calls]) if state is None else (state[0], list(state[1:]))
    ts = np.maximum.accumulate(
        np.concatenate((np.array([ts0], dtype=np.int64), frame[R.ROWTIME].to_numpy(dtype=np.int64)))
    )[1:]
    out: dict[str, Any] = {k: frame[k].to_numpy() for k in key_columns}
    # Integer totals wrap and doubles overflow to infinities or turn NaN, as in Java: no warnings.
    with np.errstate(all="ignore"):
        for i, call in enumerate(calls):
            has = frame[has_column(i)].to_numpy(dtype=bool)
            values = frame[arg_column(i)].to_numpy()
            out[result_column(i)], accs[i] = _run_call(call, values, has, accs[i])
    out[R.SEQ] = frame[R.SEQ].tolist()
    out[R.ROWTIME] = ts
    out[R.ROWPARTITION] = frame[R.ROWPARTITION].to_numpy()
    if R.HEADERS in frame:  # the versions forwarding headers hand each record's on
        out[R.HEADERS] = frame[R.HEADERS].tolist()
    return out, (int(ts[-1]), *accs)


def result_column(i: int) -> str:
    return f"result{i}"


def previous_column(i: int) -> str:
    return f"prev{i}"


HAS_PREVIOUS = "__has_prev"


def run_group_with_previous(
    calls: Sequence[RunningCall], key_columns: Sequence[str], frame: pd.DataFrame, state: tuple[Any, ...] | None,
    *, ordered: bool = False,
) -> tuple[dict[str, Any], tuple[Any, ...]]:
    """:func:`run_group`'s rows, each also with the results the group had before its record
    (``prev<i>``: the previous record's results, or the state's latest; ``__has_prev``)."""
    inner, latest = (None, None) if state is None else (state[:-1], state[-1])
    out, inner_after = run_group(calls, key_columns, frame, inner, ordered=ordered)
    n = len(out[R.SEQ])
    results = [_python_list(out[result_column(i)]) for i in range(len(calls))]
    for i, values in enumerate(results):
        out[previous_column(i)] = [None if latest is None else latest[i], *values[:-1]]
    out[HAS_PREVIOUS] = np.arange(n) > 0 if latest is None else np.ones(n, dtype=bool)
    return out, (*inner_after, tuple(values[-1] for values in results))


def _python_list(values: Any) -> list[Any]:
    """A result column as Python values (for the state, and for an object column)."""
    return values.tolist() if isinstance(values, np.ndarray) else list(values)


def group_key(values: Sequence[Any]) -> bytes:
    """A group's state key: its key values as JSON (BOOLEAN, INT, BIGINT or STRING)."""
    return json.dumps([v.item() if isinstance(v, np.generic) else v for v in values]).encode()


def run_task(
    calls: Sequence[RunningCall], key_columns: Sequence[str], frame: pd.DataFrame,
    states: MutableMapping[bytes, tuple[Any, ...]], *, previous: bool,
) -> pd.DataFrame:
    """A task's records of any groups -> every record's output row, in input order across
    groups; each group's state read from and written back to ``states`` (keyed by
    :func:`group_key`; the key columns are never NULL here)."""
    run = run_group_with_previous if previous else run_group
    # Ordered once for the task: each group's records then stay in order.
    frame = _in_input_order(frame).reset_index(drop=True)
    positions: list[np.ndarray] = []
    outs: list[dict[str, Any]] = []
    for key, records in frame.groupby(list(key_columns), sort=False):
        name = group_key(key if isinstance(key, tuple) else (key,))
        out, states[name] = run(calls, key_columns, records, states.get(name), ordered=True)
        outs.append(out)
        positions.append(records.index.to_numpy())
    rank = np.argsort(np.concatenate(positions), kind="stable")  # rows back in input order
    columns: dict[str, Any] = {}
    for column in outs[0]:
        parts = [out[column] for out in outs]
        if isinstance(parts[0], list):
            # Lists (MIN/MAX with NULLs, __seq, prev<i>) stay Python objects: a float column would lose integers.
            flat = np.fromiter((v for part in parts for v in part), dtype=object, count=len(rank))
            columns[column] = pd.Series(flat[rank], dtype=object)
        else:
            columns[column] = np.concatenate(parts)[rank]
    return pd.DataFrame(columns)
