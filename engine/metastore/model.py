"""Metastore entries and the interface a durable store implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from engine.plan.schema import LogicalSchema
from engine.plan.steps import Formats, TimestampColumn, WindowInfo


@dataclass(frozen=True, slots=True, kw_only=True)
class DataSource:
    """A stream or table: its schema, topic, formats and how its records are timed."""

    name: str
    kind: str  # STREAM or TABLE
    schema: LogicalSchema
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None
    window_info: WindowInfo | None = None
    is_source: bool = False
    sql: str = ""

    @property
    def is_table(self) -> bool:
        return self.kind == "TABLE"


class MetaStore(Protocol):
    """Sources by name, with referential integrity between sources and queries."""

    def get(self, name: str) -> DataSource | None: ...

    def put(self, source: DataSource, *, replace: bool = False) -> None: ...

    def delete(self, name: str) -> DataSource: ...

    def all(self) -> list[DataSource]: ...

    def link_query(self, query_id: str, reads: tuple[str, ...], writes: str) -> None: ...

    def unlink_query(self, query_id: str) -> None: ...

    def readers(self, name: str) -> list[str]: ...

    def writers(self, name: str) -> list[str]: ...


def upgrade_problem(existing: DataSource, replacement: DataSource) -> str | None:
    """Why ``CREATE OR REPLACE`` may not replace ``existing`` with ``replacement``, in ksqlDB's
    words (each issue "DataSource '`X`' has <property> = <old> which is not upgradeable to
    <new>", joined by AND), or None when it may: same kind, topic and formats, and timestamp
    column; the key columns as they were; every other column kept where it was (new columns
    may follow)."""
    name = f"`{existing.name}`"

    def issue(prop: str, old: object, new: object) -> str:
        return f"DataSource '{name}' has {prop} = {old} which is not upgradeable to {new}"

    kinds = {"STREAM": "KSTREAM", "TABLE": "KTABLE"}
    issues = []
    if existing.kind != replacement.kind:
        issues.append(issue("type", kinds[existing.kind], kinds[replacement.kind]))
    if (existing.topic, existing.formats, existing.window_info) != (
        replacement.topic, replacement.formats, replacement.window_info
    ):
        issues.append(issue("topic", _topic_text(existing), _topic_text(replacement)))
    if existing.timestamp_column != replacement.timestamp_column:
        issues.append(issue("timestampColumn", _optional_text(existing.timestamp_column),
                            _optional_text(replacement.timestamp_column)))
    changed = _changed_columns(existing.schema, replacement.schema)
    if changed:
        issues.append(f"{issue('schema', existing.schema, replacement.schema)}. ({changed})")
    return "\n\tAND ".join(issues) or None


def _changed_columns(schema: LogicalSchema, other: LogicalSchema) -> str | None:
    """ksqlDB compares columns with their index in their namespace: a reordered column counts."""

    def indexed(s: LogicalSchema, only_key: bool) -> list[tuple[object, int]]:
        seen: dict[object, int] = {}
        out = []
        for c in s.columns:
            position = seen.get(c.namespace, 0)
            seen[c.namespace] = position + 1
            if not only_key or c in s.key:
                out.append((c, position))
        return out

    for only_key, what, prefix in ((True, "key ", "Key columns must be identical. "), (False, "", "")):
        theirs = set(indexed(other, only_key))
        gone = [str(c) for c, i in indexed(schema, only_key) if (c, i) not in theirs]
        if gone:
            return f"{prefix}The following {what}columns are changed, missing or reordered: [{', '.join(gone)}]"
    return None


def _topic_text(source: DataSource) -> str:
    f = source.formats
    return (
        f"KsqlTopic{{kafkaTopicName='{source.topic}', keyFormat={f.key_format}, valueFormat={f.value_format}}}"
    )


def _optional_text(value: object) -> str:
    return "Optional.empty" if value is None else f"Optional[{value}]"


def alternatives_hint(sources: list[DataSource], name: str, kind: str | None = None) -> str:
    """ksqlDB's hint after "... does not exist." (``MetaStoreImpl.checkAlternatives``): the
    sources whose name differs from ``name`` in case only (of ``kind`` when given), sorted by
    name; one is suggested with its quoting fix, several are listed with their kinds."""
    matches = sorted(
        (s for s in sources if s.name != name and s.name.upper() == name.upper() and kind in (None, s.kind)),
        key=lambda s: s.name,
    )
    if not matches:
        return ""
    if len(matches) == 1:
        other = matches[0].name
        if any(ch.islower() for ch in other):
            return f'\nDid you mean "{other}"? Hint: wrap the source name in double quotes to make it case-sensitive.'
        return f"\nDid you mean {other}? Hint: try removing double quotes from the source name."
    n = len(matches)
    parts = []
    for i, source in enumerate(matches):
        if i < n - 2:
            punctuation = ", "
        elif i == n - 2:
            punctuation = " or " if i == 0 else ", or "
        else:
            punctuation = "? "
        parts.append(f'"{source.name}" ({source.kind}){punctuation}')
    return "\nDid you mean " + "".join(parts) + "Hint: wrap the source name in double quotes to make it case-sensitive."
