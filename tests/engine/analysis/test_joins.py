"""Join analysis and planning: validation errors, key naming, column naming, steps (no Spark)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.analysis.query import analyze_query
from engine.errors import AnalysisError
from engine.metastore.memory import InMemoryMetaStore
from engine.metastore.model import DataSource
from engine.parser import parse
from engine.plan.schema import LogicalSchema
from engine.plan.steps import Formats, WindowInfo
from engine.plan.steps_join import StreamStreamJoin, StreamTableJoin, TableTableJoin
from engine.planner.logical_join import JoinNode
from engine.planner.physical import to_steps
from engine.planner.planner import Planner

JSON = Formats(key_format="KAFKA", value_format="JSON")


def source(
    name: str, kind: str, schema: str, *, fmt: Formats = JSON, window: WindowInfo | None = None
) -> DataSource:
    return DataSource(
        name=name, kind=kind, schema=LogicalSchema.parse(schema), topic=name.lower(),
        formats=fmt, window_info=window,
    )


@pytest.fixture
def store() -> InMemoryMetaStore:
    ms = InMemoryMetaStore()
    ms.put(source("ORDERS", "STREAM", "ID INT KEY, ITEM STRING, QTY INT, CUST INT"))
    ms.put(source("SHIPMENTS", "STREAM", "ID INT KEY, WHERE_TO STRING, QTY INT"))
    ms.put(source("CUSTOMERS", "TABLE", "ID INT KEY, NAME STRING"))
    ms.put(source("REGIONS", "TABLE", "ID INT KEY, REGION STRING, CUST INT"))
    ms.put(source("RAW", "STREAM", "ID INT KEY, V STRING", fmt=Formats(key_format="KAFKA", value_format="KAFKA")))
    ms.put(source("SESS", "STREAM", "ID INT KEY, V INT", window=WindowInfo(type="SESSION")))
    ms.put(source("TUMB", "STREAM", "ID INT KEY, V INT", window=WindowInfo(type="TUMBLING", size_ms=1000)))
    return ms


def analyze(sql: str, store: InMemoryMetaStore) -> Any:
    statement = parse(sql)[0].statement
    return analyze_query(statement, store, sink_name="OUT")


def plan(sql: str, store: InMemoryMetaStore) -> Any:
    planner = Planner(store, lambda: {}, {})
    statement = parse(sql)[0].statement
    return planner.plan_create_as_select(statement, sql, "CSAS_OUT_0")


def test_stream_stream_join_prefixes_columns_and_keys_on_the_left_column(store: InMemoryMetaStore) -> None:
    a = analyze("SELECT * FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON O.ID = S.ID;", store)
    assert isinstance(a.node, JoinNode)
    assert [c.name for c in a.node.schema.key] == ["O_ID"]
    assert [s.alias for s in a.select] == [
        "O_ID", "O_ITEM", "O_QTY", "O_CUST", "S_ID", "S_WHERE_TO", "S_QTY",
    ]


def test_selected_join_columns_keep_their_name_unless_two_sources_have_it(store: InMemoryMetaStore) -> None:
    a = analyze(
        "SELECT O.ID, ITEM, S.QTY, WHERE_TO FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON O.ID = S.ID;",
        store,
    )
    assert [s.alias for s in a.select] == ["O_ID", "ITEM", "S_QTY", "WHERE_TO"]


def test_full_outer_join_has_a_synthetic_key(store: InMemoryMetaStore) -> None:
    a = analyze("SELECT * FROM ORDERS O FULL JOIN SHIPMENTS S WITHIN 1 HOUR ON O.ID = S.ID;", store)
    assert [c.name for c in a.node.schema.key] == ["ROWKEY"]


def test_join_on_expressions_has_a_synthetic_key_that_the_projection_must_include(
    store: InMemoryMetaStore,
) -> None:
    with pytest.raises(AnalysisError, match="must include the join expression ROWKEY"):
        plan(
            "CREATE STREAM OUT AS SELECT O.ITEM FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR "
            "ON ABS(O.ID) = ABS(S.ID);", store,
        )


def test_missing_join_key_names_both_join_columns(store: InMemoryMetaStore) -> None:
    with pytest.raises(AnalysisError, match=r"join expressions O.ID or S.ID in its projection"):
        plan(
            "CREATE STREAM OUT AS SELECT O.ITEM FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON O.ID = S.ID;",
            store,
        )


def test_right_join_column_can_stand_for_the_key(store: InMemoryMetaStore) -> None:
    result = plan(
        "CREATE STREAM OUT AS SELECT S.ID, O.ITEM FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON O.ID = S.ID;",
        store,
    )
    assert [(c.name, c.namespace.value) for c in result.command.schema.columns][0] == ("S_ID", "KEY")


def test_stream_stream_join_plans_a_windowed_step(store: InMemoryMetaStore) -> None:
    result = plan(
        "CREATE STREAM OUT AS SELECT O.ID, ITEM FROM ORDERS O LEFT JOIN SHIPMENTS S "
        "WITHIN (1 SECOND, 2 SECONDS) GRACE PERIOD 3 SECONDS ON O.ID = S.ID;", store,
    )
    join = result.query.root.source.source
    assert isinstance(join, StreamStreamJoin)
    assert (join.join_type, join.before_ms, join.after_ms, join.grace_ms) == ("LEFT", 1000, 2000, 3000)


def test_stream_table_join_on_a_value_column_repartitions_the_stream(store: InMemoryMetaStore) -> None:
    a = analyze("SELECT * FROM ORDERS O JOIN CUSTOMERS C ON O.CUST = C.ID;", store)
    step = to_steps(a.node)
    assert isinstance(step, StreamTableJoin)
    assert step.key_column == "O_CUST"
    assert [s.alias for s in a.select] == ["O_CUST", "O_ID", "O_ITEM", "O_QTY", "C_ID", "C_NAME"]


def test_table_table_join_on_primary_keys(store: InMemoryMetaStore) -> None:
    a = analyze("SELECT * FROM CUSTOMERS C LEFT JOIN REGIONS R ON C.ID = R.ID;", store)
    assert isinstance(to_steps(a.node), TableTableJoin)
    assert a.is_table


def test_n_way_join_keeps_the_names_of_the_left_join(store: InMemoryMetaStore) -> None:
    a = analyze(
        "SELECT O.ID, ITEM, NAME, WHERE_TO FROM ORDERS O JOIN CUSTOMERS C ON O.ID = C.ID "
        "JOIN SHIPMENTS S WITHIN 1 HOUR ON O.ID = S.ID;", store,
    )
    step = to_steps(a.node)
    assert isinstance(step, StreamStreamJoin) and isinstance(step.left, StreamTableJoin)
    assert [s.alias for s in a.select] == ["O_ID", "ITEM", "NAME", "WHERE_TO"]


def test_hidden_pseudo_columns_are_selectable_but_not_in_star(store: InMemoryMetaStore) -> None:
    a = analyze("SELECT *, O.ROWTIME FROM ORDERS O JOIN CUSTOMERS C ON O.ID = C.ID;", store)
    aliases = [s.alias for s in a.select]
    assert aliases[-1] == "O_ROWTIME"
    assert "O_ROWTIME" not in aliases[:-1]


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT * FROM ORDERS O JOIN SHIPMENTS S ON O.ID = S.ID;", "must have a WITHIN clause"),
        ("SELECT * FROM CUSTOMERS C JOIN ORDERS O ON O.ID = C.ID;",
         "Invalid join order: table-stream joins are not supported"),
        ("SELECT * FROM ORDERS O FULL JOIN CUSTOMERS C ON O.ID = C.ID;",
         "full-outer join not supported for stream-table join"),
        ("SELECT * FROM ORDERS O JOIN REGIONS R ON O.ID = R.CUST;",
         "stream-table joins require to join on the table's primary key"),
        ("SELECT * FROM CUSTOMERS C JOIN REGIONS R ON C.ID = R.CUST;", "Got C.ID = R.CUST."),
        ("SELECT * FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON O.ID = S.ID AND O.QTY = S.QTY;",
         "joins on multiple conditions"),
        ("SELECT * FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON O.ID = 3;",
         "Invalid comparison expression '3'"),
        ("SELECT * FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON O.ITEM = S.ID;",
         "types don't match. Got O.ITEM{STRING} = S.ID{INTEGER}"),
        ("SELECT * FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON O.NOPE = S.ID;",
         "JOIN ON column 'O.NOPE' cannot be resolved."),
        ("SELECT * FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON X.ID = S.ID;",
         "'X' is not a valid stream/table name or alias."),
        ("SELECT * FROM ORDERS O JOIN SHIPMENTS S WITHIN 1 HOUR ON QTY = QTY;", "Column 'QTY' is ambiguous"),
        ("SELECT * FROM ORDERS A JOIN ORDERS B WITHIN 1 HOUR ON A.ID = B.ID;", "self joins are not yet supported"),
        ("SELECT * FROM ORDERS O JOIN RAW R WITHIN 1 HOUR ON O.ID = R.ID;",
         "Source(s) RAW are using the 'KAFKA' value format"),
        ("SELECT * FROM SESS A JOIN ORDERS O WITHIN 1 HOUR ON A.ID = O.ID;",
         "Can not join windowed source to non-windowed source"),
        ("SELECT * FROM SESS A JOIN TUMB T WITHIN 1 HOUR ON A.ID = T.ID;", "Incompatible windowed sources"),
    ],
)
def test_invalid_joins_are_rejected_with_ksqldb_messages(
    store: InMemoryMetaStore, sql: str, message: str
) -> None:
    with pytest.raises(AnalysisError) as info:
        analyze(sql, store)
    assert message in str(info.value)



@pytest.mark.parametrize(
    ("key_format", "allowed"), [("JSON_SR", True), ("AVRO", True), ("KAFKA", False), ("JSON", False)]
)
def test_a_key_join_of_windows_of_other_sizes_needs_a_schema_registry_key_format(
    key_format: str, allowed: bool
) -> None:
    # Another window size is another key format: only a schema-registry key format repartitions
    # both sides into the left's (the window start stays in the key), as ksqlDB does.
    fmt = Formats(key_format=key_format, value_format="JSON")
    store = InMemoryMetaStore()
    store.put(source("HOP", "STREAM", "ID INT KEY, V INT", fmt=fmt,
                     window=WindowInfo(type="HOPPING", size_ms=5000)))
    store.put(source("TUMB2", "STREAM", "ID INT KEY, V INT", fmt=fmt, window=WindowInfo(type="TUMBLING", size_ms=2000)))
    on_key = "SELECT * FROM HOP H JOIN TUMB2 T WITHIN 1 MINUTE ON H.ID = T.ID;"
    if allowed:
        assert isinstance(analyze(on_key, store).node, JoinNode)
    else:
        with pytest.raises(AnalysisError, match="Implicit repartitioning of windowed sources"):
            analyze(on_key, store)
    with pytest.raises(AnalysisError, match="Implicit repartitioning of windowed sources"):
        analyze("SELECT * FROM HOP H JOIN TUMB2 T WITHIN 1 MINUTE ON H.ID = T.V;", store)
