"""Aggregate functions: resolution, results, NULLs, overflow, undo, merge and limits."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import pickle
import statistics
from collections.abc import Sequence
from typing import Any

import pytest

import engine.functions  # noqa: F401  (registers the libraries)
from engine.errors import (
    AnalysisError,
    EvaluationError,
    InternalError,
    QueryFailure,
    TypeCheckError,
    UnknownFunctionError,
)
from engine.functions.java_hash import murmur_hash_object
from engine.functions.registry import REGISTRY, FunctionKind
from engine.functions.udaf import Aggregator, aggregate_spec, table_aggregation_error
from engine.plan import types as T

D = decimal.Decimal


def make(name: str, types: Sequence[Any], init: Sequence[Any] = (), config: Any = None) -> Any:
    """Resolve an aggregate call and build its aggregator."""
    return aggregate_spec(name, list(types)).create(init, config)


def fold(agg: Aggregator, values: Sequence[Any]) -> list[Any]:
    """The result after each value, as ksqlDB emits one update per input."""
    acc = agg.initial()
    out = []
    for v in values:
        acc = agg.add(acc, v)
        out.append(agg.result(acc))
    return out


def final(name: str, types: Sequence[Any], values: Sequence[Any], init: Sequence[Any] = ()) -> Any:
    agg = make(name, types, init)
    acc = agg.initial()
    for v in values:
        acc = agg.add(acc, v)
    return agg.result(acc)


# --------------------------------------------------------------------------- resolution


def test_aggregates_are_registered_with_the_aggregate_kind():
    for name in ("COUNT", "SUM", "AVG", "MIN", "MAX", "TOPK", "LATEST_BY_OFFSET", "HISTOGRAM"):
        assert REGISTRY.kind_of(name) is FunctionKind.AGGREGATE


def test_spec_splits_column_arguments_from_literal_init_arguments():
    spec = aggregate_spec("LATEST_BY_OFFSET", [T.STRING, T.INTEGER, T.BOOLEAN])
    assert spec.column_args == 1
    assert spec.init_param_types == (T.INTEGER, T.BOOLEAN)
    assert spec.return_type == T.Array(T.STRING)
    resolved, columns, init_types = spec
    assert resolved.return_type == T.Array(T.STRING) and columns == 1 and len(init_types) == 2


def test_spec_of_count_star_has_no_column_argument():
    spec = aggregate_spec("COUNT", [])
    assert spec.column_args == 0
    assert spec.return_type == T.BIGINT


def test_spec_of_an_unknown_function_raises():
    with pytest.raises(UnknownFunctionError, match="NOPE_AGG"):
        aggregate_spec("nope_agg", [T.INTEGER])


def test_spec_of_a_scalar_function_raises():
    with pytest.raises(TypeCheckError, match="'ABS' is not an aggregate"):
        aggregate_spec("ABS", [T.INTEGER])


def test_missing_init_argument_is_rejected_like_ksqldb():
    with pytest.raises(TypeCheckError, match=r"'topk' does not accept parameters \(INTEGER\)"):
        aggregate_spec("TOPK", [T.INTEGER])


def test_create_checks_the_number_of_init_arguments():
    with pytest.raises(InternalError, match="1 init argument"):
        aggregate_spec("TOPK", [T.INTEGER, T.INTEGER]).create([])


def test_resolved_impl_can_be_called_directly_with_init_arguments():
    resolved = REGISTRY.resolve("TOPK", [T.INTEGER, T.INTEGER])
    agg = resolved.signature.impl(2)
    assert fold(agg, [1, 3, 2]) == [[1], [3, 1], [3, 2]]


def test_table_capable_functions_follow_ksqldb_table_udafs():
    capable = {
        "COUNT": [T.STRING],
        "SUM": [T.INTEGER],
        "AVG": [T.DOUBLE],
        "COLLECT_LIST": [T.STRING],
        "HISTOGRAM": [T.STRING],
        "STDDEV_SAMP": [T.DOUBLE],
        "CORRELATION": [T.DOUBLE, T.DOUBLE],
        "SUM_LIST": [T.Array(T.INTEGER)],
        "ATTR": [T.STRING],
    }
    stream_only = {
        "MIN": [T.INTEGER],
        "MAX": [T.STRING],
        "COLLECT_SET": [T.STRING],
        "COUNT_DISTINCT": [T.STRING],
        "LATEST_BY_OFFSET": [T.INTEGER],
        "EARLIEST_BY_OFFSET": [T.INTEGER],
        "TOPK": [T.INTEGER, T.INTEGER],
        "TOPKDISTINCT": [T.INTEGER, T.INTEGER],
    }
    for name, types in capable.items():
        spec = aggregate_spec(name, types)
        assert spec.supports_undo and spec.create([1] * len(spec.init_param_types)).supports_undo
    for name, types in stream_only.items():
        spec = aggregate_spec(name, types)
        agg = spec.create([1] * len(spec.init_param_types))
        assert not spec.supports_undo and not agg.supports_undo
        with pytest.raises(InternalError, match="cannot undo"):
            agg.undo(agg.initial(), 1)


def test_table_aggregation_error_lists_functions_like_ksqldb():
    err = table_aggregation_error(["LATEST_BY_OFFSET", "MIN", "max", "MIN"])
    assert isinstance(err, AnalysisError)
    assert str(err) == (
        "The aggregation functions LATEST_BY_OFFSET, MIN and MAX cannot be applied to a "
        "table source, only to a stream source."
    )
    assert "function MIN cannot" in str(table_aggregation_error(["MIN"]))


def test_intermediate_types_flag_functions_with_structured_state():
    assert aggregate_spec("COUNT", []).intermediate_type == T.BIGINT
    assert aggregate_spec("SUM", [T.DOUBLE]).intermediate_type == T.DOUBLE
    assert aggregate_spec("AVG", [T.INTEGER]).intermediate_type.base is T.BaseType.STRUCT
    assert aggregate_spec("TOPK", [T.INTEGER, T.INTEGER]).intermediate_type == T.Array(T.INTEGER)
    corr = aggregate_spec("CORRELATION", [T.DOUBLE, T.DOUBLE]).intermediate_type
    assert corr.base is T.BaseType.STRUCT


# --------------------------------------------------------------------------- COUNT


def test_count_star_counts_every_row_including_nulls():
    assert fold(make("COUNT", []), [(), (), ()]) == [1, 2, 3]


def test_count_column_skips_nulls():
    assert fold(make("COUNT", [T.STRING]), ["a", None, "b"]) == [1, 1, 2]


def test_count_undo_counts_back_to_zero():
    agg = make("COUNT", [T.BIGINT])
    acc = agg.add(agg.add(agg.initial(), 7), 8)
    acc = agg.undo(agg.undo(acc, 7), 8)
    assert agg.result(acc) == 0
    assert agg.result(agg.undo(acc, None)) == 0


# --------------------------------------------------------------------------- SUM


def test_sum_keeps_the_argument_type():
    assert aggregate_spec("SUM", [T.INTEGER]).return_type == T.INTEGER
    assert aggregate_spec("SUM", [T.BIGINT]).return_type == T.BIGINT
    assert aggregate_spec("SUM", [T.DOUBLE]).return_type == T.DOUBLE
    assert aggregate_spec("SUM", [T.Decimal(4, 1)]).return_type == T.Decimal(4, 1)


def test_sum_starts_at_zero_and_skips_nulls():
    assert fold(make("SUM", [T.INTEGER]), [None, 4, None, -1]) == [0, 4, 4, 3]
    assert fold(make("SUM", [T.DOUBLE]), [None, 1.5]) == [0.0, 1.5]


def test_sum_int_wraps_like_java_int():
    assert final("SUM", [T.INTEGER], [2**31 - 1, 1]) == -(2**31)


def test_sum_bigint_wraps_like_java_long():
    assert final("SUM", [T.BIGINT], [2**63 - 1, 2]) == -(2**63) + 1


def test_sum_decimal_keeps_scale():
    out = fold(make("SUM", [T.Decimal(6, 2)]), [D("1.25"), None, D("2.50")])
    assert out == [D("1.25"), D("1.25"), D("3.75")]
    assert str(final("SUM", [T.Decimal(6, 2)], [])) == "0.00"


def test_sum_decimal_overflow_stops_the_query_with_numeric_field_overflow():
    agg = make("SUM", [T.Decimal(3, 1)])
    acc = agg.add(agg.initial(), D("60.0"))
    with pytest.raises(QueryFailure, match=r"SUM over DECIMAL\(3, 1\): Numeric field overflow"):
        agg.add(acc, D("45.5"))


def test_sum_decimal_overflow_at_version_1_is_a_record_error():
    # What a plan saved before SUM's version 2 does: the handler logs it and goes on.
    agg = aggregate_spec("SUM", [T.Decimal(3, 1)], 1).create((), None)
    acc = agg.add(agg.initial(), D("60.0"))
    with pytest.raises(EvaluationError) as raised:
        agg.add(acc, D("45.5"))
    assert str(raised.value) == (
        "Numeric field overflow: A field with precision 3 and scale 1 must round to an absolute "
        "value less than 10^2. Got 105.5"
    )


def test_sum_decimal_without_column_type_is_an_internal_error():
    resolved = REGISTRY.resolve("SUM", [T.Decimal(4, 1)])
    with pytest.raises(InternalError, match="aggregate_spec"):
        resolved.signature.impl()


def test_sum_list_adds_non_null_elements():
    assert fold(make("SUM_LIST", [T.Array(T.INTEGER)]), [[1, 2], None, [3, None]]) == [3, 3, 6]
    assert aggregate_spec("SUM_LIST", [T.Array(T.DOUBLE)]).return_type == T.DOUBLE


def test_sum_list_sums_each_list_from_zero_element_by_element_as_java_does():
    doubles = make("SUM_LIST", [T.Array(T.DOUBLE)])
    # A plain left fold loses the 1.0 beside 1e16; compensated summation would keep it.
    assert fold(doubles, [[1e16, 1.0, -1e16]]) == [0.0]
    # The list's own sum first, then added to the running sum: 0.1 + (0.2 + 0.3) is 0.6,
    # where one fold over all elements, (0.1 + 0.2) + 0.3, is 0.6000000000000001.
    assert fold(doubles, [[0.1], [0.2, 0.3]]) == [0.1, 0.6]
    ints = make("SUM_LIST", [T.Array(T.INTEGER)])
    assert fold(ints, [[2**31 - 1, 1]]) == [-(2**31)]


# --------------------------------------------------------------------------- AVG


def test_avg_of_integers_is_a_double():
    assert aggregate_spec("AVG", [T.INTEGER]).return_type == T.DOUBLE
    assert fold(make("AVG", [T.INTEGER]), [3, 4, None, 4]) == [3.0, 3.5, 3.5, pytest.approx(11 / 3)]


def test_avg_of_an_empty_group_is_zero():
    assert final("AVG", [T.BIGINT], [None]) == 0.0


def test_avg_undo_forgets_a_value():
    agg = make("AVG", [T.DOUBLE])
    acc = agg.initial()
    for v in (1.0, 2.0, 6.0):
        acc = agg.add(acc, v)
    assert agg.result(agg.undo(acc, 6.0)) == 1.5


# --------------------------------------------------------------------------- MIN / MAX


def test_min_and_max_ignore_nulls():
    assert fold(make("MAX", [T.INTEGER]), [None, 3, 9, None, 4]) == [None, 3, 9, 9, 9]
    assert fold(make("MIN", [T.INTEGER]), [None, 3, 9, 1]) == [None, 3, 3, 1]


@pytest.mark.parametrize(
    ("sql_type", "values", "smallest", "largest"),
    [
        (T.STRING, ["pear", "apple", "zoo"], "apple", "zoo"),
        (
            T.DATE,
            [dt.date(2024, 5, 1), dt.date(2023, 1, 9)],
            dt.date(2023, 1, 9),
            dt.date(2024, 5, 1),
        ),
        (T.TIME, [dt.time(9, 30), dt.time(8, 0)], dt.time(8, 0), dt.time(9, 30)),
        (
            T.TIMESTAMP,
            [dt.datetime(2020, 1, 1, 12), dt.datetime(2020, 1, 1, 11)],
            dt.datetime(2020, 1, 1, 11),
            dt.datetime(2020, 1, 1, 12),
        ),
        (T.Decimal(5, 2), [D("1.50"), D("-3.25"), D("2.00")], D("-3.25"), D("2.00")),
        (T.DOUBLE, [1.5, -0.5, math.inf], -0.5, math.inf),
        # Java compares bytes as signed values: 0x80 is below 0x01.
        (T.BYTES, [b"\x01", b"\x80"], b"\x80", b"\x01"),
    ],
)
def test_min_and_max_order_each_comparable_type(sql_type, values, smallest, largest):
    assert final("MIN", [sql_type], values) == smallest
    assert final("MAX", [sql_type], values) == largest
    assert aggregate_spec("MAX", [sql_type]).return_type == sql_type


def test_max_treats_nan_as_the_largest_double():
    assert math.isnan(final("MAX", [T.DOUBLE], [1.0, math.nan, 2.0]))
    assert final("MIN", [T.DOUBLE], [1.0, math.nan, 2.0]) == 1.0


def test_max_of_strings_compares_utf16_code_units_like_java():
    # U+1F600 is a surrogate pair (0xD83D...), below U+FF5E in UTF-16 order.
    assert final("MAX", [T.STRING], ["\U0001f600", "\uff5e"]) == "\uff5e"


# --------------------------------------------------------------------------- COUNT_DISTINCT


def test_count_distinct_counts_distinct_non_null_values():
    assert fold(make("COUNT_DISTINCT", [T.STRING]), ["a", "b", "a", None]) == [1, 2, 2, 2]


def test_count_distinct_handles_unhashable_values():
    values = [{"a": [1]}, {"a": [1]}, {"a": [2]}]
    assert final("COUNT_DISTINCT", [T.Map(T.STRING, T.Array(T.INTEGER))], values) == 2


# Figures of ksqlDB's HyperLogLog library (2^14 registers) for these inputs.
@pytest.mark.parametrize(
    ("types", "values", "estimate"),
    [
        ([T.INTEGER], list(range(1000)), 1002),
        ([T.STRING], [f"w{i}" for i in range(300)], 301),
        ([T.BIGINT], [i * 1000003 for i in range(-5000, 5000, 7)], 1431),
        ([T.DOUBLE], [i / 4.0 for i in range(500)], 505),
        ([T.STRING], [f"\u00e9{i}\u00fc" for i in range(400)], 398),
        ([T.Decimal(5, 2)], [D(i).scaleb(-2) for i in range(250)], 252),
        ([T.STRING], [f"x{i}" for i in range(5)], 5),
    ],
)
def test_count_distinct_estimates_as_ksqldbs_hyperloglog(types, values, estimate):
    agg = make("COUNT_DISTINCT", types)
    assert fold(agg, values + [None])[-1] == estimate
    # Registers merge by their maximum: two halves merged give the same estimate.
    half = len(values) // 2
    left, right = agg.initial(), agg.initial()
    for v in values[:half]:
        left = agg.add(left, v)
    for v in values[half:]:
        right = agg.add(right, v)
    assert agg.result(agg.merge(left, right)) == estimate


def test_count_distinct_hashes_values_as_the_library_does():
    def signed(h: int) -> int:
        return h - (1 << 32) if h >= 1 << 31 else h

    assert signed(murmur_hash_object("abc", T.STRING)) == -1465591341
    assert signed(murmur_hash_object("h\u00e9llo", T.STRING)) == -255011586
    # An Integer is hashed as the long it widens to.
    assert signed(murmur_hash_object(-7, T.BIGINT)) == signed(murmur_hash_object(-7, T.INTEGER)) == -1995426631
    assert signed(murmur_hash_object(1.5, T.DOUBLE)) == -1688758945


def test_count_distinct_version_one_counts_exactly():
    saved = aggregate_spec("COUNT_DISTINCT", [T.INTEGER], 1).create()
    acc = saved.initial()
    for v in range(1000):
        acc = saved.add(acc, v)
    assert saved.result(acc) == 1000


# --------------------------------------------------------------------------- COLLECT_LIST / SET


def test_collect_list_keeps_nulls_and_order():
    assert final("COLLECT_LIST", [T.INTEGER], [3, None, 3, 1]) == [3, None, 3, 1]
    assert aggregate_spec("COLLECT_LIST", [T.DATE]).return_type == T.Array(T.DATE)


def test_collect_list_limit_comes_from_the_config():
    agg = make("COLLECT_LIST", [T.INTEGER], config={"ksql.functions.collect_list.limit": 2})
    assert fold(agg, [1, 2, 3]) == [[1], [1, 2], [1, 2]]


def test_collect_list_and_set_have_no_default_limit_and_a_negative_limit_is_none():
    # ksqlDB's Collect starts at Integer.MAX_VALUE and resets a negative limit to it (the
    # 1000 of its docs is Confluent Cloud's setting).
    assert len(final("COLLECT_LIST", [T.INTEGER], list(range(1500)))) == 1500
    assert len(final("COLLECT_SET", [T.INTEGER], list(range(1500)))) == 1500
    for name, key in (("COLLECT_LIST", "collect_list"), ("COLLECT_SET", "collect_set")):
        unlimited = make(name, [T.INTEGER], config={f"ksql.functions.{key}.limit": -1})
        assert fold(unlimited, list(range(1200)))[-1] == list(range(1200))
        none = make(name, [T.INTEGER], config={f"ksql.functions.{key}.limit": 0})
        assert fold(none, [1, 2]) == [[], []]


def test_collect_list_and_set_version_1_keep_their_default_of_one_thousand():
    for name in ("COLLECT_LIST", "COLLECT_SET"):
        agg = aggregate_spec(name, [T.INTEGER], 1).create()
        acc = agg.initial()
        for v in range(1500):
            acc = agg.add(acc, v)
        assert len(agg.result(acc)) == 1000


def test_collect_list_bad_limit_is_rejected():
    with pytest.raises(AnalysisError, match="collect_list.limit"):
        make("COLLECT_LIST", [T.INTEGER], config={"ksql.functions.collect_list.limit": "x"})


def test_collect_list_undo_removes_the_last_equal_value():
    agg = make("COLLECT_LIST", [T.STRING])
    acc = agg.initial()
    for v in ("a", "b", "a", "c"):
        acc = agg.add(acc, v)
    assert agg.result(agg.undo(acc, "a")) == ["a", "b", "c"]
    assert agg.result(agg.undo(acc, "zzz")) == ["a", "b", "a", "c"]


def test_collect_set_dedupes_including_nulls_and_maps():
    values = [{"x": 1, "y": 2}, None, {"y": 2, "x": 1}, None, {"x": 3}]
    out = final("COLLECT_SET", [T.Map(T.STRING, T.INTEGER)], values)
    assert out == [{"x": 1, "y": 2}, None, {"x": 3}]


def test_collect_set_limit_comes_from_the_config():
    agg = make("COLLECT_SET", [T.INTEGER], config={"ksql.functions.collect_set.limit": 1})
    assert fold(agg, [5, 6]) == [[5], [5]]


# --------------------------------------------------------------------------- HISTOGRAM


def test_histogram_counts_occurrences():
    assert final("HISTOGRAM", [T.STRING], ["a", "b", "a", None]) == {"a": 2, "b": 1}
    assert aggregate_spec("HISTOGRAM", [T.STRING]).return_type == T.Map(T.STRING, T.BIGINT)


def test_histogram_undo_drops_keys_that_reach_zero():
    agg = make("HISTOGRAM", [T.STRING])
    acc = agg.add(agg.add(agg.initial(), "a"), "b")
    assert agg.result(agg.undo(acc, "a")) == {"b": 1}


def test_histogram_keeps_at_most_1000_distinct_strings():
    values = [str(i) for i in range(1001)] + ["0"]
    out = final("HISTOGRAM", [T.STRING], values)
    assert len(out) == 1000 and out["0"] == 2 and "1000" not in out


def test_histogram_merge_adds_the_second_sessions_keys_while_the_first_has_room():
    # HistogramUdaf.merge: a key of agg2 joins agg1 while agg1 holds fewer than 1000 keys or
    # has the key already (each case below is the same in any order agg2 is walked in).
    agg = make("HISTOGRAM", [T.STRING])

    def of(values: Sequence[str]) -> Any:
        acc = agg.initial()
        for value in values:
            acc = agg.add(acc, value)
        return acc

    room_for_one = agg.result(agg.merge(of([f"a{i}" for i in range(999)]), of(["a0", "b0", "a1"])))
    assert len(room_for_one) == 1000 and room_for_one["b0"] == 1
    assert room_for_one["a0"] == 2 and room_for_one["a1"] == 2
    full = agg.result(agg.merge(of([f"a{i}" for i in range(1000)]), of(["b0", "a0"])))
    assert len(full) == 1000 and "b0" not in full and full["a0"] == 2


# --------------------------------------------------------------------------- BY_OFFSET


def test_latest_by_offset_ignores_nulls_by_default():
    assert fold(make("LATEST_BY_OFFSET", [T.INTEGER]), [None, 1, None, 2]) == [None, 1, 1, 2]


def test_latest_by_offset_can_keep_nulls():
    agg = make("LATEST_BY_OFFSET", [T.INTEGER, T.BOOLEAN], [False])
    assert fold(agg, [1, None, 2]) == [1, None, 2]


def test_latest_n_by_offset_keeps_the_last_n():
    agg = make("LATEST_BY_OFFSET", [T.STRING, T.INTEGER], [2])
    assert fold(agg, ["a", None, "b", "c"]) == [["a"], ["a"], ["a", "b"], ["b", "c"]]
    agg = make("LATEST_BY_OFFSET", [T.STRING, T.INTEGER, T.BOOLEAN], [2, False])
    assert fold(agg, ["a", None, "b"]) == [["a"], ["a", None], [None, "b"]]


def test_earliest_by_offset_keeps_the_first():
    assert fold(make("EARLIEST_BY_OFFSET", [T.INTEGER]), [None, 5, 6]) == [None, 5, 5]
    agg = make("EARLIEST_BY_OFFSET", [T.INTEGER, T.BOOLEAN], [False])
    assert fold(agg, [None, 5]) == [None, None]
    agg = make("EARLIEST_BY_OFFSET", [T.INTEGER, T.INTEGER], [2])
    assert fold(agg, [4, None, 5, 6]) == [[4], [4], [4, 5], [4, 5]]


def test_latest_by_offset_merge_prefers_the_later_record():
    agg = make("LATEST_BY_OFFSET", [T.INTEGER, T.BOOLEAN], [False])
    first = agg.add(agg.initial(), 1)
    second = agg.add(agg.initial(), None)
    third = agg.add(agg.initial(), 3)
    assert agg.result(agg.merge(agg.merge(first, third), second)) == 3
    assert agg.result(agg.merge(first, second)) is None
    ignoring = make("LATEST_BY_OFFSET", [T.INTEGER])
    one = ignoring.add(ignoring.initial(), 1)
    nothing = ignoring.add(ignoring.initial(), None)
    assert ignoring.result(ignoring.merge(one, nothing)) == 1


def test_latest_n_merge_orders_by_arrival():
    agg = make("LATEST_BY_OFFSET", [T.INTEGER, T.INTEGER, T.BOOLEAN], [2, False])
    a = agg.add(agg.initial(), 1)
    b = agg.add(agg.initial(), None)
    c = agg.add(agg.initial(), 2)
    # Ordered by arrival, then the first N kept (ksqlDB's merge); version 1 kept the last N.
    assert agg.result(agg.merge(agg.merge(a, c), b)) == [1, None]
    old = aggregate_spec("LATEST_BY_OFFSET", [T.INTEGER, T.INTEGER, T.BOOLEAN], 1).create([2, False])
    assert old.result(old.merge(old.merge(a, c), b)) == [None, 2]


# --------------------------------------------------------------------------- TOPK


def test_topk_keeps_k_largest_descending():
    agg = make("TOPK", [T.INTEGER, T.INTEGER], [3])
    assert fold(agg, [5, None, 50, 20, 1, 50]) == [
        [5],
        [5],
        [50, 5],
        [50, 20, 5],
        [50, 20, 5],
        [50, 50, 20],
    ]


def test_topk_with_other_columns_returns_structs_and_keeps_earlier_ties_first():
    spec = aggregate_spec("TOPK", [T.BIGINT, T.STRING, T.INTEGER])
    assert spec.column_args == 2
    assert spec.return_type == T.Array(
        T.Struct((T.Field("sort_col", T.BIGINT), T.Field("col0", T.STRING)))
    )
    out = fold(spec.create([2]), [(7, "x"), (None, "skip"), (9, "y"), (9, None)])[-1]
    assert out == [{"sort_col": 9, "col0": "y"}, {"sort_col": 9, "col0": None}]


def test_topkdistinct_skips_repeats():
    agg = make("TOPKDISTINCT", [T.STRING, T.INTEGER], [2])
    assert fold(agg, ["b", "a", "b", "c"]) == [["b"], ["b", "a"], ["b", "a"], ["c", "b"]]
    assert aggregate_spec("TOPKDISTINCT", [T.Decimal(3, 1), T.INTEGER]).return_type == T.Array(
        T.Decimal(3, 1)
    )


def test_topk_k_must_be_positive():
    with pytest.raises(AnalysisError, match="TOPK's K"):
        make("TOPK", [T.INTEGER, T.INTEGER], [0])


# --------------------------------------------------------------------------- STDDEV / CORRELATION


def test_stddev_samp_is_ksqldbs_sample_variance_and_stddev_sample_its_root():
    values = [2, 4, 4, 4, 5, 5, 7, 9]
    # ksqlDB's STDDEV_SAMP returns M2 / (n - 1), the variance; STDDEV_SAMPLE its square root.
    assert final("STDDEV_SAMP", [T.INTEGER], values) == pytest.approx(statistics.variance(values))
    assert final("STDDEV_SAMPLE", [T.DOUBLE], [float(v) for v in values]) == pytest.approx(
        statistics.stdev(values)
    )
    assert aggregate_spec("STDDEV_SAMP", [T.INTEGER]).resolved.signature.since == 2


def test_stddev_follows_the_youngs_cramer_steps_in_doubles():
    # Each value adds delta^2 / (n (n - 1)) to M2, delta = x (n) - (sum + x), in doubles.
    xs = [0.1, 0.7, 1.3]
    m2, total = 0.0, xs[0]
    for n, x in enumerate(xs[1:], start=2):
        delta = x * n - (total + x)
        m2 = delta * delta / (n * (n - 1)) + m2
        total = x + total
    assert final("STDDEV_SAMP", [T.DOUBLE], xs) == m2 / 2
    assert final("STDDEV_SAMPLE", [T.DOUBLE], xs) == math.sqrt(m2 / 2)


def test_stddev_over_integers_wraps_its_sum_like_a_java_int():
    # The second delta is 1 * 2 - (2147483647 + 1 as an int, -2147483648) = 2147483650.
    assert final("STDDEV_SAMP", [T.INTEGER], [2**31 - 1, 1]) == 2147483650.0**2 / 2
    assert final("STDDEV_SAMP", [T.BIGINT], [2**31 - 1, 1]) == 2147483646.0**2 / 2  # no wrap


def test_stddev_of_fewer_than_two_values_is_zero():
    assert final("STDDEV_SAMP", [T.BIGINT], [None, 5]) == 0.0
    assert final("STDDEV_SAMPLE", [T.INTEGER], []) == 0.0


def test_stddev_undo_retracts_with_ksqldbs_delta():
    agg = make("STDDEV_SAMP", [T.INTEGER])
    acc = agg.initial()
    for v in (1, 2, 3):
        acc = agg.add(acc, v)
    assert agg.result(acc) == 1.0
    assert agg.undo(acc, None) == acc
    acc = agg.undo(acc, 3)
    assert acc == (2, 3, 0.5)
    assert agg.result(acc) == 0.5


def test_stddev_merge_divides_integral_sums_as_each_function_does():
    def merged(name: str) -> float:
        agg = make(name, [T.INTEGER])
        a = agg.add(agg.add(agg.initial(), 1), 2)
        b = agg.add(agg.initial(), 4)
        return agg.result(agg.merge(a, b))

    # STDDEV_SAMP: 3 / 2 - 4 / 1 in longs is -3; STDDEV_SAMPLE: 1.5 - 4.0 in doubles.
    assert merged("STDDEV_SAMP") == (0.5 + 2 * 9 / 3) / 2
    assert merged("STDDEV_SAMPLE") == math.sqrt((0.5 + 2 * 6.25 / 3) / 2)


def test_stddev_planned_at_version_1_keeps_the_exact_standard_deviation():
    values = [2, 4, 4, 4, 5, 5, 7, 9]
    agg = aggregate_spec("STDDEV_SAMP", [T.INTEGER], semantics=1).create()
    acc = agg.initial()
    for v in values:
        acc = agg.add(acc, v)
    assert agg.result(acc) == pytest.approx(statistics.stdev(values))


def test_correlation_matches_pearson():
    xs, ys = [1.0, 2.5, -3.0, 4.0], [2.0, 3.5, -1.0, 9.0]
    got = final("CORRELATION", [T.DOUBLE, T.DOUBLE], list(zip(xs, ys, strict=True)))
    assert got == pytest.approx(statistics.correlation(xs, ys))


def test_correlation_skips_pairs_with_a_null_and_is_nan_when_undefined():
    out = fold(make("CORRELATION", [T.INTEGER, T.INTEGER]), [(1, 2), (5, None), (2, 4), (3, 1)])
    assert math.isnan(out[0]) and math.isnan(out[1])
    assert out[2] == 1.0
    assert out[3] == pytest.approx(statistics.correlation([1, 2, 3], [2, 4, 1]))
    assert math.isnan(final("CORRELATION", [T.DOUBLE, T.DOUBLE], [(1.0, 5.0), (2.0, 5.0)]))


def test_correlation_has_an_overload_per_numeric_type_working_in_doubles():
    for t in (T.INTEGER, T.BIGINT, T.DOUBLE):
        spec = aggregate_spec("CORRELATION", [t, t])
        assert spec.column_types == (t, t)
        assert spec.return_type == T.DOUBLE
    big = 2**53 + 1  # a BIGINT turns into the nearest double, as Long.doubleValue does
    agg = make("CORRELATION", [T.BIGINT, T.BIGINT])
    acc = agg.add(agg.initial(), (big, 1))
    assert acc == (1, float(big), 1.0, float(big) * float(big), 1.0, float(big))


# --------------------------------------------------------------------------- ATTR


def test_attr_is_the_single_value_or_null_when_the_group_disagrees():
    assert fold(make("ATTR", [T.STRING]), ["a", "a", "b"]) == ["a", "a", None]
    assert final("ATTR", [T.INTEGER], []) is None
    assert aggregate_spec("ATTR", [T.BIGINT]).return_type == T.BIGINT


def test_attr_counts_null_as_a_value():
    assert fold(make("ATTR", [T.STRING]), [None, "a"]) == [None, None]
    agg = make("ATTR", [T.STRING])
    acc = agg.add(agg.add(agg.initial(), None), "a")
    assert agg.result(agg.undo(acc, None)) == "a"


def test_attr_undo_keeps_counts_at_zero_or_more():
    agg = make("ATTR", [T.INTEGER])
    acc = agg.add(agg.add(agg.initial(), 1), 2)
    acc = agg.undo(agg.undo(acc, 2), 2)  # 2's count stays at zero, not below
    assert acc == ((1, 1), (2, 0))
    assert agg.result(acc) == 1
    assert agg.result(agg.add(acc, 2)) is None
    assert agg.undo(agg.initial(), 5) == ()  # retracting an unseen value adds nothing


def test_attr_compares_doubles_as_java_does():
    assert final("ATTR", [T.DOUBLE], [math.nan, math.nan]) is not None
    assert final("ATTR", [T.DOUBLE], [0.0, -0.0]) is None
    assert final("ATTR", [T.Array(T.INTEGER)], [[1, 2], [1, 2]]) == [1, 2]


def test_attr_merge_adds_the_counts_of_both_sessions():
    agg = make("ATTR", [T.STRING])
    a = agg.add(agg.initial(), "x")
    b = agg.undo(agg.add(agg.add(agg.initial(), "y"), "x"), "y")
    assert agg.merge(a, b) == (("x", 2),)
    assert agg.result(agg.merge(a, agg.add(agg.initial(), "y"))) is None
    assert aggregate_spec("ATTR", [T.STRING]).intermediate_type == T.Array(
        T.Struct((T.Field("VALUE", T.STRING), T.Field("COUNT", T.INTEGER)))
    )


# --------------------------------------------------------------------------- custom test UDAFs


def test_multi_arg_starts_from_its_init_arguments():
    spec = aggregate_spec("MULTI_ARG", [T.BIGINT, T.STRING, T.INTEGER, T.STRING, T.STRING])
    assert spec.column_args == 2
    assert fold(spec.create([1, "ab", "c"]), [(10, "xyz"), (None, None)]) == [17, 17]


def test_four_and_five_arg_sum_their_columns_from_the_init_arguments():
    four = aggregate_spec("FOUR_ARG", [T.BIGINT, T.STRING, T.STRING, T.STRING, T.INTEGER, T.STRING])
    assert four.column_args == 4
    assert fold(four.create([2, "xyz"]), [(1, "a", None, "bc"), (None, None, None, None)]) == [9, 9]
    five = aggregate_spec(
        "FIVE_ARG", [T.BIGINT, T.STRING, T.STRING, T.STRING, T.INTEGER, T.INTEGER, T.STRING, T.STRING]
    )
    assert five.column_args == 5
    assert fold(five.create([0, "a", "bb"]), [(1, "a", "b", "c", 10)]) == [17]


def test_init_arg_udafs_merge_sessions_by_adding_both_sums_like_ksqldb():
    types = [T.BIGINT, T.STRING, T.INTEGER, T.STRING]
    agg = aggregate_spec("MULTI_ARG", types).create([1, "ab"])
    one = agg.add(agg.initial(), (4, "x"))  # 3 + 4 + 1
    assert agg.merge(one, agg.initial()) == 8 + 3  # the start is in both sums
    old = aggregate_spec("MULTI_ARG", types, semantics=1).create([1, "ab"])
    assert old.merge(one, old.initial()) == 8  # version 1 counted it once
    mid = aggregate_spec("MID_VAR_ARG", [T.BIGINT, T.STRING, T.INTEGER, T.INTEGER]).create([1, 2])
    assert mid.merge(mid.initial(), mid.initial()) == 6


def test_multi_arg_without_its_init_argument_is_rejected():
    with pytest.raises(
        TypeCheckError, match=r"'MULTI_ARG' does not accept parameters \(BIGINT, STRING\)"
    ):
        aggregate_spec("MULTI_ARG", [T.BIGINT, T.STRING])


def test_mid_var_arg_takes_strings_between_column_and_init_arguments():
    spec = aggregate_spec("MID_VAR_ARG", [T.BIGINT, T.STRING, T.STRING, T.INTEGER, T.INTEGER])
    assert spec.column_args == 3
    assert final("MID_VAR_ARG", [T.BIGINT, T.INTEGER, T.INTEGER], [4], init=[1, 2]) == 7


def test_generic_var_arg_collects_first_column_of_complete_rows():
    types = [T.STRING, T.INTEGER, T.DOUBLE, T.DOUBLE]
    assert aggregate_spec("GENERIC_VAR_ARG", types).return_type == T.Array(T.STRING)
    rows = [("a", 1, 1.0, 2.0), ("b", 1, None, 2.0), ("c", 2, 3.0, 4.0)]
    assert final("GENERIC_VAR_ARG", types, rows) == ["a", "c"]
    with pytest.raises(TypeCheckError, match="does not accept"):
        aggregate_spec("GENERIC_VAR_ARG", [T.STRING, T.INTEGER, T.DOUBLE, T.STRING])


def test_obj_col_arg_takes_columns_of_any_type():
    types = [T.INTEGER, T.STRING, T.Map(T.STRING, T.INTEGER)]
    assert final("OBJ_COL_ARG", types, [(1, "a", {}), (2, None, {})]) == [1]
    assert final("OBJ_COL_ARG", [T.INTEGER], [3, None, 4]) == [3, 4]


def test_test_udaf_sums_and_undoes():
    agg = make("TEST_UDAF", [T.INTEGER])
    assert aggregate_spec("TEST_UDAF", [T.INTEGER]).return_type == T.BIGINT
    acc = agg.add(agg.add(agg.initial(), 5), 7)
    assert agg.result(agg.undo(acc, 5)) == 7
    struct = T.Struct((T.Field("A", T.INTEGER), T.Field("B", T.INTEGER)))
    assert final("TEST_UDAF", [struct], [{"A": 1, "B": 2}, {"A": 3, "B": None}]) == {"A": 4, "B": 2}


# --------------------------------------------------------------------------- state


@pytest.mark.parametrize(
    ("name", "types", "init", "values"),
    [
        ("AVG", [T.INTEGER], [], [1, 2]),
        ("SUM", [T.Decimal(4, 2)], [], [D("1.25")]),
        ("COUNT_DISTINCT", [T.Array(T.INTEGER)], [], [[1], [2]]),
        ("LATEST_BY_OFFSET", [T.DATE, T.INTEGER], [2], [dt.date(2020, 1, 1)]),
        ("TOPK", [T.DOUBLE, T.STRING, T.INTEGER], [2], [(1.0, "a")]),
        ("HISTOGRAM", [T.STRING], [], ["a"]),
        ("CORRELATION", [T.DOUBLE, T.DOUBLE], [], [(1.0, 2.0), (2.0, 5.0)]),
    ],
)
def test_accumulators_survive_pickling(name, types, init, values):
    agg = make(name, types, init)
    acc = agg.initial()
    for v in values:
        acc = agg.add(acc, v)
    restored = pickle.loads(pickle.dumps(acc))
    assert restored == acc
    assert agg.result(restored) == agg.result(acc)


def test_topk_sorts_the_types_ksqldb_sorts_and_a_decimal_as_a_double():
    assert aggregate_spec("TOPK", [T.Decimal(4, 1), T.INTEGER]).return_type == T.Array(T.DOUBLE)
    assert aggregate_spec("TOPK", [T.Decimal(4, 1), T.INTEGER]).column_types == (T.DOUBLE,)
    for t in (T.DATE, T.TIME, T.TIMESTAMP, T.BYTES):
        with pytest.raises(TypeCheckError, match=r"^Function 'topk' does not accept parameters"):
            aggregate_spec("TOPK", [t, T.INTEGER])
    # Version 1 kept them for saved plans; the calls ksqlDB takes keep their version.
    assert aggregate_spec("TOPK", [T.DATE, T.INTEGER], 1).return_type == T.Array(T.DATE)
    assert REGISTRY.settled_semantics("TOPK", [T.INTEGER, T.STRING, T.INTEGER], 2) == 1


def test_latest_by_offset_n_merges_sessions_keeping_the_oldest_n_as_ksqldb_does():
    # ksqlDB's merge sorts both sides by sequence and takes the first N.
    agg = make("LATEST_BY_OFFSET", [T.INTEGER, T.INTEGER], init=[2])
    left = agg.initial()
    for v in (1, 2):
        left = agg.add(left, v)
    right = agg.initial()
    for v in (3, 4):
        right = agg.add(right, v)
    assert agg.result(left) == [1, 2] and agg.result(right) == [3, 4]
    assert agg.result(agg.merge(left, right)) == [1, 2]
    # Version 1 kept the newest N for saved plans; EARLIEST keeps the oldest N either way.
    old = aggregate_spec("LATEST_BY_OFFSET", [T.INTEGER, T.INTEGER], 1).create([2])
    assert old.result(old.merge(left, right)) == [3, 4]
    assert REGISTRY.settled_semantics("LATEST_BY_OFFSET", [T.INTEGER], 2) == 1


@pytest.mark.parametrize("name", ["LATEST_BY_OFFSET", "EARLIEST_BY_OFFSET"])
def test_by_offset_with_n_below_one_fails_with_ksqldbs_factory_message(name):
    with pytest.raises(AnalysisError, match="^Failed to invoke UDAF factory method$"):
        make(name, [T.INTEGER, T.INTEGER], init=[0])
