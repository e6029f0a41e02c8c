"""The console's routes (``engine.server.console``): the page and its assets, served from the
package, nothing fetched from another host, the same basic authentication as the API."""

from __future__ import annotations

import base64
import re
from importlib import resources

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from engine.server import console
from engine.server.app import create_app
from engine.server.auth import REALM, BasicAuth, BasicAuthMiddleware, _secret

FILES = resources.files("engine.server.console")
SVG_NAMESPACE = "http://www.w3.org/2000/svg"  # a name in createElementNS, never fetched


@pytest.fixture()
def client() -> TestClient:
    return TestClient(Starlette(routes=console.routes()))


def _text(name: str) -> str:
    return FILES.joinpath(name).read_text(encoding="utf-8")


def test_the_server_routes_the_console() -> None:
    paths = {route.path for route in create_app(None).routes}  # type: ignore[arg-type]  # routes only
    assert {"/console", "/console/assets/{name}"} <= paths


def test_the_page_is_html_allowing_only_this_server(client) -> None:
    answer = client.get("/console")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/html; charset=utf-8"
    assert "<title>kspark console</title>" in answer.text
    policy = answer.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy


def test_every_asset_the_page_and_its_modules_name_is_served_with_its_type(client) -> None:
    page = client.get("/console").text
    named = set(re.findall(r'(?:src|href)="/console/assets/([^"]+)"', page))
    for module in [n for n in named if n.endswith(".js")]:
        named |= set(re.findall(r'from "\./([^"]+)"', _text(module)))
    assert named == set(console.assets()), (named, console.assets())
    for name in named:
        answer = client.get(f"/console/assets/{name}")
        assert answer.status_code == 200, name
        assert answer.headers["content-type"] == console.ASSET_TYPES[name[name.rfind("."):]]
        assert answer.content == FILES.joinpath(name).read_bytes()


def test_no_file_of_the_console_names_another_host() -> None:
    for name in [console.PAGE, *console.assets()]:
        urls = set(re.findall(r"(?:https?:)?//[A-Za-z0-9.-]+\.[a-z]{2,}[^\s\"')]*", _text(name)))
        assert urls <= {SVG_NAMESPACE}, f"{name} names {urls - {SVG_NAMESPACE}}"
        assert not re.search(r"<(script|style)>", _text(name)), f"{name} has an inline script or style"


@pytest.mark.parametrize("name", ["__init__.py", "missing.js", "index.html"])
def test_other_names_are_not_served(client, name) -> None:
    answer = client.get(f"/console/assets/{name}")
    assert answer.status_code == 404
    body = answer.json()
    assert body["@type"] == "generic_error" and body["error_code"] == 40400
    assert "console.js" in body["message"]  # the known assets are named


def test_a_path_out_of_the_assets_is_not_served(client) -> None:
    answer = client.get("/console/assets/..%2F__init__.py")
    assert answer.status_code == 404 and "importlib" not in answer.text


def test_with_basic_auth_the_browser_is_asked_for_credentials_and_they_open_the_console() -> None:
    auth = BasicAuth({"fred": _secret("letmein", "test")})
    client = TestClient(BasicAuthMiddleware(Starlette(routes=console.routes()), auth))
    for path in ("/console", "/console/assets/console.js"):
        refused = client.get(path)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == f'Basic realm="{REALM}"'  # the browser's own prompt
        wrong = client.get(path, headers={"authorization": "Basic " + base64.b64encode(b"fred:guess").decode()})
        assert wrong.status_code == 401
        opened = client.get(path, headers={"authorization": "Basic " + base64.b64encode(b"fred:letmein").decode()})
        assert opened.status_code == 200
