"""Pull queries: ``SELECT ... FROM source [WHERE ...] [LIMIT n]`` without ``EMIT CHANGES``.

    pulls = PullQueries(bootstrap_servers)
    plan = pulls.plan(metastore, query, text, properties)   # refusals: PullQueryError, ksqlDB's texts
    result = pulls.run(plan)                                 # PullResult: header columns and rows
    result.schema_text                                       # `ID` STRING KEY, `N` BIGINT
    pulls.close()

A pull query against a table is answered from a ``Materialization``: the table's topic (the
sink of its CREATE TABLE AS SELECT, or the topic of a CREATE SOURCE TABLE) read from the
beginning by a ``read_committed`` consumer on a thread of its own, each record decoded with
the table's key and value formats into a row (AVRO and JSON_SR in the schema registry's
wire format when ``PullQueries`` has a ``registry_url``), key -> latest row, a null value
deleting its key. A windowed table keeps one row per key and window. Which WHERE clauses ksqlDB
serves by a key lookup, a range scan or a table scan, and what it refuses (with
``ksql.query.pull.table.scan.enabled`` false, or always), is ``engine.server.pull_where``'s;
keys are looked up when ksqlDB would look them up, anything else scans the table. A pull query
against a stream reads the stream's topic from the beginning up to its end offsets at the
time of the query and finishes. WHERE and the SELECT list are evaluated per row by the
engine's expression evaluator (``engine.expressions``): no Spark job runs.

A materialization starts with the first pull query against its table and stays up to
date until the server closes (or the table is dropped); the first query waits until it
has read the topic up to its end offsets at that time.
"""

from __future__ import annotations

import dataclasses
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from engine.errors import KsqlError
from engine.metastore.model import DataSource, MetaStore
from engine.parser import ast
from engine.plan import expr as X
from engine.plan import types as T
from engine.plan.schema import Namespace
from engine.server.pull_where import PullQueryError, check_star_alone, rewrite, where_access

LOG = logging.getLogger("engine.server.pull")
TABLE_SCAN_ENABLED = "ksql.query.pull.table.scan.enabled"
STREAM_ENABLED = "ksql.query.pull.stream.enabled"
LIMIT_ENABLED = "ksql.query.pull.limit.clause.enabled"
RANGE_SCAN_ENABLED = "ksql.query.pull.range.scan.enabled"
QUERIES_URL = "See https://cnfl.io/queries for more info."
PUSH_HINT = "\nAdd EMIT CHANGES if you intended to issue a push query."
DISALLOWED_PSEUDO_COLUMNS = ("ROWPARTITION", "ROWOFFSET")
WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")
CATCH_UP_SECONDS = 30.0
SCAN_ORDER = "__pull_scan_order"  # a row's (partition, key bytes): table scans answer in this order


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class PullColumn:
    """One result column: its name, type and how the header shows it (KEY, HEADER('k'))."""

    name: str
    type: T.SqlType
    suffix: str = ""  # " KEY" for a table's key columns and window bounds

    def __str__(self) -> str:
        return f"`{self.name}` {self.type}{self.suffix}"


@dataclass(frozen=True, slots=True)
class PullResult:
    """The answer of one pull query: header columns, rows (engine values) and how it ended."""

    query_id: str
    columns: tuple[PullColumn, ...]
    rows: tuple[tuple[Any, ...], ...]
    is_stream: bool
    limit_reached: bool
    header: tuple[PullColumn, ...] | None = None  # the header's columns when not ``columns``' order

    @property
    def schema_text(self) -> str:
        return ", ".join(str(c) for c in (self.header or self.columns))

    @property
    def final_message(self) -> str | None:
        """``Limit Reached`` / ``Query Completed`` for a stream (ksqlDB sends none for a table)."""
        if not self.is_stream:
            return None
        return "Limit Reached" if self.limit_reached else "Query Completed"

    def json_rows(self) -> list[list[Any]]:
        """The rows in ksqlDB's REST JSON forms."""
        from engine.hosting.push_query import json_value

        types = [c.type for c in self.columns]
        return [[json_value(v, t) for v, t in zip(row, types, strict=True)] for row in self.rows]


