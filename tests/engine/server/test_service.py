"""The service without HTTP: statements through the command log, racing servers, restarts.

The race, restart and refusal tests run in both metastore modes (``mode``): the command
topic and the KLIP-18 tables (servers forward their writes to the owner in-process).
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine.metastore.database import SOURCES
from engine.server.errors import ServiceError
from engine.server.service import KsqlService
from engine.server.tables_service import TablesService

_PEERS: dict[str, TablesService] = {}  # tables mode: internal URL -> server, for forwarding


def _service(bootstrap: str, service_id: str, state_dir: Path, mode: str = "command-topic") -> KsqlService:
    if mode == "command-topic":
        service = KsqlService(bootstrap, service_id, state_dir, run_queries=False, command_timeout=20.0)
        service.start(timeout=30)
        return service
    url = f"http://{uuid.uuid4().hex[:8]}"
    tables = TablesService(bootstrap, service_id, state_dir, run_queries=False, command_timeout=20.0,
                           internal_url=url)
    _PEERS[url] = tables
    tables.database.forward = lambda owner, payload, timeout: _PEERS[owner].handle_internal(payload, "")
    tables.start(timeout=30)
    deadline = time.monotonic() + 30
    while tables.database.owner_of(SOURCES) is None:  # the owners' group has assigned the tables
        assert time.monotonic() < deadline, "no server became the owner of the metastore tables"
        time.sleep(0.1)
    return tables


@pytest.fixture(params=["command-topic", "tables"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _create(name: str, topic: str) -> str:
    return f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);"


@pytest.fixture
def service_id() -> str:
    return f"svc_{uuid.uuid4().hex[:8]}"


def test_create_describe_list_and_drop_answer_ksqldb_entities(kafka_broker, service_id, tmp_path, mode) -> None:
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path, mode)
    try:
        topic = f"t_{service_id}"
        [created] = service.execute(_create("S1", topic))
        assert created["@type"] == "currentStatus"
        assert created["commandId"] == "stream/`S1`/create"
        assert created["commandStatus"] == {"status": "SUCCESS", "message": "Stream created", "queryId": None}
        assert isinstance(created["commandSequenceNumber"], int)
        assert service.status("stream/`S1`/create").status == "SUCCESS"

        [streams] = service.execute("SHOW STREAMS;")
        assert streams["@type"] == "streams"
        assert streams["streams"] == [{"type": "STREAM", "name": "S1", "topic": topic, "keyFormat": "KAFKA",
                                       "valueFormat": "JSON", "isWindowed": False}]
        [described] = service.execute("DESCRIBE S1;")
        fields = described["sourceDescription"]["fields"]
        assert fields[0] == {"name": "ID", "schema": {"type": "STRING", "fields": None, "memberSchema": None},
                             "type": "KEY"}
        assert fields[1]["name"] == "V" and "type" not in fields[1]

        # SET gives no entity; two statements in one request answer in order.
        answers = service.execute("SET 'auto.offset.reset'='earliest'; LIST PROPERTIES; DROP STREAM S1;")
        assert [a["@type"] for a in answers] == ["properties", "currentStatus"]
        assert {"name": "auto.offset.reset", "scope": "STREAMS", "value": "earliest", "level": "QUERY",
                "editable": True} in answers[0]["properties"]
        assert answers[1]["commandStatus"]["message"] == f"Source `S1` (topic: {topic}) was dropped."
        assert answers[1]["commandSequenceNumber"] > created["commandSequenceNumber"]
        assert service.execute("SHOW STREAMS;")[0]["streams"] == []
    finally:
        service.close()


def test_refused_statements_carry_ksqldb_error_codes_and_the_entities_before_them(
    kafka_broker, service_id, tmp_path, mode
) -> None:
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path, mode)
    try:
        with pytest.raises(ServiceError) as parse_error:
            service.execute("CREATE STREEM X (A INT);")
        assert parse_error.value.code == 40001 and parse_error.value.http_status == 400
        assert parse_error.value.body()["@type"] == "statement_error"

        with pytest.raises(ServiceError) as query:
            service.execute("SELECT * FROM X EMIT CHANGES;")
        assert query.value.code == 40002 and "/query" in query.value.message

        with pytest.raises(ServiceError) as partial:
            service.execute(f"{_create('OK1', 'ok1_' + service_id)} DESCRIBE NOPE;")
        body = partial.value.body()
        assert body["statementText"] == "DESCRIBE NOPE;"
        assert "Could not find STREAM/TABLE 'NOPE'" in body["message"]
        assert [e["commandId"] for e in body["entities"]] == ["stream/`OK1`/create"]

        with pytest.raises(ServiceError, match="Unknown queryId: CSAS_NOPE_0"):
            service.execute("TERMINATE CSAS_NOPE_0;")
        assert service.execute("   ") == []  # no statement, no entity: as ksqlDB's /ksql
    finally:
        service.close()


@pytest.mark.system
def test_three_servers_racing_create_stream_give_one_success_per_name_and_the_same_metastore(
    kafka_broker, service_id, tmp_path, mode
) -> None:
    """100 names, each sent to the three servers at once: every attempt fences the others'
    in-flight transactions (command topic) or goes through the one owner (tables), and
    still each name is written exactly once."""
    servers = [_service(kafka_broker.bootstrap_servers, service_id, tmp_path, mode) for _ in range(3)]
    outcomes: dict[str, list[str]] = {}
    lock = threading.Lock()

    def create(server: KsqlService, name: str) -> None:
        try:
            [entity] = server.execute(_create(name, f"race_{service_id}_{name}"))
            result = entity["commandStatus"]["status"]
        except ServiceError as exc:
            result = exc.message
        with lock:
            outcomes.setdefault(name, []).append(result)

    try:
        names = [f"R{i}" for i in range(100)]
        with ThreadPoolExecutor(max_workers=24) as pool:
            for future in [pool.submit(create, s, n) for n in names for s in servers]:
                future.result(timeout=600)
        for name in names:
            results = outcomes[name]
            assert results.count("SUCCESS") == 1, (name, results)
            for refused in (r for r in results if r != "SUCCESS"):
                assert f"Cannot add stream '{name}': A stream with the same name already exists." in refused
        for server in servers:
            server.log.wait_until_caught_up()
        summaries = [server.metastore_summary() for server in servers]
        assert summaries[0] == summaries[1] == summaries[2] == sorted(f"STREAM {n}" for n in names)
    finally:
        for server in servers:
            server.close()


def test_a_restarted_server_rebuilds_the_same_metastore_from_the_log(
    kafka_broker, service_id, tmp_path, mode
) -> None:
    first = _service(kafka_broker.bootstrap_servers, service_id, tmp_path, mode)
    try:
        first.execute(_create("A", f"a_{service_id}"))
        first.execute(_create("B", f"b_{service_id}"))
        [derived] = first.execute("CREATE STREAM C AS SELECT * FROM A;")
        first.execute("DROP STREAM B;")
        first.execute(_create("E", f"e_{service_id}"))
        [inserted] = first.execute("INSERT INTO C SELECT * FROM E;")
        [stopped] = first.execute("CREATE STREAM F AS SELECT * FROM E;")
        first.execute(f"TERMINATE {stopped['commandStatus']['queryId']};")  # F stays, its query does not
        before = first.metastore_summary()
        # A compacted changelog keeps no trace of B: the tables mode compares the live entities' statuses.
        kept = ("stream/`C`/create",) if mode == "tables" else ("stream/`C`/create", "stream/`B`/drop")
        statuses = {cid: first.status(cid) for cid in kept}
    finally:
        first.close()
    csas, insert = derived["commandStatus"]["queryId"], inserted["commandStatus"]["queryId"]
    if mode == "command-topic":
        assert (csas, insert) == ("CSAS_C_0", "INSERTQUERY_1")
    assert before == [f"QUERY {csas}", f"QUERY {insert}", "STREAM A", "STREAM C", "STREAM E", "STREAM F"]
    again = _service(kafka_broker.bootstrap_servers, service_id, tmp_path, mode)
    try:
        assert again.metastore_summary() == before
        assert {cid: again.status(cid) for cid in statuses} == statuses
        # Query ids continue where the log left off: never an earlier one's (checkpoints are kept by id).
        [created] = again.execute("CREATE STREAM D AS SELECT * FROM A;")
        query_id = created["commandStatus"]["queryId"]
        assert query_id.startswith("CSAS_D_") and query_id not in {csas, insert, stopped["commandStatus"]["queryId"]}
        if mode == "command-topic":
            assert query_id == "CSAS_D_3"
        # ksqlDB names the sinks of the CREATE ... AS SELECT queries that read it, the ids of INSERT queries
        with pytest.raises(ServiceError, match=r"(?s)Cannot drop A.*read from this source: \[C, D\]"):
            again.execute("DROP STREAM A;")
        with pytest.raises(ServiceError, match=f"(?s)Cannot drop E.*read from this source: \\[{insert}\\]"):
            again.execute("DROP STREAM E;")
        with pytest.raises(ServiceError, match=f"(?s)Cannot drop C.*write into this source: \\[[^]]*{insert}"):
            again.execute("DROP STREAM C;")
        again.execute(f"TERMINATE {insert};")
        again.execute("DROP STREAM E;")  # no live query reads it any more (F's was terminated)
        assert "STREAM E" not in again.metastore_summary()
    finally:
        again.close()


def test_statements_never_write_to_the_command_topic(kafka_broker, service_id, tmp_path, mode) -> None:
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path, mode)
    try:
        log_topic = service.log.topic  # the command topic, or the UserDataSources changelog
        service.execute(f"CREATE STREAM LOGVIEW (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{log_topic}', VALUE_FORMAT='JSON');")
        service.execute(_create("PLAIN", f"plain_{service_id}"))
        written = service.log.wait_until_caught_up()
        for statement in (
            "INSERT INTO LOGVIEW (ID, V) VALUES ('x', 1);",
            "INSERT INTO LOGVIEW SELECT * FROM PLAIN;",
            f"CREATE STREAM COPY WITH (KAFKA_TOPIC='{log_topic}') AS SELECT * FROM PLAIN;",
        ):
            with pytest.raises(ServiceError, match="it is an internal topic"):
                service.execute(statement)
        assert service.log.wait_until_caught_up() == written
        assert "STREAM COPY" not in service.metastore_summary()
    finally:
        service.close()


def test_alter_adds_columns_that_a_restart_keeps_and_refusals_are_statement_errors(
    kafka_broker, service_id, tmp_path, mode
) -> None:
    first = _service(kafka_broker.bootstrap_servers, service_id, tmp_path, mode)
    try:
        first.execute(_create("A", f"a_{service_id}"))
        [altered] = first.execute("ALTER STREAM A ADD COLUMN W STRING;")
        assert altered["commandStatus"]["status"] == "SUCCESS"
        assert altered["commandStatus"]["message"] == "Stream A altered."
        first.execute("CREATE STREAM C AS SELECT * FROM A;")
        with pytest.raises(ServiceError, match=r"ALTER command is not supported for CREATE \.\.\. AS statements\."):
            first.execute("ALTER STREAM C ADD COLUMN X INT;")
    finally:
        first.close()
    again = _service(kafka_broker.bootstrap_servers, service_id, tmp_path, mode)
    try:
        assert str(again.engine.metastore.get("A").schema) == "`ID` STRING KEY, `V` INTEGER, `W` STRING"
        assert str(again.engine.metastore.get("C").schema) == "`ID` STRING KEY, `V` INTEGER, `W` STRING"
        with pytest.raises(ServiceError, match="Cannot add column `W` to schema. A column with the same name"):
            again.execute("ALTER STREAM A ADD COLUMN W INT;")
        again.execute("ALTER STREAM A ADD COLUMN X BIGINT;")
        assert str(again.engine.metastore.get("A").schema).endswith("`W` STRING, `X` BIGINT")
    finally:
        again.close()


def test_assert_topic_through_the_service_answers_without_writing_a_command(kafka_broker, service_id, tmp_path) -> None:
    service = _service(kafka_broker.bootstrap_servers, service_id, tmp_path)
    try:
        service.execute(_create("A", f"a_{service_id}"))
        position = service.log.position
        [entity] = service.execute(f"ASSERT TOPIC `a_{service_id}` WITH (PARTITIONS=1) TIMEOUT 1 SECONDS;")
        assert entity["@type"] == "assert_topic" and entity["exists"] is True
        with pytest.raises(ServiceError, match=f"Topic b_{service_id} does not exist") as raised:
            service.execute(f"ASSERT TOPIC `b_{service_id}` TIMEOUT 0 SECONDS;")
        assert raised.value.code == 41700
        assert service.log.position == position  # nothing was written
    finally:
        service.close()
