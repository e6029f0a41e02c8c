"""The tool's commands. Each prints ksqlDB's tool's lines through ``say`` and raises
``MigrationError`` with the line that explains a failure."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.data.java_properties import parse_properties
from engine.errors import KsqlError
from engine.migrations import files as F
from engine.migrations.client import ServerClient
from engine.migrations.config import MigrationConfig, new_project_properties
from engine.migrations.errors import MigrationError
from engine.migrations.metadata import (
    CURRENT_VERSION_KEY,
    NONE_VERSION,
    Metadata,
    MigrationState,
    VersionInfo,
    create_stream_statement,
    create_table_statement,
    validate_is_migrated,
)

COMMAND = "kspark migrations"
UNSUPPORTED_STATEMENTS = ("DESCRIBE", "EXPLAIN", "SELECT", "PRINT", "SHOW", "LIST")
# how long apply waits for the metadata table to show a state it wrote (the table folds the
# stream in a persistent query, a micro-batch or more behind on a busy machine)
STATE_TIMEOUT_SECONDS = 120.0

Say = Callable[[str], None]


def _now_millis() -> str:
    return str(int(time.time() * 1000))


# ---------------------------------------------------------------------------- new-project, create


def new_project(project: Path, server_url: str, say: Say) -> None:
    """A project directory with ``migrations/`` and ``ksql-migrations.properties`` naming the server."""
    say(f"Creating new migrations project at {project}")
    _create_directory(project, say)
    _create_directory(project / F.MIGRATIONS_DIR, say)
    properties = project / F.CONFIG_FILE
    text = new_project_properties(server_url)
    say(f"Creating file: {properties}")
    try:
        with properties.open("x", encoding="utf-8") as out:
            say(f"Writing to config file: {text}")
            out.write(text)
    except FileExistsError as exc:
        raise MigrationError(f"Failed to create file. File already exists: {properties}") from exc
    except OSError as exc:
        raise MigrationError(f"Failed to create file {properties}: {exc.strerror or exc}") from exc
    say("Migrations project directory created successfully")


def _create_directory(path: Path, say: Say) -> None:
    if path.is_dir():
        say(f"{path} already exists. Skipping directory creation.")
        return
    if path.exists():
        raise MigrationError(f"{path} already exists as a file. Cannot create directory.")
    say(f"Creating directory: {path}")
    try:
        path.mkdir(parents=True)
    except PermissionError as exc:
        raise MigrationError(f"Permission denied: create directory {path}") from exc
    except OSError as exc:
        raise MigrationError(f"Failed to create directory {path}: {exc.strerror or exc}") from exc


def create(config: MigrationConfig, description: str, version: int | None, say: Say) -> Path:
    """A blank migration file, of ``version`` or the one after the newest file's."""
    directory = config.migrations_dir
    if version:
        existing = F.migration_for_version(directory, version)
        if existing is not None:
            raise MigrationError(f"Found existing migrations file for version {version}: {existing.path}")
    if not description:
        raise MigrationError("Description cannot be empty.")
    if not version:
        versions = [m.version for m in F.all_migrations(directory)]
        version = (versions[-1] if versions else 0) + 1
    if version <= 0:
        raise MigrationError(f"Invalid version file version: {version}. Version must be a positive integer.")
    if version > F.MAX_VERSION:
        raise MigrationError(f"Invalid version file version: {version}. Version must fit into a six-digit integer.")
    path = directory / F.new_file_name(version, description)
    say(f"Creating migration file: {path}")
    try:
        path.open("x").close()
    except OSError as exc:
        raise MigrationError(f"Failed to create file {path}: {exc.strerror or exc}") from exc
    say("Migration file successfully created")
    return path


# ---------------------------------------------------------------------------- metadata


def initialize_metadata(config: MigrationConfig, client: ServerClient, say: Say) -> None:
    """Create the metadata stream and the table that folds it."""
    stream, table = config.stream_name, config.table_name
    statements = (
        ("stream", stream, create_stream_statement(stream, config.stream_topic(client.service_id),
                                                    config.topic_replicas)),
        ("table", table, create_table_statement(table, stream, config.table_topic(client.service_id))),
    )
    say("Initializing migrations metadata")
    for kind, name, statement in statements:
        say(f"Creating {kind}: {name}")
        try:
            client.execute_statement(statement)
        except MigrationError as exc:
            raise MigrationError(f"Failed to create {kind} {name}: {exc}") from exc
    say("Migrations metadata initialized successfully")


