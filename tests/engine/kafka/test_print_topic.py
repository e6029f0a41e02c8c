"""PRINT on a real broker: formatted records from the beginning, up to a limit."""

from __future__ import annotations

import pytest

from engine.errors import KafkaClientError
from engine.kafka import ProducerRecord, TopicAdmin, produce
from engine.kafka.printing import print_topic


def test_print_from_beginning_with_a_limit_shows_that_many_records_and_ends(
    bootstrap: str, admin: TopicAdmin, topic: str
) -> None:
    admin.create_topic(topic)
    produce(bootstrap, topic, [
        ProducerRecord(key=f"k{i}".encode(), value=f'{{"N":{i}}}'.encode(), timestamp=1_000 + i) for i in range(5)
    ])
    lines = list(print_topic(bootstrap, topic, from_beginning=True, interval=2, limit=2))
    assert lines == [
        "Key format: KAFKA_STRING",
        "Value format: JSON or KAFKA_STRING",
        'rowtime: 1970/01/01 00:00:01.000 Z, key: k0, value: {"N":0}, partition: 0',
        'rowtime: 1970/01/01 00:00:01.002 Z, key: k2, value: {"N":2}, partition: 0',
    ]


def test_an_unquoted_topic_name_finds_the_topic_whatever_its_case(
    bootstrap: str, admin: TopicAdmin, topic: str
) -> None:
    admin.create_topic(topic)
    produce(bootstrap, topic, [ProducerRecord(value=b"v", timestamp=5)])
    lines = list(print_topic(bootstrap, topic.upper(), from_beginning=True, limit=1))
    assert lines[-1] == "rowtime: 1970/01/01 00:00:00.005 Z, key: <null>, value: v, partition: 0"


def test_printing_a_missing_topic_is_an_error_naming_it(bootstrap: str, topic: str) -> None:
    with pytest.raises(KafkaClientError, match=f"Topic '{topic}' does not exist"):
        list(print_topic(bootstrap, topic, limit=1))
