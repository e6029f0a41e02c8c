"""A streaming application: a SQL file's statements run as persistent queries on Kafka.

``kspark run FILE.sql --bootstrap-servers HOST:PORT --state-dir DIR`` hosts one of these.
Its state dir is its memory between runs:

```
DIR/
  statements.json            every statement applied so far, in order, with its plan
  <query id>/query.json      the query's task count (fixed at its first start)
  <query id>/checkpoint/     the query's Structured Streaming checkpoint (offsets, state)
  <query id>/error.txt       the query's last failure in full (Spark's and Python's stacks)
```

On a restart the saved plans are applied again as they were saved, never re-planned from
the SQL, so a query keeps the step versions it started with even when the engine now plans
the same SQL differently. The file's statements are matched to the saved ones in order:
already applied ones are skipped (INSERT VALUES is not repeated), new ones at the end are
planned and applied, and a statement that differs from the one applied in its place is an
error naming it. Queries restart from their checkpoints.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.records import TopicInfo, TopicRecord
from engine.errors import (
    AnalysisError,
    ExecutionError,
    KafkaClientError,
    KsqlError,
    RecordSerdeError,
    UpgradeError,
    query_failure_cause,
    query_failure_in,
    root_cause_line,
)
from engine.facade.compatibility import record_service_values, replay_values, settle_after_replay
from engine.facade.engine import KsqlEngine
from engine.hosting.query_metrics import QueryMetrics
from engine.kafka.admin import TopicAdmin
from engine.kafka.produce import ProducerRecord, SharedProducer, UnknownPartitionError
from engine.parser import ast, parse
from engine.plan import serde
from engine.plan.plan import QueryPlan
from engine.plan.steps import StreamSink, TableSink
from engine.plan.steps_native import (
    StreamSinkV2,
    StreamSinkV3,
    StreamSinkV4,
    StreamSinkV5,
    TableSinkV2,
    TableSinkV3,
    TableSinkV4,
    TableSinkV5,
)
from engine.planner.internal_topics import (
    DEFAULT_PERSISTENT_PREFIX,
    PERSISTENT_PREFIX,
    SERVICE_ID,
    application_id,
)
from engine.runtime import processing_log
from engine.runtime.adapter import TopicCodec
from engine.serde.base import RecordSerde

STATEMENTS_FILE = "statements.json"
QUERY_FILE = "query.json"
CHECKPOINT_DIR = "checkpoint"
ERROR_FILE = "error.txt"  # the last failure of a query, in full
SCHEMA_REGISTRY_URL = "ksql.schema.registry.url"  # AVRO/JSON_SR topics in the registry's wire format


class KafkaTopics:
    """The engine's topic service on a Kafka cluster: topics from the broker, writes as bytes."""

    def __init__(self, bootstrap_servers: str, *, create: bool = True, registry_url: str | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.admin = TopicAdmin(bootstrap_servers)
        self.create = create  # False: a read-only view that leaves the cluster's topics alone
        self.registry_url = registry_url  # AVRO/JSON_SR records (INSERT VALUES) in the registry's wire format
        # INSERT VALUES and /inserts-stream rows of every request thread go through one producer.
        self._producer: SharedProducer | None = None
        self._wire_serdes: dict[tuple[Any, ...], RecordSerde] = {}
        self._lock = threading.Lock()

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return {name: TopicInfo(name, partitions=count) for name, count in self.admin.partition_counts().items()}

    def ensure(self, info: TopicInfo) -> TopicInfo:
        if not self.create:
            exists = self.admin.topic_exists(info.name)
            return TopicInfo(info.name, partitions=self.admin.partition_count(info.name)) if exists else info
        self.admin.create_topic(info.name, info.partitions, exist_ok=True, configs=info.configs,
                                replication_factor=info.replicas if info.replicas is not None else -1)
        return TopicInfo(info.name, partitions=self.admin.partition_count(info.name))

    def settings(self, name: str) -> tuple[int | None, dict[str, str]]:
        """An existing topic's replication factor and configs, as a CREATE ... AS SELECT
        inherits them from its source topic ((None, {}) when it cannot be described)."""
        try:
            described = self.admin.describe_topic(name)
            configs = self.admin.topic_config(name)
        except KafkaClientError:
            return None, {}
        return (described[1] if described is not None else None), configs

    def append(self, record: TopicRecord, seq: tuple[int, ...] | None = None) -> None:
        raise ExecutionError(
            f"Records for topic '{record.topic}' need a format to be written to Kafka."
        )

    def _wire(self, serde: RecordSerde, topic: str) -> RecordSerde:
        """``serde`` in the registry's wire format, made once per topic and serde: a wire serde
        registers its schema and builds its serializer on first use, not for every record."""
        from engine.serde.registry import wire_serde

        key = (topic, serde.format, serde.columns, serde.wrapped, serde.is_key)
        with self._lock:
            if key not in self._wire_serdes:
                self._wire_serdes[key] = wire_serde(serde, topic, self.registry_url)
            return self._wire_serdes[key]

    def _shared_producer(self, stale: SharedProducer | None = None) -> SharedProducer:
        """The producer every thread writes through; a new one in place of ``stale``."""
        with self._lock:
            if self._producer is None or self._producer is stale:
                old, self._producer = self._producer, SharedProducer(self.bootstrap_servers)
                if old is not None:
                    threading.Thread(target=old.close, daemon=True).start()
            return self._producer

    def close(self) -> None:
        """Deliver what is queued and stop the producer."""
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.close()

    def publish(self, record: TopicRecord, codec: TopicCodec) -> None:
        from engine.serde.registry import SchemaFetchError

        key_serde = self._wire(codec.key, record.topic)
        value_serde = self._wire(codec.value, record.topic)
        # A key or value its format cannot write fails the insert in ksqlDB's words
        # (InsertValuesExecutor): the key's reason is its cause only, the value's is told.
        try:
            key = key_serde.to_bytes(record.key)
        except SchemaFetchError:
            raise  # ksqlDB meets it when it makes the serializer
        except RecordSerdeError as exc:
            raise RecordSerdeError("Could not serialize key") from exc
        try:
            value = value_serde.to_bytes(record.value)
        except SchemaFetchError:
            raise
        except RecordSerdeError as exc:
            raise RecordSerdeError(f"Could not serialize value{exc}") from None
        produced = ProducerRecord(key=key, value=value, timestamp=record.timestamp or None)
        producer = self._shared_producer()
        for attempt in (1, 2):
            try:
                producer.write(record.topic, produced)
                return
            except UnknownPartitionError:
                if attempt == 2:
                    raise
                # The producer partitioned by a view of the topic older than the topic (made
                # again with fewer partitions since), so the record was not written: a new
                # producer reads the topic afresh.
                producer = self._shared_producer(stale=producer)


def state_dir_path(location: str | Path) -> Path:
    """The folder a ``--state-dir`` names: a path, or a ``file:`` URI (``file:/data/kspark``,
    ``file:///data/kspark``). On a Spark cluster it must be a folder every worker sees at the
    same path (a shared mount): the query checkpoints live under it."""
    from urllib.parse import unquote, urlparse

    if isinstance(location, Path):
        return location
    parsed = urlparse(location)
    if parsed.scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise ExecutionError(f"The state dir '{location}' names the host '{parsed.netloc}': a file: URI "
                                 "names a local folder (file:///path).")
        return Path(unquote(parsed.path))
    if len(parsed.scheme) > 1:  # a scheme, not a Windows drive letter
        raise ExecutionError(
            f"The state dir '{location}' is on a '{parsed.scheme}:' file system: kspark keeps its state on "
            "a local or mounted file system; give a path or a file: URI (on a cluster, a folder every "
            "Spark worker mounts at the same path)."
        )
    return Path(location)


@dataclass
class SavedStatement:
    """One applied statement as the state dir keeps it."""

    text: str
    plan: Any = None  # the statement plan's JSON value, when it has one
    # The compatibility-breaking configs it was applied with (engine.facade.compatibility);
    # none in state dirs of 0.11.0 and earlier.
    properties: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        value = {"text": self.text, "plan": self.plan}
        return {**value, "properties": self.properties} if self.properties else value


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().rstrip(";").strip()


@dataclass
class StreamingApplication:
    """Statements applied once and remembered in ``state_dir``; their queries run on Kafka."""

    bootstrap_servers: str
    state_dir: Path
    properties: Mapping[str, Any] = field(default_factory=dict)
    spark_master: str = "local[2]"
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    read_only: bool = False  # kspark query: load the state dir, write nothing, create no topic
    # What makes a query's Kafka identities (its sink's transactional ids and marks) unique
    # among every application on the broker; by default ksqlDB's application-id prefix
    # ``_confluent-ksql-<ksql.service.id><ksql.persistent.prefix>``.
    application_prefix: str | None = None
    # False: no figures are gathered (no observation on the sink, no progress listener);
    # the metrics benchmark's baseline.
    collect_metrics: bool = True

    def __post_init__(self) -> None:
        self.state_dir = state_dir_path(self.state_dir)
        registry_url = self.properties.get(SCHEMA_REGISTRY_URL) or None
        self.topics = KafkaTopics(self.bootstrap_servers, create=not self.read_only,
                                  registry_url=None if registry_url is None else str(registry_url))
        self.engine = KsqlEngine(self.properties, topics=self.topics)
        self.saved: list[SavedStatement] = []
        self.running: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.processing_log = self._processing_log()
        self.metrics = QueryMetrics()  # every query's figures (engine.hosting.query_metrics)
        self._counting_log = False

    def _processing_log(self) -> processing_log.ProcessingLogTopic | None:
        """The processing-log topic the properties configure (created here), its stream registered."""
        target = processing_log.configured_topic(self.properties, self.bootstrap_servers)
        if target is None:
            return None
        if not self.read_only:
            self.topics.admin.create_topic(target.topic, 1, exist_ok=True)
        stream = processing_log.flag(self.properties, "ksql.logging.processing.stream.auto.create")
        if stream and self.topics.admin.topic_exists(target.topic):
            self.engine.execute_sql(processing_log.stream_ddl(target.topic))
        return target

    # ------------------------------------------------------------------ statements

    def load(self) -> int:
        """Apply the statements saved in the state dir; how many there were."""
        path = self.state_dir / STATEMENTS_FILE
        if not path.is_file():
            return 0
        try:
            entries = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ExecutionError(f"{path} is not valid JSON (line {exc.lineno}): the state dir is damaged.") from None
        for number, entry in enumerate(entries, start=1):
            saved = SavedStatement(entry["text"], entry.get("plan"), dict(entry.get("properties") or {}))
            replay_values(self.engine.config, saved.properties)
            try:
                if saved.plan is not None:
                    self.engine.restore(serde.statement_plan_from_json(saved.plan))
                elif not _is_insert_values(saved.text):
                    self.engine.execute_sql(saved.text)
            except KsqlError as exc:
                raise ExecutionError(
                    f"Statement {number} saved in {path} cannot be applied by this engine: {exc}"
                ) from None
            self.saved.append(saved)
        settle_after_replay(self.engine.config, commands_replayed=len(self.saved))
        return len(self.saved)

    def submit(self, text: str) -> list[str]:
        """Apply the statements of ``text`` not applied before; the texts of those applied now."""
        parsed = parse(text, variables=self.engine.variables)
        statements = [p.text for p in parsed]
        if len(statements) < len(self.saved):
            raise ExecutionError(
                f"The state dir {self.state_dir} has applied {len(self.saved)} statements, the file "
                f"holds only {len(statements)}: statements cannot be removed from a running application."
            )
        for number, (saved, stmt) in enumerate(zip(self.saved, statements, strict=False), start=1):
            if _normalise(saved.text) != _normalise(stmt):
                raise ExecutionError(
                    f"Statement {number} differs from the one the state dir {self.state_dir} applied: "
                    f"'{_short(stmt)}' vs '{_short(saved.text)}'. Use a new state dir to run changed statements."
                )
        applied = []
        for statement in parsed[len(self.saved):]:
            stmt = statement.text
            try:
                self._check_replacement(statement.statement, stmt)
                results = self.engine.execute_sql(stmt)
            except AnalysisError as exc:
                statement.relocate(exc)  # placed in the file, not in the statement alone
                raise
            recorded: dict[str, Any] = {}
            record_service_values(recorded, self.engine.config)
            for result in results:
                plan = serde.to_json_value(result.plan) if result.plan is not None else None
                self.saved.append(SavedStatement(result.statement_text, plan, recorded))
            self._save_statements()
            applied.append(stmt)
        return applied

    def _check_replacement(self, stmt: Any, text: str) -> None:
        """Refuse a CREATE OR REPLACE whose new plan Spark could not run on the replaced
        query's checkpoint (``state_carry_problem``); nothing is applied to find out."""
        if not (isinstance(stmt, ast.CreateAsSelect) and stmt.or_replace):
            return
        from engine.runtime.session import get_spark

        results = self.engine.snapshot().execute_sql(text)
        plan = results[-1].plan if results else None
        old = self.engine.queries.get(plan.query.query_id) if plan is not None and plan.query is not None else None
        if old is None or plan is None or plan.query is None:
            return
        spark = get_spark(self.spark_master, dict(self.spark_conf), kafka=True, long_running=True)
        problem = state_carry_problem(self.engine, old, plan.query, spark, self.bootstrap_servers,
                                      tasks=self.tasks_of(old))
        if problem is not None:
            raise UpgradeError(problem)

    def _save_statements(self) -> None:
        if self.read_only:
            raise ExecutionError(f"The state dir {self.state_dir} is open read-only: statements cannot be applied.")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.state_dir / STATEMENTS_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps([s.to_json() for s in self.saved], indent=2, sort_keys=True) + "\n", encoding="utf-8")
        tmp.replace(path)

    # ------------------------------------------------------------------ queries

    def queries(self) -> list[QueryPlan]:
        return self.engine.query_order()

    def application_id(self, query_id: str) -> str:
        """The query's identity on the broker: two applications sharing a broker (two
        services, two QTT cases) may both run a CSAS_OUT_0, and must not fence each other."""
        if self.application_prefix is not None:
            return self.application_prefix + query_id
        return application_id(str(self.properties.get(SERVICE_ID, "default_")), query_id,
                              str(self.properties.get(PERSISTENT_PREFIX, DEFAULT_PERSISTENT_PREFIX)))

    def tasks_of(self, query: QueryPlan) -> int:
        """The query's task count: fixed at its first start (the largest source partition count)."""
        path = self.state_dir / query.query_id / QUERY_FILE
        if path.is_file():
            return int(json.loads(path.read_text(encoding="utf-8"))["tasks"])
        tasks = task_count(self.engine, query)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"queryId": query.query_id, "tasks": tasks}, indent=2) + "\n", encoding="utf-8")
        return tasks

    def start_query(self, query: QueryPlan, *, available_now: bool) -> Any:
        """Build ``query`` from its plan and start it as a Structured Streaming query."""
        handle = self.launch(query, available_now=available_now)
        self.running[query.query_id] = handle
        return handle

    def launch(self, query: QueryPlan, *, available_now: bool, starting_offsets: str | None = None) -> Any:
        """Build ``query`` and start it writing through the transactional sink from its checkpoint
        (``starting_offsets`` or the engine's ``auto.offset.reset`` where it has none yet); its
        progress is followed in ``self.metrics``. Returns the Spark query's handle."""
        from engine.runtime.kafka_sink import TransactionalSink
        from engine.runtime.session import get_spark

        spark = get_spark(self.spark_master, dict(self.spark_conf), kafka=True, long_running=True)
        tasks = self.tasks_of(query)
        offsets = starting_offsets or str(self.engine.config.get("auto.offset.reset", "latest"))
        processing_log.configure_spark(spark, self.processing_log)
        streaming = build_streaming_query(
            self.engine, query, spark, self.bootstrap_servers, tasks=tasks, starting_offsets=offsets.lower(),
            metered=self.collect_metrics,
        )
        writer = (
            self.observed(streaming).writeStream.foreachBatch(
                TransactionalSink(self.bootstrap_servers, streaming.topic, self.application_id(query.query_id))
            )
            .option("checkpointLocation", checkpoint_location(self.state_dir, query.query_id))
            .queryName(query.query_id)
        )
        writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="0 seconds")
        with self._lock:
            # The shuffle partition count is frozen into the checkpoint at the first start.
            spark.conf.set("spark.sql.shuffle.partitions", str(tasks))
            try:
                handle = writer.start()
            finally:
                spark.conf.set("spark.sql.shuffle.partitions", "1")
        self.track(query, handle, streaming)
        return handle

    def observed(self, streaming: StreamingQuery) -> Any:
        """The query's sink records, counted per batch by ``self.metrics`` (which from the first
        query on also counts the processing log's entries, when there is one)."""
        if not self.collect_metrics:
            return streaming.records
        with self._lock:
            follow, self._counting_log = self.processing_log is not None and not self._counting_log, True
        if follow and self.processing_log is not None:
            self.metrics.follow_processing_log(self.processing_log.bootstrap_servers, self.processing_log.topic)
        return self.metrics.observed(streaming.records)

    def track(self, query: QueryPlan, handle: Any, streaming: StreamingQuery) -> None:
        """Follow the started query's progress in ``self.metrics``."""
        if not self.collect_metrics:
            return
        self.metrics.track(query.query_id, handle, sink_topic=streaming.topic,
                           source_topics=source_topics(self.engine, query),
                           checkpoint=self.state_dir / query.query_id / CHECKPOINT_DIR)

    def run_until_caught_up(self) -> None:
        """Run each query over everything its input topics hold, upstream queries first."""
        for query in self.queries():
            for attempt in range(RESTARTS + 1):
                handle = self.start_query(query, available_now=True)
                try:
                    _await(handle, query.query_id, self.state_dir / query.query_id / ERROR_FILE)
                    break
                except RestartableFailure:
                    if attempt == RESTARTS:
                        raise
                finally:
                    self.metrics.catch_up(handle)
                    self.running.pop(query.query_id, None)

    def run_forever(self, stop: threading.Event | None = None, poll: float = 0.5) -> None:
        """Run every query until ``stop`` is set (or one fails)."""
        for query in self.queries():
            self.start_query(query, available_now=False)
        try:
            restarts: dict[str, int] = {}
            queries = {q.query_id: q for q in self.queries()}
            while stop is None or not stop.is_set():
                for query_id, handle in list(self.running.items()):
                    if handle.isActive:
                        continue
                    try:
                        _await(handle, query_id, self.state_dir / query_id / ERROR_FILE)
                    except RestartableFailure:
                        restarts[query_id] = restarts.get(query_id, 0) + 1
                        if restarts[query_id] > RESTARTS:
                            raise
                        self.start_query(queries[query_id], available_now=False)
                        continue
                    raise ExecutionError(f"Query {query_id} stopped unexpectedly.")
                time.sleep(poll)
        finally:
            self.stop()

    def stop(self) -> None:
        """Stop every running query (a batch in flight is replayed on the next start) and the
        producer of INSERT VALUES."""
        for handle in list(self.running.values()):
            try:
                handle.stop()
            except Exception:  # noqa: BLE001 - stopping must reach every query
                pass
        self.running.clear()
        self.topics.close()
        self.metrics.close()


