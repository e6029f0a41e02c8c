"""The processing log: skipped records reported as ksqlDB reports them, on a topic when configured."""

from __future__ import annotations

import base64
import json
import logging
import uuid
from pathlib import Path
from typing import Any

import pytest

from engine.hosting.application import StreamingApplication
from engine.kafka.admin import TopicAdmin
from engine.kafka.consume import read_topic
from engine.kafka.produce import ProducerRecord, RecordProducer
from engine.runtime import processing_log as P


def test_a_deserialization_entry_has_ksqldb_shape() -> None:
    entry = P.entry("CSAS_OUT_1", "orders", "Failed to deserialise value of partition 0 offset 3: bad",
                    1_700_000_000_000, {"type": P.DESERIALIZATION, "target": "value", "topic": "orders",
                                        "record": b"{oops"})
    assert entry["level"] == "ERROR"
    assert entry["logger"] == "processing.CSAS_OUT_1.orders"
    assert entry["time"] == 1_700_000_000_000
    message = entry["message"]
    assert message["type"] == 0
    assert message["deserializationError"] == {
        "target": "value",
        "errorMessage": "Failed to deserialise value of partition 0 offset 3: bad",
        "recordB64": base64.b64encode(b"{oops").decode(),
        "cause": [],
        "topic": "orders",
    }
    others = ("recordProcessingError", "productionError", "serializationError", "kafkaStreamsThreadError")
    assert all(message[name] is None for name in others)


@pytest.mark.parametrize(
    ("message", "kind", "field"),
    [
        ("Failed to deserialise key: not an int", P.DESERIALIZATION, "deserializationError"),
        ("Failed to serialise the record: too big", P.SERIALIZATION, "serializationError"),
        ("Division by zero in (A / B)", P.RECORD_PROCESSING, "recordProcessingError"),
    ],
)
def test_the_builders_wording_gives_the_entry_type(message: str, kind: int, field: str) -> None:
    entry = P.entry("Q", "Project", message, 1)
    assert entry["message"]["type"] == kind
    assert entry["message"][field]["errorMessage"] == message
    assert entry["logger"] == "processing.Q.Project"


def test_the_target_defaults_to_the_key_only_when_the_message_says_key() -> None:
    assert P.entry("Q", "S", "Failed to deserialise key: x", 1)["message"]["deserializationError"]["target"] == "key"
    assert P.entry("Q", "S", "Failed to deserialise value: key y", 1)["message"]["deserializationError"]["target"] == "value"


def test_configured_topic_follows_ksqldb_property_names() -> None:
    assert P.configured_topic({}, "b:1") is None
    assert P.configured_topic({"ksql.logging.processing.topic.auto.create": "false"}, "b:1") is None
    assert P.configured_topic({"ksql.logging.processing.topic.auto.create": "true"}, "b:1") == P.ProcessingLogTopic(
        "b:1", "default_ksql_processing_log"
    )
    named = P.configured_topic(
        {"ksql.logging.processing.stream.auto.create": "true", "ksql.service.id": "svc_"}, "b:1"
    )
    assert named == P.ProcessingLogTopic("b:1", "svc_ksql_processing_log")
    explicit = P.configured_topic(
        {"ksql.logging.processing.topic.auto.create": "true", "ksql.logging.processing.topic.name": "errs"}, "b:1"
    )
    assert explicit is not None and explicit.topic == "errs"


def test_install_keeps_one_kafka_handler() -> None:
    logger = logging.getLogger(P.LOGGER_NAME)
    try:
        P.install(P.ProcessingLogTopic("b:1", "one"))
        P.install(P.ProcessingLogTopic("b:1", "two"))
        handlers = [h for h in logger.handlers if isinstance(h, P.KafkaProcessingLogHandler)]
        assert [h.target.topic for h in handlers] == ["two"]
    finally:
        P.install(None)
    assert not [h for h in logger.handlers if isinstance(h, P.KafkaProcessingLogHandler)]


def test_an_entry_the_broker_never_takes_is_dropped_silently_and_holds_up_no_exit(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # librdkafka keeps a queued record until its timeout (5 minutes by default) and waits for
    # it when the process exits, printing a connection error every half second meanwhile.
    monkeypatch.setattr(P, "DELIVERY_TIMEOUT_S", 1.0)
    handler = P.KafkaProcessingLogHandler(P.ProcessingLogTopic("127.0.0.1:1", "gone"))
    record = logging.LogRecord(P.LOGGER_NAME, logging.WARNING, __file__, 1, "%s %s: %s", ("Q", "Project", "bad"), None)
    handler.emit(record)
    assert len(handler._producer) == 0  # nothing left queued for the exit to wait on
    assert "rdkafka" not in capfd.readouterr().err


@pytest.mark.usefixtures("spark")
def test_bad_records_are_skipped_and_logged_to_the_processing_log_topic(kafka_broker: Any, tmp_path: Path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    suffix = uuid.uuid4().hex[:8]
    source, sink, log_topic = f"plog_in_{suffix}", f"plog_out_{suffix}", f"plog_{suffix}"
    TopicAdmin(bootstrap).create_topic(source, 1)
    producer = RecordProducer(bootstrap)
    for value in (b'{"QTY": 1}', b"{not json", b'{"QTY": 2}'):
        producer.send(source, ProducerRecord(key=b"k", value=value, timestamp=1000))
    producer.flush()
    app = StreamingApplication(
        bootstrap,
        tmp_path / "state",
        properties={
            "ksql.logging.processing.stream.auto.create": "true",
            "ksql.logging.processing.topic.name": log_topic,
        },
    )
    try:
        app.submit(
            f"""SET 'auto.offset.reset'='earliest';
            CREATE STREAM S (ID STRING KEY, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
            CREATE STREAM OUT WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, QTY * 10 AS Q FROM S;"""
        )
        assert app.engine.source("KSQL_PROCESSING_LOG") is not None  # ksqlDB's stream over the log topic
        app.run_until_caught_up()
    finally:
        P.install(None)

    outputs = [json.loads(r.value) for r in read_topic(bootstrap, sink)]
    assert outputs == [{"Q": 10}, {"Q": 20}]  # the bad record is skipped, not turned into NULLs
    entries = [json.loads(r.value) for r in read_topic(bootstrap, log_topic)]
    assert len(entries) == 1, entries
    entry = entries[0]
    assert entry["level"] == "ERROR"
    assert entry["logger"].startswith("processing.")
    error = entry["message"]["deserializationError"]
    assert entry["message"]["type"] == 0
    assert error["target"] == "value"
    assert error["topic"] == source
    assert base64.b64decode(error["recordB64"]) == b"{not json"
    # ksqlDB's JSON deserializer's words; the reason and the record's place are the cause.
    assert error["errorMessage"].startswith(f"Failed to deserialize value from topic: {source}. ")
    assert "offset 1" in error["cause"][0]