# ---------------------------------------------------------------------------- planning


@dataclass
class PullPlan:
    """A checked pull query: its source, compiled WHERE and SELECT, and how rows are found."""

    query_id: str
    source: DataSource
    columns: tuple[PullColumn, ...]
    projections: tuple[Callable[[Mapping[str, Any]], Any], ...]
    predicate: Callable[[Mapping[str, Any]], Any] | None
    lookup_keys: list[tuple[Any, ...]] | None  # None: a scan
    limit: int | None
    where_text: str = ""
    header: tuple[PullColumn, ...] | None = None  # see ``star_header``
    key_range: tuple[str, str, Any] | None = None  # a range scan's (key column, ">=" / "<=", bound)
    flat_maps: tuple[tuple[str, Any, tuple[Callable[..., Any], ...]], ...] = ()  # a stream's table functions


def is_pull_query(stmt: Any) -> TypeGuard[ast.Query]:
    """A SELECT without EMIT: a pull query."""
    return isinstance(stmt, ast.Query) and stmt.emit is None


def _refuse_clause(clause: str) -> PullQueryError:
    return PullQueryError(f"Pull queries don't support {clause} clauses. {QUERIES_URL}{PUSH_HINT}")


def _flag(properties: Mapping[str, Any], name: str, default: bool) -> bool:
    value = properties.get(name, default)
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return bool(value)


def _fits(value: Any, sql_type: T.SqlType) -> bool:
    """Whether a key looked up as ``value`` finds the rows a ``sql_type`` key holds (else: scan)."""
    base = getattr(sql_type, "base", None)
    if base is T.BaseType.STRING:
        return isinstance(value, str)
    if base in (T.BaseType.INTEGER, T.BaseType.BIGINT):
        return isinstance(value, int) and not isinstance(value, bool)
    if base is T.BaseType.DOUBLE:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if base is T.BaseType.BOOLEAN:
        return isinstance(value, bool)
    return False


def _column_names(expressions: Iterable[X.Expr]) -> list[str]:
    names: list[str] = []
    for expression in expressions:
        for node in X.walk(expression):
            if isinstance(node, X.ColumnRef) and node.name not in names:
                names.append(node.name)
    return names


def check_pull_clauses(query: ast.Query, properties: Mapping[str, Any]) -> None:
    """Refuse the clauses ksqlDB's ``PullQueryValidator`` refuses, in its order (JOIN, WINDOW,
    GROUP BY, PARTITION BY, HAVING, LIMIT), with its words. An aggregate function in the SELECT
    list counts as a GROUP BY, as in ksqlDB."""
    if isinstance(query.from_, ast.Join):
        raise _refuse_clause("JOIN")
    if query.window is not None:
        raise _refuse_clause("WINDOW")
    if query.group_by or _selects_aggregate(query):  # ksqlDB's analysis gives an aggregate a GROUP BY
        raise _refuse_clause("GROUP BY")
    if query.partition_by:
        raise _refuse_clause("PARTITION BY")
    if query.having is not None:
        raise _refuse_clause("HAVING")
    if query.limit is not None:
        if not _flag(properties, LIMIT_ENABLED, True):
            raise PullQueryError(
                "LIMIT clause in pull queries is currently disabled. You can enable them by setting "
                f"{LIMIT_ENABLED}=true. {QUERIES_URL}{PUSH_HINT}"
            )
        if query.limit < 0:
            raise PullQueryError(
                f"Pull queries don't support negative integers in the LIMIT clause. {QUERIES_URL}{PUSH_HINT}")


def _selects_aggregate(query: ast.Query) -> bool:
    """Whether the SELECT list calls an aggregate function: ksqlDB's Analyzer then gives the
    query a GROUP BY of its own (``addDummyGroupbyForUdafs``), which its pull checks refuse."""
    from engine.analysis.scope import is_aggregate_call

    return any(is_aggregate_call(node) for item in query.select if isinstance(item, ast.SelectColumn)
               for node in X.walk(item.expr))


