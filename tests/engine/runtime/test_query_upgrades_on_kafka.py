"""CREATE OR REPLACE on a broker: the replaced query keeps its id, its checkpoint's offsets
and its state, so each input record is processed once, by the version of the query that
ran when it was read (read back with a read_committed consumer)."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from engine.errors import UpgradeError
from engine.hosting.application import StreamingApplication
from engine.kafka.admin import TopicAdmin
from engine.kafka.consume import read_topic
from tests.engine.runtime.kafka_io import outputs, produce, run_until_caught_up, unique

pytestmark = [pytest.mark.usefixtures("spark"), pytest.mark.system]






def _orders(first: int, count: int) -> list[tuple[str, Any, int]]:
    return [(f"o{i}", {"ITEM": f"item{i % 7}", "QTY": i % 5}, 1_000 + i) for i in range(first, first + count)]


def test_a_changed_filter_and_projection_continue_from_the_old_querys_offsets(kafka_broker: Any, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = unique("orders"), unique("BIG")
    TopicAdmin(bootstrap).create_topic(source, 3)
    sql = f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE STREAM BIG WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, QTY FROM ORDERS WHERE QTY > 2;
    """
    replaced = sql + f"CREATE OR REPLACE STREAM BIG WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, QTY, QTY * 10 AS QTY10 FROM ORDERS WHERE QTY > 0;"
    first, second = _orders(0, 600), _orders(600, 600)
    produce(bootstrap, source, first)
    app = run_until_caught_up(bootstrap, tmp_path / "state", sql)
    assert [q.query_id for q in app.queries()] == ["CSAS_BIG_0"]
    produce(bootstrap, source, second)
    app = run_until_caught_up(bootstrap, tmp_path / "state", replaced)
    assert [q.query_id for q in app.queries()] == ["CSAS_BIG_0"]
    produce(bootstrap, source, _orders(1_200, 300))  # read by the new version after a restart
    run_until_caught_up(bootstrap, tmp_path / "state", replaced)

    expected = Counter(
        [(key, json.dumps({"QTY": v["QTY"]})) for key, v, _ in first if v["QTY"] > 2]
        + [(key, json.dumps({"QTY": v["QTY"], "QTY10": v["QTY"] * 10}))
           for key, v, _ in second + _orders(1_200, 300) if v["QTY"] > 0]
    )
    got = Counter((key, json.dumps(value)) for key, value, _ in outputs(bootstrap, sink))
    assert got - expected == Counter()  # nothing repeated, nothing from the wrong version
    assert expected - got == Counter()  # nothing lost
    assert sum(got.values()) == 240 + 480 + 240


