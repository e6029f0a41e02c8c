"""ksqlDB's REST API over a ``KsqlService``, on Starlette: request parsing, streaming, error bodies.

    GET  /info, /healthcheck, /clusterStatus
    POST /ksql            {"ksql": "...;", "streamsProperties": {...}, "commandSequenceNumber": N}
    GET  /status/{commandId}
    POST /query           {"ksql": "SELECT ... EMIT CHANGES;", "streamsProperties": {...}}
    POST /query-stream    {"sql": "SELECT ... EMIT CHANGES;", "properties": {...}}
    POST /close-query     {"queryId": "..."}
    POST /inserts-stream  {"target": "S"} then one JSON row a line; one acknowledgement a row
    GET  /console         the browser console and its assets (``engine.server.console``)

Every error is a ksqlDB error body (``@type`` ``statement_error`` or ``generic_error``,
``error_code``, ``message``) with the HTTP status the code starts with; no endpoint
answers a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from engine.errors import KsqlError, StartTimeout
from engine.server import console
from engine.server import entities as E
from engine.server import metrics as server_metrics
from engine.server.auth import BasicAuth, BasicAuthMiddleware
from engine.server.errors import ServiceError
from engine.server.limits import (
    ERROR_TOO_MANY_REQUESTS,
    PUSH_START_TIMEOUT,
    RequestGate,
    ServerLimits,
)
from engine.server.properties import check_settable, request_properties
from engine.server.pull import pull_query_body, pull_query_protobuf_body, pull_query_stream_body
from engine.server.rest_config import DEFAULT_MAX_PUSH_QUERIES, too_many_push_queries
from engine.server.service import KsqlService

LOG = logging.getLogger("engine.server")
MAX_BODY_BYTES = 1 << 20
DELIMITED = "application/vnd.ksqlapi.delimited.v1"
JSON = "application/json"
KSQL_V1_JSON = "application/vnd.ksql.v1+json"
KSQL_V1_PROTOBUF = "application/vnd.ksql.v1+protobuf"
# The media types ksqlDB's routes produce, per route in its order (ServerVerticle): a request's
# Accept picks the first route one of whose types it accepts. /query's second route answers in
# /query-stream's delimited form; the protobuf routes answer pull queries (push queries are refused).
OLD_API = (KSQL_V1_JSON, JSON)
QUERY_ROUTES = (OLD_API, (DELIMITED, KSQL_V1_JSON, JSON), (KSQL_V1_PROTOBUF,))
QUERY_STREAM_ROUTES = ((DELIMITED, JSON, KSQL_V1_JSON), (KSQL_V1_PROTOBUF,))
INSERTS_ROUTES = ((DELIMITED, JSON),)
KSQL_REQUEST_FIELDS = {"ksql", "streamsProperties", "configOverrides", "requestProperties",
                       "sessionVariables", "commandSequenceNumber"}
TERMINATE_FIELDS = {"deleteTopicList"}  # ksqlDB's ClusterTerminateRequest
# The endpoints a terminating or terminated server answers with 503 (ksqlDB's server state check).
STATEMENT_PATHS = frozenset({"/ksql", "/ksql/terminate", "/query", "/query-stream", "/inserts-stream", "/ws/query"})
QUERY_STREAM_FIELDS = {"sql", "properties", "sessionVariables", "requestProperties"}
_END = object()
_IDLE = object()


def _error(exc: ServiceError) -> JSONResponse:
    response = JSONResponse(exc.body(), status_code=exc.http_status)
    if isinstance(exc, _Busy):
        response.headers["retry-after"] = str(exc.retry_after)
    return response


class _Busy(ServiceError):
    """A request refused because the server is at a limit: 429 with ``Retry-After``."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, code=ERROR_TOO_MANY_REQUESTS)
        self.retry_after = retry_after


