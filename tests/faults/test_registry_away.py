"""The schema registry frozen (SIGSTOP), then stopped and started again, under a kspark server
whose persistent query writes AVRO and whose clients insert AVRO rows.

While the registry is away an insert that needs it gets a clear error (or, served from the
schemas the server holds already, succeeds); after it the query runs again on its own, its
output holds every input record once (read_committed), and inserts work again. Run with
``nox -s faults`` (minutes).
"""

from __future__ import annotations

import io
import json
import os
import signal
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pytest

from engine.components.registry import SchemaRegistry
from engine.kafka.consume import read_topic
from tests.faults.support import assert_exact, clear_error, produce, until

pytestmark = pytest.mark.faults

FAULT = 30.0  # seconds


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[SchemaRegistry]:
    """A registry of this test's own (it freezes and stops it)."""
    registry = SchemaRegistry(tmp_path / "registry", stop_with_parent=True)
    try:
        registry.start()
        registry.wait_ready(timeout=600)
        yield registry
    finally:
        pid = registry.running_pid()
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        registry.stop()


class AvroValues:
    """The N of each AVRO record of a topic; each writer schema fetched once by its id and kept
    (a restarted in-memory registry forgets them)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.schemas: dict[int, Any] = {}

    def schema(self, schema_id: int) -> Any:
        if schema_id not in self.schemas:
            with urllib.request.urlopen(f"{self.url}/schemas/ids/{schema_id}", timeout=10) as answer:
                self.schemas[schema_id] = fastavro.parse_schema(json.loads(json.loads(answer.read())["schema"]))
        return self.schemas[schema_id]

    def counts(self, bootstrap: str, topic: str) -> Counter[int]:
        found: Counter[int] = Counter()
        for record in read_topic(bootstrap, topic, timeout=10):
            data = record.value or b""
            assert data[:1] == b"\x00", f"not in the registry's wire format: {data[:16]!r}"
            value = fastavro.schemaless_reader(io.BytesIO(data[5:]), self.schema(int.from_bytes(data[1:5], "big")))
            found[int(value["N"])] += 1
        return found


def _insert(server, n: int) -> tuple[float, int, str | None]:
    began = time.monotonic()
    answer = server.ksql(f"INSERT INTO AV (ID, N) VALUES ('k{n}', {n});", timeout=180)
    took = time.monotonic() - began
    return took, answer.status_code, None if answer.status_code == 200 else clear_error(answer)


def test_an_avro_query_and_avro_inserts_come_back_after_the_registry(faulty_kafka, start_servers, registry,
                                                                       tmp_path) -> None:
    kafka = faulty_kafka
    config = tmp_path / "server.properties"
    config.write_text(f"ksql.schema.registry.url={registry.url}\n", encoding="utf-8")
    [server] = start_servers(kafka.proxied, 1, "--config", str(config))
    server.ok("CREATE STREAM SRC (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='src', VALUE_FORMAT='JSON', PARTITIONS=2);")
    server.ok("CREATE STREAM AV (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='av', VALUE_FORMAT='AVRO', PARTITIONS=1);")
    [created] = server.ok("CREATE STREAM OUT WITH (KAFKA_TOPIC='out', VALUE_FORMAT='AVRO') AS SELECT ID, N FROM SRC;",
                          **{"auto.offset.reset": "earliest"})
    query_id = created["commandStatus"]["queryId"]
    avro = AvroValues(registry.url)
    report = []

    def complete(expected: range) -> tuple[float, Counter[int]]:
        took = until(lambda: set(expected) <= set(avro.counts(kafka.direct, "out")), 600,
                     f"out holds {len(expected)} values")
        time.sleep(3)
        return took, avro.counts(kafka.direct, "out")

    def running() -> bool:
        return server.query_states()[query_id] == "RUNNING"

    produce(kafka.direct, "src", range(0, 100))
    _, counts = complete(range(0, 100))
    assert_exact(counts, range(0, 100))
    assert _insert(server, 0)[1] == 200

    for fault in ("sigstop", "stopped"):
        began = time.monotonic()
        pid = registry.running_pid()
        assert pid is not None
        if fault == "sigstop":
            os.kill(pid, signal.SIGSTOP)
        else:
            registry.stop()
        first = {"sigstop": 100, "stopped": 200}[fault]
        produce(kafka.direct, "src", range(first, first + 100))
        insert = _insert(server, first)
        time.sleep(max(0.0, FAULT - (time.monotonic() - began)))
        if fault == "sigstop":
            os.kill(pid, signal.SIGCONT)
        else:
            registry.start()
            registry.wait_ready(timeout=600)
        outage = time.monotonic() - began
        took, counts = complete(range(0, first + 100))
        assert_exact(counts, range(0, first + 100))
        recovered = until(running, 300, "the query runs again")
        after = _insert(server, first + 1)
        assert after[1] == 200, after
        report.append(f"registry {fault} {outage:.0f} s: insert meanwhile answered {insert[1]} "
                      f"in {insert[0]:.0f} s ({insert[2]!r}); output complete {took:.0f} s after, "
                      f"RUNNING {recovered:.0f} s after; insert after: {after[1]}")
    inserted = avro.counts(kafka.direct, "av")
    assert max(inserted.values()) == 1, inserted
    print("\n" + "\n".join(report) + "\n300 records, lost 0, duplicated 0")
