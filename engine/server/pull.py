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
deleting its key. A windowed table keeps one row per key and window. ``KEY = x`` and ``KEY IN (...)``
are answered by looking the keys up; any other WHERE (or none) scans the table when
``ksql.query.pull.table.scan.enabled`` is true (the default, as in ksqlDB). A pull query
against a stream reads the stream's topic from the beginning up to its end offsets at the
time of the query and finishes. WHERE and the SELECT list are evaluated per row by the
engine's expression evaluator (``engine.expressions``): no Spark job runs.

A materialization starts with the first pull query against its table and stays up to
date until the server closes (or the table is dropped); the first query waits until it
has read the topic up to its end offsets at that time.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from engine.errors import AnalysisError, KsqlError
from engine.metastore.model import DataSource, MetaStore
from engine.parser import ast
from engine.plan import expr as X
from engine.plan import types as T
from engine.plan.schema import Namespace

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


class PullQueryError(AnalysisError):
    """A pull query that is refused (ksqlDB's message) or cannot be answered."""


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


def _conjuncts(expression: X.Expr | None) -> list[X.Expr]:
    if expression is None:
        return []
    if isinstance(expression, X.Logical) and expression.op.upper() == "AND":
        return _conjuncts(expression.left) + _conjuncts(expression.right)
    return [expression]


def _constant(expression: X.Expr) -> tuple[bool, Any]:
    """(True, value) when ``expression`` holds no column: a literal, maybe negated or cast."""
    from engine.expressions.evaluator import compile_expression

    if any(isinstance(e, X.ColumnRef | X.LambdaVariable) for e in X.walk(expression)):
        return False, None
    try:
        return True, compile_expression(expression, {})({})
    except KsqlError:
        return False, None


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


def _lookup_keys(where: X.Expr | None, key_columns: Sequence[Any]) -> list[tuple[Any, ...]] | None:
    """The key tuples a WHERE of ``KEY = x`` / ``KEY IN (...)`` conjuncts pins, else None (a scan)."""
    if not key_columns:
        return None
    wanted: dict[str, set[Any] | None] = {c.name: None for c in key_columns}
    types = {c.name: c.type for c in key_columns}
    for part in _conjuncts(where):
        column: str | None = None
        values: list[Any] = []
        if isinstance(part, X.Comparison) and part.op == "=":
            for ref, other in ((part.left, part.right), (part.right, part.left)):
                if isinstance(ref, X.ColumnRef) and ref.name in wanted:
                    ok, value = _constant(other)
                    if ok:
                        column, values = ref.name, [value]
                        break
        elif isinstance(part, X.In) and isinstance(part.value, X.ColumnRef) and part.value.name in wanted \
                and not part.negated:
            found = [_constant(item) for item in part.items]
            if all(ok for ok, _ in found):
                column, values = part.value.name, [v for _, v in found]
        if column is None:
            continue
        if not all(v is not None and _fits(v, types[column]) for v in values):
            return None
        known = wanted[column]
        wanted[column] = set(values) if known is None else known & set(values)
    if any(v is None for v in wanted.values()):
        return None
    pinned = [sorted(wanted[c.name] or (), key=repr) for c in key_columns]
    return [tuple(combo) for combo in itertools.product(*pinned)]


# What ksqlDB appends to a WHERE clause it refuses for a pull query (QueryFilterNode), non-windowed.
WHERE_HELP = (
    "\nPull queries require a WHERE clause that:"
    "\n - includes a key equality expression, e.g. `SELECT * FROM X WHERE <key-column> = Y;`."
    "\n - in the case of a multi-column key, is a conjunction of equality expressions that cover all key columns."
    "\n - to support range expressions, e.g.,  SELECT * FROM X WHERE <key-column> < Y;`, range scans need to be "
    f"enabled by setting {RANGE_SCAN_ENABLED}=true"
    f"\nIf more flexible queries are needed, , table scans can be enabled by setting {TABLE_SCAN_ENABLED}=true."
)
TABLE_SCAN_NEEDED = (
    f"Query requires table scan to be enabled. Table scans can be enabled by setting {TABLE_SCAN_ENABLED}=true"
)
_RANGE_OPS = frozenset({">", ">=", "<", "<="})


