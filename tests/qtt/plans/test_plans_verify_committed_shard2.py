"""CI: `qtt plans verify --shard 2/2` over the committed planned cases: the second half of
the replays and up-to-date checks (a file of its own, so that the other xdist worker runs it)."""

from __future__ import annotations

from collections.abc import Callable


def test_the_second_half_of_the_committed_planned_cases_replay_and_are_up_to_date(
    verify_committed: Callable[[int], None],
) -> None:
    verify_committed(2)