@dataclass(frozen=True)
class StreamingQuery:
    """A query built for the streaming runtime: its encoded output records and sink topic."""

    records: Any  # DataFrame of engine.runtime.kafka.SINK_SCHEMA
    topic: str
    runtime: Any  # the KafkaRuntime that built it

    def describe(self) -> str:
        """Its stateful operators and analysed logical plan (see ``describe_streaming_plan``)."""
        from engine.runtime.kafka import describe_streaming_plan

        return describe_streaming_plan(self.runtime, self.records)


def build_streaming_query(
    engine: KsqlEngine,
    query: QueryPlan,
    spark: Any,
    bootstrap_servers: str,
    *,
    tasks: int,
    starting_offsets: str = "latest",
    metered: bool = False,
) -> StreamingQuery:
    """Build ``query`` from its plan on the Kafka runtime (nothing runs, no broker is asked);
    ``metered``: its sources count the bytes they read (metrics, no change to its records)."""
    from engine.builders.context import BuildContext
    from engine.builders.formats import serdes_for
    from engine.builders.walker import build
    from engine.runtime.kafka import KafkaRuntime, registry_codec

    registry_url = engine.config.get(SCHEMA_REGISTRY_URL) or None
    runtime = KafkaRuntime(
        spark, bootstrap_servers, tasks=tasks, starting_offsets=starting_offsets, query_id=query.query_id,
        registry_url=None if registry_url is None else str(registry_url), metered=metered,
    )
    # A registry of the engine's own (the QTT harness's in-process one) when the config names none.
    build_registry = registry_url or engine.schema_registry_url
    built = build(query.root, BuildContext(runtime=runtime, query_id=query.query_id, config=engine.config,
                                           registry_url=None if build_registry is None else str(build_registry)))
    sink_step = query.root
    if not isinstance(sink_step, StreamSink | TableSink | StreamSinkV2 | TableSinkV2 | StreamSinkV3 | TableSinkV3
                      | StreamSinkV4 | TableSinkV4 | StreamSinkV5 | TableSinkV5):
        raise ExecutionError(f"Query {query.query_id} does not end in a sink step ({sink_step.TYPE}).")
    sink = engine.metastore.get(query.sink)
    key_serde, value_serde = serdes_for(sink_step.formats, built.schema.columns)
    window = built.window
    codec = TopicCodec(
        key_serde,
        value_serde,
        None if window is None else ("SESSION" if window.type == "SESSION" else "TIME"),
        window.size_ms if window is not None else None,
    )
    topic = sink.topic if sink is not None else query.sink
    if built.encoded:
        records = runtime.encoded_sink_records(built.df)
    else:
        records = runtime.sink_records(built.df, registry_codec(codec, topic, runtime.registry_url), sink_step.ctx,
                                       base_key_partitions=built.base_key_partitions)
    return StreamingQuery(records, topic, runtime)


