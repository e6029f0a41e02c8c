"""The network between a kspark server and its broker delayed, black-holed and cut (toxiproxy),
under a running persistent query and statements.

The server reaches the broker only through the proxy; the test writes and reads the topics
directly. After each fault the query runs again on its own and its output holds every input
record once (read_committed); a statement sent during a cut got a clear error or, retried
past the cut, succeeded. Run with
``nox -s faults`` (minutes).
"""

from __future__ import annotations

import time

import pytest

from tests.faults.support import assert_exact, clear_error, exactly_once, produce, until

pytestmark = pytest.mark.faults

FAULT = 30.0  # seconds each fault lasts


def _create(server, name: str) -> tuple[float, int, str | None]:
    """CREATE STREAM ``name`` through ``server``: seconds taken, status, error message (None: accepted)."""
    began = time.monotonic()
    answer = server.ksql(f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='{name.lower()}', "
                         "VALUE_FORMAT='JSON', PARTITIONS=1);", timeout=180)
    took = time.monotonic() - began
    return took, answer.status_code, None if answer.status_code == 200 else clear_error(answer)


def test_a_query_and_statements_recover_from_a_slow_a_black_holed_and_a_cut_network(faulty_kafka, start_servers) -> None:
    kafka = faulty_kafka
    [server] = start_servers(kafka.proxied, 1)
    server.ok("CREATE STREAM SRC (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='src', VALUE_FORMAT='JSON', PARTITIONS=2);")
    [created] = server.ok("CREATE STREAM OUT WITH (KAFKA_TOPIC='out') AS SELECT ID, N FROM SRC;",
                          **{"auto.offset.reset": "earliest"})
    query_id = created["commandStatus"]["queryId"]
    produce(kafka.direct, "src", range(0, 100))
    exactly_once(kafka.direct, "out", range(0, 100))
    report = []

    def running() -> bool:
        return server.query_states()[query_id] == "RUNNING"

    # 1. Slow: every byte each way 500 ms late; records and a statement still go through.
    kafka.proxy.add_latency(500, 100, stream="downstream")
    kafka.proxy.add_latency(500, 100, stream="upstream")
    produce(kafka.direct, "src", range(100, 200))
    slow_statement = _create(server, "DURING_LATENCY")
    took, counts = exactly_once(kafka.direct, "out", range(0, 200))
    kafka.proxy.remove_toxics()
    assert slow_statement[1] == 200, slow_statement
    assert_exact(counts, range(0, 200))
    report.append(f"latency 500±100 ms each way: 100 records through in {took:.0f} s, "
                  f"a statement in {slow_statement[0]:.0f} s")

    # 2. Black hole: connections stay open but nothing gets through, then the data flows again.
    kafka.proxy.add_timeout(0, stream="downstream")
    kafka.proxy.add_timeout(0, stream="upstream")
    time.sleep(FAULT)
    kafka.proxy.remove_toxics()
    produce(kafka.direct, "src", range(200, 300))
    took, counts = exactly_once(kafka.direct, "out", range(0, 300))
    assert_exact(counts, range(0, 300))
    recovered = until(running, 300, "the query runs again")
    report.append(f"black hole {FAULT:.0f} s: output complete {took:.0f} s after, RUNNING {recovered:.0f} s after")

    # 3. Cut: connections closed and refused; a statement meanwhile gets a clear error (or,
    # retried past the cut, succeeds).
    kafka.proxy.disable()
    time.sleep(FAULT / 3)
    cut_statement = _create(server, "DURING_CUT")
    time.sleep(max(0.0, FAULT / 3))
    kafka.proxy.enable()
    produce(kafka.direct, "src", range(300, 400))
    took, counts = exactly_once(kafka.direct, "out", range(0, 400))
    assert_exact(counts, range(0, 400))
    recovered = until(running, 300, "the query runs again")
    report.append(f"cut: statement answered {cut_statement[1]} in {cut_statement[0]:.0f} s ({cut_statement[2]!r}); "
                  f"output complete {took:.0f} s after, RUNNING {recovered:.0f} s after")

    # Statements work again, and the metastore holds the accepted ones only.
    after = _create(server, "AFTER_FAULTS")
    assert after[1] == 200, after
    streams = server.metastore()[0]
    assert "DURING_LATENCY" in streams and "AFTER_FAULTS" in streams, streams
    assert ("DURING_CUT" in streams) == (cut_statement[2] is None), (cut_statement, streams)
    print("\n" + "\n".join(report) + "\n400 records, lost 0, duplicated 0")
