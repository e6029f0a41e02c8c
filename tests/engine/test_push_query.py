"""Push queries on a real broker: rows as they arrive, from the end or the beginning, LIMIT, tombstones."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from engine.facade.engine import KsqlEngine
from engine.hosting.application import KafkaTopics, StreamingApplication
from engine.hosting.push_query import PushQuery, PushRow, json_value
from engine.kafka import ProducerRecord, TopicAdmin, produce
from engine.plan import types as T


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _produce(bootstrap: str, topic: str, records: Sequence[tuple[str, Any, int]]) -> None:
    produce(bootstrap, topic, [
        ProducerRecord(key=key.encode(), value=None if value is None else json.dumps(value).encode(), timestamp=ts)
        for key, value, ts in records
    ])


def _engine(bootstrap: str, sql: str) -> KsqlEngine:
    engine = KsqlEngine(topics=KafkaTopics(bootstrap))
    engine.execute_sql(sql)
    return engine


@pytest.mark.usefixtures("spark")
def test_a_push_query_reads_from_the_end_by_default_and_from_the_beginning_on_request(kafka_broker: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = _topic("orders")
    TopicAdmin(bootstrap).create_topic(topic, 1)
    engine = _engine(bootstrap, f"""
        CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');
    """)
    _produce(bootstrap, topic, [("o1", {"ITEM": "a", "QTY": 1}, 1_000), ("o2", {"ITEM": "b", "QTY": 2}, 1_001)])
    sql = "SELECT QTY * 10 AS Q, ITEM, ID FROM ORDERS WHERE QTY < 9 EMIT CHANGES LIMIT 2;"

    latest = PushQuery(engine, bootstrap, sql)
    assert str(latest.schema) == "`Q` INTEGER, `ITEM` STRING, `ID` STRING"
    with latest:
        checkpoint = latest._checkpoint
        assert checkpoint is not None and checkpoint.is_dir()
        _produce(bootstrap, topic, [
            ("o3", {"ITEM": "c", "QTY": 9}, 1_002),  # filtered out
            ("o4", {"ITEM": "d", "QTY": 4}, 1_003),
            ("o5", {"ITEM": "e", "QTY": 5}, 1_004),
            ("o6", {"ITEM": "f", "QTY": 6}, 1_005),  # past the limit
        ])
        rows = list(latest.rows())
        assert latest.limit_reached
    assert rows == [PushRow((40, "d", "o4")), PushRow((50, "e", "o5"))]
    assert not checkpoint.exists()  # the checkpoint went with the query
    assert latest.query_id not in {q.name for q in _active_queries()}

    earliest = PushQuery(engine, bootstrap, sql.replace("LIMIT 2", "LIMIT 3"), properties={"auto.offset.reset": "earliest"})
    with earliest:
        rows = list(earliest.rows())
    assert rows == [PushRow((10, "a", "o1")), PushRow((20, "b", "o2")), PushRow((40, "d", "o4"))]


def _active_queries() -> list[Any]:
    """The streaming queries running on the shared session and on the push queries' sessions."""
    from engine.runtime import session

    sessions = [session.get_spark(), *session._derived.values()]
    return [q for spark in sessions for q in spark.streams.active]


