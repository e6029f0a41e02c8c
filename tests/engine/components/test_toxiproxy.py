"""The toxiproxy component without building it: where it lives, and the error without Go."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.components.toxiproxy import (
    TOXIPROXY_VERSION,
    ProxiedBroker,
    executable_path,
    fetch_toxiproxy,
    with_proxied_listener,
)
from engine.errors import ComponentError


def test_toxiproxy_is_built_into_kspark_home(tmp_path: Path) -> None:
    assert executable_path(tmp_path) == tmp_path / f"toxiproxy-{TOXIPROXY_VERSION}" / "bin" / "toxiproxy-server"


def test_building_toxiproxy_without_go_names_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ComponentError, match=r"Go is not installed \(no 'go' on PATH\): building toxiproxy 2\.5\.0"):
        fetch_toxiproxy(tmp_path)


def test_the_proxied_listener_listens_on_its_own_port_and_advertises_the_proxy() -> None:
    text = ("# Written by kspark\nlisteners=PLAINTEXT://127.0.0.1:45000,CONTROLLER://127.0.0.1:45002\n"
            "advertised.listeners=PLAINTEXT://127.0.0.1:45000,CONTROLLER://127.0.0.1:45002\n"
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\nnode.id=1\n")
    properties = dict(line.split("=", 1) for line in with_proxied_listener(text, 45003, 45001).splitlines()
                      if "=" in line and not line.startswith("#"))
    assert properties["listeners"] == "PLAINTEXT://127.0.0.1:45000,CONTROLLER://127.0.0.1:45002,PROXIED://127.0.0.1:45003"
    assert properties["advertised.listeners"].endswith(",CONTROLLER://127.0.0.1:45002,PROXIED://127.0.0.1:45001")
    assert properties["listener.security.protocol.map"].endswith(",PROXIED:PLAINTEXT")
    assert properties["node.id"] == "1"


def test_the_proxied_listener_needs_the_listener_lines() -> None:
    with pytest.raises(ComponentError, match="no advertised.listeners, listener.security.protocol.map line"):
        with_proxied_listener("listeners=PLAINTEXT://127.0.0.1:1\n", 2, 3)


def test_a_proxied_broker_keeps_its_proxied_port_and_names_the_proxy(tmp_path: Path) -> None:
    broker = ProxiedBroker(tmp_path / "broker", 45001)
    assert broker.proxied_bootstrap_servers == "127.0.0.1:45001"
    assert broker.proxied_listener == f"127.0.0.1:{broker.proxied_port}" != "127.0.0.1:45001"
