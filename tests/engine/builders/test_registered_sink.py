"""Sinks that write a registered schema's every field (``streamSinkV4``/``tableSinkV4``):
which fields a sink adds, with what, when the planner picks these versions."""

from __future__ import annotations

import json

import pytest

from engine.builders.registered_sink import ExtraField, RegisteredExtras, extra_fields
from engine.errors import QueryFailure
from engine.plan import types as T
from engine.plan.steps import Formats
from engine.planner.physical import writes_registered_schema

AVRO_TEXT = json.dumps({"type": "record", "name": "R", "fields": [
    {"name": "A", "type": "int"},
    {"name": "withDefault", "type": "int", "default": 50},
    {"name": "nullable", "type": ["null", "string"]},
    {"name": "required", "type": "double"},
]})
REGISTERED = (("A", T.INTEGER), ("withDefault", T.INTEGER), ("nullable", T.STRING), ("required", T.DOUBLE))


def test_avro_fields_take_their_default_else_null_when_nullable_else_are_required() -> None:
    assert extra_fields("AVRO", {}, AVRO_TEXT, REGISTERED, 1) == (
        ExtraField("withDefault", 50), ExtraField("nullable", None), ExtraField("required", None, required=True),
    )


def test_protobuf_fields_take_proto3_defaults_unless_nulls_have_a_representation() -> None:
    registered = (("A", T.INTEGER), ("S", T.STRING), ("N", T.BIGINT), ("F", T.BOOLEAN),
                  ("L", T.parse_type("ARRAY<STRING>")), ("M", T.parse_type("STRUCT<X INT>")))
    assert [f.fill for f in extra_fields("PROTOBUF", {}, "", registered, 1)] == ["", 0, False, [], None]
    optional = extra_fields("PROTOBUF", {"nullable_representation": "OPTIONAL"}, "", registered, 1)
    assert [f.fill for f in optional] == [None] * 5


def test_json_sr_fields_are_null_and_a_schema_without_extras_adds_nothing() -> None:
    assert extra_fields("JSON_SR", {}, "{}", REGISTERED, 2) == (ExtraField("nullable"), ExtraField("required"))
    assert extra_fields("AVRO", {}, AVRO_TEXT, REGISTERED, 4) == ()


def test_extras_are_added_to_a_record_a_tombstone_stays_null_and_a_required_one_stops_the_query() -> None:
    extras = RegisteredExtras("value", 3, (ExtraField("B", 7), ExtraField("C")))
    assert extras.apply({"A": 1}) == {"A": 1, "B": 7, "C": None}
    assert extras.apply(None) is None
    required = RegisteredExtras("value", 3, (ExtraField("B", 7), ExtraField("site", required=True)))
    with pytest.raises(QueryFailure, match=r"Unable to serialize record: field 'site' .*\(id 3\) is required"):
        required.apply({"A": 1})


def test_the_planner_picks_the_v4_sinks_only_for_a_format_with_a_schema_id() -> None:
    assert writes_registered_schema(Formats(key_format="KAFKA", value_format="AVRO", value_properties=(("schema_id", "2"),)))
    assert writes_registered_schema(Formats(key_format="AVRO", value_format="JSON", key_properties=(("schema_id", "1"),)))
    assert not writes_registered_schema(Formats(key_format="KAFKA", value_format="AVRO", value_properties=(("schema_full_name", "a.B"),)))
