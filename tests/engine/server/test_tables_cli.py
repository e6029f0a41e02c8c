"""``kspark server --metastore tables`` as processes: forwarding over HTTP, kill -9 of the owner, headless start."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from engine.metastore.database import SOURCES, MetastoreDatabase


def _start(bootstrap: str, service_id: str, state_dir: Path, log: Path, *extra: str) -> tuple[subprocess.Popen[bytes], str]:
    from tests.engine.server.test_server_cli import _start as start_server

    return start_server(bootstrap, service_id, state_dir, log, ("--metastore", "tables", "--spark-master", "local[1]", *extra))


def _ksql(url: str, statement: str, **extra: object) -> httpx.Response:
    return httpx.post(f"{url}/ksql", json={"ksql": statement, **extra}, timeout=90)


def _streams(url: str, sequence: int | None = None) -> list[str]:
    extra = {} if sequence is None else {"commandSequenceNumber": sequence}
    answer = _ksql(url, "SHOW STREAMS;", **extra)
    assert answer.status_code == 200, answer.text
    return sorted(s["name"] for s in answer.json()[0]["streams"])


def _create(name: str, topic: str) -> str:
    return f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);"


@pytest.mark.long
@pytest.mark.system
def test_servers_forward_ddl_to_the_owner_and_survive_its_kill_9(kafka_broker, tmp_path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"tcli_{uuid.uuid4().hex[:8]}"
    topic = f"t_{service_id}"
    queries = tmp_path / "app.sql"
    queries.write_text(_create("A", topic) + "\n", encoding="utf-8")
    logs = [tmp_path / "one.log", tmp_path / "two.log"]
    one, url_one = _start(bootstrap, service_id, tmp_path / "s1", logs[0], "--queries-file", str(queries))
    assert "app.sql, line 1: applied" in logs[0].read_text()
    two, url_two = _start(bootstrap, service_id, tmp_path / "s2", logs[1])
    processes = {url_one: one, url_two: two}
    try:
        for n, url in enumerate((url_two, url_one, url_two)):
            answer = _ksql(url, _create(f"B{n}", topic))
            assert answer.status_code == 200, answer.text
        sequence = answer.json()[0]["commandSequenceNumber"]
        assert _streams(url_one, sequence) == _streams(url_two, sequence) == ["A", "B0", "B1", "B2"]
        refused = _ksql(url_one, _create("B0", topic))
        assert refused.status_code == 400 and "already exists" in refused.json()["message"]

        probe = MetastoreDatabase(bootstrap, service_id)
        owner = probe.owner_of(SOURCES)
        probe.close()
        assert owner in processes
        processes[owner].kill()  # kill -9 of the owner
        processes[owner].wait(timeout=30)
        survivor = url_two if owner == url_one else url_one
        answer = _ksql(survivor, _create("C", topic))  # ownership moves after the session timeout
        assert answer.status_code == 200, answer.text
        assert _streams(survivor) == ["A", "B0", "B1", "B2", "C"]

        log = logs[0] if owner == url_one else logs[1]
        restarted, url = _start(bootstrap, service_id, tmp_path / "again", log)
        processes[owner] = restarted
        assert _streams(url) == ["A", "B0", "B1", "B2", "C"]  # nothing partial, the same view
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()


@pytest.mark.system
def test_a_changed_statement_in_the_queries_file_stops_the_start(kafka_broker, tmp_path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"tcli_{uuid.uuid4().hex[:8]}"
    queries = tmp_path / "app.sql"
    queries.write_text(_create("A", "t_a") + "\n", encoding="utf-8")
    process, _ = _start(bootstrap, service_id, tmp_path / "s", tmp_path / "one.log", "--queries-file", str(queries))
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0
    queries.write_text(_create("A", "t_other") + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "server", "--bootstrap-servers", bootstrap, "--service-id", service_id,
         "--listen", "127.0.0.1:1", "--state-dir", str(tmp_path / "s"), "--metastore", "tables",
         "--queries-file", str(queries)],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 1
    assert "app.sql, line 1 changes stream A, which was created by a different statement" in done.stderr