def check_pull_columns(query: ast.Query) -> None:
    """Refuse ROWPARTITION / ROWOFFSET in a pull query's SELECT list or WHERE, as ksqlDB's
    ``PullQueryValidator`` does (by the column names the expressions reference)."""
    items = [getattr(item, "expr", None) or getattr(item, "base", None) for item in query.select]
    for clause, expressions in (("SELECT", [e for e in items if e is not None]),
                                ("WHERE", [query.where] if query.where is not None else [])):
        bad = [n for n in _column_names(expressions) if n in DISALLOWED_PSEUDO_COLUMNS]
        if bad:
            listed = ", ".join(f"`{n}`" for n in bad)
            raise PullQueryError(f"Pull queries don't support the following columns in {clause} clauses: {listed}\n"
                                 f" {QUERIES_URL}{PUSH_HINT}")


def plan_pull_query(
    metastore: MetaStore, query: ast.Query, text: str, properties: Mapping[str, Any]
) -> PullPlan:
    """Check a pull query against the metastore as ksqlDB does and compile it."""
    from engine.analysis.query import Scope, analyze_query, source_columns
    from engine.expressions.evaluator import compile_typed

    check_pull_clauses(query, properties)
    name = getattr(query.from_, "name", None)
    source = metastore.get(name) if isinstance(name, str) else None
    if source is None:
        raise PullQueryError(f"{name} does not exist.")
    if source.is_table and not (source.is_source or metastore.writers(source.name)):
        raise PullQueryError(
            f"The `{source.name}` table isn't queryable. To derive a queryable table, you can do "
            f"'CREATE TABLE QUERYABLE_{source.name} AS SELECT * FROM {source.name}'. {QUERIES_URL}{PUSH_HINT}"
        )
    if not source.is_table and not _flag(properties, STREAM_ENABLED, True):
        raise PullQueryError(
            "Pull queries on streams are disabled. To create a push query on the stream, add EMIT CHANGES to "
            f"the end. To enable pull queries on streams, set the {STREAM_ENABLED} config to 'true'.{PUSH_HINT}"
        )
    # WHERE is resolved and typed here, so that its errors read as ksqlDB's pull-query errors.
    analysis = analyze_query(dataclasses.replace(query, where=None), metastore, transient=True)
    scope = Scope.of_source(source, getattr(query.from_, "alias", None) or source.name)
    where = _resolve_where(scope, query.where) if query.where is not None else None
    analysis.where = where
    if analysis.aggregation is not None:
        raise _refuse_clause("GROUP BY")
    for clause, expressions in (("SELECT", [c.expression for c in analysis.select]),
                                ("WHERE", [analysis.where] if analysis.where is not None else [])):
        bad = [n for n in _column_names(expressions) if n in DISALLOWED_PSEUDO_COLUMNS]
        if bad:
            listed = ", ".join(f"`{n}`" for n in bad)
            raise PullQueryError(f"Pull queries don't support the following columns in {clause} clauses: {listed}\n"
                                 f" {QUERIES_URL}{PUSH_HINT}")
    columns = source_columns(source)
    schema_columns = {c.name: c for c in source.schema.columns}
    predicate = None
    if analysis.where is not None:
        try:
            predicate, _ = compile_typed(analysis.where, columns)
        except KsqlError as exc:
            raise PullQueryError(
                f"Error in WHERE expression: {exc}\nStatement: {X.format_sql(analysis.where)}"
            ) from None
        if source.is_table:
            # ksqlDB filters a table's rows with the WHERE as its pull-query rewrite leaves it
            # (QueryFilterNode compiles the rewritten predicate), where a NOT before a LIKE is lost.
            predicate, _ = compile_typed(rewrite(analysis.where), columns)
    # Table functions of a stream's pull query (the analysis refuses them on a table): each row
    # filtered by the WHERE becomes as many rows as its longest table function's result, as
    # ksqlDB's FlatMapNode makes them.
    flat_maps, select_columns = _table_functions(analysis.table_functions, columns)
    projections = []
    result_columns = []
    for selected in analysis.select:
        fn, sql_type = compile_typed(_flat_mapped(selected.expression, flat_maps), select_columns)
        projections.append(fn)
        suffix = ""
        ref = selected.expression
        if source.is_table:
            # ksqlDB's QueryProjectNode marks a column KEY by its name in the result: a key
            # column's or a window bound's name, whatever the expression (``ID AS X`` is no key).
            named = schema_columns.get(selected.alias)
            if (named is not None and named.namespace is Namespace.KEY) or selected.alias in WINDOW_BOUNDS:
                suffix = " KEY"
        if isinstance(ref, X.ColumnRef) and source.is_table and (column := schema_columns.get(ref.name)) is not None \
                and column.namespace is Namespace.HEADERS and selected.alias == ref.name:
            suffix = str(column)[len(f"{column.name} {column.type}") + 2:]
        result_columns.append(PullColumn(selected.alias, sql_type if sql_type is not None else columns.get(
            getattr(ref, "name", ""), T.Primitive(T.BaseType.STRING)), suffix))
    lookup = None
    key_range = None
    if source.is_table:
        access = where_access(analysis.where, source, properties)
        if access.range is not None:
            key_range = (source.schema.key[0].name, *access.range)
        check_star_alone(query, "Pull")
        key_types = [c.type for c in source.schema.key]
        if access.kind == "KEY_LOOKUP" and access.keys is not None and all(
                _fits(v, t) for key in access.keys for v, t in zip(key, key_types, strict=True)):
            lookup = list(dict.fromkeys(access.keys))  # else found by a scan: the WHERE picks the same rows
    return PullPlan(
        query_id=f"query_{int(time.time() * 1000)}_{secrets.randbelow(10**6)}",
        source=source,
        columns=tuple(result_columns),
        projections=tuple(projections),
        predicate=predicate,
        lookup_keys=lookup,
        limit=query.limit,
        header=star_header(query, source, result_columns),
        key_range=key_range,
        flat_maps=tuple((name, fn, args) for name, (_call, fn, args) in flat_maps.items()),
    )