_OPERATOR = re.compile(r"^operator \d+: (?P<name>\S+) (?P<processor>\S+) ")


def state_carry_problem(
    engine: KsqlEngine, old: QueryPlan, new: QueryPlan, spark: Any, bootstrap_servers: str, *, tasks: int
) -> str | None:
    """Why the running query ``old`` cannot go on as ``new`` from its checkpoint, or None.

    Spark restores each stateful operator of a checkpoint by its position, its processor and
    its state variables: the two plans must build the same ones (``engine.plan.upgrade`` lets
    projections and filters change, and a HAVING the native compiler cannot compile would
    move an aggregate to another processor, say)."""

    def operators(query: QueryPlan) -> list[str]:
        built = build_streaming_query(engine, query, spark, bootstrap_servers, tasks=tasks)
        shapes = []
        for line in built.runtime.stateful_operators:
            match = _OPERATOR.match(line)
            state = line.rsplit("; state: ", 1)[-1]
            shapes.append(f"{match['name']} {match['processor']} (state: {state})" if match else line)
        return shapes

    before, after = operators(old), operators(new)
    if before == after:
        return None
    return (
        f"Query is not upgradeable. Spark cannot carry the state of query {old.query_id} across: its checkpoint "
        f"holds the stateful operators [{'; '.join(before)}], the new plan builds [{'; '.join(after) or 'none'}]."
    )


