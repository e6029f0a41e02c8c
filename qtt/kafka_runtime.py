"""QTT cases on the streaming runtime: a real Kafka broker and Structured Streaming queries.

    with KafkaHarness.open(bootstrap_servers=None) as kafka:   # None: start a broker
        result = run_case(case, strict=True, engine_factory=kafka.engine_factory(case))

``qtt run`` and ``qtt conformance`` use this with ``--runtime kafka``. The runner drives a
``KafkaCaseEngine`` exactly as it drives the bounded engine (create topics, execute the
statements, produce the inputs, run, verify, check post-conditions); what differs is here:

- **Isolation.** Every topic of a case is renamed with a per-case prefix
  (``qtt-<run>-<n>-``): in ``KAFKA_TOPIC`` values, in the topics created up front, in the
  records, and through ``ksql.output.topic.name.prefix`` (prefix + the case's own value)
  for sink topics named after their source. Outputs, post-conditions and error messages are
  mapped back, so verification sees the case's own names. Each case's topics are deleted
  when it ends, and each case has a fresh state dir, so cases never see each other's data.
- **Statements** go through ``StreamingApplication.submit`` (plans saved in the state dir)
  with ``auto.offset.reset=earliest``.
- **Inputs** are encoded with the serdes of the first source reading their topic (windowed
  keys in Kafka Streams' windowed-key bytes) and produced by Kafka's Java client in the
  Spark driver's JVM: librdkafka (confluent-kafka) cannot write timestamp 0. A record goes
  to its partition, or 0 when it names none, as the bounded runtime and ksqlDB's test
  driver place it.
- **Running.** The streaming runtime merges a query's input partitions by timestamp within
  a micro-batch, while QTT feeds records in file order. Inputs are therefore produced in
  *file-order groups* (``file_order_groups``), and the queries run until caught up after
  each group, so every group is one micro-batch whose merge order is the file order.
- **Outputs.** Each query's sink topic is read back with a read_committed consumer; records
  the harness produced there and records written before the queries ran (INSERT VALUES)
  are left out, as the bounded runtime leaves them out. Keys and values are decoded with the
  sink source's serdes, windowed keys split into key and window. Kafka orders records per
  partition only: when a case has a topic with more than one partition, records of
  different keys are put in the order the case expects (``order_like_expected``); records
  of one key keep their order.
"""

from __future__ import annotations

import contextlib
import decimal
import json
import re
import shutil
import tempfile
import threading
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.records import Header, TopicInfo, TopicRecord, Window
from engine.errors import KafkaClientError, KsqlError, UnsupportedFeatureError
from engine.facade.api import SourceInfo
from engine.hosting.application import SCHEMA_REGISTRY_URL
from engine.plan.schema import Namespace
from engine.serde import FormatInfo, RecordSerde, SerdeFeatures, key_serde, value_serde
from engine.serde.windowed import (
    decode_session_window_key,
    decode_time_window_key,
    encode_session_window_key,
    encode_time_window_key,
)
from qtt.model import QttCase
from qtt.runner import EngineFactory

OUTPUT_TOPIC_PREFIX = "ksql.output.topic.name.prefix"
OFFSET_RESET = "auto.offset.reset"

_KAFKA_TOPIC = re.compile(r"(\bKAFKA_TOPIC\s*=\s*')((?:[^']|'')*)'", re.IGNORECASE)


# ---------------------------------------------------------------------------- topic names


@dataclass(frozen=True, slots=True)
class TopicPrefix:
    """One case's topic names on the shared broker: ``prefix`` + the name the case uses."""

    prefix: str

    def topic(self, name: str) -> str:
        """The broker topic for the case's topic ``name``."""
        return self.prefix + name

    def original(self, name: str) -> str | None:
        """The case's name for broker topic ``name``; None for a topic of no case of ours."""
        return name[len(self.prefix) :] if name.startswith(self.prefix) else None

    def statement(self, sql: str) -> str:
        """``sql`` with every ``KAFKA_TOPIC='x'`` naming the prefixed topic instead."""
        return _KAFKA_TOPIC.sub(lambda m: f"{m.group(1)}{self.prefix}{m.group(2)}'", sql)

    def text(self, message: str) -> str:
        """A message with the prefix taken out of the topic names it quotes."""
        return message.replace(self.prefix, "")

    def properties(self, properties: Mapping[str, Any]) -> dict[str, Any]:
        """The case's properties plus earliest offsets and the prefix for sink topics."""
        own = str(properties.get(OUTPUT_TOPIC_PREFIX, ""))
        return {**properties, OFFSET_RESET: "earliest", OUTPUT_TOPIC_PREFIX: self.prefix + own}


