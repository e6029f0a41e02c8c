"""What every real component the project runs shares (the Kafka broker, the schema registry).

A component is a JVM living in a directory of its own: started in its own session, found
again through a pid file (checked against its command line, so a reused pid is never taken
for it), listening on a port it chose and saved in a state file, stopped with SIGTERM and,
after a timeout, SIGKILL. Subclasses say how to start it and how to know it is ready.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Self

from engine.errors import ComponentError

HOST = "127.0.0.1"


class JvmComponent:
    """A JVM in ``directory`` on ``port``; subclasses define ``start`` and ``wait_ready``."""

    WHAT: ClassVar[str]  # "The Kafka broker": starts the messages that name it
    PID_FILE: ClassVar[str]
    STATE_FILE: ClassVar[str]

    directory: Path
    port: int | None
    stop_with_parent: bool
    _process: subprocess.Popen[bytes] | None

    def start(self) -> bool:
        raise NotImplementedError

    def wait_ready(self, timeout: float = 60.0) -> None:
        raise NotImplementedError

    def command_marker(self) -> str:
        """A text the component's command line holds for this directory and no other."""
        raise NotImplementedError

    # -- state ---------------------------------------------------------------------------

    def saved_state(self) -> dict[str, Any]:
        """What the last start saved (its port among others), or {}."""
        try:
            state = json.loads((self.directory / self.STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return state if isinstance(state, dict) else {}

    def saved_port(self) -> int | None:
        port = self.saved_state().get("port")
        return port if isinstance(port, int) else None

    def running_pid(self) -> int | None:
        """The pid of the component running in this directory, or None."""
        try:
            pid = int((self.directory / self.PID_FILE).read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return None
        if not self._alive(pid):
            return None
        command = command_line(pid)
        if command is not None and self.command_marker() not in command:
            return None  # a stale pid file naming a pid now reused by another process
        return pid

    # -- lifecycle -----------------------------------------------------------------------

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop it (SIGTERM, then SIGKILL after ``timeout``); False if none ran."""
        pid = self.running_pid()
        if pid is None:
            (self.directory / self.PID_FILE).unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        if self._wait_exit(pid, timeout):
            self._after_clean_exit()
        else:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            if not self._wait_exit(pid, 10.0):
                raise ComponentError(
                    f"{self.WHAT} in {self.directory} (pid {pid}) did not exit after SIGKILL."
                )
        (self.directory / self.PID_FILE).unlink(missing_ok=True)
        return True

    def __enter__(self) -> Self:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- for subclasses --------------------------------------------------------------------

    def _after_clean_exit(self) -> None:
        """Called when the JVM exited on SIGTERM (before the pid file goes)."""

    def _spawn(self, command: list[str], output: Path, **state: Any) -> None:
        """Start ``command`` in its own session, output appended to ``output``; save pid and state."""
        sink = open(output, "ab")  # handed to the child, closed below
        try:
            self._process = subprocess.Popen(
                command,
                cwd=self.directory,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=die_with_parent if self.stop_with_parent else None,
            )
        finally:
            sink.close()
        (self.directory / self.PID_FILE).write_text(f"{self._process.pid}\n", encoding="utf-8")
        (self.directory / self.STATE_FILE).write_text(json.dumps(state) + "\n", encoding="utf-8")

    def _choose_port(self) -> int:
        """The asked port (refused when busy), else the last start's port when free, else any."""
        if self.port is not None:
            if not port_free(self.port):
                raise ComponentError(
                    f"Port {self.port} on {HOST} is already in use: choose another port "
                    "or stop what listens there."
                )
            return self.port
        previous = self.saved_port()
        if previous is not None and port_free(previous):
            return previous
        return free_port()

    def _alive(self, pid: int) -> bool:
        if self._process is not None and self._process.pid == pid:
            return self._process.poll() is None
        return alive(pid)

    def _wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._alive(pid):
                return True
            time.sleep(0.1)
        return not self._alive(pid)


def java(needed_by: str) -> str:
    """The ``java`` executable ($JAVA_HOME first), or a one-line error naming who needs it."""
    java_home = os.environ.get("JAVA_HOME")
    candidate = str(Path(java_home) / "bin" / "java") if java_home else "java"
    found = shutil.which(candidate)
    if found is None:
        where = f"JAVA_HOME={java_home}" if java_home else "PATH"
        raise ComponentError(
            f"Java is not installed (no 'java' on {where}): {needed_by} needs Java 17 or newer."
        )
    return found


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def alive(pid: int) -> bool:
    try:  # reap our own child first: a zombie still answers kill(pid, 0)
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def command_line(pid: int) -> str | None:
    """The command line of ``pid``, or None when the platform does not tell."""
    try:
        text = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        return text.strip() or None  # empty while the process exits
    except OSError:
        pass
    try:
        done = subprocess.run(["ps", "-o", "args=", "-p", str(pid)], capture_output=True, text=True, check=False)
    except OSError:
        return None
    return done.stdout.strip() or None


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) across processes: one fetch or
    build of a component at a time, whichever test worker or command starts it."""
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
