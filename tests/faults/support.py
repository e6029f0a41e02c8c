"""The fault tests' helpers: the broker and its proxy as one, a server client, and the checks."""

from __future__ import annotations

import json
import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from confluent_kafka import Producer

from engine.components.kspark_server import ServerProcess
from engine.components.toxiproxy import ProxiedBroker, Proxy
from engine.kafka.consume import read_topic


@dataclass
class FaultyKafka:
    """A broker, the proxy in front of it, and the faults a test applies to either."""

    broker: ProxiedBroker
    proxy: Proxy

    @property
    def direct(self) -> str:
        """The broker's own listener: the test's writes and checks, never faulted."""
        return self.broker.bootstrap_servers

    @property
    def proxied(self) -> str:
        """The proxy: kspark's bootstrap servers."""
        return self.broker.proxied_bootstrap_servers

    def stop(self) -> None:
        self.broker.stop()

    def start(self) -> None:
        self.broker.start()
        self.broker.wait_ready(timeout=120)

    def pause(self, paused: bool) -> None:
        pid = self.broker.running_pid()
        assert pid is not None, "the broker is not running"
        os.kill(pid, signal.SIGSTOP if paused else signal.SIGCONT)


class Server(ServerProcess):
    """A ``kspark server`` with the calls the fault tests make."""

    def ksql(self, text: str, timeout: float = 120, **properties: str) -> httpx.Response:
        return httpx.post(f"{self.url}/ksql", json={"ksql": text, "streamsProperties": properties}, timeout=timeout)

    def ok(self, text: str, **properties: str) -> list[dict[str, Any]]:
        answer = self.ksql(text, **properties)
        assert answer.status_code == 200, answer.text
        return list(answer.json())

    def query_states(self) -> dict[str, str]:
        [listed] = self.ok("SHOW QUERIES;")
        return {q["id"]: q["state"] for q in listed["queries"]}

    def metastore(self) -> tuple[list[str], list[str], list[str]]:
        """Its streams, tables and persistent queries (a push query open on it is its own)."""
        streams, tables, queries = self.ok("LIST STREAMS; LIST TABLES; LIST QUERIES;")
        persistent = [q["id"] for q in queries["queries"] if q.get("queryType") != "PUSH"]
        return (sorted(s["name"] for s in streams["streams"]), sorted(t["name"] for t in tables["tables"]),
                sorted(persistent))


def produce(bootstrap: str, topic: str, numbers: range) -> None:
    """Records {"N": n} keyed k<n % 7>, written and acknowledged by every replica."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "log_level": 0})
    for n in numbers:
        producer.produce(topic, key=f"k{n % 7}".encode(), value=json.dumps({"N": n}).encode())
    assert producer.flush(60) == 0, f"records of {numbers} not delivered to {topic}"


def until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until ``condition()`` holds; fails naming ``what`` after ``timeout``."""
    started = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - started
        except Exception:  # noqa: BLE001 - a call that fails while the fault lasts is a no
            pass
        assert time.monotonic() - started < timeout, f"timed out after {timeout} s waiting until {what}"
        time.sleep(0.5)


def values(bootstrap: str, topic: str, field: str = "N") -> Counter[int]:
    """How many times each value of ``field`` is in ``topic`` (read_committed)."""
    return Counter(int(json.loads(r.value)[field]) for r in read_topic(bootstrap, topic, timeout=10)
                   if r.value is not None)


def exactly_once(bootstrap: str, topic: str, expected: range, timeout: float = 600) -> tuple[float, Counter[int]]:
    """Wait until ``topic`` holds every value of ``expected``; the time it took and the counts
    after a pause (anything repeated arrives meanwhile)."""
    seen: Counter[int] = Counter()

    def complete() -> bool:
        seen.clear()
        seen.update(values(bootstrap, topic))
        return set(expected) <= set(seen)

    try:
        took = until(complete, timeout, f"{topic} holds {len(expected)} values")
    except AssertionError as exc:
        missing = sorted(set(expected) - set(seen))
        raise AssertionError(f"{exc}; missing {len(missing)}: {missing[:20]}") from None
    time.sleep(3)
    return took, values(bootstrap, topic)


def assert_exact(counts: Counter[int], expected: range) -> None:
    """Every expected value once, nothing else: no loss, no duplicate."""
    lost = sorted(set(expected) - set(counts))
    duplicated = sorted(n for n, c in counts.items() if c > 1)
    extra = sorted(set(counts) - set(expected))
    assert (lost, duplicated, extra) == ([], [], []), f"lost {lost}, duplicated {duplicated}, unexpected {extra}"


def clear_error(answer: httpx.Response) -> str:
    """The message of an error answer, checked to be one a client can act on: a ksqlDB error
    body with a message, no Python traceback, not a 500 of an unexpected exception."""
    assert answer.status_code >= 400, f"expected an error, got {answer.status_code}: {answer.text[:500]}"
    body = answer.json()
    message = body["message"] if isinstance(body, dict) else str(body)
    assert message and "Traceback" not in message, answer.text
    assert "error_code" in body or "@type" in body, answer.text
    return str(message)
