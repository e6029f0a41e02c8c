"""CORS for ``kspark server``: ksqlDB's CORS filter, set by ``access.control.allow.origin``,
``access.control.allow.methods`` and ``access.control.allow.headers`` in the server's config.

    app = CorsMiddleware(app, Cors(origins_pattern("https://*.example.com"), ("GET", "POST"), ()))

Without ``access.control.allow.origin`` there is no filter. With it, as ksqlDB's (Vert.x's
``CorsHandler`` with credentials allowed; ``/ws/`` paths are left out):

- a request without an ``Origin`` header passes as it is;
- a request whose ``Origin`` the origins do not match (the whole origin, ``*`` any text) is
  answered 403;
- a preflight (``OPTIONS`` with ``Access-Control-Request-Method``) is answered 204 with
  ``Access-Control-Allow-Origin`` (the request's origin), ``Access-Control-Allow-Credentials:
  true``, ``Access-Control-Allow-Methods`` and ``Access-Control-Allow-Headers`` (ksqlDB's
  defaults GET, POST, HEAD and X-Requested-With, Content-Type, Accept, Origin), before
  authentication;
- any other request goes on, its answer carrying ``Access-Control-Allow-Origin`` and
  ``Access-Control-Allow-Credentials``.
"""

from __future__ import annotations

import re
from typing import Any

from engine.server.early_answer import answer_json
from engine.server.entities import generic_error
from engine.server.rest_config import Cors

EXCLUDED_PREFIXES = ("/ws/",)
FORBIDDEN_CODE = 40300
INVALID_ORIGIN = "CORS Rejected - Invalid origin"


class CorsMiddleware:
    """ASGI middleware applying ``cors`` to every HTTP request."""

    def __init__(self, app: Any, cors: Cors) -> None:
        self.app = app
        self.cors = cors
        self.origins = re.compile(cors.origins)

    @property
    def routes(self) -> Any:
        """The wrapped application's routes."""
        return self.app.routes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or str(scope.get("path", "")).startswith(EXCLUDED_PREFIXES):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        origin = headers.get(b"origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        text = origin.decode("latin-1")
        if not self.origins.fullmatch(text):
            await answer_json(scope, receive, send, 403, generic_error(FORBIDDEN_CODE, INVALID_ORIGIN))
            return
        allow = [(b"access-control-allow-origin", origin), (b"access-control-allow-credentials", b"true")]
        if scope.get("method") == "OPTIONS" and b"access-control-request-method" in headers:
            await send({"type": "http.response.start", "status": 204, "headers": [
                *allow,
                (b"access-control-allow-methods", ",".join(self.cors.methods).encode("latin-1")),
                (b"access-control-allow-headers", ",".join(self.cors.headers).encode("latin-1")),
                (b"content-length", b"0"),
            ]})
            await send({"type": "http.response.body", "body": b""})
            return

        async def with_allow(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *allow]}
            await send(message)

        await self.app(scope, receive, with_allow)
