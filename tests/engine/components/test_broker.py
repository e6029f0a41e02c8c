"""The Kafka broker component: start, readiness, status, stop and its errors, on a real JVM."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from engine.components.broker import Broker, BrokerStatus
from engine.errors import ComponentError


def _answers(bootstrap: str) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        return bool(admin.list_topics(timeout=5).brokers)
    except Exception:
        return False


def test_the_session_broker_answers_and_reports_its_status(kafka_broker: Broker) -> None:
    host, port = kafka_broker.bootstrap_servers.split(":")
    assert host == "127.0.0.1" and int(port) > 0
    assert _answers(kafka_broker.bootstrap_servers)
    status = kafka_broker.status()
    assert status.running and status.port == int(port)
    assert status.pid == int((kafka_broker.directory / "broker.pid").read_text())
    assert str(status) == f"running (pid {status.pid}), bootstrap.servers={kafka_broker.bootstrap_servers}"


def test_starting_where_a_broker_runs_reports_the_running_one(kafka_broker: Broker) -> None:
    again = Broker(kafka_broker.directory)
    assert again.start() is False
    assert again.bootstrap_servers == kafka_broker.bootstrap_servers
    assert again.running_pid() == kafka_broker.running_pid()


def test_broker_logs_go_to_a_file_in_its_directory(kafka_broker: Broker) -> None:
    log = (kafka_broker.directory / "broker.log").read_text()
    assert "Kafka Server started" in log


def test_a_stopped_directory_reports_stopped(tmp_path: Path) -> None:
    broker = Broker(tmp_path)
    assert broker.status() == BrokerStatus(running=False)
    assert str(broker.status()) == "stopped"
    assert broker.stop() is False


def test_a_stale_pid_file_is_not_a_running_broker(tmp_path: Path) -> None:
    (tmp_path / "broker.pid").write_text(f"{os.getpid()}\n")  # alive, but not a broker
    assert Broker(tmp_path).running_pid() is None


def test_a_port_in_use_is_refused_before_starting(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ComponentError, match=f"Port {port} on 127.0.0.1 is already in use"):
            Broker(tmp_path, port).start()
    assert not (tmp_path / "broker.pid").exists()


def test_missing_java_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(ComponentError, match="Java is not installed"):
        Broker(tmp_path / "broker").start()


def test_an_invalid_setting_fails_the_storage_format_with_kafkas_message(tmp_path: Path) -> None:
    with pytest.raises(ComponentError) as raised:
        Broker(tmp_path, config={"log.segment.bytes": "-5"}).start()
    message = str(raised.value)
    assert message.startswith(f"Cannot format the Kafka storage in {tmp_path / 'data'}: ")
    assert "Invalid value -5 for configuration log.segment.bytes" in message
    assert "\n" not in message
    assert not (tmp_path / "broker.pid").exists()


def test_a_broker_that_dies_in_start_up_reports_the_error_in_its_log(tmp_path: Path) -> None:
    # The listener port is taken after kspark's own check (as in a race with another program).
    with socket.socket() as taken, socket.socket() as controller:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        controller.bind(("127.0.0.1", 0))
        port, controller_port = taken.getsockname()[1], controller.getsockname()[1]
        controller.close()
        listeners = f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}"
        broker = Broker(tmp_path, config={
            "listeners": listeners,
            "advertised.listeners": listeners,
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        })
        assert broker.start() is True
        try:
            with pytest.raises(ComponentError) as raised:
                broker.wait_ready(timeout=60)
        finally:
            broker.stop()
    message = str(raised.value)
    assert message.startswith(f"The Kafka broker in {tmp_path} exited during start-up (exit code 1): ")
    assert f"127.0.0.1:{port}" in message and "Address already in use" in message
    assert "\n" not in message
    assert broker.running_pid() is None