def _push_start_busy(limits: ServerLimits, *, waited: bool) -> _Busy:
    """The answer to a push query that could not start in its time (``engine.server.limits``)."""
    why = (f"{limits.max_concurrent_push_starts} push queries are starting and none ended its start"
           if waited else "the push query did not reach its topics")
    return _Busy(f"The server is busy: {why} within {limits.push_start_timeout:g} s "
                 f"({PUSH_START_TIMEOUT}). Retry after {limits.retry_after} s.", limits.retry_after)


def _accepted(header: str | None) -> list[str]:
    """The media ranges of an Accept header, most wanted first (q-values; ties keep their order)."""
    ranges: list[tuple[float, int, str]] = []
    for index, part in enumerate((header or "").split(",")):
        media, *params = (p.strip() for p in part.split(";"))
        if not media:
            continue
        quality = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if quality > 0:
            ranges.append((-quality, index, media.lower()))
    return [media for _, _, media in sorted(ranges)]


def _matches(media_range: str, media_type: str) -> bool:
    kind, _, sub = media_range.partition("/")
    wanted_kind, _, wanted_sub = media_type.partition("/")
    return (kind in ("*", wanted_kind)) and (sub in ("*", wanted_sub))


def negotiate(accept: str | None, routes: tuple[tuple[str, ...], ...]) -> tuple[int, str | None]:
    """Which of ``routes`` (media types each) answers a request with ``accept``, and the type it
    accepted (None: no Accept header, or only ``*/*``-like ranges). Raises ServiceError (406)
    when no route produces a type the request accepts, as ksqlDB's router does."""
    ranges = _accepted(accept)
    if not ranges:
        return 0, None
    for index, produces in enumerate(routes):
        for media_range in ranges:
            for media_type in produces:
                if _matches(media_range, media_type):
                    return index, media_type if "*" not in media_range else None
    offered = ", ".join(dict.fromkeys(t for route in routes for t in route))
    raise ServiceError(f"None of the media types accepted ({accept}) is served here; served: {offered}.",
                       code=40600)


def _dumps(value: Any) -> str:
    from engine.serde.coerce import json_text

    return json_text(value)


