"""REST QTT files: comments, format expansion, case keys and clear errors for bad input."""

from __future__ import annotations

import decimal
from pathlib import Path

import pytest

from qtt.rest.loader import load_rest_file, load_rest_paths

GOOD = """{
  "comments": ["a file of our own"],
  "tests": [
    {
      "name": "push rows", // a comment outside strings
      "format": ["JSON", "DELIMITED"],
      "statements": [
        "CREATE STREAM S (K STRING KEY, V INT) WITH (kafka_topic='t', value_format='{FORMAT}');",
        "SELECT * FROM S EMIT CHANGES LIMIT 1;"
      ],
      "properties": {"ksql.query.pull.table.scan.enabled": true},
      "inputs": [{"topic": "t", "key": "a", "value": {"V": 1}, "timestamp": 0}],
      "outputs": [{"topic": "t", "key": "a", "value": {"V": 1}, "headers": []}],
      "responses": [
        {"admin": {"@type": "currentStatus"}},
        {"query": [
          {"header": {"schema": "`K` STRING, `V` INTEGER"}},
          {"row": {"columns": ["a", 1.50]}},
          {"finalMessage": "Limit Reached"}
        ]}
      ]
    },
    {
      "name": "bad insert",
      "statements": ["INSERT INTO NOPE VALUES (1);"],
      "expectedError": {
        "type": "io.confluent.ksql.rest.entity.KsqlStatementErrorMessage",
        "message": "does not exist",
        "status": 400
      },
      "inputConditions": {"waitForActivePushQuery": true},
      "notes": "anything", "comment": "anything"
    },
    {"name": "off", "enabled": false, "statements": ["SHOW STREAMS;"]}
  ]
}
"""


def _write(tmp_path: Path, text: str, name: str = "cases.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_file_loads_with_format_expansion(tmp_path: Path) -> None:
    loaded = load_rest_file(_write(tmp_path, GOOD))
    assert loaded.problems == ()
    assert [c.id for c in loaded.cases] == [
        "cases - push rows - JSON",
        "cases - push rows - DELIMITED",
        "cases - bad insert",
    ]
    assert loaded.disabled == ("cases - off",)
    first = loaded.cases[0]
    assert "value_format='JSON'" in first.statements[0]
    assert "value_format='DELIMITED'" in loaded.cases[1].statements[0]
    assert first.properties == {"ksql.query.pull.table.scan.enabled": True}
    assert first.inputs[0].timestamp == 0 and first.inputs[0].value == {"V": 1}
    assert first.outputs_with_headers == frozenset({0})
    assert [r.kind for r in first.responses] == ["admin", "query"]
    assert first.responses[1].query is not None
    assert first.responses[1].query[1]["row"]["columns"][1] == decimal.Decimal("1.50")
    bad = loaded.cases[2]
    assert bad.expected_error is not None and bad.expected_error.status == 400
    assert bad.expected_error.type == "io.confluent.ksql.rest.entity.KsqlStatementErrorMessage"
    assert bad.expected_error.message == "does not exist"
    assert bad.wait_for_active_push_query is True


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ('{"name": "x", "statements": ["S;"], "testPullWithProtoFormat": "yes"}',
         "Expected 'testPullWithProtoFormat' in case to be a boolean"),
        (
            '{"name": "x", "statements": ["S;"], "responses": [{"query": [{"row": {"protobufBytes": 1}}]}]}',
            "Expected 'protobufBytes' in responses[0].query[0].row to be a string",
        ),
        ('{"statements": ["S;"]}', "Required key 'name' is missing from case"),
        ('{"name": "x", "statements": []}', "Key 'statements' is empty"),
        (
            '{"name": "x", "statements": ["S;"], "responses": [{"admin": {}}, {"admin": {}}]}',
            "2 responses for 1 statements",
        ),
        ('{"name": "x", "statements": ["S;"], "responses": [{"rows": []}]}', "'admin' or 'query'"),
        (
            '{"name": "x", "statements": ["S;"], "responses": [{"query": [{"row": {}}]}]}',
            "Required key 'columns' is missing from responses[0].query[0].row",
        ),
        (
            '{"name": "x", "statements": ["S;"], "expectedError": {"type": "Oops"}}',
            "Error type 'Oops' in expectedError is not known",
        ),
        (
            '{"name": "x", "statements": ["S;"], "expectedError": '
            '{"type": "io.confluent.ksql.rest.entity.KsqlErrorMessage", "status": "400"}}',
            "Expected 'status' in expectedError to be an integer",
        ),
        (
            '{"name": "x", "statements": ["S;"], "inputs": [{"topic": "t"}]}',
            "Record inputs[0] has no 'value'",
        ),
    ],
)
def test_a_malformed_case_is_a_problem_naming_file_and_case(
    tmp_path: Path, case: str, message: str
) -> None:
    text = '{"tests": [' + case + ', {"name": "fine", "statements": ["S;"]}]}'
    path = _write(tmp_path, text)
    loaded = load_rest_file(path)
    assert [c.name for c in loaded.cases] == ["fine"]
    (problem,) = loaded.problems
    assert message in problem.message
    assert str(path) in str(problem)
    if '"name": "x"' in case:
        assert "case 'x'" in str(problem)


