"""CORS as ksqlDB's filter answers it (``engine.server.cors``), set by ``access.control.allow.*``."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from engine.server.cors import CorsMiddleware
from engine.server.rest_config import RestConfig


def _app() -> Starlette:
    async def answer(request):
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


def _client(properties: dict[str, str]) -> TestClient:
    config = RestConfig.from_properties(properties)
    assert config.cors is not None
    return TestClient(CorsMiddleware(_app(), config.cors))


def test_a_preflight_is_answered_with_ksqldbs_default_methods_and_headers() -> None:
    with _client({"access.control.allow.origin": "https://*.example.com"}) as client:
        preflight = client.options("/query-stream", headers={"Origin": "https://app.example.com",
                                                             "Access-Control-Request-Method": "POST"})
        assert preflight.status_code == 204
        assert preflight.headers["access-control-allow-origin"] == "https://app.example.com"
        assert preflight.headers["access-control-allow-credentials"] == "true"
        assert preflight.headers["access-control-allow-methods"] == "GET,POST,HEAD"
        assert preflight.headers["access-control-allow-headers"] == "X-Requested-With,Content-Type,Accept,Origin"


def test_the_configured_methods_and_headers_are_sent() -> None:
    with _client({"access.control.allow.origin": "*",
                  "access.control.allow.methods": "get, put",
                  "access.control.allow.headers": "Authorization,Content-Type"}) as client:
        preflight = client.options("/ksql", headers={"Origin": "http://anywhere:3000",
                                                     "Access-Control-Request-Method": "PUT"})
        assert preflight.headers["access-control-allow-methods"] == "GET,PUT"
        assert preflight.headers["access-control-allow-headers"] == "Authorization,Content-Type"
        assert preflight.headers["access-control-allow-origin"] == "http://anywhere:3000"


def test_a_request_from_an_allowed_origin_carries_the_headers_and_others_are_refused() -> None:
    with _client({"access.control.allow.origin": "https://a.example.com, https://b.example.com"}) as client:
        allowed = client.post("/ksql", headers={"Origin": "https://b.example.com"})
        assert allowed.status_code == 200 and allowed.text == "ok"
        assert allowed.headers["access-control-allow-origin"] == "https://b.example.com"
        assert allowed.headers["access-control-allow-credentials"] == "true"
        refused = client.post("/ksql", headers={"Origin": "https://evil.example.com"})
        assert refused.status_code == 403
        assert refused.json() == {"@type": "generic_error", "error_code": 40300,
                                  "message": "CORS Rejected - Invalid origin"}
        # The whole origin must match: a prefix of an allowed one is not allowed.
        assert client.post("/ksql", headers={"Origin": "https://a.example.com.evil"}).status_code == 403
        plain = client.post("/ksql")  # no Origin: not a cross-origin request
        assert plain.status_code == 200 and "access-control-allow-origin" not in plain.headers
        websocket_path = client.get("/ws/query", headers={"Origin": "https://evil.example.com"})
        assert websocket_path.status_code == 200  # ksqlDB leaves /ws/ paths out of its CORS filter


def test_without_an_origin_setting_there_is_no_filter() -> None:
    config = RestConfig.from_properties({"access.control.allow.methods": "GET"})
    assert config.cors is None
