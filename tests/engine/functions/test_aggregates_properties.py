"""Property tests: aggregators against small plain-Python reference models.

Random value sequences go through each aggregator; undo-capable ones also get random
retractions (as a table aggregation sends them), and every one is checked to give the same
result when the sequence is split in two, folded separately and merged (session windows).
"""

from __future__ import annotations

import decimal
import math
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.functions  # noqa: F401  (registers the libraries)
from engine.functions.java_hash import hll_cardinality, hll_register, murmur_hash_object
from engine.functions.udaf import aggregate_spec
from engine.plan import types as T

D = decimal.Decimal

small_ints = st.integers(min_value=-50, max_value=50)
nullable_ints = st.one_of(st.none(), small_ints)
words = st.sampled_from(["a", "b", "c", "dd", "e"])
nullable_words = st.one_of(st.none(), words)
cents = st.integers(min_value=-10_000, max_value=10_000).map(lambda c: D(c).scaleb(-2))
pairs = st.tuples(st.one_of(st.none(), small_ints.map(float)), small_ints.map(float))


def _estimate_distinct(values: Sequence[Any]) -> int:
    """COUNT_DISTINCT's HyperLogLog estimate of the non-NULL words, register by register
    (the hash model itself is tested against the library's figures in test_aggregates)."""
    registers: dict[int, int] = {}
    for v in values:
        if v is not None:
            index, rank = hll_register(murmur_hash_object(v, T.STRING), 14)
            registers[index] = max(registers.get(index, 0), rank)
    return hll_cardinality(registers, 14)


def _wrap32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def _wrap64(x: int) -> int:
    return (x + 2**63) % 2**64 - 2**63


def _present(values: Sequence[Any]) -> list[Any]:
    return [v for v in values if v is not None]


def _avg(values: Sequence[Any]) -> float:
    p = _present(values)
    return float(sum(p)) / len(p) if p else 0.0


def _stdev(values: Sequence[Any]) -> float:
    p = _present(values)
    return statistics.stdev(p) if len(p) >= 2 else 0.0


def _variance(values: Sequence[Any]) -> float:
    p = _present(values)
    return statistics.variance(p) if len(p) >= 2 else 0.0


def _attr(values: Sequence[Any]) -> Any:
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _corr(values: Sequence[Any]) -> float:
    p = [(x, y) for x, y in values if x is not None and y is not None]
    if len(p) < 2:
        return math.nan
    try:
        return statistics.correlation([x for x, _ in p], [y for _, y in p])
    except statistics.StatisticsError:
        return math.nan


