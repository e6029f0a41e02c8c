"""A replay's records through their topics' Kafka bytes (qtt.plans.wire), without Spark."""

from __future__ import annotations

import decimal
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from engine.data.records import TopicRecord, Window
from engine.errors import RecordSerdeError
from engine.facade.api import FormatDescription, SourceInfo
from engine.plan.schema import LogicalSchema
from engine.serde.registry import WireSerde, registry_client
from qtt.plans.wire import (
    WireError,
    inputs_through_bytes,
    outputs_through_bytes,
    source_format_refusals,
)


def _source(
    schema: str, *, name: str = "S", topic: str = "t", key: str = "KAFKA", value: str = "JSON",
    value_features: tuple[str, ...] = (), window: str | None = None, size: int | None = None,
) -> SourceInfo:
    return SourceInfo(
        name=name,
        kind="STREAM",
        schema=LogicalSchema.parse(schema),
        topic=topic,
        key_format=FormatDescription(key, {}, (), window, size),
        value_format=FormatDescription(value, {}, value_features),
    )


@dataclass
class _Query:
    sink: str


@dataclass
class _Engine:
    """What the wire trip reads of an engine: its sources, queries and registry."""

    source_list: list[SourceInfo]
    queries: dict[str, _Query] = field(default_factory=dict)
    schema_registry_url: str | None = field(default_factory=lambda: f"mock://{uuid.uuid4().hex}")

    def sources(self) -> list[SourceInfo]:
        return list(self.source_list)

    def source(self, name: str) -> SourceInfo | None:
        return next((s for s in self.source_list if s.name == name), None)


def test_json_inputs_come_back_as_their_bytes_read() -> None:
    engine = _Engine([_source("ID INT KEY, NAME STRING, PRICE DOUBLE")])
    (record,) = inputs_through_bytes(engine, [TopicRecord("t", 7, {"NAME": "x", "PRICE": 1.1}, 5)])
    assert record == TopicRecord("t", 7, {"NAME": "x", "PRICE": decimal.Decimal("1.1")}, 5)


def test_avro_inputs_go_through_the_registry_wire_format(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _Engine([_source("ID STRING KEY, N INT, S STRING", key="AVRO", value="AVRO")])
    record = TopicRecord("t", "a", {"N": 1, "S": "x"}, 0)
    assert inputs_through_bytes(engine, [record]) == [record]
    url = engine.schema_registry_url or ""
    assert sorted(registry_client(url).get_subjects()) == ["t-key", "t-value"]
    # A serde that writes a field wrongly changes what the replay feeds the query.
    written = WireSerde.to_bytes

    def dropping_s(self: WireSerde, data: Any) -> bytes | None:
        return written(self, {**data, "S": None} if isinstance(data, dict) else data)

    monkeypatch.setattr(WireSerde, "to_bytes", dropping_s)
    assert inputs_through_bytes(engine, [record]) == [TopicRecord("t", "a", {"N": 1, "S": None}, 0)]


def test_windowed_keys_go_through_kafka_streams_window_bytes() -> None:
    engine = _Engine([
        _source("ID STRING KEY, N INT", topic="tumbling", window="TUMBLING", size=10),
        _source("ID STRING KEY, N INT", name="T", topic="session", window="SESSION"),
    ])
    timed = TopicRecord("tumbling", "a", {"N": 1}, 0, window=Window(20, 30, "TIME"))
    session = TopicRecord("session", "b", {"N": 2}, 0, window=Window(5, 9, "SESSION"))
    assert inputs_through_bytes(engine, [timed, session]) == [timed, session]


def test_a_record_malformed_in_any_form_goes_as_the_case_wrote_it() -> None:
    engine = _Engine([_source("ID INT KEY, N INT")])
    record = TopicRecord("t", "not an int", {"N": 1}, 0)
    assert inputs_through_bytes(engine, [record]) == [record]


def test_topics_no_source_reads_and_parts_without_columns_stay_as_they_are() -> None:
    engine = _Engine([_source("N INT", value="KAFKA")])
    other = TopicRecord("elsewhere", "k", "anything", 0)
    keyless = TopicRecord("t", "ignored key", 3, 0)
    assert inputs_through_bytes(engine, [other, keyless]) == [other, keyless]


def test_a_readable_input_whose_bytes_do_not_read_back_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.serde.kafka_format import KafkaSerde

    def broken(self: KafkaSerde, data: bytes | None) -> Any:
        raise RecordSerdeError("broken reader")

    monkeypatch.setattr(KafkaSerde, "from_bytes", broken)
    engine = _Engine([_source("ID INT KEY, N INT")])
    with pytest.raises(WireError, match="reads in QTT form but not back from the bytes.*broken reader"):
        inputs_through_bytes(engine, [TopicRecord("t", 1, {"N": 1}, 0)])


def test_outputs_read_back_with_their_sinks_serdes_and_fields_past_the_columns_as_filled() -> None:
    sink = _source("ID STRING KEY, N INT", name="OUT", topic="out", key="AVRO", value="AVRO")
    engine = _Engine([_source("ID STRING KEY, N STRING", topic="out"), sink], {"Q": _Query("OUT")})
    produced = {"out": [TopicRecord("out", "a", {"N": 1}, 0)]}
    assert outputs_through_bytes(engine, produced) == produced  # the sink's AVRO, not the first JSON
    protobuf = _source("ID INT KEY, N INT", name="PB", topic="pb", value="PROTOBUF")
    filled = {"pb": [TopicRecord("pb", 1, {"N": 0, "blob": None}, 0)]}
    assert outputs_through_bytes(_Engine([protobuf], {"Q": _Query("PB")}), filled) == filled
    assert "out-value" in registry_client(engine.schema_registry_url or "").get_subjects()


def test_an_output_its_sink_cannot_write_is_an_error() -> None:
    sink = _source("ID INT KEY, N INT", name="OUT", topic="out")
    engine = _Engine([sink], {"Q": _Query("OUT")})
    with pytest.raises(WireError, match="output record of topic out .*does not go through"):
        outputs_through_bytes(engine, {"out": [TopicRecord("out", "not an int", {"N": 1}, 0)]})


def test_saved_sources_pass_todays_format_checks_or_are_named() -> None:
    fine = _source("ID INT KEY, N INT", value="PROTOBUF")
    unwrapped = _source("ID INT KEY, N INT", name="P", value="PROTOBUF", value_features=("UNWRAP_SINGLES",))
    map_key = _source("ID MAP<STRING, INT> KEY, N INT", name="M", key="JSON")
    refusals = dict(source_format_refusals(_Engine([fine, unwrapped, map_key])))
    assert refusals.keys() == {"P", "M"}
    assert refusals["P"] == "Format 'PROTOBUF' does not support 'WRAP_SINGLE_VALUE' set to 'false'."
    assert refusals["M"].startswith("Map keys, including types that contain maps, are not supported")
