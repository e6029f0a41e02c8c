"""Settings every kspark Kafka client shares."""

from __future__ import annotations

import logging
from typing import Any

from engine.kafka.security import security_for

# librdkafka logs connection failures on stderr many times a second; route them to this
# logger instead (silent unless the application configures logging).
LOG = logging.getLogger("engine.kafka.librdkafka")
LOG.addHandler(logging.NullHandler())


def client_config(bootstrap_servers: str, **settings: Any) -> dict[str, Any]:
    """A confluent-kafka client config for ``bootstrap_servers`` plus ``settings``, with the
    security set for that cluster (``engine.kafka.security.use_security``)."""
    security = security_for(bootstrap_servers).librdkafka()
    return {"bootstrap.servers": bootstrap_servers, "logger": LOG, **security, **settings}


def error_text(error: Any) -> str:
    """A confluent-kafka error (KafkaError, KafkaException or other) as one sentence."""
    inner = error.args[0] if hasattr(error, "args") and error.args else error
    text = inner.str() if hasattr(inner, "str") else str(inner)
    return text.rstrip(".")


def init_transactions(producer: Any, topic: str, timeout: float) -> None:
    """``producer.init_transactions``, without librdkafka's start-up stall.

    A new librdkafka producer asks for its transaction coordinator at once; when no broker
    connection is up yet (the bootstrap connection is being replaced by the broker's own),
    it retries on a fixed 500 ms timer. Two metadata requests first (the second over the
    broker's own connection) make ``init_transactions`` take tens of milliseconds instead:
    it matters where a new producer is made per statement (the command log).
    """
    producer.list_topics(topic, timeout=timeout)
    producer.list_topics(topic, timeout=timeout)
    producer.init_transactions(timeout)
