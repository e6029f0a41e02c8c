"""Pull-query latency through HTTP: key lookups on a materialized table of 100,000 keys.

    python -m benchmarks.pull_bench [--keys 100000] [--lookups 2000] [--bootstrap-servers HOST:PORT] [--record]
    nox -s pull_bench

Starts a broker (unless ``--bootstrap-servers`` names one) and a kspark server (uvicorn on
a free loopback port, no persistent queries), creates a stream and a CREATE TABLE AS
SELECT over it, and writes the table's changelog (its sink topic) straight to Kafka:
``--keys`` keys, JSON values, some keys written twice and a few deleted, as the query would
have written them. Spark does not run: the bench measures the pull path (HTTP, parsing,
planning, the materialization's lookup, the answer), not the aggregation. One warm-up
query builds the materialization (its time is reported apart); then ``--lookups`` random
key lookups (``SELECT * FROM T WHERE ID='k...';``) are sent one after another over one
keep-alive HTTP/1.1 connection to ``/query-stream`` and ``/query``, and each answer is
checked. Prints p50/p90/p99/max per endpoint against the targets (p50 < 20 ms, p99 < 100
ms) and writes them to ``--report`` (``benchmarks.report``). There is no baseline: the figures
are held against the targets.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks import report as R
from benchmarks.timing import Clock

TARGET_P50_MS = 20.0
TARGET_P99_MS = 100.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _write_changelog(bootstrap: str, topic: str, keys: int) -> int:
    """The table's changelog: every key once, every tenth again (an update), every 1000th deleted."""
    from engine.kafka.produce import ProducerRecord, RecordProducer

    written = 0
    with RecordProducer(bootstrap, timeout=120) as producer:
        for n in range(keys):
            value = json.dumps({"C": 1, "TOTAL": n}).encode()
            producer.send(topic, ProducerRecord(key=f"k{n}".encode(), value=value, timestamp=1 + n))
            written += 1
        for n in range(0, keys, 10):
            value = json.dumps({"C": 2, "TOTAL": n * 2}).encode()
            producer.send(topic, ProducerRecord(key=f"k{n}".encode(), value=value, timestamp=keys + n))
            written += 1
        for n in range(5, keys, 1000):
            producer.send(topic, ProducerRecord(key=f"k{n}".encode(), value=None, timestamp=2 * keys + n))
            written += 1
        producer.flush()
    return written


def _expected(n: int, keys: int) -> list[Any] | None:
    if n % 1000 == 5:
        return None
    return [f"k{n}", 2, n * 2] if n % 10 == 0 else [f"k{n}", 1, n]


def _measure(client: Any, endpoint: str, keys: int, lookups: int, rng: random.Random) -> list[float]:
    """Latencies (ms) of ``lookups`` key lookups on one endpoint; every answer is checked."""
    times = []
    for _ in range(lookups):
        n = rng.randrange(keys)
        sql = f"SELECT * FROM PULL_BENCH WHERE ID='k{n}';"
        clock = Clock(cpu=False).start()
        if endpoint == "/query-stream":
            response = client.post(endpoint, json={"sql": sql, "properties": {}})
            lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
            rows = lines[1:]
        else:
            response = client.post(endpoint, json={"ksql": sql, "streamsProperties": {}})
            rows = [m["row"]["columns"] for m in response.json() if "row" in m]
        times.append(clock.stop().seconds * 1000)
        expected = _expected(n, keys)
        if response.status_code != 200 or rows != ([] if expected is None else [expected]):
            raise SystemExit(f"pull_bench: wrong answer for k{n} on {endpoint}: {response.status_code} {response.text[:300]}")
    return times


