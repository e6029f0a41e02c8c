"""A server whose metastore lives in the KLIP-18 tables (``kspark server --metastore tables``).

    service = TablesService(bootstrap, "my_service", Path("state"), internal_url="http://10.0.0.5:8088")
    service.start()          # load UserDataSources/UserTypes, start the loaded sources' queries
    app = with_internal_route(create_app(service), service)     # + POST /internal/metastore/write

``TablesService`` is the command-topic ``KsqlService`` with its log swapped for
``engine.metastore.database.MetastoreLog``: statements are validated and planned as
before, then written as rows by the table's owner (this server or the one it forwards to
over the internal endpoint). CREATE TYPE and DROP TYPE write ``UserTypes`` rows; INSERT INTO
... SELECT writes a ``UserQueries`` row and TERMINATE deletes it (or, for a CSAS/CTAS query,
rewrites its source's row without the query). TERMINATE ALL terminates the queries one by
one (one row write each).
``apply_queries_file`` is headless mode: a SQL file applied as a delta over the tables.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import KsqlError, MetastoreError
from engine.metastore.database import INTERNAL_PATH, TYPES, TypeRow, Write
from engine.metastore.database.database import MetastoreUnavailableError, http_forward
from engine.metastore.database.statements import MetastoreLog
from engine.parser import ast, creating_statement, parse
from engine.server import entities as E
from engine.server.errors import ServiceError
from engine.server.service import KsqlService

TOKEN_PROPERTY = "kspark.metastore.internal.token"
TOKEN_HEADER = "x-kspark-internal-token"


@dataclass
class TablesService(KsqlService):
    """A ``KsqlService`` whose metastore is the tables of ``engine.metastore.database``."""

    internal_url: str = ""  # where the other servers reach this one's internal endpoint
    internal_tls: Any = None  # engine.server.tls.TlsSettings: how to reach the others over HTTPS

    def __post_init__(self) -> None:
        super().__post_init__()
        self.log.close()  # the command log the base class opened is not used
        self.internal_token = str(self.properties.get(TOKEN_PROPERTY, ""))
        self.log = MetastoreLog(  # type: ignore[assignment]
            self.bootstrap_servers, self.service_id, internal_url=self.internal_url,
            timeout=self.command_timeout, before_execute=self._number_queries_past,
            forward=self._forward,
        )

    @property
    def database(self) -> Any:
        log: Any = self.log
        return log.db

    def _number_queries_past(self, floor: int) -> None:
        with self._engine_lock:
            self.engine._query_counter = max(self.engine._query_counter, floor)

    def _forward(self, url: str, payload: dict[str, Any], timeout: float) -> tuple[int, dict[str, Any]]:
        headers = {TOKEN_HEADER: self.internal_token} if self.internal_token else {}
        verify: Any = self.internal_tls.forwarding_context() if self.internal_tls is not None else True
        return http_forward(url, payload, timeout, headers=headers, verify=verify)

    def _execute_one(
        self, stmt: Any, text: str, properties: dict[str, Any], variables: dict[str, str]
    ) -> dict[str, Any] | None:
        if isinstance(stmt, ast.CreateType | ast.DropType):
            return self._type_statement(stmt, text)
        if isinstance(stmt, ast.TerminateQuery) and stmt.query_id == "ALL":
            return self._terminate_all(text, properties)
        return super()._execute_one(stmt, text, properties, variables)  # type: ignore[no-any-return]

    def _terminate_all(self, text: str, properties: dict[str, Any]) -> dict[str, Any]:
        """TERMINATE ALL: each query's row is written on its own (a query gone meanwhile is skipped)."""
        self.database.wait_until_caught_up()
        with self._engine_lock:
            ids = list(self.engine.queries)
        sequence = self.database.sequence
        for query_id in ids:
            try:
                entity = super()._execute_one(ast.TerminateQuery(query_id=query_id), f"TERMINATE {query_id};",
                                              properties, {})
            except ServiceError as exc:
                if exc.message.startswith("Unknown queryId"):
                    continue  # terminated (or dropped) by another request meanwhile
                raise
            if entity is not None:
                sequence = max(sequence, int(entity.get("commandSequenceNumber", sequence)))
        return E.current_status(text, "terminate/ALL/execute", E.CommandStatus("SUCCESS", "All queries terminated."),
                                sequence)

    def _catalog(self, stmt: ast.Informational, text: str, properties: Any) -> dict[str, Any]:
        if stmt.kind == "LIST TYPES":  # served from this server's view of UserTypes
            from engine.plan.types import parse_type

            rows = self.database.rows(TYPES)
            return E.type_list(text, {name: parse_type(row.sql_type) for name, row in rows.items()})
        return super()._catalog(stmt, text, properties)  # type: ignore[no-any-return]

    def _type_statement(self, stmt: ast.CreateType | ast.DropType, text: str) -> dict[str, Any]:
        """CREATE TYPE inserts a ``UserTypes`` row, DROP TYPE deletes it (the owner checks)."""
        db = self.database
        db.wait_until_caught_up()
        existing = db.rows(TYPES).get(stmt.name)
        exists = existing is not None
        if isinstance(stmt, ast.CreateType):
            command_id = f"type/`{stmt.name}`/create"
            if exists and stmt.if_not_exists:
                return E.current_status(text, command_id, E.CommandStatus("SUCCESS", f"Type {stmt.name} already exists."), db.sequence)
            if exists:  # ksqlDB's RegisterTypeFactory
                raise ServiceError(
                    f"Cannot register custom type '{stmt.name}' since it is already registered with type: "
                    f"{existing.sql_type}",
                    statement_text=text,
                )
            write = Write(TYPES, stmt.name, TypeRow(name=stmt.name, sql_type=str(stmt.type), sql=text))
            message = "Created custom type"
        else:
            command_id = f"type/`{stmt.name}`/drop"
            if not exists and stmt.if_exists:
                return E.current_status(text, command_id, E.CommandStatus("SUCCESS", f"Type {stmt.name} does not exist."), db.sequence)
            if not exists:  # ksqlDB's DropTypeFactory
                raise ServiceError(f"Type {stmt.name} does not exist.", statement_text=text)
            write = Write(TYPES, stmt.name, None)
            message = f"Dropped type '{stmt.name}'"
        try:
            sequence = db.write(write)
            db.wait_for(sequence)
        except MetastoreUnavailableError as exc:
            raise ServiceError(str(exc), code=50000) from None
        return E.current_status(text, command_id, E.CommandStatus("SUCCESS", message), sequence)

    def handle_internal(self, payload: Any, token: str) -> tuple[int, dict[str, Any]]:
        """A write another server forwarded (the token must match when one is configured)."""
        if self.internal_token and token != self.internal_token:
            return 401, {"message": f"The internal endpoint needs the token of '{TOKEN_PROPERTY}'."}
        return self.database.handle_forwarded(payload)  # type: ignore[no-any-return]


