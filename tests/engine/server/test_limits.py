"""A server at its limits (engine.server.limits): connections kept, requests queued or refused
with 429 and Retry-After, never dropped. On real Hypercorn with the server's own config; the
service is a stand-in whose statements block until the test lets them go (no Kafka, no Spark)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from engine.components.process import HOST, free_port
from engine.errors import KsqlError
from engine.server.app import create_app
from engine.server.cli import hypercorn_config
from engine.server.limits import ERROR_TOO_MANY_REQUESTS, RequestGate, ServerLimits
from engine.server.metrics import ServerMetrics
from tests.engine.server.serving import serving_on_hypercorn


class BlockingService:
    """Answers ``/ksql`` once ``release`` is set; counts the statements being worked on."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.metrics = ServerMetrics(self)
        self.working = 0
        self.most_working = 0
        self._lock = threading.Lock()

    def execute(self, text: str, properties: Any, variables: Any) -> list[Any]:
        with self._lock:
            self.working += 1
            self.most_working = max(self.most_working, self.working)
        try:
            self.release.wait(timeout=30)
            return []
        finally:
            with self._lock:
                self.working -= 1


@contextlib.contextmanager
def hypercorn_server(limits: ServerLimits) -> Iterator[tuple[str, int, BlockingService]]:
    """The app of a ``BlockingService`` on Hypercorn with ``kspark server``'s config and ``limits``."""
    service = BlockingService()
    port = free_port()
    config = hypercorn_config(HOST, port, limits)
    app = create_app(service, limits=limits)  # type: ignore[arg-type]
    with serving_on_hypercorn(app, config, (HOST, port)):
        try:
            yield HOST, port, service
        finally:
            service.release.set()  # before the server stops: it waits for the blocked requests


def _get(conn: socket.socket, path: str) -> bytes:
    """One keep-alive GET on ``conn``; its whole answer (``b""``: the server closed the connection)."""
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = conn.recv(4096)
        except ConnectionResetError:
            return b""
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += conn.recv(4096)
    return head


def test_an_idle_connection_outlives_a_clients_keep_alive_expiry() -> None:
    # httpx keeps an idle connection 5 s: a server closing its idle connections after those same
    # 5 s resets the requests that clients send on them at that moment.
    with hypercorn_server(ServerLimits()) as (host, port, _), socket.create_connection((host, port), timeout=10) as conn:
        assert _get(conn, "/chc/live").startswith(b"HTTP/1.1 200")
        time.sleep(httpx.Limits().keepalive_expiry + 1.0)  # type: ignore[operator]
        assert _get(conn, "/chc/live").startswith(b"HTTP/1.1 200")


def _post_ksql(url: str) -> httpx.Response:
    return httpx.post(f"{url}/ksql", json={"ksql": "SHOW STREAMS;"}, timeout=30)


def test_a_request_beyond_the_queue_is_answered_429_with_retry_after() -> None:
    limits = ServerLimits(max_concurrent_requests=1, max_queued_requests=1)
    with hypercorn_server(limits) as (host, port, service), ThreadPoolExecutor(2) as pool:
        url = f"http://{host}:{port}"
        working = pool.submit(_post_ksql, url)
        _wait_for(lambda: service.working == 1)
        waiting = pool.submit(_post_ksql, url)
        time.sleep(0.5)  # in the queue by now
        refused = _post_ksql(url)
        assert refused.status_code == 429
        assert refused.headers["retry-after"] == "5"
        body = refused.json()
        assert body["@type"] == "generic_error" and body["error_code"] == ERROR_TOO_MANY_REQUESTS
        assert body["message"] == ("The server is busy: it works on 1 requests at once and 1 more are waiting. "
                                   "Retry after 5 s.")
        assert not waiting.done()
        service.release.set()
        assert working.result().status_code == 200 and waiting.result().status_code == 200
        assert service.most_working == 1


