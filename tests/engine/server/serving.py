"""A service behind a real uvicorn on a free port, for the tests that talk HTTP to it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from engine.components.process import HOST, free_port
from engine.server.app import create_app
from engine.server.auth import BasicAuth
from engine.server.service import KsqlService


@contextlib.contextmanager
def serving(service: KsqlService, auth: BasicAuth | None = None) -> Iterator[str]:
    """Serve ``service`` (HTTP/1.1, chunked; with ``auth``, basic authentication) in a thread;
    yields its base URL."""
    with serving_app(create_app(service, auth)) as url:
        yield url


@contextlib.contextmanager
def serving_app(app: Any) -> Iterator[str]:
    """Serve the ASGI ``app`` behind a real uvicorn in a thread; yields its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=HOST, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://{HOST}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def serving_on_hypercorn(app: Any, config: Any, address: tuple[str, int]) -> Iterator[None]:
    """Serve the ASGI ``app`` on Hypercorn with ``config`` (bound to ``address``) in a thread,
    as ``kspark server`` serves; ready once ``address`` takes connections."""
    from hypercorn.asyncio import serve

    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(app, config, shutdown_trigger=stop.wait),),
                              daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(address, timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    try:
        yield
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
