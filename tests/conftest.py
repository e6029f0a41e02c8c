"""Shared fixtures: one SparkSession for the whole test run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from engine.runtime.session import get_spark, stop_spark


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The engine's shared local SparkSession (local[2], AQE off, UTC)."""
    yield get_spark()
    stop_spark()