def destroy_metadata(config: MigrationConfig, client: ServerClient, say: Say) -> None:
    """Terminate the table's query, drop the table and the stream with their topics."""
    say("Cleaning migrations metadata stream and table from ksqlDB server")
    table, stream = config.table_name, config.stream_name
    if _source_exists(client, table, "table"):
        try:
            description = client.describe_source(table)
        except MigrationError as exc:
            raise MigrationError(f"Failed to describe metadata table '{table}': {exc}") from exc
        _terminate_writer(client, [str(q.get("id")) for q in description.get("writeQueries", ())], say)
        _drop(client, table, "table", say)
    else:
        say("Metadata table does not exist. Skipping cleanup.")
    if _source_exists(client, stream, "stream"):
        _drop(client, stream, "stream", say)
    else:
        say("Metadata stream does not exist. Skipping cleanup.")
    say("Migrations metadata cleaned successfully")


def _source_exists(client: ServerClient, name: str, kind: str) -> bool:
    try:
        names = client.source_names("TABLES" if kind == "table" else "STREAMS")
    except MigrationError as exc:
        raise MigrationError(f"Failed to check for presence of metadata {kind} '{name}': {exc}") from exc
    return any(n.upper() == name.upper() for n in names)


def _terminate_writer(client: ServerClient, query_ids: Sequence[str], say: Say) -> None:
    if not query_ids:
        say("Found 0 queries writing to the metadata table")
        return
    if len(query_ids) > 1:
        raise MigrationError("Found multiple queries writing to the metadata table. Query IDs: "
                             + "'" + "', '".join(query_ids) + "'.")
    [query_id] = query_ids
    say(f"Found 1 query writing to the metadata table. Query ID: {query_id}")
    say(f"Terminating query with ID: {query_id}")
    try:
        client.execute_statement(f"TERMINATE {query_id};")
    except MigrationError as exc:
        raise MigrationError(f"Failed to terminate query populating metadata table. "
                             f"Query ID: {query_id}. Error: {exc}") from exc


def _drop(client: ServerClient, name: str, kind: str, say: Say) -> None:
    say(f"Dropping migrations metadata {kind}: {name}")
    try:
        client.execute_statement(f"DROP {kind.upper()} {name} DELETE TOPIC;")
    except MigrationError as exc:
        raise MigrationError(f"Failed to drop metadata {kind} '{name}': {exc}") from exc


def require_metadata(config: MigrationConfig, client: ServerClient) -> None:
    """The metadata stream and table exist, or the one line that says to initialize them."""
    for kind, name in (("stream", config.stream_name), ("table", config.table_name)):
        try:
            client.describe_source(name)
        except MigrationError as exc:
            raise MigrationError(
                f"Failed to verify existence of migrations metadata {kind} '{name}'. "
                f"Did you run `{COMMAND} initialize-metadata`? Error message: {exc}") from exc


# ---------------------------------------------------------------------------- info, validate


def info(config: MigrationConfig, client: ServerClient, say: Say) -> list[VersionInfo]:
    """Print the current version and a row per migration file; the rows."""
    require_metadata(config, client)
    metadata = Metadata(config, client)
    say(f"Current migration version: {metadata.current_version()}")
    migrations = F.all_migrations(config.migrations_dir)
    if not migrations:
        say("No migrations files found")
        return []
    found = metadata.infos([m.version for m in migrations])
    rows = [found.get(m.version) or VersionInfo.pending(m) for m in migrations]
    say(format_table(rows))
    return rows


_INFO_COLUMNS: tuple[tuple[str, Callable[[VersionInfo], str]], ...] = (
    ("Version", lambda v: str(v.version)),
    ("Name", lambda v: v.name),
    ("State", lambda v: v.state.value),
    ("Previous Version", lambda v: v.previous),
    ("Started On", lambda v: v.started_on),
    ("Completed On", lambda v: v.completed_on),
    ("Error Reason", lambda v: v.error_reason),
)


