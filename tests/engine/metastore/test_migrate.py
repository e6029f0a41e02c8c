"""``kspark metastore migrate``: a command-topic service's metastore, rebuilt as tables."""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from engine.kafka.admin import TopicAdmin
from engine.kafka.consume import read_topic
from engine.kafka.produce import ProducerRecord, RecordProducer
from engine.metastore.database import QUERIES, SOURCES
from engine.metastore.database.migrate import run
from engine.server.service import KsqlService
from engine.server.tables_service import TablesService
from tests.engine.ksqldb_import.test_command_topic import _write_ksqldb_topic


def _args(bootstrap: str, service_id: str) -> argparse.Namespace:
    return argparse.Namespace(bootstrap_servers=bootstrap, service_id=service_id, once=True, timeout=30.0, kafka_conf=[])


def test_a_command_topic_service_migrated_lists_the_same_sources_and_queries(kafka_broker, tmp_path, capsys) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"mig_{uuid.uuid4().hex[:8]}"
    topic = f"t_{service_id}"
    old = KsqlService(bootstrap, service_id, tmp_path, run_queries=False, command_timeout=20.0)
    old.start(timeout=30)
    try:
        for statement in (
            f"CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);",
            "CREATE STREAM D AS SELECT * FROM S WHERE V > 0;",
            "CREATE TABLE C AS SELECT ID, COUNT(*) AS N FROM S GROUP BY ID;",
            "CREATE STREAM GONE AS SELECT * FROM S;",
            "DROP STREAM GONE;",
            "INSERT INTO D SELECT * FROM S;",
        ):
            old.execute(statement)
        [terminated] = [q for q in old.engine.queries if q.startswith("INSERTQUERY")]
        old.execute(f"TERMINATE {terminated};")
        [live] = old.execute("INSERT INTO D SELECT * FROM S WHERE V > 5;")
        [stopped] = old.execute("CREATE STREAM T AS SELECT * FROM S;")
        old.execute(f"TERMINATE {stopped['commandStatus']['queryId']};")  # T stays, without its query
        expected = old.metastore_summary()
    finally:
        old.close()

    assert run(_args(bootstrap, service_id)) == 0
    out = capsys.readouterr().out
    assert "4 sources and 1 INSERT INTO queries live" in out and "5 rows written, 0 deleted" in out
    assert run(_args(bootstrap, service_id)) == 0  # again: nothing to do
    assert "0 rows written, 0 deleted" in capsys.readouterr().out

    new = TablesService(bootstrap, service_id, tmp_path, run_queries=False, command_timeout=20.0)
    new.start(timeout=30)
    try:
        assert new.metastore_summary() == expected
        assert new.database.rows(SOURCES)["D"].query_id == old_query_id(expected, "CSAS_D_")
        assert list(new.database.rows(QUERIES)) == [live["commandStatus"]["queryId"]]
        assert new.database.rows(SOURCES)["T"].terminated_query == stopped["commandStatus"]["queryId"]
    finally:
        new.close()


def old_query_id(summary: list[str], prefix: str) -> str:
    return next(s.split()[1] for s in summary if s.startswith(f"QUERY {prefix}"))


def test_a_service_without_a_command_topic_is_one_line(kafka_broker, capsys) -> None:
    assert run(_args(kafka_broker.bootstrap_servers, f"none_{uuid.uuid4().hex[:8]}")) == 1
    assert "has no command topic" in capsys.readouterr().err


def _produce(bootstrap: str, topic: str, numbers: range) -> None:
    producer = RecordProducer(bootstrap)
    for n in numbers:
        producer.send(topic, ProducerRecord(key=f"k{n}".encode(), value=json.dumps({"V": n}).encode(), timestamp=1_000 + n))
    producer.flush()


def _values(bootstrap: str, topic: str, expected: int, timeout: float = 180.0) -> Counter[int]:
    """The V values in ``topic`` (read_committed) once it holds ``expected`` records, and a moment more."""
    deadline = time.monotonic() + timeout
    while True:
        found = Counter(int(json.loads(r.value)["V"]) for r in read_topic(bootstrap, topic, timeout=5))
        if sum(found.values()) >= expected or time.monotonic() > deadline:
            break
        time.sleep(1)
    time.sleep(2)  # a record written twice would arrive now
    return Counter(int(json.loads(r.value)["V"]) for r in read_topic(bootstrap, topic, timeout=5))


