"""What a server does at its limits: connections it keeps, statement requests it works on at once.

Two things used to close connections under load without an answer. Hypercorn closed a
keep-alive connection after 5 s idle, the very expiry most HTTP clients keep their idle
connections for (httpx's, for one), so a client reusing a connection at that moment had its
request reset; a busy server, whose loop runs its timers late, widened that window to
seconds. And every request went straight to the worker threads, so at hundreds of clients
requests waited until the clients' own timeouts gave up on them.

Now idle connections are kept as long as ksqlDB keeps them (``ksql.idle.connection.timeout.seconds``,
a day), the listen backlog holds a burst of new connections, and ``RequestGate`` lets
``kspark.server.max.concurrent.requests`` statement requests be worked on at once; the next
``kspark.server.max.queued.requests`` wait in arrival order, each at most
``kspark.server.queue.timeout.seconds``. A request beyond the queue, or one whose wait ran out,
is answered at once with 429 (error code 42900, ksqlDB's for too many requests) and a
``Retry-After`` header, never by dropping its connection.

Push queries start on Spark, which on a small machine takes seconds each and longer the more
start at once: ``kspark.server.max.concurrent.push.starts`` of them start at once, and one that
has not started ``kspark.server.push.start.timeout.seconds`` after its turn came (the wait for a
start slot included) is answered 429 in the same way, its half-started query stopped, instead of
leaving its client waiting until the client's own timeout.
"""

from __future__ import annotations

import asyncio
import collections
import math
from dataclasses import dataclass
from typing import Any

from engine.errors import KsqlError
from engine.server.early_answer import answer_json
from engine.server.entities import generic_error

IDLE_CONNECTION_TIMEOUT = "ksql.idle.connection.timeout.seconds"
MAX_CONCURRENT_REQUESTS = "kspark.server.max.concurrent.requests"
MAX_QUEUED_REQUESTS = "kspark.server.max.queued.requests"
QUEUE_TIMEOUT = "kspark.server.queue.timeout.seconds"
MAX_CONCURRENT_PUSH_STARTS = "kspark.server.max.concurrent.push.starts"
PUSH_START_TIMEOUT = "kspark.server.push.start.timeout.seconds"
ERROR_TOO_MANY_REQUESTS = 42900
# The endpoints whose requests take a worker thread for their work: the gate counts these.
GATED_PATHS = frozenset({"/ksql", "/ksql/terminate", "/query", "/query-stream", "/inserts-stream", "/close-query"})


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerLimits:
    """How many connections and requests a server takes, and how long it keeps them."""

    max_concurrent_requests: int = 32
    max_queued_requests: int = 512
    queue_timeout: float = 60.0
    max_concurrent_push_starts: int = 8
    push_start_timeout: float = 45.0
    idle_connection_timeout: float = 86400.0  # ksqlDB's default: one day
    backlog: int = 1024
    retry_after: int = 5  # seconds, in the Retry-After of a refused request

    def __post_init__(self) -> None:
        for field, _, _, least in _SETTINGS:
            value = getattr(self, field)
            if value < least or (least == 0 and isinstance(value, float) and value <= 0):
                raise KsqlError(f"The server's {field} must be {_least(least, value)}, got {value}.")

    @classmethod
    def from_properties(cls, properties: dict[str, Any]) -> ServerLimits:
        """The limits a server's config file sets (the defaults for those it does not)."""
        given: dict[str, Any] = {}
        for field, name, kind, least in _SETTINGS:
            text = properties.get(name)
            if text is None:
                continue
            try:
                value = kind(str(text).strip())
            except ValueError:
                value = None
            if value is None or value < least or (kind is float and not value > 0):
                expected = f"{'an integer' if kind is int else 'a number of seconds'} {_least(least, kind(0))}"
                raise KsqlError(f"Invalid value {text!r} for configuration {name}: expected {expected}.")
            given[field] = value
        return cls(**given)

    def configure(self, config: Any) -> None:
        """Set a Hypercorn ``Config``'s connection limits."""
        config.keep_alive_timeout = self.idle_connection_timeout
        config.backlog = self.backlog


# (field, property, type, least value; a float's least 0 means more than 0)
_SETTINGS = (
    ("max_concurrent_requests", MAX_CONCURRENT_REQUESTS, int, 1),
    ("max_queued_requests", MAX_QUEUED_REQUESTS, int, 0),
    ("queue_timeout", QUEUE_TIMEOUT, float, 0),
    ("max_concurrent_push_starts", MAX_CONCURRENT_PUSH_STARTS, int, 1),
    ("push_start_timeout", PUSH_START_TIMEOUT, float, 0),
    ("idle_connection_timeout", IDLE_CONNECTION_TIMEOUT, float, 0),
)


def _least(least: int, value: object) -> str:
    return "more than 0" if isinstance(value, float) else f"at least {least}"


class Busy(Exception):
    """A request the gate turned away: the message says why."""


class RequestGate:
    """ASGI wrapper: at most ``max_concurrent_requests`` requests to ``GATED_PATHS`` in work at
    once, the next ``max_queued_requests`` waiting in arrival order; the others answered 429 with
    ``Retry-After``. A request's slot is free once its answer starts: a push query or an inserts
    stream holds one while it starts, not while it streams."""

    def __init__(self, app: Any, limits: ServerLimits) -> None:
        self.app = app
        self.limits = limits
        self.working = 0
        self._waiting: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def routes(self) -> Any:
        """The wrapped application's routes."""
        return self.app.routes

    @property
    def queued(self) -> int:
        """How many requests wait for a slot."""
        return len(self._waiting)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("path") not in GATED_PATHS:
            await self.app(scope, receive, send)
            return
        try:
            await self._enter()
        except Busy as exc:
            await _refuse(scope, receive, send, str(exc), self.limits.retry_after)
            return
        held = [True]

        def release() -> None:
            if held[0]:
                held[0] = False
                self._leave()

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                release()
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            release()

    async def _enter(self) -> None:
        limits = self.limits
        if self.working < limits.max_concurrent_requests and not self._waiting:
            self.working += 1
            return
        if len(self._waiting) >= limits.max_queued_requests:
            raise Busy(f"The server is busy: it works on {limits.max_concurrent_requests} requests at once and "
                       f"{len(self._waiting)} more are waiting. Retry after {limits.retry_after} s.")
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            await asyncio.wait_for(asyncio.shield(turn), limits.queue_timeout)
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                self._leave()  # the slot was handed over as the wait ended: pass it on
            else:
                turn.cancel()
                self._waiting.remove(turn)
            if isinstance(exc, TimeoutError | asyncio.TimeoutError):
                raise Busy(f"The server is busy: the request waited {_seconds(limits.queue_timeout)} s for one of "
                           f"the {limits.max_concurrent_requests} requests it works on at once to end. "
                           f"Retry after {limits.retry_after} s.") from None
            raise

    def _leave(self) -> None:
        """A slot is free: hand it to the longest waiting request, if any."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.working -= 1


def _seconds(value: float) -> str:
    return str(int(value)) if value == math.floor(value) else str(value)


async def _refuse(scope: Any, receive: Any, send: Any, message: str, retry_after: int) -> None:
    await answer_json(scope, receive, send, 429, generic_error(ERROR_TOO_MANY_REQUESTS, message),
                      ((b"retry-after", str(retry_after).encode()),))
