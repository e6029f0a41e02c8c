"""A small client for ksqlDB's REST API over HTTP/1.1 (the standard library's http.client).

    client = RestClient("http://127.0.0.1:8088")
    client = RestClient("https://127.0.0.1:8443", tls=ClientTls(ca="ca.pem", cert="client.pem"))
    answer = client.ksql("CREATE STREAM ...;", {"auto.offset.reset": "earliest"})
    with client.query("SELECT * FROM S EMIT CHANGES LIMIT 2;", {}) as stream:
        stream.wait(lambda messages: len(messages) >= 4, timeout=20)
        messages = stream.messages()

``/query`` answers in ksqlDB's streamed form, a JSON array written piece by piece:
``[{"header": ...},{"row": ...},...,{"finalMessage": ...}]``; ``QueryStream`` parses the
pieces as they arrive on a reader thread (blank keep-alive lines and newline-separated
objects are accepted too). JSON numbers with a fraction are read as ``Decimal``, as the
case files are. A transport failure is a ``RestClientError`` naming the URL.

Over HTTPS the server's certificate is verified against ``ClientTls.ca`` (default: the
system's trust store), host name included; ``ClientTls.cert`` (with ``key``, or a PEM file
holding both) is presented to a server that asks for a client certificate.
"""

from __future__ import annotations

import decimal
import http.client
import json
import socket
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

JSON_CONTENT = "application/json"
START_MARGIN = 30.0  # seconds a /query answer may take past the client's timeout (the server's own start bound)


class RestClientError(Exception):
    """The server could not be reached or broke the connection; the message says where."""


@dataclass(frozen=True, slots=True)
class RestAnswer:
    """A complete HTTP answer: status and parsed JSON body (the text when it is not JSON)."""

    status: int
    body: Any


def parse_json(text: str) -> Any:
    """JSON with fractions as Decimal; text that is not JSON is returned as it is."""
    try:
        return json.loads(text, parse_float=decimal.Decimal)
    except ValueError:
        return text


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str)


@dataclass(frozen=True, slots=True)
class ClientTls:
    """The client's side of HTTPS: the CA that signed the server's certificate (None: the
    system's), and a client certificate (PEM; ``key`` None: the key is in the same file)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def context(self) -> ssl.SSLContext:
        """An SSL context that verifies the server and presents the client certificate."""
        try:
            context = ssl.create_default_context(cafile=self.ca)
            if self.cert is not None:
                context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as exc:
            raise RestClientError(f"The client's TLS files do not load: {exc}") from None
        return context


class RestClient:
    """Requests to one server; a new connection per request, as a test runner wants."""

    def __init__(self, url: str, *, timeout: float = 60.0, tls: ClientTls | None = None) -> None:
        parsed = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"Server URL '{url}' is not of the form http://HOST:PORT or https://HOST:PORT.")
        default_port = 443 if parsed.scheme == "https" else 80
        self.scheme = parsed.scheme
        self.url = f"{parsed.scheme}://{parsed.hostname}:{parsed.port or default_port}"
        self.host = parsed.hostname
        self.port = parsed.port or default_port
        self.timeout = timeout
        self.tls = tls
        self._context = (tls or ClientTls()).context() if parsed.scheme == "https" else None

    def _connection(self, timeout: float | None = None) -> http.client.HTTPConnection:
        if self._context is not None:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout or self.timeout,
                                               context=self._context)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout or self.timeout)

    def request(self, method: str, path: str, body: Any = None, *, timeout: float | None = None) -> RestAnswer:
        """One request with a JSON body (None: no body); the whole answer."""
        connection = self._connection(timeout)
        try:
            headers = {"Accept": JSON_CONTENT}
            data = None
            if body is not None:
                data = _dumps(body).encode("utf-8")
                headers["Content-Type"] = JSON_CONTENT
            connection.request(method, path, body=data, headers=headers)
            response = connection.getresponse()
            text = response.read().decode("utf-8", errors="replace")
            return RestAnswer(response.status, parse_json(text))
        except (OSError, http.client.HTTPException) as exc:
            raise RestClientError(f"{method} {self.url}{path} failed: {exc or type(exc).__name__}") from None
        finally:
            connection.close()

    def healthy(self) -> bool:
        """Whether GET /healthcheck answers 200."""
        try:
            return self.request("GET", "/healthcheck", timeout=5).status == 200
        except RestClientError:
            return False

    def ksql(
        self,
        statement: str,
        properties: Mapping[str, Any],
        *,
        command_sequence_number: int | None = None,
        variables: Mapping[str, str] | None = None,
    ) -> RestAnswer:
        """POST /ksql: one statement, its request properties, read-your-writes sequence and
        the session's variables (``sessionVariables``, when there are any)."""
        body: dict[str, Any] = {"ksql": statement, "streamsProperties": dict(properties)}
        if command_sequence_number is not None:
            body["commandSequenceNumber"] = command_sequence_number
        if variables:
            body["sessionVariables"] = dict(variables)
        return self.request("POST", "/ksql", body)

    def query(
        self,
        statement: str,
        properties: Mapping[str, Any],
        *,
        accept: str = JSON_CONTENT,
        variables: Mapping[str, str] | None = None,
    ) -> QueryStream:
        """POST /query (``accept``: the media type asked for, ksqlDB's protobuf form for one);
        the answer streams in on a reader thread."""
        return QueryStream(self, statement, properties, accept=accept, variables=variables)


