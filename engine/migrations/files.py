"""Migration files: names, versions, checksums, and the split of a file into statements."""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from engine.migrations.errors import MigrationError

MIGRATIONS_DIR = "migrations"
CONFIG_FILE = "ksql-migrations.properties"
MAX_VERSION = 999_999

_FILE_NAME = re.compile(r"V([0-9]{6})__(.+)\.sql")
# what a description may not keep in a file name: whitespace and the characters file systems refuse
_INVALID_NAME_CHARS = re.compile(r'\s|/|\\|:|\*|\?|"|<|>|\|')

log = logging.getLogger("kspark.migrations")


@dataclass(frozen=True, slots=True, kw_only=True)
class MigrationFile:
    """One migration file: its version, its name (the description, spaces for underscores), its path."""

    version: int
    name: str
    path: Path

    def __post_init__(self) -> None:
        if self.version < 1:
            raise MigrationError(f"Version must be positive, received {self.version}")

    def checksum(self) -> str:
        """The MD5 of the file's bytes, as 32 lower-case hex digits (what ksqlDB's tool records)."""
        return checksum(self.path)

    def text(self) -> str:
        try:
            return self.path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise MigrationError(f"Failed to read {self.path}: {exc}") from exc


def checksum(path: Path) -> str:
    """The MD5 of the file's bytes in lower-case hex."""
    try:
        return hashlib.md5(path.read_bytes(), usedforsecurity=False).hexdigest()
    except OSError as exc:
        raise MigrationError(f"Could not compute hash for file '{path}': {exc}") from exc


def file_prefix(version: int) -> str:
    """``V`` and the version in six digits: ``V000042``."""
    return f"V{version:06d}"


def new_file_name(version: int, description: str) -> str:
    """The name ``create`` gives a new file: ``V000002__Add_users.sql`` for ``Add users``."""
    return f"{file_prefix(version)}__{_INVALID_NAME_CHARS.sub('_', description)}.sql"


def parse_file_name(directory: Path, name: str) -> MigrationFile | None:
    """The migration a file name stands for, or None (with a warning) when it is not one."""
    match = _FILE_NAME.search(name)
    if match is None:
        log.warning("Skipping file does not match expected migration file pattern "
                    "'V<six digit number>__<name>.sql': %s", name)
        return None
    version = int(match.group(1))
    if version <= 0:
        raise MigrationError(f"MigrationFile file versions must be positive. Found: {name}")
    return MigrationFile(version=version, name=match.group(2).replace("_", " "), path=directory / name)


def _directory_names(directory: Path) -> list[str]:
    if not directory.is_dir():
        raise MigrationError(f"{directory} is not a directory.")
    try:
        return sorted(p.name for p in directory.iterdir() if not p.is_dir())
    except OSError as exc:
        raise MigrationError(f"Failed to retrieve files from {directory}: {exc}") from exc


def _unique(migrations: list[MigrationFile]) -> list[MigrationFile]:
    for previous, current in zip(migrations, migrations[1:], strict=False):
        if current.version == previous.version:
            raise MigrationError(
                "Found multiple migration files with the same version. "
                f"Version: {current.version}. Files: '{current.path}', '{previous.path}'")
    return migrations


def all_migrations(directory: Path) -> list[MigrationFile]:
    """Every migration file of ``directory``, in version order; two files of one version are an error."""
    found = [m for name in _directory_names(directory) if (m := parse_file_name(directory, name))]
    return _unique(sorted(found, key=lambda m: m.version))


def migration_for_version(directory: Path, version: int) -> MigrationFile | None:
    """The file of ``version``, or None."""
    prefix = file_prefix(version)
    found = [m for name in _directory_names(directory) if name.startswith(prefix)
             if (m := parse_file_name(directory, name))]
    _unique(found)
    return found[0] if found else None


def split_statements(text: str) -> list[str]:
    """A file's statements, each ending in ``;``, comments removed, the rest kept as written.

    Quoted strings are kept whole (a ``;`` or ``--`` inside one is text); an escaped quote
    (``''``) reads as two adjacent strings, which come out joined again. Text after the last
    ``;`` is an error.
    """
    statements: list[str] = []
    current: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text[i] == "'":
            close = text.find("'", i + 1)
            if close < 0:
                raise MigrationError("Invalid sql - failed to find closing token '''")
            current.append(text[i:close + 1])
            i = close + 1
        elif text.startswith("--", i) and i < n - 1:
            close = text.find("\n", i + 1)
            if close < 0:
                raise MigrationError("Invalid sql - failed to find closing token '\n'")
            i = close + 1
        elif text.startswith("/*", i) and i < n - 1:
            close = text.find("*/", i + 1)
            if close < 0:
                raise MigrationError("Invalid sql - failed to find closing token '*/'")
            i = close + 2
        elif text[i] == ";":
            current.append(";")
            statements.append("".join(current))
            current = []
            i += 1
        else:
            current.append(text[i])
            i += 1
    rest = "".join(current)
    if rest.strip():
        raise MigrationError(f"Unmatched command at end of file; missing semicolon: '{rest}'")
    return statements