def source_topics(engine: KsqlEngine, query: QueryPlan) -> list[str]:
    """The topics a query reads (its sources' topics)."""
    topics = []
    for name in query.sources:
        source = engine.metastore.get(name)
        topics.append(source.topic if source is not None else name)
    return sorted(set(topics))


def task_count(engine: KsqlEngine, query: QueryPlan) -> int:
    """The task count a query gets at its first start: the largest source partition count."""
    topics = engine.store.topics
    counts = []
    for name in query.sources:
        source = engine.metastore.get(name)
        if source is not None and source.topic in topics:
            counts.append(topics[source.topic].partitions)
    return max(counts, default=1)


def checkpoint_location(state_dir: Path, query_id: str) -> str:
    """The query's checkpoint, rid of the log writes a killed process left unfinished.

    Spark writes each entry of a checkpoint's offset and commit logs to a hidden temporary file
    (``.N.<uuid>.tmp``, and its ``.crc``) and then renames it. A process killed between the two
    leaves the temporary file behind: Spark's readers skip it, but its check that a query's
    first batch starts from an empty checkpoint counts it, and the query would refuse to start
    ever again (``STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY``). Only the query's owner starts
    it, so no other writer's file is removed.
    """
    checkpoint = state_dir / query_id / CHECKPOINT_DIR
    for log in ("offsets", "commits"):
        folder = checkpoint / log
        if folder.is_dir():
            for leftover in [*folder.glob(".*.tmp"), *folder.glob("..*.tmp.crc")]:
                leftover.unlink(missing_ok=True)
    return str(checkpoint)


