"""A stdlib HTTP(S) stand-in server in a thread, for tests that need a peer answering as they
script it (a registry front, a slow server, a mutual-TLS server, a site's files)."""

from __future__ import annotations

import contextlib
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing and answers JSON with ``send_json``."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass

    def send_json(self, status: int, body: Any) -> None:
        self.send_bytes(status, json.dumps(body).encode("utf-8"), "application/json")

    def send_bytes(self, status: int, content: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def request_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))


@contextlib.contextmanager
def standing_in(handler: Any, *, tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """Serve ``handler`` (a request handler class or factory) on a free local port in a thread,
    over TLS with the server-side context ``tls``; yields the base URL, and stops the server
    (its request threads too) on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="stand-in", daemon=True)
    thread.start()
    scheme = "https" if tls is not None else "http"
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
