"""The metastore database behind the command log's interface, for the server's statements.

    log = MetastoreLog(bootstrap, "my_service", internal_url="http://10.0.0.5:8088")
    log.create_topic(); log.replay(apply)          # load the compacted tables, then follow
    queued = log.submit(execute)                   # the statement's command, as a row write
    log.wait_for(queued.sequence)                  # this server's views include it

A server that keeps its metastore in tables (``kspark server --metastore tables``) swaps its
``CommandLog`` for this class: statements are validated and planned by the server exactly
as with the command topic (``execute``), then the command they produce becomes one row
write: CREATE [... AS SELECT] inserts the source's row (its plan included), DROP deletes
it (a tombstone). INSERT INTO ... SELECT inserts a ``UserQueries`` row (key: the query id);
TERMINATE of such a query deletes it; TERMINATE of a CSAS/CTAS query rewrites its source's
row without the query (naming it in ``terminatedQueryId``): the source stays, the query
stops and does not come back after a restart, as in ksqlDB. The views call ``apply`` with
the command a row change means (a create from the stored plan, a drop, a terminate), so the
engine starts a new row's query and stops a deleted one's. On loading, a query row whose
sources the UserDataSources view does not hold yet (the changelogs are read side by side)
waits until they are there.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from engine.commandlog import Command, QueuedCommand
from engine.errors import CommandLogError, MetastoreError
from engine.metastore.database.database import (
    Change,
    MetastoreDatabase,
    MetastoreUnavailableError,
    Write,
    pack_sequence,
    unpack_sequence,
)
from engine.metastore.database.rows import QUERIES, SOURCES, QueryRow, Row, SourceRow
from engine.plan.schema import LogicalSchema


def _terminate(query_id: str) -> Command:
    return Command(command_id=f"terminate/{query_id}/execute", statement=f"TERMINATE {query_id};",
                   terminate=query_id)


def command_of(change: Change) -> Command | None:
    """The command a committed ``UserDataSources`` or ``UserQueries`` change means to the engine."""
    if change.table == QUERIES:
        if isinstance(change.new, QueryRow):
            query = change.new
            return Command(command_id=f"stream/`{query.sink}`/create", statement=query.sql,
                           plan=query.statement_plan(), properties=dict(query.properties))
        if isinstance(change.old, QueryRow):
            return _terminate(change.old.name)
        return None
    if change.table != SOURCES:
        return None
    if isinstance(change.new, SourceRow):
        row = change.new
        if row.terminated_query is not None and isinstance(change.old, SourceRow):
            return _terminate(row.terminated_query) if change.old.query_id == row.terminated_query else None
        if isinstance(change.old, SourceRow) and (alter := _alter_of(change.old, row)) is not None:
            return alter
        return Command(command_id=f"{row.kind.lower()}/`{row.name}`/create", statement=row.sql,
                       plan=row.statement_plan(), properties=dict(row.properties))
    if isinstance(change.old, SourceRow):
        old = change.old
        drop = old.drop_plan()
        return Command(command_id=f"{old.kind.lower()}/`{old.name}`/drop", statement=drop["statementText"], plan=drop)
    return None


def write_of(command: Command, sources: dict[str, Row], queries: dict[str, Row]) -> Write:
    """The row write a planned statement's command is, given the views (``MetastoreError``: none)."""
    request_id = uuid.uuid4().hex
    if command.terminate is not None:
        query_id = command.terminate
        if query_id in queries:
            return Write(QUERIES, query_id, None, request_id)
        source = next((r for r in sources.values() if isinstance(r, SourceRow) and r.query_id == query_id), None)
        if source is None:
            raise MetastoreError(f"Unknown queryId: {query_id}")
        stopped = replace(source, query_plan=None, terminated_query=query_id, request_id=request_id)
        return Write(SOURCES, source.name, stopped, request_id)
    plan = command.plan if isinstance(command.plan, dict) else {}
    kind = str((plan.get("command") or {}).get("@type", ""))
    if kind.startswith(("createStream", "createTable")):
        row = SourceRow.from_statement_plan(plan, {**command.properties, **command.original_properties}, request_id)
        return Write(SOURCES, row.name, row, request_id)
    if kind.startswith("alterSource"):
        return Write(SOURCES, str(plan["command"]["name"]), _altered(command, sources, request_id), request_id)
    if kind.startswith("dropSource"):
        return Write(SOURCES, str(plan["command"]["name"]), None, request_id)
    if plan.get("query") is not None:
        query = QueryRow.from_statement_plan(plan, {**command.properties, **command.original_properties}, request_id)
        return Write(QUERIES, query.name, query, request_id)
    raise MetastoreError(f"The statement has no metastore row to write: {command.statement}")


