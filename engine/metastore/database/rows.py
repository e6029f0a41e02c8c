"""Rows of the metastore tables (KLIP-18's data model) and their JSON on the changelogs.

``UserDataSources`` (key: the source name) holds what a server needs to rebuild a source
and restart its query without re-planning: type, SQL text, logical schema, topic, formats
and serde features, timestamp column, window info, and the query plan of a CREATE ... AS
SELECT. ``UserTypes`` (key: the type name) holds the type's SQL. ``UserQueries`` (key: the
query id) holds the persistent queries that create no source (INSERT INTO ... SELECT):
statement, plan and properties. A CSAS/CTAS query stopped by TERMINATE leaves its source's
row without a query plan, naming the stopped query (``terminatedQueryId``). Every record
value is JSON (sorted keys) validated against ``engine/metastore/database/metastore.schema.json``; a delete
is a tombstone (a null value).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from engine.errors import MetastoreError

ROW_VERSION = 1
SCHEMA_FILE = Path(__file__).resolve().parent / "metastore.schema.json"  # shipped in the package
SOURCES = "UserDataSources"
TYPES = "UserTypes"
QUERIES = "UserQueries"
TABLES = (SOURCES, TYPES, QUERIES)
_COMMAND_TYPES = {"STREAM": "createStreamV1", "TABLE": "createTableV1"}


@cache
def _validators() -> dict[str, Any]:
    import jsonschema

    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return {
        table: jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{table}"}) for table in TABLES
    }


def validate_row(table: str, value: Any, where: str) -> None:
    """Refuse a row that does not follow the table's JSON Schema, naming ``where`` it was found."""
    if table not in TABLES:
        raise MetastoreError(f"Unknown metastore table '{table}'; the tables are {', '.join(TABLES)}.")
    errors = sorted(_validators()[table].iter_errors(value), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        path = "/".join(str(p) for p in first.absolute_path) or "(the row)"
        raise MetastoreError(f"The {table} row {where} is not valid: at {path}: {first.message}.")


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRow:
    """A row of ``UserDataSources``: one stream or table, with its query plan if it has one."""

    name: str
    kind: str  # STREAM or TABLE
    sql: str
    command: dict[str, Any]  # the create command's plan JSON (schema, topic, formats, ...)
    query_plan: dict[str, Any] | None = None
    config: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""
    terminated_query: str | None = None  # the CSAS/CTAS query TERMINATE stopped (query_plan is None then)

    @property
    def upstream(self) -> tuple[str, ...]:
        """The sources this row's query reads (its upstream links)."""
        return tuple(self.query_plan.get("sources", ())) if self.query_plan else ()

    @property
    def query_id(self) -> str | None:
        return str(self.query_plan["queryId"]) if self.query_plan else None

    @classmethod
    def from_statement_plan(
        cls, plan: dict[str, Any], properties: dict[str, Any] | None = None, request_id: str = ""
    ) -> SourceRow:
        """The row a CREATE [... AS SELECT] statement plan (its JSON) inserts."""
        command = dict(plan["command"])
        kind = "TABLE" if command.get("@type", "").startswith("createTable") else "STREAM"
        return cls(
            name=str(command["name"]), kind=kind, sql=str(plan.get("statementText", "")),
            command=command, query_plan=plan.get("query"), config=dict(plan.get("config") or {}),
            properties=dict(properties or {}), request_id=request_id,
        )

    def statement_plan(self) -> dict[str, Any]:
        """The statement plan JSON that recreates this source (and its query): never re-planned."""
        return {"statementText": self.sql, "command": self.command, "query": self.query_plan, "config": self.config}

    def drop_plan(self) -> dict[str, Any]:
        """The statement plan JSON of dropping this source (what a tombstone means to the engine)."""
        return {
            "statementText": f"DROP {self.kind} {self.name};",
            "command": {"@type": "dropSourceV1", "name": self.name, "kind": self.kind},
            "query": None,
            "config": {},
        }

    def to_json(self) -> dict[str, Any]:
        command = self.command
        return {
            "name": self.name, "type": self.kind, "sql": self.sql,
            "schema": command.get("schema", ""), "topic": command.get("topic", ""),
            "formats": command.get("formats", {}), "timestampColumn": command.get("timestampColumn"),
            "windowInfo": command.get("windowInfo"), "isSource": bool(command.get("isSource", False)),
            "commandType": command.get("@type", _COMMAND_TYPES[self.kind]),
            "orReplace": bool(command.get("orReplace", False)),
            "queryPlan": self.query_plan, "config": self.config, "properties": self.properties,
            "requestId": self.request_id, "rowVersion": ROW_VERSION,
            **({"terminatedQueryId": self.terminated_query} if self.terminated_query else {}),
        }

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> SourceRow:
        command = {
            "@type": value.get("commandType", _COMMAND_TYPES[value["type"]]),
            "name": value["name"], "schema": value["schema"], "topic": value["topic"],
            "formats": value["formats"], "timestampColumn": value.get("timestampColumn"),
            "windowInfo": value.get("windowInfo"), "orReplace": bool(value.get("orReplace", False)),
            "isSource": bool(value.get("isSource", False)),
        }
        return cls(
            name=value["name"], kind=value["type"], sql=value["sql"], command=command,
            query_plan=value.get("queryPlan"), config=dict(value.get("config") or {}),
            properties=dict(value.get("properties") or {}), request_id=str(value.get("requestId", "")),
            terminated_query=_terminated_query(value),
        )


def _terminated_query(value: dict[str, Any]) -> str | None:
    """``terminatedQueryId`` (documented in the schema's description, checked here)."""
    query_id = value.get("terminatedQueryId")
    if query_id is None:
        return None
    if not isinstance(query_id, str) or not query_id:
        raise MetastoreError(
            f"The UserDataSources row '{value.get('name')}' has terminatedQueryId {query_id!r}; expected a query id."
        )
    return query_id


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeRow:
    """A row of ``UserTypes``: a custom type's name and SQL type."""

    name: str
    sql_type: str
    sql: str = ""
    request_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sqlType": self.sql_type, "sql": self.sql,
                "requestId": self.request_id, "rowVersion": ROW_VERSION}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> TypeRow:
        return cls(name=value["name"], sql_type=value["sqlType"], sql=str(value.get("sql", "")),
                   request_id=str(value.get("requestId", "")))


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryRow:
    """A row of ``UserQueries``: a persistent query that creates no source (INSERT INTO ... SELECT)."""

    name: str  # the query id (the key)
    sql: str
    query_plan: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    properties: dict[str, Any] = field(default_factory=dict)
    request_id: str = ""

    @property
    def query_id(self) -> str:
        return self.name

    @property
    def upstream(self) -> tuple[str, ...]:
        """The sources this query reads."""
        return tuple(self.query_plan.get("sources", ()))

    @property
    def sink(self) -> str:
        return str(self.query_plan["sink"])

    @classmethod
    def from_statement_plan(
        cls, plan: dict[str, Any], properties: dict[str, Any] | None = None, request_id: str = ""
    ) -> QueryRow:
        """The row an INSERT INTO ... SELECT statement plan (its JSON) inserts."""
        query = dict(plan["query"])
        return cls(name=str(query["queryId"]), sql=str(plan.get("statementText", "")), query_plan=query,
                   config=dict(plan.get("config") or {}), properties=dict(properties or {}), request_id=request_id)

    def statement_plan(self) -> dict[str, Any]:
        """The statement plan JSON that restarts this query: never re-planned."""
        return {"statementText": self.sql, "command": None, "query": self.query_plan, "config": self.config}

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "sql": self.sql, "sink": self.sink, "sources": list(self.upstream),
                "queryPlan": self.query_plan, "config": self.config, "properties": self.properties,
                "requestId": self.request_id, "rowVersion": ROW_VERSION}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> QueryRow:
        return cls(name=value["name"], sql=value["sql"], query_plan=dict(value["queryPlan"]),
                   config=dict(value.get("config") or {}), properties=dict(value.get("properties") or {}),
                   request_id=str(value.get("requestId", "")))


