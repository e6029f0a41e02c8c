"""``kspark server`` as a process: ready on /healthcheck, SIGTERM exits 0, a restart keeps the metastore."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from engine.components.kspark_server import ServerProcess
from engine.errors import ComponentError
from engine.kafka.consume import read_topic
from engine.server.cli import read_config


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(bootstrap: str, service_id: str, state_dir: Path, log: Path,
           extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], str]:
    server = ServerProcess(bootstrap, service_id, state_dir, log=log, args=tuple(extra))
    try:
        url = server.start(timeout=120)
    except ComponentError as exc:
        raise AssertionError(str(exc)) from None
    assert server.process is not None
    return server.process, url


def _stop(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise


@pytest.mark.long
@pytest.mark.parametrize("extra", [(), ("--metastore", "command-topic")], ids=["default-tables", "command-topic"])
def test_sigterm_stops_the_server_cleanly_and_a_restart_replays_the_command_topic(
    kafka_broker, tmp_path, extra: tuple[str, ...]
) -> None:
    service_id = f"cli_{uuid.uuid4().hex[:8]}"
    log = tmp_path / "server.log"
    process, url = _start(kafka_broker.bootstrap_servers, service_id, tmp_path / "state", log, extra)
    try:
        statement = f"CREATE STREAM KEPT (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{service_id}', VALUE_FORMAT='JSON', PARTITIONS=1);"
        answer = httpx.post(f"{url}/ksql", json={"ksql": statement}, timeout=60)
        assert answer.status_code == 200, answer.text
    finally:
        code = _stop(process)
    assert code == 0, log.read_text()
    assert "kspark server: stopped." in log.read_text()
    # Without --metastore the statement is a row of the UserDataSources table, not a command.
    held = "command_topic" if extra else "metastore_UserDataSources"
    records = read_topic(kafka_broker.bootstrap_servers, f"_confluent-ksql-{service_id}_{held}", timeout=10)
    assert len(records) == 1 and (extra or records[0].key == b"KEPT")

    process, url = _start(kafka_broker.bootstrap_servers, service_id, tmp_path / "state", log, extra)
    try:
        streams = httpx.post(f"{url}/ksql", json={"ksql": "SHOW STREAMS;"}, timeout=60).json()[0]["streams"]
        assert [s["name"] for s in streams] == ["KEPT"]
    finally:
        assert _stop(process) == 0


@pytest.mark.long
@pytest.mark.system
def test_sigterm_with_push_queries_open_ends_their_streams_and_exits(kafka_broker, tmp_path) -> None:
    """An open push query with no new rows held SIGTERM off (the server ran on until SIGKILL)."""
    from tests.engine.server.test_http import _open_push

    service_id = f"push_{uuid.uuid4().hex[:8]}"
    log = tmp_path / "server.log"
    process, url = _start(kafka_broker.bootstrap_servers, service_id, tmp_path / "state", log)
    try:
        statement = (f"CREATE STREAM QUIET (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{service_id}', "
                     "VALUE_FORMAT='JSON', PARTITIONS=1);")
        assert httpx.post(f"{url}/ksql", json={"ksql": statement}, timeout=60).status_code == 200
        waiting = _open_push(url, "SELECT * FROM QUIET EMIT CHANGES;")
        _open_push(url, "SELECT ID FROM QUIET EMIT CHANGES;").close()  # a client that went away
        process.send_signal(signal.SIGTERM)
        started = time.monotonic()
        code = process.wait(timeout=45)
        stopped_in = time.monotonic() - started
    finally:
        if process.poll() is None:
            process.kill()
    assert code == 0, log.read_text()
    assert stopped_in < 30, f"SIGTERM took {stopped_in:.1f} s"
    rest = b""
    while chunk := waiting.recv(65536):
        rest += chunk
    assert rest.endswith(b"0\r\n\r\n"), f"the open push query's stream did not end cleanly: {rest!r}"


def test_a_bad_listen_address_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "server", "--bootstrap-servers", "127.0.0.1:1", "--service-id", "x",
         "--listen", "nowhere", "--state-dir", "/tmp/unused"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode != 0
    assert done.stderr.strip() == "kspark: --listen takes HOST:PORT, got 'nowhere'."


def test_the_config_file_takes_java_style_properties(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# comment\nksql.streams.auto.offset.reset=earliest\n\nksql.persistence.wrap.single.values: false\n")
    assert read_config(str(path)) == {
        "ksql.streams.auto.offset.reset": "earliest",
        "ksql.persistence.wrap.single.values": "false",
    }


def _server_with_config(config: Path, state: Path) -> subprocess.CompletedProcess[str]:
    """``kspark server --config config`` on a broker that is not there (a bad file stops it first)."""
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "server", "--bootstrap-servers", "127.0.0.1:1", "--service-id", "x",
         "--state-dir", str(state), "--config", str(config)],
        capture_output=True, text=True, timeout=60,
    )


def test_a_config_file_setting_a_semantic_config_kspark_does_not_implement_is_one_line(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("ksql.streams.auto.offset.reset=earliest\nksql.timestamp.throw.on.invalid=sometimes\n")
    done = _server_with_config(path, tmp_path / "state")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"kspark: {path}: kspark implements ksql.timestamp.throw.on.invalid only as false/true (false: a record with "
        "an invalid timestamp is logged and skipped; true: it stops the query); it cannot be set to 'sometimes'.")


def test_a_config_file_setting_a_bad_request_limit_is_one_line(tmp_path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("kspark.server.max.concurrent.requests=0\n")
    done = _server_with_config(path, tmp_path / "state")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"kspark: {path}: Invalid value '0' for configuration kspark.server.max.concurrent.requests: "
        "expected an integer at least 1.")
