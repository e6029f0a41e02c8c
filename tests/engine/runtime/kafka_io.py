"""Topics in and out of the streaming runtime, for the tests that run queries on the broker."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.hosting.application import StreamingApplication
from engine.kafka.consume import read_topic
from engine.kafka.produce import ProducerRecord, RecordProducer


def unique(prefix: str) -> str:
    """A topic name no other test on the worker's broker uses."""
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def produce(bootstrap: str, topic: str, records: Sequence[tuple[str | None, Any, int]]) -> None:
    """``(key, JSON value, timestamp)`` records, a None key or value sent as null."""
    producer = RecordProducer(bootstrap)
    for key, value, ts in records:
        producer.send(topic, ProducerRecord(key=None if key is None else key.encode(),
                                            value=None if value is None else json.dumps(value).encode(),
                                            timestamp=ts))
    producer.flush()


def run_until_caught_up(bootstrap: str, state_dir: Path, sql: str) -> StreamingApplication:
    """One ``kspark run`` of ``sql`` on ``state_dir``: load, submit, read what the topics hold, stop."""
    app = StreamingApplication(bootstrap, state_dir)
    app.load()
    app.submit(sql)
    app.run_until_caught_up()
    app.stop()
    return app


def outputs(bootstrap: str, topic: str) -> list[tuple[str | None, Any, int]]:
    """The topic's ``(key, JSON value, timestamp)`` records in offset order (read_committed)."""
    return [(None if r.key is None else r.key.decode(), None if r.value is None else json.loads(r.value), r.timestamp)
            for r in read_topic(bootstrap, topic)]
