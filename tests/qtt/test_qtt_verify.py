from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.data.records import Header, TopicInfo, TopicRecord, Window
from engine.facade.api import FormatDescription, SourceInfo
from engine.plan.schema import LogicalSchema
from qtt.model import FormatSpec, PostConditions, PostSource, PostTopic
from qtt.verify import (
    avro_decimals_as_numbers,
    check_post,
    find_difference,
    values_equal,
    verify_outputs,
)


def rec(topic: str = "OUT", key: Any = "k", value: Any = None, **kw: Any) -> TopicRecord:
    return TopicRecord(topic=topic, key=key, value=value, **kw)


# ---------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        (Decimal("1.0"), 1),
        (1, Decimal("1.00")),
        (Decimal("0.1"), 0.1),
        (2, 2.0),
        ({"a": [Decimal("1.5"), None]}, {"a": [1.5, None]}),
        ("x", "x"),
        (None, None),
    ],
)
def test_numbers_and_structures_equal_by_value(expected: Any, actual: Any) -> None:
    assert values_equal(expected, actual)


@pytest.mark.parametrize(
    ("expected", "actual", "path"),
    [
        (Decimal("0.1"), 0.10000001, ""),
        (True, 1, ""),
        (1, True, ""),
        ("1", 1, ""),
        ({"a": 1}, {"A": 2}, "a"),
        ({"a": 1, "A": 1}, {"A": 1, "B": 1}, "a"),
        ({"a": 1}, {"a": 1, "b": 2}, "b"),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 3]}}, "a.b[1]"),
        ([1, 2], [1], "[1]"),
        (None, 0, ""),
        ({"a": None}, {"a": 0}, "a"),
    ],
)
def test_differences_are_found_with_their_path(expected: Any, actual: Any, path: str) -> None:
    assert not values_equal(expected, actual)
    assert find_difference(expected, actual) == path


@given(
    st.decimals(
        allow_nan=False, allow_infinity=False, places=3, min_value=-(10**6), max_value=10**6
    )
)
def test_decimal_equals_its_own_float_and_int_forms(value: Decimal) -> None:
    assert values_equal(value, float(value))
    if value == value.to_integral_value():
        assert values_equal(value, int(value))


# ---------------------------------------------------------------------------- records


def test_matching_outputs_pass() -> None:
    expected = [rec(value={"V": 1}, timestamp=5), rec(topic="OTHER", value=2)]
    actual = {
        "OUT": [rec(value={"V": Decimal("1")}, timestamp=5)],
        "OTHER": [rec(topic="OTHER", value=2)],
    }
    result = verify_outputs(expected, actual)
    assert result.ok and result.reason == ""


def test_count_mismatch_names_topic_and_counts() -> None:
    result = verify_outputs([rec(value=1), rec(value=2)], {"OUT": [rec(value=1)]})
    assert not result.ok
    assert result.reason == "Topic 'OUT' expected 2 records but got 1."
    assert result.comparisons[0].first_difference == 1


def test_missing_topic_counts_as_zero_records() -> None:
    result = verify_outputs([rec(value=1)], {})
    assert result.reason == "Topic 'OUT' expected 1 record but got 0."


def test_value_mismatch_reason_and_diff_mark_the_first_differing_field() -> None:
    expected = [
        rec(value={"A": 1, "B": "x"}),
        rec(value={"A": 2, "B": "y"}),
        rec(value={"A": 3, "B": "z"}),
    ]
    actual = {
        "OUT": [
            rec(value={"A": 1, "B": "x"}),
            rec(value={"A": 2, "B": "Y"}),
            rec(value={"A": 9, "B": "z"}),
        ]
    }
    result = verify_outputs(expected, actual)
    assert result.reason == 'Topic \'OUT\' record 2 of 3: value.B expected "y" but was "Y".'
    text = result.render()
    assert "topic OUT: expected 3, actual 3" in text
    marked = [line for line in text.splitlines() if "<- value.B" in line]
    assert len(marked) == 1 and '"B":"y"' in marked[0] and '"B":"Y"' in marked[0]


