"""ksqlDB's processing log on Kafka: record-level errors as JSON records on a topic.

Builders report a record they skip through the ``kspark.processing`` logger
(``engine.builders.context.log_processing_error``). That logger always writes to the Python
log; when the application is configured as ksqlDB's server is,

    ksql.logging.processing.topic.auto.create=true
    ksql.logging.processing.topic.name=NAME      (default <ksql.service.id>ksql_processing_log)
    ksql.logging.processing.stream.auto.create=true   (also registers KSQL_PROCESSING_LOG)

every entry is also produced, as ksqlDB's processing log writes it, to that topic:

    {"level": "ERROR", "logger": "processing.<query id>.<step ctx>", "time": <epoch ms>,
     "message": {"type": 0, "deserializationError": {...}, "recordProcessingError": null,
                 "productionError": null, "serializationError": null,
                 "kafkaStreamsThreadError": null}}

with ``type`` 0 for deserialization errors, 1 for record processing errors and 3 for
serialization errors. The entries are written where the error happens (Spark's Python
workers on the executors): the topic's address (and the cluster's security properties) reaches them through the
environment of the Python functions Spark ships (``SparkContext.environment``), and each worker opens its
own producer on first use. The log is best effort, as ksqlDB's is (not transactional): an
entry may be repeated when Spark replays a micro-batch.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LOGGER_NAME = "kspark.processing"
ENV = "KSPARK_PROCESSING_LOG"
STREAM_NAME = "KSQL_PROCESSING_LOG"

DESERIALIZATION, RECORD_PROCESSING, PRODUCTION, SERIALIZATION = 0, 1, 2, 3

# ksqlDB's processing log schema, as its server registers the stream.
STREAM_DDL = (
    "CREATE STREAM IF NOT EXISTS {name} ("
    "LOGGER STRING, LEVEL STRING, `TIME` BIGINT, MESSAGE STRUCT<"
    "`TYPE` INT, "
    "DESERIALIZATIONERROR STRUCT<TARGET STRING, ERRORMESSAGE STRING, RECORDB64 STRING, "
    "CAUSE ARRAY<STRING>, `TOPIC` STRING>, "
    "RECORDPROCESSINGERROR STRUCT<ERRORMESSAGE STRING, RECORD STRING, CAUSE ARRAY<STRING>>, "
    "PRODUCTIONERROR STRUCT<ERRORMESSAGE STRING>, "
    "SERIALIZATIONERROR STRUCT<TARGET STRING, ERRORMESSAGE STRING, RECORD STRING, "
    "CAUSE ARRAY<STRING>, `TOPIC` STRING>, "
    "KAFKASTREAMSTHREADERROR STRUCT<ERRORMESSAGE STRING, THREADNAME STRING, CAUSE ARRAY<STRING>>>"
    ") WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');"
)


@dataclass(frozen=True)
class ProcessingLogTopic:
    """Where the processing log goes: a topic on a Kafka cluster."""

    bootstrap_servers: str
    topic: str

    def to_env(self) -> str:
        """The topic and the cluster's security properties, for the workers' environment."""
        from engine.kafka.security import security_for

        client = security_for(self.bootstrap_servers).java()
        return json.dumps({"bootstrap.servers": self.bootstrap_servers, "topic": self.topic, "client": client})

    @staticmethod
    def from_env(text: str) -> ProcessingLogTopic:
        """The topic ``to_env`` wrote; its cluster's security is set for this process."""
        from engine.kafka.security import KafkaSecurity, use_security

        value = json.loads(text)
        if value.get("client"):
            use_security(value["bootstrap.servers"], KafkaSecurity.from_properties(value["client"]))
        return ProcessingLogTopic(value["bootstrap.servers"], value["topic"])


def flag(properties: Mapping[str, Any], name: str) -> bool:
    """A boolean property as ksqlDB reads it: true only when it says true."""
    return str(properties.get(name, "false")).strip().lower() == "true"


def configured_topic(properties: Mapping[str, Any], bootstrap_servers: str) -> ProcessingLogTopic | None:
    """The processing-log topic the properties ask for, or None (the log only goes to Python's log)."""
    if not (
        flag(properties, "ksql.logging.processing.topic.auto.create")
        or flag(properties, "ksql.logging.processing.stream.auto.create")
    ):
        return None
    service_id = str(properties.get("ksql.service.id", "default_"))
    name = str(properties.get("ksql.logging.processing.topic.name", "") or f"{service_id}ksql_processing_log")
    return ProcessingLogTopic(bootstrap_servers, name)


def stream_ddl(topic: str) -> str:
    """The CREATE STREAM statement registering ksqlDB's processing log stream over ``topic``."""
    return STREAM_DDL.format(name=STREAM_NAME, topic=topic.replace("'", "''"))


# ---------------------------------------------------------------------- entries


