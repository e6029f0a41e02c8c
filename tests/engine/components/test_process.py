"""The shared JVM component machinery (no JVM: a plain child process stands in)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from engine.components.process import HOST, JvmComponent, command_line, java
from engine.errors import ComponentError


class Sleeper(JvmComponent):
    WHAT = "The sleeper"
    PID_FILE = "sleeper.pid"
    STATE_FILE = "sleeper.json"

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.port = port
        self.stop_with_parent = True
        self._process = None

    def command_marker(self) -> str:
        return f"--dir={self.directory}"

    def start(self) -> bool:
        port = self._choose_port()
        code = "import time; time.sleep(60)"
        self._spawn([sys.executable, "-c", code, f"--dir={self.directory}"], self.directory / "out.log", port=port)
        self.port = port
        return True

    def wait_ready(self, timeout: float = 60.0) -> None:
        return None


def test_a_started_component_is_found_again_by_its_pid_file_and_stopped(tmp_path: Path) -> None:
    with Sleeper(tmp_path) as sleeper:
        pid = sleeper.running_pid()
        assert pid is not None and f"--dir={tmp_path}" in (command_line(pid) or "")
        again = Sleeper(tmp_path)
        assert again.running_pid() == pid and again.saved_port() == sleeper.port
    assert Sleeper(tmp_path).running_pid() is None
    assert not (tmp_path / Sleeper.PID_FILE).exists()
    assert Sleeper(tmp_path).stop() is False  # nothing runs: stop says so


def test_a_pid_file_naming_another_process_is_stale(tmp_path: Path) -> None:
    (tmp_path / Sleeper.PID_FILE).write_text(f"{os.getpid()}\n", encoding="utf-8")  # pytest's pid
    assert Sleeper(tmp_path).running_pid() is None


def test_a_busy_port_is_refused_with_a_message_naming_it(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind((HOST, 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ComponentError, match=f"Port {port} on {HOST} is already in use"):
            Sleeper(tmp_path, port).start()


def test_java_missing_names_who_needs_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(ComponentError, match="the sleeper needs Java 17"):
        java("the sleeper")