def _table_functions(
    calls: Sequence[X.FunctionCall], columns: Mapping[str, T.SqlType]
) -> tuple[dict[str, tuple[X.FunctionCall, Any, tuple[Callable[[Mapping[str, Any]], Any], ...]]], dict[str, T.SqlType]]:
    """Each distinct table function call under a column name of its own, resolved and compiled;
    and the columns the SELECT list then reads."""
    from engine.expressions import compile_expression, infer_type
    from engine.functions import REGISTRY

    found: dict[str, tuple[X.FunctionCall, Any, tuple[Callable[[Mapping[str, Any]], Any], ...]]] = {}
    readable = dict(columns)
    for call in calls:
        if any(call == known for known, _, _ in found.values()):
            continue
        fn = REGISTRY.resolve(call.name, [infer_type(a, columns) for a in call.args], call.semantics)
        name = f"{SCAN_ORDER}_tf{len(found)}"
        found[name] = (call, fn, tuple(compile_expression(a, columns) for a in call.args))
        readable[name] = fn.return_type
    return found, readable


def _flat_mapped(expression: X.Expr, flat_maps: Mapping[str, tuple[X.FunctionCall, Any, Any]]) -> X.Expr:
    """``expression`` reading each table function call from its column."""
    from engine.analysis.scope import rewrite as rewrite_expression

    if not flat_maps:
        return expression
    names = [(call, name) for name, (call, _, _) in flat_maps.items()]
    return rewrite_expression(expression, lambda e: next((X.ColumnRef(n) for c, n in names if e == c), None))


