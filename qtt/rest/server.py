"""A ``kspark server`` subprocess for a REST QTT run: started, waited for, stopped.

    server = ServerProcess(bootstrap_servers, work_dir / "server-1",
                           properties={"ksql.schema.registry.url": registry_url})
    server.start(timeout=180)          # returns once GET /healthcheck answers 200
    ...
    server.stop()                      # SIGTERM, SIGKILL after 30 s

Each start uses a fresh service id and state dir, so a restarted server begins with an
empty metastore (the runner restarts it when a case leaves sources it cannot drop).

With ``tls=ServerTls.make(directory)`` the server serves HTTPS with certificates made for the
run (``engine.components.certificates``: a CA, the server's for 127.0.0.1, a client's) and
asks every client for a certificate signed by that CA; ``tls.client`` is the runner's side.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from qtt.rest.client import ClientTls, RestClient
from qtt.rest.processes import die_with_parent, free_port, stop_process, tail


class ServerStartError(Exception):
    """The server did not start or did not become healthy; the message says why."""


def server_command() -> list[str]:
    """How to run ``kspark``: the console script next to this Python, else ``-m engine.cli``."""
    script = Path(sys.executable).with_name("kspark")
    if script.is_file():
        return [str(script)]
    found = shutil.which("kspark")
    return [found] if found else [sys.executable, "-m", "engine.cli"]


@dataclass(frozen=True, slots=True)
class ServerTls:
    """A started server's HTTPS: its PEM certificate and key, the CA its clients' certificates
    must be signed by (None: no client certificates), and the runner's client side."""

    cert: str
    key: str
    client_ca: str | None
    client: ClientTls

    @staticmethod
    def make(directory: Path) -> ServerTls:
        """Certificates made in ``directory``: the server's for 127.0.0.1, mutual TLS."""
        from engine.components.certificates import make_pki

        pki = make_pki(directory)
        return ServerTls(cert=str(pki.server_pem), key=str(pki.server_pem), client_ca=str(pki.ca),
                         client=ClientTls(ca=str(pki.ca), cert=str(pki.client_pem)))

    def options(self) -> list[str]:
        """``kspark server``'s options for it."""
        options = ["--tls-cert", self.cert, "--tls-key", self.key]
        return [*options, "--tls-client-ca", self.client_ca] if self.client_ca else options


class ServerProcess:
    """One ``kspark server`` child living in ``directory`` (state dir and log)."""

    def __init__(
        self, bootstrap_servers: str, directory: Path, *, properties: Mapping[str, str] | None = None,
        tls: ServerTls | None = None,
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.directory = directory
        self.properties = dict(properties or {})  # ksql.* properties, passed with --config
        self.tls = tls
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.service_id = ""
        self.log = directory / "server.log"

    def command(self, port: int, state_dir: Path) -> list[str]:
        """The ``kspark server`` command line; the properties go to ``server.properties`` (``--config``)."""
        command = [
            *server_command(),
            "server",
            "--bootstrap-servers",
            self.bootstrap_servers,
            "--service-id",
            self.service_id,
            "--listen",
            f"127.0.0.1:{port}",
            "--state-dir",
            str(state_dir),
        ]
        if self.properties:
            config = self.directory / "server.properties"
            config.write_text(
                "".join(f"{name}={value}\n" for name, value in self.properties.items()), encoding="utf-8"
            )
            command += ["--config", str(config)]
        if self.tls is not None:
            command += self.tls.options()
        return command

    def start(self, *, timeout: float = 180.0) -> str:
        """Start the server and wait for GET /healthcheck; returns its URL."""
        self.directory.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.service_id = f"qtt_rest_{uuid.uuid4().hex[:8]}"
        state_dir = self.directory / "state"
        state_dir.mkdir(exist_ok=True)
        command = self.command(port, state_dir)
        self.url = f"{'https' if self.tls else 'http'}://127.0.0.1:{port}"
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        client = self.client()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise ServerStartError(
                    f"kspark server exited during start-up (exit code {code}): "
                    f"{tail(self.log) or 'no output'} (log: {self.log})"
                )
            if client.healthy():
                return self.url
            time.sleep(0.5)
        self.stop()
        raise ServerStartError(
            f"kspark server did not answer GET {self.url}/healthcheck within {timeout:.0f} s "
            f"(log: {self.log}): {tail(self.log) or 'no output'}"
        )

    def client(self) -> RestClient:
        """A client of the started server (over HTTPS with the runner's certificate)."""
        return RestClient(self.url, tls=self.tls.client if self.tls else None)

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 30 s)."""
        if self.process is not None:
            stop_process(self.process, timeout=30)
            self.process = None
