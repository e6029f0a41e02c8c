"""The browser console of ``kspark server``: ``GET /console`` and its assets, files of this package.

    GET /console                 the page (index.html)
    GET /console/assets/{name}   its scripts (JavaScript modules), style sheet and icon

The page is plain HTML, CSS and JavaScript modules: no framework, no build step, nothing
fetched from elsewhere (its Content-Security-Policy allows only this server). It is a client of
the server's REST API as any other (``/ksql``, ``/lag``, ``/query-stream``, ``/close-query``),
so it takes the same credentials: with ``--auth-file`` the browser asks for them (the 401
answer names the Basic realm) and sends them with each of the page's requests.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.server import entities as E

PAGE = "index.html"
ASSET_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# Only this server: no inline script or style, no other host (connect-src covers fetch).
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
HEADERS = {"cache-control": "no-cache", "content-security-policy": CONTENT_SECURITY_POLICY,
           "x-content-type-options": "nosniff"}


def assets() -> dict[str, str]:
    """The console's assets (file names of this package) and their media types."""
    files = resources.files(__package__)
    found = {}
    for item in files.iterdir():
        suffix = item.name[item.name.rfind("."):] if "." in item.name else ""
        if item.is_file() and suffix in ASSET_TYPES:
            found[item.name] = ASSET_TYPES[suffix]
    return dict(sorted(found.items()))


def _read(name: str) -> bytes:
    return resources.files(__package__).joinpath(name).read_bytes()


async def page(request: Request) -> Response:
    """The browser console: sources, queries, their topology and a statement editor."""
    return Response(_read(PAGE), media_type="text/html; charset=utf-8", headers=HEADERS)


async def asset(request: Request) -> Response:
    """One of the console's scripts, its style sheet or its icon (404 for any other name)."""
    name = request.path_params["name"]
    media_type = assets().get(name)
    if media_type is None:
        known = ", ".join(assets())
        return JSONResponse(E.generic_error(E.ERROR_NOT_FOUND, f"The console has no asset '{name}'; its assets: {known}."),
                            status_code=404)
    return Response(_read(name), media_type=media_type, headers=HEADERS)


def routes() -> list[Route]:
    """The console's routes, for ``engine.server.app.create_app``."""
    return [
        Route("/console", page, methods=["GET"]),
        Route("/console/assets/{name}", asset, methods=["GET"]),
    ]
