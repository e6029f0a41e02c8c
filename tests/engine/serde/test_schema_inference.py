"""Schema inference: registered AVRO and JSON schemas -> ksqlDB columns, and its errors."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.schema_registry import Schema

from engine.errors import AnalysisError
from engine.plan import types as T
from engine.serde.registry import forget_registry_client, registry_client
from engine.serde.schema_inference import (
    RegisteredSchema,
    SchemaTranslationError,
    avro_to_sql,
    fetch_schema,
    infer_columns,
    json_schema_to_sql,
    protobuf_to_sql,
)


def _struct(**fields: T.SqlType) -> T.Struct:
    return T.Struct(tuple(T.Field(n, t) for n, t in fields.items()))


# ---------------------------------------------------------------------- AVRO


def test_avro_primitives_map_as_ksqldb_maps_them() -> None:
    record = {"type": "record", "name": "r", "fields": [
        {"name": "b", "type": "boolean"}, {"name": "i", "type": "int"}, {"name": "l", "type": "long"},
        {"name": "f", "type": "float"}, {"name": "d", "type": "double"}, {"name": "s", "type": "string"},
        {"name": "y", "type": "bytes"},
    ]}
    assert avro_to_sql(record) == _struct(B=T.BOOLEAN, I=T.INTEGER, L=T.BIGINT, F=T.DOUBLE, D=T.DOUBLE,
                                          S=T.STRING, Y=T.BYTES)


def test_avro_logical_types_enum_and_fixed() -> None:
    record = {"type": "record", "name": "r", "fields": [
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "tod", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "micros", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "e", "type": {"type": "enum", "name": "Colour", "symbols": ["RED"]}},
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
    ]}
    assert avro_to_sql(record) == _struct(
        DEC=T.Decimal(6, 2), DAY=T.DATE, TOD=T.TIME, TS=T.TIMESTAMP, MICROS=T.BIGINT, E=T.STRING, FX=T.BYTES,
    )


def test_avro_optional_nested_types_and_named_references() -> None:
    record = {"type": "record", "name": "Outer", "namespace": "com.example", "fields": [
        {"name": "address", "type": ["null", {"type": "record", "name": "Address",
                                             "fields": [{"name": "city", "type": "string"}]}]},
        {"name": "previous", "type": {"type": "array", "items": "Address"}},
        {"name": "by_name", "type": {"type": "map", "values": ["null", "com.example.Address"]}},
    ]}
    address = _struct(CITY=T.STRING)
    assert avro_to_sql(record) == _struct(
        ADDRESS=address, PREVIOUS=T.Array(address), BY_NAME=T.Map(T.STRING, address)
    )


def test_avro_names_are_kept_when_asked() -> None:
    record = {"type": "record", "name": "r", "fields": [
        {"name": "c1", "type": {"type": "record", "name": "n", "fields": [{"name": "inner", "type": "int"}]}},
    ]}
    assert avro_to_sql(record, keep_names=True) == _struct(c1=_struct(inner=T.INTEGER))


def test_avro_union_of_several_types_is_a_struct_of_its_members() -> None:
    assert avro_to_sql(["null", "int", "string"]) == _struct(INT=T.INTEGER, STRING=T.STRING)


def test_avro_union_members_without_a_name_are_named_by_their_type() -> None:
    union = ["null", "string", {"type": "array", "items": "int"}, {"type": "map", "values": "long"}]
    assert avro_to_sql(union) == _struct(STRING=T.STRING, ARRAY=T.Array(T.INTEGER), MAP=T.Map(T.STRING, T.BIGINT))


def test_avro_record_field_that_is_not_an_object_with_a_string_name_is_refused() -> None:
    not_an_object = {"type": "record", "name": "Order", "namespace": "com.example", "fields": ["oops"]}
    with pytest.raises(SchemaTranslationError, match=r"^Invalid Avro field in record 'com\.example\.Order'$"):
        avro_to_sql(not_an_object)
    name_not_a_string = {"type": "record", "name": "Order", "fields": [{"name": 5, "type": "int"}]}
    with pytest.raises(SchemaTranslationError, match=r"^Invalid Avro field in record 'Order'$"):
        avro_to_sql(name_not_a_string)


# ---------------------------------------------------------------------- JSON_SR


def test_json_schema_connect_types() -> None:
    schema = {"type": "object", "properties": {
        "i": {"type": "integer", "connect.type": "int32"},
        "l": {"type": "integer", "connect.type": "int64"},
        "plain": {"type": "integer"},
        "d": {"type": "number"},
        "dec": {"type": "number", "title": "org.apache.kafka.connect.data.Decimal",
                "connect.parameters": {"scale": "2", "connect.decimal.precision": "4"}},
        "s": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "y": {"type": "string", "connect.type": "bytes"},
        "ts": {"type": "integer", "title": "org.apache.kafka.connect.data.Timestamp"},
        "arr": {"type": "array", "items": {"type": "boolean"}},
        "m": {"type": "object", "additionalProperties": {"type": "number"}, "connect.type": "map"},
    }}
    assert json_schema_to_sql(schema) == _struct(
        I=T.INTEGER, L=T.BIGINT, PLAIN=T.BIGINT, D=T.DOUBLE, DEC=T.Decimal(4, 2), S=T.STRING, Y=T.BYTES,
        TS=T.TIMESTAMP, ARR=T.Array(T.BOOLEAN), M=T.Map(T.STRING, T.DOUBLE),
    )


def test_json_schema_orders_fields_by_connect_index_and_follows_local_refs() -> None:
    schema = {
        "type": "object",
        "properties": {
            "second": {"type": "string", "connect.index": 1},
            "first": {"$ref": "#/definitions/point", "connect.index": 0},
        },
        "definitions": {"point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    assert json_schema_to_sql(schema) == _struct(FIRST=_struct(X=T.BIGINT), SECOND=T.STRING)


def test_json_schema_enum_without_type_is_a_string_and_null_or_unknown_types_are_refused() -> None:
    schema = {"type": "object", "properties": {"c": {"enum": ["red", "green"]}}}
    assert json_schema_to_sql(schema) == _struct(C=T.STRING)
    with pytest.raises(SchemaTranslationError, match="^JSON schema type 'null' has no SQL type$"):
        json_schema_to_sql({"type": "null"})
    with pytest.raises(SchemaTranslationError, match="^JSON schema type 'null' has no SQL type$"):
        json_schema_to_sql({"oneOf": [{"type": "null"}]})
    with pytest.raises(SchemaTranslationError, match='^JSON schema type "date" is not supported$'):
        json_schema_to_sql({"type": "date"})


def test_json_schema_reference_outside_the_document_or_looping_on_itself_is_not_supported() -> None:
    with pytest.raises(
        SchemaTranslationError, match=r"^JSON schema reference 'other\.json#/definitions/x' is not supported$"
    ):
        json_schema_to_sql({"$ref": "other.json#/definitions/x"})
    looping = {
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/loop"}},
        "definitions": {"loop": {"$ref": "#/definitions/loop"}},
    }
    with pytest.raises(SchemaTranslationError, match="^JSON schema reference '#/definitions/loop' is not supported$"):
        json_schema_to_sql(looping)


def test_json_schema_object_with_properties_is_a_struct_even_with_additional_properties() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
    assert json_schema_to_sql(schema) == _struct(A=T.BIGINT)
    assert json_schema_to_sql({"type": "object", "additionalProperties": {"type": "string"}}) == T.Map(
        T.STRING, T.STRING
    )


def test_json_schema_nesting_and_reference_chains_are_followed_up_to_their_limits() -> None:
    # 40 nested objects: deep, not recursive (the limit is 64 levels).
    nested: dict[str, object] = {"type": "string"}
    for _ in range(40):
        nested = {"type": "object", "properties": {"n": nested}}
    inner = json_schema_to_sql(nested)
    for _ in range(40):
        assert isinstance(inner, T.Struct) and [f.name for f in inner.fields] == ["N"]
        inner = inner.fields[0].type
    assert inner == T.STRING
    # A chain of 33 references (the root's and d0 ... d31) resolves; one more does not.
    definitions: dict[str, object] = {f"d{i}": {"$ref": f"#/definitions/d{i + 1}"} for i in range(32)}
    definitions["d32"] = {"type": "string"}
    assert json_schema_to_sql({"$ref": "#/definitions/d0", "definitions": definitions}) == T.STRING
    longer = {**definitions, "d32": {"$ref": "#/definitions/d33"}, "d33": {"type": "string"}}
    with pytest.raises(SchemaTranslationError, match="^JSON schema reference '#/definitions/d33' is not supported$"):
        json_schema_to_sql({"$ref": "#/definitions/d0", "definitions": longer})


def test_json_schema_one_of_that_is_not_a_list_is_refused() -> None:
    with pytest.raises(SchemaTranslationError, match="^JSON schema 'oneOf' must be a list$"):
        json_schema_to_sql({"oneOf": {"type": "string"}})


def test_json_schema_union_of_several_non_null_types_is_refused() -> None:
    message = "^JSON schema unions of several types are not supported$"
    with pytest.raises(SchemaTranslationError, match=message):
        json_schema_to_sql({"oneOf": [{"type": "string"}, {"type": "null"}, {"type": "integer"}]})
    with pytest.raises(SchemaTranslationError, match=message):
        json_schema_to_sql({"type": "object", "properties": {"u": {"type": ["string", "integer"]}}})


# ---------------------------------------------------------------------- PROTOBUF

PROTO = """
syntax = "proto3";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "confluent/type/decimal.proto";
import "confluent/meta.proto";