def test_key_mismatch_is_reported_before_value() -> None:
    result = verify_outputs([rec(key="a", value=1)], {"OUT": [rec(key="b", value=2)]})
    assert result.comparisons[0].field == "key"


def test_windows_are_compared_including_their_type() -> None:
    window = Window(0, 100, "TIME")
    assert verify_outputs([rec(value=1, window=window)], {"OUT": [rec(value=1, window=window)]}).ok
    other = verify_outputs(
        [rec(value=1, window=window)], {"OUT": [rec(value=1, window=Window(0, 100, "SESSION"))]}
    )
    assert other.comparisons[0].field == "window"
    unwindowed = verify_outputs([rec(value=1)], {"OUT": [rec(value=1, window=window)]})
    assert unwindowed.comparisons[0].field == "window"


def test_timestamps_are_compared_only_when_expected() -> None:
    assert verify_outputs([rec(value=1)], {"OUT": [rec(value=1, timestamp=77)]}).ok
    result = verify_outputs([rec(value=1, timestamp=5)], {"OUT": [rec(value=1, timestamp=6)]})
    assert result.comparisons[0].field == "timestamp"


def test_headers_are_compared_only_for_records_that_list_them() -> None:
    actual = {"OUT": [rec(value=1, headers=(Header("h", b"\x01"),))]}
    assert verify_outputs([rec(value=1)], actual).ok
    assert not verify_outputs([rec(value=1)], actual, headers_at=frozenset({0})).ok
    expected = [rec(value=1, headers=(Header("h", b"\x01"),))]
    assert verify_outputs(expected, actual, headers_at=frozenset({0})).ok


def test_strict_mode_fails_records_on_a_topic_expecting_none() -> None:
    actual = {"OUT": [rec(value=1)], "EXTRA": [rec(topic="EXTRA", value=1)], "EMPTY": []}
    assert verify_outputs([rec(value=1)], actual).ok
    strict = verify_outputs([rec(value=1)], actual, strict=True)
    assert strict.reasons == ("Topic 'EXTRA' received 1 record but the case expects none on it.",)
    assert "topic EXTRA: expected 0, actual 1" in strict.render()


def test_strict_mode_catches_a_case_expecting_nothing() -> None:
    assert not verify_outputs([], {"OUT": [rec(value=1)]}, strict=True).ok


# ---------------------------------------------------------------------------- post-conditions


class FakeMetastore:
    def __init__(self, sources: list[SourceInfo], topics: dict[str, TopicInfo]) -> None:
        self._sources = {s.name: s for s in sources}
        self._topics = topics

    def source(self, name: str) -> SourceInfo | None:
        return self._sources.get(name)

    def topics(self) -> dict[str, TopicInfo]:
        return self._topics


def source(**kw: Any) -> SourceInfo:
    values: dict[str, Any] = {
        "name": "OUT",
        "kind": "TABLE",
        "schema": LogicalSchema.parse("`ID` INTEGER KEY, `TOTAL` BIGINT"),
        "topic": "OUT",
        "key_format": FormatDescription("KAFKA", window_type="TUMBLING", window_size_ms=1000),
        "value_format": FormatDescription("JSON", features=("WRAP_SINGLES",)),
    }
    values.update(kw)
    return SourceInfo(**values)


def test_post_source_matches_with_other_spelling_of_the_same_schema() -> None:
    post = PostConditions(
        sources=(
            PostSource(
                name="OUT",
                type="TABLE",
                schema="id INT KEY, total BIGINT",
                key_format=FormatSpec(format="KAFKA", window_type="TUMBLING", window_size=1000),
                value_features=("WRAP_SINGLES",),
            ),
        )
    )
    assert check_post(post, FakeMetastore([source()], {})) == []


