"""PRINT over the REST API: a topic's records as PRINT lines, read on a thread of their own.

    printed = PrintedTopic(bootstrap, "orders", from_beginning=True, interval=1, limit=3).start()
    while (line := printed.next_line()) is not PrintedTopic.END:
        ...   # None: a poll found nothing (ksqlDB's /query writes an empty line then)
    printed.stop.set()   # ends the reading within a poll

The lines are ``engine.kafka.printing``'s: the key and value format lines before the first
record, then one line a shown record. A failure while reading ends the lines with its message,
as ksqlDB's PRINT writes an exception into the stream.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from engine.errors import KafkaClientError
from engine.kafka.printing import print_topic

FORMAT_PREFIXES = ("Key format: ", "Value format: ")


class PrintedTopic:
    """One PRINT being streamed: its lines in a queue filled by a reader thread."""

    END: Any = object()

    def __init__(self, bootstrap_servers: str, topic: str, *, from_beginning: bool, interval: int,
                 limit: int | None, poll: float = 0.5) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.from_beginning = from_beginning
        self.interval = interval
        self.limit = limit
        self.poll = poll
        self.stop = threading.Event()
        self._lines: queue.Queue[Any] = queue.Queue(maxsize=1000)
        self._thread = threading.Thread(target=self._read, name=f"print-{topic}", daemon=True)

    def start(self) -> PrintedTopic:
        self._thread.start()
        return self

    def _read(self) -> None:
        try:
            for line in print_topic(self.bootstrap_servers, self.topic, from_beginning=self.from_beginning,
                                    interval=self.interval, limit=self.limit, stop=self.stop.is_set):
                if not self._put(line):
                    return
        except KafkaClientError as exc:
            self._put(str(exc).splitlines()[0])
        finally:
            self._put(self.END, force=True)

    def _put(self, item: Any, *, force: bool = False) -> bool:
        while force or not self.stop.is_set():
            try:
                self._lines.put(item, timeout=self.poll)
                return True
            except queue.Full:
                if force:
                    return False
        return False

    def next_line(self) -> Any:
        """The next line, None when none came within a poll, or ``END``."""
        try:
            return self._lines.get(timeout=self.poll)
        except queue.Empty:
            return None

    @staticmethod
    def is_format_line(line: str) -> bool:
        """True for ``Key format: ...`` and ``Value format: ...`` (/query-stream leaves them out)."""
        return line.startswith(FORMAT_PREFIXES)
