"""The committed-tree verify, split in two test files so that pytest-xdist's two workers
(``--dist loadfile``) replay half of the saved versions each at the end of the run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from qtt.plans.case_runs import CaseRuns
from qtt.plans.schema import SCHEMA_FILE
from qtt.plans.verify import verify

REPO = Path(__file__).resolve().parents[3]
SHARDS = 2


@pytest.fixture
def verify_committed(qtt_case_runs: CaseRuns) -> Callable[[int], None]:
    """``qtt plans verify --shard K/2`` over the committed tree, as an assertion.

    The test runs after the session's QTT cases (the plugin orders it): the latest version of
    each case whose run was compared with it is not replayed a second time.
    """

    def check(shard: int) -> None:
        report = verify(
            REPO / "planned_cases",
            [REPO / "tests" / "qtt_cases"],
            schema_path=REPO / SCHEMA_FILE,
            known_replays=qtt_case_runs.replays,
            known_up_to_date=qtt_case_runs.up_to_date,
            shard=(shard, SHARDS),
        )
        assert report.replays, f"no committed planned cases found for shard {shard}/{SHARDS}"
        assert report.ok, report.render()
        print(report.summary())

    return check
