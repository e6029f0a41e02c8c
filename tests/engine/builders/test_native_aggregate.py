"""The native grouping and aggregation steps (V2) give the records their V1 versions give.

Each test plans the same statements with the native step versions and without, runs both
over the same input records on the bounded runtime, and compares the outputs record for
record. The inputs reach NULL keys and values, stream records with a null value, integer
overflow of SUM, -0.0 and fractional doubles, and HAVING turning misses into deletes.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.builders.context import BuildContext
from engine.builders.native import collecting_reports
from engine.builders.walker import build
from engine.data.records import TopicInfo, TopicRecord
from engine.facade.engine import KsqlEngine
from engine.plan.steps import walk_steps
from engine.planner.physical import NATIVE_STEPS

# The aggregate versions before headers were forwarded (tests/engine/builders/conftest.py).
pytestmark = pytest.mark.usefixtures("plans_the_aggregates_without_headers")

SOURCE = """
CREATE STREAM S (ID BIGINT KEY, ITEM STRING, QTY INT, L BIGINT, D DOUBLE, F BOOLEAN)
  WITH (kafka_topic='s', value_format='JSON');
"""
AGGREGATES = (
    "COUNT(*) AS C, COUNT(QTY) AS CQ, SUM(QTY) AS SQ, SUM(L) AS SL, SUM(D) AS SD, MIN(QTY) AS MN, MAX(L) AS MX, "
    "AVG(QTY) AS AQ, AVG(L) AS AL, AVG(D) AS AD"
)

VALUES = [
    {"ITEM": "a", "QTY": 2147483647, "L": 9223372036854775807, "D": 0.1, "F": True},
    {"ITEM": "a", "QTY": 1, "L": 1, "D": 0.2, "F": False},
    {"ITEM": "b", "QTY": None, "L": None, "D": -0.0, "F": None},
    {"ITEM": None, "QTY": 5, "L": 5, "D": 5.0, "F": True},
    None,
    {"ITEM": "a", "QTY": -2147483648, "L": -9223372036854775808, "D": 0.3, "F": True},
    {"ITEM": "b", "QTY": 3, "L": -3, "D": 1e300, "F": False},
    {"ITEM": "b", "QTY": 3, "L": 3, "D": 1e300, "F": False},
    {"ITEM": "c"},
    {"ITEM": "a", "QTY": 0, "L": 0, "D": -0.0, "F": True},
]


def _records(values):
    # Timestamps out of order, so that an update's ROWTIME is the largest so far.
    return [TopicRecord("s", i % 3, v, 1000 + (i * 7919) % 13) for i, v in enumerate(values)]


def _engine(native: bool, statements: str) -> KsqlEngine:
    engine = KsqlEngine({NATIVE_STEPS: "true" if native else "false"})
    for topic in ("s", "t", "OUT"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(statements)
    return engine


def _run(native: bool, statements: str, records: list[TopicRecord]):
    engine = _engine(native, statements)
    for record in records:
        engine.store.append(record)
    out = engine.run()
    return [(r.key, r.value, r.timestamp) for r in out.get("OUT", [])]


def _same(query: str, records: list[TopicRecord], source: str = SOURCE):
    statements = source + query
    want = _run(False, statements, records)
    got = _run(True, statements, records)
    assert got == want
    return got


def _step_types(query: str, source: str = SOURCE) -> set[str]:
    engine = _engine(True, source + query)
    (q,) = engine.queries.values()
    return {s.TYPE for s in walk_steps(q.root)}


def test_a_running_count_and_sums_give_the_v1_records(spark):
    query = f"CREATE TABLE OUT AS SELECT ITEM, {AGGREGATES} FROM S GROUP BY ITEM;"
    assert {"streamGroupByV2", "streamAggregateV4"} <= _step_types(query)
    got = _same(query, _records(VALUES))
    assert len(got) == 8  # one update per record with a key and a value
    a = [value for key, value, _ in got if key == "a"]
    assert [v["C"] for v in a] == [1, 2, 3, 4]
    assert a[1]["SQ"] == -2147483648  # MAX_INT + 1 wraps like Java's int
    assert a[1]["SL"] == -9223372036854775808
    b = [value for key, value, _ in got if key == "b"]
    assert (b[0]["CQ"], b[0]["SQ"], b[0]["MN"], b[0]["AQ"]) == (0, 0, None, 0.0)  # zero, NULL, 0.0 when empty
    assert a[1]["AQ"] == -1073741824.0  # AVG divides the wrapped sum, as ksqlDB


@pytest.mark.parametrize(
    "having",
    ["SUM(QTY) > 2", "COUNT(*) <> 2", "MAX(L) IS NULL OR MIN(QTY) < 0", "ITEM = 'a' AND SUM(D) < 1"],
)
def test_having_turns_misses_into_deletes_as_v1(spark, having):
    query = f"CREATE TABLE OUT AS SELECT ITEM, {AGGREGATES} FROM S GROUP BY ITEM HAVING {having};"
    got = _same(query, _records(VALUES * 2))
    assert got


KEY_FALLBACK = "fallback: the step runs in Python (a grouping key of a type Spark groups differently)"


@pytest.mark.parametrize(
    ("group_by", "step_type", "native", "aggregate"),
    [
        ("ITEM, F", "streamGroupByV2", True, "native"),
        ("UCASE(ITEM)", "streamGroupByV2", True, "native"),
        ("QTY + 1", "streamGroupByV2", True, "native"),
        # integer division by a constant: level 2 of the compiler runs it in Spark (V3)
        ("QTY / 2", "streamGroupByV3", True, "native"),
        ("LEN(ITEM), L % 3", "streamGroupByV3", True, "native"),
        # one key level 2 runs in Spark, one it does not: the grouping builds as V1
        ("QTY / 2, SUBSTRING(ITEM, 1, 1)", "streamGroupByV3", False, "native"),
        ("D", "streamGroupByV2", False, KEY_FALLBACK),  # a DOUBLE key groups NaN and -0.0 differently in Spark
    ],
)
def test_grouping_keys_give_the_v1_records(spark, group_by, step_type, native, aggregate):
    query = (
        f"CREATE TABLE OUT WITH (key_format='JSON') AS SELECT {group_by}, COUNT(*) AS C, SUM(QTY) AS SQ "
        f"FROM S GROUP BY {group_by};"
    )
    engine = _engine(True, SOURCE + query)
    (q,) = engine.queries.values()
    with collecting_reports() as reports:
        build(q.root, BuildContext(runtime=engine.runtime(), query_id=q.query_id))
    grouping = [r for r in reports if r.step_type.startswith("streamGroupBy")]
    assert grouping and {r.step_type for r in grouping} == {step_type}
    assert all((r.how == "native") is native for r in grouping)
    assert {r.how for r in reports if r.step_type == "streamAggregateV4"} == {aggregate}
    _same(query, _records(VALUES))


def _only_reports(engine: KsqlEngine, query_id: str, *steps: Any) -> dict[str, str]:
    """Each step, built alone, by its type: how its one reported expression runs."""
    hows = {}
    for step in steps:
        with collecting_reports() as reports:
            build(step, BuildContext(runtime=engine.runtime(), query_id=query_id))
        (hows[step.TYPE],) = [r.how for r in reports if r.step_type == step.TYPE]
    return hows


@pytest.mark.parametrize("table", [False, True])
def test_a_v2_grouping_keeps_level_1_where_v3_runs_level_2_in_spark(spark, table):
    # Saved plans hold V2 group-bys: their keys compile at level 1, frozen, whatever the
    # planner picks today. The same step as V3 runs the division in Spark.
    from engine.plan import steps_native as N

    source, name = (TABLE, "T") if table else (SOURCE, "S")
    query = f"CREATE TABLE OUT AS SELECT QTY / 2 AS K, COUNT(*) AS C FROM {name} GROUP BY QTY / 2;"
    engine = _engine(True, source + query)
    (q,) = engine.queries.values()
    v3 = next(s for s in walk_steps(q.root) if isinstance(s, N.StreamGroupByV3 | N.TableGroupByV3))
    v2_cls = N.TableGroupByV2 if table else N.StreamGroupByV2
    v2 = v2_cls(ctx=v3.ctx, source=v3.source, group_by_expressions=v3.group_by_expressions,
                internal_formats=v3.internal_formats)
    hows = _only_reports(engine, q.query_id, v3, v2)
    assert hows[v3.TYPE] == "native"
    assert hows[v2.TYPE] == "fallback: integer / (Java truncation; a zero divisor is logged)"
    records = _changes(CHANGES) if table else _records(VALUES)
    _same(query, records, source)


def test_an_aggregate_without_a_spark_form_builds_the_step_as_v1_and_says_why(spark):
    query = "CREATE TABLE OUT AS SELECT ITEM, COUNT(*) AS C, COUNT_DISTINCT(QTY) AS A FROM S GROUP BY ITEM;"
    engine = _engine(True, SOURCE + query)
    (q,) = engine.queries.values()
    with collecting_reports() as reports:
        build(q.root, BuildContext(runtime=engine.runtime(), query_id=q.query_id))
    how = {r.name: r.how for r in reports if r.step_type == "streamAggregateV4"}
    assert how["KSQL_AGG_VARIABLE_1"] == "fallback: aggregate function COUNT_DISTINCT has no Spark form yet"
    assert how["KSQL_AGG_VARIABLE_0"] == (
        "fallback: the step runs in Python (KSQL_AGG_VARIABLE_1: aggregate function COUNT_DISTINCT has no Spark "
        "form yet)"
    )
    _same(query, _records(VALUES))


def test_grouping_by_the_key_aggregates_natively(spark):
    query = "CREATE TABLE OUT AS SELECT ID, COUNT(*) AS C, SUM(L) AS SL, AVG(D) AS AD FROM S GROUP BY ID;"
    assert {"streamGroupByKeyV2", "streamAggregateV4"} <= _step_types(query)
    got = _same(query, _records(VALUES))
    assert {key for key, _, _ in got} == {0, 1, 2}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {},
                optional={
                    "ITEM": st.sampled_from([None, "a", "b", "c"]),
                    "QTY": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
                    "L": st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
                    "D": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64)),
                },
            ),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_random_records_aggregate_alike(spark, values):
    query = f"CREATE TABLE OUT AS SELECT ITEM, {AGGREGATES} FROM S GROUP BY ITEM HAVING COUNT(QTY) > 1;"
    _same(query, _records(values))


TABLE = """
CREATE TABLE T (ID BIGINT PRIMARY KEY, ITEM STRING, QTY INT, L BIGINT, D DOUBLE)
  WITH (kafka_topic='t', value_format='JSON');
