"""kspark import-command-topic: a ksqlDB command topic (written here in ksqlDB's record format,
with the project's own statements and plans) becomes a kspark service's command log."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from engine.cli import main
from engine.commandlog import CommandLog, QueuedCommand, command_topic
from engine.kafka.client import client_config
from engine.ksqldb_import.command_topic import KsqldbRecord, command_id_of, translate
from engine.plan.plan import CreateStreamCommand
from engine.plan.serde import statement_plan_from_json

SOURCE = "`ID` INTEGER KEY, `NAME` STRING, `QTY` INTEGER"
OUTPUT = "`ID` INTEGER KEY, `N` STRING"


def _ksqldb_value(statement: str, plan: dict[str, Any] | None, **properties: Any) -> bytes:
    """A command as ksqlDB writes it to its command topic."""
    value = {
        "statement": statement,
        "streamsProperties": {"auto.offset.reset": "earliest", **properties},
        "originalProperties": {"ksql.service.id": "ksql_prod_", "ksql.streams.cache.max.bytes.buffering": "10000000"},
        "plan": plan,
        "version": 3,
    }
    return json.dumps(value).encode("utf-8")


def _commands(kp: Any) -> list[tuple[str, bytes]]:
    """(key, value) of a small deployment: a source, two queries, one of them terminated."""
    create = kp.entry(kp.create("INPUT", SOURCE, "input_topic"))
    create["statementText"] = "CREATE STREAM INPUT (ID INT KEY, NAME STRING, QTY INT) WITH (...);"

    def query(name: str, query_id: str, expression: str) -> dict[str, Any]:
        physical = kp.sink(kp.select(kp.stream_source(SOURCE, "input_topic"), [expression], ["ID"]), topic=name)
        return kp.entry(kp.create(name, OUTPUT, name), physical, query_id=query_id, sink_name=name)

    return [
        ('"stream/`INPUT`/create"', _ksqldb_value(create["statementText"], create)),
        ('"stream/`UPPER`/create"', _ksqldb_value("CREATE STREAM UPPER AS SELECT ...;",
                                                  query("UPPER", "CSAS_UPPER_1", "UCASE(NAME) AS N"))),
        ('"stream/`LOWER`/create"', _ksqldb_value("CREATE STREAM LOWER AS SELECT ...;",
                                                  query("LOWER", "CSAS_LOWER_3", "LCASE(NAME) AS N"))),
        ('"terminate/CSAS_LOWER_3/execute"', _ksqldb_value("TERMINATE CSAS_LOWER_3;", None)),
    ]


def _write_ksqldb_topic(bootstrap: str, service_id: str, records: list[tuple[str, bytes]]) -> None:
    """Write records as ksqlDB does: one transaction per command, on the one partition."""
    from engine.kafka.admin import TopicAdmin

    topic = command_topic(service_id)
    TopicAdmin(bootstrap).create_topic(topic, 1, exist_ok=True)
    producer = Producer(client_config(bootstrap, **{"transactional.id": f"ksqldb-{service_id}"}))
    producer.init_transactions(30)
    for key, value in records:
        producer.begin_transaction()
        producer.produce(topic, key=key.encode("utf-8"), value=value, partition=0)
        producer.commit_transaction(30)


def _log(bootstrap: str, service_id: str) -> list[QueuedCommand]:
    applied: list[QueuedCommand] = []
    log = CommandLog(bootstrap, service_id, timeout=20)
    try:
        log.replay(applied.append, timeout=30)
    finally:
        log.close()
    return applied


def _args(bootstrap: str, ksqldb_id: str, kspark_id: str) -> list[str]:
    return ["import-command-topic", "--from-bootstrap-servers", bootstrap, "--ksqldb-service-id", ksqldb_id,
            "--bootstrap-servers", bootstrap, "--service-id", kspark_id]


def test_a_ksqldb_command_topic_becomes_a_kspark_command_log_a_server_runs(
    kafka_broker: Any, kp: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.server.service import KsqlService

    bootstrap = kafka_broker.bootstrap_servers
    ksqldb_id, kspark_id = f"ksql_{uuid.uuid4().hex[:6]}_", f"kspark_{uuid.uuid4().hex[:6]}"
    _write_ksqldb_topic(bootstrap, ksqldb_id, _commands(kp))

    assert main(_args(bootstrap, ksqldb_id, kspark_id)) == 0
    err = capsys.readouterr().err
    assert "imported 4 command(s) from 4 ksqlDB record(s)" in err
    assert "ksql.streams.cache.max.bytes.buffering=10000000" in err  # a note, not an error

    log = _log(bootstrap, kspark_id)
    assert [q.command.command_id for q in log] == [
        "stream/`INPUT`/create", "stream/`UPPER`/create", "stream/`LOWER`/create", "terminate/CSAS_LOWER_3/execute",
    ]
    first = statement_plan_from_json(log[0].command.plan)
    assert isinstance(first.command, CreateStreamCommand) and first.command.topic == "input_topic"
    assert log[1].command.properties == {"auto.offset.reset": "earliest"}
    assert log[3].command.terminate == "CSAS_LOWER_3" and log[3].command.plan is None

    service = KsqlService(bootstrap, kspark_id, tmp_path, run_queries=False, command_timeout=20.0)
    service.start(timeout=60)
    try:
        [streams] = service.execute("SHOW STREAMS;")
        assert sorted(s["name"] for s in streams["streams"]) == ["INPUT", "LOWER", "UPPER"]
        [queries] = service.execute("SHOW QUERIES;")
        assert [q["id"] for q in queries["queries"]] == ["CSAS_UPPER_1"]
    finally:
        service.close()

    # a second import into the same kspark service writes nothing
    assert main(_args(bootstrap, ksqldb_id, kspark_id)) == 2
    assert "already holds commands; import into a new --service-id" in capsys.readouterr().err
    assert len(_log(bootstrap, kspark_id)) == 4


def test_a_command_that_cannot_be_imported_stops_the_import_before_anything_is_written(
    kafka_broker: Any, kp: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    ksqldb_id, kspark_id = f"ksql_{uuid.uuid4().hex[:6]}_", f"kspark_{uuid.uuid4().hex[:6]}"
    records = _commands(kp)[:1] + [('"stream/`OLD`/create"', _ksqldb_value("CREATE STREAM OLD AS SELECT * FROM INPUT;", None))]
    _write_ksqldb_topic(bootstrap, ksqldb_id, records)

    assert main(_args(bootstrap, ksqldb_id, kspark_id)) == 1
    err = capsys.readouterr().err
    # offsets count the transaction markers too: the second command sits at offset 2
    assert "The command at offset 2 ('CREATE STREAM OLD AS SELECT * FROM INPUT;') has no execution plan" in err
    assert "1 of 2 command(s) cannot be imported; nothing was written." in err
    from engine.kafka.admin import TopicAdmin

    assert not TopicAdmin(bootstrap).topic_exists(command_topic(kspark_id))


def test_a_missing_ksqldb_command_topic_is_named(kafka_broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(_args(kafka_broker.bootstrap_servers, "no_such_ksql_", "kspark_x")) == 2
    assert "There is no ksqlDB command topic '_confluent-ksql-no_such_ksql__command_topic'" in capsys.readouterr().err


# --------------------------------------------------------------------------- without Kafka


def test_command_ids_are_read_as_json_strings_or_plain_text() -> None:
    assert command_id_of(b'"stream/`S`/create"', 0) == "stream/`S`/create"
    assert command_id_of(b"table/`T`/drop", 0) == "table/`T`/drop"
    assert command_id_of(None, 7) == "ksqldb/offset-7/import"


def test_types_resolve_into_later_plans_and_write_no_command(kp: Any) -> None:
    register = {"@type": "ksqlPlanV1", "statementText": "CREATE TYPE ADDR AS STRUCT<CITY STRING>;",
                "ddlCommand": {"@type": "registerTypeV1", "typeName": "ADDR", "type": "STRUCT<`CITY` STRING>"},
                "queryPlan": None}
    physical = kp.sink(kp.select(kp.stream_source(SOURCE), ["CAST(NULL AS ADDR) AS HOME"], ["ID"]), topic="PEOPLE")
    create = kp.entry(kp.create("PEOPLE", "`ID` INTEGER KEY, `HOME` STRUCT<`CITY` STRING>", "PEOPLE"), physical,
                      query_id="CSAS_PEOPLE_0", sink_name="PEOPLE")
    out = translate([
        KsqldbRecord(0, b"type", _ksqldb_value("CREATE TYPE ...;", register)),
        KsqldbRecord(1, b"stream", _ksqldb_value("CREATE STREAM PEOPLE ...;", create)),
    ])
    assert not out.errors
    assert any("registers a type" in n for n in out.notes)
    [command] = out.commands
    plan = statement_plan_from_json(command.plan)
    assert isinstance(plan.command, CreateStreamCommand) and plan.query is not None
    assert "STRUCT<`CITY` STRING>" in json.dumps(command.plan)  # the type, resolved in the plan


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"not json", "The command at offset 4 is not a ksqlDB command (JSON expected)"),
        (b'{"plan": null}', "The command at offset 4 is not a ksqlDB command: it has no 'statement' text"),
    ],
)
def test_a_damaged_record_is_an_error_naming_its_offset(value: bytes, message: str) -> None:
    out = translate([KsqldbRecord(4, b"k", value)])
    assert out.errors and message in out.errors[0]


def test_a_semantic_config_is_recorded_in_the_plan_and_a_value_kspark_does_not_implement_is_an_error(kp: Any) -> None:
    """A command's ksql.nested.error.set.null=false is recorded on its plan's calls; a plan with a
    tableSuppressV1 step saved with a bounded ksql.suppress.buffer.size.bytes is refused."""
    physical = kp.sink(kp.select(kp.stream_source(SOURCE), ["UCASE(NAME) AS N"], ["ID"]), topic="UPPER")
    query = kp.entry(kp.create("UPPER", OUTPUT, "UPPER"), physical, query_id="CSAS_UPPER_0", sink_name="UPPER")
    value = _ksqldb_value("CREATE STREAM UPPER ...;", query, **{"ksql.nested.error.set.null": "false"})
    out = translate([KsqldbRecord(0, b"k", value)])
    assert not out.errors
    assert '"error_null": false' in json.dumps(out.commands[0].plan)

    suppress = kp.step("tableSuppressV1", "Suppress", source=kp.select(kp.table_source(SOURCE), ["NAME AS N"], ["ID"],
                       table=True), internalFormats=kp.fmt(), refinementInfo={"outputRefinement": "FINAL"})
    table = kp.entry(kp.create("LAST", OUTPUT, "LAST", table=True), kp.sink(suppress, table=True),
                     query_id="CTAS_LAST_0", sink_name="LAST")
    bounded = _ksqldb_value("CREATE TABLE LAST ...;", table, **{"ksql.suppress.buffer.size.bytes": "1000"})
    out = translate([KsqldbRecord(1, b"k", bounded)])
    assert len(out.errors) == 1 and not out.commands
    assert "ksql.suppress.buffer.size.bytes=1000" in out.errors[0]