# ---------------------------------------------------------------------------- ordering


def file_order_groups(records: Sequence[TopicRecord]) -> list[list[TopicRecord]]:
    """Consecutive groups of ``records`` within which the streaming runtime keeps file order.

    Within a micro-batch the runtime orders a query's records by the running maximum
    timestamp of their topic partition, then source, partition and offset. A record that
    would not sort after every earlier record of another partition in its group (its running
    maximum is not greater than theirs: earlier in time, or a tie the source order breaks)
    starts a new group; the running maxima start afresh with each group, as with each batch.
    """
    groups: list[list[TopicRecord]] = []
    current: list[TopicRecord] = []
    running: dict[tuple[str, int], int] = {}
    for record in records:
        where = (record.topic, record.partition or 0)
        ts = record.timestamp or 0
        merged = max(running.get(where, ts), ts)
        others = [m for w, m in running.items() if w != where]
        if others and merged <= max(others):
            groups.append(current)
            current, running, merged = [], {}, ts
        running[where] = merged
        current.append(record)
    if current:
        groups.append(current)
    return groups


def _canonical(value: Any) -> Any:
    """A hashable form of a QTT key under the harness's equality (numbers by value, field
    names without regard to case)."""
    if value is None or isinstance(value, str | bytes | bool):
        return (type(value).__name__, value)
    if isinstance(value, int | float | decimal.Decimal):
        return ("number", float(value))
    if isinstance(value, Mapping):
        return ("object", tuple(sorted((str(k).upper(), _canonical(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("array", tuple(_canonical(v) for v in value))
    return ("other", repr(value))


def _key_of(record: TopicRecord) -> Any:
    w = record.window
    return (_canonical(record.key), None if w is None else (w.start, w.end, w.type.upper()))


def order_like_expected(
    expected: Sequence[TopicRecord], actual: Sequence[TopicRecord]
) -> list[TopicRecord]:
    """``actual`` reordered to the order of ``expected`` as far as keys allow.

    Each expected record takes the next actual record with the same key and window; records
    of one key keep their relative order. Actual records no expected record took follow at
    the end, in their order, so a mismatch still shows in verification.
    """
    queues: dict[Any, deque[int]] = defaultdict(deque)
    for i, record in enumerate(actual):
        queues[_key_of(record)].append(i)
    taken: list[int] = []
    for record in expected:
        queue = queues.get(_key_of(record))
        if queue:
            taken.append(queue.popleft())
    rest = sorted(set(range(len(actual))) - set(taken))
    return [actual[i] for i in taken + rest]


# ---------------------------------------------------------------------------- serdes


@dataclass(frozen=True, slots=True)
class SourceSerdes:
    """A source's key and value serdes and its key's window, as its topic's bytes need."""

    key: RecordSerde
    value: RecordSerde
    window_type: str | None = None  # TUMBLING, HOPPING or SESSION
    window_size_ms: int | None = None

    @staticmethod
    def of(source: SourceInfo, registry_url: str | None = None) -> SourceSerdes:
        """The serdes the engine reads and writes ``source``'s topic with (AVRO and JSON_SR
        in the registry's wire format when ``registry_url`` is given)."""
        key_columns = [c for c in source.schema.columns if c.namespace is Namespace.KEY]
        value_columns = [c for c in source.schema.columns if c.namespace is Namespace.VALUE]
        kf, vf = source.key_format, source.value_format
        wrap = (
            False
            if "UNWRAP_SINGLES" in vf.features
            else True
            if "WRAP_SINGLES" in vf.features
            else None
        )
        from engine.serde.registry import wire_serde

        return SourceSerdes(
            key=wire_serde(key_serde(FormatInfo(kf.format, dict(kf.properties)), key_columns),
                           source.topic, registry_url),
            value=wire_serde(
                value_serde(
                    FormatInfo(vf.format, dict(vf.properties)),
                    value_columns,
                    SerdeFeatures(wrap_single_value=wrap),
                ),
                source.topic,
                registry_url,
            ),
            window_type=(kf.window_type or "").upper() or None,
            window_size_ms=kf.window_size_ms,
        )

    def encode(self, record: TopicRecord) -> tuple[bytes | None, bytes | None]:
        """The key and value bytes of an input record in QTT form."""
        key = _to_bytes(self.key, record.key)
        window = record.window
        if window is not None:
            key = encode_windowed_key(key, window)
        return key, _to_bytes(self.value, record.value)

    def decode(self, topic: str, record: Any) -> TopicRecord:
        """A consumed record (``engine.kafka.ConsumedRecord``) in QTT form."""
        key_bytes, window = record.key, None
        if key_bytes is not None and self.window_type == "SESSION":
            key_bytes, start, end = decode_session_window_key(key_bytes)
            window = Window(start, end, "SESSION")
        elif key_bytes is not None and self.window_type is not None:
            key_bytes, start = decode_time_window_key(key_bytes)
            window = Window(start, start + (self.window_size_ms or 0), "TIME")
        return TopicRecord(
            topic=topic,
            key=self.key.from_bytes(key_bytes),
            # As a consumer of the topic reads it: every field of the writer's registered schema.
            value=getattr(self.value, "read_as_written", self.value.from_bytes)(record.value),
            timestamp=record.timestamp,
            partition=record.partition,
            window=window,
            headers=tuple(record.headers),
        )


def encode_windowed_key(key: bytes | None, window: Window) -> bytes:
    """Kafka Streams' windowed key bytes: the key, then the window (see engine.serde.windowed)."""
    if window.type.upper() == "SESSION":
        return encode_session_window_key(key or b"", window.start, window.end)
    return encode_time_window_key(key or b"", window.start)


def _to_bytes(serde: RecordSerde | None, data: Any) -> bytes | None:
    """``data`` in the serde's bytes; data the format cannot hold goes as its plain text, so
    that the reading query meets it as ksqlDB would meet a malformed record."""
    if data is None:
        return None
    if serde is not None:
        try:
            encoded = serde.to_bytes(data)
        except UnsupportedFeatureError:
            raise
        except KsqlError:
            pass
        else:
            if encoded is not None:
                return encoded
    return plain_bytes(data)


def plain_bytes(data: Any) -> bytes:
    """Bytes for a QTT value that no serde takes: strings as UTF-8, anything else as JSON."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    return json.dumps(data, default=str, separators=(",", ":")).encode("utf-8")


# ---------------------------------------------------------------------------- Java producer


class JavaProducer:
    """Kafka's Java producer in the Spark driver's JVM, through py4j.

    librdkafka reads timestamp 0 as "now"; the Java client writes every timestamp as given.
    The driver has ``kafka-clients`` on its classpath once the SparkSession loaded Spark's
    Kafka connector (``get_spark(kafka=True)``).
    """

    def __init__(self, spark: Any, bootstrap_servers: str) -> None:
        jvm = spark._jvm
        props = jvm.java.util.Properties()
        serializer = "org.apache.kafka.common.serialization.ByteArraySerializer"
        for key, value in {
            "bootstrap.servers": bootstrap_servers,
            "key.serializer": serializer,
            "value.serializer": serializer,
            "acks": "all",
            "enable.idempotence": "true",
            "linger.ms": "0",
            "max.block.ms": "30000",
            "delivery.timeout.ms": "30000",
            "request.timeout.ms": "20000",
        }.items():
            props.setProperty(key, value)
        self._jvm = jvm
        self._producer = jvm.org.apache.kafka.clients.producer.KafkaProducer(props)

    def send(
        self,
        topic: str,
        *,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> Any:
        """Queue a record; returns the Java future of its ``RecordMetadata``."""
        jvm = self._jvm
        java_headers = jvm.org.apache.kafka.common.header.internals.RecordHeaders()
        for header in headers:
            java_headers.add(header.key, None if header.value is None else bytearray(header.value))
        record = jvm.org.apache.kafka.clients.producer.ProducerRecord(
            topic,
            jvm.java.lang.Integer(partition),
            jvm.java.lang.Long(timestamp),
            None if key is None else bytearray(key),
            None if value is None else bytearray(value),
            java_headers,
        )
        try:
            return self._producer.send(record)
        except Exception as exc:  # py4j's Py4JJavaError
            raise KafkaClientError(f"Cannot produce to topic '{topic}': {_java_message(exc)}") from None

    def delivered(self, topic: str, future: Any) -> tuple[int, int]:
        """``(partition, offset)`` of a sent record, waiting for it."""
        try:
            metadata = future.get()
        except Exception as exc:
            raise KafkaClientError(f"Cannot produce to topic '{topic}': {_java_message(exc)}") from None
        return int(metadata.partition()), int(metadata.offset())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._producer.close()


def _java_message(exc: Exception) -> str:
    java = getattr(exc, "java_exception", None)
    if java is not None:
        cause = java
        while cause.getCause() is not None:
            cause = cause.getCause()
        return str(cause.toString())
    return str(exc)


# ---------------------------------------------------------------------------- one case


def _demapped(method: Callable[..., Any]) -> Callable[..., Any]:
    """Engine errors raised by ``method`` quote the case's topic names, not the broker's."""

    def wrapper(self: KafkaCaseEngine, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except KsqlError as exc:
            exc.args = tuple(self.names.text(a) if isinstance(a, str) else a for a in exc.args)
            raise

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


class KafkaCaseEngine:
    """One case on the streaming runtime, behind the facade the QTT runner drives."""

    # A topic a CREATE statement names without PARTITIONS gets one partition here, not the
    # 4 of ksqlDB's runner (the bounded runtime's): on a broker every partition is a Spark
    # task of each query reading it, and records of one case would be spread across them.
    statement_topic_partitions = 1

    def __init__(self, harness: KafkaHarness, case: QttCase, properties: Mapping[str, Any]) -> None:
        from engine.hosting.application import StreamingApplication

        self.harness = harness
        self.case = case
        self.number = harness.next_case_number()
        self.names = TopicPrefix(f"qtt-{harness.run_id}-{self.number}-")
        self.state_dir = harness.work_dir / "cases" / str(self.number)
        self.app = StreamingApplication(
            harness.bootstrap_servers,
            self.state_dir,
            properties=self.names.properties(
                properties if harness.registry_url is None
                else {SCHEMA_REGISTRY_URL: harness.registry_url, **properties}
            ),
            application_prefix=self.names.prefix,  # cases run side by side on one broker
        )
        self.created: dict[str, int] = {}  # broker topic -> partitions
        self.declared = {t.name: t.to_topic_info() for t in case.topics}
        self._sql: list[str] = []
        self._inputs: list[tuple[TopicRecord, bytes | None, bytes | None]] = []

    # -- the runner's engine facade ------------------------------------------------------

    def register_case_schemas(self, case: QttCase) -> None:
        """Register the case's declared topic schemas on the run's registry, under the
        case's prefixed subjects. A real registry assigns its own ids, so a case that
        names schema ids cannot run here."""
        import dataclasses

        from qtt.schemas import RegistrationError, register_topic_schemas

        if not any(t.key_schema is not None or t.value_schema is not None for t in case.topics):
            return
        if self.harness.registry_url is None:
            raise UnsupportedFeatureError("topic schemas declared by the case, without a schema registry")
        if any(t.key_schema_id is not None or t.value_schema_id is not None for t in case.topics) or any(
            "SCHEMA_ID" in s.upper() for s in case.statements
        ):
            raise UnsupportedFeatureError("schema ids of a QTT case on a real schema registry")
        renamed = tuple(dataclasses.replace(t, name=self.names.topic(t.name)) for t in case.topics)
        try:
            register_topic_schemas(renamed, self.harness.registry_url)
        except RegistrationError as exc:
            raise UnsupportedFeatureError(f"a declared topic schema the schema registry refuses ({exc})") from None

    @_demapped
    def create_topic(self, topic: TopicInfo) -> None:
        name = self.names.topic(topic.name)
        if name not in self.created:
            self.harness.admin.create_topic(name, topic.partitions, exist_ok=True)
            self.created[name] = topic.partitions

    @_demapped
    def execute_sql(self, text: str, *, first_line: int = 1) -> list[str]:
        """Submit the case's statements so far as one script (its lines are the script's, so
        ``first_line`` is already where ``text`` starts)."""
        self._sql.append(self.names.statement(text).rstrip().rstrip(";") + ";")
        return self.app.submit("\n".join(self._sql))

    @_demapped
    def produce(self, records: Sequence[TopicRecord]) -> None:
        """Encode the inputs now (format errors belong to this stage); they are sent by ``run``."""
        serdes: dict[str, SourceSerdes | None] = {}
        for record in records:
            if record.topic not in serdes:
                serdes[record.topic] = self._reader_serdes(record.topic)
            codec = serdes[record.topic]
            if codec is not None:
                key, value = codec.encode(record)
            else:
                key = plain_bytes(record.key) if record.key is not None else None
                if record.window is not None:
                    key = encode_windowed_key(key, record.window)
                value = None if record.value is None else plain_bytes(record.value)
            if record.timestamp is not None and record.timestamp < 0:
                raise KafkaClientError(
                    f"A Kafka record cannot have the negative timestamp {record.timestamp} "
                    f"(input to topic '{record.topic}')."
                )
            self._inputs.append((record, key, value))

    @_demapped
    def run(self) -> dict[str, list[TopicRecord]]:
        sinks = self._sinks()
        before = {topic: self._offsets(topic) for topic in sinks}
        produced: set[tuple[str, int, int]] = set()
        groups = file_order_groups([r for r, _, _ in self._inputs])
        encoded = iter(self._inputs)
        for group in groups or [[]]:
            sent = []
            for record, key, value in (next(encoded) for _ in group):
                topic = self.names.topic(record.topic)
                future = self.harness.producer.send(
                    topic,
                    partition=record.partition or 0,
                    timestamp=record.timestamp or 0,
                    key=key,
                    value=value,
                    headers=record.headers,
                )
                sent.append((topic, future))
            for topic, future in sent:
                produced.add((topic, *self.harness.producer.delivered(topic, future)))
            self.app.run_until_caught_up()
        outputs: dict[str, list[TopicRecord]] = {}
        for topic, codec in sinks.items():
            from engine.kafka import read_topic

            original = self.names.original(topic) or topic
            records = [
                codec.decode(original, r)
                for r in read_topic(self.harness.bootstrap_servers, topic)
                if (topic, r.partition, r.offset) not in produced
                and r.offset >= before[topic].get(r.partition, 0)
            ]
            outputs[original] = records
        if self._partitioned():
            for topic, records in outputs.items():
                expected = [r for r in self.case.outputs if r.topic == topic]
                outputs[topic] = order_like_expected(expected, records)
        return outputs

    def source(self, name: str) -> SourceInfo | None:
        return self.app.engine.source(name)

    def topics(self) -> dict[str, TopicInfo]:
        found: dict[str, TopicInfo] = {}
        for name in self.harness.admin.list_topics():
            original = self.names.original(name)
            if original is None:
                continue
            partitions = self.harness.admin.partition_count(name)
            declared = self.declared.get(original)
            found[original] = TopicInfo(
                original,
                partitions=partitions,
                key_format=declared.key_format if declared else None,
                value_format=declared.value_format if declared else None,
            )
        return found

    def close(self) -> None:
        """Stop the queries, delete the case's topics and its state dir."""
        try:
            self.app.stop()
        finally:
            self.harness.discard(self.names)
            shutil.rmtree(self.state_dir, ignore_errors=True)

    # -- helpers -------------------------------------------------------------------------

    def _reader_serdes(self, topic: str) -> SourceSerdes | None:
        """The serdes of the first source reading ``topic`` (None: no source reads it)."""
        name = self.names.topic(topic)
        for source in self.app.engine.sources():
            if source.topic == name:
                return SourceSerdes.of(source, self.harness.registry_url)
        return None

    def _sinks(self) -> dict[str, SourceSerdes]:
        """Every query's sink topic with the serdes its records are written in."""
        sinks: dict[str, SourceSerdes] = {}
        for query in self.app.queries():
            source = self.app.engine.source(query.sink)
            if source is not None and source.topic not in sinks:
                sinks[source.topic] = SourceSerdes.of(source, self.harness.registry_url)
        return sinks

    def _offsets(self, topic: str) -> dict[int, int]:
        """Per partition, the offset after the last record ``topic`` holds now."""
        from engine.kafka import read_topic

        ends: dict[int, int] = {}
        for r in read_topic(self.harness.bootstrap_servers, topic):
            ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)
        return ends

    def _partitioned(self) -> bool:
        """Whether a topic of the case has more than one partition."""
        admin = self.harness.admin
        names = [n for n in admin.list_topics() if self.names.original(n) is not None]
        return any(admin.partition_count(n) > 1 for n in names)


# ---------------------------------------------------------------------------- the harness


@dataclass
class KafkaHarness:
    """What every case shares: the broker, the SparkSession, the Java producer, a work dir."""

    bootstrap_servers: str
    work_dir: Path
    spark: Any
    registry_url: str | None = None  # the schema registry's Confluent API
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    _cases: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        from engine.kafka import TopicAdmin

        self.admin = TopicAdmin(self.bootstrap_servers)
        self.producer = JavaProducer(self.spark, self.bootstrap_servers)

    @classmethod
    @contextlib.contextmanager
    def open(cls, bootstrap_servers: str | None = None, *, spark: Any = None,
             registry_url: str | None = None) -> Iterator[KafkaHarness]:
        """A harness on ``bootstrap_servers``, or on a broker started for it in a temp dir,
        and on the schema registry at ``registry_url``, or one started for it.

        What it starts it stops at the end (the broker, the registry, and the shared
        SparkSession when it started it), whatever happens; the temp dir (state dirs, the
        broker's files) goes too.
        """
        from engine.components.broker import Broker
        from engine.components.registry import SchemaRegistry
        from engine.kafka import check_connection
        from engine.runtime.session import get_spark, spark_started, stop_spark

        # A session running before (a test run's, a caller's) is not this harness's to stop.
        own_session = spark is None and not spark_started()
        work_dir = Path(tempfile.mkdtemp(prefix="qtt-kafka-"))
        broker: Broker | None = None
        registry: SchemaRegistry | None = None
        harness: KafkaHarness | None = None
        try:
            if bootstrap_servers is not None:
                # Before anything starts: the registry's first start fetches it (minutes).
                check_connection(bootstrap_servers)
            if registry_url is None:  # starts while the broker and Spark start
                registry = SchemaRegistry(work_dir / "registry", stop_with_parent=True)
                registry.start()
            if bootstrap_servers is None:
                broker = Broker(work_dir / "broker", stop_with_parent=True)
                broker.start()
                broker.wait_ready()
                bootstrap_servers = broker.bootstrap_servers
            session = spark if spark is not None else get_spark(kafka=True)
            if registry is not None:
                registry.wait_ready()
                registry_url = registry.url
            harness = cls(bootstrap_servers, work_dir, session, registry_url)
            yield harness
        finally:
            if harness is not None:
                harness.producer.close()
            if own_session:
                stop_spark()
            if broker is not None:
                broker.stop()
            if registry is not None:
                registry.stop()
            shutil.rmtree(work_dir, ignore_errors=True)

    def next_case_number(self) -> int:
        with self._lock:
            self._cases += 1
            return self._cases

    def engine_factory(self, case: QttCase) -> EngineFactory:
        """The runner's engine factory for ``case``."""
        return lambda properties: KafkaCaseEngine(self, case, properties)

    def discard(self, names: TopicPrefix) -> None:
        """Delete the topics of one case."""
        for name in self.admin.list_topics():
            if names.original(name) is not None:
                with contextlib.suppress(KafkaClientError):
                    self.admin.delete_topic(name, missing_ok=True)