Row = SourceRow | TypeRow | QueryRow
_ROW_CLASSES: dict[str, Any] = {SOURCES: SourceRow, TYPES: TypeRow, QUERIES: QueryRow}


def row_from_json(table: str, value: dict[str, Any]) -> Row:
    """The row of ``table`` a (validated) JSON value holds."""
    return _ROW_CLASSES[table].from_json(value)  # type: ignore[no-any-return]


def encode_row(table: str, row: Row | None) -> bytes | None:
    """The changelog record value of ``row`` (None: a tombstone), validated first."""
    if row is None:
        return None
    value = row.to_json()
    validate_row(table, value, f"'{row.name}'")
    return json.dumps(value, sort_keys=True, default=str).encode("utf-8")


def decode_row(table: str, key: bytes | None, value: bytes | None, where: str) -> Row | None:
    """A changelog record as a row (None for a tombstone); a damaged record names ``where`` it is."""
    if value is None:
        return None
    try:
        data = json.loads(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MetastoreError(f"The {table} record {where} is not JSON: {exc}.") from None
    validate_row(table, data, where)
    if (key or b"").decode("utf-8", "replace") != data["name"]:
        raise MetastoreError(f"The {table} record {where} has key {key!r} but names '{data['name']}'.")
    return row_from_json(table, data)