async def _body(request: Request, fields: set[str], required: str | None,
                server_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The request's JSON object: known fields only, ``required`` (if any) a string; else ServiceError.
    Its properties are checked against ``server_config``'s override lists, when given."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise ServiceError(f"The request body is larger than {MAX_BODY_BYTES} bytes.", code=41300)
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY_BYTES:
            raise ServiceError(f"The request body is larger than {MAX_BODY_BYTES} bytes.", code=41300)
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ServiceError(f"Invalid JSON in request: {exc}", code=E.ERROR_BAD_REQUEST) from None
    if not isinstance(body, dict):
        raise ServiceError("The request body must be a JSON object.", code=E.ERROR_BAD_REQUEST)
    unknown = sorted(set(body) - fields)
    if unknown:
        raise ServiceError(
            f"Unrecognized field(s) {', '.join(repr(u) for u in unknown)} in the request; "
            f"known fields: {', '.join(sorted(fields))}.",
            code=E.ERROR_BAD_REQUEST,
        )
    if required is not None and not isinstance(body.get(required), str):
        raise ServiceError(f"The request needs '{required}': the statement text.", code=E.ERROR_BAD_REQUEST)
    for name in ("streamsProperties", "configOverrides", "properties", "sessionVariables", "requestProperties"):
        if body.get(name) is not None and not isinstance(body[name], dict):
            raise ServiceError(f"'{name}' must be a JSON object.", code=E.ERROR_BAD_REQUEST)
    sequence = body.get("commandSequenceNumber")
    if sequence is not None and (not isinstance(sequence, int) or isinstance(sequence, bool)):
        raise ServiceError("'commandSequenceNumber' must be an integer.", code=E.ERROR_BAD_REQUEST)
    variables = body.get("sessionVariables") or {}
    body["sessionVariables"] = {str(k): v if isinstance(v, str) else _dumps(v) for k, v in variables.items()}
    # Every endpoint's properties, under ksqlDB's rules (engine.server.properties).
    body["properties"] = request_properties(body.get("configOverrides"), body.get("streamsProperties"),
                                            body.get("properties"), body.get("requestProperties"),
                                            server_config=server_config)
    return body


def _server_config(service: Any) -> Mapping[str, Any] | None:
    """The server configuration a request's properties are checked against (its override lists);
    None for a service without an engine of its own (a stand-in), which checks none."""
    engine = getattr(service, "engine", None)
    return getattr(engine, "config", None)


class OpenPushQueries:
    """The push queries being streamed, by query id: ``/close-query`` ends one, a server stop all."""

    def __init__(self) -> None:
        self._by_id: dict[str, _RunningPush] = {}
        self._lock = threading.Lock()

    def add(self, push: _RunningPush) -> None:
        with self._lock:
            self._by_id[push.query.query_id] = push

    def discard(self, query_id: str) -> None:
        with self._lock:
            self._by_id.pop(query_id, None)

    def get(self, query_id: str) -> _RunningPush | None:
        with self._lock:
            return self._by_id.get(query_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_id)

    def end_all(self) -> None:
        """End every open push query's stream (its response completes, its query closes)."""
        with self._lock:
            pushes = list(self._by_id.values())
        for push in pushes:
            push.stop.set()


def create_app(service: KsqlService, auth: BasicAuth | None = None,
               push_queries: OpenPushQueries | None = None, limits: ServerLimits | None = None, *,
               max_push_queries: int = DEFAULT_MAX_PUSH_QUERIES) -> Any:
    """The ASGI application answering ksqlDB's REST API for ``service`` (started by the caller).

    With ``auth``, every endpoint but /healthcheck needs HTTP basic credentials of its users.
    ``push_queries`` holds the push queries being streamed (the server ends them all first
    when it stops); a push query beyond ``max_push_queries`` open at once is refused with
    ksqlDB's message (``ksql.max.push.queries``). ``limits`` bound the statement requests
    worked on and waiting at once (``engine.server.limits``; its defaults when None).
    """
    server_limits = limits if limits is not None else ServerLimits()
    push_starts = asyncio.Semaphore(server_limits.max_concurrent_push_starts)  # Spark starts at once
    push_queries = push_queries if push_queries is not None else OpenPushQueries()
    prints: set[Any] = set()  # the PRINTs being streamed (``PrintedTopic``): a server stop ends them

    async def info(request: Request) -> Response:
        return JSONResponse(service.info())

    async def healthcheck(request: Request) -> Response:
        healthy = service.ready
        details = {name: {"isHealthy": healthy} for name in ("metastore", "kafka", "commandRunner")}
        body = {"isHealthy": healthy, "details": details, "serverState": "READY" if healthy else "STARTING"}
        return JSONResponse(body, status_code=200 if healthy else 503)

    async def ws_query(websocket: WebSocket) -> None:
        """ksqlDB's ``GET /ws/query``: a query over a WebSocket (``engine.server.ws_query``)."""
        from engine.server import ws_query as ws

        await ws.serve(websocket, service, _started, _rows)

    async def is_valid_property(request: Request) -> Response:
        """ksqlDB's ``GET /is_valid_property/:property``: ``true``, or 400 saying why a request may
        not set it (``engine.server.properties.check_settable``)."""
        try:
            check_settable(request.path_params["property"])
        except ServiceError as exc:
            return _error(exc)
        return JSONResponse(True)

    async def cluster_status(request: Request) -> Response:
        try:  # the live servers of the service (query-owner group members), this one if it runs no queries
            hosts = await run_in_threadpool(service.cluster_members)
        except ServiceError as exc:
            return _error(exc)
        if service.ownership is None:
            hosts = [f"{request.url.hostname}:{request.url.port}"]
        now = int(time.time() * 1000)
        return JSONResponse({"clusterStatus": {host: {"hostAlive": service.ready, "lastStatusUpdateMs": now,
                                                      "activeStandbyPerQuery": {}, "hostStoreLags": {}}
                                               for host in hosts}})

    async def ksql(request: Request) -> Response:
        try:
            negotiate(request.headers.get("accept"), (OLD_API,))
            body = await _body(request, KSQL_REQUEST_FIELDS, "ksql", _server_config(service))
            sequence = body.get("commandSequenceNumber")
            if sequence is not None and sequence >= 0:
                await run_in_threadpool(service.wait_for_sequence, sequence)
            answer = await run_in_threadpool(
                service.execute, body["ksql"], body["properties"], body["sessionVariables"]
            )
        except ServiceError as exc:
            return _error(exc)
        return JSONResponse(answer)

    async def terminate(request: Request) -> Response:
        """TERMINATE CLUSTER (engine.server.cluster_terminator): every server of the service stops
        its queries and deletes the matching sinks, their schemas and the service's topics."""
        try:
            negotiate(request.headers.get("accept"), (OLD_API,))
            body = await _body(request, TERMINATE_FIELDS, None)
            answer = await run_in_threadpool(service.terminate_cluster, body.get("deleteTopicList"))
        except ServiceError as exc:
            return _error(exc)
        return JSONResponse([answer])

    async def status(request: Request) -> Response:
        command_id = request.path_params["command_id"]
        found = service.status(command_id)
        if found is None:
            return _error(ServiceError(f"Command not found: {command_id}", code=E.ERROR_NOT_FOUND))
        return JSONResponse(found.to_json())

    async def statuses(request: Request) -> Response:
        return JSONResponse(service.statuses())

    async def metadata(request: Request) -> Response:
        return JSONResponse(service.metadata())

    async def metadata_id(request: Request) -> Response:
        return JSONResponse(service.cluster_ids())

    async def query(request: Request) -> Response:
        try:
            route, _media = negotiate(request.headers.get("accept"), QUERY_ROUTES)
            body = await _body(request, KSQL_REQUEST_FIELDS, "ksql", _server_config(service))
            text, properties, variables = body["ksql"], body["properties"], body["sessionVariables"]
            if not text.strip():  # ksqlDB's StreamedQueryResource
                raise ServiceError('"ksql" field must be populated', code=E.ERROR_BAD_REQUEST)
            if route == 2:
                return await _protobuf_answer(text, properties, variables)
            printed = await run_in_threadpool(service.print_query, text, variables)
            if printed is not None:  # ksqlDB's PRINT lines: formats, records, a blank line a quiet poll
                return _PushResponse(_print_messages(printed, prints, formats=route == 0), media_type=JSON)
            if route == 1:  # ksqlDB's /query in /query-stream's delimited form
                return await _query_stream_answer(text, properties, variables, True, DELIMITED)
            pull = await run_in_threadpool(service.pull_query, text, properties, variables)
            if pull is not None:
                return Response(pull_query_body(pull), media_type=JSON)
            push = await _started(text, properties, variables, old_query_api=True)
        except ServiceError as exc:
            return _error(exc)
        return _PushResponse(_query_messages(push), media_type=JSON)

    async def query_stream(request: Request) -> Response:
        try:
            route, media = negotiate(request.headers.get("accept"), QUERY_STREAM_ROUTES)
            body = await _body(request, QUERY_STREAM_FIELDS, "sql", _server_config(service))
            text, properties, variables = body["sql"], body["properties"], body["sessionVariables"]
            if route == 1:
                return await _protobuf_answer(text, properties, variables)
            printed = await run_in_threadpool(service.print_query, text, variables)
            if printed is not None:
                if media not in (None, DELIMITED):
                    printed.stop.set()
                    raise ServiceError(f"PRINT answers in {DELIMITED} only.", code=40600)
                return _PushResponse(_print_messages(printed, prints, formats=False), media_type=DELIMITED)
            return await _query_stream_answer(text, properties, variables, media in (None, DELIMITED), media)
        except ServiceError as exc:
            return _error(exc)

    async def _protobuf_answer(text: str, properties: dict[str, Any], variables: dict[str, str]) -> Response:
        """A pull query answered in ksqlDB's protobuf form (``pull_query_protobuf_body``)."""
        pull = await run_in_threadpool(service.pull_query, text, properties, variables)
        if pull is None:
            raise ServiceError(f"kspark answers only pull queries in ksqlDB's protobuf form ({KSQL_V1_PROTOBUF}); "
                               f"accept {KSQL_V1_JSON} or {DELIMITED} for push queries and PRINT.", code=40600)
        return Response(pull_query_protobuf_body(pull), media_type=KSQL_V1_PROTOBUF)

    async def _query_stream_answer(text: str, properties: dict[str, Any], variables: dict[str, str],
                                   delimited: bool, media: str | None) -> Response:
        """A query answered as /query-stream does: delimited lines, one JSON array, or (ksqlDB's
        ``application/vnd.ksql.v1+json`` there) /query's header-and-rows form."""
        pull = await run_in_threadpool(service.pull_query, text, properties, variables)
        push = None if pull is not None else await _started(text, properties, variables)
        if media == KSQL_V1_JSON:
            if pull is not None:
                return Response(pull_query_body(pull), media_type=KSQL_V1_JSON)
            assert push is not None
            return _PushResponse(_query_messages(push), media_type=KSQL_V1_JSON)
        media = DELIMITED if delimited else JSON
        if pull is not None:
            return Response(pull_query_stream_body(pull, delimited), media_type=media)
        assert push is not None
        return _PushResponse(_query_stream_messages(push, delimited), media_type=media)

    async def close_query(request: Request) -> Response:
        try:
            raw = json.loads(await request.body())
        except ValueError as exc:
            return _error(ServiceError(f"Invalid JSON in request: {exc}", code=E.ERROR_BAD_REQUEST))
        query_id = raw.get("queryId") if isinstance(raw, dict) else None
        push = push_queries.get(query_id) if isinstance(query_id, str) else None
        if push is None:
            return _error(ServiceError(f"No query with id {query_id}", code=E.ERROR_BAD_REQUEST))
        push.stop.set()
        return Response(status_code=200)

    async def inserts_stream(request: Request) -> Response:
        from engine.server.inserts import parse_target

        lines = _lines(request)
        try:
            _route, media = negotiate(request.headers.get("accept"), INSERTS_ROUTES)
            first = await anext(lines, None)
            if first is None or not first.strip():
                raise ServiceError('The inserts stream is empty: its first line names the target, {"target": "S"}.',
                                   code=E.ERROR_BAD_REQUEST)
            target, _properties = parse_target(first)
            stream = await run_in_threadpool(service.inserts_stream, target)
        except ServiceError as exc:
            return _error(exc)
        delimited = media != JSON
        return _DuplexResponse(_acks(stream, lines, delimited), media_type=DELIMITED if delimited else JSON)

    async def _started(text: str, properties: dict[str, Any], variables: dict[str, str], *,
                       old_query_api: bool = False) -> _RunningPush:
        if len(push_queries) >= max_push_queries:
            raise ServiceError(too_many_push_queries(len(push_queries), max_push_queries), statement_text=text)
        started = time.perf_counter()
        budget = server_limits.push_start_timeout
        try:
            await asyncio.wait_for(push_starts.acquire(), budget)
        except TimeoutError:
            raise _push_start_busy(server_limits, waited=True) from None
        try:
            query_ = await run_in_threadpool(
                functools.partial(service.push_query, old_api=old_query_api), text, properties, variables)
            try:
                await run_in_threadpool(query_.start, max(1.0, budget - (time.perf_counter() - started)))
            except StartTimeout:
                service.close_push_query(query_)
                raise _push_start_busy(server_limits, waited=False) from None
            except KsqlError as exc:
                service.close_push_query(query_)
                raise ServiceError(str(exc).splitlines()[0], statement_text=text) from None
        finally:
            push_starts.release()
        service.metrics.push_started(time.perf_counter() - started)
        push = _RunningPush(query_, service.close_push_query)
        push_queries.add(push)
        push.on_close = lambda: push_queries.discard(query_.query_id)
        return push

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        push_queries.end_all()
        for printed in list(prints):
            printed.stop.set()

    async def not_found(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 404)
        message = "Not found." if code == 404 else str(getattr(exc, "detail", "")) or "Bad request."
        if code == 405:
            message = f"Method {request.method} is not allowed on {request.url.path}."
        elif code == 404:
            message = f"Unknown endpoint: {request.method} {request.url.path}."
        return JSONResponse(E.generic_error(code * 100, message), status_code=code)

    async def client_gone(request: Request, exc: Exception) -> Response:
        """The client went away while its request was read: there is no one to answer (499 in
        the metrics, nginx's code for it), and nothing failed on the server's side."""
        return Response(status_code=499)

    async def server_error(request: Request, exc: Exception) -> Response:
        LOG.error("%s %s failed: %s", request.method, request.url.path, exc, exc_info=exc)
        message = f"The server failed on {request.url.path}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return JSONResponse(E.generic_error(E.ERROR_SERVER_ERROR, message), status_code=500)

    def old_api(endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
        """``endpoint`` answering only requests that accept ksqlDB's JSON (406 otherwise)."""

        async def negotiated(request: Request) -> Response:
            try:
                negotiate(request.headers.get("accept"), (OLD_API,))
            except ServiceError as exc:
                return _error(exc)
            response: Response = await endpoint(request)
            return response

        return negotiated

    async def metrics(request: Request) -> Response:
        """The server's Prometheus metrics: per query and per server (``engine.server.metrics``)."""
        body = await run_in_threadpool(service.metrics.exposition)
        return Response(body, media_type=server_metrics.CONTENT_TYPE)

    async def lag(request: Request) -> Response:
        """The figures and per-partition consumer lag of every persistent query this server runs."""
        return JSONResponse({"queries": await run_in_threadpool(server_metrics.query_reports, service)})

    async def info_redirect(request: Request) -> Response:
        return Response(status_code=307, headers={"location": "/info"})

    async def container_health(request: Request) -> Response:  # ksqlDB's /chc/ready and /chc/live
        return JSONResponse({})

    routes = [
        Route("/", info_redirect, methods=["GET"]),
        Route("/chc/ready", container_health, methods=["GET"]),
        Route("/chc/live", container_health, methods=["GET"]),
        Route("/info", old_api(info), methods=["GET"]),
        Route("/healthcheck", old_api(healthcheck), methods=["GET"]),
        Route("/clusterStatus", old_api(cluster_status), methods=["GET"]),
        Route("/is_valid_property/{property:path}", old_api(is_valid_property), methods=["GET"]),
        WebSocketRoute("/ws/query", ws_query),
        Route("/ksql", ksql, methods=["POST"]),
        Route("/ksql/terminate", terminate, methods=["POST"]),
        Route("/status", old_api(statuses), methods=["GET"]),
        Route("/status/{command_id:path}", old_api(status), methods=["GET"]),
        Route("/v1/metadata", old_api(metadata), methods=["GET"]),
        Route("/v1/metadata/id", old_api(metadata_id), methods=["GET"]),
        Route("/query", query, methods=["POST"]),
        Route("/query-stream", query_stream, methods=["POST"]),
        Route("/close-query", close_query, methods=["POST"]),
        Route("/inserts-stream", inserts_stream, methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/lag", lag, methods=["GET"]),
        *console.routes(),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={HTTPException: not_found, ClientDisconnect: client_gone, Exception: server_error},
    )
    gated = RequestGate(_TerminatedGate(app, service), server_limits)
    measured = server_metrics.RequestMetrics(gated, lambda: service.metrics)
    return measured if auth is None else BasicAuthMiddleware(measured, auth)


class _PushResponse(StreamingResponse):
    """A push query's streamed answer, which notices a client gone even while no row is sent.

    Starlette's StreamingResponse listens for the disconnect only on servers of ASGI spec
    versions below 2.4; on the others it learns of it from a failed write, and a push query
    without new rows writes nothing. This one always listens, and ends the stream (closing
    the query) as soon as the client is gone.
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import anyio

        async with anyio.create_task_group() as group:

            async def stream() -> None:
                with contextlib.suppress(OSError):  # the client went away while being written to
                    await self.stream_response(send)
                group.cancel_scope.cancel()

            group.start_soon(stream)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()


class _DuplexResponse(StreamingResponse):
    """A streamed answer written while the request body is still being read (``/inserts-stream``).

    Starlette's StreamingResponse may read the request's messages to notice a disconnect,
    which would take the body's chunks from under the handler; this one only writes.
    """

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.stream_response(send)


async def _lines(request: Request) -> AsyncIterator[bytes]:
    """The request body's lines as they arrive (a line longer than the body limit ends the stream)."""
    pending = b""
    async for chunk in request.stream():
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line
        if len(pending) > MAX_BODY_BYTES:
            raise ServiceError(f"A line of the request is larger than {MAX_BODY_BYTES} bytes.", code=41300)
    if pending.strip():
        yield pending


async def _acks(stream: Any, lines: AsyncIterator[bytes], delimited: bool) -> AsyncIterator[str]:
    """``/inserts-stream``: one acknowledgement per row, in order (a JSON line each, or one array)."""
    seq = 0
    separator = ""
    if not delimited:
        yield "["
    try:
        async for line in lines:
            if not line.strip():
                continue
            try:
                ack = await run_in_threadpool(stream.insert, line, seq)
            except Exception as exc:  # noqa: BLE001 - a bug: the row gets an error, the stream goes on
                LOG.error("/inserts-stream row %d failed: %s", seq, exc, exc_info=exc)
                ack = _server_error_ack(seq, exc)
            seq += 1
            yield _dumps(ack) + "\n" if delimited else separator + _dumps(ack)
            separator = ",\n"
    except ServiceError as exc:
        ack = {"status": "error", "seq": seq, "error_code": exc.code, "message": exc.message}
        yield _dumps(ack) + "\n" if delimited else separator + _dumps(ack)
    if not delimited:
        yield "]\n"


def _server_error_ack(seq: int, exc: BaseException) -> dict[str, Any]:
    message = str(exc).splitlines()[0] if str(exc) else ""
    return {"status": "error", "seq": seq, "error_code": E.ERROR_SERVER_ERROR,
            "message": f"The server failed on this row: {type(exc).__name__}: {message}"}


class _RunningPush:
    """A started push query being streamed: its rows one by one, stopped by a flag."""

    def __init__(self, query: Any, close: Callable[[Any], None]) -> None:
        self.query = query
        self.stop = threading.Event()
        self._close = close
        self.on_close: Callable[[], Any] | None = None
        self._rows = query.rows(stop=self.stop.is_set, idle=True)
        self.columns = query.schema.columns

    def next_row(self) -> Any:
        """The next row as ksqlDB JSON values and its tombstone flag, ``_IDLE`` when none came
        within a poll (the caller's thread is never held longer), or ``_END``."""
        from engine.hosting.push_query import json_value

        row: Any = next(self._rows, _END)
        if row is _END:
            return _END
        if row is None:
            return _IDLE
        values = [json_value(v, c.type) for v, c in zip(row.columns, self.columns, strict=True)]
        return values, row.tombstone

    def close(self) -> None:
        """Stop and forget the query, on a thread of its own (Spark's stop takes a moment)."""
        self.stop.set()
        if self.on_close is not None:
            self.on_close()
        threading.Thread(target=self._close, args=(self.query,), daemon=True).start()


async def _rows(push: _RunningPush) -> AsyncIterator[Any]:
    """The rows of ``push``, read on worker threads a poll at a time, so that a cancellation
    (the client gone, the server stopping) reaches this task within a poll."""
    while True:
        row = await run_in_threadpool(push.next_row)
        if row is _END:
            return
        if row is not _IDLE:
            yield row


async def _print_messages(printed: Any, prints: set[Any], *, formats: bool) -> AsyncIterator[str]:
    """PRINT's lines as they come (``PrintedTopic``), each ended by a newline; on /query (``formats``)
    the format lines too, and an empty line for every poll that found nothing, as ksqlDB writes them.
    The topic's consumer is read on worker threads; the stream ending (the client gone, the
    server stopping) stops it within a poll."""
    prints.add(printed)
    try:
        while True:
            line = await run_in_threadpool(printed.next_line)
            if line is printed.END:
                return
            if line is None:
                if formats:
                    yield "\n"
                continue
            if formats or not printed.is_format_line(line):
                yield line + "\n"
    finally:
        printed.stop.set()
        prints.discard(printed)


async def _query_messages(push: _RunningPush) -> AsyncIterator[str]:
    """``/query``: one JSON array written piece by piece (header, rows, final message)."""
    query = push.query
    try:
        yield "[" + _dumps({"header": {"queryId": query.query_id, "schema": str(query.schema)}})
        try:
            async for values, tombstone in _rows(push):
                row: dict[str, Any] = {"columns": values}
                if tombstone:
                    row["tombstone"] = True
                yield ",\n" + _dumps({"row": row})
        except KsqlError as exc:
            error = E.generic_error(E.ERROR_SERVER_ERROR, str(exc).splitlines()[0])
            yield ",\n" + _dumps({"errorMessage": error}) + "]\n"
            return
        if query.limit_reached:
            yield ",\n" + _dumps({"finalMessage": "Limit Reached"})
        yield "]\n"
    finally:
        push.close()


async def _query_stream_messages(push: _RunningPush, delimited: bool) -> AsyncIterator[str]:
    """``/query-stream``: a metadata object, then one JSON array per row (one line each)."""
    query = push.query
    columns = query.schema.columns
    metadata = {
        "queryId": query.query_id,
        "columnNames": [c.name for c in columns],
        "columnTypes": [str(c.type) for c in columns],
    }
    # Delimited: every message is one line, ended as it is written (a reader may wait for it).
    def message(value: Any) -> str:
        return _dumps(value) + "\n" if delimited else ",\n" + _dumps(value)

    try:
        yield _dumps(metadata) + "\n" if delimited else "[" + _dumps(metadata)
        try:
            async for values, _tombstone in _rows(push):
                yield message(values)
        except KsqlError as exc:
            yield message(E.generic_error(E.ERROR_SERVER_ERROR, str(exc).splitlines()[0]))
        if not delimited:
            yield "]\n"
    finally:
        push.close()


class _TerminatedGate:
    """ASGI wrapper: once TERMINATE CLUSTER was read, the statement endpoints answer 503 with
    ksqlDB's words (``The server is shutting down`` / ``The server is shut down``)."""

    def __init__(self, app: Any, service: Any) -> None:
        self.app = app
        self.service = service

    @property
    def routes(self) -> Any:
        """The wrapped application's routes."""
        return self.app.routes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        refuse = getattr(self.service, "refuse_if_terminated", None)
        if scope["type"] in ("http", "websocket") and scope.get("path") in STATEMENT_PATHS and refuse is not None:
            try:
                refuse()
            except ServiceError as exc:
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1013, "reason": exc.message})
                    return
                await _error(exc)(scope, receive, send)
                return
        await self.app(scope, receive, send)
