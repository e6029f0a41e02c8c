"""A QTT case's declared topic schemas: registration order, ids, and statement id rewriting."""

from __future__ import annotations

import uuid

import pytest

from engine.serde.registry import forget_registry_client, registry_client
from qtt.model import QttFormatError, TopicSpec
from qtt.schemas import ksqldb_runner_ids, register_topic_schemas, with_registry_ids

TOPICS = (
    TopicSpec(name="a", key_format="AVRO", key_schema="int",
              value_format="AVRO", value_schema={"type": "record", "name": "R", "fields": []}),
    TopicSpec(name="b", value_format="JSON_SR", value_schema={"type": "object", "properties": {}},
              value_schema_id=10),
    TopicSpec(name="c", value_format="PROTOBUF", value_schema='syntax = "proto3"; message M { int32 x = 1; }'),
)


def test_ids_follow_ksqldbs_runner_key_before_value_and_declared_ids_move_the_counter() -> None:
    assert ksqldb_runner_ids(TOPICS) == {"a-key": 1, "a-value": 2, "b-value": 10, "c-value": 11}


def test_the_in_process_registry_gives_the_same_ids() -> None:
    url = f"mock://test-qtt-schemas-{uuid.uuid4()}"
    try:
        assert register_topic_schemas(TOPICS, url) == ksqldb_runner_ids(TOPICS)
        client = registry_client(url)
        assert client.get_latest_version("c-value").schema.schema_type == "PROTOBUF"
        assert client.get_latest_version("b-value").schema.schema_type == "JSON"
    finally:
        forget_registry_client(url)


def test_topics_without_declared_schemas_make_no_registry_client(monkeypatch: pytest.MonkeyPatch) -> None:
    # A client costs about 0.15 s: most cases declare no schema and must not pay for one.
    import engine.serde.registry as registry

    def refuse(url: str) -> None:
        raise AssertionError(f"a registry client was made for {url}")

    monkeypatch.setattr(registry, "registry_client", refuse)
    assert register_topic_schemas((TopicSpec(name="a", value_format="JSON"),), "mock://none") == {}


def test_statement_schema_ids_are_rewritten_to_the_registrys() -> None:
    statement = "CREATE STREAM S WITH (kafka_topic='a', format='AVRO', KEY_SCHEMA_ID=1, value_schema_id = 2);"
    assert with_registry_ids(statement, {1: 41, 2: 42}) == (
        "CREATE STREAM S WITH (kafka_topic='a', format='AVRO', KEY_SCHEMA_ID=41, value_schema_id = 42);"
    )
    assert with_registry_ids(statement, {}) == statement


def test_a_schema_on_a_format_without_schemas_is_a_case_format_error() -> None:
    bad = (TopicSpec(name="d", value_format="DELIMITED", value_schema="int"),)
    with pytest.raises(QttFormatError, match="Topic 'd' declares a value schema, but its format DELIMITED"):
        register_topic_schemas(bad, f"mock://test-qtt-schemas-{uuid.uuid4()}")


def test_a_referenced_schema_takes_no_id_of_the_runners_sequence() -> None:
    topics = (TopicSpec(
        name="e", value_format="PROTOBUF",
        value_schema='syntax = "proto3"; import "event.proto"; message Logistics { Event event = 1; }',
        value_schema_references=[{"name": "event.proto", "format": "PROTOBUF",
                                  "schema": 'syntax = "proto3"; message Event { int64 t = 1; }'}],
    ),)
    url = f"mock://test-qtt-schemas-{uuid.uuid4()}"
    try:
        assert register_topic_schemas(topics, url) == {"e-value": 1} == ksqldb_runner_ids(topics)
        client = registry_client(url)
        assert "Logistics" in client.get_schema(1).schema_str
        assert "Event" in client.get_version("event.proto", 1).schema.schema_str
    finally:
        forget_registry_client(url)


# ---------------------------------------------------------------------------- inputs


@pytest.mark.parametrize(
    "schema",
    [
        'syntax = "proto3"; message M { float c1 = 1; double c2 = 2; repeated float c3 = 3; }',
        {"type": "record", "name": "R", "fields": [
            {"name": "c1", "type": ["null", "float"]}, {"name": "c2", "type": "double"},
            {"name": "c3", "type": {"type": "array", "items": "float"}}]},
        {"type": "object", "properties": {
            "c1": {"oneOf": [{"type": "null"}, {"type": "number", "connect.type": "float32"}]},
            "c2": {"type": "number", "connect.type": "float64"},
            "c3": {"type": "array", "items": {"type": "number", "connect.type": "float32"}}}},
    ],
)
def test_inputs_keep_single_precision_where_the_declared_schema_has_32_bit_floats(schema: object) -> None:
    raw = {
        "name": "floats",
        "statements": ["CREATE STREAM S WITH (kafka_topic='input', value_format='PROTOBUF');"],
        "topics": [{"name": "input", "valueSchema": schema}],
        "inputs": [{"topic": "input", "value": {"c1": 1.1234, "C2": 1.1234, "c3": [0.1, None], "c4": 0.1}},
                   {"topic": "other", "value": {"c1": 1.1234}}],
    }
    from pathlib import Path

    from qtt.loader import expand_case

    (case,) = expand_case(raw, Path("floats.json"), 0)
    first, other = case.inputs
    assert first.value == {"c1": 1.1233999729156494, "C2": 1.1234, "c3": [0.10000000149011612, None], "c4": 0.1}
    assert other.value == {"c1": 1.1234}  # a topic without a declared schema is as written


