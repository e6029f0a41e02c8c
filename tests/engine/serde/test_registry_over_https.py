"""The schema registry's client with its own basic authentication and TLS: the real registry
behind an HTTPS front that asks for a user, as registries are deployed."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.components.certificates import make_pki
from engine.kafka.security import configure, use_registry_security
from engine.serde.registry import forget_registry_client, registry_client
from tests.stand_in import QuietHandler, standing_in

USER, PASSWORD = "bob", "registry-secret"


@pytest.fixture
def guarded_registry(schema_registry: Any, tmp_path: Path) -> Iterator[tuple[str, Path, list[str | None]]]:
    """An HTTPS address that forwards to the registry the requests with the user's basic auth
    (401 without it); its URL, its CA and the Authorization headers it saw."""
    pki = make_pki(tmp_path / "pki")
    seen: list[str | None] = []
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

    class Front(QuietHandler):
        def _forward(self) -> None:
            seen.append(self.headers.get("Authorization"))
            body = self.request_body()
            if self.headers.get("Authorization") != expected:
                status, content = 401, json.dumps({"error_code": 40101, "message": "Unauthorized"}).encode()
                kind = "application/json"
            else:
                answer = httpx.request(self.command, schema_registry.url + self.path, content=body, timeout=30,
                                       headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
                status, content = answer.status_code, answer.content
                kind = answer.headers.get("Content-Type", "application/json")
            self.send_bytes(status, content, kind)

        do_GET = do_POST = do_PUT = do_DELETE = _forward

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(pki.server_pem))
    with standing_in(Front, tls=context) as url:
        yield url, pki.ca, seen


def _register(url: str) -> int:
    from confluent_kafka.schema_registry import Schema

    schema = Schema(json.dumps({"type": "record", "name": "R", "fields": [{"name": "A", "type": "int"}]}), "AVRO")
    return int(registry_client(url).register_schema("guarded-value", schema))


def test_the_registry_client_sends_its_user_over_tls(guarded_registry: tuple[str, Path, list[str | None]]) -> None:
    url, ca, seen = guarded_registry
    try:
        configure("x:1", {
            "ksql.schema.registry.url": url,
            "ksql.schema.registry.basic.auth.credentials.source": "USER_INFO",
            "ksql.schema.registry.basic.auth.user.info": f"{USER}:{PASSWORD}",
            "ksql.schema.registry.ssl.truststore.location": str(ca),
        })
        schema_id = _register(url)
        assert registry_client(url).get_schema(schema_id).schema_type == "AVRO"
        assert seen and all(header and header.startswith("Basic ") for header in seen)

        forget_registry_client(url)
        configure("x:1", {"ksql.schema.registry.url": url,
                          "ksql.schema.registry.basic.auth.user.info": f"{USER}:wrong",
                          "ksql.schema.registry.ssl.truststore.location": str(ca)})
        with pytest.raises(Exception, match="Unauthorized") as refused:
            _register(url)
        assert "wrong" not in str(refused.value) and PASSWORD not in str(refused.value)
    finally:
        use_registry_security(url, None)
        forget_registry_client(url)
