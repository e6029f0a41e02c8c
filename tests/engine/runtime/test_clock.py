"""The per-task clock of the bounded operators: stream time and each side's time only grow."""

from __future__ import annotations

from engine.runtime.tasks import Clock


def test_stream_and_side_times_keep_their_maximum() -> None:
    clock = Clock()
    clock.advance(0, 10, 2)
    clock.advance(1, 4, 2)
    clock.advance(0, 5, 2)  # a late record on side 0
    assert clock.stream_time == 10
    assert clock.side_times == [10, 4]
