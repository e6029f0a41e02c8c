"""``kspark broker start|stop|status`` on a real broker."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from engine.cli import main
from engine.components.broker import Broker
from engine.kafka import TopicAdmin


@pytest.mark.system
def test_start_status_stop_and_restart_keep_the_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = str(tmp_path / "kafka")
    try:
        assert main(["broker", "start", "--dir", directory]) == 0
        out = capsys.readouterr().out.splitlines()
        bootstrap = out[-1].removeprefix("bootstrap.servers=")
        assert out[-1].startswith("bootstrap.servers=127.0.0.1:")
        TopicAdmin(bootstrap).create_topic("kept", partitions=2)
        cluster_id = (tmp_path / "kafka" / "data" / "meta.properties").read_text()

        assert main(["broker", "status", "--dir", directory]) == 0
        assert capsys.readouterr().out.strip().endswith(f"bootstrap.servers={bootstrap}")

        assert main(["broker", "start", "--dir", directory]) == 0  # already running: reported
        captured = capsys.readouterr()
        assert captured.out.strip() == f"bootstrap.servers={bootstrap}"
        assert "already running" in captured.err

        assert main(["broker", "stop", "--dir", directory]) == 0
        capsys.readouterr()
        assert main(["broker", "status", "--dir", directory]) == 3
        assert capsys.readouterr().out.strip() == "stopped"

        assert main(["broker", "start", "--dir", directory]) == 0  # same storage, not formatted again
        bootstrap = capsys.readouterr().out.splitlines()[-1].removeprefix("bootstrap.servers=")
        assert (tmp_path / "kafka" / "data" / "meta.properties").read_text() == cluster_id
        assert TopicAdmin(bootstrap).partition_count("kept") == 2
    finally:
        Broker(directory).stop()
    assert Broker(directory).running_pid() is None


def test_a_port_in_use_is_one_line_on_stderr_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["broker", "start", "--dir", str(tmp_path), "--port", str(port)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"kspark: Port {port} on 127.0.0.1 is already in use: choose another port or stop what listens there.\n"


def test_stopping_where_nothing_runs_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["broker", "stop", "--dir", str(tmp_path)]) == 0
    assert "no Kafka broker runs in" in capsys.readouterr().err
