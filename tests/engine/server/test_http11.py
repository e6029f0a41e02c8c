"""HTTP/1.1 status lines carry the standard reason phrase on Hypercorn (engine.server.http11)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from hypercorn.config import Config
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from engine.server import http11
from tests.engine.server.serving import serving_on_hypercorn


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def hypercorn_url() -> Iterator[tuple[str, int]]:
    async def ok(request):  # noqa: ANN001, ANN202
        return JSONResponse({"ok": True})

    async def refused(request):  # noqa: ANN001, ANN202
        return JSONResponse({"error_code": 40600}, status_code=406)

    app = Starlette(routes=[Route("/ok", ok), Route("/refused", refused)])
    http11.install()
    config = Config()
    port = _free_port()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    with serving_on_hypercorn(app, config, ("127.0.0.1", port)):
        yield "127.0.0.1", port


def _status_line(address: tuple[str, int], path: str) -> bytes:
    with socket.create_connection(address, timeout=10) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while b"\r\n" not in data:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n", 1)[0]


@pytest.mark.parametrize(("path", "line"), [("/ok", b"HTTP/1.1 200 OK"), ("/refused", b"HTTP/1.1 406 Not Acceptable"),
                                            ("/nowhere", b"HTTP/1.1 404 Not Found")])
def test_hypercorn_status_lines_carry_the_reason_phrase(hypercorn_url, path, line) -> None:
    assert _status_line(hypercorn_url, path) == line


def test_a_code_without_a_standard_phrase_gets_none() -> None:
    assert http11.reason_phrase(599) == b"" and http11.reason_phrase(503) == b"Service Unavailable"