"""
TABLE_AGGREGATES = "COUNT(*) AS C, COUNT(QTY) AS CQ, SUM(QTY) AS SQ, SUM(L) AS SL, SUM(D) AS SD, AVG(QTY) AS AQ"

# (table key, value): rows moving between groups, updates within a group (a retraction
# paired with an addition), a NULL group, deletes of known and unknown keys, repeated deletes.
CHANGES = [
    (1, {"ITEM": "a", "QTY": 2147483647, "L": 9223372036854775807, "D": 0.1}),
    (2, {"ITEM": "a", "QTY": 1, "L": 1, "D": 0.2}),
    (1, {"ITEM": "b", "QTY": 3, "L": 3, "D": -0.0}),
    (2, {"ITEM": "a", "QTY": None, "L": 5, "D": 1e300}),
    (3, {"ITEM": None, "QTY": 4}),
    (3, {"ITEM": "b", "QTY": 4}),
    (9, None),
    (1, None),
    (1, None),
    (2, {"ITEM": "c", "QTY": -1, "L": -1, "D": 2.5}),
    (1, {"ITEM": "c", "QTY": -2147483648, "L": 0, "D": 0.3}),
    (3, {"ITEM": None}),
]


def _changes(changes):
    return [TopicRecord("t", k, v, 1000 + (i * 7919) % 13) for i, (k, v) in enumerate(changes)]


def test_a_table_aggregate_undoes_retractions_as_v1(spark):
    query = f"CREATE TABLE OUT AS SELECT ITEM, {TABLE_AGGREGATES} FROM T GROUP BY ITEM;"
    assert {"tableGroupByV2", "tableAggregateV2"} <= _step_types(query, TABLE)
    got = _same(query, _changes(CHANGES), TABLE)
    a = [value for key, value, _ in got if key == "a"]
    assert [v["C"] for v in a] == [1, 2, 1, 1, 0]  # an update within the group emits once
    assert a[1]["SQ"] == -2147483648  # MAX_INT + 1 wraps like Java's int; undo wraps back


@pytest.mark.parametrize("having", ["SUM(QTY) > 2", "COUNT(*) = 1 OR AVG(QTY) < 0"])
def test_a_table_aggregate_with_having_as_v1(spark, having):
    query = f"CREATE TABLE OUT AS SELECT ITEM, {TABLE_AGGREGATES} FROM T GROUP BY ITEM HAVING {having};"
    assert _same(query, _changes(CHANGES * 2), TABLE)


def test_a_table_aggregate_of_a_function_without_undo_in_spark_builds_as_v1(spark):
    query = "CREATE TABLE OUT AS SELECT ITEM, COLLECT_LIST(QTY) AS Q FROM T GROUP BY ITEM;"
    engine = _engine(True, TABLE + query)
    (q,) = engine.queries.values()
    with collecting_reports() as reports:
        build(q.root, BuildContext(runtime=engine.runtime(), query_id=q.query_id))
    how = {r.name: r.how for r in reports if r.step_type == "tableAggregateV2"}
    assert how == {"KSQL_AGG_VARIABLE_0": "fallback: aggregate function COLLECT_LIST has no Spark form yet"}
    _same(query, _changes(CHANGES), TABLE)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.integers(1, 4),
            st.one_of(
                st.none(),
                st.fixed_dictionaries(
                    {},
                    optional={
                        "ITEM": st.sampled_from([None, "a", "b"]),
                        "QTY": st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)),
                        "D": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False, width=64)),
                    },
                ),
            ),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_random_table_changes_aggregate_alike(spark, changes):
    query = f"CREATE TABLE OUT AS SELECT ITEM, {TABLE_AGGREGATES} FROM T GROUP BY ITEM HAVING COUNT(QTY) <> 1;"
    _same(query, _changes(changes), TABLE)


@pytest.mark.parametrize(
    ("having", "version", "operator"),
    [
        ("", "V4", "RunningAggregateTaskProcessor (COUNT, SUM, AVG, MIN, MAX; groups by ITEM); grouped by __task"),
        (" HAVING COUNT(*) > 1", "V4",
         "RunningAggregateTaskProcessor (COUNT, SUM, AVG, MIN, MAX; groups by ITEM; each record with its group's "
         "previous results); grouped by __task"),
        ("", "V3", "RunningAggregateProcessor (COUNT, SUM, AVG, MIN, MAX); grouped by ITEM; state"),
        (" HAVING COUNT(*) > 1", "V3", "KeyedTaskProcessor"),  # V3 keeps V1's handler for HAVING
        ("", "V2", "KeyedTaskProcessor"),  # the frozen V2 runs V1's handler on Kafka
        # V5 runs as V4 (its arguments and HAVING compiled with level 2)
        (" HAVING COUNT(*) > 1", "V5",
         "RunningAggregateTaskProcessor (COUNT, SUM, AVG, MIN, MAX; groups by ITEM; each record with its group's "
         "previous results); grouped by __task"),
    ],
)
def test_on_the_kafka_runtime_each_aggregate_version_runs_its_own_operator(spark, having, version, operator):
    from engine.plan import steps_native as N
    from qtt.plans.record import streaming_plans

    query = (
        "CREATE TABLE OUT AS SELECT ITEM, COUNT(*) AS C, SUM(QTY) AS SQ, AVG(D) AS AD, MIN(QTY) AS MN, "
        f"MAX(L) AS MX FROM S GROUP BY ITEM{having};"
    )
    engine = _engine(True, SOURCE + query)
    (q,) = engine.queries.values()
    (agg,) = [s for s in walk_steps(q.root) if type(s).__name__.startswith("StreamAggregateV")]
    assert type(agg) is N.StreamAggregateV4
    # A plan saved with an older version: the same step with its type (all have the same fields).
    object.__setattr__(agg, "__class__", getattr(N, f"StreamAggregate{version}"))
    (plan,) = streaming_plans(engine).values()
    (line,) = [x for x in plan.splitlines() if x.startswith("operator") and "Aggregate" in x]
    assert operator in line


@pytest.mark.parametrize(
    ("source", "query", "step_type"),
    [
        (SOURCE, "SELECT ITEM, SUM(QTY / 2) AS H, AVG(L % 3) AS R, COUNT(LEN(ITEM)) AS N FROM S GROUP BY ITEM",
         "streamAggregateV5"),
        (SOURCE, "SELECT ITEM, SUM(QTY) AS SQ FROM S GROUP BY ITEM HAVING SUM(QTY) / 2 <> 0", "streamAggregateV5"),
        (SOURCE, "SELECT ITEM, SUM(QTY) AS SQ FROM S GROUP BY ITEM HAVING SUM(QTY) > 2", "streamAggregateV4"),
        (TABLE, "SELECT ITEM, SUM(QTY % 3) AS R, COUNT(*) AS C FROM T GROUP BY ITEM HAVING COUNT(*) / 2 < 1",
         "tableAggregateV3"),
        (TABLE, "SELECT ITEM, SUM(QTY) AS SQ FROM T GROUP BY ITEM", "tableAggregateV2"),
    ],
)
def test_aggregate_arguments_and_having_with_level_2_forms_run_in_spark_as_v1(spark, source, query, step_type):
    statement = f"CREATE TABLE OUT AS {query};"
    engine = _engine(True, source + statement)
    (q,) = engine.queries.values()
    with collecting_reports() as reports:
        build(q.root, BuildContext(runtime=engine.runtime(), query_id=q.query_id))
    hows = {r.how for r in reports if r.step_type == step_type}
    assert hows == {"native"}
    records = _changes(CHANGES) if source is TABLE else _records(VALUES * 2)
    _same(statement, records, source)


@pytest.mark.parametrize("table", [False, True])
def test_a_v4_or_v2_aggregate_keeps_level_1_where_the_level_2_version_runs_in_spark(spark, table):
    from engine.plan import steps_native as N

    source, name = (TABLE, "T") if table else (SOURCE, "S")
    statement = f"CREATE TABLE OUT AS SELECT ITEM, SUM(QTY / 2) AS H FROM {name} GROUP BY ITEM;"
    engine = _engine(True, source + statement)
    (q,) = engine.queries.values()
    (new,) = [s for s in walk_steps(q.root) if isinstance(s, N.StreamAggregateV5 | N.TableAggregateV3)]
    old_cls = N.TableAggregateV2 if table else N.StreamAggregateV4
    old = old_cls(**{f: getattr(new, f) for f in (
        "ctx", "source", "key_column_names", "aggregation_functions", "internal_formats", "having")})
    hows = _only_reports(engine, q.query_id, new, old)
    assert hows[new.TYPE] == "native"
    assert hows[old.TYPE] == "fallback: integer / (Java truncation; a zero divisor is logged)"
