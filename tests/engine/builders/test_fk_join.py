"""Foreign-key table-table joins: handlers against a reference model (no Spark), analysis, one Spark run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.builders.joins import (
    DELETE,
    FK_OP,
    FK_VALUE,
    LEFT,
    NO_FOREIGN_KEY,
    RIGHT,
    SUBSCRIBE,
    SUBSCRIBE_IF_MATCH,
    UNSUBSCRIBE,
    ForeignKeyJoinHandler,
    ForeignKeySubscriptionHandler,
    JoinShape,
    serialized_order,
)
from engine.runtime import rows as R
from engine.runtime.keyed import KeyedRecord

SHAPE = JoinShape(("L_ID",), (("FK", "L_FK"), ("V", "L_V")), (("ID", "R_ID"), ("NAME", "R_NAME")))

Row = dict[str, Any]
# An input change: (side, key, value or None for a delete, timestamp). Left values are
# (foreign key, V); right values are NAME.
Change = tuple[int, int, Any, int]


def left_row(seq: int, key: int, value: tuple[Any, Any] | None, ts: int) -> Row:
    fk, v = value if value is not None else (None, None)
    return {
        "ID": key, "FK": fk, "V": v, R.SEQ: [seq], R.ROWTIME: ts, R.ROWPARTITION: 0,
        R.ROWOFFSET: seq, R.HEADERS: [], R.DELETED: value is None, R.WINDOWSTART: None,
        R.WINDOWEND: None,
    }


def right_row(seq: int, key: int, name: Any, ts: int, *, deleted: bool = False) -> Row:
    return {
        "ID": key, "NAME": name, R.SEQ: [seq], R.ROWTIME: ts, R.ROWPARTITION: 0,
        R.ROWOFFSET: seq, R.HEADERS: [], R.DELETED: deleted, R.WINDOWSTART: None,
        R.WINDOWEND: None,
    }


def _group_run(handler: Any, groups: dict[Any, list[tuple[int, Row]]]) -> list[Row]:
    """What ``process_keyed`` does: each group's records in seq order, with its own state."""
    out: list[Row] = []
    for records in groups.values():
        state: dict[str, Any] = {}
        for side, row in sorted(records, key=lambda r: r[1][R.SEQ]):
            ts = row[R.ROWTIME]
            out += handler.process(state, KeyedRecord(side, tuple(row[R.SEQ]), row, ts, (ts, ts)))
    return out


def run_fk(join_type: str, changes: list[Change], fk: Callable[[Row], Any] | None = None) -> list[Row]:
    """Both passes of a foreign-key join over ``changes``, outputs in seq order."""
    lefts: dict[Any, list[tuple[int, Row]]] = {}
    rights: dict[Any, list[tuple[int, Row]]] = {}
    for seq, (side, key, value, ts) in enumerate(changes):
        if side == LEFT:
            lefts.setdefault(key, []).append((LEFT, left_row(seq, key, value, ts)))
        else:
            row = right_row(seq, key, value, ts, deleted=value is None)
            rights.setdefault((key,), []).append((RIGHT, row))
    subscribe = ForeignKeySubscriptionHandler(fk or (lambda r: r["FK"]), join_type == "LEFT")
    events = _group_run(subscribe, lefts)
    groups = dict(rights)
    for e in events:
        group = (NO_FOREIGN_KEY, e["ID"]) if e[FK_VALUE] is None else (e[FK_VALUE],)
        groups.setdefault(group, []).append((LEFT, e))
    out = _group_run(ForeignKeyJoinHandler(SHAPE, join_type, "ID"), groups)
    return sorted(out, key=lambda r: r[R.SEQ])


def simple(rows: list[Row]) -> list[tuple[Any, ...]]:
    return [
        (r["L_ID"], None if r[R.DELETED] else (r["L_FK"], r["L_V"], r["R_NAME"]), r[R.ROWTIME])
        for r in rows
    ]


# --------------------------------------------------------------------------- subscriptions