def test_a_file_that_is_not_json_is_one_problem(tmp_path: Path) -> None:
    loaded = load_rest_file(_write(tmp_path, '{"tests": [ /* never closed'))
    (problem,) = loaded.problems
    assert "never closed" in problem.message
    assert loaded.cases == ()


def test_duplicate_case_names_are_refused(tmp_path: Path) -> None:
    text = '{"tests": [{"name": "a", "statements": ["S;"]}, {"name": "a", "statements": ["T;"]}]}'
    loaded = load_rest_file(_write(tmp_path, text))
    assert len(loaded.cases) == 1
    assert "already used" in loaded.problems[0].message


def test_paths_are_discovered_and_filtered(tmp_path: Path) -> None:
    _write(tmp_path, GOOD, "one.json")
    files = load_rest_paths([tmp_path], filter="DELIMITED")
    assert [c.id for f in files for c in f.cases] == ["one - push rows - DELIMITED"]
    with pytest.raises(FileNotFoundError, match="neither a file nor a folder"):
        load_rest_paths([tmp_path / "missing"])


def test_the_project_rest_cases_load_without_problems() -> None:
    root = Path(__file__).parents[1] / "rest_cases"
    files = load_rest_paths([root])
    assert files, "tests/rest_cases holds no file"
    assert [str(p) for f in files for p in f.problems] == []
    assert sum(len(f.cases) for f in files) >= 10


def test_keys_ksqldbs_model_does_not_read_are_ignored_and_named(tmp_path: Path) -> None:
    # ksqlDB's test JSON mapper does not fail on unknown properties: such a case still runs.
    path = _write(tmp_path, '{"tests": [{"name": "x", "statements": ["S;"], "surprise": 1, "also": {}}]}')
    loaded = load_rest_file(path)
    assert loaded.problems == ()
    (case,) = loaded.cases
    assert case.ignored_keys == ("also", "surprise")


def test_protobuf_pull_cases_load_their_proto_rows(tmp_path: Path) -> None:
    text = """{"tests": [{
      "name": "proto", "testPullWithProtoFormat": true,
      "statements": ["CREATE TABLE T (K STRING PRIMARY KEY, V INT) WITH (kafka_topic='t', value_format='JSON');",
                     "SELECT * FROM T WHERE K = 'a';"],
      "responses": [
        {"admin": {"@type": "currentStatus"}},
        {"query": [{"header": {"protoSchema": "syntax = \\"proto3\\";"}}, {"row": {"protobufBytes": "CgFh"}}]}
      ]}, {"name": "plain", "statements": ["S;"]}]}"""
    loaded = load_rest_file(_write(tmp_path, text))
    assert loaded.problems == ()
    proto, plain = loaded.cases
    assert proto.pull_protobuf is True and plain.pull_protobuf is False
    assert proto.responses[1].query[1] == {"row": {"protobufBytes": "CgFh"}}


def test_declared_topics_are_read_in_qtts_topic_form(tmp_path: Path) -> None:
    text = """{"tests": [{"name": "t", "statements": ["SHOW TOPICS;"], "topics": [
      {"name": "orders", "keyFormat": "KAFKA", "valueFormat": "AVRO", "partitions": 3,
       "valueSchema": {"type": "record", "name": "R", "fields": [{"name": "V", "type": "int"}]}, "valueSchemaId": 5}
    ]}]}"""
    (case,) = load_rest_file(_write(tmp_path, text)).cases
    (topic,) = case.topics
    assert (topic.name, topic.key_format, topic.value_format, topic.partitions) == ("orders", "KAFKA", "AVRO", 3)
    assert topic.value_schema_id == 5 and topic.value_schema["name"] == "R"
    bad = load_rest_file(_write(tmp_path, '{"tests": [{"name": "t", "statements": ["S;"], "topics": [{"partitions": 1}]}]}'))
    assert "Required key 'name' is missing from topics[0]" in bad.problems[0].message