def with_internal_route(app: Any, service: TablesService) -> Any:
    """Wrap an ASGI app: ``POST /internal/metastore/write`` goes to the service, the rest to ``app``."""
    from starlette.concurrency import run_in_threadpool

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("path") != INTERNAL_PATH:
            await app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if scope.get("method") != "POST":
            status, answer = 405, {"message": f"{INTERNAL_PATH} takes POST."}
        else:
            try:
                payload = json.loads(body or b"null")
            except ValueError as exc:
                status, answer = 400, {"message": f"The forwarded write is not JSON: {exc}."}
            else:
                status, answer = await run_in_threadpool(service.handle_internal, payload, headers.get(TOKEN_HEADER, ""))
        data = json.dumps(answer).encode("utf-8")
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})

    return wrapped


def _normalised(sql: str) -> str:
    return re.sub(r"\s+", " ", sql.strip().rstrip(";")).strip().upper()


def _creating_statement(sql: str) -> str:
    """The text of the statement that created a source (the whole text if it no longer parses)."""
    created = creating_statement(sql)
    return created.text if created is not None else sql


def apply_queries_file(service: KsqlService, path: str) -> list[str]:
    """Headless mode: apply ``path`` as a delta over the persisted metastore; what each statement did.

    A CREATE whose source exists with the same statement (whitespace and case aside), or
    guarded by IF NOT EXISTS, is a no-op; with a different statement it is refused naming
    the file, line and source. A DROP of a source that is gone is a no-op. The other
    statements (SET, DEFINE, CREATE TYPE, ...) run as the server runs them.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise MetastoreError(f"Cannot read the queries file {path}: {exc.strerror}.") from None
    try:
        statements = parse(text)
    except KsqlError as exc:
        raise MetastoreError(f"The queries file {path} does not parse: {exc}") from None
    done: list[str] = []
    properties: dict[str, Any] = {}
    for parsed in statements:
        stmt, where = parsed.statement, f"{path}, line {parsed.line}"
        if isinstance(stmt, ast.CreateSource | ast.CreateAsSelect):
            with service._engine_lock:
                existing = service.engine.metastore.get(stmt.name)
            if existing is not None:
                if _normalised(_creating_statement(existing.sql)) == _normalised(parsed.text) or stmt.if_not_exists:
                    done.append(f"{where}: {stmt.name} exists already (no-op)")
                    continue
                raise MetastoreError(
                    f"The statement at {where} changes {existing.kind.lower()} {stmt.name}, which was created "
                    f"by a different statement: {existing.sql!r}. Headless mode applies new statements only; "
                    "drop the source first or give the new one another name."
                )
        if isinstance(stmt, ast.AlterSource):
            with service._engine_lock:
                altered = service.engine.metastore.get(stmt.name)
            if altered is not None and all(
                (column := altered.schema.find(el.name)) is not None and column.type == el.type for el in stmt.columns
            ):
                done.append(f"{where}: {stmt.name} has these columns already (no-op)")
                continue
        if isinstance(stmt, ast.DropSource):
            with service._engine_lock:
                gone = service.engine.metastore.get(stmt.name) is None
            if gone:
                done.append(f"{where}: {stmt.name} is gone already (no-op)")
                continue
        try:
            service.execute(parsed.text, properties)
        except ServiceError as exc:
            raise MetastoreError(f"The statement at {where} failed: {exc.message}") from None
        if isinstance(stmt, ast.SetProperty):
            properties[stmt.name] = stmt.value
        done.append(f"{where}: applied")
    return done
