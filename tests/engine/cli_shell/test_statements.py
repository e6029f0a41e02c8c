"""The CLI's statement splitter and classifier (no server)."""

from __future__ import annotations

import pytest

from engine.cli_shell.statements import (
    LocalCommand,
    classify,
    is_complete,
    local_command,
    schema_column_names,
    split_statements,
    substitute,
)


def test_statements_split_at_semicolons_outside_quotes_and_comments() -> None:
    text = ("CREATE STREAM S (A STRING) WITH (KAFKA_TOPIC='a;b', VALUE_FORMAT='JSON');\n"
            "-- a comment; with a semicolon\n"
            "INSERT INTO S (A) VALUES ('it''s; fine'); /* also; here */ SELECT `x;y` FROM S EMIT CHANGES;")
    split = split_statements(text)
    assert split.statements == (
        "CREATE STREAM S (A STRING) WITH (KAFKA_TOPIC='a;b', VALUE_FORMAT='JSON');",
        "-- a comment; with a semicolon\nINSERT INTO S (A) VALUES ('it''s; fine');",
        "/* also; here */ SELECT `x;y` FROM S EMIT CHANGES;",
    )
    assert split.rest == ""


def test_an_unfinished_statement_is_the_rest_and_is_not_complete() -> None:
    split = split_statements("SHOW STREAMS; SELECT * FROM S\nWHERE A = 'x;")
    assert split.statements == ("SHOW STREAMS;",)
    assert split.rest == " SELECT * FROM S\nWHERE A = 'x;"
    assert not is_complete("SELECT * FROM S")
    assert not is_complete("SELECT * FROM S WHERE A = ';")
    assert is_complete("SELECT * FROM S\n  EMIT CHANGES;  -- trailing comment")
    assert split_statements("-- only a comment\n/* and another */").rest == ""


@pytest.mark.parametrize(("line", "expected"), [
    ("help", LocalCommand("help")),
    ("HELP;", LocalCommand("help")),
    ("  exit  ", LocalCommand("exit")),
    ("history", LocalCommand("history")),
    ("OUTPUT json", LocalCommand("output", "json")),
    ("output", LocalCommand("output")),
    ("SPOOL '/tmp/my spool.txt';", LocalCommand("spool", "/tmp/my spool.txt")),
    ("spool off", LocalCommand("spool", "off")),
    ("RUN SCRIPT '/tmp/a.sql';", LocalCommand("run_script", "/tmp/a.sql")),
    ("run script /tmp/a.sql", LocalCommand("run_script", "/tmp/a.sql")),
    ("SHOW STREAMS;", None),
    ("exit now", None),
])
def test_cli_commands_are_whole_lines(line, expected) -> None:
    assert local_command(line) == expected
    if expected is not None:
        assert is_complete(line)


def test_statements_the_shell_keeps_are_told_from_server_statements() -> None:
    s = classify("SET 'auto.offset.reset'='earliest';")
    assert (s.kind, s.name, s.value) == ("set", "auto.offset.reset", "earliest")
    s = classify("unset 'auto.offset.reset';")
    assert (s.kind, s.name) == ("unset", "auto.offset.reset")
    s = classify("DEFINE topic = 'it''s';")
    assert (s.kind, s.name, s.value) == ("define", "topic", "it's")
    assert classify("UNDEFINE topic;").kind == "undefine"
    assert classify("SHOW VARIABLES;").kind == "variables"
    assert classify("list variables;").kind == "variables"
    push = classify("SELECT * FROM S\nEMIT CHANGES LIMIT 2;")
    assert (push.kind, push.push) == ("query", True)
    pull = classify("-- pull\nselect * from T where K = 'EMIT CHANGES';")
    assert (pull.kind, pull.push) == ("query", False)
    assert classify("PRINT 'topic' FROM BEGINNING;").kind == "print"
    for text in ("SHOW STREAMS;", "CREATE STREAM S AS SELECT * FROM T;", "INSERT INTO S VALUES (1);",
                 "SET CONFIG;"):
        assert classify(text).kind == "server", text


def test_variables_substitute_case_insensitively_and_unknown_ones_stay() -> None:
    assert substitute("SELECT * FROM ${Source} WHERE A = '${other}';", {"source": "S"}) == \
        "SELECT * FROM S WHERE A = '${other}';"


def test_a_query_header_schema_gives_its_column_names() -> None:
    schema = "`ID` STRING KEY, `M` MAP<STRING, INTEGER>, `S` STRUCT<`A` INTEGER, `B` DECIMAL(4, 2)>, `odd``name` BIGINT"
    assert schema_column_names(schema) == ["ID", "M", "S", "odd`name"]
    assert schema_column_names("") == []