def subscriptions(join_type: str, changes: list[tuple[Any, int]]) -> list[tuple[Any, ...]]:
    """Events of one left key for a sequence of (value, ts) changes: (seq, op, fk)."""
    handler = ForeignKeySubscriptionHandler(lambda r: r["FK"], join_type == "LEFT")
    rows = [(LEFT, left_row(i, 1, v, ts)) for i, (v, ts) in enumerate(changes)]
    return [(tuple(e[R.SEQ]), e[FK_OP], e[FK_VALUE]) for e in _group_run(handler, {1: rows})]


def test_foreign_key_change_unsubscribes_the_old_key_before_subscribing_the_new_one() -> None:
    assert subscriptions("INNER", [((10, "a"), 1), ((10, "b"), 2), ((20, "b"), 3)]) == [
        ((0, 1), SUBSCRIBE_IF_MATCH, 10),
        ((1, 1), SUBSCRIBE, 10),
        ((2, 0), UNSUBSCRIBE, 10),
        ((2, 1), SUBSCRIBE, 20),
    ]


def test_inner_join_deletes_when_the_row_goes_or_loses_its_foreign_key() -> None:
    assert subscriptions("INNER", [((10, "a"), 1), ((None, "a"), 2), ((None, "b"), 3), (None, 4)]) == [
        ((0, 1), SUBSCRIBE_IF_MATCH, 10),
        ((1, 1), DELETE, 10),
    ]
    assert subscriptions("INNER", [((10, "a"), 1), (None, 2), (None, 3)]) == [
        ((0, 1), SUBSCRIBE_IF_MATCH, 10),
        ((1, 1), DELETE, 10),
    ]


def test_left_join_sends_deletes_and_null_foreign_keys_to_the_no_foreign_key_group() -> None:
    assert subscriptions("LEFT", [((None, "a"), 1), ((10, "a"), 2), (None, 3), (None, 4)]) == [
        ((0, 1), SUBSCRIBE, None),
        ((1, 1), SUBSCRIBE, 10),
        ((2, 0), UNSUBSCRIBE, 10),
        ((2, 1), SUBSCRIBE, None),
    ]


# --------------------------------------------------------------------------- joins


def test_inner_join_emits_on_match_and_fans_right_changes_out_to_every_subscriber() -> None:
    out = run_fk("INNER", [
        (LEFT, 1, (10, "a"), 1),
        (RIGHT, 10, "ann", 2),
        (LEFT, 2, (10, "b"), 3),
        (RIGHT, 10, "bob", 4),
        (LEFT, 1, (20, "a"), 5),
        (RIGHT, 10, None, 6),
        (LEFT, 2, None, 7),
    ])
    assert simple(out) == [
        (1, (10, "a", "ann"), 2),
        (2, (10, "b", "ann"), 3),
        (1, (10, "a", "bob"), 4),
        (2, (10, "b", "bob"), 4),
        (1, None, 5),
        (2, None, 6),
        (2, None, 7),
    ]


def test_subscription_result_takes_the_later_timestamp_and_right_changes_their_own() -> None:
    out = run_fk("LEFT", [(RIGHT, 10, "ann", 50), (LEFT, 1, (10, "a"), 5), (RIGHT, 10, "bob", 7)])
    assert simple(out) == [(1, (10, "a", "ann"), 50), (1, (10, "a", "bob"), 7)]


def test_left_join_keeps_unmatched_rows_and_ignores_deletes_of_missing_right_rows() -> None:
    out = run_fk("LEFT", [
        (LEFT, 1, (None, "a"), 1),
        (LEFT, 2, (10, "b"), 2),
        (RIGHT, 10, None, 3),
        (RIGHT, 10, "ann", 4),
        (RIGHT, 10, None, 5),
        (LEFT, 1, None, 6),
    ])
    assert simple(out) == [
        (1, (None, "a", None), 1),
        (2, (10, "b", None), 2),
        (2, (10, "b", "ann"), 4),
        (2, (10, "b", None), 5),
        (1, None, 6),
    ]


def test_fan_out_follows_the_serialized_order_of_the_left_keys() -> None:
    out = run_fk("INNER", [
        (RIGHT, 10, "ann", 1),
        (LEFT, 5, (10, "a"), 2),
        (LEFT, -1, (10, "b"), 3),
        (LEFT, 2, (10, "c"), 4),
        (RIGHT, 10, "bob", 5),
    ])
    assert [r["L_ID"] for r in out[3:]] == [2, 5, -1]
    assert [r[R.SEQ] for r in out[3:]] == [[4, 0], [4, 1], [4, 2]]


