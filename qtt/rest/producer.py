"""Input records produced with Kafka's Java client, in one long-lived JVM per run.

    with JavaInputProducer.open(bootstrap_servers, lib, log) as producer:
        partition, offset = producer.send("orders", key=b"k", value=b"{}", timestamp=0)

librdkafka (under confluent-kafka) reads a timestamp of 0 as "now", and REST QTT cases feed
records at timestamp 0; the Java client writes every timestamp as given. ``java/
RestInputProducer.java`` runs in Java's source-file mode with the Kafka broker's jars (the
ones ``engine.components.broker`` fetches) on its class path, reads one record per line and
answers each once the broker acknowledged it.
"""

from __future__ import annotations

import base64
import contextlib
import queue
import shutil
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from engine.data.records import Header
from qtt.rest.processes import die_with_parent, stop_process, tail

SOURCE = Path(__file__).with_name("java") / "RestInputProducer.java"


class ProducerError(Exception):
    """The Java producer could not start or could not write a record."""


def _b64(data: bytes | None) -> str:
    return "-" if data is None else base64.b64encode(data).decode("ascii")


def encode_line(
    topic: str,
    *,
    partition: int | None,
    timestamp: int | None,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> str:
    """One record in the producer's line protocol (see the Java source)."""
    if "\t" in topic or "\n" in topic:
        raise ProducerError(f"Topic name {topic!r} holds a tab or a newline.")
    header_text = ",".join(f"{_b64(h.key.encode('utf-8'))}:{_b64(h.value)}" for h in headers)
    fields = [
        topic,
        "-" if partition is None else str(partition),
        "-" if timestamp is None else str(timestamp),
        _b64(key),
        _b64(value),
        header_text,
    ]
    return "\t".join(fields) + "\n"


class JavaInputProducer:
    """The Java producer process; ``send`` waits for each record's acknowledgement."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self._process = process
        self._log = log
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, name="qtt-rest-producer", daemon=True).start()

    @classmethod
    @contextlib.contextmanager
    def open(
        cls, bootstrap_servers: str, lib: Path, log: Path, *, timeout: float = 60.0
    ) -> Iterator[JavaInputProducer]:
        """Start the producer against ``bootstrap_servers``; stopped when the block ends."""
        java = shutil.which("java")
        if java is None:
            raise ProducerError("Java is not installed: the input producer needs 'java' on PATH.")
        with open(log, "wb") as err:
            process = subprocess.Popen(
                [java, "-Xmx128m", "-cp", f"{lib}/*", str(SOURCE), bootstrap_servers],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                preexec_fn=die_with_parent,
            )
        producer = cls(process, log)
        try:
            ready = producer._next_line(timeout)
            if ready != "READY":
                raise ProducerError(
                    f"The Java input producer did not start: {ready or tail(log) or 'no output'}"
                )
            yield producer
        finally:
            producer.close()

    def _pump(self) -> None:
        assert self._process.stdout is not None
        for raw in self._process.stdout:
            self._lines.put(raw.decode("utf-8", errors="replace").rstrip("\n"))
        self._lines.put(None)

    def _next_line(self, timeout: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def _ask(self, line: str, timeout: float) -> str | None:
        """Write ``line`` to the process; its answer, or None after ``timeout`` seconds."""
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(line.encode("utf-8"))
            stdin.flush()
        except OSError:
            raise ProducerError(
                f"The Java input producer has stopped: {tail(self._log) or 'no output'}"
            ) from None
        return self._next_line(timeout)

    def send(
        self,
        topic: str,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Sequence[Header] = (),
        timeout: float = 60.0,
    ) -> tuple[int, int]:
        """Write one record; its ``(partition, offset)`` once acknowledged."""
        line = encode_line(
            topic, partition=partition, timestamp=timestamp, key=key, value=value, headers=headers
        )
        answer = self._ask(line, timeout)
        if answer is None:
            stop_process(self._process, timeout=5)  # a late answer would answer the next record
            raise ProducerError(
                f"The Java input producer gave no answer for a record to topic '{topic}' "
                f"within {timeout:.0f} s: {tail(self._log) or 'no output'}"
            )
        if answer.startswith("OK "):
            _, partition_text, offset_text = answer.split()
            return int(partition_text), int(offset_text)
        raise ProducerError(f"Cannot produce to topic '{topic}': {answer.removeprefix('ERR ')}")

    def reset(self, timeout: float = 60.0) -> None:
        """Open a new Kafka producer in the process, which forgets every topic's metadata
        (after topics were deleted: see ``RestInputProducer.java``)."""
        answer = self._ask("RESET\n", timeout)
        if answer != "READY":
            raise ProducerError(
                f"The Java input producer did not start again: {answer or tail(self._log) or 'no output'}"
            )

    def close(self) -> None:
        if self._process.stdin is not None:
            with contextlib.suppress(OSError):
                self._process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=10)
        stop_process(self._process, timeout=5)
