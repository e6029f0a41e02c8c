"""Each persistent query's figures, gathered in one place from Spark's progress reports.

Every micro-batch of a Structured Streaming query ends with a ``StreamingQueryProgress``;
one listener on the Spark session (:class:`QueryMetrics`) folds those of the queries it
tracks into running figures per query (:class:`QueryFigures`):

- records consumed: the batch's ``numInputRows``, per input topic (its source's); bytes
  consumed: the key and value bytes of those records, observed on each Kafka source
  (:data:`SOURCE_OBSERVATION`);
- records and bytes produced: what the batch handed the transactional sink, counted by an
  observation (``Dataset.observe``) on the sink's records (:data:`OBSERVATION`); a replayed
  batch that the sink skips is counted again;
- the committed source offsets (each source's ``endOffset``: the next offset to read per
  input partition), against which :func:`end_offsets` gives the consumer lag;
- the last micro-batch's duration, the rows held in state (the state operators'
  ``numRowsTotal``), and the busy fraction (saturation): the batches' durations over the
  wall time of the last :data:`WINDOW_SECONDS`;
- processing-log errors, counted from the processing-log topic when one is configured
  (:meth:`QueryMetrics.follow_processing_log`), per query and per source topic.

The server's ``/metrics`` and ``/lag``, ``DESCRIBE ... EXTENDED``'s statistics and
``kspark run --metrics-interval`` all read these figures (:meth:`QueryFigures.to_json`).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

OBSERVATION = "kspark_sink"  # the observed metrics of a query's sink records
# The observed metrics of each Kafka source a query reads (engine.runtime.kafka): this prefix and
# the source's index, holding the key and value bytes of the batch's records ("bytes").
SOURCE_OBSERVATION = "kspark_source_"
WINDOW_SECONDS = 60.0  # the window of the rates and of the busy fraction
_PENDING = 64  # progress reports of queries not tracked yet, kept until they are


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One input partition of a query: the next offset it will read, the topic's end, the gap."""

    topic: str
    partition: int
    current_offset: int  # the query's committed position (-1: no batch has read it yet)
    end_offset: int

    @property
    def lag(self) -> int:
        return max(0, self.end_offset - max(self.current_offset, 0))

    def to_json(self) -> dict[str, Any]:
        return {"topic": self.topic, "partition": self.partition, "currentOffset": self.current_offset,
                "endOffset": self.end_offset, "lag": self.lag}