def test_an_aggregate_keeps_its_state_across_a_new_filter_and_output_column(kafka_broker: Any, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = unique("orders"), unique("PER_ITEM")
    TopicAdmin(bootstrap).create_topic(source, 3)
    sql = f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sink}') AS
            SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS GROUP BY ITEM;
    """
    replaced = sql + (
        f"CREATE OR REPLACE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sink}') AS SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS TOTAL, "
        "SUM(QTY) * 2 AS TWICE FROM ORDERS WHERE QTY > 1 GROUP BY ITEM;"
    )
    first, second = _orders(0, 700), _orders(700, 700)
    produce(bootstrap, source, first)
    app = run_until_caught_up(bootstrap, tmp_path / "state", sql)
    produce(bootstrap, source, second)
    app = run_until_caught_up(bootstrap, tmp_path / "state", replaced)
    assert [q.query_id for q in app.queries()] == ["CTAS_PER_ITEM_0"]

    updates = outputs(bootstrap, sink)
    counted = [v for _, v, _ in first] + [v for _, v, _ in second if v["QTY"] > 1]
    assert len(updates) == len(counted)  # one update per record each version counts
    latest = {key: value for key, value, _ in updates}
    expected: dict[str, dict[str, int]] = {}
    for v in counted:
        row = expected.setdefault(v["ITEM"], {"N": 0, "TOTAL": 0})
        row["N"] += 1
        row["TOTAL"] += v["QTY"]
    assert latest == {item: {**row, "TWICE": row["TOTAL"] * 2} for item, row in expected.items()}


def test_a_refused_replacement_leaves_the_running_query_and_its_saved_statements(
    kafka_broker: Any, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = unique("orders"), unique("PER_ITEM")
    TopicAdmin(bootstrap).create_topic(source, 1)
    sql = f"""
        CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sink}') AS SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM;
    """
    app = StreamingApplication(bootstrap, tmp_path / "state")
    app.submit(sql)
    saved = [s.to_json() for s in app.saved]
    with pytest.raises(UpgradeError) as raised:
        app.submit(sql + f"CREATE OR REPLACE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sink}') AS "
                   "SELECT ITEM, COUNT(*) AS N FROM ORDERS WHERE QTY > 1 GROUP BY ITEM;")
    assert str(raised.value) == (
        "Query is not upgradeable. Plan step of type StreamAggregate must have matching columns not part of "
        "aggregate. Values differ: [ITEM] vs. [ITEM, QTY]"
    )
    assert [s.to_json() for s in app.saved] == saved
    app.stop()


def _await_records(bootstrap: str, topic: str, count: int, timeout: float = 300.0) -> list[tuple[str | None, Any, int]]:
    deadline = time.monotonic() + timeout
    while True:
        got = outputs(bootstrap, topic)
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(1.0)


def test_a_running_server_replaces_a_live_query_and_an_aggregate_in_place(
    kafka_broker: Any, tmp_path: Path
) -> None:
    """Through the service (the command topic): the old versions stop, the new ones start from
    their checkpoints while the server runs; one query each, under the same ids."""
    from engine.server.service import KsqlService

    bootstrap = kafka_broker.bootstrap_servers
    source, big, per_item = unique("orders"), unique("BIG"), unique("PER_ITEM")
    TopicAdmin(bootstrap).create_topic(source, 2)
    service = KsqlService(bootstrap, unique("upgrades"), tmp_path, command_timeout=120.0)
    service.start(timeout=120)
    try:
        earliest = {"auto.offset.reset": "earliest"}
        service.execute(f"CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) "
                        f"WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');")
        [first_big] = service.execute(f"CREATE STREAM BIG WITH (KAFKA_TOPIC='{big}') AS "
                                      "SELECT ID, QTY FROM ORDERS WHERE QTY > 2;", earliest)
        [first_items] = service.execute(f"CREATE TABLE PER_ITEM WITH (KAFKA_TOPIC='{per_item}') AS "
                                        "SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS GROUP BY ITEM;",
                                        earliest)
        first, second = _orders(0, 400), _orders(400, 400)
        produce(bootstrap, source, first)
        assert len(_await_records(bootstrap, big, 160)) == 160
        assert len(_await_records(bootstrap, per_item, 400)) == 400

        [second_big] = service.execute(f"CREATE OR REPLACE STREAM BIG WITH (KAFKA_TOPIC='{big}') AS "
                                       "SELECT ID, QTY, QTY * 10 AS QTY10 FROM ORDERS WHERE QTY > 0;", earliest)
        [second_items] = service.execute(
            f"CREATE OR REPLACE TABLE PER_ITEM WITH (KAFKA_TOPIC='{per_item}') AS SELECT ITEM, COUNT(*) AS N, "
            "SUM(QTY) AS TOTAL, SUM(QTY) * 2 AS TWICE FROM ORDERS WHERE QTY > 1 GROUP BY ITEM;", earliest)
        ids = [a["commandStatus"]["queryId"] for a in (first_big, first_items, second_big, second_items)]
        assert ids == ["CSAS_BIG_0", "CTAS_PER_ITEM_1", "CSAS_BIG_0", "CTAS_PER_ITEM_1"]
        [shown] = service.execute("SHOW QUERIES;")
        assert [(q["id"], q["state"]) for q in shown["queries"]] == [
            ("CSAS_BIG_0", "RUNNING"), ("CTAS_PER_ITEM_1", "RUNNING")]
        produce(bootstrap, source, second)

        counted = [v for _, v, _ in first] + [v for _, v, _ in second if v["QTY"] > 1]
        big_rows = _await_records(bootstrap, big, 160 + 320)
        item_rows = _await_records(bootstrap, per_item, len(counted))
        time.sleep(5)  # anything repeated would arrive now
        big_rows, item_rows = outputs(bootstrap, big), outputs(bootstrap, per_item)
    finally:
        service.close()

    expected = Counter(
        [(key, json.dumps({"QTY": v["QTY"]})) for key, v, _ in first if v["QTY"] > 2]
        + [(key, json.dumps({"QTY": v["QTY"], "QTY10": v["QTY"] * 10})) for key, v, _ in second if v["QTY"] > 0]
    )
    assert Counter((key, json.dumps(value)) for key, value, _ in big_rows) == expected
    assert len(item_rows) == len(counted)
    totals: dict[str, dict[str, int]] = {}
    for v in counted:
        row = totals.setdefault(v["ITEM"], {"N": 0, "TOTAL": 0})
        row["N"] += 1
        row["TOTAL"] += v["QTY"]
    latest = {key: value for key, value, _ in item_rows}
    assert latest == {item: {**row, "TWICE": row["TOTAL"] * 2} for item, row in totals.items()}


def test_a_having_that_moves_the_aggregate_to_another_state_operator_is_refused(
    kafka_broker: Any, tmp_path: Path
) -> None:
    """ksqlDB's rules allow any HAVING; one the native compiler cannot compile (ABS here) runs
    the aggregate on another Spark state operator, whose state the checkpoint does not hold."""
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = unique("orders"), unique("PER_ITEM")
    TopicAdmin(bootstrap).create_topic(source, 1)
    sql = f"""
        CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sink}') AS SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM;
    """
    app = StreamingApplication(bootstrap, tmp_path / "state")
    try:
        app.submit(sql)
        app.submit(sql + f"CREATE OR REPLACE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sink}') AS "
                   "SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM HAVING COUNT(*) > 1;")
        with pytest.raises(UpgradeError) as raised:
            app.submit(sql + f"CREATE OR REPLACE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sink}') AS "
                       "SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM HAVING COUNT(*) > 1;"
                       f"CREATE OR REPLACE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sink}') AS "
                       "SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM HAVING ABS(COUNT(*)) > 1;")
    finally:
        app.stop()
    assert str(raised.value) == (
        "Query is not upgradeable. Spark cannot carry the state of query CTAS_PER_ITEM_0 across: its checkpoint "
        "holds the stateful operators [Aggregate/Aggregate RunningAggregateTaskProcessor (state: groups "
        "MapState<g binary, b binary>)], the new plan builds [Aggregate/Aggregate KeyedTaskProcessor (state: "
        "groups MapState<g binary, b binary>, clock ValueState<b binary>, outer ValueState<b binary>)]."
    )
    assert len(app.saved) == 3  # the first replacement applied, the refused one not


def test_past_ksqldb_a_windowed_count_keeps_its_windows_across_a_new_filter(kafka_broker: Any, tmp_path: Path) -> None:
    """kspark.query.upgrades.beyond.ksqldb=true: ksqlDB refuses any upgrade of a windowed
    aggregate; the opt-in lets its filter change (on a column it did not read) and the
    counts of every window go on from the checkpoint's state."""
    from engine.serde.windowed import decode_time_window_key

    bootstrap = kafka_broker.bootstrap_servers
    source, sink = unique("orders"), unique("PER_WINDOW")
    TopicAdmin(bootstrap).create_topic(source, 2)
    sql = f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE PER_WINDOW WITH (KAFKA_TOPIC='{sink}') AS SELECT ITEM, COUNT(*) AS N FROM ORDERS
            WINDOW TUMBLING (SIZE 10 SECONDS) GROUP BY ITEM;
    """
    replaced = sql + (
        "SET 'kspark.query.upgrades.beyond.ksqldb'='true';"
        f"CREATE OR REPLACE TABLE PER_WINDOW WITH (KAFKA_TOPIC='{sink}') AS SELECT ITEM, COUNT(*) AS N FROM ORDERS "
        "WINDOW TUMBLING (SIZE 10 SECONDS) WHERE QTY > 1 GROUP BY ITEM;"
    )

    def orders(first: int, count: int) -> list[tuple[str, Any, int]]:
        return [(f"o{i}", {"ITEM": f"item{i % 3}", "QTY": i % 5}, 1_000 + (i % 300) * 100) for i in range(first, first + count)]

    first, second = orders(0, 300), orders(300, 300)
    produce(bootstrap, source, first)
    run_until_caught_up(bootstrap, tmp_path / "state", sql)
    produce(bootstrap, source, second)
    app = run_until_caught_up(bootstrap, tmp_path / "state", replaced)
    assert [q.query_id for q in app.queries()] == ["CTAS_PER_WINDOW_0"]

    counted = [(v["ITEM"], ts // 10_000 * 10_000) for _, v, ts in first] + [
        (v["ITEM"], ts // 10_000 * 10_000) for _, v, ts in second if v["QTY"] > 1]
    rows = []
    for record in read_topic(bootstrap, sink):
        assert record.key is not None and record.value is not None
        key, start = decode_time_window_key(record.key)
        rows.append(((key.decode(), start), json.loads(record.value)["N"]))
    assert len(rows) == len(counted)  # one update per counted record, none repeated
    latest = dict(rows)
    assert latest == dict(Counter(counted))
