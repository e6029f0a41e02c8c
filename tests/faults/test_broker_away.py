"""The broker stopped and restarted, then frozen (SIGSTOP) and thawed, under two kspark servers
running a persistent query, a push query and taking statements.

Each fault lasts long enough for every client of the broker to notice (longer than the
servers' session timeout). After it the persistent query runs again on its own, its output
holds every input record once (read_committed), the push query either ended with a clear
error or went on, a statement sent meanwhile got a clear error, and both servers hold the
same metastore. Run with ``nox -s faults`` (minutes).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from tests.faults.support import assert_exact, clear_error, exactly_once, produce, until

pytestmark = pytest.mark.faults

OUTAGE = 20.0  # seconds


class PushClient:
    """A push query on /query-stream read on a thread: its rows and how it ended."""

    def __init__(self, url: str, sql: str) -> None:
        self.rows: list[list[Any]] = []
        self.error: dict[str, Any] | None = None
        self.failure: str | None = None
        self.ended = threading.Event()
        body = {"sql": sql, "properties": {"auto.offset.reset": "earliest"}}
        self._thread = threading.Thread(target=self._read, args=(url, body), daemon=True)
        self._thread.start()

    def _read(self, url: str, body: dict[str, Any]) -> None:
        try:
            with httpx.stream("POST", f"{url}/query-stream", json=body, timeout=httpx.Timeout(600, connect=10),
                              headers={"Accept": "application/vnd.ksqlapi.delimited.v1"}) as response:
                assert response.status_code == 200, response.read()
                for line in response.iter_lines():
                    if not line.strip():
                        continue
                    item = json.loads(line)
                    if isinstance(item, list):
                        self.rows.append(item)
                    elif isinstance(item, dict) and ("errorMessage" in item or "message" in item):
                        self.error = item
        except Exception as exc:  # noqa: BLE001 - recorded, judged by the test
            self.failure = f"{type(exc).__name__}: {exc}"
        finally:
            self.ended.set()

    def numbers(self) -> list[int]:
        return sorted(int(row[1]) for row in self.rows)


def _statement_during_outage(server: Any, name: str, topic: str) -> tuple[float, str | None]:
    """A CREATE STREAM sent while the broker is away: its time and its error (None: accepted)."""
    began = time.monotonic()
    answer = server.ksql(f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='{topic}', "
                         "VALUE_FORMAT='JSON', PARTITIONS=1);", timeout=180)
    took = time.monotonic() - began
    if answer.status_code == 200:
        return took, None
    return took, clear_error(answer)


@pytest.mark.parametrize("fault", ["stopped", "sigstop"])
def test_queries_statements_and_push_queries_come_back_after_the_broker(faulty_kafka, start_servers, fault) -> None:
    kafka = faulty_kafka
    a, b = start_servers(kafka.proxied, 2)
    a.ok("CREATE STREAM SRC (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='src', VALUE_FORMAT='JSON', PARTITIONS=2);")
    [created] = a.ok("CREATE STREAM OUT WITH (KAFKA_TOPIC='out') AS SELECT ID, N FROM SRC;",
                     **{"auto.offset.reset": "earliest"})
    query_id = created["commandStatus"]["queryId"]
    produce(kafka.direct, "src", range(0, 100))
    took, counts = exactly_once(kafka.direct, "out", range(0, 100))
    assert_exact(counts, range(0, 100))
    push = PushClient(b.url, "SELECT ID, N FROM OUT EMIT CHANGES;")
    until(lambda: len(push.rows) >= 100, 300, "the push query has read the first 100 rows")

    # The fault, with a statement sent to each server while it lasts.
    began = time.monotonic()
    if fault == "stopped":
        kafka.stop()
    else:
        kafka.pause(True)
    time.sleep(OUTAGE / 2)
    statement_a = _statement_during_outage(a, "DURING_A", "during_a")
    statement_b = _statement_during_outage(b, "DURING_B", "during_b")
    time.sleep(max(0.0, OUTAGE - (time.monotonic() - began)))
    if fault == "stopped":
        kafka.start()
    else:
        kafka.pause(False)
    outage = time.monotonic() - began

    produce(kafka.direct, "src", range(100, 200))
    recovered, counts = exactly_once(kafka.direct, "out", range(0, 200))
    assert_exact(counts, range(0, 200))
    until(lambda: a.query_states()[query_id] == "RUNNING" and b.query_states()[query_id] == "RUNNING", 300,
          "both servers list the query RUNNING")

    # The push query went on, or ended with an error a client can read.
    until(lambda: push.ended.is_set() or len(push.rows) >= 200, 300, "the push query ended or went on")
    if push.ended.is_set():
        assert push.failure is None, push.failure
        assert push.error is not None and "Traceback" not in json.dumps(push.error), push.error
    else:
        assert push.numbers() == list(range(0, 200))

    # Statements work again, and the servers agree on the metastore.
    a.ok("CREATE STREAM AFTER_A (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='after_a', VALUE_FORMAT='JSON', PARTITIONS=1);")
    try:
        until(lambda: a.metastore() == b.metastore(), 120, "both servers hold the same metastore")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {a.url} holds {a.metastore()}, {b.url} {b.metastore()}") from None
    streams = a.metastore()[0]
    for name, (_, error) in (("DURING_A", statement_a), ("DURING_B", statement_b)):
        assert (name in streams) == (error is None), (name, error, streams)
    print(f"\n{fault}: outage {outage:.0f} s; statements during it {statement_a[0]:.0f} s / {statement_b[0]:.0f} s: "
          f"{statement_a[1]!r} / {statement_b[1]!r}; output complete {recovered:.0f} s after; "
          f"200 records, lost 0, duplicated 0; push query "
          f"{'ended: ' + json.dumps(push.error) if push.ended.is_set() else 'went on (200 rows)'}; first 100 in {took:.0f} s")
