"""The QTT loader reads each field as ksqlDB's test model (ksqldb-functional-tests) reads it:
its required fields, its defaults, its expansion rules, and the keys it ignores."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.data.records import TopicInfo
from engine.facade.api import FormatDescription, SourceInfo
from engine.plan.schema import LogicalSchema
from qtt.loader import FORMAT_REPLACE_ERROR, expand_case, load_file
from qtt.model import QttFormatError, parse_ksql_version
from qtt.plans import codec
from qtt.schemas import declared_schemas
from qtt.verify import check_post


def case(**extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": "c",
        "statements": ["CREATE STREAM S (K STRING KEY, V INT) WITH (kafka_topic='s', value_format='JSON');"],
        "inputs": [{"topic": "s", "key": "a", "value": {"V": 1}}],
    }
    body.update(extra)
    return body


def load_one(tmp_path: Path, *cases: dict[str, Any], top: dict[str, Any] | None = None) -> Any:
    path = tmp_path / "f.json"
    path.write_text(json.dumps({"tests": list(cases), **(top or {})}), encoding="utf-8")
    return load_file(path)


def problem(tmp_path: Path, raw: dict[str, Any]) -> str:
    loaded = load_one(tmp_path, raw)
    assert not loaded.cases, "the case should not load"
    [found] = loaded.problems
    return found.message


class Metastore:
    def __init__(self, sources: list[SourceInfo], topics: dict[str, TopicInfo] | None = None) -> None:
        self._sources = {s.name: s for s in sources}
        self._topics = topics or {}

    def source(self, name: str) -> SourceInfo | None:
        return self._sources.get(name)

    def topics(self) -> dict[str, TopicInfo]:
        return self._topics


def table_source(key_format: FormatDescription) -> SourceInfo:
    return SourceInfo(
        name="T", kind="TABLE", schema=LogicalSchema.parse("`K` STRING KEY, `N` BIGINT"), topic="T",
        key_format=key_format, value_format=FormatDescription("JSON"),
    )


# ---------------------------------------------------------------------------- expansion


def test_a_format_placeholder_without_a_format_list_becomes_ksqldbs_sentence(tmp_path: Path) -> None:
    # ksqlDB's runner puts its sentence for {FORMAT} when the case has no 'format' list, so the
    # statement fails to parse instead of running with the placeholder.
    [c] = expand_case(case(statements=["CREATE STREAM S WITH (value_format='{FORMAT}');"]), tmp_path / "f.json", 0)
    assert c.statements == (f"CREATE STREAM S WITH (value_format='{FORMAT_REPLACE_ERROR}');",)
    assert FORMAT_REPLACE_ERROR == "To use {FORMAT} in your statements please set the 'format' test case element"
    json_case, avro_case = expand_case(
        case(format=["JSON", "AVRO"], statements=["X '{FORMAT}';"]), tmp_path / "f.json", 0
    )
    assert (json_case.statements, avro_case.statements) == (("X 'JSON';",), ("X 'AVRO';",))


def test_the_config_placeholder_matches_in_any_letter_case(tmp_path: Path) -> None:
    raw = case(config=["true", "false"], properties={"ksql.x": "{config}", "ksql.y": "1"})
    on, off = expand_case(raw, tmp_path / "f.json", 0)
    assert (on.id, on.properties) == ("f - c - ksql.x=true", {"ksql.x": "true", "ksql.y": "1"})
    assert off.properties["ksql.x"] == "false"
    with pytest.raises(QttFormatError, match="exactly one property"):
        expand_case(case(config=["a"], properties={"p": "{CONFIG}", "q": "{Config}"}), tmp_path / "f.json", 0)


# ---------------------------------------------------------------------------- required fields and defaults


def test_an_empty_tests_list_is_refused(tmp_path: Path) -> None:
    [found] = load_one(tmp_path).problems
    assert "did not contain any tests" in found.message


def test_empty_record_lists_count_as_none(tmp_path: Path) -> None:
    # ksqlDB's TestCaseNode wants records in inputs or outputs, or an expectedException.
    message = problem(tmp_path, case(inputs=[], outputs=[]))
    assert "no inputs, outputs or expectedException provided" in message
    loaded = load_one(tmp_path, case(inputs=[], outputs=[], expectedException={"message": "x"}))
    assert len(loaded.cases) == 1


def test_an_expected_exception_may_give_only_a_message_and_a_cause_message_needs_its_cause(
    tmp_path: Path,
) -> None:
    [c] = load_one(tmp_path, case(expectedException={"message": "bad"})).cases
    assert c.expected_exception is not None
    assert (c.expected_exception.type, c.expected_exception.message) == (None, "bad")
    assert problem(tmp_path, case(expectedException={"cause": "a.B"})) == (
        "test must define 'expectedException.type or expectedException.message' field"
    )
    assert problem(tmp_path, case(expectedException={"type": "a.B", "causeMessage": "worse"})) == (
        "test must define 'expectedException.cause' field"
    )
    [c] = load_one(tmp_path, case(expectedException={"type": "a.B", "cause": "a.C", "causeMessage": "w"})).cases
    assert c.expected_exception is not None and c.expected_exception.cause == "a.C"


def test_a_window_needs_its_type_and_its_start_and_end_default_to_zero(tmp_path: Path) -> None:
    record = {"topic": "s", "key": "a", "value": {"V": 1}}
    message = problem(tmp_path, case(inputs=[{**record, "window": {"start": 0, "end": 10}}]))
    assert "Required key 'type' is missing from inputs[0].window" in message
    [c] = load_one(tmp_path, case(inputs=[{**record, "window": {"end": 10, "type": "time"}}])).cases
    window = c.inputs[0].window
    assert window is not None and (window.start, window.end, window.type) == (0, 10, "TIME")


def test_version_bounds_parse_as_ksqldbs_versions(tmp_path: Path) -> None:
    assert parse_ksql_version("7.4.0") == (7, 4, 0)
    assert parse_ksql_version("6.0") == (6, 0, 0)
    assert parse_ksql_version("5.5.0-SNAPSHOT") == (5, 5, 0)
    assert parse_ksql_version("7.1.0-rc3") == (7, 1, 0)
    message = problem(tmp_path, case(versions={"min": "7"}))
    assert message.startswith("Failed to parse version: '7'. Version must be in format '")
    loaded = load_one(tmp_path, case(versions={"min": "5.0", "max": "6.1.0"}))
    assert loaded.not_applicable == ("f - c",)


def test_unknown_keys_are_ignored_at_every_level(tmp_path: Path) -> None:
    # ksqlDB's test mapper does not fail on unknown properties, so neither does kspark.
    raw = case(
        comment="why",
        issues=["#1"],
        inputs=[{"topic": "s", "key": "a", "value": {"V": 1}, "note": 1,
                 "window": {"start": 0, "end": 1, "type": "TIME", "x": 2}}],
        topics=[{"name": "s", "valueFormat": "JSON", "owner": "me"}],
        post={"sources": [{"name": "S", "type": "stream", "why": "?"}], "comments": ["c"]},
        expectedException={"message": "m", "hint": "h"},
    )
    loaded = load_one(tmp_path, raw, top={"comments": ["file"], "owner": "x"})
    assert not loaded.problems and len(loaded.cases) == 1


# ---------------------------------------------------------------------------- topics


def test_key_and_value_schema_references_are_read_and_registered(tmp_path: Path) -> None:
    reference = {"name": "common.proto", "format": "PROTOBUF", "schema": "syntax = \"proto3\"; message C {int32 a = 1;}"}
    topic = {
        "name": "s",
        "keyFormat": "PROTOBUF",
        "valueFormat": "PROTOBUF",
        "keySchema": "syntax = \"proto3\"; message K {int32 k = 1;}",
        "valueSchema": "syntax = \"proto3\"; message V {int32 v = 1;}",
        "keySchemaReferences": [reference],
        "valueSchemaReferences": [reference],
    }
    [c] = expand_case(case(topics=[topic]), tmp_path / "f.json", 0)
    [spec] = c.topics
    assert spec.key_schema_references == (reference,) and spec.value_schema_references == (reference,)
    registered = {subject: refs for subject, _, _, _, refs in declared_schemas(c.topics)}
    assert registered == {"s-key": (reference,), "s-value": (reference,)}
    assert spec.to_topic_info().properties["keySchemaReferences"] == (reference,)
    message = problem(tmp_path, case(topics=[{**topic, "keySchemaReferences": [{"name": "x", "schema": "s"}]}]))
    assert "Required key 'format' is missing from topics[0].keySchemaReferences[0]" in message


# ---------------------------------------------------------------------------- post-conditions


def test_a_post_source_needs_its_type_and_reads_a_value_format_name(tmp_path: Path) -> None:
    assert "Required key 'type' is missing from post.sources[0]" in problem(
        tmp_path, case(post={"sources": [{"name": "S"}]})
    )
    assert "'valueFormat' in post.sources[0] to be a string" in problem(
        tmp_path, case(post={"sources": [{"name": "S", "type": "STREAM", "valueFormat": {"format": "JSON"}}]})
    )
    [c] = load_one(tmp_path, case(post={"sources": [{"name": "S", "type": "table", "valueFormat": "JSON"}]})).cases
    [source] = c.post.sources
    assert (source.type, source.value_format and source.value_format.format) == ("TABLE", "JSON")


def test_a_source_key_format_reads_ksqldbs_three_keys_and_checks_the_window_always(tmp_path: Path) -> None:
    # KeyFormatNode reads format, windowType and windowSize; other keys (properties, features)
    # are ignored, and an absent window means the key must not be windowed.
    key_format = {"format": "KAFKA", "properties": {"fullSchemaName": "x"}, "features": ["UNWRAP_SINGLES"]}
    [c] = load_one(tmp_path, case(post={"sources": [{"name": "T", "type": "TABLE", "keyFormat": key_format}]})).cases
    [expected] = c.post.sources
    assert expected.key_format is not None
    assert (expected.key_format.properties, expected.key_format.features) == ({}, None)
    plain = Metastore([table_source(FormatDescription("KAFKA", features=("UNWRAP_SINGLES",)))])
    windowed = Metastore([table_source(FormatDescription("KAFKA", window_type="TUMBLING", window_size_ms=1000))])
    assert check_post(c.post, plain) == []
    reasons = check_post(c.post, windowed)
    assert "window type is TUMBLING but expected none" in reasons[0]
    assert "window size is 1000 ms but expected None ms" in reasons[1]
    [w] = load_one(tmp_path, case(post={"sources": [
        {"name": "T", "type": "TABLE", "keyFormat": {"windowType": "tumbling", "windowSize": 1000}}]})).cases
    assert check_post(w.post, windowed) == [] and check_post(w.post, plain) != []
    assert "Window type 'HOP'" in problem(
        tmp_path, case(post={"sources": [{"name": "T", "type": "TABLE", "keyFormat": {"windowType": "HOP"}}]})
    )


def test_post_topics_need_their_formats_and_a_positive_partition_count(tmp_path: Path) -> None:
    formats = {"keyFormat": {"format": "KAFKA"}, "valueFormat": {"format": "JSON"}}
    assert "Required key 'valueFormat' is missing from post.topics.topics[0]" in problem(
        tmp_path, case(post={"topics": {"topics": [{"name": "t", "keyFormat": {"format": "KAFKA"}}]}})
    )
    assert "Partition count must be positive, but was: 0" in problem(
        tmp_path, case(post={"topics": {"topics": [{"name": "t", **formats, "partitions": 0}]}})
    )
    [c] = load_one(tmp_path, case(post={"topics": {"topics": [{"name": "t", **formats, "partitions": 2}]}})).cases
    assert [(t.name, t.partitions) for t in c.post.topics] == [("t", 2)]


class DescribedTopics(Metastore):
    def sources(self) -> list[SourceInfo]:
        return list(self._sources.values())


def topic_source(key_format: FormatDescription, value_format: FormatDescription) -> SourceInfo:
    return SourceInfo(name="T", kind="TABLE", schema=LogicalSchema.parse("`K` STRING KEY, `N` BIGINT"),
                      topic="t", key_format=key_format, value_format=value_format)


def test_a_post_topic_format_is_compared_whole_absent_properties_features_and_window_mean_none(
    tmp_path: Path,
) -> None:
    # ksqlDB's PostTopicNode compares KeyFormat and ValueFormat with equals: the format, its
    # properties, its features and (for a key) its windowInfo, whose size is in seconds.
    key_format = {"format": "AVRO", "features": ["UNWRAP_SINGLES"],
                  "properties": {"fullSchemaName": "io.example.OutKey"}, "windowInfo": {"type": "hopping", "size": 5}}
    post = {"topics": {"topics": [{"name": "t", "keyFormat": key_format, "valueFormat": {"format": "PROTOBUF"}}]}}
    [c] = load_one(tmp_path, case(post=post)).cases
    windowed_avro = FormatDescription("AVRO", {"schema_full_name": "io.example.OutKey"}, ("UNWRAP_SINGLES",),
                                      window_type="HOPPING", window_size_ms=5000)
    protobuf = FormatDescription("PROTOBUF")  # ksqlDB's unwrapPrimitives=true on every PROTOBUF format
    assert check_post(c.post, DescribedTopics([topic_source(windowed_avro, protobuf)], {"t": TopicInfo("t")})) == [
        "Topic 't' value format properties are {'unwrapPrimitives': 'true'} but expected {}."
    ]
    plain_value = {"format": "PROTOBUF", "properties": {"unwrapPrimitives": "true"}}
    [c] = load_one(tmp_path, case(post={"topics": {"topics": [
        {"name": "t", "keyFormat": key_format, "valueFormat": plain_value}]}})).cases
    assert check_post(c.post, DescribedTopics([topic_source(windowed_avro, protobuf)], {"t": TopicInfo("t")})) == []
    bare = {"topics": {"topics": [{"name": "t", "keyFormat": {"format": "AVRO"}, "valueFormat": plain_value}]}}
    [b] = load_one(tmp_path, case(post=bare)).cases
    assert check_post(b.post, DescribedTopics([topic_source(windowed_avro, protobuf)], {"t": TopicInfo("t")})) == [
        "Topic 't' key format properties are {'fullSchemaName': 'io.example.OutKey'} but expected {}.",
        "Topic 't' key features are ['UNWRAP_SINGLES'] but expected [].",
        "Topic 't' key window type is HOPPING but expected none.",
    ]
    nullable = FormatDescription("PROTOBUF_NOSR", {"nullable_representation": "OPTIONAL"})
    nosr = {"format": "PROTOBUF_NOSR", "properties": {"nullableRepresentation": "optional"}}
    [n] = load_one(tmp_path, case(post={"topics": {"topics": [
        {"name": "t", "keyFormat": {"format": "KAFKA"}, "valueFormat": nosr}]}})).cases
    view = DescribedTopics([topic_source(FormatDescription("KAFKA"), nullable)], {"t": TopicInfo("t")})
    assert check_post(n.post, view) == []
    assert "Window type 'DAILY'" in problem(tmp_path, case(post={"topics": {"topics": [
        {"name": "t", "keyFormat": {"format": "KAFKA", "windowInfo": {"type": "daily"}}, "valueFormat": "JSON"}]}}))


def test_an_invalid_blacklist_is_refused_when_the_case_loads(tmp_path: Path) -> None:
    message = problem(tmp_path, case(post={"topics": {"blacklist": "(unclosed"}}))
    assert message.startswith("blacklist: not valid regex: '(unclosed'")
    [c] = load_one(tmp_path, case(post={"topics": {"blacklist": "repartition"}})).cases
    view = Metastore([], {"app-repartition": TopicInfo("app-repartition")})
    [reason] = check_post(c.post, view)  # searched within the name, as Pattern.asPredicate does
    assert "matches the blacklist" in reason


def test_a_saved_case_with_a_value_format_object_still_loads() -> None:
    # Cases kspark saved before the loader read ksqlDB's form wrote a source's valueFormat as an object.
    raw = case(post={"sources": [{"name": "S", "type": "STREAM", "valueFormat": {"format": "JSON"}}]})
    loaded = codec.case_from_json(raw, case_id="f - c", file=Path("spec.json"))
    [source] = loaded.post.sources
    assert source.value_format is not None and source.value_format.format == "JSON"
    assert codec.case_to_json(loaded)["post"]["sources"][0]["valueFormat"] == "JSON"


def test_declared_schema_ids_are_the_ids_the_schemas_are_registered_with(tmp_path: Path) -> None:
    topic = {"name": "s", "keyFormat": "AVRO", "valueFormat": "AVRO", "keySchema": "string",
             "valueSchema": {"type": "record", "name": "V", "fields": [{"name": "V", "type": "int"}]},
             "keySchemaId": 3, "valueSchemaId": 9}
    [c] = expand_case(case(topics=[topic]), tmp_path / "f.json", 0)
    ids = {subject: schema_id for subject, _, _, schema_id, _ in declared_schemas(c.topics)}
    assert ids == {"s-key": 3, "s-value": 9}
    assert "'keySchemaId' in topics[0] to be an integer" in problem(tmp_path, case(topics=[{**topic, "keySchemaId": "3"}]))


def test_a_post_source_compares_its_features_in_any_order_and_whether_it_is_a_source(tmp_path: Path) -> None:
    raw = case(post={"sources": [{"name": "T", "type": "TABLE", "keyFeatures": ["UNWRAP_SINGLES"],
                                  "valueFeatures": [], "isSource": True}]})
    [c] = load_one(tmp_path, raw).cases
    [expected] = c.post.sources
    assert (expected.key_features, expected.value_features, expected.is_source) == (("UNWRAP_SINGLES",), (), True)
    actual = table_source(FormatDescription("KAFKA", features=("UNWRAP_SINGLES",)))
    reasons = check_post(c.post, Metastore([actual]))
    assert reasons == ["Source 'T' has isSource=False but expected True."]
    wrapped = replace(actual, is_source=True, value_format=FormatDescription("JSON", features=("WRAP_SINGLES",)))
    assert check_post(c.post, Metastore([wrapped])) == [
        "Source 'T' has value features ['WRAP_SINGLES'] but expected []."
    ]


def test_a_schema_id_a_listed_topic_states_is_the_one_the_case_declared(tmp_path: Path) -> None:
    formats = {"keyFormat": {"format": "KAFKA"}, "valueFormat": {"format": "AVRO"}}
    declared = [{"name": "s", "valueFormat": "AVRO", "valueSchemaId": 7,
                 "valueSchema": {"type": "record", "name": "V", "fields": [{"name": "V", "type": "int"}]}}]
    view = Metastore([], {name: TopicInfo(name, key_format="KAFKA", value_format="AVRO") for name in ("s", "OUT")})

    def reasons(*topics: dict[str, Any]) -> list[str]:
        [c] = load_one(tmp_path, case(topics=declared, post={"topics": {"topics": list(topics)}})).cases
        return check_post(c.post, view, c.topics)

    assert reasons({"name": "s", **formats, "valueSchemaId": 7}, {"name": "OUT", **formats}) == []
    # An id left out is not checked: a sink declared with an id may hold none (ksqlDB's saved plans).
    assert reasons({"name": "s", **formats}) == []
    assert reasons({"name": "s", **formats, "valueSchemaId": 8}) == ["Topic 's' has value schema id 7 but expected 8."]
    assert reasons({"name": "OUT", **formats, "keySchemaId": 1}) == ["Topic 'OUT' has key schema id None but expected 1."]
