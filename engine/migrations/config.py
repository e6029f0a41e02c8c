"""``ksql-migrations.properties``: the tool's properties, their defaults, the new project's file."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.data.java_properties import parse_properties
from engine.migrations.errors import MigrationError
from engine.migrations.files import MIGRATIONS_DIR

SERVER_URL = "ksql.server.url"
BASIC_AUTH_USERNAME = "ksql.auth.basic.username"
BASIC_AUTH_PASSWORD = "ksql.auth.basic.password"
STREAM_NAME = "ksql.migrations.stream.name"
TABLE_NAME = "ksql.migrations.table.name"
STREAM_TOPIC_NAME = "ksql.migrations.stream.topic.name"
TABLE_TOPIC_NAME = "ksql.migrations.table.topic.name"
TOPIC_REPLICAS = "ksql.migrations.topic.replicas"
DIR_OVERRIDE = "ksql.migrations.dir.override"
SSL_TRUSTSTORE_LOCATION = "ssl.truststore.location"
SSL_TRUSTSTORE_PASSWORD = "ssl.truststore.password"
SSL_KEYSTORE_LOCATION = "ssl.keystore.location"
SSL_KEYSTORE_PASSWORD = "ssl.keystore.password"
SSL_KEY_PASSWORD = "ssl.key.password"
SSL_KEY_ALIAS = "ssl.key.alias"
SSL_ALPN = "ssl.alpn"
SSL_VERIFY_HOST = "ssl.verify.host"

DEFAULT_STREAM_NAME = "MIGRATION_EVENTS"
DEFAULT_TABLE_NAME = "MIGRATION_SCHEMA_VERSIONS"

# The commented-out sections of a new project's properties file, each with its defaults.
_NEW_PROJECT_SECTIONS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Migrations metadata configs", (
        (STREAM_NAME, DEFAULT_STREAM_NAME), (TABLE_NAME, DEFAULT_TABLE_NAME),
        (STREAM_TOPIC_NAME, f"ksql-service-idksql_{DEFAULT_STREAM_NAME}"),
        (TABLE_TOPIC_NAME, f"ksql-service-idksql_{DEFAULT_TABLE_NAME}"),
        (TOPIC_REPLICAS, "1"))),
    ("TLS configs", (
        (SSL_TRUSTSTORE_LOCATION, ""), (SSL_TRUSTSTORE_PASSWORD, ""), (SSL_KEYSTORE_LOCATION, ""),
        (SSL_KEYSTORE_PASSWORD, ""), (SSL_KEY_PASSWORD, ""), (SSL_KEY_ALIAS, ""),
        (SSL_ALPN, "false"), (SSL_VERIFY_HOST, "true"))),
    ("ksqlDB server authentication configs", ((BASIC_AUTH_USERNAME, ""), (BASIC_AUTH_PASSWORD, ""))),
    ("Migrations directory configs", ((DIR_OVERRIDE, ""),)),
)


def new_project_properties(server_url: str) -> str:
    """The text of a new project's ``ksql-migrations.properties``: the URL, the rest commented out."""
    lines = [f"{SERVER_URL}={server_url}"]
    for header, entries in _NEW_PROJECT_SECTIONS:
        lines += ["", f"# {header}:"] + [f"# {name}={value}" for name, value in entries]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationConfig:
    """The tool's properties as read from a file, with ksqlDB's defaults; ``path`` is the file."""

    path: Path
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> MigrationConfig:
        """Read ``path``; it must exist and name ``ksql.server.url``."""
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise MigrationError(f"Failed to load properties file {file}: {exc.strerror or exc}") from exc
        properties = parse_properties(text)
        if SERVER_URL not in properties:
            raise MigrationError(f"Missing required property: {SERVER_URL}")
        return cls(path=file, properties=properties)

    def get(self, name: str, default: str = "") -> str:
        value = self.properties.get(name, "")
        return value if value != "" else default

    @property
    def server_url(self) -> str:
        return self.get(SERVER_URL)

    @property
    def stream_name(self) -> str:
        return self.get(STREAM_NAME, DEFAULT_STREAM_NAME)

    @property
    def table_name(self) -> str:
        return self.get(TABLE_NAME, DEFAULT_TABLE_NAME)

    def stream_topic(self, service_id: Callable[[], str]) -> str:
        """The metadata stream's topic; by default ``<service id>ksql_<stream name>``."""
        return self.get(STREAM_TOPIC_NAME) or f"{service_id()}ksql_{self.stream_name}"

    def table_topic(self, service_id: Callable[[], str]) -> str:
        """The metadata table's topic; by default ``<service id>ksql_<table name>``."""
        return self.get(TABLE_TOPIC_NAME) or f"{service_id()}ksql_{self.table_name}"

    @property
    def topic_replicas(self) -> int:
        text = self.get(TOPIC_REPLICAS, "1")
        try:
            return int(text)
        except ValueError as exc:
            raise MigrationError(
                f"Invalid value {text} for configuration {TOPIC_REPLICAS}: Not a number of type INT") from exc

    @property
    def migrations_dir(self) -> Path:
        """``ksql.migrations.dir.override``, else ``migrations/`` beside the properties file."""
        override = self.get(DIR_OVERRIDE)
        return Path(override) if override else self.path.absolute().parent / MIGRATIONS_DIR

    @property
    def basic_auth(self) -> tuple[str, str] | None:
        user, password = self.get(BASIC_AUTH_USERNAME), self.get(BASIC_AUTH_PASSWORD)
        return (user, password) if user or password else None
