"""Toxiproxy, a TCP proxy that injects network faults, for the fault tests; and a broker behind it.

    proxy = Toxiproxy("/tmp/toxiproxy")          # its API on a free port
    proxy.start(); proxy.wait_ready()
    kafka = proxy.create("kafka", upstream="127.0.0.1:9092")   # listens on a free port
    kafka.add_latency(1000)                      # every byte from the broker 1 s late
    kafka.disable()                              # connections refused and cut
    kafka.enable(); kafka.remove_toxics()
    proxy.stop()

Toxiproxy 2.5.0 (Shopify's, MIT) is built from the Go module proxy with ``go install
github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0`` into ``kspark_home()/toxiproxy-2.5.0/bin``
on first use (a Go toolchain on PATH is needed then, and only then). Files in the proxy's
directory::

    toxiproxy.log    the server's output
    toxiproxy.pid    pid of the running server; removed by stop()
    toxiproxy.json   the last API port used, reused by the next start when free
    proxies.json     the proxies created at start (none): its path marks the process as this one's

A Kafka client learns the broker's address from the broker itself (its advertised listener), so
a proxy stays in the path only when the broker advertises the proxy's port: ``ProxiedBroker``
adds a listener of its own (``PROXIED``, on a port fixed for the object's life) that advertises
the proxy's port. Its ``PLAINTEXT`` listener stays direct, for the broker's own use and for
tests that check the topics whatever the proxy does.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from engine.components.broker import Broker
from engine.components.maven import kspark_home
from engine.components.process import HOST, JvmComponent, file_lock, free_port
from engine.errors import ComponentError

TOXIPROXY_VERSION = "2.5.0"
MODULE = "github.com/Shopify/toxiproxy/v2"
PACKAGE = f"{MODULE}/cmd/server"  # 2.5.0 names its server command cmd/server
EXECUTABLE = "toxiproxy-server"
PID_FILE = "toxiproxy.pid"
LOG_FILE = "toxiproxy.log"
STATE_FILE = "toxiproxy.json"
PROXIES_FILE = "proxies.json"
PROXIED_LISTENER = "PROXIED"


def executable_path(home: Path | None = None) -> Path:
    """Where the built toxiproxy server lives in kspark's cache."""
    return (home or kspark_home()) / f"toxiproxy-{TOXIPROXY_VERSION}" / "bin" / EXECUTABLE


def fetch_toxiproxy(home: Path | None = None, *, timeout: float = 900.0) -> Path:
    """The toxiproxy server executable, built with ``go install`` on first use.

    Raises ``ComponentError`` when Go is missing or the build fails, with go's last lines.
    """
    target = executable_path(home)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / ".lock"):
        if target.exists():
            return target
        go = shutil.which("go")
        if go is None:
            raise ComponentError(
                f"Go is not installed (no 'go' on PATH): building toxiproxy {TOXIPROXY_VERSION} "
                f"from the Go module proxy needs it once (then {target} is reused)."
            )
        print(f"kspark: building toxiproxy {TOXIPROXY_VERSION} with go install {PACKAGE} ...",
              file=sys.stderr, flush=True)
        started = time.monotonic()
        env = {**os.environ, "GOBIN": str(target.parent), "GOFLAGS": "-buildvcs=false"}
        try:
            done = subprocess.run([go, "install", f"{PACKAGE}@v{TOXIPROXY_VERSION}"], env=env,
                                  capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise ComponentError(f"go install {PACKAGE} did not finish within {timeout:.0f} s.") from None
        built = target.parent / "server"
        if done.returncode != 0 or not built.exists():
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:]) or "no output"
            raise ComponentError(f"Cannot build toxiproxy with go install {PACKAGE}@v{TOXIPROXY_VERSION}: {tail}")
        os.replace(built, target)
        print(f"kspark: built toxiproxy in {time.monotonic() - started:.0f} s.", file=sys.stderr, flush=True)
        return target


