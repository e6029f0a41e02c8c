"""The metastore database (KLIP-18): UserDataSources and UserTypes on key-compacted changelogs."""

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
from engine.metastore.database.rows import SOURCES, TYPES, SourceRow, TypeRow

__all__ = [
    "INTERNAL_PATH",
    "SOURCES",
    "TYPES",
    "Change",
    "MetastoreDatabase",
    "MetastoreUnavailableError",
    "NotOwnerError",
    "SourceRow",
    "TypeRow",
    "Write",
    "changelog_topic",
    "pack_sequence",
    "unpack_sequence",
]
