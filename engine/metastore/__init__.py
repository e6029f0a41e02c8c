"""The metastore: streams and tables known to the engine, and which queries use them."""

from engine.metastore.memory import InMemoryMetaStore
from engine.metastore.model import DataSource, MetaStore

__all__ = ["DataSource", "InMemoryMetaStore", "MetaStore"]
