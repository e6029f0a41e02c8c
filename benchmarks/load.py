"""A load test of the server: many clients at once on a three-server service (``nox -s load``).

    python -m benchmarks.load [--clients 256] [--seconds 120] [--servers 3] [--record]

A broker and ``--servers`` ``kspark server`` processes of one service (the KLIP-18 tables
metastore) start; ``--clients`` clients, half over HTTP/1.1 and half over HTTP/2, each
spread over the servers, run a mix for ``--seconds``:

- inserts: one row on ``/inserts-stream`` or an ``INSERT INTO ... VALUES`` on ``/ksql``, each
  row with an id of its own;
- pull queries on ``/query-stream`` against a table the service maintains;
- DDL on ``/ksql``: ``CREATE STREAM`` of a client's own name, then ``DROP STREAM``;
- push queries on ``/query-stream``, opened and abandoned after their first message.

It reports throughput, p50/p99 latency per endpoint and errors by kind, then reads the
inserts' topic (read_committed) and checks that every acknowledged row is there exactly once,
and counts rows that are there although their client was told they failed. A client told 429
(the server busy, ``engine.server.limits``) waits the ``Retry-After`` it was given. The run
fails (exit 1) on any 5xx, lost or duplicated acknowledged row, row reported failed that was
written, or connection the servers dropped without an answer (a reset or a close: httpx's
read, write and protocol errors); the clients' own timeouts and the 429s are counted apart.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import random
import sys
import tempfile
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from benchmarks.report import OutputsWrong, Run, write
from engine.components.kspark_server import ServerProcess, stop_all
from engine.errors import ComponentError

MIX = (("insert", 60), ("pull", 25), ("ddl", 10), ("push", 5))


def _start_servers(bootstrap: str, count: int, work: Path) -> list[ServerProcess]:
    service_id = f"load_{uuid.uuid4().hex[:8]}"
    servers = [ServerProcess(bootstrap, service_id, work / f"state{n}", log=work / f"server{n}.log",
                             args=("--spark-master", "local[1]")) for n in range(count)]
    try:
        for server in servers:
            server.start(timeout=300)
    except ComponentError as exc:
        stop_all(servers)
        raise SystemExit(f"load: {exc}") from None
    return servers


# httpx's errors of a connection the server reset or closed without an answer.
DROPPED = ("ReadError", "WriteError", "RemoteProtocolError", "ConnectError")


class Tally:
    """Latencies per endpoint, statuses and errors by kind, acknowledged and failed inserts."""

    def __init__(self) -> None:
        self.latencies: dict[str, list[float]] = collections.defaultdict(list)
        self.errors: collections.Counter[str] = collections.Counter()
        self.server_errors = 0
        self.busy = 0  # answers 429: the server refused with Retry-After
        self.dropped = 0  # connections closed or reset without an answer
        self.timed_out = 0  # the client's own timeout ran out
        self.acked: list[str] = []
        self.failed: list[str] = []
        self.samples: dict[str, str] = {}  # the first answer of each error kind, for the report
        self.in_flight = 0
        self.peak = 0  # the most requests in flight at once: the concurrency the servers saw

    def sample(self, endpoint: str, kind: str, text: str) -> None:
        self.samples.setdefault(f"{endpoint}: {kind}", text[:600])

    def done(self, endpoint: str, started: float, status: int | None, kind: str = "") -> None:
        self.latencies[endpoint].append(time.monotonic() - started)
        if status is not None and status >= 500:
            self.server_errors += 1
        self.busy += status == 429
        self.dropped += kind in DROPPED
        self.timed_out += kind.endswith("Timeout")
        if kind:
            self.errors[f"{endpoint}: {kind}"] += 1


async def _client(number: int, http: Any, urls: list[str], until: float, tally: Tally) -> None:
    import httpx

    rng = random.Random(number)
    actions = [name for name, weight in MIX for _ in range(weight)]
    retry_after = 0.0
    while time.monotonic() < until:
        if retry_after:
            await asyncio.sleep(min(retry_after, max(0.0, until - time.monotonic())))
            retry_after = 0.0
            continue
        url = urls[rng.randrange(len(urls))]
        action = rng.choice(actions)
        started = time.monotonic()
        tally.in_flight += 1
        tally.peak = max(tally.peak, tally.in_flight)
        answer: Any = None
        try:
            if action == "insert":
                row_id = f"c{number}-{uuid.uuid4().hex[:10]}"
                if rng.random() < 0.5:
                    body = json.dumps({"target": "EVENTS"}) + "\n" + json.dumps({"ID": row_id, "V": number}) + "\n"
                    answer = await http.post(f"{url}/inserts-stream", content=body,
                                             headers={"Accept": "application/vnd.ksqlapi.delimited.v1"})
                    acks = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
                    ok = answer.status_code == 200 and bool(acks) and acks[0].get("status") == "ok"
                    endpoint = "/inserts-stream"
                else:
                    answer = await http.post(f"{url}/ksql", json={
                        "ksql": f"INSERT INTO EVENTS (ID, V) VALUES ('{row_id}', {number});"})
                    ok = answer.status_code == 200
                    endpoint = "/ksql insert"
                (tally.acked if ok else tally.failed).append(row_id)
                tally.done(endpoint, started, answer.status_code, "" if ok else f"{answer.status_code}")
                if not ok:
                    tally.sample(endpoint, str(answer.status_code), answer.text)
            elif action == "pull":
                answer = await http.post(f"{url}/query-stream", json={"sql": f"SELECT * FROM COUNTS WHERE K = {number % 8};"})
                tally.done("/query-stream pull", started, answer.status_code,
                           "" if answer.status_code == 200 else str(answer.status_code))
                if answer.status_code != 200:
                    tally.sample("/query-stream pull", str(answer.status_code), answer.text)
            elif action == "ddl":
                name = f"L{number}_{uuid.uuid4().hex[:6]}"
                created = await http.post(f"{url}/ksql", json={"ksql": (
                    f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='load_ddl', "
                    "VALUE_FORMAT='JSON', PARTITIONS=1);")})
                tally.done("/ksql ddl", started, created.status_code,
                           "" if created.status_code == 200 else str(created.status_code))
                if created.status_code != 200:
                    tally.sample("/ksql ddl", str(created.status_code), created.text)
                answer = created
                if created.status_code == 200:
                    started = time.monotonic()
                    dropped = await http.post(f"{url}/ksql", json={"ksql": f"DROP STREAM {name};"})
                    tally.done("/ksql ddl", started, dropped.status_code,
                               "" if dropped.status_code == 200 else str(dropped.status_code))
                    if dropped.status_code != 200:
                        tally.sample("/ksql ddl", str(dropped.status_code), dropped.text)
                    answer = dropped
            else:
                async with http.stream("POST", f"{url}/query-stream", json={"sql": "SELECT * FROM EVENTS EMIT CHANGES;"},
                                       headers={"Accept": "application/vnd.ksqlapi.delimited.v1"}) as answer:
                    async for line in answer.aiter_lines():
                        if answer.status_code != 200:
                            tally.sample("/query-stream push", str(answer.status_code), line)
                        break  # the metadata: abandon the query
                tally.done("/query-stream push", started, answer.status_code,
                           "" if answer.status_code == 200 else str(answer.status_code))
        except httpx.HTTPError as exc:
            tally.done(action, started, None, type(exc).__name__)
            tally.sample(action, type(exc).__name__, repr(exc))
        finally:
            tally.in_flight -= 1
        if answer is not None and answer.status_code == 429:
            retry_after = float(answer.headers.get("retry-after", "1"))


async def _everyone(clients: int, urls: list[str], seconds: float, tally: Tally) -> float:
    """Run every client for ``seconds``; the seconds they took. The clients (one connection
    pool each, half HTTP/2) are all made before the clock starts, with one TLS context between
    them: making a context per client loads the CA bundle each time, which on a loaded machine
    took longer than the run, so most clients never sent a request."""
    import httpx

    context = httpx.create_ssl_context()
    async with contextlib.AsyncExitStack() as stack:
        pools = [await stack.enter_async_context(httpx.AsyncClient(
            http2=n % 2 == 1, http1=n % 2 == 0, timeout=120, verify=context)) for n in range(clients)]
        started = time.monotonic()
        until = started + seconds
        await asyncio.gather(*(_client(n, pool, urls, until, tally) for n, pool in enumerate(pools)))
        return time.monotonic() - started


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--record", action="store_true", help="append the run to benchmarks/reports/load.json")
    parser.add_argument("--keep", metavar="DIR", help="keep the servers' logs and state in DIR (a new temporary "
                        "directory, removed at the end, by default)")
    args = parser.parse_args(argv)
    import httpx

    from engine.components.broker import Broker
    from engine.kafka.consume import read_topic

    with ExitStack() as stack:
        if args.keep:
            work = Path(args.keep)
            work.mkdir(parents=True, exist_ok=True)
        else:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kspark-load-")))
        broker = stack.enter_context(Broker(work / "broker", stop_with_parent=True))
        servers = _start_servers(broker.bootstrap_servers, args.servers, work)
        urls = [server.url for server in servers]
        try:
            topic = f"load_events_{uuid.uuid4().hex[:6]}"
            for statement in (
                f"CREATE STREAM EVENTS (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=4);",
                "CREATE TABLE COUNTS AS SELECT V % 8 AS K, COUNT(*) AS N FROM EVENTS GROUP BY V % 8;",
            ):
                answer = httpx.post(f"{urls[0]}/ksql", json={"ksql": statement}, timeout=300)
                if answer.status_code != 200:
                    raise SystemExit(f"load: {statement} answered {answer.status_code}: {answer.text}")
            tally = Tally()
            elapsed = asyncio.run(_everyone(args.clients, urls, args.seconds, tally))
            written = collections.Counter(r.key.decode() for r in read_topic(broker.bootstrap_servers, topic, timeout=120)
                                          if r.key is not None)
        finally:
            stop_all(servers, timeout=120)
    lost = [i for i in tally.acked if written[i] == 0]
    duplicated = [i for i in tally.acked if written[i] > 1]
    failed_but_written = [i for i in tally.failed if written[i] > 0]
    requests = sum(len(v) for v in tally.latencies.values())
    run = Run("load", load={"clients": args.clients, "seconds": args.seconds, "servers": args.servers,
                            "mix": dict(MIX), "http": "half HTTP/1.1, half HTTP/2"})
    problems = []
    if tally.server_errors:
        problems.append(f"{tally.server_errors} answers were 5xx")
    if lost or duplicated:
        problems.append(f"{len(lost)} acknowledged rows lost, {len(duplicated)} duplicated")
    if failed_but_written:
        problems.append(f"{len(failed_but_written)} rows reported failed were written")
    if tally.dropped:
        problems.append(f"{tally.dropped} connections were dropped without an answer")
    details: dict[str, Any] = {"errors": dict(tally.errors), "acknowledged": len(tally.acked),
                               "dropped_connections": tally.dropped, "answered_429": tally.busy,
                               "client_timeouts": tally.timed_out,
                               "failed": len(tally.failed), "requests": requests, "error_samples": tally.samples,
                               "peak_concurrent_requests": tally.peak}
    print(json.dumps(details, indent=2, sort_keys=True))
    try:
        run.check_outputs("every acknowledged insert is in its topic once; no 5xx; no failed row written; "
                      "no connection dropped without an answer", problems)
    except OutputsWrong as exc:
        print(f"load: {exc}", file=sys.stderr)
        return 1
    run.figure("requests_per_second", requests / elapsed, unit="1/s", higher_is_better=True)
    run.figure("peak_concurrent_requests", tally.peak, unit="requests", higher_is_better=True)
    for endpoint, values in sorted(tally.latencies.items()):
        run.figure(f"{endpoint} p50", _quantile(values, 0.5) * 1000, unit="ms")
        run.figure(f"{endpoint} p99", _quantile(values, 0.99) * 1000, unit="ms")
    write(run, details, report="reports/load.json", record=args.record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