@pytest.mark.parametrize(
    ("expected", "fragment"),
    [
        (PostSource(name="NOPE"), "Source 'NOPE' does not exist"),
        (PostSource(name="OUT", type="STREAM"), "is a TABLE but expected a STREAM"),
        (PostSource(name="OUT", schema="TOTAL BIGINT, ID INT KEY"), "has schema"),
        (PostSource(name="OUT", schema="ID INT, TOTAL BIGINT"), "has schema"),
        (PostSource(name="OUT", schema="ID INT KEY, TOTAL INT"), "has schema"),
        (PostSource(name="OUT", schema="ID INT KEY,,"), "cannot be parsed"),
        (PostSource(name="OUT", key_format=FormatSpec(format="JSON")), "key format is KAFKA"),
        (
            PostSource(name="OUT", key_format=FormatSpec(format="KAFKA", window_type="SESSION")),
            "window type",
        ),
        (PostSource(name="OUT", value_features=()), "value features"),
        (PostSource(name="OUT", is_source=True), "isSource"),
    ],
)
def test_post_source_mismatches_are_named(expected: PostSource, fragment: str) -> None:
    [reason] = check_post(PostConditions(sources=(expected,)), FakeMetastore([source()], {}))
    assert fragment in reason


def test_topic_blacklist_must_match_no_topic() -> None:
    topics = {"OUT": TopicInfo("OUT"), "app-repartition": TopicInfo("app-repartition")}
    view = FakeMetastore([], topics)
    assert check_post(PostConditions(blacklist=".*-changelog"), view) == []
    [reason] = check_post(PostConditions(blacklist=".*-repartition"), view)
    assert "'app-repartition'" in reason
    # The regex is searched for in each name (ksqlDB's Pattern.asPredicate), not matched whole.
    [reason] = check_post(PostConditions(blacklist="repartition"), view)
    assert "'app-repartition'" in reason
    assert check_post(PostConditions(blacklist="^repartition"), view) == []


def test_listed_topics_check_formats_and_partitions_when_given() -> None:
    view = FakeMetastore(
        [], {"OUT": TopicInfo("OUT", partitions=3, key_format="KAFKA", value_format="JSON")}
    )
    ok = PostTopic(name="OUT", key_format=FormatSpec(format="kafka"), partitions=3)
    assert check_post(PostConditions(topics=(ok,)), view) == []
    bad = PostTopic(name="OUT", value_format=FormatSpec(format="AVRO"), partitions=1)
    reasons = check_post(PostConditions(topics=(bad, PostTopic(name="GONE"))), view)
    assert len(reasons) == 3
    assert "value format JSON but expected AVRO" in reasons[0]
    assert "3 partitions but expected 1" in reasons[1]
    assert "'GONE' does not exist" in reasons[2]


def test_field_names_match_without_regard_to_case_as_ksqldb_does():
    assert values_equal({"json_v": "1"}, {"JSON_V": "1"})
    assert values_equal({"a": 1, "A": 2}, {"a": 1, "A": 2})
    assert not values_equal({"a": 1, "A": 2}, {"a": 2, "A": 1})


def test_an_expected_null_field_matches_an_absent_one_when_the_field_counts_agree():
    # ksqlDB's comparator checks the field count, then reads each expected field from the
    # actual object, where an absent field reads as null.
    assert values_equal({"KQL_COL_0": None, "B": 1}, {"KSQL_COL_0": None, "B": 1})
    assert values_equal({"X": None, "B": 1}, {"Y": 2, "B": 1})  # as ksqlDB: Y is never read
    assert not values_equal({"X": 1, "B": 1}, {"Y": None, "B": 1})
    assert not values_equal({"X": None, "B": 1}, {"B": 1})  # the counts differ
    assert find_difference({"X": None}, {"Y": None, "Z": None}) == "X"


