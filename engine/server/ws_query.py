"""``GET /ws/query``: a query over a WebSocket, as ksqlDB's ``WSQueryEndpoint`` speaks it.

    ws://host:8088/ws/query?request={"ksql": "SELECT * FROM S EMIT CHANGES;", "streamsProperties": {}}&version=1

The query string carries the request (ksqlDB's ``KsqlRequest`` JSON: ``ksql``, ``streamsProperties``,
``sessionVariables``) and optionally ``version`` (1). The server accepts the socket, then sends
text messages:

1. the schema: a JSON array of ksqlDB's ``FieldInfo`` (``name``, ``schema``, ``type`` KEY for a
   pull query's key columns); a push query's columns are all value columns;
2. each row as ``{"row": {"columns": [...]}}`` (a push query's table deletion with
   ``"tombstone": true``);
3. at the end ``{"error": "done"}`` and a close with code 1000 and reason ``done`` (a pull query
   once its rows are sent, a push query when its LIMIT is reached).

A ``PRINT`` sends each record as a JSON string (``"rowtime: ..., key: ..., value: ...,
partition: 0"``, no format lines), then closes with 1000 ``done`` once its LIMIT is reached; a
topic that does not exist is refused with ksqlDB's ``Topic does not exist, or KSQL does not have
permission to list the topic: NAME``.

A request that cannot run (no ``request``, bad JSON, an empty ``ksql``, a property no request may
set, text that is not one statement, "Error parsing query: ...", a statement that fails) ends with ``{"error": message}`` and close code 1003, a failure while
streaming with 1011; a close reason is cut at 123 bytes (``...``), as WebSocket limits it. The
client closing the socket stops its push query.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.websockets import WebSocket, WebSocketDisconnect

from engine.errors import KsqlError
from engine.plan.schema import Column, Namespace
from engine.serde.coerce import json_text
from engine.server import entities as E
from engine.server.errors import ServiceError
from engine.server.properties import request_properties

NORMAL_CLOSURE = 1000
INVALID_MESSAGE_TYPE = 1003
INTERNAL_SERVER_ERROR = 1011
MAX_REASON_BYTES = 123


def close_reason(message: str) -> str:
    """``message`` cut to a WebSocket close reason (123 bytes, ``...`` when cut), as ksqlDB's
    ``SessionUtil`` cuts it."""
    if len(message.encode("utf-8")) <= MAX_REASON_BYTES:
        return message
    cut = message[: MAX_REASON_BYTES - 3]
    while len(cut.encode("utf-8")) > MAX_REASON_BYTES - 3:
        cut = cut[:-1]
    return cut + "..."


def parse_request(params: Any, server_config: Mapping[str, Any] | None = None,
                  ) -> tuple[str, dict[str, Any], dict[str, str]]:
    """The statement, properties and session variables of the socket's query string, or
    ``ServiceError`` with ksqlDB's words; the properties are checked against ``server_config``'s
    override lists, when given."""
    version = params.get("version")
    if version is not None and version != "1":
        raise ServiceError(f"Received invalid api version: {version}")
    try:
        raw = params.get("request")
        if not raw:
            raise ServiceError("missing request parameter")
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise ServiceError(str(exc)) from None
        if not isinstance(body, dict):
            raise ServiceError("the request must be a JSON object")
        ksql = body.get("ksql")
        if not isinstance(ksql, str) or not ksql.strip():
            raise ServiceError('"ksql" field of "request" must be populated')
        properties = request_properties(body.get("streamsProperties") or body.get("configOverrides") or {},
                                        server_config=server_config)
        variables = {str(k): str(v) for k, v in (body.get("sessionVariables") or {}).items()}
    except ServiceError as exc:
        raise ServiceError(f"Error parsing request: {exc.message}") from None
    return ksql, properties, variables


def check_statement(ksql: str, variables: dict[str, str]) -> None:
    """ksqlDB's ``parseStatement``: one statement that parses, else ``ServiceError`` "Error
    parsing query: ..."."""
    from engine.parser import parse
    from engine.server.errors import statement_failure

    try:
        statements = parse(ksql, variables=variables)
    except KsqlError as exc:
        raise ServiceError(f"Error parsing query: {statement_failure(exc, ksql)}") from None
    if len(statements) != 1:
        raise ServiceError(f"Error parsing query: Expected exactly one KSQL statement; found {len(statements)} instead")