def _altered(command: Command, sources: dict[str, Row], request_id: str) -> SourceRow:
    """The source's row with an ALTER's new value columns: the create command it holds gets the
    new schema (and replaces the source it is applied over), so a restart loads the altered source."""
    alter = command.plan["command"] if isinstance(command.plan, dict) else {}
    row = sources.get(str(alter.get("name")))
    if not isinstance(row, SourceRow):
        raise MetastoreError(f"Source {alter.get('name')} does not exist.")
    schema = ", ".join(part for part in (str(row.command.get("schema", "")), str(alter.get("newColumns", ""))) if part)
    create = {**row.command, "schema": schema, "orReplace": True}
    return replace(row, sql=f"{row.sql}\n{command.statement}", command=create, request_id=request_id)


def _alter_of(old: SourceRow, new: SourceRow) -> Command | None:
    """The ALTER a source row's change is (its statement appended to the row's, the same query), or None."""
    if not new.sql.startswith(old.sql + "\n") or new.query_plan != old.query_plan:
        return None
    before = LogicalSchema.parse(str(old.command.get("schema", "")))
    after = LogicalSchema.parse(str(new.command.get("schema", "")))
    added = LogicalSchema(tuple(c for c in after if before.find(c.name) is None))
    statement = new.sql[len(old.sql) + 1:]
    alter = {"@type": "alterSourceV1", "name": new.name, "kind": new.kind, "newColumns": str(added)}
    return Command(command_id=f"{new.kind.lower()}/`{new.name}`/alter", statement=statement,
                   plan={"statementText": statement, "command": alter, "query": None, "config": {}},
                   properties=dict(new.properties))


class MetastoreLog:
    """``CommandLog``'s interface (create_topic, replay, submit, wait_for, position) over the tables."""

    def __init__(
        self,
        bootstrap_servers: str,
        service_id: str,
        *,
        internal_url: str = "",
        timeout: float = 30.0,
        before_execute: Callable[[int], None] | None = None,
        **database: Any,
    ) -> None:
        self.db = MetastoreDatabase(bootstrap_servers, service_id, internal_url=internal_url, timeout=timeout,
                                    **database)
        self.timeout = timeout
        self.before_execute = before_execute
        self.topic = self.db.topics[SOURCES]
        self._submitting = threading.Lock()

    def create_topic(self, replicas: int = 1, min_insync_replicas: int = 1) -> None:
        """Create the metastore tables' topics; ``replicas`` and ``min_insync_replicas``
        (``ksql.internal.topic.*``, the command topic's) are not applied to them."""
        self.db.create_topics()

    def replay(self, apply: Callable[[QueuedCommand], None], timeout: float | None = None) -> int:
        """Load the compacted tables into the views (calling ``apply``), then keep following."""

        pending: dict[str, Change] = {}  # query rows whose sources are not in the view yet

        def applicable(change: Change) -> bool:
            row = change.new
            if not isinstance(row, QueryRow):
                return True
            held = self.db.rows(SOURCES)
            return all(name in held for name in (*row.upstream, row.sink))

        def apply_change(change: Change) -> None:
            command = command_of(change)
            if command is not None:
                sources, types, queries = unpack_sequence(self.db.sequence)
                if change.table == SOURCES:
                    sources = change.offset + 1
                elif change.table == QUERIES:
                    queries = change.offset + 1
                apply(QueuedCommand(pack_sequence(sources, types, queries), command))

        def on_change(change: Change) -> None:
            if change.table == QUERIES:
                waiting = pending.pop(change.key, None)
                if waiting is not None and change.new is None:
                    return  # loaded and deleted before its sources were: nothing to run
                if not applicable(change):
                    pending[change.key] = change
                    return
            apply_change(change)
            if change.table == SOURCES:
                for key, waiting in list(pending.items()):
                    if applicable(waiting):
                        del pending[key]
                        apply_change(waiting)

        self.db.start(on_change)
        try:
            return self.db.wait_until_caught_up(timeout)
        except MetastoreError as exc:
            raise CommandLogError(str(exc)) from None

    def submit(self, execute: Callable[[], Command]) -> QueuedCommand:
        """Plan the statement on an up-to-date snapshot (``execute``), then write its row."""
        with self._submitting:
            try:
                self.db.wait_until_caught_up()
            except MetastoreError as exc:
                raise CommandLogError(str(exc)) from None
            if self.before_execute is not None:
                # Query ids never repeat (a dropped query's checkpoints stay behind): number new
                # ones past every row ever written, as changelog offsets only grow.
                sources, _, queries = unpack_sequence(self.db.sequence)
                self.before_execute(sources + queries)
            command = execute()
            write = write_of(command, self.db.rows(SOURCES), self.db.rows(QUERIES))
            try:
                sequence = self.db.write(write)
            except MetastoreUnavailableError as exc:
                raise CommandLogError(str(exc)) from None
        return QueuedCommand(sequence, command)

    def wait_for(self, sequence: int, timeout: float | None = None) -> None:
        try:
            self.db.wait_for(sequence, timeout)
        except MetastoreError as exc:
            raise CommandLogError(str(exc)) from None

    def wait_until_caught_up(self, timeout: float | None = None) -> int:
        try:
            return self.db.wait_until_caught_up(timeout)
        except MetastoreError as exc:
            raise CommandLogError(str(exc)) from None

    @property
    def position(self) -> int:
        return self.db.sequence

    def close(self) -> None:
        self.db.close()
