"""Child processes of a REST QTT run: killed with the run, stopped in order at its end."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to send SIGTERM to this child when the runner dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def stop_process(process: subprocess.Popen[bytes], *, timeout: float = 30.0) -> None:
    """SIGTERM (a clean shutdown), then SIGKILL after ``timeout`` seconds; waits for the exit."""
    if process.poll() is not None:
        return
    try:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
    except ProcessLookupError:
        pass


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def tail(path: str | os.PathLike[str], lines: int = 5) -> str:
    """The last non-blank lines of a log file, joined by ' | ' (empty when unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = [line.strip() for line in f.read().splitlines()[-200:] if line.strip()]
    except OSError:
        return ""
    return " | ".join(text[-lines:])