@dataclass
class QueryFigures:
    """The running figures of one persistent query (since this process tracked it)."""

    query_id: str
    sink_topic: str
    source_topics: tuple[str, ...] = ()
    state: str = "RUNNING"
    tracked_at: float = field(default_factory=time.time)
    batches: int = 0
    records_consumed: int = 0
    consumed_by_topic: dict[str, int] = field(default_factory=dict)
    bytes_consumed: int = 0
    records_produced: int = 0
    bytes_produced: int = 0
    busy_seconds: float = 0.0
    last_batch_seconds: float = 0.0
    rows_in_state: int = 0
    committed: dict[str, dict[int, int]] = field(default_factory=dict)  # topic -> partition -> next offset
    last_consumed_ms: int = 0  # wall time of the last batch that read records
    last_produced_ms: int = 0
    errors: int = 0  # processing-log entries of this query
    last_error_ms: int = 0
    # (batch end wall time, duration s, records in, records out) of the recent batches
    recent: deque[tuple[float, float, int, int]] = field(default_factory=deque)
    _seen: deque[tuple[str, int]] = field(default_factory=lambda: deque(maxlen=_PENDING))

    def add(self, progress: Mapping[str, Any], now: float) -> None:
        """Fold one progress report (its JSON form) into the figures; a report seen before
        (same run and batch) is left out."""
        key = (str(progress.get("runId")), int(progress.get("batchId", -1)))
        if key in self._seen:
            return
        self._seen.append(key)
        self.batches += 1
        consumed = int(progress.get("numInputRows") or 0)
        self.records_consumed += consumed
        for source in progress.get("sources") or ():
            offsets = _offsets(source.get("endOffset"))
            rows = int(source.get("numInputRows") or 0)
            for topic, partitions in offsets.items():
                self.committed.setdefault(topic, {}).update(partitions)
            topics = sorted(offsets)
            if topics:  # a source of several topics: its rows go to the first
                self.consumed_by_topic[topics[0]] = self.consumed_by_topic.get(topics[0], 0) + rows
        observations = progress.get("observedMetrics") or {}
        self.bytes_consumed += sum(int((metrics or {}).get("bytes") or 0) for name, metrics in observations.items()
                                   if name.startswith(SOURCE_OBSERVATION))
        observed = observations.get(OBSERVATION) or {}
        produced = int(observed.get("records") or 0)
        self.records_produced += produced
        self.bytes_produced += int(observed.get("bytes") or 0)
        duration = float((progress.get("durationMs") or {}).get("triggerExecution") or 0) / 1000.0
        self.busy_seconds += duration
        self.last_batch_seconds = duration
        self.rows_in_state = sum(int(op.get("numRowsTotal") or 0) for op in progress.get("stateOperators") or ())
        if consumed:
            self.last_consumed_ms = int(now * 1000)
        if produced:
            self.last_produced_ms = int(now * 1000)
        self.recent.append((now, duration, consumed, produced))
        self._trim(now)

    def snapshot(self) -> QueryFigures:
        """A copy to read while the listener goes on adding to this one."""
        return dataclasses.replace(
            self, consumed_by_topic=dict(self.consumed_by_topic),
            committed={topic: dict(offsets) for topic, offsets in self.committed.items()},
            recent=deque(self.recent), _seen=deque(self._seen, maxlen=_PENDING),
        )

    def _trim(self, now: float) -> None:
        while self.recent and self.recent[0][0] < now - WINDOW_SECONDS:
            self.recent.popleft()

    def _window(self, now: float) -> float:
        return max(1e-3, min(WINDOW_SECONDS, now - self.tracked_at))

    def saturation(self, now: float | None = None) -> float:
        """The fraction of the last minute's wall time spent in micro-batches (0..1)."""
        now = time.time() if now is None else now
        self._trim(now)
        return min(1.0, sum(d for _, d, _, _ in self.recent) / self._window(now))

    def rates(self, now: float | None = None) -> tuple[float, float]:
        """Records consumed and produced per second over the last minute."""
        now = time.time() if now is None else now
        self._trim(now)
        window = self._window(now)
        return (sum(r for _, _, r, _ in self.recent) / window, sum(p for _, _, _, p in self.recent) / window)

    def lag(self, ends: Mapping[tuple[str, int], int]) -> list[PartitionLag]:
        """The lag of each input partition, the topics' ends given by ``ends``."""
        partitions = {(t, p) for t, p in ends if t in self.source_topics}
        partitions |= {(t, p) for t, offsets in self.committed.items() for p in offsets}
        return [
            PartitionLag(topic, partition, self.committed.get(topic, {}).get(partition, -1),
                         ends.get((topic, partition), self.committed.get(topic, {}).get(partition, 0)))
            for topic, partition in sorted(partitions)
        ]

    def to_json(self, ends: Mapping[tuple[str, int], int] | None = None, now: float | None = None) -> dict[str, Any]:
        """The figures as ``/lag``, ``kspark run --metrics-interval`` and the docs show them."""
        now = time.time() if now is None else now
        consumed_rate, produced_rate = self.rates(now)
        partitions = self.lag(ends or {})
        return {
            "queryId": self.query_id,
            "state": self.state,
            "timestamp": int(now * 1000),
            "recordsConsumed": self.records_consumed,
            "recordsProduced": self.records_produced,
            "bytesConsumed": self.bytes_consumed,
            "bytesProduced": self.bytes_produced,
            "consumedPerSecond": round(consumed_rate, 3),
            "producedPerSecond": round(produced_rate, 3),
            "batches": self.batches,
            "lastBatchSeconds": round(self.last_batch_seconds, 3),
            "busySeconds": round(self.busy_seconds, 3),
            "saturation": round(self.saturation(now), 4),
            "rowsInState": self.rows_in_state,
            "processingErrors": self.errors,
            "totalLag": sum(p.lag for p in partitions),
            "partitions": [p.to_json() for p in partitions],
        }