def test_statement_columns_register_schemas_first_in_ksqldbs_runner_order() -> None:
    from pathlib import Path

    from qtt.loader import expand_case
    from qtt.schemas import runner_topics

    raw = {
        "name": "ids",
        "statements": [
            "CREATE STREAM INPUT (`id` INT KEY, `c1` INT) WITH (kafka_topic='input', value_format='avro');",
            "CREATE STREAM J (K STRING KEY, V INT) WITH (kafka_topic='j', key_format='JSON_SR', value_format='JSON');",
            "CREATE STREAM OUTPUT WITH (value_schema_id=2) AS SELECT * FROM INPUT;",
        ],
        "topics": [{"name": "OUTPUT", "valueFormat": "AVRO",
                    "valueSchema": {"type": "record", "name": "R", "fields": [{"name": "c1", "type": "int"}]}}],
        "inputs": [],
    }
    (case,) = expand_case(raw, Path("ids.json"), 0)
    topics = runner_topics(case)
    # Java's HashMap iterates "input" (bucket 1), "OUTPUT" (5), "j" (10): ids follow it.
    assert [t.name for t in topics] == ["input", "OUTPUT", "j"]
    assert topics[0].value_schema["fields"][0]["name"] == "c1"
    url = f"mock://ids-{uuid.uuid4().hex}"
    try:
        assert register_topic_schemas(topics, url) == {"input-value": 1, "OUTPUT-value": 2, "j-key": 3}
    finally:
        forget_registry_client(url)
    # Without statement schemas the declared order stands.
    (plain,) = expand_case({**raw, "statements": raw["statements"][2:]}, Path("ids.json"), 0)
    assert runner_topics(plain) == plain.topics


def test_a_protobuf_create_with_columns_registers_ksqldbs_full_proto3_schema() -> None:
    from qtt.schemas import _statement_topic

    spec = _statement_topic(
        "CREATE STREAM S (K STRING KEY, A STRUCT<B INT>, P DECIMAL(4, 2), L ARRAY<BIGINT>) "
        "WITH (kafka_topic='s', format='PROTOBUF');", {})
    assert spec is not None
    assert "message ConnectDefault1" in spec.value_schema and "ConnectDefault2 A = 1;" in spec.value_schema
    assert "confluent.type.Decimal P = 2" in spec.value_schema and "repeated int64 L = 3;" in spec.value_schema
    assert "string K = 1;" in spec.key_schema


def test_only_statements_that_can_name_a_registry_format_are_parsed_for_their_schemas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import engine.parser
    from qtt.schemas import _statement_topic

    parsed: list[str] = []
    real = engine.parser.parse
    monkeypatch.setattr(engine.parser, "parse", lambda text: parsed.append(text) or real(text))
    create = "CREATE STREAM S (K STRING KEY, V INT) WITH (kafka_topic='s'{});"
    assert _statement_topic(create.format(", value_format='JSON'"), {}) is None
    assert _statement_topic(create.format(", value_format='Delimited'"), {}) is None
    assert parsed == []  # neither can name AVRO, JSON_SR or PROTOBUF
    spec = _statement_topic(create.format(", value_format='Avro'"), {})
    assert spec is not None and spec.value_format == "AVRO" and spec.key_schema is None
    # A default format from the case's properties counts as named.
    spec = _statement_topic(create.format(""), {"ksql.persistence.default.format.value": "json_sr"})
    assert spec is not None and spec.value_format == "JSON_SR"
    spec = _statement_topic(create.format(", value_format='JSON'"), {"ksql.persistence.default.format.key": "AVRO"})
    assert spec is not None and spec.key_format == "AVRO" and spec.value_schema is None
    assert len(parsed) == 3


# ---------------------------------------------------------------------------- inputs through the topic's schema


def _inputs(**raw: object) -> list[object]:
    from pathlib import Path

    from qtt.loader import expand_case
    from qtt.schemas import inputs_through_topic_schemas

    body: dict[str, object] = {"name": "c", "statements": ["SELECT 1;"]}
    body.update(raw)
    [case] = expand_case(body, Path("f.json"), 0)
    return [(r.key, r.value) for r in inputs_through_topic_schemas(case)]


AVRO_BYTES = {"type": "record", "name": "V", "fields": [
    {"name": "B", "type": ["null", "bytes"]}, {"name": "S", "type": "string"},
    {"name": "N", "type": {"type": "record", "name": "In", "fields": [{"name": "B", "type": "bytes"}]}}]}


