"""kspark migrations against a real server on a real broker: one server for the module."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.cli import main
from engine.server.service import KsqlService
from tests.engine.server.serving import serving

pytestmark = pytest.mark.system


@pytest.fixture(scope="module")
def live_server(kafka_broker, spark, tmp_path_factory) -> Iterator[tuple[str, KsqlService]]:
    service = KsqlService(kafka_broker.bootstrap_servers, f"mig_{uuid.uuid4().hex[:8]}",
                          Path(tmp_path_factory.mktemp("migrations-server")), command_timeout=60.0)
    service.start(timeout=120)
    with serving(service) as url:
        yield url, service
    service.close()


def migrations(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``kspark migrations ARGS`` in this process: exit status, stdout, stderr."""
    capsys.readouterr()
    if "apply" in args:  # a busy machine's micro-batches can take long
        args = (*args, "--state-timeout", "600")
    status = main(["migrations", *args])
    out, err = capsys.readouterr()
    return status, out, err


def ksql(url: str, text: str) -> list[dict]:
    answer = httpx.post(f"{url}/ksql", json={"ksql": text, "streamsProperties": {}}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()


def pull(url: str, text: str) -> list[list]:
    answer = httpx.post(f"{url}/query-stream", json={"sql": text, "properties": {}},
                        headers={"Accept": "application/vnd.ksqlapi.delimited.v1"}, timeout=60)
    assert answer.status_code == 200, answer.text
    return [json.loads(line) for line in answer.text.splitlines()[1:] if line.strip()]


def info_rows(out: str) -> dict[str, list[str]]:
    """``info``'s table: version -> its cells."""
    rows = [line for line in out.splitlines() if line.startswith(" ") and "|" in line]
    cells = [[c.strip() for c in line.split("|")] for line in rows]
    assert cells[0][:3] == ["Version", "Name", "State"], out
    return {c[0]: c for c in cells[1:]}


FILES = {
    "V000001__create_orders.sql": (
        "-- the source stream\n"
        "CREATE STREAM ORDERS (ID STRING KEY, CUSTOMER STRING, AMOUNT INT)\n"
        "  WITH (KAFKA_TOPIC='${topic}', VALUE_FORMAT='JSON', PARTITIONS=1);\n"),
    "V000002__big_orders.sql": (
        "DEFINE threshold = '100';\n"
        "SET 'auto.offset.reset' = 'earliest';\n"
        "CREATE STREAM LARGE_ORDERS AS SELECT ID, CUSTOMER, AMOUNT FROM ORDERS WHERE AMOUNT > ${threshold};\n"),
    "V000003__customer_totals.sql": (
        "/* a table over the stream, and a row for it */\n"
        "INSERT INTO ORDERS (ID, CUSTOMER, AMOUNT) VALUES ('o1', 'alice', 250);\n"
        "CREATE TABLE CUSTOMER_TOTALS AS SELECT CUSTOMER, SUM(AMOUNT) AS TOTAL FROM ORDERS GROUP BY CUSTOMER;\n"),
}


def test_a_project_applied_step_by_step_then_validated_and_a_failing_migration(
        live_server, capsys, tmp_path) -> None:
    url, service = live_server
    project = tmp_path / "project"
    status, out, _ = migrations(capsys, "new-project", str(project), url)
    assert status == 0 and "Migrations project directory created successfully" in out
    config = str(project / "ksql-migrations.properties")
    assert (project / "ksql-migrations.properties").read_text().startswith(f"ksql.server.url={url}\n")
    for name in FILES:
        description = name.split("__", 1)[1].removesuffix(".sql")
        status, out, err = migrations(capsys, "-c", config, "create", description)
        assert status == 0, err
    assert sorted(p.name for p in (project / "migrations").iterdir()) == sorted(FILES)
    for name, text in FILES.items():
        (project / "migrations" / name).write_text(text)
    topic = f"orders_{service.service_id}"

    status, out, err = migrations(capsys, "--config-file", config, "initialize-metadata")
    assert status == 0, err
    described = ksql(url, "DESCRIBE MIGRATION_EVENTS;")[0]["sourceDescription"]
    assert described["topic"] == f"{service.service_id}ksql_MIGRATION_EVENTS"
    assert [(f["name"], f["schema"]["type"], f.get("type")) for f in described["fields"]][:2] == [
        ("VERSION_KEY", "STRING", "KEY"), ("VERSION", "STRING", None)]
    table = ksql(url, "DESCRIBE MIGRATION_SCHEMA_VERSIONS;")[0]["sourceDescription"]
    assert table["topic"] == f"{service.service_id}ksql_MIGRATION_SCHEMA_VERSIONS"

    status, out, err = migrations(capsys, "-c", config, "info")
    assert status == 0, err
    assert "Current migration version: <none>" in out
    assert {v: c[2] for v, c in info_rows(out).items()} == {"1": "PENDING", "2": "PENDING", "3": "PENDING"}

    # --next: version 1 only (its variable from --define)
    status, out, err = migrations(capsys, "apply", "--next", "--define", f"topic={topic}", "-c", config)
    assert status == 0, err
    assert "Successfully migrated" in out
    status, out, _ = migrations(capsys, "-c", config, "info")
    assert "Current migration version: 1" in out
    assert {v: c[2] for v, c in info_rows(out).items()} == {"1": "MIGRATED", "2": "PENDING", "3": "PENDING"}

    # --dry-run sends nothing
    status, out, err = migrations(capsys, "-c", config, "apply", "--all", "--dry-run")
    assert status == 0, err
    assert "Dry run complete. No migrations were actually applied." in out
    assert "LARGE_ORDERS" not in {s["name"] for s in ksql(url, "LIST STREAMS;")[0]["streams"]}

    # --until 2
    status, out, err = migrations(capsys, "-c", config, "apply", "--until", "2")
    assert status == 0, err
    assert "1 migration file(s) loaded." in out
    # --all: the rest
    status, out, err = migrations(capsys, "-c", config, "apply", "--all", "--define", f"topic={topic}")
    assert status == 0, err

    streams = {s["name"] for s in ksql(url, "LIST STREAMS;")[0]["streams"]}
    tables = {t["name"] for t in ksql(url, "LIST TABLES;")[0]["tables"]}
    sinks = {sink for q in ksql(url, "SHOW QUERIES;")[0]["queries"] for sink in q["sinks"]}
    assert {"ORDERS", "LARGE_ORDERS", "MIGRATION_EVENTS"} <= streams
    assert {"CUSTOMER_TOTALS", "MIGRATION_SCHEMA_VERSIONS"} <= tables
    assert sinks == {"LARGE_ORDERS", "CUSTOMER_TOTALS", "MIGRATION_SCHEMA_VERSIONS"}
    assert "AMOUNT > 100" in ksql(url, "DESCRIBE LARGE_ORDERS;")[0]["sourceDescription"]["statement"]

    status, out, err = migrations(capsys, "-c", config, "info")
    assert status == 0, err
    assert "Current migration version: 3" in out
    rows = info_rows(out)
    assert {v: (c[1], c[2], c[3]) for v, c in rows.items()} == {
        "1": ("create orders", "MIGRATED", "<none>"), "2": ("big orders", "MIGRATED", "1"),
        "3": ("customer totals", "MIGRATED", "2")}
    recorded = {r[0]: r[1] for r in pull(
        url, "SELECT VERSION_KEY, CHECKSUM FROM MIGRATION_SCHEMA_VERSIONS WHERE VERSION_KEY IN ('1', '2', '3');")}
    assert recorded == {str(int(name[1:7])): hashlib.md5((project / "migrations" / name).read_bytes()).hexdigest()
                        for name in FILES}

    status, out, err = migrations(capsys, "-c", config, "validate")
    assert status == 0, err
    assert "Successfully validated checksums for migrations that have already been applied" in out

    second = project / "migrations" / "V000002__big_orders.sql"
    second.write_text(FILES[second.name].replace("100", "200"))
    status, out, err = migrations(capsys, "-c", config, "validate")
    assert status == 1
    [line] = err.splitlines()
    assert "Migrations file found for version 2 does not match the checksum saved for this version" in line
    assert str(second) in line and "Traceback" not in err
    second.write_text(FILES[second.name])

    # a migration the server refuses: ERROR with the server's message; later versions untouched
    (project / "migrations" / "V000004__broken.sql").write_text(
        "CREATE STREAM NOT_THERE_COPY AS SELECT * FROM NOT_THERE;\n")
    (project / "migrations" / "V000005__after.sql").write_text(
        "CREATE STREAM AFTER_BROKEN AS SELECT * FROM ORDERS;\n")
    status, out, err = migrations(capsys, "-c", config, "apply", "--all")
    assert status == 1
    [line] = err.splitlines()
    assert "Failed to execute sql: CREATE STREAM NOT_THERE_COPY" in line and "NOT_THERE" in line
    assert "Received 400 response from server" in line
    streams = {s["name"] for s in ksql(url, "LIST STREAMS;")[0]["streams"]}
    assert "AFTER_BROKEN" not in streams and "NOT_THERE_COPY" not in streams
    status, out, _ = migrations(capsys, "-c", config, "info")
    rows = info_rows(out)
    assert "Current migration version: 4" in out
    assert rows["4"][2] == "ERROR" and "NOT_THERE" in rows["4"][6] and rows["5"][2] == "PENDING"

    # fixed, the failed version applies and the next with it
    (project / "migrations" / "V000004__broken.sql").write_text(
        "CREATE STREAM ORDERS_COPY AS SELECT * FROM ORDERS;\n")
    status, out, err = migrations(capsys, "-c", config, "apply", "--all")
    assert status == 0, err
    streams = {s["name"] for s in ksql(url, "LIST STREAMS;")[0]["streams"]}
    assert {"ORDERS_COPY", "AFTER_BROKEN"} <= streams

    status, out, err = migrations(capsys, "-c", config, "destroy-metadata")
    assert status == 0, err
    names = {s["name"] for s in ksql(url, "LIST STREAMS;")[0]["streams"]} | {
        t["name"] for t in ksql(url, "LIST TABLES;")[0]["tables"]}
    assert not {"MIGRATION_EVENTS", "MIGRATION_SCHEMA_VERSIONS"} & names


def test_missing_metadata_is_one_line_naming_the_command_to_run(live_server, capsys, tmp_path) -> None:
    url, _service = live_server
    config = tmp_path / "ksql-migrations.properties"
    (tmp_path / "migrations").mkdir()
    config.write_text(f"ksql.server.url={url}\nksql.migrations.stream.name=NO_SUCH_EVENTS\n")
    status, _out, err = migrations(capsys, "-c", str(config), "info")
    assert status == 1
    [line] = err.splitlines()
    assert "Failed to verify existence of migrations metadata stream 'NO_SUCH_EVENTS'" in line
    assert "Did you run `kspark migrations initialize-metadata`?" in line
