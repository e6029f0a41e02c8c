"""Parity table ``rest``: ksqlDB's REST API (its endpoints and its entity types), and kspark's server.

One row per

- endpoint: a ``router.route(HttpMethod.M, "/path")`` of ksqlDB's ``ServerVerticle`` (its
  Vert.x routes; the media types its ``produces`` lists, merged over the routes of one path);
- entity type: a ``@JsonSubTypes`` entry of ``KsqlEntity`` (what ``/ksql`` answers), with the
  JSON fields of its class (``@JsonProperty`` names).

The generator checks kspark itself: an endpoint is served when ``create_app``'s Starlette
routes answer its method and path (a ``{name:path}`` parameter takes the rest of the path);
an entity is written when kspark's server code (``engine/server``) holds its ``@type`` name,
and the row lists the fields of ksqlDB's class the server code never names. The test is the
committed ``rest_map.json`` (item -> the kspark test that shows the endpoint or entity, or
item -> reason for what kspark deliberately leaves out), and the generator checks that the
test exists and names the path or the entity in its text. A row failing a check stays
missing, with the reason saying which.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from qtt.parity import Row, mapped_test_problem, table

MAP_FILE = Path(__file__).with_name("rest_map.json")
ROOT = Path(__file__).resolve().parents[2]
VERTICLE = "ksqldb-rest-app/src/main/java/io/confluent/ksql/api/server/ServerVerticle.java"
ENTITY_DIR = "ksqldb-rest-model/src/main/java/io/confluent/ksql/rest/entity"
SERVER_DIR = ROOT / "engine" / "server"

_ROUTE = re.compile(r"router\.route\(\s*HttpMethod\.(\w+)\s*,\s*\"([^\"]+)\"\s*\)(.*?);", re.S)
_PRODUCES = re.compile(r"\.produces\(\s*((?:[^()]|\(\))*?)\s*\)")
_SUBTYPE = re.compile(r"@JsonSubTypes\.Type\(\s*value\s*=\s*(\w+)\.class\s*,\s*name\s*=\s*\"(\w+)\"\s*\)")
_PROPERTY = re.compile(r"@JsonProperty\(\s*(?:value\s*=\s*)?\"(\w+)\"")
_MEDIA = {
    "DELIMITED_CONTENT_TYPE": "application/vnd.ksqlapi.delimited.v1",
    "JSON_CONTENT_TYPE": "application/json",
    "KsqlMediaType.KSQL_V1_JSON.mediaType()": "application/vnd.ksql.v1+json",
    "KsqlMediaType.KSQL_V1_PROTOBUF.mediaType()": "application/vnd.ksql.v1+protobuf",
}


def ksqldb_endpoints(src: Path) -> dict[tuple[str, str], list[str]]:
    """(method, path) -> the media types its routes produce, in ksqlDB's order."""
    text = (src / VERTICLE).read_text(encoding="utf-8")
    found: dict[tuple[str, str], list[str]] = {}
    for method, path, rest in _ROUTE.findall(text):
        produces = found.setdefault((method, path), [])
        for media in _PRODUCES.findall(rest):
            name = _MEDIA.get(media.strip(), media.strip())
            if name not in produces:
                produces.append(name)
    return found


def ksqldb_entities(src: Path) -> list[tuple[str, str, list[str]]]:
    """(``@type`` name, class, JSON fields) of every ``KsqlEntity`` subtype."""
    base = (src / ENTITY_DIR / "KsqlEntity.java").read_text(encoding="utf-8")
    entities = []
    for cls, name in _SUBTYPE.findall(base):
        path = src / ENTITY_DIR / f"{cls}.java"
        fields: list[str] = []
        if path.exists():
            for field in _PROPERTY.findall(path.read_text(encoding="utf-8")):
                if field not in fields:
                    fields.append(field)
        entities.append((name, cls, fields))
    return entities


@cache
def kspark_routes() -> tuple[tuple[str, str], ...]:
    """(method, path) of every route of kspark's REST app."""
    from engine.server.app import create_app

    app = create_app(None)  # type: ignore[arg-type]  # routes are built without touching the service
    from starlette.routing import WebSocketRoute

    routes = []
    for route in app.routes:
        if isinstance(route, WebSocketRoute):  # a WebSocket opens with a GET
            routes.append(("GET", route.path))
        for method in sorted(getattr(route, "methods", None) or ()):
            if method != "HEAD":
                routes.append((method, route.path))
    return tuple(routes)


def _served(method: str, path: str) -> bool:
    wanted = path.strip("/").split("/") if path != "/" else []
    for kspark_method, kspark_path in kspark_routes():
        if kspark_method != method:
            continue
        have = kspark_path.strip("/").split("/") if kspark_path != "/" else []
        if _segments_match(have, wanted):
            return True
    return False


def _segments_match(have: list[str], wanted: list[str]) -> bool:
    for index, segment in enumerate(have):
        if segment.startswith("{") and segment.endswith(":path}"):
            return len(wanted) > index
        if index >= len(wanted):
            return False
        if segment.startswith("{"):
            if not wanted[index].startswith(":"):
                return False
        elif segment != wanted[index]:
            return False
    return len(have) == len(wanted)


@cache
def server_names() -> frozenset[str]:
    """Every string constant and keyword-argument name in kspark's server code."""
    names: set[str] = set()
    for path in SERVER_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
            elif isinstance(node, ast.keyword) and node.arg is not None:
                names.add(node.arg)
    return frozenset(names)


def _row(item: str, source: str, served: str | None, needle: str, mapping: dict[str, Any], detail: str) -> Row:
    entry = mapping.get(item, {})
    if "reason" in entry:
        return Row(item=item, status="reasoned", source=source, reason=entry["reason"], detail=detail)
    if served is not None:
        note = entry.get("missing")
        return Row(item=item, status="missing", source=source, reason=f"{served}: {note}" if note else served,
                   detail=detail)
    test = entry.get("test", "")
    if not test:
        return Row(item=item, status="missing", source=source, reason=entry.get("missing", "no test is mapped"),
                   detail=detail)
    problem = mapped_test_problem(test, needle)
    if problem is not None:
        return Row(item=item, status="missing", source=source, reason=problem, detail=detail)
    return Row(item=item, status="covered", source=source, test=test, detail=detail)


@table("rest")
def rest_rows(src: Path) -> list[Row]:
    mapping: dict[str, Any] = json.loads(MAP_FILE.read_text(encoding="utf-8"))
    rows = []
    for (method, path), produces in sorted(ksqldb_endpoints(src).items(), key=lambda e: (e[0][1], e[0][0])):
        item = f"endpoint: {method} {path}"
        served = None if _served(method, path) else "kspark's server has no such route"
        needle = mapping.get(item, {}).get("names", path)
        detail = "produces " + ", ".join(produces) if produces else ""
        rows.append(_row(item, VERTICLE, served, needle, mapping, detail))
    names = server_names()
    for name, cls, fields in ksqldb_entities(src):
        item = f"entity: {name}"
        lacking = [f for f in fields if f not in names]
        served = None
        if name not in names:
            served = "kspark's server never writes this entity"
        elif lacking:
            served = "kspark's server does not write the fields " + ", ".join(lacking)
        detail = f"{cls}: " + ", ".join(fields)
        rows.append(_row(item, f"{ENTITY_DIR}/{cls}.java", served, f'"{name}"', mapping, detail))
    return rows
