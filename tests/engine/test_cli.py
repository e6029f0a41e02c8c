"""The kspark console script."""

from __future__ import annotations

import json

import pytest

from engine.cli import main

SQL = (
    "CREATE STREAM PAGEVIEWS (PAGEID STRING KEY, USERID STRING, VIEWTIME BIGINT) "
    "WITH (kafka_topic='pageviews', value_format='JSON');\n"
    "CREATE STREAM LONG_VIEWS AS SELECT PAGEID, UCASE(USERID) AS U FROM PAGEVIEWS WHERE VIEWTIME > 10;\n"
)


def test_plan_prints_the_execution_plan_of_each_query(tmp_path, capsys) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text(SQL)
    assert main(["plan", str(sql)]) == 0
    source, query = json.loads(capsys.readouterr().out)
    assert source["command"]["@type"] == "createStreamV1"
    assert source["query"] is None
    assert query["query"]["root"]["@type"] == "streamSinkV3"
    assert query["command"]["schema"] == "`PAGEID` STRING KEY, `U` STRING"


def test_run_prints_output_records(tmp_path, capsys, spark) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text(SQL)
    records = tmp_path / "in.json"
    records.write_text(json.dumps([
        {"topic": "pageviews", "key": "p1", "value": {"USERID": "ann", "VIEWTIME": 5}},
        {"topic": "pageviews", "key": "p2", "value": {"USERID": "bob", "VIEWTIME": 50}, "timestamp": 7},
    ]))
    assert main(["run", str(sql), "--input", str(records)]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"key": "p2", "timestamp": 7, "topic": "LONG_VIEWS", "value": {"U": "BOB"}}]


def test_bad_statement_reports_the_error_and_exits_non_zero(tmp_path, capsys) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text("CREATE STREAM X AS SELECT * FORM Y;")
    assert main(["plan", str(sql)]) == 1
    assert "ParseError" in capsys.readouterr().err


def test_unreadable_input_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(SystemExit, match="cannot read"):
        main(["plan", str(tmp_path / "missing.sql")])
