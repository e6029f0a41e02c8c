"""A rolling upgrade of a running service, and the downgrade back, checked record by record.

``nox -s upgrade`` runs this script (it is long: a broker, three servers restarted twice each):

    python ci/rolling_upgrade.py --repo PATH [--rate 12] [--report build/rolling_upgrade.json]

1. The previous release's wheel (the last line of ``planned_cases/RELEASES``, rebuilt from its
   commit) and the current wheel (HEAD) are each installed without extras into a fresh venv.
2. A broker and three ``kspark server`` processes of the previous release start: one service
   id, one shared state dir, the metastore on the command topic (``--metastore``). The KLIP-18
   tables are both releases' default, but 0.11.0's wheel does not declare httpx, which its
   tables-mode servers need to forward a metastore write to the table's owner: without extras
   every forwarded statement fails (``No module named 'httpx'``). The command topic is the mode
   both releases run without extras.
3. Five persistent queries are created (a filter/projection, an aggregate, a tumbling-window
   aggregate with EMIT FINAL, a stream-table join, a table-table join) and a producer writes
   keyed orders with increasing timestamps for the whole run.
4. The servers are upgraded one at a time (stopped, started on the same port from the current
   venv) while a client keeps sending statements: CREATE STREAM / DROP STREAM and INSERT
   VALUES, round robin over the three servers. Each answer is counted; refusals are kept.
5. The input stops, a flush record closes the last windows; once the queries caught up, every
   output topic (read_committed) is compared with the current engine's bounded run of the same
   statements and records (``kspark run --input``): stream outputs and final windows as
   multisets (lost, repeated), tables by their last value per key (and each count strictly
   increasing). EXPLAIN shows each query's step versions: those saved before the upgrade must
   be unchanged, and a query created after it must carry the current planner's.
6. The downgrade: the servers go back to the previous release one at a time, more input is
   produced, and the outputs are checked again. Then a plan naming a step version newer than
   either engine (a fake ``...V99``) is saved in a ``kspark run`` state dir: both releases must
   refuse it with a message naming the step.

The summary prints as JSON and is written to ``--report``. Exit 1 if any check failed.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import venv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from engine.components.broker import Broker
from engine.components.kspark_server import ServerProcess
from engine.components.process import HOST
from engine.kafka.consume import read_topic
from qtt.plans.layout import read_release_lines
from qtt.plans.release_wheel import build_release_wheel, head_commit

BASE_TIME = 1_700_000_000_000  # the first order's timestamp (ms); each next one is STEP_MS later
STEP_MS = 250
CUSTOMERS = tuple(f"c{n}" for n in range(8))
OFFSETS = {"auto.offset.reset": "earliest"}

SOURCES = (
    "CREATE STREAM ORDERS (CUSTOMER STRING KEY, SEQ INT, QTY INT) "
    "WITH (KAFKA_TOPIC='up_orders', VALUE_FORMAT='JSON', PARTITIONS=1);",
    "CREATE TABLE CUSTOMERS (CUSTOMER STRING PRIMARY KEY, REGION STRING) "
    "WITH (KAFKA_TOPIC='up_customers', VALUE_FORMAT='JSON', PARTITIONS=1);",
    "CREATE TABLE LIMITS (CUSTOMER STRING PRIMARY KEY, CAP INT) "
    "WITH (KAFKA_TOPIC='up_limits', VALUE_FORMAT='JSON', PARTITIONS=1);",
    "CREATE STREAM SIDE (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='up_side', VALUE_FORMAT='JSON', PARTITIONS=1);",
)
# (name, kind, statement): kind says how its output is compared
QUERIES = (
    ("BIG_ORDERS", "stream",
     "CREATE STREAM BIG_ORDERS WITH (KAFKA_TOPIC='up_big_orders') AS "
     "SELECT CUSTOMER, SEQ, QTY * 10 AS AMOUNT FROM ORDERS WHERE QTY >= 5 EMIT CHANGES;"),
    ("TOTALS", "table",
     "CREATE TABLE TOTALS WITH (KAFKA_TOPIC='up_totals') AS "
     "SELECT CUSTOMER, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS GROUP BY CUSTOMER EMIT CHANGES;"),
    ("PER_WINDOW", "final",
     "CREATE TABLE PER_WINDOW WITH (KAFKA_TOPIC='up_per_window') AS "
     "SELECT CUSTOMER, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS "
     "WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 0 SECONDS) GROUP BY CUSTOMER EMIT FINAL;"),
    ("ENRICHED", "stream",
     "CREATE STREAM ENRICHED WITH (KAFKA_TOPIC='up_enriched') AS "
     "SELECT O.CUSTOMER AS CUSTOMER, O.SEQ AS SEQ, O.QTY AS QTY, C.REGION AS REGION "
     "FROM ORDERS O JOIN CUSTOMERS C ON O.CUSTOMER = C.CUSTOMER EMIT CHANGES;"),
    ("CAPPED", "table",
     "CREATE TABLE CAPPED WITH (KAFKA_TOPIC='up_capped') AS "
     "SELECT T.CUSTOMER AS CUSTOMER, T.TOTAL AS TOTAL, L.CAP AS CAP "
     "FROM TOTALS T JOIN LIMITS L ON T.CUSTOMER = L.CUSTOMER EMIT CHANGES;"),
)
AFTER_UPGRADE = ("SMALL_ORDERS", "stream",
                 "CREATE STREAM SMALL_ORDERS WITH (KAFKA_TOPIC='up_small_orders') AS "
                 "SELECT CUSTOMER, SEQ, QTY FROM ORDERS WHERE QTY < 5 EMIT CHANGES;")


class Failed(Exception):
    """A finding that ends the run, in one line."""


# ---------------------------------------------------------------- input


def order(seq: int) -> dict[str, Any]:
    """Order ``seq`` of the input: keyed by customer, timestamps increasing."""
    return {"topic": "up_orders", "key": CUSTOMERS[seq % len(CUSTOMERS)],
            "value": {"SEQ": seq, "QTY": (seq * 7) % 11}, "timestamp": BASE_TIME + seq * STEP_MS}


FLUSH_GAP = 240  # orders' worth of time (60 s) between the last order and a flush record


def flush(seq: int, second: int = 0) -> dict[str, Any]:
    """A record far past order ``seq``: stream time passes the end of every window holding an order.

    Two are sent, 1 ms apart: the bounded run closes windows by the stream time before a record,
    so only the second one closes the windows the first one passed.
    """
    return {"topic": "up_orders", "key": "flush", "value": {"SEQ": -seq - second, "QTY": 0},
            "timestamp": BASE_TIME + (seq + FLUSH_GAP) * STEP_MS + second}


def tables_input() -> list[dict[str, Any]]:
    rows = [{"topic": "up_customers", "key": c, "value": {"REGION": f"r{n % 3}"}, "timestamp": BASE_TIME - 10_000}
            for n, c in enumerate(CUSTOMERS)]
    rows += [{"topic": "up_limits", "key": c, "value": {"CAP": 100 * (n + 1)}, "timestamp": BASE_TIME - 10_000}
             for n, c in enumerate(CUSTOMERS) if n != 3]  # c3 has no limit: the inner join drops it
    return rows


class Producer:
    """Writes orders at ``rate`` per second from a thread until stopped; ``sent`` keeps every record."""

    def __init__(self, bootstrap: str, rate: float) -> None:
        from confluent_kafka import Producer as KafkaProducer

        self.producer = KafkaProducer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
        self.rate = rate
        self.next_seq = 0
        self.orders = 0
        self.sent: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def send(self, record: dict[str, Any]) -> None:
        self.producer.produce(record["topic"], key=record["key"].encode(), value=json.dumps(record["value"]).encode(),
                              timestamp=record["timestamp"])
        self.sent.append(record)

    def run(self) -> None:
        while not self.stopping.is_set():
            self.send(order(self.next_seq))
            self.next_seq += 1
            self.orders += 1
            self.producer.poll(0)
            time.sleep(1 / self.rate)

    def start(self) -> None:
        self.stopping.clear()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop the orders, then send a flush record; the next orders start after its window."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join()
        self.send(flush(self.next_seq))
        self.send(flush(self.next_seq, 1))
        self.next_seq += 2 * FLUSH_GAP
        if self.producer.flush(60) != 0:
            raise Failed("the producer could not deliver every record within 60 s")


# ---------------------------------------------------------------- venvs and servers


def make_venv(directory: Path, wheel: Path) -> str:
    """A fresh venv with ``wheel`` installed (no extras); its python."""
    shutil.rmtree(directory, ignore_errors=True)
    venv.EnvBuilder(with_pip=True).create(directory)
    python = str(directory / "bin" / "python")
    done = subprocess.run([python, "-m", "pip", "install", "--quiet", str(wheel)], capture_output=True, text=True)
    if done.returncode != 0:
        raise Failed(f"pip install {wheel.name} failed: {done.stderr.strip().splitlines()[-1:]}")
    return python


@dataclass
class Service:
    """Three servers of one service id on fixed ports; each can be restarted from another venv."""

    bootstrap: str
    service_id: str
    work: Path
    ports: list[int]
    metastore: str
    servers: list[ServerProcess | None] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)

    def server(self, n: int, python: str) -> ServerProcess:
        server = ServerProcess(self.bootstrap, self.service_id, self.work / "state", log=self.work / f"server{n}.log",
                               python=python, cwd=self.work, args=("--spark-master", "local[1]", "--metastore", self.metastore))
        server.port = self.ports[n]  # the same server id (host:port) across restarts
        server.url = f"http://{HOST}:{server.port}"
        server.command[server.command.index("--listen") + 1] = f"{HOST}:{server.port}"
        return server

    def start(self, n: int, python: str, release: str) -> float:
        started = time.monotonic()
        server = self.server(n, python)
        server.start(timeout=420)
        self.servers[n] = server
        self.releases[n] = release
        return time.monotonic() - started

    def stop(self, n: int) -> int | str:
        server = self.servers[n]
        self.servers[n] = None
        return server.stop(timeout=120) if server is not None else 0

    def urls(self) -> list[str]:
        return [f"http://{HOST}:{port}" for port in self.ports]

    def up(self) -> list[str]:
        return [s.url for s in self.servers if s is not None]


def ksql(url: str, statement: str, *, properties: dict[str, str] | None = None, timeout: float = 300) -> Any:
    answer = httpx.post(f"{url}/ksql", json={"ksql": statement, "streamsProperties": properties or {}},
                        timeout=timeout)
    if answer.status_code != 200:
        raise Failed(f"{statement[:60]}... on {url} answered {answer.status_code}: {answer.text[:400]}")
    return answer.json()


def query_ids(url: str) -> dict[str, str]:
    """Sink name -> query id of every persistent query."""
    queries = ksql(url, "SHOW QUERIES;")[0]["queries"]
    return {sink: q["id"] for q in queries for sink in q.get("sinks", ())}


def step_versions(url: str, statement_or_id: str) -> list[str]:
    """The step types of a query's plan, as EXPLAIN lists them (sink first)."""
    description = ksql(url, f"EXPLAIN {statement_or_id}")[0]["queryDescription"]
    return re.findall(r"\[ (\w+) \]", description["executionPlan"])


