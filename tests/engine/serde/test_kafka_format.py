from __future__ import annotations

import struct

import pytest

from engine.errors import RecordSerdeError
from engine.plan.schema import Column, LogicalSchema
from engine.serde import FormatInfo, SerdeFeatures, key_serde, value_serde
from engine.serde.kafka_format import KafkaSerde

KAFKA = FormatInfo("KAFKA")


def cols(text: str) -> tuple[Column, ...]:
    return LogicalSchema.parse(text).columns


def test_value_is_the_bare_field_even_by_default() -> None:
    serde = value_serde(KAFKA, cols("FOO INT"), SerdeFeatures())
    assert serde.deserialize(1) == {"FOO": 1}
    assert serde.serialize({"FOO": 1}) == 1
    assert serde.deserialize(None) is None


@pytest.mark.parametrize(
    ("type_text", "qtt", "raw"),
    [
        ("INT", -2, struct.pack(">i", -2)),
        ("BIGINT", 10_000_000_000, struct.pack(">q", 10_000_000_000)),
        ("DOUBLE", 2.5, struct.pack(">d", 2.5)),
        ("STRING", "héllo", "héllo".encode()),
        ("BYTES", "aGk=", b"hi"),
    ],
)
def test_bytes_forms_match_kafka_serializers(type_text: str, qtt: object, raw: bytes) -> None:
    serde = key_serde(KAFKA, cols(f"K {type_text} KEY"))
    assert serde.to_bytes(qtt) == raw
    assert serde.from_bytes(raw) == qtt


def test_wrong_byte_length_raises() -> None:
    serde = key_serde(KAFKA, cols("K INT KEY"))
    with pytest.raises(RecordSerdeError, match="expected 4 bytes, got 8"):
        serde.from_bytes(b"\x00" * 8)


def test_bytes_column_reads_base64_qtt_form() -> None:
    serde = value_serde(KAFKA, cols("B BYTES"), SerdeFeatures())
    assert serde.deserialize("dmFy") == {"B": b"var"}
    assert serde.serialize({"B": b"var"}) == "dmFy"


def test_out_of_range_int_raises() -> None:
    serde = key_serde(KAFKA, cols("K INT KEY"))
    with pytest.raises(RecordSerdeError, match="out of range"):
        serde.deserialize(2**40)


def test_keyless_source_ignores_key_data() -> None:
    serde = key_serde(KAFKA, ())
    assert serde.deserialize("ignored") == {}
    assert serde.serialize({}) is None


def test_none_format_ignores_data_and_writes_null() -> None:
    serde = key_serde(FormatInfo("NONE"), ())
    assert serde.deserialize("whatever") == {}
    assert serde.deserialize(None) is None
    assert serde.serialize({"X": 1}) is None
    assert serde.to_bytes("x") is None


def test_the_serde_itself_refuses_two_columns_or_a_type_without_a_kafka_form() -> None:
    # value_serde refuses these before (AnalysisError); the serde checks again when built directly.
    with pytest.raises(RecordSerdeError, match=r"needs exactly one INTEGER, BIGINT, DOUBLE, STRING or BYTES column, got \['`A` INTEGER', '`B` INTEGER'\]"):
        KafkaSerde(KAFKA, cols("A INT, B INT"), False, False)
    with pytest.raises(RecordSerdeError, match=r"got \['`F` BOOLEAN'\]"):
        KafkaSerde(KAFKA, cols("F BOOLEAN"), False, False)
