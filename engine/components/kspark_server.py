"""A ``kspark server`` process on a free port of this machine, started and stopped from Python.

    server = ServerProcess(bootstrap, "svc", state_dir, log=Path("server.log"))
    url = server.start()          # ready: GET /healthcheck answered 200
    ...
    server.stop()                 # SIGTERM, then SIGKILL after the timeout; the exit code

The tests of the server as a process, the load benchmark and the wheel lane start servers
through this class. The process runs ``python -m engine.cli server`` with the given interpreter
(by default this one), so a virtualenv's installed kspark is the one that runs.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine.components.process import HOST, free_port
from engine.errors import ComponentError


class ServerProcess:
    """One ``kspark server`` of ``service_id`` with its output in ``log``."""

    def __init__(self, bootstrap_servers: str, service_id: str, state_dir: Path, *, log: Path,
                 args: tuple[str, ...] = (), scheme: str = "http", verify: Any = True,
                 python: str = sys.executable, cwd: Path | None = None, listen: bool = True) -> None:
        self.port = free_port()
        self.url = f"{scheme}://{HOST}:{self.port}"
        self.log = Path(log)
        self.verify = verify  # httpx's: how to trust an HTTPS server's certificate
        # listen=False: no --listen; the server's --config names its listeners (self.port among them).
        address = ("--listen", f"{HOST}:{self.port}") if listen else ()
        self.command = [python, "-m", "engine.cli", "server", "--bootstrap-servers", bootstrap_servers,
                        "--service-id", service_id, *address, "--state-dir", str(state_dir), *args]
        self.cwd = cwd
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 180.0) -> str:
        """Start the server and wait until its /healthcheck answers 200; its URL."""
        import httpx

        self.process = subprocess.Popen(self.command, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
                                        cwd=self.cwd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ComponentError(f"kspark server exited at start ({self.process.returncode}):\n{self.tail()}")
            try:
                if httpx.get(f"{self.url}/healthcheck", timeout=2, verify=self.verify).status_code == 200:
                    return self.url
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.process.kill()
        raise ComponentError(f"kspark server did not become healthy within {timeout:g} s:\n{self.tail()}")

    def tail(self, lines: int = 20) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def signal(self, sig: int = signal.SIGTERM) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(sig)

    def wait(self, timeout: float = 90.0) -> int | str:
        """The exit code, or ``"killed"`` when the process had to be killed after ``timeout``."""
        if self.process is None:
            return 0
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
            return "killed"

    def stop(self, timeout: float = 90.0) -> int | str:
        """SIGTERM, then SIGKILL after ``timeout``; the exit code (or ``"killed"``)."""
        self.signal(signal.SIGTERM)
        return self.wait(timeout)


def stop_all(servers: list[ServerProcess], timeout: float = 90.0) -> list[int | str]:
    """SIGTERM to every server at once, then wait for each; their exit codes."""
    for server in servers:
        server.signal(signal.SIGTERM)
    return [server.wait(timeout) for server in servers]
