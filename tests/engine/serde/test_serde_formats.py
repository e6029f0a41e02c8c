from __future__ import annotations

import pickle

import pytest

from engine.errors import AnalysisError
from engine.plan.schema import Column, LogicalSchema
from engine.serde import (
    FormatInfo,
    SerdeFeatures,
    check_key_schema,
    check_value_schema,
    key_serde,
    parse_delimiter,
    value_serde,
)


def cols(text: str) -> tuple[Column, ...]:
    return LogicalSchema.parse(text).columns


def test_format_info_parse_upper_cases_and_rejects_unknown_names() -> None:
    assert FormatInfo.parse("json") == FormatInfo("JSON")
    assert FormatInfo("Delimited", {"DELIMITER": "|"}).properties == {"delimiter": "|"}
    with pytest.raises(AnalysisError, match="^Unknown format: XML\n"):
        FormatInfo.parse("xml")


def test_format_info_is_hashable_with_properties() -> None:
    a = FormatInfo("DELIMITED", {"delimiter": "|"})
    b = FormatInfo("delimited", {"DELIMITER": "|"})
    assert a == b and hash(a) == hash(b)
    assert len({a, b, FormatInfo("JSON")}) == 2


@pytest.mark.parametrize(
    ("text", "expected"), [(",", ","), ("|", "|"), ("TAB", "\t"), ("space", " ")]
)
def test_parse_delimiter_accepts_single_characters_and_names(text: str, expected: str) -> None:
    assert parse_delimiter(text) == expected


def test_parse_delimiter_rejects_multi_character_text() -> None:
    with pytest.raises(AnalysisError, match="Invalid delimiter value: '<~>'"):
        parse_delimiter("<~>")


@pytest.mark.parametrize("text", ["", " ", "\t"])
def test_parse_delimiter_rejects_blank_text(text: str) -> None:
    with pytest.raises(AnalysisError, match="Delimiter cannot be empty"):
        parse_delimiter(text)


def test_json_rejects_a_delimiter_property() -> None:
    with pytest.raises(
        AnalysisError, match=r"JSON does not support the following configs: \[delimiter\]"
    ):
        check_value_schema(FormatInfo("JSON", {"delimiter": "|"}), cols("A INT"), SerdeFeatures())


def test_map_in_key_is_rejected_for_every_format() -> None:
    for name in ("JSON", "KAFKA", "DELIMITED", "AVRO"):
        with pytest.raises(AnalysisError) as info:
            check_key_schema(FormatInfo(name), cols("K ARRAY<MAP<STRING, INT>> KEY"))
        assert "Map keys, including types that contain maps, are not supported" in str(info.value)
        assert "Key column name: `K`. Column type: ARRAY<MAP<STRING, INTEGER>>." in str(info.value)


def test_kafka_key_with_two_columns_names_both() -> None:
    with pytest.raises(AnalysisError) as info:
        check_key_schema(FormatInfo("KAFKA"), cols("A INT KEY, B INT KEY"))
    text = str(info.value)
    assert text.startswith("Key format does not support schema.\nformat: KAFKA\n")
    assert (
        "The 'KAFKA' format only supports a single field. Got: [`A` INTEGER KEY, `B` INTEGER KEY]"
        in text
    )


@pytest.mark.parametrize("type_text", ["BOOLEAN", "DECIMAL(4, 2)", "ARRAY<INT>", "STRUCT<A INT>"])
def test_kafka_rejects_unsupported_value_types(type_text: str) -> None:
    base = type_text.split("(")[0].split("<")[0]
    with pytest.raises(AnalysisError, match=f"The 'KAFKA' format does not support type '{base}'"):
        check_value_schema(FormatInfo("KAFKA"), cols(f"V {type_text}"), SerdeFeatures())


def test_kafka_accepts_its_primitive_types() -> None:
    for type_text in ("INT", "BIGINT", "DOUBLE", "STRING", "BYTES"):
        check_value_schema(FormatInfo("KAFKA"), cols(f"V {type_text}"), SerdeFeatures())
        check_key_schema(FormatInfo("KAFKA"), cols(f"K {type_text} KEY"))


def test_delimited_rejects_containers_naming_the_column() -> None:
    with pytest.raises(AnalysisError) as info:
        check_key_schema(FormatInfo("DELIMITED"), cols("K STRUCT<F DOUBLE> KEY"))
    assert "The 'DELIMITED' format does not support type 'STRUCT', column: `K`" in str(info.value)
    with pytest.raises(AnalysisError, match="The 'DELIMITED' format does not support type 'ARRAY'"):
        check_value_schema(FormatInfo("DELIMITED"), cols("V ARRAY<INT>"), SerdeFeatures())