def format_table(rows: Sequence[VersionInfo]) -> str:
    """ksqlDB's tool's table: a divider, the header, a divider, a line per version, a divider."""
    cells = [[extract(row) for _header, extract in _INFO_COLUMNS] for row in rows]
    widths = [max([len(header)] + [len(line[i]) for line in cells]) for i, (header, _e) in enumerate(_INFO_COLUMNS)]
    divider = "-" * (sum(widths) + 3 * len(widths) - 1)

    def line(values: Sequence[str]) -> str:
        return " " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " "

    body = [line([h for h, _e in _INFO_COLUMNS])] + [line(c) for c in cells]
    return "\n".join([divider, body[0], divider, *body[1:], divider]) + "\n"


def validate(config: MigrationConfig, client: ServerClient) -> None:
    """Every applied version back from the latest MIGRATED one has its file, with the checksum recorded."""
    metadata = Metadata(config, client)
    version = metadata.latest_migrated_version()
    next_version: str | None = None
    while version != NONE_VERSION:
        found = metadata.info(version)
        if next_version is not None:
            validate_is_migrated(version, found, next_version)
        try:
            migration = F.migration_for_version(config.migrations_dir, int(version))
        except MigrationError:
            migration = None
        if migration is None:
            raise MigrationError(f"No migrations file found for version with status MIGRATED. Version: {version}")
        actual = migration.checksum()
        if found.checksum != actual:
            raise MigrationError(
                f"Migrations file found for version {version} does not match the checksum saved for this "
                f"version. Expected checksum: {found.checksum}. Actual checksum: {actual}. "
                f"File name: {migration.path}")
        next_version, version = version, found.previous


def validate_command(config: MigrationConfig, client: ServerClient, say: Say) -> None:
    require_metadata(config, client)
    validate(config, client)
    say("Successfully validated checksums for migrations that have already been applied")


# ---------------------------------------------------------------------------- apply


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """Which migrations ``apply`` runs: all, the next, up to a version, or one version."""

    all: bool = False
    next: bool = False
    until: int | None = None
    version: int | None = None


def parse_defines(defines: Sequence[str]) -> dict[str, str]:
    """``--define name=value`` options as variables."""
    variables: dict[str, str] = {}
    for pair in defines:
        parts = pair.split("=")
        if len(parts) != 2 or not parts[0]:
            raise MigrationError(
                f"Failed to parse argument {pair}: variables must be defined using '=' (i.e. var=val).")
        variables[parts[0]] = parts[1]
    return variables