def test_serialized_order_sorts_like_big_endian_bytes() -> None:
    assert sorted([3, -2, 0, -7, 100], key=serialized_order) == [0, 3, 100, -7, -2]
    assert sorted(["b", "B", "a"], key=serialized_order) == ["B", "a", "b"]
    assert sorted([1.5, -1.0, 0.0], key=serialized_order) == [0.0, 1.5, -1.0]


def test_foreign_key_may_be_an_expression_of_the_left_row() -> None:
    out = run_fk("INNER", [(RIGHT, 11, "x", 1), (LEFT, 1, (10, "a"), 2)], fk=lambda r: r["FK"] + 1)
    assert simple(out) == [(1, (10, "a", "x"), 2)]


def reference(join_type: str, left: dict[int, tuple[Any, Any]], right: dict[int, Any]) -> dict[int, tuple[Any, ...]]:
    """The join of two materialised tables, by left key."""
    out = {}
    for key, (fk, v) in left.items():
        name = right.get(fk) if fk is not None else None
        if join_type == "LEFT" or (fk is not None and fk in right):
            out[key] = (fk, v, name)
    return out


changes = st.lists(
    st.one_of(
        st.tuples(
            st.just(LEFT), st.integers(-2, 3),
            st.one_of(st.none(), st.tuples(st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 9))),
            st.integers(0, 100),
        ),
        st.tuples(
            st.just(RIGHT), st.integers(0, 3), st.one_of(st.none(), st.sampled_from("abc")),
            st.integers(0, 100),
        ),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(changes=changes, join_type=st.sampled_from(["INNER", "LEFT"]))
def test_changelog_materialises_to_the_join_of_the_inputs_after_every_change(
    changes: list[Change], join_type: str
) -> None:
    out = run_fk(join_type, changes)
    left: dict[int, tuple[Any, Any]] = {}
    right: dict[int, Any] = {}
    materialised: dict[int, tuple[Any, ...]] = {}
    by_input: dict[int, list[Row]] = {}
    for r in out:
        by_input.setdefault(r[R.SEQ][0], []).append(r)
    for seq, (side, key, value, _) in enumerate(changes):
        table: dict[int, Any] = left if side == LEFT else right
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
        for r in by_input.get(seq, []):
            if r[R.DELETED]:
                materialised.pop(r["L_ID"], None)
            else:
                materialised[r["L_ID"]] = (r["L_FK"], r["L_V"], r["R_NAME"])
        assert materialised == reference(join_type, left, right), f"after change {seq}"
    seqs = [tuple(r[R.SEQ]) for r in out]
    assert len(seqs) == len(set(seqs))


# --------------------------------------------------------------------------- analysis


@pytest.fixture
def store() -> Any:
    from engine.metastore.memory import InMemoryMetaStore
    from engine.metastore.model import DataSource
    from engine.plan.schema import LogicalSchema
    from engine.plan.steps import Formats

    ms = InMemoryMetaStore()
    fmt = Formats(key_format="KAFKA", value_format="JSON")
    for name, schema in (("ORDERS", "ID INT KEY, CUST INT, AMOUNT INT"), ("CUSTOMERS", "ID INT KEY, NAME STRING, AGE INT")):
        ms.put(DataSource(name=name, kind="TABLE", schema=LogicalSchema.parse(schema), topic=name.lower(), formats=fmt))
    return ms


def plan_steps(sql: str, store: Any) -> Any:
    from engine.analysis.query import analyze_query
    from engine.parser import parse
    from engine.planner.physical import to_steps

    analysis = analyze_query(parse(sql)[0].statement, store, sink_name="OUT")
    return analysis, to_steps(analysis.node)


def test_foreign_key_join_plans_the_foreign_key_step_keyed_by_the_left_key(store: Any) -> None:
    from engine.plan import expr as E
    from engine.plan.steps_join import ForeignKeyTableTableJoin

    analysis, step = plan_steps(
        "SELECT O.ID, NAME FROM ORDERS O LEFT JOIN CUSTOMERS C ON O.CUST + 1 = C.ID;", store
    )
    assert isinstance(step, ForeignKeyTableTableJoin)
    assert (step.key_column, step.join_type) == ("O_ID", "LEFT")
    assert isinstance(step.foreign_key, E.Arithmetic)
    assert analysis.is_table
    assert str(analysis.node.schema).startswith("`O_ID` INTEGER KEY")


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT O.ID, NAME FROM ORDERS O RIGHT JOIN CUSTOMERS C ON O.CUST = C.ID;",
         "RIGHT OUTER JOIN on a foreign key is not supported"),
        ("SELECT O.ID, NAME FROM ORDERS O JOIN CUSTOMERS C ON O.CUST = C.NAME;",
         "Invalid join condition: types don't match."),
        ("SELECT O.ID, NAME FROM ORDERS O JOIN CUSTOMERS C ON O.CUST = C.AGE;",
         "table-table joins require to join on the primary key of the right input table"),
    ],
)
def test_invalid_foreign_key_joins_are_rejected(store: Any, sql: str, message: str) -> None:
    from engine.errors import AnalysisError

    with pytest.raises(AnalysisError) as info:
        plan_steps(sql, store)
    assert message in str(info.value)