def test_a_migrated_service_resumes_its_queries_from_their_checkpoints(kafka_broker, tmp_path, spark) -> None:
    """The query a command-topic server ran keeps its id in the tables, so a tables server
    on the same state dir resumes it from its checkpoint: every record once, none again."""
    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"migq_{uuid.uuid4().hex[:8]}"
    source, sink = f"src_{service_id}", f"out_{service_id}"
    TopicAdmin(bootstrap).create_topic(source, 1)
    _produce(bootstrap, source, range(0, 20))
    old = KsqlService(bootstrap, service_id, tmp_path, command_timeout=20.0)
    old.start(timeout=60)
    try:
        old.execute(f"CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');")
        [created] = old.execute(f"CREATE STREAM D WITH (KAFKA_TOPIC='{sink}') AS SELECT * FROM S WHERE V >= 0;",
                                {"auto.offset.reset": "earliest"})
        query_id = created["commandStatus"]["queryId"]
        assert _values(bootstrap, sink, 20) == Counter(range(20))
    finally:
        old.close()

    _produce(bootstrap, source, range(20, 40))  # while no server runs
    assert run(_args(bootstrap, service_id)) == 0
    new = TablesService(bootstrap, service_id, tmp_path, command_timeout=20.0)
    new.start(timeout=60)
    try:
        assert new.database.rows(SOURCES)["D"].query_id == query_id
        assert _values(bootstrap, sink, 40) == Counter(range(40))  # resumed: 20..39 once, 0..19 not again
        [listed] = new.execute("SHOW QUERIES;")
        assert [(q["id"], q["state"]) for q in listed["queries"]] == [(query_id, "RUNNING")]
    finally:
        new.close()


def _ksqldb_plan_builders() -> Any:
    """The ksqlDB plan-writing helpers of tests/engine/ksqldb_import (the project's own)."""
    path = Path(__file__).parents[1] / "ksqldb_import" / "conftest.py"
    spec = importlib.util.spec_from_file_location("ksqldb_plan_builders", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ksqldb_value(statement: str, plan: dict[str, Any] | None) -> bytes:
    return json.dumps({"statement": statement, "streamsProperties": {"auto.offset.reset": "earliest"},
                       "originalProperties": {"ksql.service.id": "prod_"}, "plan": plan, "version": 3}).encode()


def test_a_ksqldb_command_topic_migrates_to_the_tables(kafka_broker, tmp_path, capsys) -> None:
    kp = _ksqldb_plan_builders()
    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"kmig_{uuid.uuid4().hex[:8]}"
    schema, output = "`ID` INTEGER KEY, `NAME` STRING", "`ID` INTEGER KEY, `N` STRING"

    def query(sink: str, query_id: str, expression: str, create: bool = True) -> dict[str, Any]:
        physical = kp.sink(kp.select(kp.stream_source(schema, "in_topic"), [expression], ["ID"]), topic=sink)
        ddl = kp.create(sink, output, sink) if create else None
        return kp.entry(ddl, physical, query_id=query_id, sink_name=sink)

    _write_ksqldb_topic(bootstrap, service_id, [
        ('"stream/`INPUT`/create"', _ksqldb_value("CREATE STREAM INPUT ...;", kp.entry(kp.create("INPUT", schema, "in_topic")))),
        ('"stream/`UPPER`/create"', _ksqldb_value("CREATE STREAM UPPER AS SELECT ...;", query("UPPER", "CSAS_UPPER_1", "UCASE(NAME) AS N"))),
        ('"stream/`LOWER`/create"', _ksqldb_value("CREATE STREAM LOWER AS SELECT ...;", query("LOWER", "CSAS_LOWER_2", "LCASE(NAME) AS N"))),
        ('"terminate/CSAS_LOWER_2/execute"', _ksqldb_value("TERMINATE CSAS_LOWER_2;", None)),
        ('"stream/`UPPER`/create"', _ksqldb_value("INSERT INTO UPPER SELECT ...;", query("UPPER", "INSERTQUERY_3", "NAME AS N", create=False))),
    ])
    args = argparse.Namespace(bootstrap_servers=bootstrap, service_id=service_id, once=True, timeout=30.0, kafka_conf=[],
                              from_ksqldb=True, ksqldb_service_id=None)
    assert run(args) == 0
    out = capsys.readouterr().out
    assert "3 sources and 1 INSERT INTO queries live after 5 ksqlDB records; 4 rows written, 0 deleted." in out

    new = TablesService(bootstrap, service_id, tmp_path, run_queries=False, command_timeout=20.0)
    new.start(timeout=30)
    try:
        assert new.metastore_summary() == ["QUERY CSAS_UPPER_1", "QUERY INSERTQUERY_3",
                                           "STREAM INPUT", "STREAM LOWER", "STREAM UPPER"]
        assert new.database.rows(SOURCES)["LOWER"].terminated_query == "CSAS_LOWER_2"
        assert new.database.rows(QUERIES)["INSERTQUERY_3"].upstream == ("INPUT",)
    finally:
        new.close()

    broken = f"kbad_{uuid.uuid4().hex[:8]}"
    _write_ksqldb_topic(bootstrap, broken, [('"stream/`X`/create"', b"{not json")])
    assert run(argparse.Namespace(**{**vars(args), "service_id": broken})) == 1
    assert "The command at offset 0 is not a ksqlDB command (JSON expected)" in capsys.readouterr().err
