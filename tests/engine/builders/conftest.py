"""Fixtures of the builder tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def plans_the_aggregates_without_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests about the aggregate versions before headers were forwarded: the planner plans
    them in place of the versions that forward headers (which build as they do, but for the
    headers). The builders are registered first, against the real step classes: registered
    after the swap, the newer version's builder would land on the older class."""
    from engine.builders.walker import _load_builders
    from engine.plan import steps_native as native

    _load_builders()
    for newer, older in (
        ("StreamAggregateV6", "StreamAggregateV4"), ("StreamAggregateV7", "StreamAggregateV5"),
        ("TableAggregateV4", "TableAggregateV2"), ("TableAggregateV5", "TableAggregateV3"),
    ):
        monkeypatch.setattr(native, newer, getattr(native, older))