def committed_offsets(checkpoint: Path) -> dict[str, dict[int, int]]:
    """The Kafka offsets a Structured Streaming checkpoint's last committed batch read up to,
    by topic and partition (empty: no batch committed, or not a local checkpoint).

    Spark's offset log holds one file per batch (``offsets/<batch id>``): a version line, the
    batch's metadata, then one line per source (its end offsets as JSON, ``-`` for none); the
    commit log (``commits/<batch id>``) names the batches that finished.
    """
    try:
        batches = [int(f.name) for f in (checkpoint / "commits").iterdir() if f.name.isdigit()]
        lines = (checkpoint / "offsets" / str(max(batches))).read_text(encoding="utf-8").splitlines()
    except (OSError, ValueError):  # no checkpoint yet, no committed batch, an unreadable file
        return {}
    committed: dict[str, dict[int, int]] = {}
    for line in lines[2:]:
        try:
            for topic, partitions in _offsets(line if line.strip() not in ("", "-") else None).items():
                committed.setdefault(topic, {}).update(partitions)
        except (ValueError, TypeError, AttributeError):  # a source whose offsets are not Kafka's
            continue
    return committed


def _offsets(text: Any) -> dict[str, dict[int, int]]:
    """A Kafka source's offsets JSON (``{"topic": {"0": 12}}``) by topic and partition."""
    if not text:
        return {}
    value = json.loads(text) if isinstance(text, str) else text
    if not isinstance(value, dict):
        return {}
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in value.items()
            if isinstance(parts, dict)}


