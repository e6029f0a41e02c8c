"""Pull queries: planning and refusals (no broker), then the service over real topics (no Spark).

The service runs without persistent queries: a CREATE TABLE AS SELECT registers its table
and creates its sink topic, and the tests write that changelog themselves, as the query
would, so the materialization is read from a real broker topic.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.facade.engine import KsqlEngine
from engine.kafka.produce import ProducerRecord, produce
from engine.parser import parse
from engine.serde.windowed import encode_session_window_key, encode_time_window_key
from engine.server.errors import ServiceError
from engine.server.pull import PullQueryError, plan_pull_query
from engine.server.service import KsqlService

# ---------------------------------------------------------------------------- planning


@pytest.fixture(scope="module")
def local() -> KsqlEngine:
    engine = KsqlEngine()
    engine.execute_sql(
        "CREATE STREAM S (ID STRING KEY, V INT) WITH (kafka_topic='s', value_format='JSON', partitions=1);"
        "CREATE TABLE T AS SELECT ID, COUNT(*) AS C, SUM(V) AS SV FROM S GROUP BY ID;"
        "CREATE TABLE W AS SELECT ID, COUNT(*) AS C FROM S WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY ID;"
        "CREATE TABLE U (ID INT PRIMARY KEY, N STRING) WITH (kafka_topic='u', value_format='JSON', partitions=1);"
        "CREATE TABLE BYV AS SELECT V, COUNT(*) AS C FROM S GROUP BY V;"
    )
    return engine


def _plan(engine: KsqlEngine, text: str, **properties: Any) -> Any:
    [parsed] = parse(text)
    return plan_pull_query(engine.metastore, parsed.statement, parsed.text, properties)


def test_key_equality_and_in_are_lookups_other_filters_scan(local) -> None:
    assert _plan(local, "SELECT * FROM T WHERE ID='a';").lookup_keys == [("a",)]
    assert _plan(local, "SELECT * FROM T WHERE 'b' = ID AND C > 1;").lookup_keys == [("b",)]
    assert _plan(local, "SELECT * FROM T WHERE ID IN ('x', 'y');").lookup_keys == [("x",), ("y",)]
    # ksqlDB's extraction: the DNF's disjuncts (ID='x' AND ID='y') OR (ID='y' AND ID='y') each look
    # up their first equality; the WHERE then keeps the rows that match it.
    assert _plan(local, "SELECT * FROM T WHERE ID IN ('x', 'y') AND ID = 'y';").lookup_keys == [("x",), ("y",)]
    assert _plan(local, "SELECT * FROM T WHERE ID='a' OR ID='b';").lookup_keys == [("a",), ("b",)]
    assert _plan(local, "SELECT * FROM T WHERE (ID='a' AND C > 1) OR ID='b';").lookup_keys == [("a",), ("b",)]
    assert _plan(local, "SELECT * FROM T WHERE ID='a' OR C > 1;").lookup_keys is None
    assert _plan(local, "SELECT * FROM T WHERE ID > 'a';").lookup_keys is None
    assert _plan(local, "SELECT * FROM T;").lookup_keys is None


def test_header_marks_table_keys_and_window_bounds(local) -> None:
    assert ", ".join(map(str, _plan(local, "SELECT * FROM T;").columns)) == "`ID` STRING KEY, `C` BIGINT, `SV` INTEGER"
    assert ", ".join(map(str, _plan(local, "SELECT ID, C * 2 AS D FROM T;").columns)) == "`ID` STRING KEY, `D` BIGINT"
    windowed = _plan(local, "SELECT * FROM W WHERE ID='a' AND WINDOWSTART >= 10;")
    assert ", ".join(map(str, windowed.columns)) == (
        "`ID` STRING KEY, `WINDOWSTART` BIGINT KEY, `WINDOWEND` BIGINT KEY, `C` BIGINT"
    )
    assert ", ".join(map(str, _plan(local, "SELECT ID, ROWTIME FROM S;").columns)) == "`ID` STRING, `ROWTIME` BIGINT"


def test_a_stream_pull_query_flat_maps_its_table_functions(local) -> None:
    """As ksqlDB's FlatMapNode: a row per element of the longest result, the shorter ones NULL."""
    from engine.server.pull import _flat_map

    plan = _plan(local, "SELECT ID, EXPLODE(ARRAY[V, V * 10]) AS E, EXPLODE(ARRAY[1]) AS ONE FROM S WHERE V > 0;")
    assert ", ".join(map(str, plan.columns)) == "`ID` STRING, `E` INTEGER, `ONE` INTEGER"
    rows = [r for r in _flat_map({"ID": "a", "V": 2}, plan.flat_maps)]
    assert [tuple(fn(r) for fn in plan.projections) for r in rows] == [("a", 2, 1), ("a", 20, None)]
    assert _flat_map({"ID": "b", "V": 1}, ()) == [{"ID": "b", "V": 1}]


