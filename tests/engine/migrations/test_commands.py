"""The commands' parts that need no server: what apply picks, what a file may hold, info's
table, new-project and create on disk, and the CLI's one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.cli import main
from engine.components.process import free_port
from engine.migrations import commands
from engine.migrations.config import MigrationConfig
from engine.migrations.errors import MigrationError
from engine.migrations.metadata import (
    MigrationState,
    VersionInfo,
    create_stream_statement,
    format_timestamp,
)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    commands.new_project(tmp_path / "p", "http://localhost:8088", lambda _line: None)
    for version in (1, 2, 3, 5):
        (tmp_path / "p" / "migrations" / f"V{version:06d}__m{version}.sql").write_text("")
    return tmp_path / "p"


def versions(found: list) -> list[int]:
    return [m.version for m in found]


def test_apply_picks_after_the_latest_migrated_version(project: Path) -> None:
    directory = project / "migrations"
    assert versions(commands.to_apply(directory, commands.Target(all=True), "<none>")) == [1, 2, 3, 5]
    assert versions(commands.to_apply(directory, commands.Target(all=True), "2")) == [3, 5]
    assert versions(commands.to_apply(directory, commands.Target(next=True), "2")) == [3]
    assert versions(commands.to_apply(directory, commands.Target(until=3), "1")) == [2, 3]
    assert versions(commands.to_apply(directory, commands.Target(version=5), "2")) == [5]
    assert commands.to_apply(directory, commands.Target(all=True), "5") == []


@pytest.mark.parametrize(("target", "previous", "message"), [
    (commands.Target(next=True), "5", "No eligible migrations found."),
    (commands.Target(version=4), "3", "No migration file with version 4 exists."),
    (commands.Target(version=2), "3",
     "Version must be newer than the last version migrated. Last version migrated was 3"),
])
def test_apply_refuses_targets_it_cannot_reach(project: Path, target, previous: str, message: str) -> None:
    with pytest.raises(MigrationError) as raised:
        commands.to_apply(project / "migrations", target, previous)
    assert str(raised.value) == message


@pytest.mark.parametrize(("sql", "word"), [
    ("SELECT * FROM S;", "SELECT"), ("\n  describe S;", "DESCRIBE"), ("EXPLAIN Q;", "EXPLAIN"),
    ("print 't';", "PRINT"), ("SHOW STREAMS;", "SHOW"), ("LIST TOPICS;", "LIST"), ("RUN SCRIPT 'x.sql';", "RUN SCRIPT"),
])
def test_statements_a_migration_may_not_hold_are_refused_in_the_parse_pass(sql: str, word: str) -> None:
    with pytest.raises(MigrationError) as raised:
        commands.run_statements([sql], {}, None)
    assert str(raised.value) == f"Failed to parse sql: {sql.strip()}. Error: '{word}' statements are not supported."


def test_the_parse_pass_substitutes_variables_from_define_and_the_file() -> None:
    statements = ["DEFINE t = 'orders';", "CREATE STREAM S (A INT) WITH (KAFKA_TOPIC='${t}', VALUE_FORMAT='${f}');",
                  "UNDEFINE t;"]
    commands.run_statements(statements, {"f": "JSON"}, None)
    text, _statement = commands.parse_command(statements[1], {"T": "orders", "F": "JSON"})
    assert "KAFKA_TOPIC='orders'" in text and "VALUE_FORMAT='JSON'" in text
    with pytest.raises(MigrationError, match=r"^Failed to parse sql: CREATE STREAM X .*Variable 'f' is not defined"):
        commands.run_statements(["CREATE STREAM X (A INT) WITH (KAFKA_TOPIC=${f});"], {}, None)
    with pytest.raises(MigrationError, match="^Failed to parse sql: CREATE STREM X;. Error: Failed to parse the statement"):
        commands.run_statements(["CREATE STREM X;"], {}, None)


def test_defines_are_name_equals_value() -> None:
    assert commands.parse_defines(["a=1", "b=two"]) == {"a": "1", "b": "two"}
    with pytest.raises(MigrationError, match=r"^Failed to parse argument a=1=2: variables must be defined using '='"):
        commands.parse_defines(["a=1=2"])


def test_info_table_is_ksqldbs_layout() -> None:
    rows = [VersionInfo(version=1, checksum="c", previous="<none>", state=MigrationState.MIGRATED, name="first one",
                        started_on="s", completed_on="c", error_reason="N/A")]
    assert commands.format_table(rows).splitlines() == [
        "-" * 94,
        " Version | Name      | State    | Previous Version | Started On | Completed On | Error Reason ",
        "-" * 94,
        " 1       | first one | MIGRATED | <none>           | s          | c            | N/A          ",
        "-" * 94,
    ]


def test_timestamps_are_shown_with_milliseconds_and_zone() -> None:
    shown = format_timestamp("1700000000123")
    assert shown.count(":") == 2 and ".123 " in shown
    assert format_timestamp("") == "" and format_timestamp("N/A") == "N/A"


def test_the_metadata_stream_has_the_tools_columns_and_topic() -> None:
    statement = create_stream_statement("MIGRATION_EVENTS", "svc_ksql_MIGRATION_EVENTS", 1)
    assert statement.startswith("CREATE STREAM MIGRATION_EVENTS (\n  version_key  STRING KEY,")
    assert "KAFKA_TOPIC='svc_ksql_MIGRATION_EVENTS'" in statement and "PARTITIONS=1" in statement


def test_create_takes_the_next_version_or_the_one_given(project: Path) -> None:
    config = MigrationConfig.load(project / "ksql-migrations.properties")
    said: list[str] = []
    assert commands.create(config, "Add users", None, said.append).name == "V000006__Add_users.sql"
    assert commands.create(config, "four", 4, said.append).name == "V000004__four.sql"
    assert said[-1] == "Migration file successfully created"
    with pytest.raises(MigrationError, match="^Found existing migrations file for version 4: "):
        commands.create(config, "again", 4, said.append)
    with pytest.raises(MigrationError, match="^Description cannot be empty.$"):
        commands.create(config, "", None, said.append)


def test_new_project_refuses_an_existing_config_file(project: Path) -> None:
    with pytest.raises(MigrationError, match="^Failed to create file. File already exists: "):
        commands.new_project(project, "http://x:1", lambda _line: None)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = main(["migrations", *args])
    return status, capsys.readouterr().err


def test_cli_errors_are_one_line_and_exit_1(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "info") == (1, "kspark migrations: Migrations config file required but not specified. "
                                      "Specify with --config-file (or, equivalently, -c).\n")
    status, err = run(capsys, "-c", "x.properties", "new-project", "d", "http://h:1")
    assert status == 1 and err.startswith("kspark migrations: This command does not expect a config file")
    config = project / "ksql-migrations.properties"
    config.write_text(f"ksql.server.url=http://127.0.0.1:{free_port()}\n")
    status, err = run(capsys, "validate", "--config-file", str(config))
    [line] = err.splitlines()
    assert status == 1 and line.startswith("kspark migrations: Failed to query http://127.0.0.1:")
    assert "/info" in line and "Traceback" not in err
    config.write_text("ksql.server.url=not a url\n")
    status, err = run(capsys, "-c", str(config), "info")
    assert (status, err) == (1, "kspark migrations: Invalid ksql server URL: not a url\n")
