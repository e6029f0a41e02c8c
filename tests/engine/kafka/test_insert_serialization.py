"""INSERT VALUES on Kafka (``KafkaTopics.publish``): a key or value its format cannot write
fails the insert in ksqlDB's words, before anything is produced (no broker is needed)."""

from __future__ import annotations

import pytest

from engine.data.records import TopicRecord
from engine.errors import RecordSerdeError
from engine.hosting.application import KafkaTopics
from engine.plan import types as T
from engine.plan.schema import Column, Namespace
from engine.runtime.adapter import TopicCodec
from engine.serde import FormatInfo, SerdeFeatures, key_serde, value_serde

KEY = key_serde(FormatInfo("PROTOBUF_NOSR", {}), [Column("ID", T.INTEGER, Namespace.KEY)])
VALUE = value_serde(FormatInfo("PROTOBUF_NOSR", {}), [Column("V", T.INTEGER)], SerdeFeatures())
NOWHERE = "127.0.0.1:9"  # nothing is produced: the record fails before


def test_a_key_its_format_cannot_write_fails_the_insert() -> None:
    topics = KafkaTopics(NOWHERE, create=False)
    with pytest.raises(RecordSerdeError) as caught:
        topics.publish(TopicRecord("t", {"ID": True}, {"V": 1}, 0), TopicCodec(KEY, VALUE))
    assert str(caught.value) == "Could not serialize key"
    assert "a boolean is not an integer" in str(caught.value.__cause__)


def test_a_value_its_format_cannot_write_fails_the_insert_with_the_reason() -> None:
    topics = KafkaTopics(NOWHERE, create=False)
    with pytest.raises(RecordSerdeError) as caught:
        topics.publish(TopicRecord("t", {"ID": 1}, {"V": True}, 0), TopicCodec(KEY, VALUE))
    assert str(caught.value).startswith(
        "Could not serialize valueError serializing message to topic: t. Cannot write the PROTOBUF_NOSR value"
    )
