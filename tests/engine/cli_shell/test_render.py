"""The CLI's renderers: entities and rows as ksqlDB's CLI prints them (no server)."""

from __future__ import annotations

import json

from engine.cli_shell import render
from engine.cli_shell.client import json_messages


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_a_list_of_streams_is_a_table_with_a_dashed_rule_under_its_header() -> None:
    entity = {"@type": "streams", "statementText": "SHOW STREAMS;", "warnings": [], "streams": [
        {"type": "STREAM", "name": "ORDERS", "topic": "orders", "keyFormat": "KAFKA", "valueFormat": "JSON",
         "isWindowed": False}]}
    lines = _lines(render.entities([entity], width=100))
    assert lines[0] == ""
    assert lines[1].split("|") == [" Stream Name ", " Kafka Topic ", " Key Format ", " Value Format ", " Windowed"]
    assert set(lines[2]) == {"-"} and set(lines[4]) == {"-"}
    assert [c.strip() for c in lines[3].split("|")] == ["ORDERS", "orders", "KAFKA", "JSON", "false"]


def test_several_entities_are_each_printed_after_their_statement_and_warnings_follow() -> None:
    created = {"@type": "currentStatus", "statementText": "CREATE STREAM A ...;", "warnings": [{"message": "careful"}],
               "commandStatus": {"status": "SUCCESS", "message": "Stream created\nsecond line"}}
    dropped = {**created, "statementText": "DROP STREAM A;", "warnings": [],
               "commandStatus": {"status": "SUCCESS", "message": "Source `A` (topic: a) was dropped."}}
    text = render.entities([created, dropped], width=80)
    assert text.index("CREATE STREAM A ...;") < text.index("Stream created") < text.index("WARNING: careful") \
        < text.index("DROP STREAM A;") < text.index("Source `A` (topic: a) was dropped.")
    assert "second line" not in text
    assert json.loads(render.entities([created], output="JSON")) == [created]


def test_queries_show_their_status_count_and_the_explain_hint() -> None:
    entity = {"@type": "queries", "statementText": "SHOW QUERIES;", "warnings": [], "queries": [
        {"id": "CSAS_B_0", "queryType": "PERSISTENT", "statusCount": {"RUNNING": 1}, "sinks": ["B"],
         "sinkKafkaTopics": ["b"], "queryString": "CREATE STREAM B AS\n  SELECT * FROM A;"}]}
    text = render.entities([entity], width=160)
    row = [c.strip() for c in _lines(text)[3].split("|")]
    assert row == ["CSAS_B_0", "PERSISTENT", "RUNNING:1", "B", "b", "CREATE STREAM B AS SELECT * FROM A;"]
    assert text.rstrip().endswith("For detailed information on a Query run: EXPLAIN <Query ID>;")


def test_describe_prints_names_and_types_with_key_marks_and_extended_topic_details() -> None:
    description = {"name": "T", "type": "TABLE", "windowType": "TUMBLING", "extended": False, "fields": [
        {"name": "K", "type": "KEY", "schema": {"type": "STRING", "fields": None, "memberSchema": None}},
        {"name": "S", "schema": {"type": "STRUCT", "memberSchema": None, "fields": [
            {"name": "A", "schema": {"type": "ARRAY", "fields": None,
                                     "memberSchema": {"type": "INTEGER", "fields": None, "memberSchema": None}}}]}},
        {"name": "D", "schema": {"type": "DECIMAL", "fields": None, "memberSchema": None,
                                 "parameters": {"precision": 4, "scale": 2}}}]}
    text = render.entities([{"@type": "sourceDescription", "statementText": "DESCRIBE T;", "warnings": [],
                             "sourceDescription": description}], width=100)
    assert text.startswith("\nName                 : T\n")
    assert "STRING           (primary key) (Window type: TUMBLING)" in text
    assert "STRUCT<`A` ARRAY<INTEGER>>" in text and "DECIMAL(4, 2)" in text
    assert text.rstrip().endswith("For runtime statistics and query details run: DESCRIBE <Stream,Table> EXTENDED;")

    extended = {**description, "type": "STREAM", "extended": True, "topic": "t", "partitions": 3, "replication": 1,
                "keyFormat": "KAFKA", "valueFormat": "JSON", "timestamp": "", "statement": "CREATE STREAM T ...;",
                "readQueries": [{"id": "CSAS_U_1", "state": "RUNNING", "queryString": "CREATE STREAM U AS SELECT * FROM T;"}],
                "writeQueries": [], "statistics": "messages-per-sec: 1", "errorStats": "", "windowType": None}
    text = render.source_description(extended, width=100)
    assert "Kafka topic          : t (partitions: 3, replication: 1)\n" in text
    assert "Timestamp field      : Not set - using <ROWTIME>\n" in text
    assert "STRING           (key)" in text and "(primary key)" not in text
    assert "Queries that read from this STREAM" in text
    assert "CSAS_U_1 (RUNNING) : CREATE STREAM U AS SELECT * FROM T;" in text
    assert "Local runtime statistics" in text and "messages-per-sec: 1" in text


def test_explain_prints_the_query_its_sources_sinks_and_plan() -> None:
    query = {"id": "CSAS_B_0", "queryType": "PERSISTENT", "statementText": "CREATE STREAM B AS SELECT * FROM A;",
             "ksqlHostQueryStatus": {"127.0.0.1:8088": "RUNNING"}, "fields": [], "sources": ["A"], "sinks": ["B"],
             "executionPlan": " > [ SINK ] | ctx: B\n", "topology": "", "overriddenProperties": {"x.y": 1}}
    text = render.entities([{"@type": "queryDescription", "queryDescription": query}], width=100)
    assert text.startswith("\nID                   : CSAS_B_0\nQuery Type           : PERSISTENT\n")
    assert "Host Query Status    : {127.0.0.1:8088=RUNNING}" in text
    assert "Sources that this query reads from: \n-----------------------------------\nA\n" in text
    assert "Execution plan      \n--------------      \n > [ SINK ] | ctx: B" in text
    assert "Overridden Properties" in text and "x.y" in text


def test_an_unknown_entity_prints_as_json() -> None:
    entity = {"@type": "something_new", "statementText": "X;", "x": 1}
    assert json.loads(render.entity_text(entity)) == entity


def test_rows_are_framed_in_columns_that_share_the_width_and_long_values_wrap() -> None:
    rows = render.RowFormat(["ID", "VALUE"], width=21)
    assert rows.column_width == 9
    assert rows.header() == "+---------+---------+\n|ID       |VALUE    |\n+---------+---------+\n"
    assert rows.row(["a", {"k": [1, None]}]) == '|a        |{"k":[1,n|\n|         |ull]}    |\n'
    assert rows.row(["b", None], tombstone=True) == "|b        |<TOMBSTON|\n|         |E>       |\n"
    assert rows.row([None, True]) == "|null     |true     |\n"


def test_query_messages_are_read_as_each_object_completes() -> None:
    chunks = ['[{"header":{"queryId":"q"', '}},\n{"row":{"columns":[1,"]}"]}}', ",\n", '{"row":{"co',
              'lumns":[2]}},\n{"finalMessage":"Limit Reached"}]\n']
    messages = json_messages(iter(chunks))
    assert next(messages) == {"header": {"queryId": "q"}}
    # the row is out before the separator that follows it has come
    assert next(messages) == {"row": {"columns": [1, "]}"]}}
    assert list(messages) == [{"row": {"columns": [2]}}, {"finalMessage": "Limit Reached"}]