class RestartableFailure(ExecutionError):
    """A query stopped on an error known to leave its checkpoint consistent: restart it."""


# Spark 4.1's Kafka source reports progress metrics from offsets it only knows after
# planning a new batch; after a restart that replays the batch in flight at a crash, the
# replayed batch completes and is committed, then the progress report fails on a null.
# A restart finds that batch committed and goes on.
_RESTARTABLE = ("KafkaMicroBatchStream.metrics",)
RESTARTS = 3


def _await(handle: Any, query_id: str, error_file: Path | None = None) -> None:
    """Wait for the query to end; its failure as one line, the whole error kept in ``error_file``."""
    from pyspark.errors import StreamingQueryException

    try:
        handle.awaitTermination()
    except StreamingQueryException as exc:
        message = f"Query {query_id} failed: {query_failure_in(exc) or _root_cause(exc)}"
        if error_file is not None:
            try:
                error_file.parent.mkdir(parents=True, exist_ok=True)
                error_file.write_text(f"{message}\n\n{exc}\n\n"
                                      f"{_stack_text(handle)}\n", encoding="utf-8")
                message += f" (whole error in {error_file})"
            except OSError:
                pass  # a read-only or remote state dir: the line alone must do
        if any(signature in _stack_text(handle) for signature in _RESTARTABLE):
            raise RestartableFailure(message) from None
        raise ExecutionError(message) from query_failure_cause(exc)


