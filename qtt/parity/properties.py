"""Parity table ``properties``: every property a statement, a request or the server's configuration
may carry in ksqlDB, and what kspark does with it.

One row per

- ``ksql: NAME``: a setting ``KsqlConfig`` defines (``ksqldb-common``; its ``define(...)`` calls and
  its compatibility-breaking configs), settable in the server's configuration, per request in
  ``streamsProperties`` / ``properties`` and with ``SET``;
- ``request: NAME``: a ``KsqlRequestConfig`` setting (``request.ksql.*``, per request only);
- ``server: NAME``: a ``KsqlRestConfig`` setting (``ksqldb-rest-app``: listeners, TLS,
  authentication, heartbeats, ...), server configuration only;
- ``streams: NAME``: a Kafka Streams, consumer or producer config that ksqlDB's code names (its
  ``StreamsConfig`` / ``ConsumerConfig`` / ``ProducerConfig`` / ``CommonClientConfigs`` constants),
  which a request or the configuration gives as ``ksql.streams.NAME`` (or with ``consumer.`` /
  ``producer.`` after ``ksql.streams.``, or bare);
- ``prefix: P``: a name prefix ksqlDB's ``KsqlConfigResolver`` and ``KsqlConfig`` give a meaning.

A constant's value is read from the Java file that defines it (``String NAME = "..." + OTHER``).
Kafka's own constants are not in ksqlDB's sources; ``KAFKA_NAMES`` gives the property names of
those ksqlDB's code refers to (they are Kafka's public config names).

The status comes from the committed ``properties_map.json`` (item -> ``test``: the kspark test
that shows kspark honours the property, ``reason``: why it is accepted with no effect or refused,
or ``missing``: a note). The generator checks a covered row: the test exists and its text names
the property (or the entry's ``names``), and kspark's engine code holds the name the engine reads
it under (after ``engine.server.properties``' prefix rules), unless the entry gives ``reads``.
A row failing a check stays missing, with the reason saying which.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from qtt.parity import Row, mapped_test_problem, table
from qtt.parity.java_messages import blank_comments, string_variables

MAP_FILE = Path(__file__).with_name("properties_map.json")
ROOT = Path(__file__).resolve().parents[2]
ENGINE_DIR = ROOT / "engine"

KSQL_CONFIG = "ksqldb-common/src/main/java/io/confluent/ksql/util/KsqlConfig.java"
REQUEST_CONFIG = "ksqldb-common/src/main/java/io/confluent/ksql/util/KsqlRequestConfig.java"
REST_CONFIG = "ksqldb-rest-app/src/main/java/io/confluent/ksql/rest/server/KsqlRestConfig.java"
RESOLVER = "ksqldb-common/src/main/java/io/confluent/ksql/config/KsqlConfigResolver.java"
CONFIG_CLASSES = (("ksql", KSQL_CONFIG), ("request", REQUEST_CONFIG), ("server", REST_CONFIG))
MODULES = ("ksqldb-common", "ksqldb-engine", "ksqldb-rest-app", "ksqldb-execution", "ksqldb-streams")

# Kafka's public config names for the constants of Kafka's config classes that ksqlDB's code
# refers to (Kafka's sources are not in ksqlDB's tree).
KAFKA_NAMES = {
    "StreamsConfig.ACCEPTABLE_RECOVERY_LAG_CONFIG": "acceptable.recovery.lag",
    "StreamsConfig.APPLICATION_ID_CONFIG": "application.id",
    "StreamsConfig.APPLICATION_SERVER_CONFIG": "application.server",
    "StreamsConfig.BOOTSTRAP_SERVERS_CONFIG": "bootstrap.servers",
    "StreamsConfig.BUFFERED_RECORDS_PER_PARTITION_CONFIG": "buffered.records.per.partition",
    "StreamsConfig.CACHE_MAX_BYTES_BUFFERING_CONFIG": "cache.max.bytes.buffering",
    "StreamsConfig.COMMIT_INTERVAL_MS_CONFIG": "commit.interval.ms",
    "StreamsConfig.DEFAULT_DESERIALIZATION_EXCEPTION_HANDLER_CLASS_CONFIG": "default.deserialization.exception.handler",
    "StreamsConfig.DEFAULT_PRODUCTION_EXCEPTION_HANDLER_CLASS_CONFIG": "default.production.exception.handler",
    "StreamsConfig.DEFAULT_TIMESTAMP_EXTRACTOR_CLASS_CONFIG": "default.timestamp.extractor",
    "StreamsConfig.MAX_TASK_IDLE_MS_CONFIG": "max.task.idle.ms",
    "StreamsConfig.MAX_WARMUP_REPLICAS_CONFIG": "max.warmup.replicas",
    "StreamsConfig.METRIC_REPORTER_CLASSES_CONFIG": "metric.reporters",
    "StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG": "num.standby.replicas",
    "StreamsConfig.NUM_STREAM_THREADS_CONFIG": "num.stream.threads",
    "StreamsConfig.POLL_MS_CONFIG": "poll.ms",
    "StreamsConfig.PROBING_REBALANCE_INTERVAL_MS_CONFIG": "probing.rebalance.interval.ms",
    "StreamsConfig.PROCESSING_GUARANTEE_CONFIG": "processing.guarantee",
    "StreamsConfig.REPLICATION_FACTOR_CONFIG": "replication.factor",
    "StreamsConfig.ROCKSDB_CONFIG_SETTER_CLASS_CONFIG": "rocksdb.config.setter",
    "StreamsConfig.STATE_DIR_CONFIG": "state.dir",
    "StreamsConfig.TASK_TIMEOUT_MS_CONFIG": "task.timeout.ms",
    "StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG": "topology.optimization",
    "StreamsConfig.WINDOW_SIZE_MS_CONFIG": "window.size.ms",
    "ConsumerConfig.AUTO_COMMIT_INTERVAL_MS_CONFIG": "auto.commit.interval.ms",
    "ConsumerConfig.AUTO_OFFSET_RESET_CONFIG": "auto.offset.reset",
    "ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG": "bootstrap.servers",
    "ConsumerConfig.CLIENT_ID_CONFIG": "client.id",
    "ConsumerConfig.FETCH_MAX_BYTES_CONFIG": "fetch.max.bytes",
    "ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG": "fetch.max.wait.ms",
    "ConsumerConfig.FETCH_MIN_BYTES_CONFIG": "fetch.min.bytes",
    "ConsumerConfig.GROUP_ID_CONFIG": "group.id",
    "ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG": "heartbeat.interval.ms",
    "ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG": "interceptor.classes",
    "ConsumerConfig.ISOLATION_LEVEL_CONFIG": "isolation.level",
    "ConsumerConfig.MAX_PARTITION_FETCH_BYTES_CONFIG": "max.partition.fetch.bytes",
    "ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG": "max.poll.interval.ms",
    "ConsumerConfig.MAX_POLL_RECORDS_CONFIG": "max.poll.records",
    "ConsumerConfig.METADATA_MAX_AGE_CONFIG": "metadata.max.age.ms",
    "ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG": "session.timeout.ms",
    "ProducerConfig.ACKS_CONFIG": "acks",
    "ProducerConfig.BATCH_SIZE_CONFIG": "batch.size",
    "ProducerConfig.BUFFER_MEMORY_CONFIG": "buffer.memory",
    "ProducerConfig.CLIENT_ID_CONFIG": "client.id",
    "ProducerConfig.COMPRESSION_TYPE_CONFIG": "compression.type",
    "ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG": "delivery.timeout.ms",
    "ProducerConfig.INTERCEPTOR_CLASSES_CONFIG": "interceptor.classes",
    "ProducerConfig.LINGER_MS_CONFIG": "linger.ms",
    "ProducerConfig.MAX_BLOCK_MS_CONFIG": "max.block.ms",
    "ProducerConfig.MAX_REQUEST_SIZE_CONFIG": "max.request.size",
    "ProducerConfig.TRANSACTIONAL_ID_CONFIG": "transactional.id",
    "CommonClientConfigs.METRIC_REPORTER_CLASSES_CONFIG": "metric.reporters",
    "CommonClientConfigs.SECURITY_PROTOCOL_CONFIG": "security.protocol",
    "AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG": "bootstrap.servers",
    "AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG": "request.timeout.ms",
    "SslConfigs.SSL_KEYSTORE_LOCATION_CONFIG": "ssl.keystore.location",
    "SslConfigs.SSL_KEYSTORE_PASSWORD_CONFIG": "ssl.keystore.password",
    "SslConfigs.SSL_KEY_PASSWORD_CONFIG": "ssl.key.password",
    "SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG": "ssl.truststore.location",
    "SslConfigs.SSL_TRUSTSTORE_PASSWORD_CONFIG": "ssl.truststore.password",
}
# Kafka Streams' client prefixes the resolver applies after ``ksql.streams.``.
STREAMS_PREFIXES = {
    "StreamsConfig.CONSUMER_PREFIX": "consumer.",
    "StreamsConfig.PRODUCER_PREFIX": "producer.",
    "StreamsConfig.TOPIC_PREFIX": "topic.",
}

_DEFINE = re.compile(r"(?:\.define\(|new CompatibilityBreakingConfigDef\()\s*([A-Za-z_][\w.]*)\s*,")
_KAFKA_CONSTANT = re.compile(r"\b((?:Streams|Consumer|Producer|AdminClient)Config|CommonClientConfigs)\.([A-Z][A-Z_]*_CONFIG)\b")
_ALIAS = re.compile(r"\bString\s+(\w+)\s*=\s*([A-Z]\w*\.[A-Z][A-Z_]*)\s*;")
_PREFIX_CONSTANT = re.compile(r"\bString\s+(\w+_PREFIX)\s*=")


def resolve(expr: str, strings: dict[str, str], depth: int = 0) -> str | None:
    """The value of a Java string expression of literals and constants (None if a part is unknown)."""
    out = []
    for part in re.split(r"\s*\+\s*(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", expr.strip()):
        part = part.strip()
        if part.startswith('"') and part.endswith('"'):
            out.append(part[1:-1])
        elif part in KAFKA_NAMES:
            out.append(KAFKA_NAMES[part])
        elif part in STREAMS_PREFIXES:
            out.append(STREAMS_PREFIXES[part])
        elif part.removeprefix("KsqlConfig.") in strings and depth < 8:
            value = resolve(strings[part.removeprefix("KsqlConfig.")], strings, depth + 1)
            if value is None:
                return None
            out.append(value)
        else:
            return None
    return "".join(out)


def config_names(src: Path, relative: str) -> list[str]:
    """The names of the settings a ksqlDB config class defines, in file order."""
    text = blank_comments((src / relative).read_text(encoding="utf-8"))
    strings = string_variables(text)
    strings.update({name: value for name, value in _ALIAS.findall(text) if name not in strings})
    names: list[str] = []
    for constant in _DEFINE.findall(text):
        if constant == "name":  # the compatibility-breaking configs' own define(name, ...)
            continue
        value = KAFKA_NAMES.get(constant) or resolve(strings.get(constant, ""), strings) or constant
        if value not in names:
            names.append(value)
    return names


def kafka_names(src: Path) -> dict[str, str]:
    """Kafka Streams / client config names ksqlDB's code refers to -> the first file naming them."""
    found: dict[str, str] = {}
    for module in MODULES:
        for path in sorted((src / module).rglob("*.java")):
            for cls, constant in _KAFKA_CONSTANT.findall(path.read_text(encoding="utf-8")):
                name = KAFKA_NAMES.get(f"{cls}.{constant}")
                if name and not name.startswith("ssl."):
                    found.setdefault(name, path.relative_to(src).as_posix())
    return found