def test_the_header_marks_key_by_the_result_columns_name(local) -> None:
    """ksqlDB's QueryProjectNode: KEY goes with a key column's or a window bound's name."""
    def header(text: str) -> str:
        return ", ".join(map(str, _plan(local, text).columns))

    assert header("SELECT ID AS X, C FROM T;") == "`X` STRING, `C` BIGINT"
    assert header("SELECT UCASE(ID) AS ID, C FROM T;") == "`ID` STRING KEY, `C` BIGINT"
    assert header("SELECT WINDOWSTART AS WS, WINDOWEND, ID FROM W WHERE ID = 'a';") == (
        "`WS` BIGINT, `WINDOWEND` BIGINT KEY, `ID` STRING KEY"
    )


@pytest.mark.parametrize(
    ("text", "properties", "message"),
    [
        ("SELECT * FROM U;", {}, "The `U` table isn't queryable. To derive a queryable table, you can do "
                                 "'CREATE TABLE QUERYABLE_U AS SELECT * FROM U'."),
        ("SELECT ID, COUNT(*) FROM S GROUP BY ID;", {}, "Pull queries don't support GROUP BY clauses."),
        ("SELECT * FROM S WINDOW TUMBLING (SIZE 1 SECOND);", {}, "Pull queries don't support WINDOW clauses."),
        ("SELECT * FROM S JOIN T ON S.ID = T.ID;", {}, "Pull queries don't support JOIN clauses."),
        ("SELECT *, ROWOFFSET FROM T;", {}, "Pull queries don't support the following columns in SELECT clauses: `ROWOFFSET`"),
        ("SELECT * FROM S WHERE ROWPARTITION = 1;", {}, "following columns in WHERE clauses: `ROWPARTITION`"),
        ("SELECT * FROM T WHERE ID = 11;", {}, "Error in WHERE expression: Cannot compare ID (STRING) to 11 "
                                               "(INTEGER) with EQUAL.\nStatement: (ID = 11)"),
        ("SELECT * FROM T WHERE C > 1;", {"ksql.query.pull.table.scan.enabled": False},
         "WHERE clause missing key column for disjunct: (C > 1).  See https://cnfl.io/queries for more info.\n"
         "Add EMIT CHANGES if you intended to issue a push query.\nPull queries require a WHERE clause that:"),
        ("SELECT * FROM T;", {"ksql.query.pull.table.scan.enabled": False},
         "Missing WHERE clause.  See https://cnfl.io/queries for more info.\nAdd EMIT CHANGES"),
        ("SELECT * FROM T WHERE ID='a' OR C > 1;", {"ksql.query.pull.table.scan.enabled": False},
         "WHERE clause missing key column for disjunct: (C > 1)"),
        ("SELECT * FROM T WHERE ID > 'a' AND ID < 'c';", {"ksql.query.pull.table.scan.enabled": False},
         "A comparison condition on the key column cannot be combined with other comparisons such as an IN "
         "predicate.  See https://cnfl.io/queries"),
        ("SELECT * FROM T WHERE ID BETWEEN 'a' AND 'c';", {"ksql.query.pull.table.scan.enabled": False},
         "A comparison condition on the key column cannot be combined with other comparisons"),
        ("SELECT * FROM T WHERE ID <> 'a';", {"ksql.query.pull.table.scan.enabled": False},
         "Bound on key columns '[`ID` STRING KEY]' must currently be '='"),
        ("SELECT * FROM T WHERE ID > 'a';", {"ksql.query.pull.table.scan.enabled": False,
                                              "ksql.query.pull.range.scan.enabled": False},
         "Query requires table scan to be enabled."),
        ("SELECT * FROM BYV WHERE V > 1;", {"ksql.query.pull.table.scan.enabled": False},
         "Query requires table scan to be enabled."),
        ("SELECT ID, COUNT(*) FROM S JOIN T ON S.ID = T.ID GROUP BY ID;", {}, "Pull queries don't support JOIN clauses."),
        # an aggregate without GROUP BY: ksqlDB's analysis gives it a GROUP BY, which is refused in its turn
        ("SELECT COUNT(*) FROM T WHERE ID = 'a';", {}, "Pull queries don't support GROUP BY clauses. "
                                                      "See https://cnfl.io/queries for more info.\nAdd EMIT CHANGES"),
        ("SELECT ID, COUNT(N) AS C FROM U WHERE ID = 1;", {}, "Pull queries don't support GROUP BY clauses."),  # U is no queryable table: checked later
        ("SELECT COUNT(*) FROM S WINDOW TUMBLING (SIZE 1 SECOND);", {}, "Pull queries don't support WINDOW clauses."),
        ("SELECT * FROM S LIMIT -1;", {}, "Pull queries don't support negative integers in the LIMIT clause. "
                                          "See https://cnfl.io/queries for more info.\nAdd EMIT CHANGES"),
        ("SELECT ROWOFFSET FROM S;", {}, "Pull queries don't support the following columns in SELECT clauses: "
                                         "`ROWOFFSET`\n See https://cnfl.io/queries for more info.\nAdd EMIT CHANGES"),
        ("SELECT * FROM S LIMIT 2;", {"ksql.query.pull.limit.clause.enabled": "false"},
         "LIMIT clause in pull queries is currently disabled."),
        ("SELECT * FROM NOPE;", {}, "NOPE does not exist."),
        # a source without windows has no window bounds, a pull query no WINDOW clause to make them
        ("SELECT * FROM T WHERE ID = 'a' AND WINDOWSTART > 1;", {}, "WHERE column 'WINDOWSTART' cannot be resolved."),
        ("SELECT * FROM S WHERE WINDOWEND > 1;", {}, "WHERE column 'WINDOWEND' cannot be resolved."),
    ],
)
def test_refusals_use_ksqldb_messages(local, text, properties, message) -> None:
    with pytest.raises(PullQueryError) as refused:
        _plan(local, text, **properties)
    assert message in str(refused.value)