def _stack_text(handle: Any) -> str:
    """The Java stack of the query's failure, as text (empty when there is none)."""
    try:
        failure = handle._jsq.exception()
        if failure.isEmpty():
            return ""
        cause = failure.get()
        frames: list[str] = []
        while cause is not None:
            frames.append(f"Caused by: {cause.toString()}")
            frames.extend(f"\tat {f.toString()}" for f in cause.getStackTrace())
            cause = cause.getCause()
        return "\n".join(frames)
    except Exception:  # noqa: BLE001 - only a hint for the restart decision
        return ""


# Exceptions that only wrap the one that explains a failure.
def _root_cause(exc: Exception) -> str:
    """The line of a query's failure that explains it: the innermost exception that is not a
    wrapper (Spark's job abort, py4j's call error, a Python worker's traceback), with its message."""
    return root_cause_line(str(exc), type(exc).__name__)


def _is_insert_values(text: str) -> bool:
    return bool(re.match(r"\s*INSERT\s+INTO\s+\S+\s*(\([^)]*\))?\s*VALUES", text, re.IGNORECASE))


def _short(text: str, limit: int = 80) -> str:
    flat = _normalise(text)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def statement_texts(text: str) -> Sequence[str]:
    """The statements of ``text``, as the application matches them to saved ones."""
    return [p.text for p in parse(text)]
