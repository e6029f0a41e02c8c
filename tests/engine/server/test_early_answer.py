"""A request a middleware refuses (401, 403) before the application reads it leaves its keep-alive
connection usable: the refused request's body is read off it first, so the client's next request
on the same connection is answered (Hypercorn closed the connection after the answer, with no
``Connection: close``, when the body came after the request's head)."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from engine.components.process import HOST, free_port
from engine.server.auth import BasicAuth, BasicAuthMiddleware
from engine.server.cli import hypercorn_config
from engine.server.cors import CorsMiddleware
from engine.server.early_answer import answer_json
from engine.server.rest_config import Cors
from tests.engine.server.serving import serving_on_hypercorn


async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _answers(sock: socket.socket) -> bytes:
    sock.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data or not data.endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _refused_then_reused(app: Any, head: bytes) -> tuple[bytes, bytes]:
    """Send a POST whose body comes 0.3 s after its head, then a second request on the same
    connection; the two answers."""
    port = free_port()
    body = b'{"ksql": "LIST STREAMS;"}'
    with serving_on_hypercorn(app, hypercorn_config(HOST, port), (HOST, port)):
        with socket.create_connection((HOST, port)) as sock:
            sock.sendall(b"POST /ksql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + head
                         + b"Content-Length: %d\r\n\r\n" % len(body))
            time.sleep(0.3)
            sock.sendall(body)
            first = _answers(sock)
            sock.sendall(b"POST /ksql HTTP/1.1\r\nHost: x\r\n" + head + b"Content-Length: %d\r\n\r\n" % len(body)
                         + body)
            return first, _answers(sock)


@pytest.fixture
def auth(tmp_path: Path) -> BasicAuth:
    users = tmp_path / "users"
    users.write_text("fred: letmein, admin\nann: secret, viewer\n")
    return BasicAuth.from_file(users)


def test_a_request_refused_for_its_credentials_keeps_the_connection(auth) -> None:
    first, second = _refused_then_reused(BasicAuthMiddleware(_ok, auth), b"")
    assert first.startswith(b"HTTP/1.1 401") and b"connection: close" not in first.lower()
    assert second.startswith(b"HTTP/1.1 401")


def test_a_request_refused_for_its_role_keeps_the_connection(auth) -> None:
    from dataclasses import replace

    viewer = b"Authorization: Basic YW5uOnNlY3JldA==\r\n"  # ann:secret
    first, second = _refused_then_reused(BasicAuthMiddleware(_ok, replace(auth, allowed_roles=frozenset({"admin"}))),
                                         viewer)
    assert first.startswith(b"HTTP/1.1 403") and second.startswith(b"HTTP/1.1 403")


def test_a_request_from_a_refused_origin_keeps_the_connection() -> None:
    cors = Cors(origins=r"https://.*\.example\.com", methods=("GET", "POST"), headers=())
    first, second = _refused_then_reused(CorsMiddleware(_ok, cors), b"Origin: https://evil.test\r\n")
    assert first.startswith(b"HTTP/1.1 403") and second.startswith(b"HTTP/1.1 403")


def _sent_headers(scope: dict[str, Any], messages: list[dict[str, Any]]) -> dict[bytes, bytes]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(answer_json(scope, receive, send, 429, {"message": "busy"}))
    assert sent[1]["body"] == b'{"message": "busy"}'
    return dict(sent[0]["headers"])


def test_a_body_too_large_to_read_closes_the_connection_with_the_answer() -> None:
    chunk = {"type": "http.request", "body": b"x" * (1 << 20), "more_body": True}
    headers = _sent_headers({"http_version": "1.1"}, [chunk, chunk, chunk])
    assert headers[b"connection"] == b"close"


def test_a_body_read_whole_keeps_the_connection_and_http2_is_not_read() -> None:
    assert b"connection" not in _sent_headers({"http_version": "1.1"},
                                              [{"type": "http.request", "body": b"{}", "more_body": False}])
    assert b"connection" not in _sent_headers({"http_version": "2"}, [])  # nothing to read: not waited for
