"""A JSON answer sent by a middleware before the application reads the request.

An HTTP/1.1 server can only take the next request of a keep-alive connection once the
current request's body has been read off it. A middleware that refuses a request (401,
403, 429) without reading its body leaves Hypercorn's h11 connection with the client
still sending: Hypercorn then closes the connection after the answer, without
``Connection: close``, and a client that reuses it for its next request sees "Server
disconnected without sending a response". ``answer_json`` reads the body first, up to a
bound; a body it could not read whole (too large, or not sent in time) makes the answer
say ``Connection: close``, so that no client reuses the connection.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

DRAIN_LIMIT_BYTES = 1 << 20
DRAIN_TIMEOUT_SECONDS = 5.0


async def drained(receive: Any, *, limit: int = DRAIN_LIMIT_BYTES, timeout: float = DRAIN_TIMEOUT_SECONDS) -> bool:
    """Read and drop the request's body; True when all of it was read within ``limit`` bytes
    and ``timeout`` seconds."""

    async def read() -> bool:
        seen = 0
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                return False  # http.disconnect: the client is gone
            seen += len(message.get("body", b""))
            if not message.get("more_body"):
                return True
            if seen > limit:
                return False

    try:
        return await asyncio.wait_for(read(), timeout)
    except TimeoutError:
        return False


async def answer_json(scope: dict[str, Any], receive: Any, send: Any, status: int, body_object: Any,
                      extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    """Answer ``status`` with ``body_object`` as JSON; over HTTP/1, after reading the request's
    body (see the module's docstring). HTTP/2 streams end on their own and take no
    ``Connection`` header."""
    whole = scope.get("http_version", "1.1") not in ("1.0", "1.1") or await drained(receive)
    body = json.dumps(body_object).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode("ascii")), *extra]
    if not whole:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
