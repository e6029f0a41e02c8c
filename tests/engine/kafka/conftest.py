"""Fixtures for the Kafka helpers: an admin on the session broker and fresh topic names."""

from __future__ import annotations

import re
import uuid

import pytest

from engine.components.broker import Broker
from engine.kafka import TopicAdmin


@pytest.fixture
def bootstrap(kafka_broker: Broker) -> str:
    return kafka_broker.bootstrap_servers


@pytest.fixture
def admin(bootstrap: str) -> TopicAdmin:
    return TopicAdmin(bootstrap, timeout=20)


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses (not created)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", request.node.name)[:80]
    return f"{name}-{uuid.uuid4().hex[:8]}"
