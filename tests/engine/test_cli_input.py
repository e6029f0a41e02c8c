"""``kspark run --input``: every malformed input file ends in one line naming the record and field."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import _records, main

SQL = (
    "CREATE STREAM PAGEVIEWS (PAGEID STRING KEY, USERID STRING, VIEWTIME BIGINT) "
    "WITH (kafka_topic='pageviews', value_format='JSON');\n"
    "CREATE TABLE VIEWS AS SELECT USERID, COUNT(*) AS N, SUM(VIEWTIME) AS T FROM PAGEVIEWS GROUP BY USERID;\n"
)


def _file(tmp_path, content) -> str:
    path = tmp_path / "in.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"topic": "pageviews", "value": {}}, {"topic": "pageviews", "value": {}, "timestamp": "noon"}],
         "record 2 of {path}: 'timestamp' must be a non-negative integer (milliseconds since the epoch), got \"noon\"."),
        ([{"topic": "pageviews", "value": {}, "timestamp": -1}], "record 1 of {path}: 'timestamp' must be a non-negative"),
        ([{"topic": "pageviews", "value": {}, "timestamp": 1.5}], "got 1.5."),
        ([{"topic": "pageviews", "value": {}, "timestamp": True}], "got true."),
        ([{"topic": "pageviews", "value": {}, "timestamp": 2**64}], "'timestamp' must be a non-negative integer"),
        ([{"topic": 7, "value": {}}], "record 1 of {path}: 'topic' must be a topic name (a non-empty string), got 7."),
        ([{"topic": "", "value": {}}], "'topic' must be a topic name"),
        ([{"value": {}}], "record 1 of {path} needs at least a 'topic' and a 'value'."),
        (["pageviews"], "record 1 of {path} needs at least a 'topic'"),
        ([{"topic": "pageviews", "value": {}, "timestmp": 5}],
         "record 1 of {path} has an unknown field 'timestmp'; a record has topic, key, value, timestamp, headers."),
        ([{"topic": "pageviews", "value": {}, "headers": {"KEY": "h"}}], "'headers' must be a list"),
        ([{"topic": "pageviews", "value": {}, "headers": [{"VALUE": "AA=="}]}], "header 1 must be an object with a string 'KEY'."),
        ([{"topic": "pageviews", "value": {}, "headers": [{"KEY": "h", "VALUE": "not base64!"}]}],
         "header 1 ('h'): 'VALUE' must be base64 text or null, got \"not base64!\"."),
        ({"records": 5}, "must hold a JSON list of records"),
        ("[{\"topic\": ", "is not valid JSON: line 1, column 12"),
    ],
)
def test_a_bad_input_record_is_one_line_naming_it(tmp_path, records, message) -> None:
    path = _file(tmp_path, records)
    with pytest.raises(SystemExit) as exited:
        _records(path)
    text = str(exited.value)
    assert text.startswith("kspark: ") and "\n" not in text
    assert message.format(path=path) in text


def test_a_good_record_keeps_its_fields(tmp_path) -> None:
    [record] = _records(_file(tmp_path, {"inputs": [
        {"topic": "t", "key": "k", "value": {"A": 1}, "timestamp": 5, "headers": [{"KEY": "h", "VALUE": "AQI="}, {"KEY": "n", "VALUE": None}]},
    ]}))
    assert (record.topic, record.key, record.value, record.timestamp) == ("t", "k", {"A": 1}, 5)
    assert [(h.key, h.value) for h in record.headers] == [("h", b"\x01\x02"), ("n", None)]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)
FIELDS = st.sampled_from(["topic", "key", "value", "timestamp", "headers", "window", "partition"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(FIELDS, JSON, max_size=5) | JSON, max_size=4) | JSON)
def test_fuzzed_input_files_load_or_end_in_one_line(tmp_path, document) -> None:
    try:
        _records(_file(tmp_path, document))
    except SystemExit as exited:
        assert str(exited).startswith("kspark: ") and "\n" not in str(exited)


VALUES = st.fixed_dictionaries({}, optional={"USERID": JSON, "VIEWTIME": JSON, "OTHER": JSON}) | JSON


@pytest.mark.long
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.fixed_dictionaries({"topic": st.just("pageviews"), "key": JSON, "value": VALUES},
                                      optional={"timestamp": st.integers(0, 2**40)}), min_size=1, max_size=5))
def test_fuzzed_records_run_without_a_traceback(tmp_path, capsys, spark, records) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text(SQL)
    code = main(["run", str(sql), "--input", _file(tmp_path, records)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err


def test_a_failure_no_check_foresaw_is_one_line_and_a_traceback_file(monkeypatch, capsys) -> None:
    import engine.cli as cli

    def broken(argv):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(cli, "_main", broken)
    assert cli.main(["version"]) == 70
    err = capsys.readouterr().err.strip()
    assert err.startswith("kspark: internal error (a bug in kspark): ZeroDivisionError: division by zero; the traceback is in ")
    traceback_file = err.rsplit(" ", 1)[1]
    with open(traceback_file, encoding="utf-8") as f:
        assert "ZeroDivisionError" in f.read()