def test_pull_queries_on_streams_can_be_turned_off(local) -> None:
    assert _plan(local, "SELECT * FROM S;").lookup_keys is None  # served by default
    with pytest.raises(PullQueryError) as refused:
        _plan(local, "SELECT * FROM S;", **{"ksql.query.pull.stream.enabled": "false"})
    assert str(refused.value).startswith(
        "Pull queries on streams are disabled. To create a push query on the stream, add EMIT CHANGES to the end. "
        "To enable pull queries on streams, set the ksql.query.pull.stream.enabled config to 'true'.")
    assert _plan(local, "SELECT * FROM T;", **{"ksql.query.pull.stream.enabled": False}).lookup_keys is None


def test_a_range_on_a_string_key_is_served_without_table_scans(local) -> None:
    off = {"ksql.query.pull.table.scan.enabled": False}
    for text in ("SELECT * FROM T WHERE ID > 'a';", "SELECT * FROM T WHERE 'm' >= ID AND C > 1;"):
        plan = _plan(local, text, **off)
        assert plan.lookup_keys is None and plan.predicate is not None


def test_a_key_lookup_still_works_with_table_scans_disabled(local) -> None:
    plan = _plan(local, "SELECT * FROM T WHERE ID IN ('a', 'b');", **{"ksql.query.pull.table.scan.enabled": "false"})
    assert plan.lookup_keys == [("a",), ("b",)]


# ---------------------------------------------------------------------------- the service over real topics


@pytest.fixture(scope="module")
def service(kafka_broker, tmp_path_factory) -> Iterator[KsqlService]:
    service = KsqlService(
        kafka_broker.bootstrap_servers, f"pull_{uuid.uuid4().hex[:8]}", Path(tmp_path_factory.mktemp("state")),
        run_queries=False, command_timeout=20.0,
    )
    service.start(timeout=30)
    yield service
    service.close()


def _json(value: Any) -> bytes:
    return json.dumps(value).encode()


