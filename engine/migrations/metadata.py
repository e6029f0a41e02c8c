"""The metadata on the server: a stream of migration events folded by a table per version.

The stream (``MIGRATION_EVENTS``) and table (``MIGRATION_SCHEMA_VERSIONS``) have ksqlDB's
tool's columns, key, formats and topics; every state change of a migration writes two rows,
one keyed by its version and one keyed ``CURRENT``. Times are epoch milliseconds as text.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from engine.migrations.client import Row, ServerClient
from engine.migrations.config import MigrationConfig
from engine.migrations.errors import MigrationError
from engine.migrations.files import MigrationFile

NONE_VERSION = "<none>"
CURRENT_VERSION_KEY = "CURRENT"
EMPTY_ERROR_REASON = "N/A"
EMPTY_TIMESTAMP = "N/A"
COLUMNS = ("VERSION_KEY", "VERSION", "NAME", "STATE", "CHECKSUM", "STARTED_ON", "COMPLETED_ON",
           "PREVIOUS", "ERROR_REASON")
_SELECTED = "version, checksum, previous, state, name, started_on, completed_on, error_reason"


class MigrationState(Enum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    MIGRATED = "MIGRATED"
    ERROR = "ERROR"


def create_stream_statement(name: str, topic: str, replicas: int) -> str:
    """The metadata stream: one event per state change of a migration."""
    return (f"CREATE STREAM {name} (\n"
            "  version_key  STRING KEY,\n  version      STRING,\n  name         STRING,\n"
            "  state        STRING,\n  checksum     STRING,\n  started_on   STRING,\n"
            "  completed_on STRING,\n  previous     STRING,\n  error_reason STRING\n"
            f") WITH (\n  KAFKA_TOPIC='{topic}',\n  VALUE_FORMAT='JSON',\n  PARTITIONS=1,\n"
            f"  REPLICAS={replicas}\n);")


def create_table_statement(name: str, stream: str, topic: str) -> str:
    """The metadata table: each version key's latest event."""
    latest = ",\n".join(f"    latest_by_offset({c}) AS {c}" for c in
                        ("version", "name", "state", "checksum", "started_on", "completed_on",
                         "previous", "error_reason"))
    return (f"CREATE TABLE {name}\n  WITH (\n    KAFKA_TOPIC='{topic}'\n  )\n  AS SELECT\n"
            f"    version_key,\n{latest}\n  FROM {stream}\n  GROUP BY version_key;")