def _flat_map(row: dict[str, Any], flat_maps: Sequence[tuple[str, Any, Sequence[Callable[..., Any]]]]) -> list[dict[str, Any]]:
    """A row's rows under its table functions: as many as the longest result, shorter ones NULL."""
    if not flat_maps:
        return [row]
    results = []
    for name, fn, args in flat_maps:
        try:
            values = fn.invoke([a(row) for a in args])
        except Exception as exc:  # noqa: BLE001 - as a query's table function: the row gives none
            LOG.warning("pull: table function %s failed: %s", fn.name, exc)
            values = None
        results.append((name, values or []))
    out = []
    for i in range(max((len(v) for _, v in results), default=0)):
        produced = dict(row)
        for name, values in results:
            produced[name] = values[i] if i < len(values) else None
        out.append(produced)
    return out


def _resolve_where(scope: Any, where: X.Expr) -> X.Expr:
    """The WHERE's columns resolved; a window bound of a source without windows is unknown as any
    column is (a pull query has no WINDOW clause to make it one: ksqlDB's analyzer refuses it)."""
    from engine.errors import AnalysisError

    try:
        return scope.resolve(where, clause="WHERE")
    except AnalysisError as exc:
        for name in WINDOW_BOUNDS:
            if str(exc) == f"Error in WHERE expression: Unknown column {name}.":
                raise PullQueryError(f"WHERE column '{name}' cannot be resolved.") from None
        raise


def star_header(query: ast.Query, source: DataSource, columns: Sequence[PullColumn]) -> tuple[PullColumn, ...] | None:
    """The header of ``SELECT *`` on a table, as ksqlDB shows it: the table's schema with key
    columns (and window bounds) first, then header columns, then value columns, while the
    rows keep the select order (ksqlDB's own answer does the same). None otherwise."""
    if not source.is_table or [type(item) for item in query.select] != [ast.AllColumns]:
        return None
    def rank(column: PullColumn) -> int:
        return 0 if column.suffix == " KEY" else 1 if column.suffix.startswith(" HEADER") else 2

    ordered = tuple(sorted(columns, key=rank))
    return ordered if list(ordered) != list(columns) else None


# ---------------------------------------------------------------------------- decoding


def _hashable(value: Any) -> Any:
    """A key value usable in a dict key: lists, maps and structs as tuples."""
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), _hashable(v)) for k, v in value.items()))
    return value


@dataclass
class _Decoder:
    """Kafka records of one source's topic -> (store key, row) with its pseudo columns."""

    source: DataSource
    registry_url: str | None = None  # AVRO/JSON_SR records in the schema registry's wire format

    def __post_init__(self) -> None:
        from engine.builders.formats import serdes_for
        from engine.serde.registry import wire_serde

        key_serde, value_serde = serdes_for(self.source.formats, self.source.schema.columns)
        self.key_serde = wire_serde(key_serde, self.source.topic, self.registry_url)
        self.value_serde = wire_serde(value_serde, self.source.topic, self.registry_url)
        self.key_names = [c.name for c in self.source.schema.key]
        self.headers = [c for c in self.source.schema.columns if c.namespace is Namespace.HEADERS]
        window = self.source.window_info
        self.window_type = None if window is None else str(window.type).upper()
        self.window_size = None if window is None else window.size_ms

    def key(self, data: bytes | None) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """(the key's store tuple, key and window columns) of a record's key bytes."""
        from engine.serde.windowed import decode_session_window_key, decode_time_window_key

        bounds: dict[str, Any] = {}
        window: tuple[Any, ...] = ()
        if data is not None and self.window_type == "SESSION":
            data, start, end = decode_session_window_key(data)
            bounds, window = {"WINDOWSTART": start, "WINDOWEND": end}, (start, end)
        elif data is not None and self.window_type is not None:
            data, start = decode_time_window_key(data)
            end = start + (self.window_size or 0)
            bounds, window = {"WINDOWSTART": start, "WINDOWEND": end}, (start, end)
        row = self.key_serde.deserialize(self.key_serde.from_bytes(data)) or {}
        row = {name: row.get(name) for name in self.key_names}
        row.update(bounds)
        return tuple(_hashable(row[name]) for name in self.key_names) + window, row

    def value(self, data: bytes | None) -> dict[str, Any] | None:
        if data is None:
            return None
        return self.value_serde.deserialize(self.value_serde.from_bytes(data))

    def row(self, record: Any) -> tuple[tuple[Any, ...], dict[str, Any] | None]:
        """A consumed record as (store key, row or None for a tombstone)."""
        store_key, row = self.key(record.key)
        value = self.value(record.value)
        if value is None:
            return store_key, None
        row.update(value)
        row.update(ROWTIME=record.timestamp, ROWPARTITION=record.partition, ROWOFFSET=record.offset)
        row[SCAN_ORDER] = (record.partition, record.key or b"")
        for column in self.headers:
            headers = list(record.headers or ())
            if column.header_key is None:
                row[column.name] = [{"KEY": h.key, "VALUE": h.value} for h in headers]
            else:
                found = [h.value for h in headers if h.key == column.header_key]
                row[column.name] = found[-1] if found else None
        return store_key, row


