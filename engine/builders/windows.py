"""Window arithmetic of Kafka Streams: which time windows hold a timestamp, and session merging."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def time_windows_for(ts: int, size_ms: int, advance_ms: int) -> list[tuple[int, int]]:
    """The (start, end) of every hopping/tumbling window holding ``ts``, by ascending start."""
    start = (max(0, ts - size_ms + advance_ms) // advance_ms) * advance_ms
    out = []
    while start <= ts:
        out.append((start, start + size_ms))
        start += advance_ms
    return out


def overlapping_sessions(
    sessions: Sequence[tuple[Any, ...]], ts: int, gap_ms: int
) -> list[int]:
    """Indexes of the sessions (start, end, ...) a record at ``ts`` merges with, by (end, start)."""
    hits = [
        i for i, s in enumerate(sessions)
        if s[1] >= ts - gap_ms and s[0] <= ts + gap_ms
    ]
    return sorted(hits, key=lambda i: (sessions[i][1], sessions[i][0]))
