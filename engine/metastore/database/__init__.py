"""The metastore database (KLIP-18): UserDataSources, UserTypes and UserQueries on key-compacted changelogs."""

from engine.metastore.database.database import (
    INTERNAL_PATH,
    Change,
    MetastoreDatabase,
    MetastoreUnavailableError,
    NotOwnerError,
    Write,
    changelog_topic,
    pack_sequence,
    unpack_sequence,
)
from engine.metastore.database.rows import QUERIES, SOURCES, TYPES, QueryRow, SourceRow, TypeRow

__all__ = [
    "INTERNAL_PATH",
    "QUERIES",
    "SOURCES",
    "TYPES",
    "Change",
    "MetastoreDatabase",
    "MetastoreUnavailableError",
    "NotOwnerError",
    "QueryRow",
    "SourceRow",
    "TypeRow",
    "Write",
    "changelog_topic",
    "pack_sequence",
    "unpack_sequence",
]
