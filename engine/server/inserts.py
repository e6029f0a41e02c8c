"""``/inserts-stream`` without HTTP: rows of JSON written one by one to a stream's topic.

ksqlDB's protocol: the request's first line names the target (``{"target": "S"}``), every
further line is one row, a JSON object of column values; every row is answered with an
acknowledgement, in order: ``{"status": "ok", "seq": N}`` once the row is written, or
``{"status": "error", "seq": N, "error_code": 40000, "message": "..."}`` when the row is
refused (bad JSON, unknown column, a value of the wrong type). A refused row writes
nothing and the rows after it are still read. Column names are upper-cased unless quoted
in back-ticks, as ksqlDB does; ``ROWTIME`` sets the record's timestamp.
"""

from __future__ import annotations

import decimal
import json
from typing import Any

from engine.errors import KsqlError
from engine.plan.schema import Namespace
from engine.server import entities as E
from engine.server.errors import ServiceError

TARGET_FIELDS = {"target", "properties", "requestProperties", "sessionVariables"}


def parse_target(line: bytes | str) -> tuple[str, dict[str, Any]]:
    """The first line of an inserts stream: the target's name and the request properties."""
    try:
        body = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ServiceError(f"The first line of an inserts stream is not valid JSON: {exc}",
                           code=E.ERROR_BAD_REQUEST) from None
    if not isinstance(body, dict):
        raise ServiceError('The first line of an inserts stream must be a JSON object: {"target": "STREAM"}.',
                           code=E.ERROR_BAD_REQUEST)
    unknown = sorted(set(body) - TARGET_FIELDS)
    if unknown:
        raise ServiceError(
            f"Unrecognized field(s) {', '.join(repr(u) for u in unknown)} in the inserts stream's first line; "
            f"known fields: {', '.join(sorted(TARGET_FIELDS))}.",
            code=E.ERROR_BAD_REQUEST,
        )
    target = body.get("target")
    if not isinstance(target, str) or not target.strip():
        raise ServiceError("No target in the inserts stream's first line: it needs \"target\": the stream's name.",
                           code=E.ERROR_BAD_REQUEST)
    properties = body.get("properties") or {}
    if not isinstance(properties, dict):
        raise ServiceError("'properties' must be a JSON object.", code=E.ERROR_BAD_REQUEST)
    return target, properties


def column_name(key: str) -> str:
    """A row's key as a column name: back-ticks keep its case, else upper case."""
    key = key.strip()
    if len(key) >= 2 and key[0] == key[-1] == "`":
        return key[1:-1]
    return key.upper()


class InsertsStream:
    """Rows for one stream: each ``insert`` answers its acknowledgement (never raises for a row)."""

    def __init__(self, engine: Any, target: str) -> None:
        from engine.serde.coerce import reader

        self._engine = engine
        self.source = engine.metastore.get(target)
        self.name = self.source.name
        columns = [c for c in self.source.schema.columns if c.namespace is not Namespace.HEADERS]
        self._readers = {c.name: reader(c.type, c.name) for c in columns}
        self._headers = {c.name for c in self.source.schema.columns if c.namespace is Namespace.HEADERS}

    def insert(self, line: bytes | str, seq: int) -> dict[str, Any]:
        """Write one row; ``{"status": "ok", "seq": seq}`` or the error acknowledgement."""
        try:
            self._engine.insert_row(self.name, *self._row(line))
        except ServiceError as exc:
            return _error_ack(seq, exc.code, exc.message)
        except KsqlError as exc:
            return _error_ack(seq, E.ERROR_BAD_REQUEST, str(exc).splitlines()[0])
        return {"status": "ok", "seq": seq}

    def _row(self, line: bytes | str) -> tuple[dict[str, Any], int]:
        try:
            raw = json.loads(line, parse_float=decimal.Decimal)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ServiceError(f"Invalid JSON in inserts stream: {exc}", code=E.ERROR_BAD_REQUEST) from None
        if not isinstance(raw, dict):
            raise ServiceError("Invalid JSON in inserts stream: a row must be a JSON object of column values.",
                               code=E.ERROR_BAD_REQUEST)
        row: dict[str, Any] = {}
        timestamp = 0
        for key, value in raw.items():
            name = column_name(str(key))
            if name == "ROWTIME":
                if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                    raise ServiceError(f"ROWTIME must be a non-negative BIGINT (milliseconds), got {value!r}.",
                                       code=E.ERROR_BAD_REQUEST)
                timestamp = value or 0
                continue
            if name in self._headers:
                raise ServiceError(f"Cannot insert into HEADER columns: {name}", code=E.ERROR_BAD_REQUEST)
            read = self._readers.get(name)
            if read is None:
                raise ServiceError(
                    f"Column name {name} does not exist in {self.name}; its columns: "
                    f"{', '.join(self._readers)}.",
                    code=E.ERROR_BAD_REQUEST,
                )
            row[name] = read(value)
        return row, timestamp


def _error_ack(seq: int, code: int, message: str) -> dict[str, Any]:
    return {"status": "error", "seq": seq, "error_code": code, "message": message}


def open_inserts(engine: Any, target: str, refuse_internal: Any) -> InsertsStream:
    """An ``InsertsStream`` for ``target`` (a stream name as written; ksqlDB's errors otherwise)."""
    name = column_name(target)
    source = engine.metastore.get(name) or engine.metastore.get(target)
    if source is None:
        raise ServiceError(f"Cannot insert values into an unknown stream: {target}")
    if source.kind == "TABLE":
        raise ServiceError(f"Cannot insert into a table: {source.name} (use INSERT INTO ... VALUES on /ksql).")
    if source.is_source:
        raise ServiceError(f"Cannot insert values into read-only stream: {source.name}")
    refuse_internal(source.topic, f"INSERT INTO {source.name}")
    return InsertsStream(engine, source.name)
