"""ksqlDB's REST API as the CLI uses it: ``/info``, ``/ksql``, ``/query`` streamed,
``/close-query`` and ``/is_valid_property``, over httpx.

Every failure is a ``ShellError`` with one line to print: the server unreachable, credentials
refused, a statement refused (with its ksqlDB error code).
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx


class ShellError(Exception):
    """A failure the shell prints as one line (``code``: ksqlDB's error code, if the server gave one)."""

    def __init__(self, message: str, code: int | None = None, entities: list[Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.entities = entities or []

    def line(self) -> str:
        first = str(self).strip().splitlines()[0] if str(self).strip() else "(no message)"
        return f"{first} (error {self.code})" if self.code is not None else first


@dataclass(frozen=True, slots=True, kw_only=True)
class Tls:
    """How the CLI checks the server's certificate and presents its own."""

    ca: str | None = None  # PEM file of the CA the server's certificate is signed by
    cert: str | None = None  # PEM client certificate (mutual TLS)
    key: str | None = None  # its PEM private key
    verify: bool = True

    def context(self) -> ssl.SSLContext | bool:
        if not self.verify:
            return False
        for option, path in (("--tls-ca", self.ca), ("--tls-cert", self.cert), ("--tls-key", self.key)):
            if path is not None and not Path(path).is_file():
                raise ShellError(f"{option} {path}: no such file.")
        context = ssl.create_default_context(cafile=self.ca) if self.ca else ssl.create_default_context()
        if self.cert:
            try:
                context.load_cert_chain(self.cert, self.key)
            except (ssl.SSLError, OSError) as exc:
                raise ShellError(f"The client certificate {self.cert} does not load: {exc}.") from None
        return context


class QueryStream:
    """A ``/query`` answer being read: ``query_id`` and ``columns`` from its header, then its
    messages (``row``, ``finalMessage``, ``errorMessage``) as each one completes; PRINT's
    answer is lines of text (``{"text": line}``)."""

    def __init__(self, response: httpx.Response, *, text_lines: bool) -> None:
        self.response = response
        self.query_id: str | None = None
        self.columns: list[str] = []
        self._messages: Iterator[dict[str, Any]] = (
            ({"text": line} for line in response.iter_lines() if line.strip()) if text_lines
            else json_messages(response.iter_text()))
        if not text_lines:
            for message in self._messages:
                header = message.get("header")
                if header is not None:
                    from engine.cli_shell.statements import schema_column_names

                    self.query_id = header.get("queryId")
                    self.columns = schema_column_names(header.get("schema", ""))
                break

    def messages(self) -> Iterator[dict[str, Any]]:
        """The messages after the header, as they arrive."""
        yield from self._messages


def json_messages(chunks: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The objects of a JSON array written piece by piece (``/query``: ``[{..},\n{..}]``), each
    as soon as its closing brace has come: the separator after it may wait for the next row."""
    decoder = json.JSONDecoder()
    buffer = ""
    for chunk in chunks:
        buffer += chunk
        while True:
            start = 0
            while start < len(buffer) and buffer[start] in " \t\r\n[],":
                start += 1
            buffer = buffer[start:]
            if not buffer:
                break
            try:
                value, end = decoder.raw_decode(buffer)
            except ValueError:
                break  # not complete yet
            buffer = buffer[end:]
            yield value if isinstance(value, dict) else {"text": json.dumps(value)}


class KsqlClient:
    """A session's connection to a server (one httpx client, kept open)."""

    def __init__(self, url: str, *, user: str | None = None, password: str | None = None,
                 tls: Tls | None = None, timeout: float = 300.0) -> None:
        self.url = url.rstrip("/")
        auth = httpx.BasicAuth(user, password or "") if user is not None else None
        verify = (tls or Tls()).context()
        self._http = httpx.Client(base_url=self.url, auth=auth, verify=verify,
                                  timeout=httpx.Timeout(timeout, connect=10.0))

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------ requests

    def info(self) -> dict[str, Any]:
        """``/info``'s ``KsqlServerInfo``."""
        return self._json("GET", "/info").get("KsqlServerInfo", {})

    def ksql(self, text: str, properties: dict[str, str], variables: dict[str, str]) -> list[dict[str, Any]]:
        """The entities ``/ksql`` answers for ``text``."""
        body = {"ksql": text, "streamsProperties": properties, "sessionVariables": variables}
        answer = self._json("POST", "/ksql", json=body)
        return answer if isinstance(answer, list) else [answer]

    def is_valid_property(self, name: str) -> None:
        """Raise ``ShellError`` if the server says ``name`` may not be set."""
        self._json("GET", f"/is_valid_property/{name}")

    def close_query(self, query_id: str) -> None:
        with contextlib.suppress(ShellError):
            self._json("POST", "/close-query", json={"queryId": query_id})

    @contextlib.contextmanager
    def query(self, text: str, properties: dict[str, str], variables: dict[str, str], *,
              text_lines: bool = False) -> Iterator[QueryStream]:
        """A ``/query`` request streamed: its header read, its rows still to come (``text_lines``:
        PRINT's answer, lines of text)."""
        body = {"ksql": text, "streamsProperties": properties, "sessionVariables": variables}
        request = self._http.build_request("POST", "/query", json=body, timeout=httpx.Timeout(None, connect=10.0))
        response = self._send(request, stream=True)
        try:
            if response.status_code >= 400:
                response.read()
                raise _refused(response)
            stream = QueryStream(response, text_lines=text_lines)
            yield stream
        finally:
            response.close()

    # ------------------------------------------------------------------ plumbing

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._send(self._http.build_request(method, path, **kwargs))
        if response.status_code >= 400:
            raise _refused(response)
        try:
            return response.json()
        except ValueError:
            raise ShellError(f"The server at {self.url} answered {path} with something that is not JSON.") from None

    def _send(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        try:
            return self._http.send(request, stream=stream)
        except httpx.ConnectError as exc:
            raise ShellError(f"Could not connect to the server at {self.url}: {_reason(exc)}.") from None
        except httpx.TimeoutException:
            raise ShellError(f"The server at {self.url} did not answer in time.") from None
        except httpx.HTTPError as exc:
            raise ShellError(f"The request to {self.url} failed: {_reason(exc)}.") from None


def _reason(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.rstrip(".")


def _refused(response: httpx.Response) -> ShellError:
    """The error body of a refused request (ksqlDB's ``KsqlErrorMessage``), as a ``ShellError``."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code == 401:
        return ShellError("The server refused the credentials: Unauthorized (use --user and --password).",
                          code=body.get("error_code") if isinstance(body, dict) else 40100)
    if isinstance(body, dict) and "message" in body:
        return ShellError(str(body["message"]), code=body.get("error_code"), entities=body.get("entities"))
    return ShellError(f"The server answered HTTP {response.status_code}: {response.text.strip()[:200]}")
