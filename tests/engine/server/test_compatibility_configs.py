"""Compatibility-breaking configs on the real command log (engine.facade.compatibility): a log an
earlier release wrote keeps that release's function versions for new queries, a new log records
the current ones with its first command, and an opt-in recorded in the log holds for every
server of the service."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from engine.commandlog.command import Command
from engine.commandlog.log import CommandLog
from engine.facade.compatibility import FUNCTIONS_JAVA_SEMANTICS
from engine.facade.engine import KsqlEngine
from engine.plan import serde
from engine.server.service import KsqlService
from tests.engine.plan_versions import recorded_versions

FLAG = FUNCTIONS_JAVA_SEMANTICS.name


def _query_id(entities: list[dict]) -> str:
    [entity] = entities
    return entity["commandStatus"]["queryId"]


def _service(bootstrap: str, service_id: str, directory: Path) -> KsqlService:
    service = KsqlService(bootstrap, service_id, directory, run_queries=False, command_timeout=20.0)
    service.start(timeout=60)
    return service


def test_old_and_new_logs_plan_their_releases_versions_until_the_service_opts_in(
    kafka_broker, tmp_path: Path
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    source = (f"CREATE STREAM S (ID INT KEY, D DOUBLE, N INT) "
              f"WITH (KAFKA_TOPIC='compat_{tag}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    query = "CREATE STREAM {name} AS SELECT ID, CAST(D AS STRING) AS T, ABS(N) AS A FROM S;"

    # A log as the previous release wrote it: commands whose properties hold no value.
    old_id = f"compat_old_{tag}_"
    log = CommandLog(bootstrap, old_id, timeout=20.0)
    log.create_topic()
    log.replay(lambda queued: None)
    [plan] = [r.plan for r in KsqlEngine().execute_sql(source)]
    queued = log.submit(lambda: Command(command_id="stream/`S`/create", statement=source,
                                        plan=serde.to_json_value(plan), properties={}))
    log.wait_for(queued.sequence)
    log.close()

    old = _service(bootstrap, old_id, tmp_path / "old1")
    new = _service(bootstrap, f"compat_new_{tag}_", tmp_path / "new")
    second = None
    try:
        before = _query_id(old.execute(query.format(name="BEFORE")))
        assert recorded_versions(old.engine.queries[before]) == {"CAST": 1, "ABS": 1}

        new.execute(source.replace(f"compat_{tag}", f"compat_new_{tag}"))
        fresh = _query_id(new.execute(query.format(name="FRESH")))
        assert recorded_versions(new.engine.queries[fresh]) == {"CAST": 3, "ABS": 2}
        assert new.engine.config[FLAG] is True  # recorded with the new log's first command
        # Recorded beside the request's properties (ksqlDB's originalProperties), not among them.
        assert FLAG not in new._queries[fresh].properties

        opted = _query_id(old.execute(query.format(name="OPTED"), properties={FLAG: "true"}))
        assert recorded_versions(old.engine.queries[opted]) == {"CAST": 3, "ABS": 2}
        after = _query_id(old.execute(query.format(name="AFTER")))  # the service keeps the opt-in
        assert recorded_versions(old.engine.queries[after]) == {"CAST": 3, "ABS": 2}
        assert recorded_versions(old.engine.queries[before]) == {"CAST": 1, "ABS": 1}  # its saved versions

        second = _service(bootstrap, old_id, tmp_path / "old2")  # replays the opt-in
        assert second.engine.config[FLAG] is True
        assert recorded_versions(second.engine.queries[before]) == {"CAST": 1, "ABS": 1}
        later = _query_id(second.execute(query.format(name="LATER")))
        assert recorded_versions(second.engine.queries[later]) == {"CAST": 3, "ABS": 2}
    finally:
        for service in (old, new, second):
            if service is not None:
                service.close()


def test_a_state_dir_of_an_earlier_release_keeps_its_versions_until_it_opts_in(
    kafka_broker, tmp_path: Path
) -> None:
    from engine.hosting.application import STATEMENTS_FILE, StreamingApplication

    bootstrap = kafka_broker.bootstrap_servers
    tag = uuid.uuid4().hex[:8]
    source = (f"CREATE STREAM S (ID INT KEY, D DOUBLE) "
              f"WITH (KAFKA_TOPIC='compat_run_{tag}', VALUE_FORMAT='JSON', PARTITIONS=1);")
    old_query = "CREATE STREAM OLDQ AS SELECT ID, CAST(D AS STRING) AS T FROM S;"
    new_query = "CREATE STREAM NEWQ AS SELECT ID, CAST(D AS STRING) AS T FROM S;"
    # statements.json as 0.11.0 wrote it: entries without properties.
    old_dir = tmp_path / "old"
    old_dir.mkdir()
    [plan] = [r.plan for r in KsqlEngine().execute_sql(source)]
    (old_dir / STATEMENTS_FILE).write_text(
        json.dumps([{"text": source, "plan": serde.to_json_value(plan)}]), encoding="utf-8")

    app = StreamingApplication(bootstrap, old_dir)
    app.load()
    app.submit(source + old_query)
    assert recorded_versions(app.engine.queries["CSAS_OLDQ_0"]) == {"CAST": 1}

    opted = StreamingApplication(bootstrap, old_dir)
    opted.load()
    opted.submit(source + old_query + f"SET '{FLAG}'='true';" + new_query)
    assert recorded_versions(opted.engine.queries["CSAS_OLDQ_0"]) == {"CAST": 1}
    assert recorded_versions(opted.engine.queries["CSAS_NEWQ_1"]) == {"CAST": 3}
    saved = json.loads((old_dir / STATEMENTS_FILE).read_text(encoding="utf-8"))
    assert [entry.get("properties") for entry in saved] == [None, {FLAG: False}, {FLAG: True}, {FLAG: True}]

    fresh = StreamingApplication(bootstrap, tmp_path / "new")
    fresh.load()
    fresh.submit(source + new_query)
    assert recorded_versions(fresh.engine.queries["CSAS_NEWQ_0"]) == {"CAST": 3}


def test_the_metastore_tables_keep_the_value_with_each_row(kafka_broker, tmp_path: Path) -> None:
    from engine.server.tables_service import TablesService

    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"compat_tables_{uuid.uuid4().hex[:8]}_"
    source = (f"CREATE STREAM S (ID INT KEY, D DOUBLE) "
              f"WITH (KAFKA_TOPIC='{service_id}s', VALUE_FORMAT='JSON', PARTITIONS=1);")
    query = "CREATE STREAM {name} AS SELECT ID, CAST(D AS STRING) AS T FROM S;"

    def start(directory: str) -> TablesService:
        service = TablesService(bootstrap, service_id, tmp_path / directory, run_queries=False,
                                command_timeout=20.0, internal_url="http://one")
        service.start(timeout=30)
        return service

    first = start("one")
    try:
        # The service's first row, as if written before the opt-in: the old value.
        first.execute(source, properties={FLAG: "false"})
        old = _query_id(first.execute(query.format(name="OLDQ")))
        assert recorded_versions(first.engine.queries[old]) == {"CAST": 1}
        opted = _query_id(first.execute(query.format(name="NEWQ"), properties={FLAG: True}))
        assert recorded_versions(first.engine.queries[opted]) == {"CAST": 3}
    finally:
        first.close()
    again = start("two")  # replays the rows: sources first, then queries
    try:
        assert again.engine.config[FLAG] is True
        later = _query_id(again.execute(query.format(name="LATER")))
        assert recorded_versions(again.engine.queries[later]) == {"CAST": 3}
        assert recorded_versions(again.engine.queries[old]) == {"CAST": 1}
    finally:
        again.close()