class QueryStream:
    """A /query answer being read: its status, the messages so far, whether it ended."""

    def __init__(
        self,
        client: RestClient,
        statement: str,
        properties: Mapping[str, Any],
        *,
        accept: str = "application/json",
        variables: Mapping[str, str] | None = None,
    ) -> None:
        self.url = f"{client.url}/query"
        self.status = 0
        self.error_body: Any = None  # the parsed body of a non-200 answer
        self.failure: str | None = None  # a transport failure while reading
        self._messages: list[Any] = []
        self._changed = threading.Condition()
        self._done = False
        self._closing = False
        # The server answers a push query once its starting offsets are fixed, within its own
        # bound of a minute (then it answers an error): the client waits past that bound, so
        # a slow start is the server's error, not a timeout racing it.
        self._connection = client._connection(client.timeout + START_MARGIN)
        body: dict[str, Any] = {"ksql": statement, "streamsProperties": dict(properties)}
        if variables:
            body["sessionVariables"] = dict(variables)
        try:
            self._connection.request(
                "POST",
                "/query",
                body=_dumps(body).encode("utf-8"),
                headers={"Accept": accept, "Content-Type": JSON_CONTENT},
            )
            self._response = self._connection.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self._connection.close()
            raise RestClientError(f"POST {self.url} failed: {exc or type(exc).__name__}") from None
        self.status = self._response.status
        if self.status != 200:
            try:
                text = self._response.read().decode("utf-8", errors="replace")
            except (OSError, http.client.HTTPException) as exc:
                text = f"(the error body could not be read: {exc})"
            self.error_body = parse_json(text)
            self._connection.close()
            self._done = True
            return
        if self._connection.sock is not None:
            # A push query may send nothing for longer than any timeout: the caller's ``wait``
            # bounds its waits, and ``close`` ends the read.
            self._connection.sock.settimeout(None)
        self._reader = threading.Thread(target=self._read, name="qtt-rest-query", daemon=True)
        self._reader.start()

    # -- reading -------------------------------------------------------------------------

    def _read(self) -> None:
        buffer = ""
        decoder = json.JSONDecoder(parse_float=decimal.Decimal)
        undecoded = b""
        try:
            while True:
                chunk = self._response.read1(65536)
                if not chunk:
                    break
                undecoded += chunk
                try:
                    buffer += undecoded.decode("utf-8")
                    undecoded = b""
                except UnicodeDecodeError:
                    continue  # a character split across chunks
                buffer = self._parse(buffer, decoder)
        except Exception as exc:  # a closing connection fails in many ways
            if not self._closing:
                self.failure = f"reading {self.url} failed: {exc or type(exc).__name__}"
        finally:
            rest = buffer.strip().strip("[],").strip()
            if rest and not self._closing and self.failure is None:
                self.failure = f"the answer of {self.url} ended in the middle of a message: {rest[:80]!r}"
            with self._changed:
                self._done = True
                self._changed.notify_all()

    def _parse(self, buffer: str, decoder: json.JSONDecoder) -> str:
        position = 0
        while True:
            while position < len(buffer) and buffer[position] in " \t\r\n[],":
                position += 1
            if position >= len(buffer):
                return ""
            try:
                message, end = decoder.raw_decode(buffer, position)
            except json.JSONDecodeError:
                return buffer[position:]  # incomplete: wait for more
            with self._changed:
                self._messages.append(message)
                self._changed.notify_all()
            position = end

    # -- the caller's side ---------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._done

    def messages(self) -> list[Any]:
        """The messages received so far."""
        with self._changed:
            return list(self._messages)

    def wait(self, until: Callable[[list[Any]], bool], timeout: float) -> bool:
        """Wait until ``until(messages)`` holds or the answer ends; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not self._done and not until(self._messages):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def close(self) -> None:
        """End the query (a push query stops when its connection closes)."""
        self._closing = True
        sock = self._connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        reader = getattr(self, "_reader", None)
        if reader is not None:
            reader.join(timeout=5)
        self._connection.close()

    def __enter__(self) -> QueryStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