async def serve(
    websocket: WebSocket,
    service: Any,
    start_push: Callable[[str, dict[str, Any], dict[str, str]], Awaitable[Any]],
    rows: Callable[[Any], AsyncIterator[tuple[list[Any], bool]]],
) -> None:
    """Answer one ``/ws/query`` socket. ``start_push`` starts a push query (the app's, so that
    /close-query and the server's stop know it) and ``rows`` streams its rows."""
    await websocket.accept()
    try:
        ksql, properties, variables = parse_request(websocket.query_params, getattr(getattr(service, "engine", None), "config", None))
        check_statement(ksql, variables)
        printed = await run_in_threadpool(_print, service, ksql, variables)
        if printed is not None:
            await _send_print(websocket, printed)
            return
        pull = await run_in_threadpool(service.pull_query, ksql, properties, variables)
        if pull is not None:
            await websocket.send_text(_schema(pull.header or pull.columns, keys=True))
            for values in pull.json_rows():
                await websocket.send_text(json_text({"row": {"columns": values}}))
            await _close(websocket, NORMAL_CLOSURE, "done")
            return
        push = await start_push(ksql, properties, variables)
    except ServiceError as exc:
        await _close(websocket, INVALID_MESSAGE_TYPE, exc.message)
        return
    try:
        await websocket.send_text(_schema(push.query.schema.columns, keys=False))
        async for values, tombstone in rows(push):
            row: dict[str, Any] = {"columns": values}
            if tombstone:
                row["tombstone"] = True
            await websocket.send_text(json_text({"row": row}))
        await _close(websocket, NORMAL_CLOSURE, "done")
    except KsqlError as exc:
        await _close(websocket, INTERNAL_SERVER_ERROR, str(exc).splitlines()[0])
    except WebSocketDisconnect:
        pass
    finally:
        push.close()


def _print(service: Any, ksql: str, variables: dict[str, str]) -> Any:
    """The started ``PrintedTopic`` of a PRINT statement, None for any other statement."""
    try:
        return service.print_query(ksql, variables)
    except ServiceError as exc:
        if not exc.message.startswith("Could not find topic"):
            raise
        from engine.parser import ast, parse

        [statement] = parse(ksql, variables=variables)
        topic = statement.statement.topic if isinstance(statement.statement, ast.PrintTopic) else ""
        raise ServiceError(f"Topic does not exist, or KSQL does not have permission to list the topic: {topic}") from None


async def _send_print(websocket: WebSocket, printed: Any) -> None:
    """PRINT's records, each a JSON string message, until its LIMIT (close 1000 ``done``) or
    the client goes."""
    try:
        while True:
            line = await run_in_threadpool(printed.next_line)
            if line is printed.END:
                await _close(websocket, NORMAL_CLOSURE, "done")
                return
            if line is not None and not printed.is_format_line(line):
                await websocket.send_text(json.dumps(line))
    except WebSocketDisconnect:
        pass
    finally:
        printed.stop.set()


def _schema(columns: Any, *, keys: bool) -> str:
    fields = []
    for column in columns:
        key = keys and getattr(column, "suffix", "") == " KEY"
        fields.append(E.field_info(Column(column.name, column.type, Namespace.KEY if key else Namespace.VALUE)))
    return json_text(fields)


async def _close(websocket: WebSocket, code: int, message: str) -> None:
    try:
        await websocket.send_text(json_text({"error": message}))
        await websocket.close(code, close_reason(message))
    except (WebSocketDisconnect, RuntimeError):  # the client went first
        pass