def test_bytes_fields_of_an_avro_or_protobuf_schema_are_decoded_from_base64_in_lower_or_upper_case() -> None:
    value = {"b": "AQI=", "S": "AQI=", "N": {"B": "AQI="}}
    topics = [{"name": "t", "valueFormat": "AVRO", "valueSchema": AVRO_BYTES},
              {"name": "j", "valueFormat": "JSON_SR", "valueSchema": {"type": "object", "properties": {
                  "B": {"type": "string", "contentEncoding": "base64"}}}}]
    inputs = [{"topic": "T", "key": None, "value": value}, {"topic": "j", "key": None, "value": {"B": "AQI="}},
              {"topic": "t", "key": None, "value": "AQI="}]
    assert _inputs(topics=topics, inputs=inputs) == [
        (None, {"b": b"\x01\x02", "S": "AQI=", "N": {"B": "AQI="}}),  # top-level BYTES fields only
        (None, {"B": "AQI="}),  # JSON_SR: ksqlDB's builder reads AVRO and PROTOBUF schemas only
        (None, "AQI="),  # not an object
    ]
    proto = 'syntax = "proto3";\nmessage K { bytes ID = 1; int32 N = 2; }'
    topics = [{"name": "p", "keyFormat": "PROTOBUF", "keySchema": proto}]
    assert _inputs(topics=topics, inputs=[{"topic": "p", "key": {"ID": "/w==", "N": 1}, "value": None}]) == [
        ({"ID": b"\xff", "N": 1}, None)
    ]
    bad = [{"topic": "t", "key": None, "value": {"B": "not base64!"}}]
    with pytest.raises(QttFormatError, match=r"Input record 1 \(topic 't'\): field 'B' is BYTES in the topic's "
                                             r"schema, so its text must be base64, but 'not base64!' is not."):
        _inputs(topics=[topics[0] | {"name": "t", "valueSchema": AVRO_BYTES, "valueFormat": "AVRO"}], inputs=bad)


def test_a_topics_serde_features_decide_the_columns_its_schema_gives() -> None:
    # UNWRAP_SINGLES: the whole schema is one column, ROWVAL (ROWKEY for a key), as ksqlDB's
    # schema translator wraps it; without it a schema that is not a record is refused.
    topic = {"name": "t", "valueFormat": "AVRO", "valueSchema": "bytes", "valueSerdeFeatures": ["UNWRAP_SINGLES"]}
    assert _inputs(topics=[topic], inputs=[{"topic": "t", "value": {"rowval": "AQI=", "B": "AQI="}}]) == [
        (None, {"rowval": b"\x01\x02", "B": "AQI="})
    ]
    wrapped = {**topic, "valueSchema": AVRO_BYTES}
    assert _inputs(topics=[wrapped], inputs=[{"topic": "t", "value": {"B": "AQI="}}]) == [(None, {"B": "AQI="})]
    with pytest.raises(QttFormatError, match="Schema returned from schema registry is anonymous type"):
        _inputs(topics=[{**topic, "valueSerdeFeatures": []}], inputs=[{"topic": "t", "value": {"B": "AQI="}}])
    key = {"name": "t", "keyFormat": "AVRO", "keySchema": "bytes", "keySerdeFeatures": ["UNWRAP_SINGLES"]}
    assert _inputs(topics=[key], inputs=[{"topic": "t", "key": {"ROWKEY": "AQI="}, "value": None}]) == [
        ({"ROWKEY": b"\x01\x02"}, None)
    ]
    with pytest.raises(QttFormatError, match="Key schemas are always unwrapped."):
        _inputs(topics=[{"name": "t", "keyFormat": "AVRO", "keySchema": "bytes"}],
                inputs=[{"topic": "t", "key": {"B": "AQI="}, "value": None}])


def test_a_create_statement_with_columns_gives_its_topic_a_schema_and_ksqldbs_serde_features() -> None:
    create = "CREATE STREAM S (K BYTES KEY, B BYTES) WITH (kafka_topic='s', format='AVRO'{});"
    record = {"topic": "s", "key": {"ROWKEY": "AQI="}, "value": {"B": "AQI="}}
    # One key column: UNWRAP_SINGLES, so a key object reads ROWKEY; one value column: wrapped.
    assert _inputs(statements=[create.format("")], inputs=[record]) == [
        ({"ROWKEY": b"\x01\x02"}, {"B": b"\x01\x02"})
    ]
    unwrapped = create.format(", wrap_single_value=false")
    assert _inputs(statements=[unwrapped], inputs=[record]) == [({"ROWKEY": b"\x01\x02"}, {"B": "AQI="})]
    declared = [{"name": "s", "valueFormat": "AVRO", "valueSchema": AVRO_BYTES}]  # its schema, the statement's features
    assert _inputs(statements=[create.format("")], topics=declared, inputs=[record]) == [
        ({"ROWKEY": b"\x01\x02"}, {"B": b"\x01\x02"})
    ]