@pytest.mark.usefixtures("spark")
def test_a_push_query_starts_while_another_query_start_holds_the_applications_lock(
        kafka_broker: Any, tmp_path: Path) -> None:
    # Starts used to take the application's lock (the shared session's shuffle partition count
    # was set around each start), so a push query waited for every other start in the process.
    import threading

    from engine.runtime.session import get_spark

    bootstrap = kafka_broker.bootstrap_servers
    topic = _topic("parallel")
    TopicAdmin(bootstrap).create_topic(topic, 3)
    app = StreamingApplication(bootstrap, tmp_path / "state", read_only=True)
    app.engine.execute_sql(f"CREATE STREAM P (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
    shared = get_spark().conf.get("spark.sql.shuffle.partitions")
    query = PushQuery.on_application(app, "SELECT ID, N FROM P EMIT CHANGES;")
    started = threading.Event()

    def start() -> None:
        query.start(timeout=120)
        started.set()

    with app._lock:
        starter = threading.Thread(target=start, daemon=True)
        starter.start()
        assert started.wait(timeout=240), "the push query waited for the application's lock"
    try:
        handle = query._handle
        assert handle is not None and handle.isActive
        # one task per partition, on the query's own session
        assert handle._jsq.sparkSession().conf().get("spark.sql.shuffle.partitions") == "3"
        assert get_spark().conf.get("spark.sql.shuffle.partitions") == shared  # the shared session untouched
        assert query.query_id in {q.name for q in _active_queries()}
    finally:
        query.close()
    assert query.query_id not in {q.name for q in _active_queries()}


@pytest.mark.usefixtures("spark")
def test_a_grouped_push_query_shows_each_update_of_the_table(kafka_broker: Any) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = _topic("clicks")
    TopicAdmin(bootstrap).create_topic(topic, 1)
    engine = _engine(bootstrap, f"""
        CREATE STREAM CLICKS (USER STRING KEY, PAGE STRING) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');
    """)
    _produce(bootstrap, topic, [(user, {"PAGE": page}, 1_000 + i) for i, (user, page) in enumerate(
        [("u1", "home"), ("u2", "home"), ("u1", "cart"), ("u1", "home")]
    )])
    query = PushQuery(
        engine, bootstrap, "SELECT PAGE, COUNT(*) AS N FROM CLICKS GROUP BY PAGE EMIT CHANGES LIMIT 4;",
        properties={"auto.offset.reset": "earliest"},
    )
    assert str(query.schema) == "`PAGE` STRING, `N` BIGINT"
    with query:
        rows = list(query.rows())
    assert rows == [PushRow(("home", 1)), PushRow(("home", 2)), PushRow(("cart", 1)), PushRow(("home", 3))]


@pytest.mark.usefixtures("spark")
def test_a_deleted_table_row_arrives_as_a_tombstone_showing_only_its_key(kafka_broker: Any, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = _topic("users")
    TopicAdmin(bootstrap).create_topic(topic, 1)
    app = StreamingApplication(bootstrap, tmp_path / "state")  # an in-process application's sources
    app.submit(f"CREATE TABLE USERS (ID STRING PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
    _produce(bootstrap, topic, [("u1", {"NAME": "ann"}, 1_000), ("u1", None, 1_001), ("u2", {"NAME": "bob"}, 1_002)])
    query = PushQuery.on_application(
        app, "SELECT NAME, ID FROM USERS EMIT CHANGES LIMIT 3;", properties={"auto.offset.reset": "earliest"}
    )
    with query:
        rows = list(query.rows())
    assert rows == [PushRow(("ann", "u1")), PushRow((None, "u1"), tombstone=True), PushRow(("bob", "u2"))]


@pytest.mark.usefixtures("spark")
def test_a_windowed_table_s_rows_and_deletions_show_their_window_bounds(kafka_broker: Any, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = _topic("scores")
    TopicAdmin(bootstrap).create_topic(topic, 1)
    app = StreamingApplication(bootstrap, tmp_path / "state")
    app.submit(f"CREATE STREAM SCORES (PLAYER STRING KEY, POINTS INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
    # 8 passes HAVING, 8 - 9 misses it (a deletion of that window's row), 8 - 9 + 7 passes again.
    _produce(bootstrap, topic, [("p1", {"POINTS": 8}, 20_001), ("p1", {"POINTS": -9}, 20_002), ("p1", {"POINTS": 7}, 20_003)])
    query = PushQuery.on_application(
        app,
        "SELECT WINDOWSTART AS FROM_MS, PLAYER, SUM(POINTS) AS TOTAL, WINDOWEND FROM SCORES "
        "WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY PLAYER HAVING SUM(POINTS) > 5 EMIT CHANGES LIMIT 3;",
        properties={"auto.offset.reset": "earliest"},
    )
    with query:
        rows = list(query.rows())
    assert rows == [
        PushRow((20_000, "p1", 8, 30_000)),
        PushRow((20_000, "p1", None, 30_000), tombstone=True),
        PushRow((20_000, "p1", 6, 30_000)),
    ]


def test_row_values_take_ksqldb_rest_json_forms() -> None:
    struct = T.Struct((T.Field("AT", T.TIMESTAMP), T.Field("RAW", T.BYTES)))
    at = dt.datetime(2021, 3, 4, 12, 34, 56, 789_000)
    assert json_value({"AT": at, "RAW": b"\x01"}, struct) == {"AT": "2021-03-04T12:34:56.789", "RAW": "AQ=="}
    assert json_value([dt.date(2021, 3, 4)], T.Array(T.DATE)) == ["2021-03-04"]
    assert json_value({"k": dt.time(1, 2, 3)}, T.Map(T.STRING, T.TIME)) == {"k": "01:02:03"}
    assert json_value(decimal.Decimal("1.50"), T.Decimal(4, 2)) == decimal.Decimal("1.50")
    assert json_value(float("nan"), T.DOUBLE) == "NaN"
    assert json_value(None, T.STRING) is None


@pytest.mark.usefixtures("spark")
def test_a_table_row_that_misses_the_where_shows_only_as_the_deletion_of_a_row_it_showed(
    kafka_broker: Any, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = _topic("stock")
    TopicAdmin(bootstrap).create_topic(topic, 1)
    app = StreamingApplication(bootstrap, tmp_path / "state")
    app.submit(f"CREATE TABLE STOCK (ID STRING PRIMARY KEY, QTY INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
    # s1 never matches: nothing; s2 matches, then misses: its row, then its deletion.
    _produce(bootstrap, topic, [("s1", {"QTY": 1}, 1_000), ("s2", {"QTY": 7}, 1_001), ("s2", {"QTY": 2}, 1_002),
                                ("s3", {"QTY": 9}, 1_003)])
    query = PushQuery.on_application(
        app, "SELECT ID, QTY FROM STOCK WHERE QTY > 5 EMIT CHANGES LIMIT 3;", properties={"auto.offset.reset": "earliest"}
    )
    with query:
        rows = list(query.rows())
    assert rows == [PushRow(("s2", 7)), PushRow(("s2", None), tombstone=True), PushRow(("s3", 9))]


class _Batch:
    """A micro-batch as the foreachBatch writer sees it: (input order, pickled row) records."""

    def __init__(self, rows: Sequence[tuple[tuple[Any, ...], bool]]) -> None:
        import pickle

        self.records = [([i], pickle.dumps((list(columns), tombstone))) for i, (columns, tombstone) in enumerate(rows)]

    def collect(self) -> list[Any]:
        return self.records


@pytest.mark.parametrize(("skip", "expected"), [
    (False, [PushRow(("a", 1)), PushRow(("a", None), True)]),
    (True, [PushRow(("a", 1)), PushRow(("b", 1))]),  # the deletion is no row and counts for no LIMIT
])
def test_a_scalable_push_query_leaves_table_deletions_out(skip: bool, expected: list[PushRow]) -> None:
    engine = KsqlEngine()
    engine.execute_sql(
        "CREATE STREAM S (ID STRING KEY, V INT) WITH (kafka_topic='s', value_format='JSON', partitions=1);"
        "CREATE TABLE T AS SELECT ID, COUNT(*) AS N FROM S GROUP BY ID;"
    )
    query = PushQuery(engine, "127.0.0.1:1", "SELECT * FROM T EMIT CHANGES LIMIT 2;")
    query.skip_tombstones = skip
    query._deliver(_Batch([(("a", 1), False), (("a", None), True), (("b", 1), False)]), 0)
    assert [query._rows.get_nowait() for _ in range(query._rows.qsize())] == expected
