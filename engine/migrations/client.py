"""The server over REST, as the migrations tool needs it: statements, pull queries, inserts.

Every failure is a ``MigrationError`` whose message reads as ksqlDB's Java client words it
(``Received 400 response from server: <message>. Error code: 40001``), so the lines the tool
prints and the error reasons it records are those of ksqlDB's tool.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from engine.migrations import config as C
from engine.migrations.errors import MigrationError

_DELIMITED = "application/vnd.ksqlapi.delimited.v1"


@dataclass(frozen=True, slots=True)
class Row:
    """One row of a pull query: column names (upper case) to values."""

    values: Mapping[str, Any]

    def string(self, column: str) -> str | None:
        value = self.values.get(column.upper())
        return None if value is None else str(value)


def _verify(config: C.MigrationConfig) -> ssl.SSLContext | bool:
    if not config.server_url.strip().lower().startswith("https://"):
        return True
    truststore = config.get(C.SSL_TRUSTSTORE_LOCATION)
    context = ssl.create_default_context(cafile=truststore or None)
    keystore = config.get(C.SSL_KEYSTORE_LOCATION)
    if keystore:
        context.load_cert_chain(keystore, password=config.get(C.SSL_KEY_PASSWORD) or None)
    if config.get(C.SSL_VERIFY_HOST, "true").lower() == "false":
        context.check_hostname = False
    return context


class ServerClient:
    """A kspark (or ksqlDB) server at ``config.server_url``, with the config's basic auth and TLS."""

    def __init__(self, config: C.MigrationConfig, *, timeout: float = 60.0,
                 headers: Mapping[str, str] | None = None) -> None:
        self.url = config.server_url.rstrip("/")
        try:
            parsed = httpx.URL(self.url)
        except (httpx.InvalidURL, TypeError) as exc:
            raise MigrationError(f"Invalid ksql server URL: {config.server_url}") from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise MigrationError(f"Invalid ksql server URL: {config.server_url}")
        try:
            verify = _verify(config)
        except (OSError, ssl.SSLError) as exc:
            raise MigrationError(f"Could not load the TLS files of {config.path}: {exc}") from exc
        self._http = httpx.Client(base_url=self.url, timeout=timeout, auth=config.basic_auth,
                                  verify=verify, headers=dict(headers or {}))
        self._service_id: str | None = None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServerClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ transport

    def _post(self, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return self._http.post(path, **kwargs)
        except httpx.HTTPError as exc:
            raise MigrationError(f"Failed to reach {self.url}{path}: {_reason(exc)}") from exc

    @staticmethod
    def _refusal(answer: httpx.Response) -> MigrationError:
        try:
            body = answer.json()
        except ValueError:
            body = None
        if isinstance(body, list) and body and isinstance(body[0], dict):
            body = body[0]
        if isinstance(body, dict) and "message" in body:
            message, code = body.get("message"), body.get("error_code", answer.status_code * 100)
        else:
            message, code = answer.text.strip() or answer.reason_phrase, answer.status_code * 100
        return MigrationError(f"Received {answer.status_code} response from server: {message}. Error code: {code}")

    # ------------------------------------------------------------------ the tool's requests

    def server_info(self) -> Mapping[str, Any]:
        """``GET /info``'s ``KsqlServerInfo``."""
        try:
            answer = self._http.get("/info")
        except httpx.HTTPError as exc:
            raise MigrationError(f"Failed to query {self.url}/info: {_reason(exc)}") from exc
        if answer.status_code != 200:
            raise MigrationError(f"Failed to query {self.url}/info: {self._refusal(answer)}")
        try:
            return answer.json()["KsqlServerInfo"]
        except (ValueError, KeyError, TypeError) as exc:
            raise MigrationError(
                f"Failed to query {self.url}/info: the answer is not a ksqlDB server's information."
                f"\nPlease ensure that {self.url} is an active ksqlDB server and that the version of the "
                "migration tool is compatible with the version of the ksqlDB server.") from exc

    def service_id(self) -> str:
        if self._service_id is None:
            self._service_id = str(self.server_info().get("ksqlServiceId", ""))
        return self._service_id

    def execute_statement(self, sql: str, properties: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """``POST /ksql`` with one statement; the entities it answers."""
        answer = self._post("/ksql", json={"ksql": sql, "streamsProperties": dict(properties or {})})
        if answer.status_code != 200:
            raise self._refusal(answer)
        body = answer.json()
        return body if isinstance(body, list) else [body]

    def pull_query(self, sql: str) -> list[Row]:
        """``POST /query-stream`` with a pull query; its rows."""
        answer = self._post("/query-stream", json={"sql": sql, "properties": {}},
                            headers={"Accept": _DELIMITED})
        if answer.status_code != 200:
            raise self._refusal(answer)
        lines = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
        if not lines or not isinstance(lines[0], dict):
            raise MigrationError(f"Received an answer without a header from {self.url}/query-stream")
        columns = [str(c).upper() for c in lines[0].get("columnNames", ())]
        rows: list[Row] = []
        for line in lines[1:]:
            if isinstance(line, dict):  # an error or a final message inside the stream
                if "message" in line and line.get("@type", "error") != "finalMessage":
                    raise MigrationError(f"Received an error from server: {line['message']}")
                continue
            rows.append(Row(dict(zip(columns, line, strict=False))))
        return rows

    def insert_row(self, target: str, row: Mapping[str, Any]) -> None:
        """``POST /inserts-stream``: one row into ``target``, acknowledged."""
        body = json.dumps({"target": target}) + "\n" + json.dumps(dict(row)) + "\n"
        answer = self._post("/inserts-stream", content=body.encode(), headers={"Content-Type": _DELIMITED})
        if answer.status_code != 200:
            raise self._refusal(answer)
        for line in answer.text.splitlines():
            if not line.strip():
                continue
            ack = json.loads(line)
            if isinstance(ack, dict) and ack.get("status") == "error":
                raise MigrationError(f"Received error from /inserts-stream. Inserts sequence number: "
                                     f"{ack.get('seq')}. Error code: {ack.get('error_code')}. "
                                     f"Message: {ack.get('message')}")

    def describe_source(self, name: str) -> dict[str, Any]:
        """``DESCRIBE name;``'s ``sourceDescription``."""
        [entity, *_] = self.execute_statement(f"DESCRIBE {name};")
        description = entity.get("sourceDescription")
        if not isinstance(description, dict):
            raise MigrationError(f"Received an unexpected answer to DESCRIBE {name}: {entity}")
        return description

    def source_names(self, kind: str) -> list[str]:
        """The names of the server's streams (``kind`` ``STREAMS``) or tables (``TABLES``)."""
        [entity, *_] = self.execute_statement(f"LIST {kind};")
        return [str(s.get("name", "")) for s in entity.get(kind.lower(), ())]


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc).strip()
    return text or type(exc).__name__