def load_headers(path: str | None) -> dict[str, str]:
    """``--headers``: a properties file of request headers."""
    if not path or not path.strip():
        return {}
    try:
        return parse_properties(Path(path.strip()).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise MigrationError(f"Could not parse headers file '{path}'.") from exc


def to_apply(directory: Path, target: Target, previous: str) -> list[F.MigrationFile]:
    """The files ``target`` picks after the latest migrated version ``previous``."""
    minimum = 1 if previous == NONE_VERSION else int(previous) + 1
    if target.version:
        migration = F.migration_for_version(directory, target.version)
        if migration is None:
            raise MigrationError(f"No migration file with version {target.version} exists.")
        if target.version < minimum:
            raise MigrationError("Version must be newer than the last version migrated. "
                                 f"Last version migrated was {previous}")
        return [migration]
    found = [m for m in F.all_migrations(directory) if m.version >= minimum
             and (target.until is None or m.version <= target.until)]
    if target.next:
        if not found:
            raise MigrationError("No eligible migrations found.")
        return found[:1]
    return found


def check_supported(sql: str) -> None:
    """The statement kinds a migration file may not hold, refused by their first word(s)."""
    tokens = sql.upper().split()
    if tokens and tokens[0] in UNSUPPORTED_STATEMENTS:
        raise MigrationError(f"'{tokens[0]}' statements are not supported.")
    if tokens[:2] == ["RUN", "SCRIPT"]:
        raise MigrationError("'RUN SCRIPT' statements are not supported.")


def parse_command(sql: str, variables: Mapping[str, str]) -> tuple[str, Any]:
    """One statement of a file: its text with variables substituted, and its parsed form."""
    from engine.parser import parse

    check_supported(sql)
    try:
        parsed = parse(sql, variables=variables)
    except KsqlError as exc:
        raise MigrationError(f"Failed to parse the statement. Statement: {sql.strip()}. Reason: {exc}") from exc
    if not parsed:
        raise MigrationError(f"Failed to parse the statement. Statement: {sql.strip()}. Reason: it is empty.")
    return parsed[0].text, parsed[0].statement


def run_statements(statements: Sequence[str], defines: Mapping[str, str], client: ServerClient | None) -> None:
    """Run a file's statements; with ``client`` None only parse them (DEFINE and UNDEFINE still
    count, as later statements need their variables)."""
    from engine.parser import ast

    variables = {k.upper(): v for k, v in defines.items()}
    properties: dict[str, Any] = {}
    for sql in statements:
        action = "parse" if client is None else "execute"
        try:
            text, statement = parse_command(sql, variables)
            if isinstance(statement, ast.DefineVariable):
                variables[statement.name.upper()] = statement.value
            elif isinstance(statement, ast.UndefineVariable):
                variables.pop(statement.name.upper(), None)
            elif client is None:
                continue
            elif isinstance(statement, ast.SetProperty):
                properties[statement.name] = statement.value
            elif isinstance(statement, ast.UnsetProperty):
                properties.pop(statement.name, None)
            else:
                client.execute_statement(text, properties)
        except MigrationError as exc:
            raise MigrationError(f"Failed to {action} sql: {sql.strip()}. Error: {exc}") from exc


class Applier:
    """``apply``: the chosen files one after the other, each recorded RUNNING, then MIGRATED or ERROR."""

    def __init__(self, config: MigrationConfig, client: ServerClient, *, defines: Mapping[str, str],
                 dry_run: bool, say: Say, state_timeout: float = STATE_TIMEOUT_SECONDS) -> None:
        self.config = config
        self.client = client
        self.metadata = Metadata(config, client)
        self.defines = dict(defines)
        self.dry_run = dry_run
        self.say = say
        self.state_timeout = state_timeout

    def run(self, target: Target) -> list[F.MigrationFile]:
        require_metadata(self.config, self.client)
        if self.dry_run:
            self.say("This is a dry run. No ksqlDB statements will be submitted to the ksqlDB server.")
        self.say("Validating current migration state before applying new migrations")
        validate(self.config, self.client)
        previous = self.metadata.latest_migrated_version()
        self.say("Loading migration files")
        migrations = to_apply(self.config.migrations_dir, target, previous)
        self.say(f"{len(migrations)} migration file(s) loaded." if migrations else "No eligible migrations found.")
        for migration in migrations:
            self.apply(migration, previous)
            previous = str(migration.version)
        if migrations and not self.dry_run:
            self._await(previous, MigrationState.MIGRATED)
        return migrations

    def apply(self, migration: F.MigrationFile, previous: str) -> None:
        self.say(f"Applying migration version {migration.version}: {migration.name}")
        text = migration.text()
        self.say(f"{migration.path} contents:\n{text}")
        if self.dry_run:
            self.say("Dry run complete. No migrations were actually applied.")
            return
        if previous != NONE_VERSION:
            self._await(previous, MigrationState.MIGRATED)
        started = _now_millis()
        self._record(MigrationState.RUNNING, started, migration, previous, None)
        try:
            statements = F.split_statements(text)
            run_statements(statements, self.defines, None)
            run_statements(statements, self.defines, self.client)
        except MigrationError as exc:
            self._record(MigrationState.ERROR, started, migration, previous, str(exc))
            self._await(str(migration.version), MigrationState.ERROR)
            raise
        self._record(MigrationState.MIGRATED, started, migration, previous, None)
        self.say("Successfully migrated")

    def _record(self, state: MigrationState, started: str, migration: F.MigrationFile, previous: str,
                error: str | None) -> None:
        completed = _now_millis() if state in (MigrationState.MIGRATED, MigrationState.ERROR) else ""
        checksum = migration.checksum()
        for key in (CURRENT_VERSION_KEY, str(migration.version)):
            self.metadata.write(key, state, started, completed, migration, previous, checksum, error)

    def _await(self, version: str, state: MigrationState) -> None:
        seen = self.metadata.wait_for_state(version, state, self.state_timeout)
        if seen is not state:
            raise MigrationError(f"Failed to verify status of version {version}: expected status "
                                 f"{state.value} in {self.config.table_name}, got "
                                 f"{seen.value if seen else 'no row'} after {self.state_timeout:g} seconds")
