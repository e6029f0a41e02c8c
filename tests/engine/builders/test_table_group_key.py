"""Table aggregation's first pass: a grouping expression that fails logs the row's query
and step to the processing log and drops the row from every group."""

from __future__ import annotations

import logging

import pytest

from engine.builders.aggregate import TableGroupByHandler
from engine.builders.context import PROCESSING_LOG
from engine.errors import EvaluationError


def _failing(row: dict) -> object:
    raise EvaluationError("boom")


def test_a_failing_grouping_expression_is_logged_with_query_and_step(caplog: pytest.LogCaptureFixture) -> None:
    handler = TableGroupByHandler([("G", _failing)], ["V"], "CTAS_T_0", "Aggregate/GroupBy")
    with caplog.at_level(logging.WARNING, logger=PROCESSING_LOG.name):
        assert handler.group_key({"V": 1}) is None
    assert "CTAS_T_0 Aggregate/GroupBy: boom" in caplog.text
    assert handler.group_key({"V": 1}) is None