def _where_refusal(reason: str) -> PullQueryError:
    return PullQueryError(f"{reason}. {' ' + QUERIES_URL}{PUSH_HINT}{WHERE_HELP}")


def _key_bounds(where: X.Expr | None, key_names: Sequence[str]) -> dict[str, list[str]]:
    """Per key column, the comparisons the WHERE (one conjunction) puts on it, as ksqlDB counts
    them after rewriting: ``IN`` one ``=``, ``BETWEEN`` a ``>=`` and a ``<=``."""
    bounds: dict[str, list[str]] = {}
    for part in _conjuncts(where):
        if isinstance(part, X.Comparison):
            for ref, flipped in ((part.left, False), (part.right, True)):
                if isinstance(ref, X.ColumnRef) and ref.name in key_names:
                    op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}.get(part.op, part.op) if flipped else part.op
                    bounds.setdefault(ref.name, []).append(op)
                    break
        elif isinstance(part, X.In) and isinstance(part.value, X.ColumnRef) and part.value.name in key_names:
            bounds.setdefault(part.value.name, []).append("=" if not part.negated else "<>")
        elif isinstance(part, X.Between) and isinstance(part.value, X.ColumnRef) and part.value.name in key_names:
            bounds.setdefault(part.value.name, []).extend([">=", "<="] if not part.negated else ["<>"])
    return bounds


def check_without_table_scan(source: DataSource, where: X.Expr | None, lookup: list[tuple[Any, ...]] | None,
                             properties: Mapping[str, Any]) -> bool:
    """With table scans disabled, whether ksqlDB serves the pull query (True: a range scan on
    the key, False: a key lookup), or its refusal (raised). ksqlDB's rules (QueryFilterNode,
    PullPhysicalPlanBuilder) for a conjunction on a non-windowed table: every key comparison is
    ``=`` or a range, the key is compared once, and a range scan needs one STRING or BYTES key."""
    if where is None:
        raise PullQueryError(TABLE_SCAN_NEEDED + PUSH_HINT)
    if source.window_info is not None or any(
            isinstance(e, X.Logical) and e.op.upper() == "OR" for e in X.walk(where)):
        if lookup is None:
            raise PullQueryError(TABLE_SCAN_NEEDED + PUSH_HINT)
        return False
    keys = list(source.schema.key)
    bounds = _key_bounds(where, [c.name for c in keys])
    if not bounds:
        raise _where_refusal(f"WHERE clause missing key column for disjunct: {X.format_sql(where)}")
    if any(op not in _RANGE_OPS | {"="} for ops in bounds.values() for op in ops):
        shown = ", ".join(f"`{c.name}` {c.type} KEY" for c in keys)
        raise _where_refusal(f"Bound on key columns '[{shown}]' must currently be '='")
    if any(len(ops) > 1 for ops in bounds.values()):
        raise _where_refusal(
            "A comparison condition on the key column cannot be combined with other comparisons such as an "
            "IN predicate")
    if lookup is not None:
        return False
    ops = [op for found in bounds.values() for op in found]
    key_type = getattr(keys[0].type, "base", None) if len(keys) == 1 else None
    if (len(keys) == 1 and ops[0] in _RANGE_OPS and key_type in (T.BaseType.STRING, T.BaseType.BYTES)
            and _flag(properties, RANGE_SCAN_ENABLED, True)):
        return True
    raise PullQueryError(TABLE_SCAN_NEEDED + PUSH_HINT)


def _column_names(expressions: Iterable[X.Expr]) -> list[str]:
    names: list[str] = []
    for expression in expressions:
        for node in X.walk(expression):
            if isinstance(node, X.ColumnRef) and node.name not in names:
                names.append(node.name)
    return names