def prefixes(src: Path) -> dict[str, str]:
    """The prefixes ksqlDB gives a meaning: KsqlConfig's ``*_PREFIX`` constants that start with
    ``ksql.`` and the resolver's ``ksql.streams.`` + Kafka Streams' client prefixes."""
    text = blank_comments((src / KSQL_CONFIG).read_text(encoding="utf-8"))
    strings = string_variables(text)
    found: dict[str, str] = {}
    for constant in _PREFIX_CONSTANT.findall(text):
        value = resolve(strings.get(constant, ""), strings)
        if value and value.startswith("ksql.") and value.endswith("."):
            found.setdefault(value, KSQL_CONFIG)
    streams = found.get("ksql.streams.") and "ksql.streams."
    if streams:
        for prefix in STREAMS_PREFIXES.values():
            found.setdefault(streams + prefix, RESOLVER)
    return found


@cache
def engine_strings() -> frozenset[str]:
    """Every string constant in kspark's engine code."""
    names: set[str] = set()
    for path in ENGINE_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)
    return frozenset(names)


def read_name(name: str) -> str:
    """The name kspark's engine reads ``name`` under (``engine.server.properties``' rules)."""
    from engine.server.properties import canonical_name

    return canonical_name(name)[0]


def _row(item: str, name: str, source: str, mapping: dict[str, Any]) -> Row:
    entry = mapping.get(item, {})
    if "reason" in entry:
        return Row(item=item, status="reasoned", source=source, reason=entry["reason"])
    test = entry.get("test", "")
    if not test:
        return Row(item=item, status="missing", source=source, reason=entry.get("missing", ""))
    problem = mapped_test_problem(test, entry.get("names", name))
    reads = entry.get("reads", read_name(name))
    if problem is None and reads not in engine_strings():
        problem = f"kspark's engine code never names {reads}"
    if problem is not None:
        return Row(item=item, status="missing", source=source, reason=problem)
    return Row(item=item, status="covered", source=source, test=test, detail=entry.get("detail", ""))


@table("properties")
def properties_rows(src: Path) -> list[Row]:
    mapping: dict[str, Any] = json.loads(MAP_FILE.read_text(encoding="utf-8"))
    rows = []
    for kind, relative in CONFIG_CLASSES:
        for name in config_names(src, relative):
            rows.append(_row(f"{kind}: {name}", name, relative, mapping))
    for name, source in sorted(kafka_names(src).items()):
        rows.append(_row(f"streams: {name}", f"ksql.streams.{name}", source, mapping))
    for prefix, source in sorted(prefixes(src).items()):
        rows.append(_row(f"prefix: {prefix}", prefix, source, mapping))
    return rows