# ---------------------------------------------------------------------------- materialization


class Materialization:
    """key -> latest row of one table, kept up to date from its topic by a read_committed consumer."""

    def __init__(self, bootstrap_servers: str, source: DataSource, registry_url: str | None = None) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.source = source
        self.decoder = _Decoder(source, registry_url)
        self.windowed = source.window_info is not None
        self._width = len(self.decoder.key_names)
        self._rows: dict[tuple[Any, ...], dict[tuple[Any, ...], dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._positions: dict[int, int] = {}
        self._consumer: Any = None
        self._thread: threading.Thread | None = None
        self.failure: str | None = None
        self.skipped = 0  # records that could not be decoded

    def start(self) -> Materialization:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        from engine.kafka.consume import READ_COMMITTED, _consumer, _partitions

        self._consumer = _consumer(self.bootstrap_servers, READ_COMMITTED, {"fetch.wait.max.ms": 10})
        partitions = _partitions(self._consumer, self.source.topic, 10.0)
        self._positions = {p: 0 for p in partitions}
        self._consumer.assign([TopicPartition(self.source.topic, p, OFFSET_BEGINNING) for p in partitions])
        self._thread = threading.Thread(target=self._run, name=f"pull-{self.source.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        from confluent_kafka import TopicPartition

        from engine.kafka.consume import _record

        consumer = self._consumer
        topic = self.source.topic
        try:
            while not self._closed.is_set():
                messages = consumer.consume(num_messages=1000, timeout=0.05)
                records = [r for r in (_record(m, topic) for m in messages) if r is not None]
                if records:
                    self.apply(records)
                positions = consumer.position([TopicPartition(topic, p) for p in self._positions])
                for position in positions:
                    if position.offset >= 0:
                        self._positions[position.partition] = position.offset
        except Exception as exc:  # noqa: BLE001 - the next pull query reports it
            self.failure = f"Reading the changelog '{topic}' of {self.source.name} failed: {exc}"
            LOG.error("%s", self.failure)
        finally:
            consumer.close()

    def apply(self, records: Iterable[Any]) -> None:
        """Records of the changelog in offset order: the latest row per key, tombstones delete."""
        decoded = []
        for record in records:
            try:
                decoded.append(self.decoder.row(record))
            except KsqlError as exc:
                self.skipped += 1
                LOG.warning("pull: record %s-%d@%d of %s skipped: %s", record.topic, record.partition,
                            record.offset, self.source.name, exc)
        width = self._width
        with self._lock:
            for store_key, row in decoded:
                key, window = store_key[:width], store_key[width:]
                if row is None:
                    windows = self._rows.get(key)
                    if windows is not None:
                        windows.pop(window, None)
                        if not windows:
                            del self._rows[key]
                else:
                    self._rows.setdefault(key, {})[window] = row

    def wait_caught_up(self, timeout: float) -> None:
        """Wait until the rows hold the topic up to its end offsets at the time of the call."""
        from engine.kafka.consume import READ_COMMITTED, _consumer, _watermarks

        # A consumer of its own: the reading thread's consumer is busy in consume().
        probe = _consumer(self.bootstrap_servers, READ_COMMITTED, None)
        try:
            ends = {p: _watermarks(probe, self.source.topic, p, 10.0)[1] for p in self._positions}
        finally:
            probe.close()
        deadline = time.monotonic() + timeout
        while any(self._positions.get(p, 0) < end for p, end in ends.items()):
            if self.failure is not None:
                raise PullQueryError(self.failure)
            if time.monotonic() >= deadline:
                raise PullQueryError(
                    f"The materialization of {self.source.name} did not read its topic "
                    f"'{self.source.topic}' to the end within {timeout:g} s."
                )
            time.sleep(0.01)

    def lookup(self, keys: Iterable[tuple[Any, ...]]) -> list[dict[str, Any]]:
        """The rows of these keys (every window of each for a windowed table)."""
        with self._lock:
            return [row for key in keys for row in self._rows.get(key, {}).values()]

    def scan(self) -> list[dict[str, Any]]:
        """Every row, partition by partition in key byte order (as ksqlDB's state stores hold them)."""
        with self._lock:
            rows = [row for windows in self._rows.values() for row in windows.values()]
        rows.sort(key=lambda row: row[SCAN_ORDER])
        return rows

    def __len__(self) -> int:
        with self._lock:
            return sum(len(w) for w in self._rows.values())

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


# ---------------------------------------------------------------------------- the server's pull queries


@dataclass
class PullQueries:
    """The pull queries of one server: one materialization per queried table."""

    bootstrap_servers: str
    catch_up_timeout: float = CATCH_UP_SECONDS
    registry_url: str | None = None  # ``ksql.schema.registry.url``: AVRO/JSON_SR topics in its wire format
    _materializations: dict[str, Materialization] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def plan(
        self, metastore: MetaStore, query: ast.Query, text: str, properties: Mapping[str, Any]
    ) -> PullPlan:
        """Check and compile a pull query (read the metastore under the caller's lock)."""
        plan = plan_pull_query(metastore, query, text, properties)
        self._forget_dropped(metastore)
        return plan

    def run(self, plan: PullPlan) -> PullResult:
        """Answer a planned pull query: rows found, filtered, projected, limited."""
        source = plan.source
        if source.is_table:
            materialization = self.materialization(source)
            rows: Iterable[dict[str, Any]] = (
                materialization.scan() if plan.lookup_keys is None else materialization.lookup(plan.lookup_keys)
            )
            if plan.key_range is not None:
                rows = [row for row in rows if _in_range(row, plan.key_range)]
        else:
            rows = self._stream_rows(source)
        out: list[tuple[Any, ...]] = []
        limit = plan.limit
        reached = limit == 0
        if not reached:
            for found in rows:
                if plan.predicate is not None and plan.predicate(found) is not True:
                    continue
                for row in _flat_map(found, plan.flat_maps):
                    out.append(tuple(fn(row) for fn in plan.projections))
                    if limit is not None and len(out) >= limit:
                        reached = True
                        break
                if reached:
                    break
        return PullResult(plan.query_id, plan.columns, tuple(out), not source.is_table, reached, plan.header)

    def materialization(self, source: DataSource) -> Materialization:
        """The table's materialization, started (and read to the end) on first use."""
        with self._lock:
            found = self._materializations.get(source.name)
            if found is not None and (found.source is not source or found.failure is not None):
                found.close()
                found = None
            fresh = found is None
            if found is None:
                from engine.errors import KafkaClientError

                try:
                    found = Materialization(self.bootstrap_servers, source, self.registry_url).start()
                except KafkaClientError as exc:
                    raise PullQueryError(f"{source.name} cannot be queried: {exc}") from None
                self._materializations[source.name] = found
        if fresh:
            found.wait_caught_up(self.catch_up_timeout)
        elif found.failure is not None:
            raise PullQueryError(found.failure)
        return found

    def _stream_rows(self, source: DataSource) -> list[dict[str, Any]]:
        from engine.errors import KafkaClientError
        from engine.kafka.consume import read_topic

        decoder = _Decoder(source, self.registry_url)
        try:
            records = read_topic(self.bootstrap_servers, source.topic, timeout=self.catch_up_timeout)
        except KafkaClientError as exc:
            raise PullQueryError(f"{source.name} cannot be queried: {exc}") from None
        rows = []
        for record in records:
            try:
                _key, row = decoder.row(record)
            except KsqlError as exc:
                LOG.warning("pull: record %s-%d@%d skipped: %s", record.topic, record.partition, record.offset, exc)
                continue
            if row is not None:
                rows.append(row)
        return rows

    def _forget_dropped(self, metastore: MetaStore) -> None:
        with self._lock:
            for name in list(self._materializations):
                # The live metastore keeps a source's object until it is dropped or replaced.
                if metastore.get(name) is not self._materializations[name].source:
                    self._materializations.pop(name).close()

    def close(self) -> None:
        with self._lock:
            for materialization in self._materializations.values():
                materialization.close()
            self._materializations.clear()


# ---------------------------------------------------------------------------- wire shapes


def _in_range(row: Mapping[str, Any], key_range: tuple[str, str, Any]) -> bool:
    """Whether a row is in a range scan's key range, both ends included (ksqlDB's store range)."""
    name, op, bound = key_range
    key = row.get(name)
    if key is None or type(key) is not type(bound):
        return False
    return bool(key >= bound) if op == ">=" else bool(key <= bound)


def pull_query_body(result: PullResult) -> str:
    """``/query``'s answer: one JSON array of the header, the rows and (streams) a final message."""
    from engine.serde.coerce import json_text

    parts = [json_text({"header": {"queryId": result.query_id, "schema": result.schema_text}})]
    parts += [json_text({"row": {"columns": row}}) for row in result.json_rows()]
    if result.final_message is not None:
        parts.append(json_text({"finalMessage": result.final_message}))
    return "[" + ",\n".join(parts) + "]\n"


def pull_query_stream_body(result: PullResult, delimited: bool) -> str:
    """``/query-stream``'s answer: metadata, then one JSON array per row (a line each, or one array)."""
    from engine.serde.coerce import json_text

    metadata = {
        "queryId": result.query_id,
        "columnNames": [c.name for c in result.columns],
        "columnTypes": [str(c.type) for c in result.columns],
    }
    parts = [json_text(metadata)] + [json_text(row) for row in result.json_rows()]
    if delimited:
        return "".join(part + "\n" for part in parts)
    return "[" + ",\n".join(parts) + "]\n"


def pull_query_protobuf_body(result: PullResult) -> str:
    """``/query``'s answer in ksqlDB's ``application/vnd.ksql.v1+protobuf`` form: the header
    with the proto3 schema of the result's columns (``protoSchema``, message ``ConnectDefault1``),
    then each row as that message's bytes (``protobufBytes``, base64), as PROTOBUF_NOSR writes
    them; the final message of a stream as in the JSON form."""
    import base64

    from engine.plan.schema import Column
    from engine.serde import value_serde
    from engine.serde.coerce import json_text
    from engine.serde.formats import FormatInfo, SerdeFeatures
    from engine.serde.protobuf import proto_schema
    from engine.serde.registry import wire_serde

    header = result.header or result.columns
    columns = [Column(c.name, c.type) for c in header]
    fmt = FormatInfo("PROTOBUF_NOSR")
    serde = wire_serde(value_serde(fmt, columns, SerdeFeatures()), "", None)
    position = {c.name: i for i, c in enumerate(result.columns)}
    parts = [json_text({"header": {"queryId": result.query_id, "schema": result.schema_text,
                                   "protoSchema": proto_schema(columns, fmt)}})]
    for row in result.rows:
        record = serde.serialize({c.name: row[position[c.name]] for c in columns})
        payload = serde.to_bytes(record) or b""
        parts.append(json_text({"row": {"protobufBytes": base64.b64encode(payload).decode("ascii")}}))
    if result.final_message is not None:
        parts.append(json_text({"finalMessage": result.final_message}))
    return "[" + ",\n".join(parts) + "]\n"
