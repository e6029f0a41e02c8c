"""What the fault tests share: a broker behind toxiproxy, and kspark servers on the proxy.

Every test gets a broker of its own (it stops, pauses and restarts it), reached by kspark
through a toxiproxy proxy (``engine.components.toxiproxy``), while the test itself writes
and reads the topics on the broker's direct listener, whatever the proxy does. The helpers
are in ``tests/faults/support.py``.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from engine.components.process import free_port
from engine.components.toxiproxy import ProxiedBroker, Toxiproxy
from tests.faults.support import FaultyKafka, Server


@pytest.fixture(scope="session")
def toxiproxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toxiproxy]:
    """One toxiproxy server for the run (built with go install on first use)."""
    with Toxiproxy(tmp_path_factory.mktemp("toxiproxy"), stop_with_parent=True) as server:
        yield server


@pytest.fixture
def faulty_kafka(toxiproxy: Toxiproxy, tmp_path: Path) -> Iterator[FaultyKafka]:
    """A broker of this test's own behind a proxy; stopped (and resumed first) at the end."""
    port = free_port()
    broker = ProxiedBroker(tmp_path / "broker", port, stop_with_parent=True)
    proxy = toxiproxy.create(f"kafka_{uuid.uuid4().hex[:8]}", broker.proxied_listener, listen_port=port)
    kafka = FaultyKafka(broker, proxy)
    try:
        kafka.start()
        yield kafka
    finally:
        pid = broker.running_pid()
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        broker.stop()
        toxiproxy.request("DELETE", f"/proxies/{proxy.name}")


@pytest.fixture
def start_servers(tmp_path: Path) -> Iterator[Callable[..., list[Server]]]:
    """start_servers(bootstrap, n): n servers of one new service, healthy; stopped at the end."""
    started: list[Server] = []

    def start(bootstrap: str, count: int = 1, *args: str) -> list[Server]:
        service = f"faults_{uuid.uuid4().hex[:8]}"
        servers = [Server(bootstrap, service, tmp_path / "state", log=tmp_path / f"server{i}.log", args=args)
                   for i in range(count)]
        started.extend(servers)
        for server in servers:
            server.start()
        return servers

    yield start
    for server in started:
        server.stop(timeout=60)


