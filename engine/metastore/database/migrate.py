"""``kspark metastore migrate``: build a service's metastore tables from its command topic.

    kspark metastore migrate --bootstrap-servers HOST:PORT --service-id ID [--once]

The migration replays kspark's command topic of the service (every command, in order, as
a server replays it) into an engine, then writes the live sources as ``UserDataSources``
rows, each with the statement plan that created it (its query id included, so a server
started with ``--metastore tables`` resumes the query from its checkpoint), the live
INSERT INTO ... SELECT queries as ``UserQueries`` rows, and deletes the rows of sources and
queries that are gone. With ``--once`` it exits when the tables match the topic; without,
it keeps following the command topic and applying new commands until SIGTERM/Ctrl-C. A
CSAS/CTAS query stopped by TERMINATE leaves its source's row without a query, naming it.
Records that are not kspark commands are reported.

With ``--from-ksqldb`` the command topic is ksqlDB's own (records holding the statement,
ksqlDB's execution plan and the configs): its records are translated by the translation of
``kspark import-command-topic`` (``engine.ksqldb_import``, never re-planned), then applied
and written as above. A record that cannot be translated stops the migration before
anything is written, naming its offset. Without ``--once`` the topic is read again when it
grows.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from engine.commandlog import CommandLog, QueuedCommand
from engine.errors import KsqlError
from engine.kafka.security import configure
from engine.metastore.database.database import MetastoreDatabase, Write
from engine.metastore.database.rows import QUERIES, SOURCES, QueryRow, SourceRow

LOG = logging.getLogger("engine.metastore.migrate")


@dataclass
class CommandTopicState:
    """The live sources of a command topic, by replaying it: each with the plan that created it."""

    plans: dict[str, dict[str, Any]] = field(default_factory=dict)  # source name -> plan JSON
    properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    queries: dict[str, dict[str, Any]] = field(default_factory=dict)  # INSERT INTO query id -> plan JSON
    query_properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    terminated: dict[str, str] = field(default_factory=dict)  # source name -> its terminated query
    skipped: list[str] = field(default_factory=list)
    applied: int = 0

    def __post_init__(self) -> None:
        from engine.facade.engine import KsqlEngine

        self.engine = KsqlEngine()
        self.lock = threading.Lock()

    def apply(self, queued: QueuedCommand) -> None:
        """Apply one command as a server does (a command that fails is skipped and reported)."""
        from engine.plan import serde

        command = queued.command
        with self.lock:
            self.applied += 1
            try:
                if command.terminate is not None:
                    ids = list(self.engine.queries) if command.terminate == "ALL" else [command.terminate]
                    for query_id in ids:
                        self.engine.terminate(query_id)
                        self.queries.pop(query_id, None)
                        for name, plan in self.plans.items():
                            if (plan.get("query") or {}).get("queryId") == query_id:
                                self.plans[name] = {**plan, "query": None}
                                self.terminated[name] = query_id
                    return
                self.engine.restore(serde.statement_plan_from_json(command.plan))
            except (KsqlError, KeyError, TypeError, ValueError) as exc:
                self.skipped.append(f"command at offset {queued.sequence} ({command.statement[:60]!r}): {exc}")
                return
            value = command.plan
            kind = str(value["command"].get("@type", "")) if value.get("command") else ""
            if kind.startswith(("createStream", "createTable")):
                self.plans[value["command"]["name"]] = value
                self.properties[value["command"]["name"]] = dict(command.properties)
                self.terminated.pop(value["command"]["name"], None)
            elif kind.startswith("dropSource"):
                self.plans.pop(value["command"]["name"], None)
                self.terminated.pop(value["command"]["name"], None)
            elif value.get("query") is not None:
                query_id = str(value["query"]["queryId"])
                self.queries[query_id] = value
                self.query_properties[query_id] = dict(command.properties)

    def rows(self) -> dict[str, SourceRow]:
        """The ``UserDataSources`` rows of the live sources, in creation order."""
        with self.lock:
            rows = {}
            for name, plan in self.plans.items():
                row = SourceRow.from_statement_plan(plan, self.properties.get(name), f"migrated-{name}")
                if name in self.terminated:
                    row = replace(row, terminated_query=self.terminated[name])
                rows[name] = row
            return rows

    def query_rows(self) -> dict[str, QueryRow]:
        """The ``UserQueries`` rows of the live INSERT INTO ... SELECT queries."""
        with self.lock:
            return {query_id: QueryRow.from_statement_plan(plan, self.query_properties.get(query_id),
                                                           f"migrated-{query_id}")
                    for query_id, plan in self.queries.items()}


def _same(a: SourceRow | QueryRow, b: SourceRow | QueryRow) -> bool:
    left, right = a.to_json(), b.to_json()
    left.pop("requestId"), right.pop("requestId")
    return left == right


def synchronise(state: CommandTopicState, db: MetastoreDatabase) -> tuple[int, int]:
    """Write the rows the tables miss or hold differently, delete the gone ones; (written, deleted)."""
    db.wait_until_caught_up()
    wanted = state.rows()
    held = db.rows(SOURCES)
    written = deleted = 0
    wanted_queries = state.query_rows()
    for query_id in db.rows(QUERIES):  # terminated queries first: they may read gone sources
        if query_id not in wanted_queries:
            db.write(Write(QUERIES, query_id, None))
            deleted += 1
    for name, row in wanted.items():  # creation order: upstream sources first
        current = held.get(name)
        if current is None or not (isinstance(current, SourceRow) and _same(current, row)):
            stopped = (row.terminated_query is not None and isinstance(current, SourceRow)
                       and current.query_id == row.terminated_query)
            if current is not None and not stopped:
                db.write(Write(SOURCES, name, None))  # replaced (recreated under the same name)
            db.write(Write(SOURCES, name, row))
            written += 1
    held_queries = db.rows(QUERIES)
    for query_id, query in wanted_queries.items():
        if query_id not in held_queries:
            db.write(Write(QUERIES, query_id, query))
            written += 1
    gone = [name for name in held if name not in wanted]
    for _ in range(len(gone) + 1):  # downstream rows first: retry the ones still read by others
        for name in list(gone):
            if db.downstream(name) and any(d in gone for d in db.downstream(name)):
                continue
            db.write(Write(SOURCES, name, None))
            gone.remove(name)
            deleted += 1
            db.wait_until_caught_up()
    return written, deleted


def add_parser(sub: Any, help: str) -> None:
    metastore = sub.add_parser("metastore", help=help)
    actions = metastore.add_subparsers(dest="action", required=True)
    migrate = actions.add_parser("migrate", help="build the metastore tables from the service's command topic")
    migrate.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT", help="the Kafka cluster")
    migrate.add_argument("--service-id", required=True, metavar="ID", help="the service to migrate")
    migrate.add_argument("--once", action="store_true", help="migrate what the command topic holds now and exit")
    migrate.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for Kafka (default 60)")
    migrate.add_argument("--from-ksqldb", action="store_true",
                         help="the command topic is ksqlDB's (statement, plan, configs): translate its records as "
                              "kspark import-command-topic does")
    migrate.add_argument("--ksqldb-service-id", metavar="ID",
                         help="with --from-ksqldb: ksqlDB's ksql.service.id, if not --service-id")
    from engine.cli import add_kafka_conf_argument

    add_kafka_conf_argument(migrate)


def ksqldb_state(bootstrap_servers: str, ksqldb_service_id: str, timeout: float) -> tuple[CommandTopicState, int]:
    """The live metastore of a ksqlDB command topic (translated, then applied); its record count.

    Raises ``KsqlError`` naming every record that cannot be translated (nothing is applied then).
    """
    from engine.ksqldb_import.command_topic import (
        CommandTopicImportError,
        read_command_topic,
        translate,
    )

    records = read_command_topic(bootstrap_servers, ksqldb_service_id, timeout=timeout)
    translation = translate(records)
    if translation.errors:
        raise CommandTopicImportError(
            f"{len(translation.errors)} of {len(records)} ksqlDB record(s) cannot be migrated; nothing was "
            "written: " + " ".join(translation.errors)
        )
    state = CommandTopicState()
    for index, command in enumerate(translation.commands):
        state.apply(QueuedCommand(index, command))
    state.skipped = [*(f"note: {note}" for note in translation.notes), *state.skipped]
    return state, len(records)


def _run_ksqldb(args: argparse.Namespace, db: MetastoreDatabase, stop: threading.Event) -> int:
    ksqldb_id = args.ksqldb_service_id or args.service_id
    seen = -1
    while True:
        state, count = ksqldb_state(args.bootstrap_servers, ksqldb_id, args.timeout)
        if count != seen:
            if seen < 0:
                for line in state.skipped:
                    print(f"kspark metastore migrate: not migrated: {line}", file=sys.stderr)
            written, deleted = synchronise(state, db)
            print(f"kspark metastore migrate: {len(state.plans)} sources and {len(state.queries)} INSERT INTO "
                  f"queries live after {count} ksqlDB records; {written} rows written, {deleted} deleted.", flush=True)
            seen = count
        if args.once or stop.wait(2.0):
            return 0


def run(args: argparse.Namespace) -> int:
    """``kspark metastore migrate``: 0 once migrated (or stopped by a signal), 1 on an error."""
    stop = threading.Event()
    if not args.once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: stop.set())
    try:
        configure(args.bootstrap_servers, {}, args.kafka_conf)
    except KsqlError as exc:
        print(f"kspark: {exc}", file=sys.stderr)
        return 1
    state = CommandTopicState()
    log = CommandLog(args.bootstrap_servers, args.service_id, timeout=args.timeout)
    db = MetastoreDatabase(args.bootstrap_servers, args.service_id, timeout=args.timeout)
    try:
        from engine.kafka.admin import TopicAdmin

        if getattr(args, "from_ksqldb", False):
            db.create_topics()
            db.start()
            return _run_ksqldb(args, db, stop)
        try:
            TopicAdmin(args.bootstrap_servers, timeout=args.timeout).partition_count(log.topic)
        except KsqlError:
            print(f"kspark: the service '{args.service_id}' has no command topic ('{log.topic}') to migrate.",
                  file=sys.stderr)
            return 1
        db.create_topics()
        db.start()
        log.replay(state.apply, args.timeout)
        reported = 0
        while True:
            written, deleted = synchronise(state, db)
            for line in state.skipped[reported:]:
                print(f"kspark metastore migrate: not migrated: {line}", file=sys.stderr)
            reported = len(state.skipped)
            if written or deleted or args.once:
                print(f"kspark metastore migrate: {len(state.plans)} sources and {len(state.queries)} INSERT INTO "
                      f"queries live after {state.applied} commands; "
                      f"{written} rows written, {deleted} deleted.", flush=True)
            if args.once or stop.wait(0.5):
                return 0
            log.wait_until_caught_up(args.timeout)
    except KsqlError as exc:
        print(f"kspark: the migration failed: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        log.close()
        db.close()