def _eventually(fn: Callable[[], Any], expected: Any, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got == expected or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def _rows(service: KsqlService, text: str, **properties: Any) -> list[list[Any]]:
    result = service.pull_query(text, properties)
    assert result is not None
    return sorted(result.json_rows(), key=repr)


def test_materialized_table_lookups_scans_updates_and_tombstones(service, kafka_broker) -> None:
    name = f"P{uuid.uuid4().hex[:6]}".upper()
    service.execute(
        f"CREATE STREAM {name}_IN (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}_in', VALUE_FORMAT='JSON', PARTITIONS=2);"
        f"CREATE TABLE {name} AS SELECT ID, COUNT(*) AS C, SUM(V) AS SV FROM {name}_IN GROUP BY ID;"
    )
    sink = service.engine.metastore.get(name).topic  # the CTAS's sink: its changelog
    produce(kafka_broker.bootstrap_servers, sink, [
        ProducerRecord(key=b"a", value=_json({"C": 1, "SV": 10}), timestamp=100, partition=0),
        ProducerRecord(key=b"b", value=_json({"C": 1, "SV": 5}), timestamp=101, partition=1),
        ProducerRecord(key=b"c", value=_json({"C": 3, "SV": 1}), timestamp=102, partition=0),
        ProducerRecord(key=b"a", value=_json({"C": 2, "SV": 30}), timestamp=103, partition=0),  # the latest row wins
    ])
    # The first pull query reads the changelog up to its end before answering.
    assert _rows(service, f"SELECT * FROM {name} WHERE ID='a';") == [["a", 2, 30]]
    result = service.pull_query(f"SELECT ID, SV * 2 AS D, ROWTIME FROM {name} WHERE ID IN ('b', 'c', 'zz');")
    assert result is not None and result.schema_text == "`ID` STRING KEY, `D` INTEGER, `ROWTIME` BIGINT"
    assert sorted(result.json_rows()) == [["b", 10, 101], ["c", 2, 102]]
    assert result.final_message is None
    assert _rows(service, f"SELECT ID FROM {name} WHERE C >= 2;") == [["a"], ["c"]]
    assert len(_rows(service, f"SELECT * FROM {name};")) == 3
    assert len(_rows(service, f"SELECT * FROM {name} LIMIT 2;")) == 2
    assert _rows(service, f"SELECT * FROM {name} LIMIT 0;") == []

    # Kept up to date: a tombstone deletes its key, a new key appears.
    produce(kafka_broker.bootstrap_servers, sink, [
        ProducerRecord(key=b"c", value=None, timestamp=104, partition=0),
        ProducerRecord(key=b"d", value=_json({"C": 1, "SV": 7}), timestamp=105, partition=1),
    ])
    assert _eventually(lambda: _rows(service, f"SELECT ID FROM {name};"), [["a"], ["b"], ["d"]]) == [["a"], ["b"], ["d"]]
    assert _rows(service, f"SELECT * FROM {name} WHERE ID='c';") == []

    with pytest.raises(ServiceError) as scan_off:
        service.pull_query(f"SELECT * FROM {name} WHERE C > 0;", {"ksql.query.pull.table.scan.enabled": False})
    assert scan_off.value.http_status == 400 and "table scan" in scan_off.value.message
    with pytest.raises(ServiceError) as source_table:
        service.pull_query(f"SELECT * FROM {name}_IN GROUP BY ID;")
    assert "GROUP BY" in source_table.value.message
    # A push query is not answered here.
    assert service.pull_query(f"SELECT * FROM {name} EMIT CHANGES;") is None


def test_windowed_tables_keep_one_row_per_window_and_filter_on_bounds(service, kafka_broker) -> None:
    name = f"W{uuid.uuid4().hex[:6]}".upper()
    service.execute(
        f"CREATE STREAM {name}_IN (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}_in', VALUE_FORMAT='JSON', PARTITIONS=1);"
        f"CREATE TABLE {name} AS SELECT ID, COUNT(*) AS C FROM {name}_IN WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY ID;"
        f"CREATE TABLE {name}_S AS SELECT ID, COUNT(*) AS C FROM {name}_IN WINDOW SESSION (5 SECONDS) GROUP BY ID;"
    )
    produce(kafka_broker.bootstrap_servers, service.engine.metastore.get(name).topic, [
        ProducerRecord(key=encode_time_window_key(b"k", 0), value=_json({"C": 1}), timestamp=1),
        ProducerRecord(key=encode_time_window_key(b"k", 10_000), value=_json({"C": 2}), timestamp=12_000),
        ProducerRecord(key=encode_time_window_key(b"j", 10_000), value=_json({"C": 5}), timestamp=13_000),
        ProducerRecord(key=encode_time_window_key(b"k", 0), value=_json({"C": 4}), timestamp=9_000),
    ])
    assert _rows(service, f"SELECT * FROM {name} WHERE ID='k';") == [
        ["k", 0, 10_000, 4], ["k", 10_000, 20_000, 2]
    ]
    assert _rows(service, f"SELECT ID, WINDOWSTART, ROWTIME, C FROM {name} WHERE 5000 <= WINDOWSTART AND WINDOWEND <= 20000;") == [
        ["j", 10_000, 13_000, 5], ["k", 10_000, 12_000, 2]
    ]
    produce(kafka_broker.bootstrap_servers, service.engine.metastore.get(f"{name}_S").topic, [
        ProducerRecord(key=encode_session_window_key(b"k", 100, 900), value=_json({"C": 2}), timestamp=900),
    ])
    assert _rows(service, f"SELECT * FROM {name}_S WHERE ID='k' AND WINDOWSTART >= 100;") == [["k", 100, 900, 2]]


def test_stream_pull_queries_read_the_topic_to_its_end_and_finish(service, kafka_broker) -> None:
    name = f"S{uuid.uuid4().hex[:6]}".upper()
    service.execute(
        f"CREATE STREAM {name} (ID INT KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);"
    )
    empty = service.pull_query(f"SELECT * FROM {name};")
    assert empty is not None and empty.rows == () and empty.final_message == "Query Completed"
    produce(kafka_broker.bootstrap_servers, name.lower(), [
        ProducerRecord(key=b"\x00\x00\x00\x01", value=_json({"V": i}), timestamp=10 + i) for i in range(5)
    ] + [ProducerRecord(key=b"\x00\x00\x00\x02", value=None, timestamp=20)])  # a null value is no stream row
    result = service.pull_query(f"SELECT ID, V * 2 AS D FROM {name} WHERE V >= 1 AND V < 4;")
    assert result is not None and result.schema_text == "`ID` INTEGER, `D` INTEGER"
    assert [list(r) for r in result.rows] == [[1, 2], [1, 4], [1, 6]]
    assert result.final_message == "Query Completed"
    limited = service.pull_query(f"SELECT V FROM {name} LIMIT 2;")
    assert limited is not None and [list(r) for r in limited.rows] == [[0], [1]]
    assert limited.final_message == "Limit Reached"
    # table functions: a row per element of the longest array, LIMIT counting the rows made
    exploded = service.pull_query(f"SELECT V, EXPLODE(ARRAY[V, V * 10]) AS E FROM {name} WHERE V >= 3 LIMIT 3;")
    assert exploded is not None and exploded.schema_text == "`V` INTEGER, `E` INTEGER"
    assert [list(r) for r in exploded.rows] == [[3, 3], [3, 30], [4, 4]]
    assert exploded.final_message == "Limit Reached"
    with pytest.raises(ServiceError) as refused:
        service.pull_query(f"SELECT *, ROWOFFSET FROM {name};")
    assert refused.value.message.startswith("Pull queries don't support the following columns in SELECT clauses")


def test_a_plain_create_table_is_not_queryable_but_a_source_table_is(service, kafka_broker) -> None:
    name = f"T{uuid.uuid4().hex[:6]}".upper()
    service.execute(
        f"CREATE TABLE {name} (ID STRING PRIMARY KEY, N STRING) WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON', PARTITIONS=1);"
        f"CREATE SOURCE TABLE {name}_SRC (ID STRING PRIMARY KEY, N STRING) WITH (KAFKA_TOPIC='{name.lower()}', VALUE_FORMAT='JSON');"
    )
    with pytest.raises(ServiceError) as refused:
        service.pull_query(f"SELECT * FROM {name};")
    assert f"The `{name}` table isn't queryable." in refused.value.message
    produce(kafka_broker.bootstrap_servers, name.lower(), [
        ProducerRecord(key=key, value=_json({"N": key.decode()}), timestamp=5) for key in (b"x", b"b", b"m")
    ])
    assert _rows(service, f"SELECT * FROM {name}_SRC;") == [["b", "b"], ["m", "m"], ["x", "x"]]
    # A scan answers in key byte order, as ksqlDB's state store does, so LIMIT keeps the first keys.
    limited = service.pull_query(f"SELECT ID FROM {name}_SRC LIMIT 2;")
    assert limited is not None and limited.json_rows() == [["b"], ["m"]]


# ---------------------------------------------------------------------------- HTTP


def test_query_and_query_stream_answer_pull_queries_in_ksqldb_shapes(service, kafka_broker) -> None:
    from starlette.testclient import TestClient

    from engine.server.app import create_app

    name = f"H{uuid.uuid4().hex[:6]}".upper()
    service.execute(
        f"CREATE STREAM {name}_IN (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{name.lower()}_in', VALUE_FORMAT='JSON', PARTITIONS=1);"
        f"CREATE TABLE {name} AS SELECT ID, COUNT(*) AS C FROM {name}_IN GROUP BY ID;"
    )
    produce(kafka_broker.bootstrap_servers, service.engine.metastore.get(name).topic, [
        ProducerRecord(key=b"a", value=_json({"C": 3}), timestamp=7),
    ])
    with TestClient(create_app(service), raise_server_exceptions=False) as client:
        answer = client.post("/query", json={"ksql": f"SELECT * FROM {name} WHERE ID='a';", "streamsProperties": {}})
        assert answer.status_code == 200
        header, row = answer.json()
        assert header["header"]["schema"] == "`ID` STRING KEY, `C` BIGINT" and header["header"]["queryId"]
        assert row == {"row": {"columns": ["a", 3]}}

        delimited = client.post("/query-stream", json={"sql": f"SELECT C FROM {name} WHERE ID='a';"})
        assert delimited.headers["content-type"].startswith("application/vnd.ksqlapi.delimited.v1")
        metadata, *rows = [json.loads(line) for line in delimited.text.splitlines()]
        assert metadata["columnNames"] == ["C"] and metadata["columnTypes"] == ["BIGINT"] and rows == [[3]]

        array = client.post("/query-stream", json={"sql": f"SELECT * FROM {name}_IN;"},
                            headers={"Accept": "application/json"})
        assert array.status_code == 200 and array.json()[0]["columnNames"] == ["ID", "V"]

        stream = client.post("/query", json={"ksql": f"SELECT * FROM {name}_IN LIMIT 0;"}).json()
        assert stream[-1] == {"finalMessage": "Limit Reached"}

        refused = client.post("/query", json={"ksql": f"SELECT * FROM {name}_IN GROUP BY ID;"})
        assert refused.status_code == 400
        body = refused.json()
        assert body["@type"] == "statement_error" and body["error_code"] == 40001
        assert body["message"].startswith("Pull queries don't support GROUP BY clauses.")
        assert body["statementText"] == f"SELECT * FROM {name}_IN GROUP BY ID;"


def test_materialization_keeps_rows_of_unhashable_keys_and_tombstones_them() -> None:
    from engine.kafka.consume import ConsumedRecord
    from engine.server.pull import Materialization

    engine = KsqlEngine()
    engine.execute_sql(
        "CREATE SOURCE TABLE A (ID ARRAY<INT> PRIMARY KEY, N STRING) "
        "WITH (kafka_topic='a', key_format='JSON', value_format='JSON', partitions=1);"
    )
    store = Materialization("127.0.0.1:1", engine.metastore.get("A"))  # not started: records applied by hand

    def record(offset: int, key: bytes, value: bytes | None) -> ConsumedRecord:
        return ConsumedRecord(topic="a", partition=0, offset=offset, timestamp=offset + 1, key=key, value=value)

    store.apply([record(0, b"[1,2]", b'{"N":"x"}'), record(1, b"[3]", b'{"N":"y"}'), record(2, b"[1,2]", b'{"N":"z"}')])
    assert [row["N"] for row in store.lookup([((1, 2),)])] == ["z"]
    store.apply([record(3, b"[1,2]", None), record(4, b"not json", b'{"N":"w"}')])  # a bad key is skipped
    assert [row["ID"] for row in store.scan()] == [[3]] and store.skipped == 1
