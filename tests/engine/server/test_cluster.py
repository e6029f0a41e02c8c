"""Three ``kspark server`` processes of one service on one broker: each query has one owner,
and it moves when its owner is killed (-9) or stopped, with its output exact.

Run with ``nox -s cluster`` or ``pytest -m cluster`` (``nox -s tests`` leaves it out); it starts three
Spark drivers and takes one and a half to three minutes on an idle 2-core machine.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.kafka.consume import read_topic
from engine.metastore.database import SOURCES, MetastoreDatabase

pytestmark = pytest.mark.cluster


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server:
    """One ``kspark server`` subprocess; its URL stays across restarts (same port, same server id)."""

    def __init__(self, bootstrap: str, service_id: str, state_dir: Path, log: Path) -> None:
        self.port = _free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.url = f"http://{self.host}"
        self.log = log
        self.command = [sys.executable, "-m", "engine.cli", "server", "--bootstrap-servers", bootstrap,
                        "--service-id", service_id, "--listen", self.host, "--state-dir", str(state_dir)]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout: float = 150) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                if httpx.get(f"{self.url}/healthcheck", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"{self.host} did not become healthy: {self.log.read_text()[-3000:]}")

    def ksql(self, text: str, **properties: str) -> list[dict[str, Any]]:
        answer = httpx.post(f"{self.url}/ksql", json={"ksql": text, "streamsProperties": properties}, timeout=300)
        assert answer.status_code == 200, answer.text
        return list(answer.json())

    def queries(self) -> dict[str, tuple[str, str | None]]:
        """query id -> (state, owner) as this server lists them."""
        [listed] = self.ksql("SHOW QUERIES;")
        return {q["id"]: (q["state"], q["owner"]) for q in listed["queries"]}

    def metastore(self) -> tuple[list[str], list[str], list[str]]:
        streams, tables, queries = self.ksql("LIST STREAMS; LIST TABLES; LIST QUERIES;")
        return (sorted(s["name"] for s in streams["streams"]), sorted(t["name"] for t in tables["tables"]),
                sorted(q["id"] for q in queries["queries"]))

    def members(self) -> list[str]:
        return sorted(httpx.get(f"{self.url}/clusterStatus", timeout=30).json()["clusterStatus"])

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def pause(self, paused: bool) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP if paused else signal.SIGCONT)

    def stop(self) -> int:
        if self.process is None or self.process.poll() is not None:
            return 0 if self.process is None else int(self.process.returncode)
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise


def _until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, f"timed out after {timeout} s waiting until {what}"
        time.sleep(0.2)
    return time.monotonic() - started


def _values(bootstrap: str, topic: str, expected: int, timeout: float = 240) -> Counter[int]:
    """The N values in ``topic`` (read_committed), once it holds at least ``expected`` records."""
    found: Counter[int] = Counter()

    def enough() -> bool:
        found.clear()
        found.update(int(json.loads(r.value)["N"]) for r in read_topic(bootstrap, topic, timeout=5))
        return sum(found.values()) >= expected

    try:
        _until(enough, timeout, f"{topic} holds {expected} records")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it holds {sum(found.values())}: {sorted(found.elements())}") from None
    time.sleep(2)  # anything repeated would arrive now
    return Counter(int(json.loads(r.value)["N"]) for r in read_topic(bootstrap, topic, timeout=5))


def _create_streams(server: _Server, service_id: str, acknowledged: list[str], prefix: str = "D",
                    seconds: float | None = None) -> None:
    """CREATE STREAM D0, D1, ... through ``server``: until it dies, or for ``seconds`` whatever
    the answers (a refused statement is simply not acknowledged); the names it acknowledged."""
    ends = None if seconds is None else time.monotonic() + seconds
    for i in range(200):
        if ends is not None and time.monotonic() > ends:
            return
        name = f"{prefix}{i}"
        text = (f"CREATE STREAM {name} (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='{name.lower()}_{service_id}', "
                "VALUE_FORMAT='JSON', PARTITIONS=1);")
        try:
            answer = httpx.post(f"{server.url}/ksql", json={"ksql": text}, timeout=60)
        except httpx.HTTPError:
            if ends is None:
                return
            continue
        if answer.status_code == 200:
            acknowledged.append(name)
        elif ends is None:
            return


def _owner_of(servers: list[_Server], query_id: str) -> str | None:
    """The host running ``query_id``, as the first server lists it (None while it moves)."""
    return servers[0].queries()[query_id][1]


def _insert(server: _Server, numbers: range, per_request: int = 10) -> None:
    for start in range(numbers.start, numbers.stop, per_request):
        batch = range(start, min(start + per_request, numbers.stop))
        server.ksql(" ".join(f"INSERT INTO SRC (ID, N) VALUES ('k{n % 7}', {n});" for n in batch))


def test_three_servers_share_queries_and_a_killed_owner_loses_and_repeats_nothing(kafka_broker, tmp_path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"cluster_{uuid.uuid4().hex[:8]}"
    state = tmp_path / "state"
    servers = [_Server(bootstrap, service_id, state, tmp_path / f"server{i}.log") for i in range(3)]
    began = time.monotonic()
    phases: list[str] = []

    def phase(name: str) -> None:
        phases.append(f"{name} {time.monotonic() - began:.0f} s")

    try:
        for server in servers:
            server.start()
        for server in servers:
            server.wait_healthy()
        a, b, c = servers
        phase("three servers healthy")
        _until(lambda: all(s.members() == sorted(x.host for x in servers) for s in servers), 60,
               "every server lists the three")

        # A CSAS through one server, rows through another, a push query through the third.
        a.ksql(f"CREATE STREAM SRC (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='src_{service_id}', "
               "VALUE_FORMAT='JSON', PARTITIONS=1);")
        [created] = a.ksql(f"CREATE STREAM OUT WITH (KAFKA_TOPIC='out_{service_id}') AS SELECT ID, N FROM SRC;",
                           **{"auto.offset.reset": "earliest"})
        query_id = created["commandStatus"]["queryId"]
        _insert(b, range(0, 20))
        body = {"sql": "SELECT ID, N FROM OUT EMIT CHANGES LIMIT 20;", "properties": {"auto.offset.reset": "earliest"}}
        with httpx.stream("POST", f"{c.url}/query-stream", json=body, timeout=300,
                          headers={"Accept": "application/vnd.ksqlapi.delimited.v1"}) as response:
            assert response.status_code == 200
            lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
        assert sorted(row[1] for row in lines[1:]) == list(range(20))
        phase("CSAS, inserts, push query")

        # Exactly one owner, the same on every server.
        views = [s.queries() for s in servers]
        assert all(view == views[0] for view in views), views
        state_now, owner = views[0][query_id]
        assert state_now == "RUNNING" and owner in {s.host for s in servers}
        owning = next(s for s in servers if s.host == owner)
        others = [s for s in servers if s is not owning]

        # kill -9 of the owner in the middle of a burst of inserts through another server, and
        # of a burst of statements through itself.
        burst = threading.Thread(target=_insert, args=(others[0], range(20, 220)))
        acknowledged: list[str] = []
        statements = threading.Thread(target=_create_streams, args=(owning, service_id, acknowledged))
        burst.start()
        statements.start()
        time.sleep(1.5)
        owning.kill()
        statements.join()

        def moved() -> bool:
            found = others[1].queries()[query_id]
            return found[0] == "RUNNING" and found[1] in {s.host for s in others} and \
                others[0].queries()[query_id] == found

        failover = _until(moved, 180, "the query runs on a survivor")
        burst.join()
        new_owner = others[1].queries()[query_id][1]
        print(f"\nfailover after kill -9: {failover:.1f} s (query {query_id} {owner} -> {new_owner})")
        values = _values(bootstrap, f"out_{service_id}", 220)
        assert values == Counter(range(220)), {n: k for n, k in values.items() if k != 1} or set(range(220)) - set(values)
        phase("kill -9, failover, output exact")

        # The killed server comes back with the same metastore.
        owning.start()
        owning.wait_healthy()
        assert owning.metastore() == others[0].metastore() == others[1].metastore()
        streams = owning.metastore()[0]
        # every acknowledged statement is there; one whose answer the kill lost may be too
        assert {"OUT", "SRC", *acknowledged} <= set(streams) <= {"OUT", "SRC", *(f"D{i}" for i in range(200))}
        assert acknowledged, "the statement burst ran before the kill"
        print(f"statements acknowledged before the kill: {len(acknowledged)}; in the metastore: {len(streams) - 2}")
        _until(lambda: owning.queries()[query_id][0] == "RUNNING", 60, "the restarted server sees the query")
        phase("restart, identical metastores")

        # kill -9 of the metastore's owner (the single writer of UserDataSources) during a
        # burst of statements sent through another server, which forwards them to it.
        probe = MetastoreDatabase(bootstrap, service_id)
        writer_url = probe.owner_of(SOURCES)
        probe.close()
        writer = next(s for s in servers if s.url == writer_url)
        through = next(s for s in servers if s is not writer)
        forwarded: list[str] = []
        statements = threading.Thread(target=_create_streams, args=(through, service_id, forwarded, "E", 12.0))
        statements.start()
        time.sleep(1.5)
        writer.kill()
        statements.join()
        writer.start()
        writer.wait_healthy()
        views = [s.metastore() for s in servers]
        assert views[0] == views[1] == views[2], views
        created = {n for n in views[0][0] if n.startswith("E")}
        assert set(forwarded) <= created and forwarded, (forwarded, created)  # nothing acknowledged lost
        _until(lambda: all(s.queries()[query_id][0] == "RUNNING" for s in servers), 60, "the query runs")
        _insert(through, range(220, 225))
        assert _values(bootstrap, f"out_{service_id}", 225) == Counter(range(225))  # the query resumed, exact
        print(f"statements through a survivor while the metastore owner died: {len(forwarded)} acknowledged")
        phase("kill -9 of the metastore owner, identical views, query exact")

        # A zombie: the owner is paused past its session timeout while rows arrive, its query
        # moves, then it wakes up: its writes are fenced, it stops the query it lost.
        zombie = next(s for s in servers if s.host == _owner_of(servers, query_id))
        survivor = next(s for s in servers if s is not zombie)
        zombie.pause(True)
        _insert(survivor, range(225, 230))
        try:
            paused = _until(lambda: survivor.queries()[query_id][1] not in (zombie.host, None)
                            and survivor.queries()[query_id][0] == "RUNNING", 180, "the paused owner's query moved")
            _insert(survivor, range(230, 240))
        finally:
            zombie.pause(False)
        print(f"failover from a paused owner: {paused:.1f} s")
        phase("zombie")

        # The other two leave (SIGTERM): the query moves back to the restarted server.
        for server in others:
            assert server.stop() == 0, server.log.read_text()[-3000:]
        _until(lambda: owning.queries()[query_id] == ("RUNNING", owning.host), 180, "the query moved back")
        _until(lambda: owning.members() == [owning.host], 30, "only the restarted server is listed")
        _insert(owning, range(240, 260))
        values = _values(bootstrap, f"out_{service_id}", 260)
        assert values == Counter(range(260)), {n: k for n, k in values.items() if k != 1} or set(range(260)) - set(values)
        phase("SIGTERM of two, moved back, output exact")
    finally:
        print(f"cluster test phases (s since start): {'; '.join(phases)}")
        for server in servers:
            try:
                server.stop()
            except Exception:  # noqa: BLE001 - every server must get its stop
                pass
