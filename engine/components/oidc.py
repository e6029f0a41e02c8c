"""A small OIDC provider for development and tests: a client-credentials token endpoint and its JWKS.

    with OidcProvider(clients={"kspark": "secret"}, audience="kafka") as provider:
        provider.token_endpoint_url    # http://127.0.0.1:PORT/oauth2/token
        provider.jwks_url              # http://127.0.0.1:PORT/oauth2/jwks
        Broker(directory, security=BrokerSecurity(oidc_jwks_url=provider.jwks_url, oidc_issuer=provider.issuer,
                                                  oidc_audience="kafka"))

``POST /oauth2/token`` takes the OAuth 2 client-credentials grant as Kafka's Java client and
librdkafka send it (the client id and secret in HTTP basic authentication, or as
``client_id``/``client_secret`` form fields; an optional ``scope``) and answers an RS256 JWT
(``sub`` the client id, ``iat``, ``exp``, ``iss`` the provider's URL or the issuer given,
``aud`` when given, ``scope``) signed by
a key made at start; ``GET /oauth2/jwks`` publishes that key. A wrong client or secret is
answered 401. The endpoint serves plain HTTP on the loopback address, in a thread of this
process: it is not for production. ``issued`` counts the tokens handed out per client.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import time
import urllib.parse
import uuid
from collections import Counter
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from engine.components.process import HOST

TOKEN_PATH = "/oauth2/token"
JWKS_PATH = "/oauth2/jwks"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _uint(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


class OidcProvider:
    """A token endpoint for ``clients`` (client id -> secret) and the JWKS of its signing key."""

    def __init__(self, clients: Mapping[str, str], *, audience: str | None = None, issuer: str | None = None,
                 lifetime_seconds: int = 3600) -> None:
        self.clients = dict(clients)
        self.audience = audience
        self._issuer = issuer
        self.lifetime_seconds = lifetime_seconds
        self.issued: Counter[str] = Counter()
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._kid = uuid.uuid4().hex[:12]
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- where ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("The OIDC provider is not started.")
        return f"http://{HOST}:{self._server.server_address[1]}"

    @property
    def issuer(self) -> str:
        """The tokens' ``iss``: the issuer given, else the provider's URL."""
        return self._issuer or self.url

    @property
    def token_endpoint_url(self) -> str:
        return self.url + TOKEN_PATH

    @property
    def jwks_url(self) -> str:
        return self.url + JWKS_PATH

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> OidcProvider:
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
                pass  # the requests carry client secrets: nothing is logged

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                if self.path.split("?", 1)[0] != JWKS_PATH:
                    return self._answer(404, {"error": "not_found"})
                return self._answer(200, provider.jwks())

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                if self.path.split("?", 1)[0] != TOKEN_PATH:
                    return self._answer(404, {"error": "not_found"})
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode("utf-8", "replace"))
                client = provider._client(self.headers.get("Authorization"), form)
                if form.get("grant_type", [""])[0] != "client_credentials":
                    return self._answer(400, {"error": "unsupported_grant_type"})
                if client is None:
                    return self._answer(401, {"error": "invalid_client"})
                scope = form.get("scope", [""])[0]
                return self._answer(200, {"access_token": provider.token(client, scope), "token_type": "Bearer",
                                          "expires_in": provider.lifetime_seconds})

            def _answer(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OidcProvider:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    # -- tokens --------------------------------------------------------------------------

    def jwks(self) -> dict[str, Any]:
        """The JSON Web Key Set of the signing key."""
        numbers = self._key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self._kid,
                          "n": _uint(numbers.n), "e": _uint(numbers.e)}]}

    def token(self, client: str, scope: str = "") -> str:
        """A signed access token for ``client``."""
        now = int(time.time())
        claims: dict[str, Any] = {"sub": client, "iss": self.issuer, "iat": now, "exp": now + self.lifetime_seconds,
                                  "jti": uuid.uuid4().hex}
        if self.audience:
            claims["aud"] = self.audience
        if scope:
            claims["scope"] = scope
        header = {"alg": "RS256", "typ": "JWT", "kid": self._kid}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self._key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
        self.issued[client] += 1
        return f"{signing_input}.{_b64(signature)}"

    def _client(self, authorization: str | None, form: Mapping[str, list[str]]) -> str | None:
        """The client the request authenticates as, or None."""
        client_id, secret = form.get("client_id", [""])[0], form.get("client_secret", [""])[0]
        if authorization and authorization.lower().startswith("basic "):
            try:
                decoded = base64.b64decode(authorization[6:].strip()).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                return None
            client_id, _, secret = decoded.partition(":")
            client_id, secret = urllib.parse.unquote(client_id), urllib.parse.unquote(secret)
        if client_id in self.clients and self.clients[client_id] == secret:
            return client_id
        return None