class Toxiproxy(JvmComponent):
    """A toxiproxy server living in ``directory``, its HTTP API on ``port`` (None: a free one).

    Not a JVM, but a process like the others: pid and state files, SIGTERM to stop. With
    ``stop_with_parent`` it is killed when the starting process dies (Linux only).
    """

    WHAT = "Toxiproxy"
    PID_FILE = PID_FILE
    STATE_FILE = STATE_FILE

    def __init__(self, directory: str | os.PathLike[str], port: int | None = None, *,
                 home: Path | None = None, stop_with_parent: bool = False) -> None:
        self.directory = Path(directory).resolve()
        self.port = port or None
        self.home = home
        self.stop_with_parent = stop_with_parent
        self._process: subprocess.Popen[bytes] | None = None
        if self.port is None and self.running_pid() is not None:
            self.port = self.saved_port()

    def command_marker(self) -> str:
        return str(self.directory / PROXIES_FILE)

    @property
    def api_url(self) -> str:
        if self.port is None:
            raise ComponentError(f"Toxiproxy in {self.directory} has no port yet: start it first.")
        return f"http://{HOST}:{self.port}"

    def start(self) -> bool:
        """Start the server in the background; False if one already runs in this directory."""
        if self.running_pid() is not None:
            self.port = self.saved_port() or self.port
            return False
        executable = fetch_toxiproxy(self.home)
        self.directory.mkdir(parents=True, exist_ok=True)
        port = self._choose_port()
        (self.directory / PROXIES_FILE).write_text("[]\n", encoding="utf-8")
        self._spawn([str(executable), "-host", HOST, "-port", str(port), "-config", str(self.directory / PROXIES_FILE)],
                    self.directory / LOG_FILE, port=port)
        self.port = port
        return True

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until the API answers /version; raise if the server dies or the time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            if self.running_pid() is None:
                raise ComponentError(f"Toxiproxy in {self.directory} exited during start-up: {self._tail()}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                with urllib.request.urlopen(f"{self.api_url}/version", timeout=2) as answer:
                    if answer.status == 200:
                        return
            if time.monotonic() >= deadline:
                raise ComponentError(f"Toxiproxy in {self.directory} did not answer on {self.api_url} "
                                     f"within {timeout:.0f} s; see {self.directory / LOG_FILE}.")
            time.sleep(0.1)

    # -- the API ---------------------------------------------------------------------------

    def create(self, name: str, upstream: str, listen_port: int | None = None) -> Proxy:
        """A proxy ``name`` listening on ``listen_port`` (None: a free one), forwarding to ``upstream``."""
        port = listen_port or free_port()
        self.request("POST", "/proxies", {"name": name, "listen": f"{HOST}:{port}", "upstream": upstream,
                                          "enabled": True})
        return Proxy(self, name, port)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """One call of the HTTP API; its JSON answer (None when empty). Errors name the call."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        call = urllib.request.Request(f"{self.api_url}{path}", data=data, method=method,
                                      headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(call, timeout=10) as answer:
                text = answer.read().decode("utf-8")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", errors="replace").strip()
            raise ComponentError(f"Toxiproxy refused {method} {path}: HTTP {exc.code} {detail}") from None
        except (OSError, urllib.error.URLError) as exc:
            raise ComponentError(f"Toxiproxy on {self.api_url} did not answer {method} {path}: {exc}") from None
        return json.loads(text) if text.strip() else None

    def _tail(self) -> str:
        try:
            lines = (self.directory / LOG_FILE).read_text(encoding="utf-8", errors="replace").strip().splitlines()
        except OSError:
            return "no output"
        return " | ".join(lines[-3:]) or "no output"


class Proxy:
    """One proxy of a toxiproxy server: its listen port, and the faults it injects."""

    def __init__(self, server: Toxiproxy, name: str, port: int) -> None:
        self.server = server
        self.name = name
        self.port = port

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def enable(self) -> None:
        """Accept and forward connections again."""
        self.server.request("POST", f"/proxies/{self.name}", {"enabled": True})

    def disable(self) -> None:
        """Close every connection through the proxy and refuse new ones (the network cut)."""
        self.server.request("POST", f"/proxies/{self.name}", {"enabled": False})

    def add_toxic(self, kind: str, *, stream: str = "downstream", toxicity: float = 1.0,
                  name: str | None = None, **attributes: int) -> str:
        """Add a toxic of ``kind`` to ``stream`` (downstream: towards the client); its name."""
        toxic = name or f"{kind}_{stream}"
        self.server.request("POST", f"/proxies/{self.name}/toxics", {
            "name": toxic, "type": kind, "stream": stream, "toxicity": toxicity, "attributes": attributes,
        })
        return toxic

    def add_latency(self, latency_ms: int, jitter_ms: int = 0, *, stream: str = "downstream") -> str:
        """Every chunk of data ``latency_ms`` (± ``jitter_ms``) late."""
        return self.add_toxic("latency", stream=stream, latency=latency_ms, jitter=jitter_ms)

    def add_timeout(self, timeout_ms: int = 0, *, stream: str = "downstream") -> str:
        """Data stops flowing; the connection closes after ``timeout_ms`` (0: never)."""
        return self.add_toxic("timeout", stream=stream, timeout=timeout_ms)

    def add_reset_peer(self, timeout_ms: int = 0, *, stream: str = "downstream") -> str:
        """Connections reset (TCP RST) after ``timeout_ms``."""
        return self.add_toxic("reset_peer", stream=stream, timeout=timeout_ms)

    def add_bandwidth(self, rate_kb: int, *, stream: str = "downstream") -> str:
        """At most ``rate_kb`` KB/s through the proxy."""
        return self.add_toxic("bandwidth", stream=stream, rate=rate_kb)

    def remove_toxic(self, name: str) -> None:
        self.server.request("DELETE", f"/proxies/{self.name}/toxics/{name}")

    def toxics(self) -> list[str]:
        return [toxic["name"] for toxic in self.server.request("GET", f"/proxies/{self.name}/toxics") or []]

    def remove_toxics(self) -> None:
        for name in self.toxics():
            self.remove_toxic(name)


class ProxiedBroker(Broker):
    """A development broker with one more listener, ``PROXIED``, advertising ``proxy_port``:
    clients bootstrapping through a proxy on that port forwarding to ``proxied_listener``
    keep talking through the proxy. The listener's port is fixed for the object's life, so a
    proxy made once stays right across broker restarts."""

    def __init__(self, directory: str | os.PathLike[str], proxy_port: int, **options: Any) -> None:
        super().__init__(directory, **options)
        self.proxy_port = proxy_port
        self.proxied_port = free_port()

    @property
    def proxied_listener(self) -> str:
        """``HOST:PORT`` of the listener the proxy forwards to."""
        return f"{HOST}:{self.proxied_port}"

    @property
    def proxied_bootstrap_servers(self) -> str:
        """``HOST:PORT`` of the proxy, for the clients that go through it."""
        return f"{HOST}:{self.proxy_port}"

    def _server_properties(self, *args: Any, **kwargs: Any) -> str:
        return with_proxied_listener(super()._server_properties(*args, **kwargs), self.proxied_port, self.proxy_port)


def with_proxied_listener(properties: str, listen_port: int, advertised_port: int) -> str:
    """``server.properties`` text with the ``PROXIED`` listener added: listening on
    ``listen_port``, advertising ``advertised_port``, plain text."""
    additions = {
        "listeners": f"{PROXIED_LISTENER}://{HOST}:{listen_port}",
        "advertised.listeners": f"{PROXIED_LISTENER}://{HOST}:{advertised_port}",
        "listener.security.protocol.map": f"{PROXIED_LISTENER}:PLAINTEXT",
    }
    lines = []
    for line in properties.splitlines():
        key = line.split("=", 1)[0]
        if key in additions:
            line = f"{line},{additions.pop(key)}"
        lines.append(line)
    if additions:
        raise ComponentError(f"The broker's server.properties has no {', '.join(sorted(additions))} line to add "
                             "the PROXIED listener to.")
    return "\n".join(lines) + "\n"