def test_none_format_allows_no_columns() -> None:
    check_key_schema(FormatInfo("NONE"), ())
    with pytest.raises(
        AnalysisError,
        match=r"can only be used when no columns are defined. Got: \[`K` STRING KEY\]",
    ):
        check_key_schema(FormatInfo("NONE"), cols("K STRING KEY"))
    with pytest.raises(AnalysisError, match=r"Got: \[`FOO` INTEGER\]"):
        check_value_schema(FormatInfo("NONE"), cols("FOO INT"), SerdeFeatures())


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        ("JSON", "JSON only supports MAP types with STRING keys"),
        ("JSON_SR", "JSON only supports MAP types with STRING keys"),
        ("PROTOBUF", "PROTOBUF format only supports MAP types with STRING keys"),
        ("AVRO", "^Value format does not support schema.\nformat: AVRO\n.*\nreason: Avro only supports MAPs with STRING keys$"),
    ],
)
def test_non_string_map_keys_are_rejected_in_values(fmt: str, message: str) -> None:
    with pytest.raises(AnalysisError, match=message):
        check_value_schema(FormatInfo(fmt), cols("V STRUCT<M MAP<INT, STRING>>"), SerdeFeatures())


@pytest.mark.parametrize("wrap", [True, False])
def test_wrap_single_value_needs_a_single_column(wrap: bool) -> None:
    with pytest.raises(
        AnalysisError, match="'WRAP_SINGLE_VALUE' is only valid for single-field value schemas"
    ):
        check_value_schema(FormatInfo("JSON"), cols("A INT, B INT"), SerdeFeatures(wrap))


@pytest.mark.parametrize(
    ("fmt", "wrap", "text"),
    [("KAFKA", True, "true"), ("DELIMITED", True, "true"), ("PROTOBUF", False, "false")],
)
def test_formats_reject_the_wrapping_they_cannot_do(fmt: str, wrap: bool, text: str) -> None:
    with pytest.raises(
        AnalysisError, match=f"Format '{fmt}' does not support 'WRAP_SINGLE_VALUE' set to '{text}'."
    ):
        check_value_schema(FormatInfo(fmt), cols("A INT"), SerdeFeatures(wrap))


def test_wrapping_allowed_where_the_format_supports_it() -> None:
    check_value_schema(FormatInfo("JSON"), cols("A INT"), SerdeFeatures(False))
    check_value_schema(FormatInfo("AVRO"), cols("A INT"), SerdeFeatures(True))
    check_value_schema(FormatInfo("KAFKA"), cols("A INT"), SerdeFeatures(False))
    check_value_schema(FormatInfo("PROTOBUF"), cols("A INT"), SerdeFeatures(True))


def test_serde_factories_refuse_schemas_the_format_cannot_carry() -> None:
    with pytest.raises(AnalysisError, match="KAFKA"):
        value_serde(FormatInfo("KAFKA"), cols("A INT, B INT"), SerdeFeatures())
    with pytest.raises(AnalysisError, match="DELIMITED"):
        key_serde(FormatInfo("DELIMITED"), cols("K ARRAY<INT> KEY"))


def test_value_serde_skips_header_columns() -> None:
    serde = value_serde(FormatInfo("JSON"), cols("A INT, H BYTES HEADER('h')"), SerdeFeatures())
    assert serde.deserialize({"A": 1, "H": "eA=="}) == {"A": 1}


@pytest.mark.parametrize(
    ("fmt", "key_text", "data"),
    [
        ("JSON", "K INT KEY, K2 STRING KEY", {"K": 1, "K2": "x"}),
        ("DELIMITED", "K INT KEY, K2 STRING KEY", "1,x"),
        ("KAFKA", "K BIGINT KEY", 5),
        ("PROTOBUF", "K STRING KEY", {"K": "x"}),
        ("NONE", "", None),
    ],
)
def test_serdes_survive_pickling(fmt: str, key_text: str, data: object) -> None:
    serde = key_serde(FormatInfo(fmt), cols(key_text) if key_text else ())
    copy = pickle.loads(pickle.dumps(serde))
    assert type(copy) is type(serde)
    assert copy.deserialize(data) == serde.deserialize(data)


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        ("JSON", "Failed to deserialize value from topic: t. The value bytes are not valid JSON."),
        ("JSON_SR", "Failed to deserialize value from topic: t. The value bytes are not valid JSON."),
        ("KAFKA", "Error deserializing KAFKA message from topic: t"),
        ("DELIMITED", "Error deserializing delimited"),
        ("AVRO", "Error deserializing message from topic: t"),
        ("PROTOBUF", "Error deserializing message from topic: t"),
        ("PROTOBUF_NOSR", "Error deserializing message from topic: t"),
    ],
)
def test_a_record_that_cannot_be_read_is_logged_in_the_words_of_ksqldbs_deserializer(fmt: str, message: str) -> None:
    from engine.serde.formats import deserialization_failure

    cause = "The value bytes are not valid JSON."
    assert deserialization_failure(fmt, "value", "t", cause) == message
