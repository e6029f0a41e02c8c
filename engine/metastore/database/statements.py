"""The metastore database behind the command log's interface, for the server's statements.

    log = MetastoreLog(bootstrap, "my_service", internal_url="http://10.0.0.5:8088")
    log.create_topic(); log.replay(apply)          # load the compacted tables, then follow
    queued = log.submit(execute)                   # the statement's command, as a row write
    log.wait_for(queued.sequence)                  # this server's views include it

A server that keeps its metastore in tables (``kspark server --metastore tables``) swaps its
``CommandLog`` for this class: statements are validated and planned by the server exactly
as with the command topic (``execute``), then the command they produce becomes one row
write: CREATE [... AS SELECT] inserts the source's row (its plan included), DROP deletes
it (a tombstone). The views call ``apply`` with the command a row means (a create from the
stored plan, or a drop), so the engine starts a new row's query and stops a deleted row's.
TERMINATE and INSERT INTO ... SELECT have no row (KLIP-18 relies on KLIP-20 and KLIP-17):
they are refused with a message saying so.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
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
from engine.metastore.database.rows import SOURCES, SourceRow

TERMINATE_REFUSED = (
    "TERMINATE is not supported when the metastore is kept in tables (--metastore tables): a "
    "query runs as long as the source it writes exists; drop the source to stop it (KLIP-20)."
)
INSERT_INTO_REFUSED = (
    "INSERT INTO ... SELECT is not supported when the metastore is kept in tables (--metastore "
    "tables): a source holds exactly one query, the one that created it (KLIP-17)."
)


def command_of(change: Change) -> Command | None:
    """The command a committed ``UserDataSources`` change means to the engine (None: nothing)."""
    if change.table != SOURCES:
        return None
    if isinstance(change.new, SourceRow):
        row = change.new
        return Command(command_id=f"{row.kind.lower()}/`{row.name}`/create", statement=row.sql,
                       plan=row.statement_plan(), properties=dict(row.properties))
    if isinstance(change.old, SourceRow):
        old = change.old
        drop = old.drop_plan()
        return Command(command_id=f"{old.kind.lower()}/`{old.name}`/drop", statement=drop["statementText"], plan=drop)
    return None


def write_of(command: Command) -> Write:
    """The row write a planned statement's command is (``MetastoreError`` if it has none)."""
    if command.terminate is not None:
        raise MetastoreError(TERMINATE_REFUSED)
    plan = command.plan if isinstance(command.plan, dict) else {}
    kind = str((plan.get("command") or {}).get("@type", ""))
    request_id = uuid.uuid4().hex
    if kind.startswith(("createStream", "createTable")):
        row = SourceRow.from_statement_plan(plan, command.properties, request_id)
        return Write(SOURCES, row.name, row, request_id)
    if kind.startswith("dropSource"):
        return Write(SOURCES, str(plan["command"]["name"]), None, request_id)
    if plan.get("query") is not None:
        raise MetastoreError(INSERT_INTO_REFUSED)
    raise MetastoreError(f"The statement has no metastore row to write: {command.statement}")


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

    def create_topic(self) -> None:
        self.db.create_topics()

    def replay(self, apply: Callable[[QueuedCommand], None], timeout: float | None = None) -> int:
        """Load the compacted tables into the views (calling ``apply``), then keep following."""

        def on_change(change: Change) -> None:
            command = command_of(change)
            if command is not None:
                positions = unpack_sequence(self.db.sequence)
                apply(QueuedCommand(pack_sequence(change.offset + 1, positions[1]), command))

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
                self.before_execute(unpack_sequence(self.db.sequence)[0])
            command = execute()
            write = write_of(command)
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
