"""HTTP basic authentication for ``kspark server --auth-file FILE``.

The file holds one user a line, in either of the two forms ksqlDB users keep:

    # Jetty's realm properties (ksqlDB's JAAS PropertyFileLoginModule): user: password[, role...]
    fred: letmein, admin
    ann: MD5:0d107d09f5bbe40cade3de5c71e9e9b7
    # htpasswd (htpasswd -s for {SHA}, htpasswd -p for plain text)
    bob:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=

Passwords are plain text, ``MD5:<hex>`` or ``{SHA}<base64>``; other hashes (``CRYPT:``,
``OBF:``, ``$apr1$``, bcrypt) are refused when the file is read, naming the line. Roles are
read and ignored: every known user may use every endpoint. Every endpoint but
``/healthcheck`` answers 401 without valid credentials, with ksqlDB's body.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import KsqlError

UNAUTHORIZED_CODE = 40100
OPEN_PATHS = frozenset({"/healthcheck", "/chc/ready", "/chc/live"})  # ksqlDB routes them before auth
REALM = "KsqlServer-Props"


class AuthFileError(KsqlError):
    """An --auth-file that cannot be read or has a malformed line."""


@dataclass(frozen=True, slots=True)
class _Secret:
    scheme: str  # plain, md5, sha
    value: str

    def matches(self, password: str) -> bool:
        if self.scheme == "md5":
            given = hashlib.md5(password.encode("utf-8")).hexdigest()
            return hmac.compare_digest(given, self.value.lower())
        if self.scheme == "sha":
            given = base64.b64encode(hashlib.sha1(password.encode("utf-8")).digest()).decode("ascii")
            return hmac.compare_digest(given, self.value)
        return hmac.compare_digest(password.encode("utf-8"), self.value.encode("utf-8"))


def _secret(text: str, where: str) -> _Secret:
    if text.startswith("MD5:"):
        digest = text[4:]
        if len(digest) != 32 or any(c not in "0123456789abcdefABCDEF" for c in digest):
            raise AuthFileError(f"{where}: 'MD5:' must be followed by 32 hex digits.")
        return _Secret("md5", digest)
    if text.startswith("{SHA}"):
        return _Secret("sha", text[5:])
    for prefix in ("CRYPT:", "OBF:", "$apr1$", "$2y$", "$2a$", "$2b$", "$1$", "$5$", "$6$"):
        if text.startswith(prefix):
            raise AuthFileError(
                f"{where}: passwords hashed as '{prefix}' are not supported; use plain text, "
                "'MD5:<hex>' or '{SHA}<base64>' (htpasswd -s)."
            )
    return _Secret("plain", text)


@dataclass(frozen=True, slots=True)
class BasicAuth:
    """The users of an auth file and their passwords."""

    users: dict[str, _Secret]

    @classmethod
    def from_file(cls, path: str | Path) -> BasicAuth:
        """Read a Jetty-style or htpasswd-style file; ``AuthFileError`` names a bad line."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise AuthFileError(f"Cannot read the auth file {path}: {exc.strerror}") from None
        users: dict[str, _Secret] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if not stripped or stripped[0] in "#!":
                continue
            where = f"line {number} of {path}"
            user, sep, rest = stripped.partition(":")
            user = user.strip()
            if not sep or not user:
                raise AuthFileError(f"{where} is not 'user: password[, role...]' nor 'user:hash': {stripped}")
            password = rest.split(",", 1)[0].strip()  # Jetty: the roles follow a comma
            if not password:
                raise AuthFileError(f"{where}: user '{user}' has no password.")
            if user in users:
                raise AuthFileError(f"{where}: user '{user}' is listed twice.")
            users[user] = _secret(password, where)
        if not users:
            raise AuthFileError(f"The auth file {path} lists no user: nobody could use the server.")
        return cls(users)

    def check(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value holds the credentials of a known user."""
        if not authorization or not authorization[:6].lower() == "basic ":
            return False
        try:
            decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        user, sep, password = decoded.partition(":")
        secret = self.users.get(user)
        return bool(sep) and secret is not None and secret.matches(password)


def unauthorized_body() -> dict[str, Any]:
    """ksqlDB's answer to a request without valid credentials."""
    return {"@type": "generic_error", "error_code": UNAUTHORIZED_CODE, "message": "Unauthorized"}


class BasicAuthMiddleware:
    """ASGI middleware: HTTP requests to any path but /healthcheck need valid basic credentials,
    and so does a WebSocket's opening request (refused before it is accepted: HTTP 403)."""

    def __init__(self, app: Any, auth: BasicAuth) -> None:
        self.app = app
        self.auth = auth

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), None)
        if self.auth.check(header.decode("latin-1") if header is not None else None):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps(unauthorized_body()).encode("utf-8")
        await send({
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
                (b"www-authenticate", f'Basic realm="{REALM}"'.encode("ascii")),
            ],
        })
        await send({"type": "http.response.body", "body": body})