def run(bootstrap: str, keys: int, lookups: int, seed: int) -> dict[str, Any]:
    import httpx
    import uvicorn

    from engine.server.app import create_app
    from engine.server.service import KsqlService

    service = KsqlService(bootstrap, f"pull_bench_{uuid.uuid4().hex[:8]}", Path(tempfile.mkdtemp(prefix="pull-bench-")),
                          run_queries=False, command_timeout=60.0)
    service.start(timeout=60)
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        topic = f"pull_bench_in_{uuid.uuid4().hex[:6]}"
        service.execute(
            f"CREATE STREAM PULL_BENCH_IN (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);"
            "CREATE TABLE PULL_BENCH AS SELECT ID, COUNT(*) AS C, SUM(V) AS TOTAL FROM PULL_BENCH_IN GROUP BY ID;"
        )
        source = service.engine.metastore.get("PULL_BENCH")
        started = time.perf_counter()
        written = _write_changelog(bootstrap, source.topic, keys)
        produce_s = time.perf_counter() - started
        rng = random.Random(seed)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            started = time.perf_counter()
            first = client.post("/query-stream", json={"sql": "SELECT * FROM PULL_BENCH WHERE ID='k1';"})
            materialize_s = time.perf_counter() - started
            if first.status_code != 200:
                raise SystemExit(f"pull_bench: the first pull query failed: {first.text[:300]}")
            _measure(client, "/query-stream", keys, 50, rng)  # warm-up
            results = {}
            for endpoint in ("/query-stream", "/query"):
                times = _measure(client, endpoint, keys, lookups, rng)
                results[endpoint] = {
                    "lookups": len(times),
                    "p50_ms": round(statistics.median(times), 2),
                    "p90_ms": round(_percentile(times, 0.90), 2),
                    "p99_ms": round(_percentile(times, 0.99), 2),
                    "max_ms": round(max(times), 2),
                }
        return {
            "keys": keys,
            "changelog_records": written,
            "produce_seconds": round(produce_s, 2),
            "first_query_seconds": round(materialize_s, 2),
            "endpoints": results,
            "targets": {"p50_ms": TARGET_P50_MS, "p99_ms": TARGET_P99_MS},
        }
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        service.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.pull_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000, help="keys in the table (default 100000)")
    parser.add_argument("--lookups", type=int, default=2000, help="timed lookups per endpoint (default 2000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bootstrap-servers", help="a running broker (default: start one)")
    R.add_report_options(parser, "pull_bench")
    args = parser.parse_args(argv)
    if args.keys < 1 or args.lookups < 1:
        parser.error("--keys and --lookups must be at least 1")
    bench = R.Run("pull_bench", load={"keys": args.keys, "lookups": args.lookups, "seed": args.seed})
    if args.bootstrap_servers:
        report = run(args.bootstrap_servers, args.keys, args.lookups, args.seed)
    else:
        from engine.components.broker import Broker

        with Broker(Path(tempfile.mkdtemp(prefix="pull-bench-broker-")), stop_with_parent=True) as broker:
            report = run(broker.bootstrap_servers, args.keys, args.lookups, args.seed)
    # _measure stops the run at the first wrong answer, so reaching here means all were right.
    bench.check_outputs("every lookup's answer equals its key's last changelog value (or no row for a deleted key)")
    for endpoint, r in report["endpoints"].items():
        bench.figure(f"{endpoint} p50", r["p50_ms"], unit="ms", target=TARGET_P50_MS)
        bench.figure(f"{endpoint} p99", r["p99_ms"], unit="ms", target=TARGET_P99_MS)
    print(f"pull_bench: {report['keys']} keys ({report['changelog_records']} changelog records, written in "
          f"{report['produce_seconds']} s); first query (materialization) {report['first_query_seconds']} s")
    print(f"{'endpoint':<14} {'lookups':>7} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    met = True
    for endpoint, r in report["endpoints"].items():
        print(f"{endpoint:<14} {r['lookups']:>7} {r['p50_ms']:>8} {r['p90_ms']:>8} {r['p99_ms']:>8} {r['max_ms']:>8}")
        met = met and r["p50_ms"] < TARGET_P50_MS and r["p99_ms"] < TARGET_P99_MS
    print(f"targets p50 < {TARGET_P50_MS:g} ms, p99 < {TARGET_P99_MS:g} ms: {'met' if met else 'NOT met'}")
    R.write(bench, report, report=args.report, record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
