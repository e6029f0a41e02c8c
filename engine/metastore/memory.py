"""An in-memory metastore (a durable one rebuilt from a changelog implements the same API)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import MetastoreError
from engine.metastore.model import DataSource


@dataclass
class InMemoryMetaStore:
    """Sources by upper-case-exact name, plus the queries that read and write each."""

    _sources: dict[str, DataSource] = field(default_factory=dict)
    _reads: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _writes: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> DataSource | None:
        return self._sources.get(name)

    def put(self, source: DataSource, *, replace: bool = False) -> None:
        existing = self._sources.get(source.name)
        if existing is not None and not replace:
            kind = existing.kind.lower()
            raise MetastoreError(
                f"Cannot add {source.kind.lower()} '{source.name}': "
                f"A {kind} with the same name already exists."
            )
        if existing is not None and existing.kind != source.kind:
            raise MetastoreError(
                f"Cannot replace {existing.kind.lower()} '{source.name}' with a "
                f"{source.kind.lower()}: a source cannot change between stream and table."
            )
        self._sources[source.name] = source

    def delete(self, name: str) -> DataSource:
        source = self._sources.get(name)
        if source is None:
            raise MetastoreError(f"Source {name} does not exist.")
        readers, writers = self.readers(name), self.writers(name)
        if readers or writers:
            raise MetastoreError(
                f"Cannot drop {name}.\n"
                f"The following queries read from this source: [{', '.join(readers)}].\n"
                f"The following queries write into this source: [{', '.join(writers)}].\n"
                "You need to terminate them before dropping "
                f"{name}."
            )
        del self._sources[name]
        return source

    def all(self) -> list[DataSource]:
        return list(self._sources.values())

    def link_query(self, query_id: str, reads: tuple[str, ...], writes: str) -> None:
        for name in (*reads, writes):
            if name not in self._sources:
                raise MetastoreError(f"Query {query_id} refers to the unknown source {name}.")
        self._reads[query_id] = reads
        self._writes[query_id] = writes

    def unlink_query(self, query_id: str) -> None:
        self._reads.pop(query_id, None)
        self._writes.pop(query_id, None)

    def readers(self, name: str) -> list[str]:
        return sorted(q for q, reads in self._reads.items() if name in reads)

    def writers(self, name: str) -> list[str]:
        return sorted(q for q, sink in self._writes.items() if sink == name)