def format_timestamp(epoch_millis: str) -> str:
    """``yyyy-MM-dd HH:mm:ss.SSS z`` in the local time zone; empty and ``N/A`` stay as they are."""
    if epoch_millis in ("", EMPTY_TIMESTAMP):
        return epoch_millis
    moment = datetime.fromtimestamp(int(epoch_millis) / 1000).astimezone()
    return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d} {moment.tzname()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionInfo:
    """One version's row of the metadata table (or a pending file's stand-in)."""

    version: int
    checksum: str
    previous: str
    state: MigrationState
    name: str
    started_on: str
    completed_on: str
    error_reason: str

    @classmethod
    def from_row(cls, row: Row) -> VersionInfo:
        def text(column: str) -> str:
            value = row.string(column)
            if value is None:
                raise MigrationError(f"The migrations metadata row has no {column.upper()}: {dict(row.values)}")
            return value

        try:
            return cls(version=int(text("version")), checksum=text("checksum"), previous=text("previous"),
                       state=MigrationState(text("state")), name=text("name"),
                       started_on=format_timestamp(text("started_on")),
                       completed_on=format_timestamp(text("completed_on")),
                       error_reason=text("error_reason"))
        except ValueError as exc:
            raise MigrationError(f"The migrations metadata row is not one of the tool's: {dict(row.values)}") from exc

    @classmethod
    def pending(cls, migration: MigrationFile) -> VersionInfo:
        return cls(version=migration.version, checksum="N/A", previous="N/A", state=MigrationState.PENDING,
                   name=migration.name, started_on=EMPTY_TIMESTAMP, completed_on=EMPTY_TIMESTAMP,
                   error_reason=EMPTY_ERROR_REASON)


class Metadata:
    """Reads and writes of the metadata stream and table of ``config`` through ``client``."""

    def __init__(self, config: MigrationConfig, client: ServerClient) -> None:
        self.config = config
        self.client = client

    def current_version(self) -> str:
        """The ``CURRENT`` row's version, or ``<none>``."""
        table = self.config.table_name
        try:
            rows = self.client.pull_query(
                f"SELECT VERSION FROM {table} WHERE version_key = '{CURRENT_VERSION_KEY}';")
        except MigrationError as exc:
            raise MigrationError(f"Could not query {table}: {exc}") from exc
        return (rows[0].string("VERSION") or NONE_VERSION) if rows else NONE_VERSION

    def optional_info(self, version: str) -> VersionInfo | None:
        try:
            rows = self.client.pull_query(
                f"SELECT {_SELECTED} FROM {self.config.table_name} WHERE version_key = '{version}';")
        except MigrationError as exc:
            raise MigrationError(f"Failed to query state for migration with version {version}: {exc}") from exc
        return VersionInfo.from_row(rows[0]) if rows else None

    def info(self, version: str) -> VersionInfo:
        found = self.optional_info(version)
        if found is None:
            raise MigrationError(f"Failed to query state for migration with version {version}: "
                                 "no such migration is present in the migrations metadata table")
        return found

    def infos(self, versions: Sequence[int]) -> dict[int, VersionInfo | None]:
        """The rows of ``versions`` in one multi-key pull query."""
        keys = "', '".join(str(v) for v in versions)
        try:
            rows = self.client.pull_query(
                f"SELECT {_SELECTED} FROM {self.config.table_name} WHERE version_key IN ('{keys}');")
        except MigrationError as exc:
            raise MigrationError(
                f"Failed to query state for migration with versions {list(versions)}: {exc}") from exc
        found = {info.version: info for info in map(VersionInfo.from_row, rows)}
        return {v: found.get(v) for v in versions}

    def latest_migrated_version(self) -> str:
        """The newest version in state MIGRATED: ``CURRENT``'s, or the one before it when it is not."""
        current = self.current_version()
        if current == NONE_VERSION:
            return current
        info = self.info(current)
        if info.state is MigrationState.MIGRATED:
            return current
        if info.previous == NONE_VERSION:
            return NONE_VERSION
        validate_is_migrated(info.previous, self.info(info.previous), current)
        return info.previous

    def write(self, key: str, state: MigrationState, started_on: str, completed_on: str,
              migration: MigrationFile, previous: str, checksum: str, error_reason: str | None) -> None:
        values: tuple[Any, ...] = (key, str(migration.version), migration.name, state.value, checksum,
                                   started_on, completed_on, previous, error_reason or EMPTY_ERROR_REASON)
        self.client.insert_row(self.config.stream_name, dict(zip(COLUMNS, values, strict=True)))

    def wait_for_state(self, version: str, state: MigrationState, timeout: float) -> MigrationState | None:
        """Poll the table until ``version``'s row reaches ``state`` (the table folds the stream
        asynchronously); the state last seen."""
        deadline = time.monotonic() + timeout
        seen: MigrationState | None = None
        while True:
            info = self.optional_info(version)
            seen = info.state if info else None
            if seen is state or time.monotonic() >= deadline:
                return seen
            time.sleep(0.25)


def validate_is_migrated(version: str, info: VersionInfo, next_version: str) -> None:
    if info.state is not MigrationState.MIGRATED:
        raise MigrationError(
            "Discovered version with previous version that does not have status MIGRATED. "
            f"Version: {next_version}. Previous version: {version}. Previous version status: {info.state.value}")