# ---------------------------------------------------------------------------- decimals as ksqlDB reads them


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        ("15.11", Decimal("15.11"), True),
        ("005.4", Decimal("5.4"), True),
        ("5.40", Decimal("5.4"), False),  # BigDecimal.equals: the scale counts
        ("15.12", Decimal("15.11"), False),
        ("abc", Decimal("1"), False),
        ("NaN", Decimal("NaN"), False),
    ],
)
def test_an_expected_text_matches_a_decimal_of_the_same_value_and_scale(
    expected: str, actual: Decimal, equal: bool
) -> None:
    assert values_equal({"D": expected}, {"D": actual}) is equal


def test_avro_decimal_texts_are_read_back_as_decimals_in_keys_values_and_nested_types() -> None:
    schema = LogicalSchema.parse(
        "`K` DECIMAL(4, 2) KEY, `D` DECIMAL(4, 1), `S` STRUCT<`X` DECIMAL(3, 2), `N` STRING>, "
        "`A` ARRAY<DECIMAL(2, 1)>, `M` MAP<STRING, DECIMAL(2, 1)>, `T` STRING"
    )
    avro = source(
        schema=schema,
        key_format=FormatDescription("AVRO", features=("UNWRAP_SINGLES",)),
        value_format=FormatDescription("AVRO"),
    )
    value = {"D": "5.4", "S": {"X": "1.25", "N": "2.5"}, "A": ["1.0", None], "M": {"a": "0.5"}, "T": "1.5"}
    produced = {"OUT": [rec(key="10.01", value=value), rec(key=None, value=None)], "OTHER": [rec("OTHER")]}
    read = avro_decimals_as_numbers(produced, [avro])
    first = read["OUT"][0]
    assert first.key == Decimal("10.01")
    assert first.value == {
        "D": Decimal("5.4"), "S": {"X": Decimal("1.25"), "N": "2.5"}, "A": [Decimal("1.0"), None],
        "M": {"a": Decimal("0.5")}, "T": "1.5",
    }
    assert read["OUT"][1] == rec(key=None, value=None)
    assert read["OTHER"] == produced["OTHER"]
    # A JSON source's decimals are numbers already; its strings stay strings.
    as_json = source(schema=schema, value_format=FormatDescription("JSON"))
    assert avro_decimals_as_numbers(produced, [as_json])["OUT"][0].value == value


# ---------------------------------------------------------------------------- ksqlDB's format property names


class FakeEngine(FakeMetastore):
    def sources(self) -> list[SourceInfo]:
        return list(self._sources.values())


def test_format_properties_match_by_ksqldb_names_and_protobuf_unwraps_primitives() -> None:
    pb = source(
        name="PB",
        topic="pb",
        key_format=FormatDescription("PROTOBUF"),
        value_format=FormatDescription(
            "PROTOBUF", {"schema_full_name": "com.example.V", "nullable_representation": "OPTIONAL"}
        ),
    )
    view = FakeEngine([pb], {"pb": TopicInfo("pb")})
    ok = FormatSpec(
        format="PROTOBUF",
        properties={"fullSchemaName": "com.example.V", "nullableRepresentation": "optional",
                    "unwrapPrimitives": "true"},
    )
    assert check_post(PostConditions(sources=(PostSource(name="PB", value_format=ok),)), view) == []
    wrong = FormatSpec(format="PROTOBUF", properties={"fullSchemaName": "com.example.W",
                                                      "unwrapPrimitives": "false"})
    reasons = check_post(PostConditions(sources=(PostSource(name="PB", value_format=wrong),)), view)
    assert reasons == [
        "Source 'PB' value format property 'fullSchemaName' is 'com.example.V' but expected 'com.example.W'.",
        "Source 'PB' value format property 'unwrapPrimitives' is 'true' but expected 'false'.",
    ]


