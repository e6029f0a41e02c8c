"""Hooks the QTT pytest plugin calls; implement them in a conftest."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.hookspec(firstresult=True)
def pytest_qtt_engine_factory(config: pytest.Config) -> Any:
    """Return ``factory(properties) -> engine`` for QTT items, or None for the default.

    Called once per session, before the first QTT case runs, so an implementation can set
    up shared state (for example one SparkSession) and close it in ``pytest_sessionfinish``.
    """
