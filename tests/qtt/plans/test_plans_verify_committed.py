"""CI: `qtt plans verify` over the committed planned cases (replays on Spark)."""

from __future__ import annotations

from pathlib import Path

from qtt.plans.schema import SCHEMA_FILE
from qtt.plans.verify import verify

REPO = Path(__file__).resolve().parents[3]


def test_committed_planned_cases_replay_are_up_to_date_complete_and_match_the_schema() -> None:
    report = verify(
        REPO / "planned_cases",
        [REPO / "tests" / "qtt_cases"],
        schema_path=REPO / SCHEMA_FILE,
    )
    assert report.replays, "no committed planned cases found"
    assert report.ok, report.render()