def test_a_request_that_waited_too_long_is_answered_429() -> None:
    limits = ServerLimits(max_concurrent_requests=1, max_queued_requests=4, queue_timeout=0.5)
    with hypercorn_server(limits) as (host, port, service), ThreadPoolExecutor(1) as pool:
        url = f"http://{host}:{port}"
        working = pool.submit(_post_ksql, url)
        _wait_for(lambda: service.working == 1)
        started = time.monotonic()
        refused = _post_ksql(url)
        assert refused.status_code == 429 and 0.4 < time.monotonic() - started < 10
        assert refused.json()["message"] == ("The server is busy: the request waited 0.5 s for one of the 1 "
                                             "requests it works on at once to end. Retry after 5 s.")
        service.release.set()
        assert working.result().status_code == 200
        assert _post_ksql(url).status_code == 200  # the slot the refused request waited for is free


def _wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition did not hold in time"
        time.sleep(0.02)


def test_the_gate_frees_a_slot_when_the_answer_starts() -> None:
    # A streamed answer (a push query, an inserts stream) holds its slot while it starts only.
    streaming = asyncio.Event()
    finish = asyncio.Event()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        streaming.set()
        await finish.wait()
        await send({"type": "http.response.body", "body": b""})

    gate = RequestGate(app, ServerLimits(max_concurrent_requests=1, max_queued_requests=0))
    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def scenario() -> None:
        scope = {"type": "http", "path": "/query-stream", "method": "POST"}
        first = asyncio.create_task(gate(scope, None, send))
        await streaming.wait()
        assert gate.working == 0
        streaming.clear()
        second = asyncio.create_task(gate(scope, None, send))
        await streaming.wait()  # admitted, not refused: the first one's slot was free
        finish.set()
        await asyncio.gather(first, second)

    asyncio.run(scenario())
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [200, 200]


def test_the_limits_come_from_the_config_file() -> None:
    limits = ServerLimits.from_properties({"kspark.server.max.concurrent.requests": "8",
                                           "kspark.server.max.queued.requests": "0",
                                           "kspark.server.queue.timeout.seconds": "2.5",
                                           "ksql.idle.connection.timeout.seconds": "600"})
    assert (limits.max_concurrent_requests, limits.max_queued_requests, limits.queue_timeout,
            limits.idle_connection_timeout) == (8, 0, 2.5, 600.0)
    assert ServerLimits.from_properties({}) == ServerLimits()
    config = hypercorn_config(HOST, 1, limits)
    assert config.keep_alive_timeout == 600.0 and config.backlog == ServerLimits().backlog


@pytest.mark.parametrize(("name", "value", "message"), [
    ("kspark.server.max.concurrent.requests", "0",
     "Invalid value '0' for configuration kspark.server.max.concurrent.requests: expected an integer at least 1."),
    ("kspark.server.max.queued.requests", "many",
     "Invalid value 'many' for configuration kspark.server.max.queued.requests: expected an integer at least 0."),
    ("kspark.server.queue.timeout.seconds", "-1",
     "Invalid value '-1' for configuration kspark.server.queue.timeout.seconds: expected a number of seconds "
     "more than 0."),
])
def test_a_bad_limit_is_refused_naming_it(name, value, message) -> None:
    with pytest.raises(KsqlError) as raised:
        ServerLimits.from_properties({name: value})
    assert str(raised.value) == message


def test_a_client_gone_while_its_request_is_read_is_no_server_error() -> None:
    # Under load clients give up while their body is being read; that is no failure of the
    # server's (no 500, no traceback in its log).
    app = create_app(BlockingService())  # type: ignore[arg-type]
    sent: list[Any] = []

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/ksql", "raw_path": b"/ksql", "query_string": b"",
             "headers": [(b"content-type", b"application/json")], "http_version": "1.1", "scheme": "http",
             "server": ("127.0.0.1", 8088), "client": ("127.0.0.1", 50000), "root_path": "", "asgi": {"version": "3.0"}}
    asyncio.run(app(scope, receive, send))
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [499]