enum Color { RED = 0; GREEN = 1; }

message Order {
  Color color = 1;
  google.protobuf.Timestamp at = 2;
  google.protobuf.Int32Value maybe = 3;
  Item item = 4;
  repeated string tags = 5;
  confluent.type.Decimal amount = 6 [(confluent.field_meta) = {
    params: [ { key: "precision", value: "8" }, { key: "scale", value: "3" } ] }];
  confluent.type.Decimal loose = 7 [(confluent.field_meta) = {
    params: [ { key: "precision" }, { key: "scale", value: "2" } ] }];
}

message Item { string name = 1; }
"""


def test_protobuf_messages_enums_well_known_types_and_decimals_map_as_ksqldb_maps_them() -> None:
    # A top-level enum of a schema without a package is a STRING; a decimal parameter
    # without a value is ignored (the precision keeps its default of 64).
    assert protobuf_to_sql(PROTO) == _struct(
        COLOR=T.STRING, AT=T.TIMESTAMP, MAYBE=T.INTEGER, ITEM=_struct(NAME=T.STRING),
        TAGS=T.Array(T.STRING), AMOUNT=T.Decimal(8, 3), LOOSE=T.Decimal(64, 2),
    )


def test_protobuf_fully_qualified_type_names_resolve_to_their_message_or_enum() -> None:
    schema = """
    syntax = "proto3";
    package shop;
    enum Color { RED = 0; }
    message Order { .shop.Item item = 1; .shop.Color color = 2; }
    message Item { string name = 1; }
    """
    assert protobuf_to_sql(schema) == _struct(ITEM=_struct(NAME=T.STRING), COLOR=T.STRING)
    unknown = 'syntax = "proto3"; package shop; message Order { .other.Item item = 1; }'
    with pytest.raises(SchemaTranslationError, match=r"^Unknown protobuf type '\.other\.Item'$"):
        protobuf_to_sql(unknown)


def test_a_recursive_protobuf_message_is_refused() -> None:
    itself = 'syntax = "proto3"; message Node { string name = 1; Node next = 2; }'
    with pytest.raises(SchemaTranslationError, match=r"^Recursive protobuf message 'Node' is not supported$"):
        protobuf_to_sql(itself)
    each_other = 'syntax = "proto3"; message A { B b = 1; } message B { repeated A a = 1; }'
    with pytest.raises(SchemaTranslationError, match=r"^Recursive protobuf message 'A' is not supported$"):
        protobuf_to_sql(each_other)


# ---------------------------------------------------------------------- columns and errors


def _avro(schema: object) -> RegisteredSchema:
    return RegisteredSchema("AVRO", json.dumps(schema))


def test_a_key_is_one_rowkey_column_and_an_unwrapped_value_one_rowval_column() -> None:
    record = {"type": "record", "name": "k", "fields": [{"name": "a", "type": "int"}]}
    key = infer_columns(_avro(record), fmt="AVRO", topic="t", is_key=True, unwrapped=False, keep_names=False)
    assert key == (("ROWKEY", _struct(A=T.INTEGER)),)
    value = infer_columns(_avro("long"), fmt="AVRO", topic="t", is_key=False, unwrapped=True, keep_names=False)
    assert value == (("ROWVAL", T.BIGINT),)


def test_a_wrapped_value_must_be_a_record() -> None:
    with pytest.raises(AnalysisError) as info:
        infer_columns(_avro("long"), fmt="AVRO", topic="t", is_key=False, unwrapped=False, keep_names=False)
    message = str(info.value)
    assert message.startswith(
        "Unable to verify if the value schema for topic: t is compatible with ksqlDB.\n"
        "Reason: Schema returned from schema registry is anonymous type. To use this schema with "
        "ksqlDB, set 'WRAP_SINGLE_VALUE=false' in the WITH clause properties.\n"
    )


def test_a_schema_without_sql_type_names_the_topic_and_reason() -> None:
    record = {"type": "record", "name": "r", "fields": [{"name": "n", "type": "null"}]}
    with pytest.raises(AnalysisError, match="Reason: Avro type 'null' has no SQL type"):
        infer_columns(_avro(record), fmt="AVRO", topic="t", is_key=False, unwrapped=False, keep_names=False)


def test_a_schema_of_another_type_than_the_format_is_refused() -> None:
    json_schema = RegisteredSchema("JSON", '{"type": "integer"}')
    with pytest.raises(AnalysisError) as info:
        infer_columns(json_schema, fmt="AVRO", topic="t", is_key=True, unwrapped=False, keep_names=False)
    assert str(info.value) == (
        "Key schema is not in the expected format. You may want to set KEY_FORMAT to 'JSON'.\n"
        "topic: t\nexpected format: AVRO\nactual format from Schema Registry: JSON"
    )
    with pytest.raises(AnalysisError) as info:
        infer_columns(json_schema, fmt="PROTOBUF", topic="t", is_key=False, unwrapped=False, keep_names=True,
                      schema_id=7)
    assert str(info.value).startswith(
        "Value schema is not in the expected format. You may want to set VALUE_FORMAT to 'JSON'.\n"
        "topic: t, schema id: 7\nexpected format: PROTOBUF"
    )


def test_an_unreadable_schema_is_refused_in_ksqldbs_words() -> None:
    with pytest.raises(AnalysisError) as info:
        infer_columns(_avro("long"), fmt="AVRO", topic="t", is_key=False, unwrapped=False, keep_names=True,
                      schema_id=3)
    lines = str(info.value).split("\n")
    assert lines[0] == "Unable to verify if the value schema for topic: t, schema id: 3 is compatible with ksqlDB."
    assert lines[1].startswith("Reason: ")
    assert lines[3:6] == [
        "Please see https://github.com/confluentinc/ksql/issues/ to see if this particular reason is already known.",
        "If not, please log a new issue, including this full error message.",
        'Schema:"long"',
    ]


def test_a_schema_read_as_avro_for_want_of_a_type_is_parsed_as_the_format() -> None:
    proto = RegisteredSchema("AVRO", 'syntax = "proto3"; message K { string k1 = 1; }')
    assert infer_columns(proto, fmt="PROTOBUF", topic="t", is_key=True, unwrapped=False, keep_names=True) == (
        ("k1", T.STRING),
    )
    with pytest.raises(AnalysisError, match="Reason: Invalid protobuf schema"):
        infer_columns(_avro("int"), fmt="PROTOBUF", topic="t", is_key=True, unwrapped=False, keep_names=False)


def test_fetch_reads_the_latest_version_or_the_given_id() -> None:
    url = f"mock://test-inference-{uuid.uuid4()}"
    client = registry_client(url)
    try:
        first = client.register_schema("orders-value", Schema('"int"', "AVRO"))
        client.register_schema("orders-value", Schema('"long"', "AVRO"))
        latest = fetch_schema(url, "orders", is_key=False, schema_id=None)
        assert (latest.text, latest.schema_type) == ('"long"', "AVRO")
        assert fetch_schema(url, "orders", is_key=False, schema_id=first).text == '"int"'
    finally:
        forget_registry_client(url)


def test_fetch_of_a_missing_subject_or_id_uses_ksqldbs_message() -> None:
    url = f"mock://test-inference-{uuid.uuid4()}"
    try:
        with pytest.raises(AnalysisError) as info:
            fetch_schema(url, "orders", is_key=True, schema_id=None)
        assert str(info.value).split("\n") == [
            "Schema for message keys on topic 'orders' does not exist in the Schema Registry.",
            "Subject: orders-key",
            "Possible causes include:",
            "- The topic itself does not exist",
            "\t-> Use SHOW TOPICS; to check",
            "- Messages on the topic are not serialized using a format Schema Registry supports",
            "\t-> Use PRINT 'orders' FROM BEGINNING; to verify",
            "- Messages on the topic have not been serialized using a Confluent Schema Registry supported serializer",
            "\t-> See https://docs.confluent.io/current/schema-registry/docs/serializer-formatter.html",
            "- The schema is registered on a different instance of the Schema Registry",
            "\t-> Use the REST API to list available subjects"
            "\thttps://docs.confluent.io/current/schema-registry/docs/api.html#get--subjects",
            "- You do not have permissions to access the Schema Registry.",
            "\t-> See https://docs.confluent.io/current/schema-registry/docs/security.html",
        ]
        with pytest.raises(AnalysisError) as info:
            fetch_schema(url, "orders", is_key=False, schema_id=42)
        assert str(info.value).startswith(
            "Schema for message values on topic 'orders' does not exist in the Schema Registry.\n"
            "Subject: orders-value\nSchema Id: 42\nPossible causes include:\n"
        )
    finally:
        forget_registry_client(url)


def test_a_registry_failure_is_quoted_by_its_first_line_cut_at_300_characters(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Failing:
        def get_latest_version(self, subject: str) -> object:
            raise ConnectionError("x" * 400 + "\nsecond line")

    monkeypatch.setattr("engine.serde.registry.registry_client", lambda url: Failing())
    with pytest.raises(AnalysisError) as info:
        fetch_schema("http://registry:8081", "orders", is_key=False, schema_id=None)
    assert str(info.value) == (
        "Cannot read the value schema of topic 'orders' from the schema registry at "
        "http://registry:8081: " + "x" * 300
    )


def test_fetch_without_a_registry_says_how_to_configure_one() -> None:
    with pytest.raises(AnalysisError, match="please set ksql.schema.registry.url"):
        fetch_schema(None, "orders", is_key=False, schema_id=None)


@pytest.mark.parametrize(("fmt", "text"), [
    ("AVRO", json.dumps({"type": "record", "name": "v", "fields": []})),
    ("JSON", json.dumps({"type": "object", "properties": {}})),
    ("PROTOBUF", 'syntax = "proto3"; message V {}'),
])
def test_a_value_record_without_fields_gives_no_columns_and_is_refused(fmt: str, text: str) -> None:
    registered = RegisteredSchema(fmt, text)
    wanted = {"JSON": "JSON_SR"}.get(fmt, fmt)
    with pytest.raises(AnalysisError) as info:
        infer_columns(registered, fmt=wanted, topic="t", is_key=False, unwrapped=False, keep_names=False)
    assert str(info.value).startswith(
        "Unable to verify if the value schema for topic: t is compatible with ksqlDB.\n"
        "Reason: Schema does not include any columns with types that ksqlDB supports.\nschema: \n"
    )