def wait_running(url: str, ids: list[str], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = {q["id"]: q.get("state", "") for q in ksql(url, "SHOW QUERIES;")[0]["queries"]}
        if all(states.get(i) == "RUNNING" for i in ids):
            return
        time.sleep(2)
    raise Failed(f"the queries are not all RUNNING after {timeout:g} s: {states}")


@dataclass
class StatementTally:
    """What the statement client sent during an upgrade and how each answer read."""

    sent: int = 0
    succeeded: int = 0
    refusals: collections.Counter[str] = field(default_factory=collections.Counter)
    inserted: list[str] = field(default_factory=list)  # ids of acknowledged INSERT VALUES
    failed_inserts: list[str] = field(default_factory=list)


class StatementClient:
    """Sends a CREATE STREAM, an INSERT VALUES and a DROP STREAM round robin over the servers."""

    def __init__(self, urls: list[str], tally: StatementTally, prefix: str, every: float = 1.5) -> None:
        self.urls, self.tally, self.prefix, self.every = urls, tally, prefix, every
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def send(self, url: str, statement: str) -> bool:
        self.tally.sent += 1
        try:
            answer = httpx.post(f"{url}/ksql", json={"ksql": statement}, timeout=120)
        except httpx.HTTPError as exc:
            self.tally.refusals[f"{type(exc).__name__} (the server is down)"] += 1
            return False
        if answer.status_code == 200:
            self.tally.succeeded += 1
            return True
        try:
            message = answer.json().get("message", answer.text)
        except ValueError:
            message = answer.text
        self.tally.refusals[f"{answer.status_code}: {re.sub(r'[0-9]+', 'N', str(message))[:200]}"] += 1
        return False

    def run(self) -> None:
        n = 0
        while not self.stopping.is_set():
            url = self.urls[n % len(self.urls)]
            name = f"{self.prefix}_CHURN_{n}"
            self.send(url, f"CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='up_churn', "
                           "VALUE_FORMAT='JSON', PARTITIONS=1);")
            row = f"{self.prefix}{n}"
            if self.send(self.urls[(n + 1) % len(self.urls)], f"INSERT INTO SIDE (ID, N) VALUES ('{row}', {n});"):
                self.tally.inserted.append(row)
            else:
                self.tally.failed_inserts.append(row)
            self.send(self.urls[(n + 2) % len(self.urls)], f"DROP STREAM IF EXISTS {name};")
            n += 1
            self.stopping.wait(self.every)

    def __enter__(self) -> StatementClient:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stopping.set()
        self.thread.join()


def rolling(service: Service, python: str, release: str, tally: StatementTally, prefix: str) -> list[dict[str, Any]]:
    """Restart each server from ``python`` in turn while statements arrive; the steps taken."""
    steps = []
    with StatementClient(service.urls(), tally, prefix):
        for n in range(len(service.ports)):
            code = service.stop(n)
            seconds = service.start(n, python, release)
            steps.append({"server": n, "to": release, "stop_exit": code, "start_seconds": round(seconds, 1)})
            print(f"rolling-upgrade: server {n} now runs {release} (stopped with {code}, "
                  f"healthy after {seconds:.0f} s)", flush=True)
    return steps


# ---------------------------------------------------------------- expected and actual outputs


def expected_outputs(kspark: str, records: list[dict[str, Any]], work: Path, queries: tuple[tuple[str, str, str], ...]
                     ) -> dict[str, list[dict[str, Any]]]:
    """The current engine's bounded run of the statements over ``records``: topic -> records."""
    sql = work / "expected.sql"
    sql.write_text("\n".join([*SOURCES, *(q[2] for q in queries)]) + "\n", encoding="utf-8")
    inputs = work / "expected_input.json"
    inputs.write_text(json.dumps(records), encoding="utf-8")
    done = subprocess.run([kspark, "run", str(sql), "--input", str(inputs), "--spark-master", "local[1]"],
                          capture_output=True, text=True, cwd=work, timeout=1800)
    if done.returncode != 0:
        raise Failed(f"the bounded run exited {done.returncode}: {done.stderr.strip()[-800:]}")
    outputs: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            outputs[record["topic"]].append(record)
    return outputs


def _canonical(key: Any, value: Any, window_start: int | None) -> tuple[Any, ...]:
    return (key, window_start, json.dumps(value, sort_keys=True))


def expected_items(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [_canonical(r["key"], r["value"], (r.get("window") or {}).get("start")) for r in records]


def actual_items(bootstrap: str, topic: str, windowed: bool) -> list[tuple[Any, ...]]:
    items = []
    for record in read_topic(bootstrap, topic, timeout=120):
        raw = record.key or b""
        start = None
        if windowed:
            raw, start = raw[:-8], int.from_bytes(raw[-8:], "big", signed=True)
        value = json.loads(record.value) if record.value is not None else None
        items.append(_canonical(raw.decode(), value, start))
    return items


def compare(kind: str, expected: list[tuple[Any, ...]], actual: list[tuple[Any, ...]]) -> dict[str, Any]:
    """Lost and repeated records (streams, final windows), or wrong last values (tables)."""
    if kind in ("stream", "final"):
        want, got = collections.Counter(expected), collections.Counter(actual)
        lost, repeated = want - got, got - want
        return {"expected": len(expected), "written": len(actual), "lost": sum(lost.values()),
                "repeated": sum(repeated.values()), "examples": [str(x) for x in [*lost, *repeated][:3]]}
    last_want = {key: value for key, _, value in expected}
    last_got = {key: value for key, _, value in actual}
    wrong = {k: (last_want.get(k), last_got.get(k)) for k in set(last_want) | set(last_got)
             if last_want.get(k) != last_got.get(k)}
    counts: dict[Any, list[int]] = collections.defaultdict(list)
    for key, _, value in actual:
        if value != "null" and '"N"' in value:
            counts[key].append(json.loads(value)["N"])
    not_increasing = [k for k, ns in counts.items() if any(b <= a for a, b in zip(ns, ns[1:], strict=False))]
    return {"keys": len(last_want), "written": len(actual), "lost": len(wrong), "repeated": len(not_increasing),
            "examples": [f"{k}: expected {w}, got {g}" for k, (w, g) in list(wrong.items())[:3]]
            + [f"{k}: counts not increasing" for k in not_increasing[:3]]}


def check_outputs(bootstrap: str, expected: dict[str, list[dict[str, Any]]],
                  queries: tuple[tuple[str, str, str], ...], timeout: float = 600) -> dict[str, Any]:
    """Poll the output topics until they agree with ``expected`` (or ``timeout``); the comparison."""
    deadline = time.monotonic() + timeout
    while True:
        results = {}
        for name, kind, statement in queries:
            topic = re.search(r"KAFKA_TOPIC='(\w+)'", statement).group(1)  # type: ignore[union-attr]
            try:
                actual = actual_items(bootstrap, topic, windowed=kind == "final")
            except Exception as exc:  # noqa: BLE001 - a topic not there yet is retried until the deadline
                actual = []
                print(f"rolling-upgrade: reading {topic}: {exc}", flush=True)
            results[name] = compare(kind, expected_items(expected.get(topic, [])), actual)
        if all(r["lost"] == 0 and r["repeated"] == 0 for r in results.values()) or time.monotonic() > deadline:
            return results
        time.sleep(10)


# ---------------------------------------------------------------- a plan newer than the engine


def newer_plan_refusals(bootstrap: str, pythons: dict[str, str], work: Path) -> dict[str, Any]:
    """Save a plan with a fake newer step version in a ``kspark run`` state dir; how each release answers."""
    state = work / "newer-plan-state"
    sql = work / "newer.sql"
    sql.write_text("CREATE STREAM NP_IN (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='up_np_in', VALUE_FORMAT='JSON', "
                   "PARTITIONS=1);\nCREATE STREAM NP_OUT AS SELECT ID, V FROM NP_IN WHERE V > 0;\n", encoding="utf-8")
    current = next(iter(pythons.values()))
    kspark = str(Path(current).parent / "kspark")
    done = subprocess.run([kspark, "run", str(sql), "--bootstrap-servers", bootstrap, "--state-dir", str(state),
                           "--until-caught-up", "--spark-master", "local[1]"],
                          capture_output=True, text=True, cwd=work, timeout=900)
    if done.returncode != 0:
        raise Failed(f"kspark run of the newer-plan app exited {done.returncode}: {done.stderr.strip()[-400:]}")
    saved = state / "statements.json"
    text = saved.read_text(encoding="utf-8")
    versions = sorted(set(re.findall(r'"@type": "(stream\w+V)\d+"', text)))
    if "streamFilterV" not in versions and "streamSelectV" not in versions:
        raise Failed(f"the saved plan holds no streamSelect/streamFilter step: {versions}")
    step = "streamFilterV" if "streamFilterV" in versions else "streamSelectV"
    saved.write_text(re.sub(rf'"@type": "{step}\d+"', f'"@type": "{step}99"', text), encoding="utf-8")
    answers = {}
    for release, python in pythons.items():
        done = subprocess.run([str(Path(python).parent / "kspark"), "run", str(sql), "--bootstrap-servers",
                               bootstrap, "--state-dir", str(state), "--until-caught-up", "--spark-master", "local[1]"],
                              capture_output=True, text=True, cwd=work, timeout=900)
        message = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        answers[release] = {"exit": done.returncode, "message": message[:400],
                            "refused": done.returncode != 0 and f"{step}99" in message
                            and "Traceback" not in done.stderr}
    return {"fake_step": f"{step}99", "answers": answers}


# ---------------------------------------------------------------- the run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="the checkout (its RELEASES and history)")
    parser.add_argument("--rate", type=float, default=12.0, help="orders per second (default 12)")
    parser.add_argument("--report", type=Path, default=Path("build/rolling_upgrade.json"))
    parser.add_argument("--work", type=Path, help="keep the run's files here (default: a temporary dir)")
    parser.add_argument("--metastore", choices=("command-topic", "tables"), default="command-topic",
                        help="the servers' metastore mode (default command-topic: see step 2)")
    parser.add_argument("--reuse-venvs", action="store_true",
                        help="keep the venvs --work already holds instead of building them again")
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    report_path = args.report if args.report.is_absolute() else repo / args.report
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kspark-upgrade-") as tmp:
        work = (args.work or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        summary: dict[str, Any] = {"checks": {}}
        try:
            run(repo, work, args.rate, summary, metastore=args.metastore, reuse_venvs=args.reuse_venvs)
        except Failed as exc:
            summary["failed"] = str(exc)
        summary["seconds"] = round(time.monotonic() - started, 1)
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=2, sort_keys=True))
    problems = [name for name, ok in summary["checks"].items() if not ok]
    if "failed" in summary:
        problems.append(summary["failed"])
    print(f"rolling-upgrade: {'FAILED ' + '; '.join(problems) if problems else 'passed'} "
          f"({summary['seconds']:.0f} s); report {report_path}", flush=True)
    return 1 if problems else 0


def run(repo: Path, work: Path, rate: float, summary: dict[str, Any], *, metastore: str, reuse_venvs: bool) -> None:
    checks: dict[str, bool] = summary["checks"]
    previous = read_release_lines(repo / "planned_cases")[-1]
    head = head_commit(repo)
    if previous.commit is None or head is None:
        raise Failed("the previous release records no commit, or the checkout is not a git repository")
    summary["previous"] = {"version": previous.version, "commit": previous.commit}
    summary["current"] = {"commit": head}
    wheels = work / "wheels"
    timer = time.monotonic()
    pythons = []
    for name, commit in (("previous", previous.commit), ("current", head)):
        python = work / f"venv-{name}" / "bin" / "python"
        if not (reuse_venvs and (python.parent / "kspark").is_file()):
            python = Path(make_venv(python.parent.parent, build_release_wheel(repo, commit, wheels / name)))
        pythons.append(str(python))
    old_python, new_python = pythons
    summary["metastore"] = metastore
    summary["venvs_reused"] = reuse_venvs
    summary["venvs_seconds"] = round(time.monotonic() - timer, 1)
    old, new = f"previous {previous.version}", "current"
    print(f"rolling-upgrade: venvs of {previous.version} and HEAD {head[:10]} ready", flush=True)

    from engine.components.process import free_port

    with Broker(work / "broker", stop_with_parent=True) as broker:
        bootstrap = broker.bootstrap_servers
        service = Service(bootstrap, "upgrade", work, [free_port() for _ in range(3)], metastore,
                          [None] * 3, [""] * 3)
        try:
            for n in range(3):
                service.start(n, old_python, old)
            url = service.urls()[0]
            for statement in SOURCES:
                ksql(url, statement)
            producer = Producer(bootstrap, rate)
            for record in tables_input():  # the tables are loaded before any order
                producer.send(record)
            producer.producer.flush(30)
            for _, _, statement in QUERIES:
                ksql(url, statement, properties=OFFSETS)
            ids = query_ids(url)
            wait_running(url, [ids[name] for name, _, _ in QUERIES])
            saved_steps = {name: step_versions(url, ids[name]) for name, _, _ in QUERIES}
            summary["queries"] = {name: {"id": ids[name], "steps": steps} for name, steps in saved_steps.items()}
            producer.start()
            time.sleep(20)  # the queries run under load before the first server goes

            tally = StatementTally()
            summary["upgrade"] = rolling(service, new_python, new, tally, "UP")
            summary["statements_during_upgrade"] = {
                "sent": tally.sent, "succeeded": tally.succeeded, "refusals": dict(tally.refusals),
                "inserts_acknowledged": len(tally.inserted), "inserts_refused": len(tally.failed_inserts)}
            time.sleep(10)
            producer.stop()
            url = service.urls()[0]
            current_planner = step_versions(service.urls()[1], AFTER_UPGRADE[2])  # planned, not run
            ksql(url, AFTER_UPGRADE[2], properties=OFFSETS)
            ids = query_ids(url)
            wait_running(url, [ids[name] for name, _, _ in (*QUERIES, AFTER_UPGRADE)])

            after = {name: step_versions(url, ids[name]) for name, _, _ in QUERIES}
            checks["saved step versions kept through the upgrade"] = after == saved_steps
            summary["steps_after_upgrade"] = after
            new_steps = step_versions(url, ids[AFTER_UPGRADE[0]])
            checks["query created after the upgrade on the current step versions"] = new_steps == current_planner
            summary["query_after_upgrade"] = {"id": ids[AFTER_UPGRADE[0]], "steps": new_steps,
                                              "current_planner": current_planner}

            all_queries = (*QUERIES, AFTER_UPGRADE)
            records = list(producer.sent)
            expected = expected_outputs(str(Path(new_python).parent / "kspark"), records, work, all_queries)
            results = check_outputs(bootstrap, expected, all_queries)
            summary["after_upgrade"] = results
            checks["outputs exact after the upgrade"] = all(r["lost"] == 0 and r["repeated"] == 0
                                                            for r in results.values())
            side = collections.Counter(json.loads(r.key) if r.key.startswith(b'"') else r.key.decode()
                                       for r in read_topic(bootstrap, "up_side", timeout=60) if r.key)
            lost_inserts = [i for i in tally.inserted if side[i] == 0]
            repeated_inserts = [i for i in tally.inserted if side[i] > 1]
            summary["inserts_checked"] = {"acknowledged": len(tally.inserted), "lost": len(lost_inserts),
                                          "repeated": len(repeated_inserts),
                                          "refused_but_written": sum(side[i] > 0 for i in tally.failed_inserts)}
            checks["acknowledged inserts once each"] = not lost_inserts and not repeated_inserts
            summary["records"] = {"orders": producer.orders, "all": len(producer.sent)}
            print(f"rolling-upgrade: upgrade checked: {json.dumps(results)}", flush=True)

            # the downgrade: no step version was planned since the previous release
            down = StatementTally()
            producer.start()
            summary["downgrade"] = rolling(service, old_python, old, down, "DOWN")
            summary["statements_during_downgrade"] = {
                "sent": down.sent, "succeeded": down.succeeded, "refusals": dict(down.refusals)}
            producer.stop()
            url = service.urls()[0]
            ids = query_ids(url)
            wait_running(url, [ids[name] for name, _, _ in all_queries])
            records = list(producer.sent)
            expected = expected_outputs(str(Path(new_python).parent / "kspark"), records, work, all_queries)
            results = check_outputs(bootstrap, expected, all_queries)
            summary["after_downgrade"] = results
            checks["outputs exact after the downgrade"] = all(r["lost"] == 0 and r["repeated"] == 0
                                                              for r in results.values())
            summary["records"] = {"orders": producer.orders, "all": len(producer.sent)}
        finally:
            codes = [service.stop(n) for n in range(3)]
            summary["final_stop_exits"] = codes
        refusals = newer_plan_refusals(bootstrap, {new: new_python, old: old_python}, work)
        summary["newer_plan"] = refusals
        for release, answer in refusals["answers"].items():
            checks[f"{release} refuses a plan newer than itself"] = answer["refused"]
    logs = {p.name: [line for line in p.read_text(errors="replace").splitlines() if "Traceback" in line][:3]
            for p in work.glob("server*.log")}
    summary["server_tracebacks"] = {name: lines for name, lines in logs.items() if lines}


if __name__ == "__main__":
    sys.exit(main())