def test_a_topic_is_described_by_the_source_on_it() -> None:
    avro_key = FormatDescription("AVRO", {"schema_full_name": "io.confluent.ksql.avro_schemas.OutKey"},
                                 ("UNWRAP_SINGLES",))
    out = source(topic="out", key_format=avro_key, value_format=FormatDescription("JSON"))
    view = FakeEngine([out], {"out": TopicInfo("out")})  # the topic itself knows no formats
    ok = PostTopic(
        name="out",
        key_format=FormatSpec(format="AVRO", features=("UNWRAP_SINGLES",),
                              properties={"fullSchemaName": "io.confluent.ksql.avro_schemas.OutKey"}),
        value_format=FormatSpec(format="JSON"),
    )
    assert check_post(PostConditions(topics=(ok,)), view) == []
    bad = PostTopic(name="out", key_format=FormatSpec(format="KAFKA", features=()))
    assert check_post(PostConditions(topics=(bad,)), view) == [
        "Topic 'out' key format is AVRO but expected KAFKA.",
        "Topic 'out' key features are ['UNWRAP_SINGLES'] but expected [].",
    ]


# ---------------------------------------------------------------------------- registered schemas of listed topics


class RegistryEngine(FakeEngine):
    def __init__(self, url: str) -> None:
        super().__init__([], {"out": TopicInfo("out")})
        self.schema_registry_url = url


def test_a_listed_topics_schemas_are_the_latest_registered_under_its_subjects_compared_parsed() -> None:
    from confluent_kafka.schema_registry import Schema

    from engine.serde.registry import forget_registry_client, registry_client

    # post.topics.topics[].keySchema and valueSchema against the subjects' latest schemas.
    url = "mock://qtt-verify-registered-schemas"
    forget_registry_client(url)
    client = registry_client(url)
    client.register_schema("out-key", Schema('{"type": "integer", "connect.type": "int32"}', "JSON"))
    client.register_schema("out-value", Schema('syntax = "proto3";\nmessage V { string A = 1; }', "PROTOBUF"))
    client.register_schema("out-value", Schema('syntax = "proto3";\n\nmessage V {\n  int32 A = 1;\n}\n', "PROTOBUF"))
    view = RegistryEngine(url)
    try:
        ok = PostTopic(name="out", key_schema={"connect.type": "int32", "type": "integer"},
                       value_schema='syntax = "proto3";\nmessage V {\n  int32 A = 1; // the latest\n}')
        assert check_post(PostConditions(topics=(ok,)), view) == []
        older = PostTopic(name="out", key_schema={"type": "integer"},
                          value_schema='syntax = "proto3";\nmessage V { string A = 1; }')
        reasons = check_post(PostConditions(topics=(older,)), view)
        assert reasons[0] == (
            "Topic 'out' has key schema {\"type\": \"integer\", \"connect.type\": \"int32\"} registered under "
            "out-key but expected {\"type\": \"integer\"}."
        )
        assert reasons[1].startswith("Topic 'out' has value schema syntax = \"proto3\"; message V { int32 A = 1; }")
        nothing = PostTopic(name="gone", key_schema={"type": "integer"})
        assert check_post(PostConditions(topics=(nothing,)), RegistryEngine(url))[-1] == (
            "Topic 'gone' has no key schema registered under gone-key but expected {\"type\": \"integer\"}."
        )
        assert check_post(PostConditions(topics=(PostTopic(name="out"),)), view) == []  # none stated
        # A query's internal topic: kspark serializes nothing to it, so registers no schema there.
        view.internal_topic_formats = lambda: {"gone": None}  # type: ignore[attr-defined]
        assert not [r for r in check_post(PostConditions(topics=(nothing,)), view) if "schema" in r]
    finally:
        forget_registry_client(url)


def test_bytes_an_output_holds_compare_as_their_base64_text() -> None:
    assert values_equal({"B": "AQI="}, {"B": b"\x01\x02"})
    assert not values_equal({"B": "AQI"}, {"B": b"\x01\x02"})
    assert find_difference({"B": "AQM="}, {"B": b"\x01\x02"}) == "B"
