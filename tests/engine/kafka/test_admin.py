"""Topic administration against a real broker."""

from __future__ import annotations

import time

import pytest

from engine.errors import KafkaClientError
from engine.kafka import TopicAdmin, check_connection


def test_a_created_topic_exists_with_its_partitions_and_configs(admin: TopicAdmin, topic: str) -> None:
    assert not admin.topic_exists(topic)
    admin.create_topic(topic, partitions=3, configs={"cleanup.policy": "compact"})
    assert admin.topic_exists(topic)
    assert admin.partition_count(topic) == 3
    assert admin.partition_counts()[topic] == 3
    assert admin.topic_config(topic)["cleanup.policy"] == "compact"
    assert topic in admin.list_topics()


def test_internal_topics_are_listed_only_on_request(admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic)
    assert all(not name.startswith("__") for name in admin.list_topics())
    assert set(admin.list_topics()) <= set(admin.list_topics(internal=True))


def test_creating_an_existing_topic_is_an_error_unless_allowed(admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic, partitions=2)
    with pytest.raises(KafkaClientError, match=f"Topic '{topic}' already exists."):
        admin.create_topic(topic)
    admin.create_topic(topic, partitions=5, exist_ok=True)
    assert admin.partition_count(topic) == 2


def test_an_invalid_topic_is_refused_naming_it(admin: TopicAdmin) -> None:
    with pytest.raises(KafkaClientError, match="Cannot create topic 'bad name!'"):
        admin.create_topic("bad name!")
    with pytest.raises(KafkaClientError, match="Cannot create topic 't': partitions must be at least 1, got 0."):
        admin.create_topic("t", partitions=0)


def test_a_deleted_topic_is_gone(admin: TopicAdmin, topic: str) -> None:
    admin.create_topic(topic)
    admin.delete_topic(topic)
    assert not admin.topic_exists(topic)
    with pytest.raises(KafkaClientError, match=f"Topic '{topic}' does not exist."):
        admin.delete_topic(topic)
    admin.delete_topic(topic, missing_ok=True)


def test_a_missing_topic_has_no_partition_count_or_config(admin: TopicAdmin, topic: str) -> None:
    with pytest.raises(KafkaClientError, match=f"Topic '{topic}' does not exist."):
        admin.partition_count(topic)
    with pytest.raises(KafkaClientError, match=f"Topic '{topic}' does not exist."):
        admin.topic_config(topic)


def test_the_connection_check_passes_on_a_running_broker(bootstrap: str) -> None:
    check_connection(bootstrap, timeout=10)


def test_an_unreachable_broker_fails_in_bounded_time_naming_the_address() -> None:
    started = time.monotonic()
    with pytest.raises(KafkaClientError, match=r"Cannot reach the Kafka broker at 127\.0\.0\.1:1 within 2 s"):
        check_connection("127.0.0.1:1", timeout=2)
    assert time.monotonic() - started < 10


def test_clients_racing_to_create_a_topic_all_see_it_at_once(bootstrap: str, topic: str) -> None:
    """A client whose create finds the topic just made by another waits until its own
    metadata shows it: reading its partitions next never says it does not exist."""
    from concurrent.futures import ThreadPoolExecutor

    admins = [TopicAdmin(bootstrap) for _ in range(4)]
    names = [f"{topic}_{n}" for n in range(15)]

    def create_and_count(admin: TopicAdmin, name: str) -> int:
        admin.create_topic(name, 2, exist_ok=True)
        return admin.partition_count(name)

    with ThreadPoolExecutor(max_workers=8) as pool:
        counts = list(pool.map(lambda job: create_and_count(*job), [(a, n) for n in names for a in admins]))
    assert counts == [2] * len(names) * len(admins)