def plan_pull_query(
    metastore: MetaStore, query: ast.Query, text: str, properties: Mapping[str, Any]
) -> PullPlan:
    """Check a pull query against the metastore as ksqlDB does and compile it."""
    from engine.analysis.query import Scope, analyze_query, source_columns
    from engine.expressions.evaluator import compile_typed

    if isinstance(query.from_, ast.Join):  # ksqlDB's PullQueryValidator checks in this order
        raise _refuse_clause("JOIN")
    if query.window is not None:
        raise _refuse_clause("WINDOW")
    if query.group_by:
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
    name = getattr(query.from_, "name", None)
    source = metastore.get(name) if isinstance(name, str) else None
    if source is None:
        raise PullQueryError(f"{name} does not exist.")
    if source.is_table and not (source.is_source or metastore.writers(source.name)):
        raise PullQueryError(
            f"The `{source.name}` table isn't queryable. To derive a queryable table, you can do "
            f"'CREATE TABLE QUERYABLE_{source.name} AS SELECT * FROM {source.name}'. {QUERIES_URL}"
        )
    if not source.is_table and not _flag(properties, STREAM_ENABLED, True):
        raise PullQueryError(
            f"Pull queries on streams are disabled. To enable, set {STREAM_ENABLED}=true.{PUSH_HINT}"
        )
    # WHERE is resolved and typed here, so that its errors read as ksqlDB's pull-query errors.
    analysis = analyze_query(dataclasses.replace(query, where=None), metastore, transient=True)
    scope = Scope.of_source(source, getattr(query.from_, "alias", None) or source.name)
    where = scope.resolve(query.where, clause="WHERE") if query.where is not None else None
    analysis.where = where
    if analysis.aggregation is not None:
        raise PullQueryError(f"Pull queries don't support aggregate functions. {QUERIES_URL}{PUSH_HINT}")
    if analysis.table_functions:
        raise PullQueryError(f"Pull queries don't support table functions. {QUERIES_URL}{PUSH_HINT}")
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
    projections = []
    result_columns = []
    for selected in analysis.select:
        fn, sql_type = compile_typed(selected.expression, columns)
        projections.append(fn)
        suffix = ""
        ref = selected.expression
        if isinstance(ref, X.ColumnRef) and source.is_table:
            column = schema_columns.get(ref.name)
            if (column is not None and column.namespace is Namespace.KEY) or (
                ref.name in WINDOW_BOUNDS and source.window_info is not None
            ):
                suffix = " KEY"
        if isinstance(ref, X.ColumnRef) and source.is_table and (column := schema_columns.get(ref.name)) is not None \
                and column.namespace is Namespace.HEADERS and selected.alias == ref.name:
            suffix = str(column)[len(f"{column.name} {column.type}") + 2:]
        result_columns.append(PullColumn(selected.alias, sql_type if sql_type is not None else columns.get(
            getattr(ref, "name", ""), T.Primitive(T.BaseType.STRING)), suffix))
    lookup = None
    if source.is_table:
        key_columns = list(source.schema.key)
        lookup = _lookup_keys(analysis.where, key_columns)
        if not _flag(properties, TABLE_SCAN_ENABLED, True):
            check_without_table_scan(source, analysis.where, lookup, properties)
    return PullPlan(
        query_id=f"query_{int(time.time() * 1000)}_{secrets.randbelow(10**6)}",
        source=source,
        columns=tuple(result_columns),
        projections=tuple(projections),
        predicate=predicate,
        lookup_keys=lookup,
        limit=query.limit,
        header=star_header(query, source, result_columns),
    )


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
        else:
            rows = self._stream_rows(source)
        out: list[tuple[Any, ...]] = []
        limit = plan.limit
        reached = limit == 0
        if not reached:
            for row in rows:
                if plan.predicate is not None and plan.predicate(row) is not True:
                    continue
                out.append(tuple(fn(row) for fn in plan.projections))
                if limit is not None and len(out) >= limit:
                    reached = True
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