class QueryMetrics:
    """The figures of the persistent queries of one application or server, fed by Spark."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._figures: dict[str, QueryFigures] = {}
        self._by_stream: dict[str, str] = {}  # Spark's query id (stable across restarts) -> query id
        self._pending: deque[tuple[str, dict[str, Any], float]] = deque(maxlen=_PENDING)
        self._sessions: dict[int, tuple[Any, Any]] = {}  # id(session) -> (session, its listener)
        self._topic_errors: dict[str, tuple[int, int]] = {}  # source topic -> (errors, last ms)
        self._stop = threading.Event()
        self._followers: list[threading.Thread] = []

    # ------------------------------------------------------------------ feeding

    def observed(self, records: Any) -> Any:
        """``records`` (a query's sink records) counted per batch; listens to their session."""
        from pyspark.sql import functions as F

        self._listen(records.sparkSession)
        size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
        return records.observe(OBSERVATION, F.count(F.lit(1)).alias("records"),
                               F.coalesce(F.sum(size), F.lit(0)).cast("long").alias("bytes"))

    def track(self, query_id: str, handle: Any, *, sink_topic: str, source_topics: Sequence[str] = (),
              checkpoint: Path | None = None) -> None:
        """Follow the started Spark query ``handle`` as ``query_id``; a query restarted from
        ``checkpoint`` starts from the offsets its last committed batch read up to (until its
        first batch reports, the lag counts from there, not from the topics' start)."""
        stream_id = str(handle.id)
        with self._lock:
            figures = self._figures.get(query_id)
            if figures is None:
                figures = self._figures[query_id] = QueryFigures(query_id, sink_topic, tuple(source_topics))
                if checkpoint is not None:
                    figures.committed = committed_offsets(checkpoint)
            figures.state = "RUNNING"
            self._by_stream[stream_id] = query_id
            early = [p for p in self._pending if p[0] == stream_id]
            for item in early:
                self._pending.remove(item)
                figures.add(item[1], item[2])

    def progressed(self, progress: Mapping[str, Any], now: float | None = None) -> None:
        """One progress report (JSON form) of some query of the session."""
        now = time.time() if now is None else now
        stream_id = str(progress.get("id"))
        with self._lock:
            query_id = self._by_stream.get(stream_id)
            if query_id is None:
                self._pending.append((stream_id, dict(progress), now))
                return
            self._figures[query_id].add(progress, now)

    def catch_up(self, handle: Any) -> None:
        """Fold in the reports of ``handle`` (a tracked query) the listener has not delivered
        yet: the listener hears of them asynchronously, after a query that ended is awaited."""
        try:
            reports = [json.loads(p.json) for p in handle.recentProgress]
        except Exception:  # noqa: BLE001 - a query whose JVM side is gone: the listener's figures stand
            return
        now = time.time()
        for report in reports:
            self.progressed(report, now)

    def terminated(self, stream_id: str, failed: bool) -> None:
        with self._lock:
            query_id = self._by_stream.get(stream_id)
            if query_id is not None:
                self._figures[query_id].state = "ERROR" if failed else "NOT_RUNNING"

    def forget(self, query_id: str) -> None:
        """A terminated query: its figures go."""
        with self._lock:
            self._figures.pop(query_id, None)
            for stream_id in [s for s, q in self._by_stream.items() if q == query_id]:
                del self._by_stream[stream_id]

    def _listen(self, spark: Any) -> None:
        with self._lock:
            if id(spark) in self._sessions:
                return
            listener = _listener(self)
            self._sessions[id(spark)] = (spark, listener)
        spark.streams.addListener(listener)

    # ------------------------------------------------------------------ processing log

    def follow_processing_log(self, bootstrap_servers: str, topic: str) -> None:
        """Count the entries written to the processing-log ``topic`` from now on, by query and
        by the source topic of deserialization errors."""
        thread = threading.Thread(target=self._follow, args=(bootstrap_servers, topic),
                                  name="processing-log-metrics", daemon=True)
        self._followers.append(thread)
        thread.start()

    def _follow(self, bootstrap_servers: str, topic: str) -> None:
        from engine.kafka.consume import follow_topic

        try:
            for record in follow_topic(bootstrap_servers, topic, from_beginning=False, stop=self._stop.is_set,
                                       isolation_level="read_uncommitted"):
                self.logged(record.value)
        except Exception:  # noqa: BLE001 - the counts are best effort, as the log itself is
            return

    def logged(self, value: Any) -> None:
        """One processing-log record (its JSON value, bytes or text)."""
        try:
            entry = json.loads(value) if isinstance(value, bytes | str) else value
            logger = str(entry.get("logger") or "")
            when = int(entry.get("time") or time.time() * 1000)
            message = entry.get("message") or {}
        except (ValueError, AttributeError):
            return
        parts = logger.split(".")
        query_id = parts[1] if len(parts) > 1 and parts[0] == "processing" else None
        source = (message.get("deserializationError") or {}).get("topic") if isinstance(message, dict) else None
        with self._lock:
            if query_id in self._figures:
                figures = self._figures[query_id]
                figures.errors += 1
                figures.last_error_ms = max(figures.last_error_ms, when)
            if source:
                count, last = self._topic_errors.get(source, (0, 0))
                self._topic_errors[source] = (count + 1, max(last, when))

    def close(self) -> None:
        """Stop listening to Spark and to the processing log (the figures stay readable)."""
        self._stop.set()
        with self._lock:
            sessions, self._sessions = list(self._sessions.values()), {}
        for spark, listener in sessions:
            try:
                spark.streams.removeListener(listener)
            except Exception:  # noqa: BLE001 - a stopped session has no listeners left to remove
                pass

    # ------------------------------------------------------------------ reading

    def figures(self, query_id: str) -> QueryFigures | None:
        """A snapshot of the query's figures (None: not tracked)."""
        with self._lock:
            figures = self._figures.get(query_id)
            return None if figures is None else figures.snapshot()

    def all(self) -> list[QueryFigures]:
        """Snapshots of every tracked query's figures."""
        with self._lock:
            return [figures.snapshot() for figures in self._figures.values()]

    def topic_statistics(self, topic: str, now: float | None = None) -> list[Stat]:
        """ksqlDB's statistics of a source's topic: what the queries reading it consumed, what
        those writing it produced (``consumer-total-bytes`` is not known: not shown)."""
        now = time.time() if now is None else now
        tracked = self.all()
        readers = [f for f in tracked if topic in f.consumed_by_topic or topic in f.source_topics]
        writers = [f for f in tracked if f.sink_topic == topic]
        stats: list[Stat] = []
        if readers:
            last = max(f.last_consumed_ms for f in readers)
            total = sum(f.consumed_by_topic.get(topic, 0) for f in readers)
            rate = sum(_topic_rate(f, topic, now) for f in readers)
            stats += [Stat("consumer-messages-per-sec", rate, last), Stat("consumer-total-messages", total, last)]
        if writers:
            last = max(f.last_produced_ms for f in writers)
            stats += [Stat("messages-per-sec", sum(f.rates(now)[1] for f in writers), last),
                      Stat("total-messages", sum(f.records_produced for f in writers), last)]
        return stats

    def topic_error_statistics(self, topic: str, now: float | None = None) -> list[Stat]:
        """ksqlDB's error stats of a source's topic: the records of it that failed to deserialize."""
        now = time.time() if now is None else now
        with self._lock:
            if topic not in self._topic_errors:
                return []
            count, last = self._topic_errors[topic]
            started = min((f.tracked_at for f in self._figures.values()), default=now)
        window = max(1e-3, min(WINDOW_SECONDS, now - started))
        recent = count if now - last / 1000.0 < WINDOW_SECONDS else 0
        return [Stat("consumer-failed-messages", count, last), Stat("consumer-failed-messages-per-sec", recent / window, last)]


def _topic_rate(figures: QueryFigures, topic: str, now: float) -> float:
    """The query's consumption rate, its share for ``topic`` (its records of that topic)."""
    total = figures.records_consumed
    share = figures.consumed_by_topic.get(topic, 0) / total if total else 0.0
    return figures.rates(now)[0] * share


@dataclass(frozen=True, slots=True)
class Stat:
    """One of ksqlDB's topic statistics: a name, a value, and the time of its last event (ms)."""

    name: str
    value: float
    timestamp: int

    def formatted(self) -> str:
        """As ksqlDB's ``TopicSensors.Stat`` prints it: the name right-aligned in 16, the value in 10."""
        if self.value == round(self.value):
            return f"{self.name:>16}:{self.value:10.0f}"
        return f"{self.name:>16}:{self.value:10.2f}"

    def time_text(self) -> str:
        return iso_timestamp(self.timestamp) if self.timestamp else "n/a"


def format_stats(stats: Sequence[Stat], last_event: str) -> str:
    """ksqlDB's ``MetricCollectors.format``: each stat and a space, then the first stat's last
    event time (``last_event`` is ``last-message`` or ``last-failed``); empty without stats."""
    text = "".join(stat.formatted() + " " for stat in stats)
    if stats:
        text += f"{last_event:>16}: " + f"{stats[0].time_text():>9}"
    return text


def iso_timestamp(ms: int) -> str:
    """Epoch milliseconds as Java's ``ISO_OFFSET_DATE_TIME`` in UTC (``2024-05-01T10:00:00.25Z``)."""
    moment = datetime.fromtimestamp(ms / 1000.0, tz=UTC)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = ms % 1000
    if fraction:
        text += "." + f"{fraction:03d}".rstrip("0")
    return text + "Z"


def end_offsets(bootstrap_servers: str, topics: Iterable[str], timeout: float = 10.0) -> dict[tuple[str, int], int]:
    """The end offset of every partition of ``topics`` (missing topics are left out)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    from engine.kafka.client import client_config

    wanted = sorted(set(topics))
    if not wanted:
        return {}
    admin = AdminClient(client_config(bootstrap_servers))
    metadata = admin.list_topics(timeout=timeout)
    requests = {
        TopicPartition(topic, partition): OffsetSpec.latest()
        for topic in wanted if topic in metadata.topics and metadata.topics[topic].error is None
        for partition in metadata.topics[topic].partitions
    }
    if not requests:
        return {}
    ends: dict[tuple[str, int], int] = {}
    for tp, future in admin.list_offsets(requests, request_timeout=timeout).items():
        try:
            ends[(tp.topic, tp.partition)] = int(future.result().offset)
        except Exception:  # noqa: BLE001 - a partition without a leader now: its lag is unknown
            continue
    return ends


def _listener(metrics: QueryMetrics) -> Any:
    """A Spark listener feeding ``metrics`` (made here: pyspark is imported only with Spark)."""
    from pyspark.sql.streaming import StreamingQueryListener

    class _ProgressListener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            metrics.progressed(json.loads(event.progress.json))

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            metrics.terminated(str(event.id), event.exception is not None)

    return _ProgressListener()


class MetricsReporter:
    """Writes every tracked query's figures as one JSON line per query each ``interval`` seconds
    (``kspark run --metrics-interval``), and once more when stopped."""

    def __init__(self, metrics: QueryMetrics, bootstrap_servers: str, interval: float, out: Any) -> None:
        if interval <= 0:
            raise ValueError(f"The metrics interval must be positive, not {interval}.")
        self.metrics = metrics
        self.bootstrap_servers = bootstrap_servers
        self.interval = interval
        self.out = out  # a text stream
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="metrics-reporter", daemon=True)

    def start(self) -> MetricsReporter:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.report()

    def report(self) -> None:
        """One line per tracked query now."""
        figures = sorted(self.metrics.all(), key=lambda f: f.query_id)
        if not figures:
            return
        try:
            ends = end_offsets(self.bootstrap_servers, {t for f in figures for t in (*f.source_topics, *f.committed)})
        except Exception:  # noqa: BLE001 - the broker does not answer now: the lines go without the ends
            ends = {}
        now = time.time()
        lines = "".join(json.dumps(f.to_json(ends, now), sort_keys=True) + "\n" for f in figures)
        self.out.write(lines)
        self.out.flush()

    def stop(self) -> None:
        """Stop the reports after a last one."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 15)
        self.report()
