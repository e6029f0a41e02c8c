"""A replay's records through their topics' Kafka bytes, and its sources through the
planner's format checks.

The bounded runtime keeps topic records in QTT form, so a replay alone would never run the
byte forms a query meets on Kafka. Here every input record goes to the bytes of the first
source reading its topic and back, and every output record to the bytes of its sink's
source and back, with the serdes the Kafka runtime reads and writes those topics with
(``qtt.kafka_runtime.SourceSerdes``: AVRO, JSON_SR and PROTOBUF in the schema registry's wire
format, windowed keys in Kafka Streams' windowed-key bytes). A serde that writes or reads
bytes wrongly then changes what the replay compares.

    records = inputs_through_bytes(engine, case.inputs)    # before engine.produce
    produced = outputs_through_bytes(engine, engine.run())
    refused = source_format_refusals(engine)   # [(name, message)]: [] while every source passes

An input record that its source's serdes cannot write, and that the source could not read
in QTT form either (a case's malformed record, which the query is to log and skip), goes as
it is: the builder meets it as before. A record the source reads but its bytes do not carry
is a ``WireError``, as is an output record that does not go through its sink's bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine.data.records import TopicRecord, Window
from engine.errors import KsqlError
from engine.facade.api import SourceInfo
from engine.plan.schema import Namespace
from engine.serde import FormatInfo, SerdeFeatures, check_key_schema, check_value_schema
from engine.serde.windowed import decode_session_window_key, decode_time_window_key
from qtt.kafka_runtime import SourceSerdes, encode_windowed_key


class WireError(Exception):
    """A record that its topic's serdes read in QTT form but do not carry through bytes (a
    replay error, not a refusal of the saved plan)."""


def inputs_through_bytes(engine: Any, records: Iterable[TopicRecord]) -> list[TopicRecord]:
    """``records`` as the first source reading each one's topic reads them back from the
    bytes its serdes write (a topic no source reads: as they are)."""
    readers: dict[str, SourceSerdes | None] = {}
    out = []
    for record in records:
        if record.topic not in readers:
            readers[record.topic] = _serdes_of(_first_reader(engine, record.topic), engine)
        serdes = readers[record.topic]
        out.append(record if serdes is None else _input_trip(serdes, record))
    return out


def outputs_through_bytes(
    engine: Any, produced: Mapping[str, Sequence[TopicRecord]]
) -> dict[str, list[TopicRecord]]:
    """``produced`` (topic -> records a run wrote) as a consumer reads each sink topic back
    from the bytes the sink's serdes write; raises ``WireError`` for a record they do not
    carry."""
    writers = _sink_sources(engine)
    out: dict[str, list[TopicRecord]] = {}
    for topic, records in produced.items():
        serdes = _serdes_of(writers.get(topic) or _first_reader(engine, topic), engine)
        out[topic] = list(records) if serdes is None else [_output_trip(serdes, r) for r in records]
    return out


def source_format_refusals(engine: Any) -> list[tuple[str, str]]:
    """For each stream and table of ``engine``, the refusal of today's plan-time format
    checks (``check_key_schema``, ``check_value_schema``) of its saved formats and columns,
    as (name, message); empty while every saved source would still be planned (a server
    that restarts plans its command log's statements again, and these checks run then)."""
    refusals = []
    for source in engine.sources():
        key, value = source.key_format, source.value_format
        value_columns = [c for c in source.schema.columns if c.namespace is Namespace.VALUE]
        wrap = (
            True if "WRAP_SINGLES" in value.features
            else False if "UNWRAP_SINGLES" in value.features
            else None
        )
        try:
            check_key_schema(FormatInfo(key.format, dict(key.properties)), list(source.schema.key))
            check_value_schema(
                FormatInfo(value.format, dict(value.properties)), value_columns,
                SerdeFeatures(wrap_single_value=wrap),
            )
        except KsqlError as exc:
            refusals.append((source.name, str(exc)))
    return refusals


# -- helpers -----------------------------------------------------------------------------


def _serdes_of(source: SourceInfo | None, engine: Any) -> SourceSerdes | None:
    if source is None:
        return None
    return SourceSerdes.of(source, getattr(engine, "schema_registry_url", None))


def _first_reader(engine: Any, topic: str) -> SourceInfo | None:
    """The first stream or table on ``topic``, as the Kafka runtime's harness picks the
    serdes of an input topic."""
    return next((s for s in engine.sources() if s.topic == topic), None)


def _sink_sources(engine: Any) -> dict[str, SourceInfo]:
    """Topic -> the sink source of the first query writing it."""
    sinks: dict[str, SourceInfo] = {}
    for query in engine.queries.values():
        source = engine.source(query.sink)
        if source is not None:
            sinks.setdefault(source.topic, source)
    return sinks


def _input_trip(serdes: SourceSerdes, record: TopicRecord) -> TopicRecord:
    try:
        return _trip(serdes, record)
    except KsqlError as exc:
        if not _reads_in_qtt_form(serdes, record):
            return record  # malformed in any form: the query meets it as the case wrote it
        raise WireError(
            f"The input record {_describe(record)} reads in QTT form but not back from the "
            f"bytes its serdes write: {exc}"
        ) from None


def _output_trip(serdes: SourceSerdes, record: TopicRecord) -> TopicRecord:
    try:
        return _trip(serdes, record)
    except KsqlError as exc:
        raise WireError(
            f"The output record {_describe(record)} does not go through the bytes of its "
            f"sink's serdes: {exc}"
        ) from None


def _trip(serdes: SourceSerdes, record: TopicRecord) -> TopicRecord:
    """``record`` written with ``serdes`` to Kafka bytes and its columns read back, as a
    consumer of its topic reads them."""
    # A part without columns (no key columns, the NONE format) has no bytes: it stays as it is.
    keyed = record.key is not None and bool(serdes.key.columns)
    valued = record.value is not None and bool(serdes.value.columns)
    key_bytes = serdes.key.to_bytes(record.key) if keyed else None
    value_bytes = serdes.value.to_bytes(record.value) if valued else None
    window = record.window
    if window is not None and key_bytes is not None:
        windowed = encode_windowed_key(key_bytes, window)
        if window.type.upper() == "SESSION":
            key_bytes, start, end = decode_session_window_key(windowed)
        else:
            key_bytes, start = decode_time_window_key(windowed)
            end = start + (window.end - window.start)  # the key holds no end: the size gives it
        window = Window(start, end, window.type)
    key = serdes.key.from_bytes(key_bytes) if keyed else record.key
    value = serdes.value.from_bytes(value_bytes) if valued else record.value
    if valued and isinstance(value, dict) and isinstance(record.value, dict):
        value = _past_columns_as_filled(value, record.value, serdes.value.names)
    return dataclasses.replace(record, key=key, value=value, window=window)


def _past_columns_as_filled(read: dict[str, Any], filled: dict[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """The columns as ``read`` from the bytes, and the fields past them (a registered schema's,
    which a sink fills: ``engine.builders.registered_sink``) as the sink ``filled`` them: the
    bytes of an unset PROTOBUF field cannot tell its default from NULL."""
    names = {c.upper() for c in columns}
    out = {k: v for k, v in read.items() if str(k).upper() in names}
    out.update({k: v for k, v in filled.items() if str(k).upper() not in names})
    return out


def _reads_in_qtt_form(serdes: SourceSerdes, record: TopicRecord) -> bool:
    try:
        serdes.key.deserialize(record.key)
        serdes.value.deserialize(record.value)
    except (KsqlError, ValueError, TypeError, AttributeError):
        return False
    return True


def _describe(record: TopicRecord) -> str:
    return f"of topic {record.topic} (key {record.key!r}, value {record.value!r})"
