"""``kspark metastore migrate``: a command-topic service's metastore, rebuilt as tables."""

from __future__ import annotations

import argparse
import uuid

from engine.metastore.database import SOURCES
from engine.metastore.database.migrate import run
from engine.server.service import KsqlService
from engine.server.tables_service import TablesService


def _args(bootstrap: str, service_id: str) -> argparse.Namespace:
    return argparse.Namespace(bootstrap_servers=bootstrap, service_id=service_id, once=True, timeout=30.0)


def test_a_command_topic_service_migrated_lists_the_same_sources_and_queries(kafka_broker, tmp_path, capsys) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"mig_{uuid.uuid4().hex[:8]}"
    topic = f"t_{service_id}"
    old = KsqlService(bootstrap, service_id, tmp_path, run_queries=False, command_timeout=20.0)
    old.start(timeout=30)
    try:
        for statement in (
            f"CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', PARTITIONS=1);",
            "CREATE STREAM D AS SELECT * FROM S WHERE V > 0;",
            "CREATE TABLE C AS SELECT ID, COUNT(*) AS N FROM S GROUP BY ID;",
            "CREATE STREAM GONE AS SELECT * FROM S;",
            "DROP STREAM GONE;",
            "INSERT INTO D SELECT * FROM S;",
        ):
            old.execute(statement)
        [terminated] = [q for q in old.engine.queries if q.startswith("INSERTQUERY")]
        old.execute(f"TERMINATE {terminated};")
        expected = old.metastore_summary()
    finally:
        old.close()

    assert run(_args(bootstrap, service_id)) == 0
    out = capsys.readouterr().out
    assert "3 sources live" in out and "3 rows written, 0 deleted" in out
    assert run(_args(bootstrap, service_id)) == 0  # again: nothing to do
    assert "0 rows written, 0 deleted" in capsys.readouterr().out

    new = TablesService(bootstrap, service_id, tmp_path, run_queries=False, command_timeout=20.0)
    new.start(timeout=30)
    try:
        assert new.metastore_summary() == expected
        assert new.database.rows(SOURCES)["D"].query_id == old_query_id(expected, "CSAS_D_")
    finally:
        new.close()


def old_query_id(summary: list[str], prefix: str) -> str:
    return next(s.split()[1] for s in summary if s.startswith(f"QUERY {prefix}"))


def test_a_service_without_a_command_topic_is_one_line(kafka_broker, capsys) -> None:
    assert run(_args(kafka_broker.bootstrap_servers, f"none_{uuid.uuid4().hex[:8]}")) == 1
    assert "has no command topic" in capsys.readouterr().err
