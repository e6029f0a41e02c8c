"""Malformed input at every door a user opens: one clear error, never a traceback.

Each door is fed what hypothesis makes of its kind of input (text, JSON documents, bytes) and
must either take it or refuse it with the engine's own error (or a CLI's one-line exit), whose
message names what was wrong. Any other exception is a bug the test reports with its input.
The REST bodies have their own fuzz test (``tests/engine/server/test_http.py``), the input
records of ``kspark run --input`` theirs (``tests/engine/test_cli_input.py``).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import KsqlError

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=12,
)
SQL_WORDS = st.sampled_from([
    "CREATE", "STREAM", "TABLE", "AS", "SELECT", "*", "FROM", "WHERE", "GROUP", "BY", "WINDOW", "TUMBLING",
    "(", ")", ",", ";", "'x'", "1", "1.5", "ID", "`q`", "WITH", "KAFKA_TOPIC", "=", "INSERT", "INTO", "VALUES",
    "EMIT", "CHANGES", "JOIN", "ON", "PARTITION", "STRUCT<", ">", "ARRAY<", "MAP<", "->", "CASE", "WHEN", "END",
    "DROP", "DEFINE", "${v}", "--", "/*", "*/", "\n", "SIZE", "SECONDS", "KEY", "INT", "STRING",
])
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _one_line(message: str) -> None:
    assert message.strip(), "an error without a message"


@SETTINGS
@given(st.lists(SQL_WORDS, max_size=30).map(" ".join) | st.text(max_size=80))
def test_sql_statements_parse_or_raise_a_parse_error(text: str) -> None:
    from engine.parser import parse

    try:
        parse(text)
    except KsqlError as exc:
        _one_line(str(exc))


@settings(max_examples=60, deadline=None)
@given(st.lists(SQL_WORDS, max_size=25).map(" ".join))
def test_sql_statements_plan_or_raise_the_engines_error(text: str) -> None:
    from engine.facade.engine import KsqlEngine

    engine = KsqlEngine()
    engine.execute_sql("CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);")
    try:
        engine.execute_sql(text)
    except KsqlError as exc:
        _one_line(str(exc))


@SETTINGS
@given(JSON)
def test_plan_json_loads_or_raises_a_serde_error(document) -> None:
    from engine.plan import serde

    for load in (serde.statement_plan_from_json, serde.step_from_json, serde.command_from_json):
        try:
            load(document)
        except KsqlError as exc:
            _one_line(str(exc))


@SETTINGS
@given(st.lists(st.dictionaries(st.sampled_from(["name", "statements", "inputs", "outputs", "expectedException",
                                                  "format", "config", "properties", "topics", "post", "versions"]),
                                JSON, max_size=6), max_size=3) | JSON)
def test_qtt_case_files_load_or_report_their_problems(tmp_path, tests) -> None:
    from qtt.loader import load_file

    path = tmp_path / "case.json"
    path.write_text(json.dumps({"tests": tests} if isinstance(tests, list) else tests))
    loaded = load_file(path)
    for problem in loaded.problems:
        _one_line(str(problem))


@SETTINGS
@given(st.text(max_size=200))
def test_qtt_case_files_that_are_not_json_are_one_problem(tmp_path, text) -> None:
    from qtt.loader import load_file

    path = tmp_path / "case.json"
    path.write_text(text)
    load_file(path)  # a problem of the file, never an exception


@SETTINGS
@given(st.lists(st.text(max_size=30), max_size=8).map("\n".join))
def test_properties_files_read_or_exit_in_one_line(tmp_path, text) -> None:
    from engine.server.cli import read_config

    path = tmp_path / "server.properties"
    path.write_text(text)
    try:
        read_config(str(path))
    except SystemExit as exc:
        assert str(exc).startswith("kspark: ") and "\n" not in str(exc)


@pytest.mark.parametrize("content", [b"\xff\xfe\x00bad", b"name=value\n\x80\x81"])
def test_a_properties_file_that_is_not_utf8_is_one_line(tmp_path, content) -> None:
    from engine.server.cli import read_config

    path = tmp_path / "server.properties"
    path.write_bytes(content)
    with pytest.raises(SystemExit) as exited:
        read_config(str(path))
    assert str(exited.value).startswith(f"kspark: cannot read the config file {path}")


@pytest.mark.parametrize("command", ["plan", "run", "explain"])
def test_a_statements_file_that_is_not_utf8_is_one_line(tmp_path, command) -> None:
    from engine.cli import main

    path = tmp_path / "q.sql"
    path.write_bytes(b"CREATE STREAM \xff\xfe;")
    with pytest.raises(SystemExit) as exited:
        main([command, str(path)])
    assert str(exited.value) == f"kspark: cannot read {path}: byte 14 is not UTF-8 text."


def _serdes():
    from engine.builders.formats import serdes_for
    from engine.plan import types as T
    from engine.plan.schema import Column, Namespace
    from engine.plan.steps import Formats

    columns = [Column("K", T.STRING, Namespace.KEY), Column("A", T.INTEGER, Namespace.VALUE),
               Column("B", T.Array(T.DOUBLE), Namespace.VALUE), Column("C", T.STRING, Namespace.VALUE)]
    delimited = [c for c in columns if not isinstance(c.type, T.Array)]
    return [
        *serdes_for(Formats(key_format="KAFKA", value_format="JSON"), columns),
        *serdes_for(Formats(key_format="JSON", value_format="DELIMITED"), delimited),
        serdes_for(Formats(key_format="KAFKA", value_format="KAFKA"),
                   [columns[0], Column("A", T.BIGINT, Namespace.VALUE)])[1],
    ]


@SETTINGS
@given(st.binary(max_size=40) | JSON.map(lambda v: json.dumps(v).encode()))
def test_records_read_from_topics_decode_or_raise_a_record_serde_error(data: bytes) -> None:
    """What a topic may hold that its format does not expect: wrong formats, truncated bytes."""
    for serde in _serdes():
        try:
            serde.deserialize(serde.from_bytes(data))
        except KsqlError as exc:
            _one_line(str(exc))
