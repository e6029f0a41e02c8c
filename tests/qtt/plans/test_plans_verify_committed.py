"""CI: `qtt plans verify --shard 1/2` over the committed planned cases (replays on Spark):
the first half of the replays and up-to-date checks, orphans, completeness and the schema.
``test_plans_verify_committed_shard2.py`` does the other half."""

from __future__ import annotations

from collections.abc import Callable


def test_committed_planned_cases_replay_are_up_to_date_complete_and_match_the_schema(
    verify_committed: Callable[[int], None],
) -> None:
    verify_committed(1)