def _dedupe(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def _topk(values: Sequence[Any], k: int) -> list[Any]:
    # sorted() is stable, so with reverse=True equal values keep their arrival order.
    return sorted(_present(values), reverse=True)[:k]


@dataclass(frozen=True)
class Case:
    """One aggregate call, the values it sees and what it must answer."""

    name: str
    types: tuple[Any, ...]
    values: st.SearchStrategy[Any]
    reference: Callable[[list[Any]], Any]
    init: tuple[Any, ...] = ()
    approx: bool = False
    # False where ksqlDB's merge is not exact: STDDEV_SAMP divides integral sums in longs
    # when it merges sessions (test_aggregates.py shows that merge on its own).
    merges_exactly: bool = True

    def __str__(self) -> str:
        return f"{self.name}({', '.join(map(str, self.types))})"


UNDO_CASES = [
    Case("COUNT", (T.INTEGER,), nullable_ints, lambda vs: len(_present(vs))),
    Case("SUM", (T.INTEGER,), nullable_ints, lambda vs: _wrap32(sum(_present(vs)))),
    Case(
        "SUM",
        (T.BIGINT,),
        st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
        lambda vs: _wrap64(sum(_present(vs))),
    ),
    Case(
        "SUM",
        (T.Decimal(12, 2),),
        st.one_of(st.none(), cents),
        lambda vs: sum(_present(vs), D("0.00")),
    ),
    Case("AVG", (T.INTEGER,), nullable_ints, _avg, approx=True),
    Case("HISTOGRAM", (T.STRING,), nullable_words, lambda vs: dict(Counter(_present(vs)))),
    Case("STDDEV_SAMP", (T.BIGINT,), nullable_ints, _variance, approx=True, merges_exactly=False),
    Case("STDDEV_SAMP", (T.DOUBLE,), pairs.map(lambda p: p[0]), _variance, approx=True),
    Case("STDDEV_SAMPLE", (T.BIGINT,), nullable_ints, _stdev, approx=True),
    Case("ATTR", (T.STRING,), nullable_words, _attr),
    Case("CORRELATION", (T.DOUBLE, T.DOUBLE), pairs, _corr, approx=True),
    Case(
        "SUM_LIST",
        (T.Array(T.INTEGER),),
        st.one_of(st.none(), st.lists(nullable_ints, max_size=3)),
        lambda vs: _wrap32(sum(sum(_present(v)) for v in _present(vs))),
    ),
]

STREAM_CASES = [
    Case("MIN", (T.INTEGER,), nullable_ints, lambda vs: min(_present(vs), default=None)),
    Case("MAX", (T.STRING,), nullable_words, lambda vs: max(_present(vs), default=None)),
    Case("COUNT_DISTINCT", (T.STRING,), nullable_words, _estimate_distinct),
    Case("COLLECT_SET", (T.STRING,), nullable_words, _dedupe),
    Case("COLLECT_LIST", (T.INTEGER,), nullable_ints, list),
    Case("TOPK", (T.INTEGER, T.INTEGER), nullable_ints, lambda vs: _topk(vs, 3), init=(3,)),
    Case(
        "TOPKDISTINCT",
        (T.STRING, T.INTEGER),
        nullable_words,
        lambda vs: sorted(set(_present(vs)), reverse=True)[:2],
        init=(2,),
    ),
    Case(
        "TOPK",
        (T.INTEGER, T.STRING, T.INTEGER),
        st.tuples(nullable_ints, nullable_words),
        lambda vs: [
            {"sort_col": s, "col0": c}
            for s, c in sorted(
                [v for v in vs if v[0] is not None], key=lambda v: v[0], reverse=True
            )[:2]
        ],
        init=(2,),
    ),
    Case(
        "LATEST_BY_OFFSET",
        (T.INTEGER,),
        nullable_ints,
        lambda vs: (_present(vs) or [None])[-1],
    ),
    Case(
        "LATEST_BY_OFFSET",
        (T.INTEGER, T.INTEGER, T.BOOLEAN),
        nullable_ints,
        lambda vs: list(vs)[-3:],
        init=(3, False),
        # ksqlDB's merge of two session windows keeps the oldest N, not the newest: merging is
        # not folding for this overload (its merge has a test of its own in test_aggregates).
        merges_exactly=False,
    ),
    Case(
        "EARLIEST_BY_OFFSET",
        (T.INTEGER, T.BOOLEAN),
        nullable_ints,
        lambda vs: vs[0] if vs else None,
        init=(False,),
    ),
    Case(
        "EARLIEST_BY_OFFSET",
        (T.INTEGER, T.INTEGER),
        nullable_ints,
        lambda vs: _present(vs)[:2],
        init=(2,),
    ),
]


def _check(case: Case, got: Any, expected: Any) -> None:
    if not case.approx:
        assert got == expected
    elif isinstance(expected, float) and math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(expected, rel=1e-9, abs=1e-9)


def _fold(agg: Any, values: Sequence[Any]) -> Any:
    acc = agg.initial()
    for v in values:
        acc = agg.add(acc, v)
    return acc


@pytest.mark.parametrize("case", UNDO_CASES + STREAM_CASES, ids=str)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_aggregator_matches_reference_after_each_value(case: Case, data: st.DataObject) -> None:
    values = data.draw(st.lists(case.values, max_size=25))
    agg = aggregate_spec(case.name, list(case.types)).create(case.init)
    acc = agg.initial()
    for i, v in enumerate(values):
        acc = agg.add(acc, v)
        _check(case, agg.result(acc), case.reference(values[: i + 1]))


@pytest.mark.parametrize("case", UNDO_CASES, ids=str)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_undo_matches_reference_of_the_live_values(case: Case, data: st.DataObject) -> None:
    agg = aggregate_spec(case.name, list(case.types)).create(case.init)
    assert agg.supports_undo
    acc = agg.initial()
    live: list[Any] = []
    for _ in range(data.draw(st.integers(0, 30))):
        if live and data.draw(st.booleans()):
            value = live.pop(data.draw(st.integers(0, len(live) - 1)))
            acc = agg.undo(acc, value)
        else:
            value = data.draw(case.values)
            live.append(value)
            acc = agg.add(acc, value)
        _check(case, agg.result(acc), case.reference(live))


@pytest.mark.parametrize("case", [c for c in UNDO_CASES + STREAM_CASES if c.merges_exactly], ids=str)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_merging_two_folded_halves_equals_folding_everything(
    case: Case, data: st.DataObject
) -> None:
    values = data.draw(st.lists(case.values, max_size=25))
    cut = data.draw(st.integers(0, len(values)))
    agg = aggregate_spec(case.name, list(case.types)).create(case.init)
    merged = agg.merge(_fold(agg, values[:cut]), _fold(agg, values[cut:]))
    _check(case, agg.result(merged), case.reference(values))


@settings(max_examples=60, deadline=None)
@given(values=st.lists(st.text(max_size=3), max_size=20), undo_index=st.integers(0, 19))
def test_collect_list_undo_removes_one_occurrence_of_the_value(
    values: list[str], undo_index: int
) -> None:
    agg = aggregate_spec("COLLECT_LIST", [T.STRING]).create()
    acc = _fold(agg, values)
    if not values:
        return
    target = values[undo_index % len(values)]
    after = agg.result(agg.undo(acc, target))
    assert Counter(after) == Counter(values) - Counter([target])