def entry(query_id: str, ctx: str, message: str, now_ms: int, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """One processing-log record in ksqlDB's form.

    ``details`` may say ``target`` (key/value), ``topic`` and ``record`` (the raw bytes or
    row text); without it the kind of error is read from the builders' message wording.
    """
    details = details or {}
    lowered = message.lower()
    target = details.get("target") or ("key" if "key" in lowered.split(":")[0] else "value")
    kind = details.get("type")
    if kind is None:
        if lowered.startswith(("failed to deserialise", "failed to deserialize", "error deserializing")):
            kind = DESERIALIZATION
        elif lowered.startswith("failed to serialise") or lowered.startswith("failed to serialize"):
            kind = SERIALIZATION
        else:
            kind = RECORD_PROCESSING
    record = details.get("record")
    body: dict[str, Any] = {
        "type": kind,
        "deserializationError": None,
        "recordProcessingError": None,
        "productionError": None,
        "serializationError": None,
        "kafkaStreamsThreadError": None,
    }
    if kind == DESERIALIZATION:
        import base64

        raw = base64.b64encode(record).decode("ascii") if isinstance(record, bytes | bytearray) else None
        body["deserializationError"] = {
            "target": target,
            "errorMessage": message,
            "recordB64": raw,
            "cause": list(details.get("cause", ())),
            "topic": details.get("topic"),
        }
    elif kind == SERIALIZATION:
        body["serializationError"] = {
            "target": target,
            "errorMessage": message,
            "record": None if record is None else str(record),
            "cause": [],
            "topic": details.get("topic"),
        }
    else:
        body["recordProcessingError"] = {
            "errorMessage": message,
            "record": None if record is None else str(record),
            "cause": [],
        }
    logger = ".".join(part for part in ("processing", query_id, ctx.replace("/", ".")) if part)
    return {"level": "ERROR", "logger": logger, "time": now_ms, "message": body}


# ---------------------------------------------------------------------- the Kafka handler


DELIVERY_TIMEOUT_S = 10.0  # how long an entry may wait for the broker


class KafkaProcessingLogHandler(logging.Handler):
    """Produces each ``kspark.processing`` record to the processing-log topic.

    The producer is opened lazily in the process that logs (librdkafka's threads do not
    survive the fork that starts a Spark Python worker) and flushed after every entry:
    errors are rare, and an entry must not wait in a buffer of a worker that Spark may end.
    """

    def __init__(self, target: ProcessingLogTopic) -> None:
        super().__init__(level=logging.WARNING)
        self.target = target
        self._producer: Any = None
        self._pid = -1

    def _open(self) -> Any:
        if self._producer is None or self._pid != os.getpid():
            from confluent_kafka import Producer

            from engine.kafka.client import client_config

            # An entry the broker has not taken in DELIVERY_TIMEOUT_S is dropped: nothing
            # stays queued to hold up the process's exit (librdkafka waits for queued records
            # up to their timeout, 5 minutes by default, printing a connection error every
            # half second when the broker is gone). Its log goes to Python logging.
            self._producer = Producer(client_config(
                self.target.bootstrap_servers,
                **{"linger.ms": 0, "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000)},
            ))
            self._pid = os.getpid()
        return self._producer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            args = record.args if isinstance(record.args, tuple) else ()
            query_id, ctx, message = (str(a) for a in args) if len(args) == 3 else ("", "", record.getMessage())
            details = getattr(record, "kspark_details", None)
            value = entry(query_id, ctx, message, int(record.created * 1000), details)
            producer = self._open()
            producer.produce(self.target.topic, json.dumps(value).encode("utf-8"))
            # librdkafka looks for expired records once a second, later on a busy machine: one
            # still queued after that is purged, so that nothing waits for the process's exit.
            if producer.flush(DELIVERY_TIMEOUT_S + 2.0):
                producer.purge()
                producer.flush(1.0)
        except Exception:  # noqa: BLE001 - a failing log must never fail the query
            self.handleError(record)


def install(target: ProcessingLogTopic | None) -> None:
    """Send the processing log to ``target`` in this process (replacing an earlier target);
    None removes the Kafka handler."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        if isinstance(handler, KafkaProcessingLogHandler):
            if target is not None and handler.target == target:
                return
            logger.removeHandler(handler)
    if target is not None:
        logger.addHandler(KafkaProcessingLogHandler(target))


_followed: str | None = None


def follow_env() -> None:
    """In a Spark Python worker: send the log where the driver's functions' environment says.

    Called before each entry is logged (entries are rare); does nothing in a process whose
    environment names no target, such as the driver, which ``configure_spark`` sets up."""
    global _followed
    text = os.environ.get(ENV)
    if text and text != _followed:
        install(ProcessingLogTopic.from_env(text))
        _followed = text


def configure_spark(spark: Any, target: ProcessingLogTopic | None) -> None:
    """Make the Python functions created from now on carry ``target`` to their workers."""
    environment = spark.sparkContext.environment
    if target is None:
        environment.pop(ENV, None)
    else:
        environment[ENV] = target.to_env()
    install(target)
