"""HTTP basic authentication for ``kspark server --auth-file FILE``.

The file holds one user a line, in either of the two forms ksqlDB users keep:

    # Jetty's realm properties (ksqlDB's JAAS PropertyFileLoginModule): user: password[, role...]
    fred: letmein, admin
    ann: MD5:0d107d09f5bbe40cade3de5c71e9e9b7
    # htpasswd (htpasswd -s for {SHA}, htpasswd -p for plain text)
    bob:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=

Passwords are plain text, ``MD5:<hex>`` or ``{SHA}<base64>``; other hashes (``CRYPT:``,
``OBF:``, ``$apr1$``, bcrypt) are refused when the file is read, naming the line. Every
endpoint but ``/healthcheck`` and ``/v1/metadata`` (and ``/v1/metadata/id``) answers 401
without valid credentials, with ksqlDB's body.

A ksqlDB server config's ``authentication.roles`` (``engine.server.rest_config``) limits the
users to those with one of its roles (403 for the others; ``*``, the default, and ``**`` let
every user in), ``authentication.skip.paths`` opens more paths (wildcards
``*``) and ``authentication.realm`` names the realm of the ``WWW-Authenticate`` challenge.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import KsqlError
from engine.server.early_answer import answer_json

UNAUTHORIZED_CODE = 40100
FORBIDDEN_CODE = 40300
# ksqlDB routes the health checks before authentication and skips it for its metadata paths.
OPEN_PATHS = frozenset({"/healthcheck", "/chc/ready", "/chc/live", "/v1/metadata", "/v1/metadata/id"})
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
    roles: dict[str, frozenset[str]] = field(default_factory=dict)
    # From the server's config (engine.server.rest_config): more open paths (a regular expression
    # a whole path matches), the roles a user needs one of (None: any user), the challenge's realm.
    open_paths: str | None = None
    allowed_roles: frozenset[str] | None = None
    realm: str = REALM

    @classmethod
    def from_file(cls, path: str | Path) -> BasicAuth:
        """Read a Jetty-style or htpasswd-style file; ``AuthFileError`` names a bad line."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise AuthFileError(f"Cannot read the auth file {path}: {exc.strerror}") from None
        users: dict[str, _Secret] = {}
        roles: dict[str, frozenset[str]] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if not stripped or stripped[0] in "#!":
                continue
            where = f"line {number} of {path}"
            user, sep, rest = stripped.partition(":")
            user = user.strip()
            if not sep or not user:
                raise AuthFileError(f"{where} is not 'user: password[, role...]' nor 'user:hash': {stripped}")
            password, *user_roles = (part.strip() for part in rest.split(","))  # Jetty: roles follow a comma
            if not password:
                raise AuthFileError(f"{where}: user '{user}' has no password.")
            if user in users:
                raise AuthFileError(f"{where}: user '{user}' is listed twice.")
            users[user] = _secret(password, where)
            roles[user] = frozenset(role for role in user_roles if role)
        if not users:
            raise AuthFileError(f"The auth file {path} lists no user: nobody could use the server.")
        return cls(users, roles)

    def check(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header value holds the credentials of a known user."""
        return self.user(authorization) is not None

    def user(self, authorization: str | None) -> str | None:
        """The known user whose credentials an ``Authorization`` header value holds (else None)."""
        if not authorization or not authorization[:6].lower() == "basic ":
            return None
        try:
            decoded = base64.b64decode(authorization[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        user, sep, password = decoded.partition(":")
        secret = self.users.get(user)
        return user if sep and secret is not None and secret.matches(password) else None


def unauthorized_body() -> dict[str, Any]:
    """ksqlDB's answer to a request without valid credentials."""
    return {"@type": "generic_error", "error_code": UNAUTHORIZED_CODE, "message": "Unauthorized"}


class BasicAuthMiddleware:
    """ASGI middleware: HTTP requests to any path but /healthcheck (and the auth's ``open_paths``)
    need valid basic credentials of a user with one of its ``allowed_roles``, and so does a
    WebSocket's opening request (refused before it is accepted: HTTP 403)."""

    def __init__(self, app: Any, auth: BasicAuth) -> None:
        self.app = app
        self.auth = auth
        self.open_paths = re.compile(auth.open_paths) if auth.open_paths else None
        self.roles = auth.allowed_roles
        self.realm = auth.realm or REALM

    @property
    def routes(self) -> Any:
        """The wrapped application's routes."""
        return self.app.routes

    def _permitted(self, user: str) -> bool:
        if self.roles is None:
            return True
        return bool(self.auth.roles.get(user, frozenset()) & self.roles)

    def _open(self, path: str) -> bool:
        return path in OPEN_PATHS or (self.open_paths is not None and self.open_paths.fullmatch(path) is not None)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or self._open(str(scope.get("path", ""))):
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), None)
        user = self.auth.user(header.decode("latin-1") if header is not None else None)
        if user is not None and self._permitted(user):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if user is not None:  # known, but without a role the server's config allows
            await answer_json(scope, receive, send, 403, generic_error_body(FORBIDDEN_CODE, "Forbidden"))
            return
        await answer_json(scope, receive, send, 401, unauthorized_body(),
                          ((b"www-authenticate", f'Basic realm="{self.realm}"'.encode("latin-1")),))


def generic_error_body(code: int, message: str) -> dict[str, Any]:
    return {"@type": "generic_error", "error_code": code, "message": message}


