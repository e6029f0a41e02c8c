"""ksql-migrations.properties: reading it, its defaults, a new project's file."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.data.java_properties import parse_properties
from engine.migrations import config as C
from engine.migrations.errors import MigrationError


def test_defaults_and_derived_names(tmp_path: Path) -> None:
    path = tmp_path / "ksql-migrations.properties"
    path.write_text("ksql.server.url=http://localhost:8088\n# ksql.migrations.stream.name=X\n")
    config = C.MigrationConfig.load(path)
    assert (config.stream_name, config.table_name) == ("MIGRATION_EVENTS", "MIGRATION_SCHEMA_VERSIONS")
    assert config.stream_topic(lambda: "svc_") == "svc_ksql_MIGRATION_EVENTS"
    assert config.table_topic(lambda: "svc_") == "svc_ksql_MIGRATION_SCHEMA_VERSIONS"
    assert config.topic_replicas == 1
    assert config.migrations_dir == tmp_path / "migrations"
    assert config.basic_auth is None


def test_every_name_is_overridable(tmp_path: Path) -> None:
    path = tmp_path / "p.properties"
    path.write_text("ksql.server.url=http://h:1\nksql.migrations.stream.name=EV\nksql.migrations.table.name=VER\n"
                    "ksql.migrations.stream.topic.name=ev_topic\nksql.migrations.topic.replicas=3\n"
                    f"ksql.migrations.dir.override={tmp_path / 'elsewhere'}\n"
                    "ksql.auth.basic.username=ann\nksql.auth.basic.password=secret\n")
    config = C.MigrationConfig.load(path)
    assert config.stream_topic(lambda: pytest.fail("the topic is set")) == "ev_topic"
    assert config.table_topic(lambda: "id_") == "id_ksql_VER"
    assert config.topic_replicas == 3
    assert config.migrations_dir == tmp_path / "elsewhere"
    assert config.basic_auth == ("ann", "secret")


def test_a_file_without_the_server_url_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.properties"
    path.write_text("ksql.migrations.stream.name=EV\n")
    with pytest.raises(MigrationError, match="^Missing required property: ksql.server.url$"):
        C.MigrationConfig.load(path)
    with pytest.raises(MigrationError, match="Failed to load properties file"):
        C.MigrationConfig.load(tmp_path / "absent.properties")


def test_a_new_projects_file_names_the_url_and_comments_out_the_rest() -> None:
    text = C.new_project_properties("http://localhost:8088")
    lines = text.splitlines()
    assert lines[0] == "ksql.server.url=http://localhost:8088"
    assert "# ksql.migrations.stream.name=MIGRATION_EVENTS" in lines
    assert "# ksql.migrations.table.topic.name=ksql-service-idksql_MIGRATION_SCHEMA_VERSIONS" in lines
    assert "# ksql.auth.basic.password=" in lines and "# ssl.verify.host=true" in lines
    assert parse_properties(text) == {"ksql.server.url": "http://localhost:8088"}
