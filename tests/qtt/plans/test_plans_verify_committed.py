"""CI: `qtt plans verify` over the committed planned cases (replays on Spark)."""

from __future__ import annotations

from pathlib import Path

from qtt.plans.case_runs import CaseRuns
from qtt.plans.schema import SCHEMA_FILE
from qtt.plans.verify import verify

REPO = Path(__file__).resolve().parents[3]


def test_committed_planned_cases_replay_are_up_to_date_complete_and_match_the_schema(
    qtt_case_runs: CaseRuns,
) -> None:
    # Runs after the session's QTT cases (the plugin orders it): the latest version of each
    # case whose run was compared with it is not replayed a second time.
    report = verify(
        REPO / "planned_cases",
        [REPO / "tests" / "qtt_cases"],
        schema_path=REPO / SCHEMA_FILE,
        known_replays=qtt_case_runs.replays,
        known_up_to_date=qtt_case_runs.up_to_date,
    )
    assert report.replays, "no committed planned cases found"
    assert report.ok, report.render()
    print(report.summary())
