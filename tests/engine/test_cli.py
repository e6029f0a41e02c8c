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


def test_help_lists_every_subcommand_without_importing_the_planner() -> None:
    # `kspark --help` and the light subcommands answer without loading the planner, the
    # ksqlDB importer, the interactive shell or the migrations tool (each takes a while).
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from engine.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('engine.plan', 'engine.ksqldb_import', 'engine.cli_shell.shell', "
        "'engine.migrations.commands') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out
    for name in ("import-command-topic", "cli", "migrations", "metastore", "server", "run"):
        assert f"    {name} " in out or f"    {name}\n" in out


def test_a_lazily_loaded_subcommand_parses_its_own_options(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["migrations", "--help"])
    assert exit_.value.code == 0
    assert "--config-file" in capsys.readouterr().out