def test_foreign_key_join_projection_must_include_the_left_key(store: Any) -> None:
    from engine.errors import AnalysisError
    from engine.parser import parse
    from engine.planner.planner import Planner

    sql = "CREATE TABLE OUT AS SELECT C.ID, NAME FROM ORDERS O JOIN CUSTOMERS C ON O.CUST = C.ID;"
    with pytest.raises(AnalysisError) as info:
        Planner(store, lambda: {}, {}).plan_create_as_select(parse(sql)[0].statement, sql, "CTAS_OUT_0")
    assert "from the left input table (`O`). Missing column: `ID`." in str(info.value)


# --------------------------------------------------------------------------- Spark


def test_spark_foreign_key_join_runs_both_passes(spark: Any) -> None:
    from engine.builders.context import BuildContext
    from engine.builders.walker import build
    from engine.data.records import TopicRecord
    from engine.plan import expr as E
    from engine.plan import steps as S
    from engine.plan.schema import LogicalSchema
    from engine.plan.steps_join import ForeignKeyTableTableJoin
    from engine.runtime.adapter import BoundedRuntime

    formats = S.Formats(key_format="KAFKA", value_format="JSON")
    rt = BoundedRuntime(spark)
    rt.produce([
        TopicRecord("l", 1, {"FK": 10, "V": "a"}, 1),
        TopicRecord("r", 10, {"NAME": "ann"}, 2),
        TopicRecord("l", 2, {"FK": 10, "V": "b"}, 3),
        TopicRecord("l", 1, {"FK": None, "V": "a"}, 4),
        TopicRecord("r", 10, {"NAME": "bob"}, 5),
        TopicRecord("l", 2, None, 6),
    ])
    join = ForeignKeyTableTableJoin(
        ctx="Join",
        left=S.TableSource(ctx="KsqlTopic/Left", topic="l", formats=formats,
                           source_schema=LogicalSchema.parse("ID INT KEY, FK INT, V STRING")),
        right=S.TableSource(ctx="KsqlTopic/Right", topic="r", formats=formats,
                            source_schema=LogicalSchema.parse("ID INT KEY, NAME STRING")),
        join_type="LEFT", left_alias="L", right_alias="R", key_column="L_ID",
        foreign_key=E.ColumnRef("FK"),
    )
    built = build(join, BuildContext(runtime=rt, query_id="Q"))
    assert built.is_table and [c.name for c in built.schema.key] == ["L_ID"]
    assert any(name.endswith(".Join.SubscriptionStore") for name, _ in built.internal_schemas)
    rows = sorted(built.df.collect(), key=lambda r: list(r[R.SEQ]))
    assert [
        (r["L_ID"], None if r[R.DELETED] else (r["L_V"], r["R_NAME"]), r[R.ROWTIME]) for r in rows
    ] == [
        (1, ("a", None), 1),
        (1, ("a", "ann"), 2),
        (2, ("b", "ann"), 3),
        (1, ("a", None), 4),
        (2, ("b", "bob"), 5),
        (2, None, 6),
    ]
