"""The server's Prometheus metrics (``GET /metrics``) and its lag report (``GET /lag``).

Per persistent query this server runs, read at each scrape from the figures
``engine.hosting.query_metrics`` gathers from Spark's progress reports (label ``query_id``):

    kspark_query_state{state}                 1 for the query's state (every query it owns, failed too)
    kspark_query_records_consumed_total       records read from the input topics
    kspark_query_bytes_consumed_total         their key and value bytes
    kspark_query_records_produced_total       records handed to the transactional sink
    kspark_query_bytes_produced_total         their key and value bytes
    kspark_query_batches_total                micro-batches run
    kspark_query_busy_seconds_total           wall time spent in micro-batches
    kspark_query_saturation                   busy fraction of the last minute (0..1)
    kspark_query_batch_duration_seconds       the last micro-batch's duration
    kspark_query_rows_in_state                rows held by its state operators
    kspark_query_processing_errors_total      its processing-log entries
    kspark_query_consumer_offset{topic,partition}   its committed position
    kspark_query_consumer_lag{topic,partition}      the topic's end offset minus that position

Per server: ``kspark_queries{state}``, ``kspark_command_log_applied_offset``,
``kspark_pull_queries_total{outcome}`` and ``kspark_pull_query_latency_seconds``,
``kspark_push_queries_total``, ``kspark_push_queries_open`` and
``kspark_push_query_start_seconds``, ``kspark_http_requests_total{endpoint,method,status}`` and
``kspark_http_request_duration_seconds{endpoint}`` (:class:`RequestMetrics`, an ASGI middleware;
``endpoint`` is the route's path template).

Each service has a registry of its own, so servers sharing a process do not mix figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from engine.hosting.query_metrics import QueryFigures, end_offsets

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ServerMetrics:
    """A service's Prometheus registry: the request counters it updates, its queries read at scrape."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.registry = CollectorRegistry()
        self.pull_queries = Counter("kspark_pull_queries", "Pull queries answered, by outcome.",
                                    ["outcome"], registry=self.registry)
        self.pull_latency = Histogram("kspark_pull_query_latency_seconds", "Time to answer a pull query.",
                                      buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.push_queries = Counter("kspark_push_queries", "Push queries opened.", registry=self.registry)
        self.push_start = Histogram("kspark_push_query_start_seconds",
                                    "Time from a push query's request until it runs.",
                                    buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.http_requests = Counter("kspark_http_requests", "HTTP requests answered, by endpoint and status.",
                                     ["endpoint", "method", "status"], registry=self.registry)
        self.http_duration = Histogram("kspark_http_request_duration_seconds",
                                       "Time to answer an HTTP request (a streamed answer: until it ends).",
                                       ["endpoint"], buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.registry.register(_ServiceCollector(service))

    def pull_answered(self, seconds: float, *, ok: bool) -> None:
        self.pull_queries.labels("ok" if ok else "error").inc()
        if ok:
            self.pull_latency.observe(seconds)

    def push_started(self, seconds: float) -> None:
        self.push_queries.inc()
        self.push_start.observe(seconds)

    def exposition(self) -> bytes:
        """The metrics in Prometheus' text format."""
        return generate_latest(self.registry)


def query_reports(service: Any) -> list[dict[str, Any]]:
    """``GET /lag``: every persistent query this server runs, with its figures and per-partition
    lag (``QueryFigures.to_json``), its state the service's."""
    states = {info.query_id: info.state for info in service.query_infos()}
    figures = _running_figures(service)
    ends = _ends(service, figures)
    return [dict(f.to_json(ends), state=states.get(f.query_id, f.state)) for f in figures]


def _running_figures(service: Any) -> list[QueryFigures]:
    """The figures of the queries this server runs now."""
    running = service.running_query_ids()
    figures = [f for f in service.app.metrics.all() if f.query_id in running]
    return sorted(figures, key=lambda f: f.query_id)


def _ends(service: Any, figures: Sequence[QueryFigures]) -> dict[tuple[str, int], int]:
    topics = {t for f in figures for t in (*f.source_topics, *f.committed)}
    try:
        return end_offsets(service.bootstrap_servers, topics)
    except Exception:  # noqa: BLE001 - lag unknown while the broker does not answer; the rest stands
        return {}


def applied_offset(service: Any) -> int:
    """How far this server has applied its metastore's log: the KLIP-18 tables' sequence, or the
    command topic's position."""
    database = getattr(service, "database", None)
    if database is not None:
        return int(database.sequence)
    return int(service.log.position)


class _ServiceCollector(Collector):
    """The figures read from the service at each scrape."""

    def __init__(self, service: Any) -> None:
        self.service = service

    def describe(self) -> list[Metric]:
        return []  # the names vary with the queries: not checked at registration (nothing asked of Kafka then)

    def collect(self) -> Iterator[Metric]:
        service = self.service
        infos = service.query_infos()
        by_state = GaugeMetricFamily("kspark_queries", "Persistent queries of the service, by state.", labels=["state"])
        counts: dict[str, int] = {}
        for info in infos:
            counts[info.state] = counts.get(info.state, 0) + 1
        for state in sorted(counts):
            by_state.add_metric([state], counts[state])
        yield by_state
        yield GaugeMetricFamily("kspark_command_log_applied_offset",
                                "The offset below which this server has applied the metastore's log.",
                                value=applied_offset(service))
        yield GaugeMetricFamily("kspark_push_queries_open", "Push queries streaming now.",
                                value=len(service.transient_infos()))
        figures = _running_figures(service)
        # The state of every query this server owns, running or not (a failed one shows ERROR).
        states = {info.query_id: info.state for info in infos if info.owner in (None, service.server_id)}
        yield from _query_metrics(figures, states, _ends(service, figures))


def _query_metrics(figures: Sequence[QueryFigures], states: dict[str, str],
                   ends: dict[tuple[str, int], int]) -> Iterator[Metric]:
    now = time.time()
    state = GaugeMetricFamily("kspark_query_state", "1 for the query's state.", labels=["query_id", "state"])
    counters: list[tuple[CounterMetricFamily, Callable[[QueryFigures], float]]] = [
        (CounterMetricFamily("kspark_query_records_consumed", "Records read from the query's input topics.",
                             labels=["query_id"]), lambda f: f.records_consumed),
        (CounterMetricFamily("kspark_query_bytes_consumed", "Key and value bytes read from the query's input topics.",
                             labels=["query_id"]), lambda f: f.bytes_consumed),
        (CounterMetricFamily("kspark_query_records_produced", "Records handed to the query's sink.",
                             labels=["query_id"]), lambda f: f.records_produced),
        (CounterMetricFamily("kspark_query_bytes_produced", "Key and value bytes handed to the query's sink.",
                             labels=["query_id"]), lambda f: f.bytes_produced),
        (CounterMetricFamily("kspark_query_batches", "Micro-batches the query ran.", labels=["query_id"]),
         lambda f: f.batches),
        (CounterMetricFamily("kspark_query_busy_seconds", "Wall time the query spent in micro-batches.",
                             labels=["query_id"]), lambda f: f.busy_seconds),
        (CounterMetricFamily("kspark_query_processing_errors", "The query's processing-log entries.",
                             labels=["query_id"]), lambda f: f.errors),
    ]
    gauges: list[tuple[GaugeMetricFamily, Callable[[QueryFigures], float]]] = [
        (GaugeMetricFamily("kspark_query_saturation", "Busy fraction of the last minute's wall time (0..1).",
                           labels=["query_id"]), lambda f: f.saturation(now)),
        (GaugeMetricFamily("kspark_query_batch_duration_seconds", "The query's last micro-batch duration.",
                           labels=["query_id"]), lambda f: f.last_batch_seconds),
        (GaugeMetricFamily("kspark_query_rows_in_state", "Rows held by the query's state operators.",
                           labels=["query_id"]), lambda f: f.rows_in_state),
    ]
    offset = GaugeMetricFamily("kspark_query_consumer_offset", "The query's committed position in an input partition.",
                               labels=["query_id", "topic", "partition"])
    lag = GaugeMetricFamily("kspark_query_consumer_lag", "An input partition's end offset minus the query's position.",
                            labels=["query_id", "topic", "partition"])
    for f in figures:
        states.setdefault(f.query_id, f.state)
        for family, value in counters:
            family.add_metric([f.query_id], value(f))
        for gauge, reading in gauges:
            gauge.add_metric([f.query_id], reading(f))
        for partition in f.lag(ends):
            labels = [f.query_id, partition.topic, str(partition.partition)]
            offset.add_metric(labels, partition.current_offset)
            lag.add_metric(labels, partition.lag)
    for query_id in sorted(states):
        state.add_metric([query_id, states[query_id]], 1)
    yield state
    for family, _ in counters:
        yield family
    for gauge, _ in gauges:
        yield gauge
    yield offset
    yield lag


class RequestMetrics:
    """ASGI middleware counting and timing each HTTP request by route template and status."""

    def __init__(self, app: Any, metrics: Callable[[], ServerMetrics]) -> None:
        self.app = app
        self.metrics = metrics  # the service's, asked for at each request

    @property
    def routes(self) -> Any:
        """The wrapped application's routes."""
        return self.app.routes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        endpoint = _endpoint(self.app, scope)
        status = {"code": 500}
        started = time.perf_counter()

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            metrics = self.metrics()
            metrics.http_requests.labels(endpoint, scope.get("method", ""), str(status["code"])).inc()
            metrics.http_duration.labels(endpoint).observe(time.perf_counter() - started)


def _endpoint(app: Any, scope: Any) -> str:
    """The path template of the route ``scope`` goes to (``other`` when none)."""
    from starlette.routing import Match

    for route in getattr(app, "routes", ()):
        match, _ = route.matches(scope)
        if match is Match.FULL or match is Match.PARTIAL:
            return str(getattr(route, "path", "other"))
    return "other"
