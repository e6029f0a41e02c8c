"""KsqlEngine: executes statements, keeps the metastore and queries, runs them on Spark.

Statements go parse -> plan (upper layer) -> ``apply_plan``; a saved plan can be applied
without its SQL text (``execute_plan``), which is how legacy plans replay.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from copy import deepcopy
from dataclasses import dataclass, field, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from engine.data.records import TopicInfo, TopicRecord
from engine.errors import (
    AnalysisError,
    ExecutionError,
    InternalError,
    KsqlError,
    MetastoreError,
    StatementPrepareError,
    UnsupportedFeatureError,
    query_failure_cause,
    query_failure_in,
)
from engine.expressions import compile_expression, infer_type
from engine.facade.api import FormatDescription, SourceInfo, StatementResult
from engine.facade.compatibility import plan_versions
from engine.facade.properties import check_override, check_statement_property
from engine.metastore import DataSource, InMemoryMetaStore
from engine.metastore.model import alternatives_hint, upgrade_problem
from engine.parser import ast, parse
from engine.plan import expr as E
from engine.plan.plan import (
    AlterSourceCommand,
    CreateStreamCommand,
    CreateTableCommand,
    DropSourceCommand,
    QueryPlan,
    StatementPlan,
    TransientQueryPlan,
)
from engine.plan.schema import LogicalSchema, Namespace
from engine.plan.upgrade import beyond_ksqldb_enabled, validate_upgrade
from engine.planner.internal_topics import (
    DEFAULT_PERSISTENT_PREFIX,
    PERSISTENT_PREFIX,
    SERVICE_ID,
    application_id,
    internal_topics,
)
from engine.planner.planner import Planner, refuse_unknown_types
from engine.runtime.adapter import TopicCodec, TopicService, TopicStore

if TYPE_CHECKING:
    from engine.builders.context import Built
    from engine.plan.types import SqlType
    from engine.serde import RecordSerde


# ksqlDB's hint when a string given to INSERT VALUES does not read as a time type.
_TIME_TEXT_HINTS = {
    "TIMESTAMP": ". Timestamp format must be yyyy-mm-ddThh:mm:ss[.S]",
    "TIME": ". Time format must be hh:mm:ss[.S]",
    "DATE": ". Date format must be yyyy-mm-dd",
}


@dataclass(frozen=True)
class QueryReport:
    """What running a query showed: its Spark physical plan and its internal state schemas.

    The plan's text is made when first read (``plan_text``, once): a run that never reads it
    (``qtt conformance``) does not prepare it again for whole-stage code generation. Spark
    keeps the plan it planned for the query, so the text is the same before and after its job.
    """

    query_id: str
    plan_text: Callable[[], str] = field(repr=False, compare=False)
    internal_schemas: dict[str, str]

    @cached_property
    def physical_plan(self) -> str:
        return self.plan_text()


def physical_plan_text(df: Any) -> str:
    """The Spark physical plan of a DataFrame, as ``explain()`` prints it (not normalised),
    with whole-stage code generation (``engine.runtime.session.physical_plan_text``)."""
    from engine.runtime.session import physical_plan_text as text

    return text(df)


class KsqlEngine:
    """One engine instance: metastore, topics, persistent queries and properties."""

    def __init__(
        self,
        properties: Mapping[str, Any] | None = None,
        *,
        runtime: Any = None,
        topics: TopicService | None = None,
    ) -> None:
        self.config: dict[str, Any] = dict(properties or {})
        # The configuration given, without SET's overrides: what may be overridden is judged by it.
        self._server_config: dict[str, Any] = dict(self.config)
        self.metastore = InMemoryMetaStore()
        self.store: TopicService = topics if topics is not None else TopicStore()
        self._runtime = runtime
        self.queries: dict[str, QueryPlan] = {}
        # The query each CREATE ... AS SELECT sink was created with (ksqlDB's CREATE_AS queries;
        # the others are INSERT queries), by sink name.
        self._create_as_queries: dict[str, str] = {}
        self.plans: list[StatementPlan] = []
        self.variables: dict[str, str] = {}
        # Custom types (CREATE TYPE), by upper-cased name: statements parsed later resolve them.
        self.types: dict[str, SqlType] = {}
        self._query_counter = 0
        self._outputs: dict[str, list[TopicRecord]] | None = None
        self.query_reports: dict[str, QueryReport] = {}
        # The schema registry CREATE without columns reads its columns from when the config
        # names none (ksql.schema.registry.url): the QTT harness's in-process registry.
        self.schema_registry_url: str | None = None
        # ksql.service.id: the prefix of the internal topics' names ksqlDB would give them.
        self.service_id = str(self.config.get(SERVICE_ID, "default_"))
        # Formats of the internal topics the queries run so far created (see internal_topics).
        self._internal_formats: dict[str, tuple[FormatDescription, FormatDescription]] = {}

    # ------------------------------------------------------------------ topics and records

    def create_topic(self, topic: TopicInfo) -> None:
        self.store.ensure(topic)

    def topics(self) -> dict[str, TopicInfo]:
        return dict(self.store.topics)

    def produce(self, records: Iterable[TopicRecord]) -> None:
        for record in records:
            self.store.append(record)

    # ------------------------------------------------------------------ statements

    def snapshot(self) -> KsqlEngine:
        """A copy to validate and execute statements against, leaving this engine as it is.

        It shares the topic service (a statement may create its topic) and copies the
        metastore, the queries, the properties, the variables and the query id counter.
        """
        copy = KsqlEngine(self.config, runtime=self._runtime, topics=self.store)
        copy.metastore = deepcopy(self.metastore)
        copy.queries = dict(self.queries)
        copy._create_as_queries = dict(self._create_as_queries)
        copy.plans = list(self.plans)
        copy.variables = dict(self.variables)
        copy.types = dict(self.types)
        copy._query_counter = self._query_counter
        copy.schema_registry_url = self.schema_registry_url
        return copy

    def terminate(self, query_id: str) -> None:
        """Stop tracking a persistent query: it no longer reads or writes its sources."""
        if query_id not in self.queries:
            raise AnalysisError(f"Unknown queryId: {query_id}")
        self._terminate(query_id)

    def planner(self) -> Planner:
        return Planner(self.metastore, self.topics, self.config, registry_url=self.schema_registry_url)

    def execute_sql(self, text: str, *, first_line: int = 1) -> list[StatementResult]:
        """Parse and execute every statement of ``text`` in order; ``text`` starts on line
        ``first_line`` of its script (error positions count from there)."""
        results = []
        for parsed in parse(text, variables=self.variables, types=self.types, first_line=first_line):
            try:
                results.append(self._execute(parsed.statement, parsed.text))
            except AnalysisError as exc:
                parsed.locate(exc)
                raise
        return results

    def _execute(self, stmt: Any, text: str) -> StatementResult:
        stmt = plan_versions(stmt, self.config)  # the function versions the service opted in to
        planner = self.planner()
        if isinstance(stmt, ast.CreateSource):
            if stmt.is_source and not _config_flag(self.config, SOURCE_TABLE_MATERIALIZATION_ENABLED):
                raise AnalysisError("Cannot execute command because source table materialization is disabled.")
            plan = planner.plan_create_source(stmt, text)
            self._provision_topic(stmt, plan)
            self._register_schemas(plan, create_as_select=False)
            result = self._apply(plan, text, f"CREATE_{stmt.kind}")
            if _numbers_a_query(plan):
                self._query_counter += 1
            return result
        if isinstance(stmt, ast.CreateAsSelect):
            plan = planner.plan_create_as_select(stmt, text, self._create_as_query_id(stmt))
            self._provision_topic(stmt, plan)
            self._register_schemas(plan, create_as_select=True)
            return self._apply(plan, text, f"CREATE_{stmt.kind}_AS_SELECT")
        if isinstance(stmt, ast.InsertInto):
            requested = stmt.properties.get("QUERY_ID")
            query_id = str(requested).upper() if requested is not None else self._next_query_id(stmt)
            if requested is not None:
                self._check_requested_query_id(query_id)
            plan = planner.plan_insert_into(stmt, text, query_id)
            return self._apply(plan, text, "INSERT_INTO")
        if isinstance(stmt, ast.DropSource):
            plan = planner.plan_drop(stmt, text)
            return self._apply(plan, text, f"DROP_{stmt.kind}")
        if isinstance(stmt, ast.AlterSource):
            return self._apply(planner.plan_alter(stmt, text), text, f"ALTER_{stmt.kind}")
        if isinstance(stmt, ast.InsertValues):
            self._insert_values(stmt)
            return StatementResult(text, "INSERT_VALUES")
        if isinstance(stmt, ast.SetProperty):
            check_statement_property(stmt.name)
            check_override(stmt.name, self._server_config)
            self.config[stmt.name] = stmt.value
            return StatementResult(text, "SET")
        if isinstance(stmt, ast.UnsetProperty):
            check_statement_property(stmt.name)
            self.config.pop(stmt.name, None)
            return StatementResult(text, "UNSET")
        if isinstance(stmt, ast.CreateType):
            self._register_type(stmt)
            return StatementResult(text, "CREATE_TYPE")
        if isinstance(stmt, ast.DropType):
            self._drop_type(stmt)
            return StatementResult(text, "DROP_TYPE")
        if isinstance(stmt, ast.DefineVariable):
            self.variables[stmt.name] = stmt.value
            return StatementResult(text, "DEFINE")
        if isinstance(stmt, ast.UndefineVariable):
            self.variables.pop(stmt.name, None)
            return StatementResult(text, "UNDEFINE")
        raise UnsupportedFeatureError(
            f"{type(stmt).__name__} statements", f"kspark does not support this statement yet: {text}"
        )

    def _register_type(self, stmt: ast.CreateType) -> None:
        """CREATE TYPE [IF NOT EXISTS]: ksqlDB's RegisterTypeFactory refuses a registered name
        unless IF NOT EXISTS, which keeps the registered type."""
        name = stmt.name.upper()
        registered = self.types.get(name)
        if registered is not None:
            if stmt.if_not_exists:
                return
            raise AnalysisError(
                f"Cannot register custom type '{stmt.name}' since it is already registered with type: {registered}"
            )
        refuse_unknown_types(stmt)
        self.types[name] = stmt.type

    def _drop_type(self, stmt: ast.DropType) -> None:
        """DROP TYPE [IF EXISTS]: ksqlDB's DropTypeFactory. Sources and queries that use the type
        keep it: its name was resolved when their statements were parsed."""
        name = stmt.name.upper()
        if name not in self.types and not stmt.if_exists:
            raise AnalysisError(f"Type {stmt.name} does not exist.")
        self.types.pop(name, None)

    def plan_transient_query(self, query: ast.Query, text: str) -> TransientQueryPlan:
        """Plan a push query (``SELECT ... EMIT CHANGES``) against the metastore; nothing is registered."""
        relation: Any = query.from_
        while isinstance(relation, ast.Join):
            relation = relation.left
        query_id = f"transient_{relation.name}_{secrets.randbelow(10**18)}"
        return self.planner().plan_transient_query(query, text, query_id)

    def _provision_topic(self, stmt: Any, plan: StatementPlan | None) -> None:
        """Create the topic a CREATE statement names when it does not exist, as ksqlDB does.

        A source's topic gets the statement's PARTITIONS; a query's sink topic gets
        PARTITIONS or else the largest partition count of the query's source topics.
        """
        if plan is None or not isinstance(plan.command, CreateStreamCommand | CreateTableCommand):
            return
        topic = plan.command.topic
        if topic in self.store.topics:
            return
        declared = stmt.properties.get("PARTITIONS")
        partitions = int(declared) if str(declared).isdigit() else None
        primary: str | None = None  # a query's first source's topic: replicas and retention come from it
        if plan.query is not None:
            known = self.store.topics
            sources = [self.metastore.get(name) for name in plan.query.sources]
            topics = [s.topic for s in sources if s is not None and s.topic in known]
            primary = topics[0] if topics else None
            if partitions is None:
                partitions = max((known[t].partitions for t in topics), default=1)
        replicas, configs = self._topic_settings(stmt, plan, primary)
        self.store.ensure(TopicInfo(topic, partitions=partitions or 1, replicas=replicas, configs=configs))

    def _topic_settings(self, stmt: Any, plan: StatementPlan, primary: str | None) -> tuple[int | None, dict[str, str]]:
        """The replication factor and topic configs of a topic a CREATE makes, as ksqlDB's topic
        injector makes it: ``cleanup.policy`` from the source's kind (``compact`` for a table,
        ``compact,delete`` for a windowed one, else ``delete``); ``REPLICAS`` and ``RETENTION_MS``
        from the WITH clause, else (a query's sink) from its first source's topic (replicas only
        with ``ksql.create.topic.inherit.source.replicas.enabled``); a windowed table keeps its
        records at least its window's RETENTION; a compacted topic has no retention.ms."""
        window = getattr(getattr(stmt, "query", None), "window", None)
        is_table = isinstance(plan.command, CreateTableCommand)
        policy = ("compact,delete" if window is not None else "compact") if is_table else "delete"
        declared_replicas = stmt.properties.get("REPLICAS")
        declared_retention = stmt.properties.get("RETENTION_MS")
        settings = getattr(self.store, "settings", None)
        source_replicas, source_configs = settings(primary) if settings is not None and primary else (None, {})
        replicas = int(declared_replicas) if declared_replicas is not None else (
            source_replicas if _config_flag(self.config, INHERIT_SOURCE_REPLICAS) else None)
        retention = int(declared_retention) if declared_retention is not None else (
            int(source_configs["retention.ms"]) if str(source_configs.get("retention.ms", "")).lstrip("-").isdigit()
            else None)
        if window is not None and window.retention_ms is not None:
            retention = max(retention if retention is not None else DEFAULT_RETENTION_MS, window.retention_ms)
        configs = {"cleanup.policy": policy}
        if retention is not None and policy != "compact":
            configs["retention.ms"] = str(retention)
        return replicas, configs

    def _register_schemas(self, plan: StatementPlan | None, *, create_as_select: bool) -> None:
        """Register the schemas of a new source's topic when a registry is configured, as
        ksqlDB's SchemaRegisterInjector does before it runs the statement (see
        ``engine.serde.schema_register``); a replayed plan registers nothing."""
        if plan is None or not isinstance(plan.command, CreateStreamCommand | CreateTableCommand):
            return
        from engine.serde.schema_inference import SCHEMA_REGISTRY_URL
        from engine.serde.schema_register import register_schemas

        url = self.schema_registry_url or self.config.get(SCHEMA_REGISTRY_URL) or None
        if url is None:
            return

        command = plan.command
        register_schemas(str(url), command.topic, command.formats, command.schema.columns,
                         create_as_select=create_as_select)

    def _create_as_query_id(self, stmt: ast.CreateAsSelect) -> str:
        """The id of the query a CREATE ... AS SELECT runs: with OR REPLACE over a sink one
        query writes, that query's id (the replacement takes over its offsets and state, as
        ksqlDB's query upgrades do); else a new one."""
        writers = self.metastore.writers(stmt.name) if stmt.or_replace and self.metastore.get(stmt.name) else []
        if len(writers) > 1:
            raise AnalysisError(
                f"REPLACE for sink {stmt.name} is not supported because there are multiple queries "
                f"writing into it: [{', '.join(sorted(writers))}]"
            )
        if writers and str(self.config.get(CREATE_OR_REPLACE_ENABLED, "true")).strip().lower() == "false":
            kind = stmt.kind.lower()
            raise AnalysisError(f"Cannot add {kind} '{stmt.name}': A {kind} with the same name already exists")
        return writers[0] if writers else self._next_query_id(stmt)

    def _check_requested_query_id(self, query_id: str) -> None:
        """ksqlDB's checks of an INSERT INTO's ``QUERY_ID`` (upper-cased): no reserved prefix,
        letters, digits and '_' only, no running query of that id."""
        if query_id.startswith(RESERVED_QUERY_ID_PREFIXES):
            raise AnalysisError(
                "Query IDs must not start with a reserved query ID prefix "
                f"({', '.join(RESERVED_QUERY_ID_PREFIXES)}). Got '{query_id}'."
            )
        if not re.fullmatch(r"[A-Za-z0-9_]+", query_id):
            raise AnalysisError(f"Query IDs may contain only alphanumeric characters and '_'. Got: '{query_id}'")
        if query_id in self.queries:
            raise AnalysisError(f"Query ID '{query_id}' already exists.")

    def _next_query_id(self, stmt: Any) -> str:
        n = self._query_counter
        self._query_counter += 1
        if isinstance(stmt, ast.CreateAsSelect):
            prefix = "CTAS" if stmt.kind == "TABLE" else "CSAS"
            return f"{prefix}_{stmt.name}_{n}"
        return f"INSERTQUERY_{n}"

    def _apply(self, plan: StatementPlan | None, text: str, kind: str) -> StatementResult:
        if plan is None:
            return StatementResult(text, kind)
        self.execute_plan(plan)
        return StatementResult(
            text, kind, query_id=plan.query.query_id if plan.query else None, plan=plan
        )

    def execute_plan(self, plan: StatementPlan, *, check_upgrade: bool = True) -> None:
        """Apply a statement plan: run its DDL command, register its query (a CREATE OR
        REPLACE whose query id runs already replaces that query's plan, when
        ``engine.plan.upgrade`` allows it; ``check_upgrade=False``: a plan that was checked
        when it was written, replayed from a log or a state dir)."""
        command = plan.command
        replaced = self._replaced_query(plan)
        if isinstance(command, CreateStreamCommand | CreateTableCommand):
            existing = self.metastore.get(command.name)
            source = DataSource(
                name=command.name,
                kind="TABLE" if isinstance(command, CreateTableCommand) else "STREAM",
                schema=command.schema,
                topic=command.topic,
                formats=command.formats,
                timestamp_column=command.timestamp_column,
                window_info=command.window_info,
                is_source=command.is_source,
                sql=plan.statement_text,
            )
            if command.or_replace and existing is not None:
                problem = upgrade_problem(existing, source)
                if problem is not None:
                    raise MetastoreError(f"Cannot upgrade data source: {problem}")
            if replaced is not None and plan.query is not None and check_upgrade:
                validate_upgrade(replaced.root, plan.query.root, beyond_ksqldb=beyond_ksqldb_enabled(self.config))
            self.metastore.put(source, replace=command.or_replace and existing is not None)
            self.store.ensure(TopicInfo(command.topic))
        elif isinstance(command, AlterSourceCommand):
            altered = self.metastore.get(command.name)
            if altered is None:
                raise AnalysisError(f"Source {command.name} does not exist.")
            schema = LogicalSchema(altered.schema.columns + command.new_columns.columns)
            sql = f"{altered.sql}\n{plan.statement_text}" if altered.sql else plan.statement_text  # as ksqlDB keeps it
            self.metastore.put(replace(altered, schema=schema, sql=sql), replace=True)
        elif isinstance(command, DropSourceCommand):
            self._refuse_drop_of_read_source(command.name)
            self._create_as_queries.pop(command.name, None)
            for query_id in self.metastore.writers(command.name):
                if self.queries[query_id].sink == command.name and len(self.metastore.writers(command.name)) == 1:
                    self._terminate(query_id)
            self.metastore.delete(command.name)
        if plan.query is not None:
            q = plan.query
            if replaced is not None:
                self.metastore.unlink_query(q.query_id)
            elif q.query_id in self.queries:
                raise AnalysisError(f"Query id {q.query_id} is already running.")
            self.metastore.link_query(q.query_id, q.sources, q.sink)
            self.queries[q.query_id] = q
            if isinstance(command, CreateStreamCommand | CreateTableCommand):
                self._create_as_queries[command.name] = q.query_id
        self.plans.append(plan)

    def _refuse_drop_of_read_source(self, name: str) -> None:
        """ksqlDB's referential checks of DROP: no INSERT query may read or write the source,
        and no source created by CREATE ... AS SELECT may read it (while its query runs)."""
        create_as = set(self._create_as_queries.values())
        inserts = {qid: q for qid, q in self.queries.items() if qid not in create_as}
        reading = sorted(qid for qid, q in inserts.items() if name in q.sources)
        writing = sorted(qid for qid, q in inserts.items() if q.sink == name)
        if reading or writing:
            raise MetastoreError(
                f"Cannot drop {name}.\n"
                f"The following queries read from this source: [{', '.join(reading)}].\n"
                f"The following queries write into this source: [{', '.join(writing)}].\n"
                f"You need to terminate them before dropping {name}."
            )
        dependents = sorted(
            sink for sink, qid in self._create_as_queries.items()
            if sink != name and qid in self.queries and name in self.queries[qid].sources
        )
        if dependents:
            raise MetastoreError(
                f"Cannot drop {name}.\n"
                f"The following streams and/or tables read from this source: [{', '.join(dependents)}].\n"
                f"You need to drop them before dropping {name}."
            )

    def _replaced_query(self, plan: StatementPlan) -> QueryPlan | None:
        """The running query ``plan`` replaces: a CREATE OR REPLACE planned with its id."""
        command = plan.command
        if plan.query is None or not isinstance(command, CreateStreamCommand | CreateTableCommand):
            return None
        if not command.or_replace:
            return None
        return self.queries.get(plan.query.query_id)

    def _terminate(self, query_id: str) -> None:
        self.queries.pop(query_id, None)
        self.metastore.unlink_query(query_id)

    def _insertable(self, target: str, *, values: bool = False) -> DataSource:
        """The source INSERT VALUES (``values``) or a row insert may write to: known, not
        read-only; for INSERT VALUES also not windowed and not on a read-only topic."""
        source = self.metastore.get(target)
        if source is None:
            raise AnalysisError(
                f"Cannot insert values into an unknown stream/table: `{target}`"
                + alternatives_hint(self.metastore.all(), target)
            )
        if values and source.window_info is not None:
            raise AnalysisError("Cannot insert values into windowed stream/table!")
        if values and _is_read_only_topic(source.topic, self.config, self.service_id):
            raise AnalysisError(f"Cannot insert values into read-only topic: {source.topic}")
        if source.is_source:
            raise AnalysisError(
                f"Cannot insert values into read-only {source.kind.lower()}: {source.name}"
            )
        return source

    def _insert_values(self, stmt: Any) -> None:
        source = self._insertable(stmt.target, values=True)
        if str(self.config.get(INSERT_VALUES_ENABLED, "true")).lower() == "false":
            raise AnalysisError(
                "The server has disabled INSERT INTO ... VALUES functionality. To enable it, restart your "
                "ksqlDB server with 'ksql.insert.into.values.enabled'=true"
            )
        # Without a column list every column is implied, header columns too (as in ksqlDB).
        headers = [c.name for c in source.schema.headers if not stmt.columns or c.name in stmt.columns]
        if headers:
            raise AnalysisError(f"Cannot insert into HEADER columns: {', '.join(headers)}")
        columns = stmt.columns or tuple(
            c.name for c in source.schema.columns if c.namespace is not Namespace.HEADERS
        )
        if stmt.columns and len(columns) != len(stmt.values):
            raise StatementPrepareError(
                f"Expected number columns and values to match: {len(columns)}, {len(stmt.values)}"
            )
        for value_expr in stmt.values:
            qualified = next((e for e in E.walk(value_expr) if isinstance(e, E.ColumnRef) and e.source), None)
            if qualified is not None:
                raise StatementPrepareError(f"'{qualified.source}' is not a valid stream/table name or alias.")
        if len(columns) != len(stmt.values):
            given = ", ".join(f"`{c}`" for c in stmt.columns or ())  # ksqlDB lists the named columns only
            raise AnalysisError(
                f"Expected a value for each column. Expected Columns: [{given}]. "
                f"Got [{', '.join(E.format_sql(v) for v in stmt.values)}]"
            )
        types = source.schema.types()
        for name in columns:
            if name not in types and name not in ("ROWTIME", "ROWPARTITION", "ROWOFFSET"):
                raise AnalysisError(f"Column name `{name}` does not exist.")
            if name in ("ROWPARTITION", "ROWOFFSET"):
                raise AnalysisError(f"Inserting into column `{name}` is not allowed.")
        row: dict[str, Any] = {}
        timestamp = 0
        from engine.expressions import coerce_value
        from engine.expressions.cast import java_string
        from engine.plan import types as T

        for name, value_expr in zip(columns, stmt.values, strict=True):
            if any(isinstance(e, E.ColumnRef) for e in E.walk(value_expr)):  # ksqlDB's GenericExpressionResolver
                raise AnalysisError(f"Unsupported column reference in insert value: {E.format_sql(value_expr)}")
            value = compile_expression(value_expr, {})({})
            value_type = infer_type(value_expr, {})
            target = T.BIGINT if name == "ROWTIME" else types[name]  # ksqlDB's ROWTIME pseudo column
            try:
                if value is not None and not _strictly_coercible(value_type, target, value):
                    raise TypeError(f"{value_type} does not coerce to {target} for INSERT VALUES")
                if not _fits_without_rounding(value, target):
                    raise ArithmeticError(f"{value} does not fit {target} without rounding")
                coerced = coerce_value(value, value_type, target) if value is not None else None
            except (ValueError, ArithmeticError, TypeError):
                got = value_type.base.value if value_type is not None else "NULL"
                shown = java_string(value, value_type)  # Java's toString of the value
                hint = _TIME_TEXT_HINTS.get(target.base.value, "") if got == "STRING" else ""
                raise AnalysisError(
                    f"Expected type {target} for field `{name}` but got {got}({shown}){hint}"
                ) from None
            if name == "ROWTIME":
                timestamp = int(coerced) if coerced is not None else timestamp
            else:
                row[name] = coerced
        missing_keys = [c.name for c in source.schema.key if c.name not in row] if source.kind == "TABLE" else []
        if missing_keys:
            raise AnalysisError(f"Value for primary key column(s) {', '.join(missing_keys)} is required for tables")
        self._check_key_schema(source)
        self._publish_row(source, self._registered_defaults(source, row), timestamp)

    def _check_key_schema(self, source: DataSource) -> None:
        """A key format of the registry: the registered key schema must be the one the insert
        writes with; a PROTOBUF value needs its subject's schema (``engine.serde.schema_register``)."""
        from engine.serde.schema_inference import SCHEMA_REGISTRY_URL
        from engine.serde.schema_register import check_insert_key_schema, check_insert_value_subject

        url = self.schema_registry_url or self.config.get(SCHEMA_REGISTRY_URL) or None
        if url is not None:
            check_insert_key_schema(str(url), source.name, source.topic, source.formats, source.schema.columns)
            check_insert_value_subject(str(url), source.topic, source.formats)

    def _registered_defaults(self, source: DataSource, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` with the defaults of the registered AVRO value schema a source names
        (VALUE_SCHEMA_ID) in the value fields it leaves null (``with_avro_defaults``)."""
        from engine.serde.formats import AVRO, SCHEMA_ID
        from engine.serde.registry import with_avro_defaults
        from engine.serde.schema_inference import SCHEMA_REGISTRY_URL, fetch_schema

        schema_id = dict(source.formats.value_properties).get(SCHEMA_ID)
        if source.formats.value_format != AVRO or schema_id is None:
            return row
        url = self.schema_registry_url or self.config.get(SCHEMA_REGISTRY_URL) or None
        registered = fetch_schema(None if url is None else str(url), source.topic, is_key=False,
                                  schema_id=int(schema_id))
        values = {c.name: row.get(c.name) for c in source.schema.columns if c.namespace is Namespace.VALUE}
        return {**row, **with_avro_defaults(values, json.loads(registered.text))}

    def insert_row(self, target: str, row: Mapping[str, Any], timestamp: int = 0) -> None:
        """Write one row (engine values by column name; missing columns are null) to a source's topic."""
        source = self._insertable(target)
        headers = [c.name for c in source.schema.headers if c.name in row]
        if headers:
            raise AnalysisError(f"Cannot insert into HEADER columns: {', '.join(headers)}")
        self._publish_row(source, row, timestamp)

    def _publish_row(self, source: DataSource, row: Mapping[str, Any], timestamp: int) -> None:
        from engine.builders.formats import serdes_for

        key_serde, value_serde = serdes_for(source.formats, source.schema.columns)
        key_names = [c.name for c in source.schema.key]
        value_names = [c.name for c in source.schema.columns if c.namespace is Namespace.VALUE]
        key = key_serde.serialize({n: row.get(n) for n in key_names}) if key_names else None
        value = value_serde.serialize({n: row.get(n) for n in value_names})
        self.store.publish(TopicRecord(source.topic, key, value, timestamp), TopicCodec(key_serde, value_serde))

    # ------------------------------------------------------------------ running

    def runtime(self) -> Any:
        if self._runtime is None:
            from engine.runtime.adapter import BoundedRuntime
            from engine.runtime.session import get_spark

            if not isinstance(self.store, TopicStore):
                raise InternalError("The bounded runtime runs over in-memory topics only.")
            self._runtime = BoundedRuntime(get_spark(), self.store)
        return self._runtime

    @staticmethod
    def _base_key_serde(query: QueryPlan, built: Built) -> RecordSerde | None:
        """A windowed V5 sink's key serde, whose bytes of a record's key place it; else None.

        A key format of the schema registry (AVRO, JSON_SR, PROTOBUF) has its Kafka bytes only
        with a registry's schema id, which bounded runs never register: such records keep the
        partition they came with, as before V5 (the Kafka runtime places them by their wire
        bytes)."""
        if not built.base_key_partitions:
            return None
        from engine.builders.formats import serdes_for
        from engine.serde.registry import WIRE_FORMATS

        formats = getattr(query.root, "formats", None)
        if formats is None or formats.key_format in WIRE_FORMATS:
            return None
        return serdes_for(formats, built.schema.columns)[0]

    def run(self) -> dict[str, list[TopicRecord]]:
        """Run every persistent query over all records produced; the records each sink got."""
        from engine.builders.context import BuildContext
        from engine.builders.walker import build

        runtime = self.runtime()
        outputs: dict[str, list[TopicRecord]] = {}
        for query in self._query_order():
            self._create_internal_topics(query)
            ctx = BuildContext(runtime=runtime, query_id=query.query_id, config=self.config,
                               registry_url=self.schema_registry_url)
            built = build(query.root, ctx)
            topic = self.metastore.get(query.sink)
            sink_topic = topic.topic if topic is not None else query.sink
            window = built.window.type if built.window is not None else None
            window_type = None if window is None else ("SESSION" if window == "SESSION" else "TIME")
            self.query_reports[query.query_id] = QueryReport(
                query_id=query.query_id,
                plan_text=partial(physical_plan_text, built.df),
                internal_schemas=dict(built.internal_schemas),
            )
            if query.query_id in self._create_as_queries.values():
                self._register_sink_schemas(sink_topic, query, built)
            try:
                written = runtime.write_sink(sink_topic, built.df, window_type, built.codec,
                                             base_key=self._base_key_serde(query, built))
            except Exception as exc:
                cause = query_failure_cause(exc)
                if cause is None:
                    raise
                # Caused by the failure, as ksqlDB's StreamsException by what stopped its thread.
                raise ExecutionError(f"Query {query.query_id} failed: {query_failure_in(exc)}") from cause
            outputs.setdefault(sink_topic, []).extend(written)
        ordered: dict[str, list[TopicRecord]] = {}
        for topic_name in outputs:
            seqs = {id(s.record): s.seq for s in runtime.store.records.get(topic_name, [])}
            ordered[topic_name] = sorted(outputs[topic_name], key=lambda r: seqs.get(id(r), ()))
        self._outputs = ordered
        return ordered

    def _register_sink_schemas(self, topic: str, query: QueryPlan, built: Built) -> None:
        """Register the key and value schemas of a CREATE ... AS SELECT sink in a schema
        registry format under ``<topic>-key`` and ``<topic>-value``, as ksqlDB registers a
        sink's schemas when it creates it (and a Kafka runtime's serializers with the first
        record). A format naming a schema id writes that registered schema: nothing to register.
        A registry that refuses a schema leaves the subject as it was: the run goes on, as a
        bounded run writes no bytes with it."""
        from engine.builders.formats import serdes_for
        from engine.serde.formats import SCHEMA_ID
        from engine.serde.registry import WireSerde, registry_client, wire_serde
        from engine.serde.schema_inference import SCHEMA_REGISTRY_URL

        url = self.schema_registry_url or self.config.get(SCHEMA_REGISTRY_URL) or None
        formats = getattr(query.root, "formats", None)
        if url is None or formats is None:
            return
        for serde in serdes_for(formats, built.schema.columns):
            if serde is None or serde.format.get(SCHEMA_ID) is not None:
                continue
            wire = wire_serde(serde, topic, str(url))
            if not isinstance(wire, WireSerde) or wire.format.name not in ("AVRO", "JSON_SR", "PROTOBUF"):
                continue
            from confluent_kafka.schema_registry import Schema

            schema_type = {"AVRO": "AVRO", "JSON_SR": "JSON", "PROTOBUF": "PROTOBUF"}[wire.format.name]
            try:
                registry_client(str(url)).register_schema(wire.subject, Schema(wire.schema_text(), schema_type))
            except Exception:  # noqa: BLE001 - see the docstring
                continue

    def _create_internal_topics(self, query: QueryPlan) -> None:
        """Create the repartition and changelog topics ksqlDB's topology of ``query`` has,
        by ksqlDB's names and formats (empty: the state stays in Spark), as a bounded run
        of ksqlDB's test runner shows them."""
        prefix = application_id(self.service_id, query.query_id,
                                str(self.config.get(PERSISTENT_PREFIX, DEFAULT_PERSISTENT_PREFIX)))
        known = self.store.topics
        for topic in internal_topics(query, self.config):
            name = f"{prefix}-{topic.suffix}"
            f = topic.formats
            source = known.get(topic.partitions_of)
            self.store.ensure(
                TopicInfo(name, partitions=source.partitions if source is not None else 1,
                          key_format=f.key_format, value_format=f.value_format)
            )
            window = topic.window
            self._internal_formats[name] = (
                FormatDescription(
                    f.key_format, dict(f.key_properties), f.key_features,
                    window_type=None if window is None else window.type,
                    window_size_ms=None if window is None or window.type == "SESSION" else window.size_ms,
                ),
                FormatDescription(f.value_format, dict(f.value_properties), f.value_features),
            )

    def internal_topic_formats(self) -> dict[str, tuple[FormatDescription, FormatDescription]]:
        """Key and value formats of the internal topics created so far, by topic name."""
        return dict(self._internal_formats)

    def restore(self, plan: StatementPlan) -> None:
        """Apply a saved statement plan (never re-planned) and count its query id as used
        (a replacement reuses the id of the query it replaces: no new id is counted)."""
        new_query = plan.query is not None and plan.query.query_id not in self.queries
        self.execute_plan(plan, check_upgrade=False)
        if new_query or _numbers_a_query(plan):
            self._query_counter += 1

    def query_order(self) -> list[QueryPlan]:
        """Queries in creation order, except that each runs after the queries writing its inputs."""
        return self._query_order()

    def _query_order(self) -> list[QueryPlan]:
        """Queries in creation order, except that each runs after the queries writing its inputs."""
        topic_of = {s.name: s.topic for s in self.metastore.all()}
        writers: dict[str, set[str]] = {}
        for q in self.queries.values():
            writers.setdefault(topic_of.get(q.sink, q.sink), set()).add(q.query_id)
        deps = {
            q.query_id: {
                w for s in q.sources for w in writers.get(topic_of.get(s, s), ()) if w != q.query_id
            }
            for q in self.queries.values()
        }
        order: list[str] = []
        pending = list(self.queries)
        while pending:
            ready = next((qid for qid in pending if deps[qid] <= set(order)), pending[0])
            order.append(ready)  # on a cycle, fall back to creation order
            pending.remove(ready)
        return [self.queries[qid] for qid in order]

    # ------------------------------------------------------------------ inspection

    def source(self, name: str) -> SourceInfo | None:
        source = self.metastore.get(name)
        return None if source is None else _source_info(source)

    def sources(self) -> list[SourceInfo]:
        return [_source_info(s) for s in self.metastore.all()]

    def close(self) -> None:
        self.queries.clear()


def topics_declared_by(text: str, default_partitions: int = 1) -> list[tuple[str, int]]:
    """(topic, partitions) named by the CREATE STREAM/TABLE statements of ``text`` (their
    PARTITIONS, else ``default_partitions``).

    Tools that host the engine over in-memory topics (the QTT harness, ``kspark run``)
    create these up front, as ksqlDB's test runner does. Text that does not parse yields
    nothing here: executing it reports the error.
    """
    try:
        parsed = parse(text)
    except KsqlError:
        return []
    found: list[tuple[str, int]] = []
    for p in parsed:
        stmt = p.statement
        if isinstance(stmt, ast.CreateSource):
            topic = stmt.properties.get("KAFKA_TOPIC")
            if isinstance(topic, str):
                partitions = str(stmt.properties.get("PARTITIONS", default_partitions))
                found.append((topic, int(partitions) if partitions.isdigit() else default_partitions))
    return found


def _source_info(source: DataSource) -> SourceInfo:
    f = source.formats
    window = source.window_info
    return SourceInfo(
        name=source.name,
        kind=source.kind,
        schema=source.schema,
        topic=source.topic,
        key_format=FormatDescription(
            f.key_format,
            dict(f.key_properties),
            f.key_features,
            window_type=window.type if window else None,
            window_size_ms=window.size_ms if window else None,
        ),
        value_format=FormatDescription(f.value_format, dict(f.value_properties), f.value_features),
        is_source=source.is_source,
    )


__all__ = ["KsqlEngine", "KsqlError"]


INSERT_VALUES_ENABLED = "ksql.insert.into.values.enabled"
READ_ONLY_TOPICS = "ksql.readonly.topics"
HIDDEN_TOPICS = "ksql.hidden.topics"
# ksqlDB's default: Confluent's internal topics, the registry's, Kafka's and Kafka Connect's own.
DEFAULT_HIDDEN_TOPICS = ("_confluent.*,__confluent.*,_schemas,__consumer_offsets,__transaction_state,"
                         "connect-configs,connect-offsets,connect-status,connect-statuses")
CREATE_OR_REPLACE_ENABLED = "ksql.create.or.replace.enabled"
INHERIT_SOURCE_REPLICAS = "ksql.create.topic.inherit.source.replicas.enabled"
DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000  # Kafka's retention.ms default, ksqlDB's when a source gives none
SOURCE_TABLE_MATERIALIZATION_ENABLED = "ksql.source.table.materialization.enabled"
# The prefixes of the query ids ksqlDB generates, which an INSERT INTO's QUERY_ID may not take.
RESERVED_QUERY_ID_PREFIXES = ("INSERTQUERY_", "CTAS_", "CSAS_", "CST_")

# ksqlDB's default ksql.readonly.topics: Confluent's, Kafka's and Kafka Connect's own topics.
DEFAULT_READ_ONLY_TOPICS = (
    "_confluent.*,__confluent.*,_schemas,__consumer_offsets,__transaction_state,connect-configs,"
    "connect-offsets,connect-status,connect-statuses"
)


def _numbers_a_query(plan: StatementPlan | None) -> bool:
    """A CREATE SOURCE TABLE: ksqlDB materializes it with a query of its own (``CST_<name>_<n>``),
    which takes the next query number; kspark serves the table without one but numbers the
    queries after it as ksqlDB does."""
    return plan is not None and isinstance(plan.command, CreateTableCommand) and plan.command.is_source


def _config_flag(config: Mapping[str, Any], name: str, default: bool = True) -> bool:
    value = config.get(name, default)
    return value.strip().lower() == "true" if isinstance(value, str) else bool(value)


def _is_read_only_topic(topic: str, config: Mapping[str, Any], service_id: str) -> bool:
    """Whether statements may not write ``topic`` (ksqlDB's read-only topics): the processing
    log's topic, ksqlDB's internal topics (``_confluent-ksql-...``) and the patterns of
    ``ksql.readonly.topics``."""
    import re

    log_topic = str(config.get("ksql.logging.processing.topic.name", "") or f"{service_id}ksql_processing_log")
    return _matches_reserved(topic, [re.escape(log_topic)], config.get(READ_ONLY_TOPICS, DEFAULT_READ_ONLY_TOPICS))


def is_hidden_topic(topic: str, config: Mapping[str, Any]) -> bool:
    """Whether LIST TOPICS leaves ``topic`` out (ksqlDB's hidden topics; LIST ALL TOPICS shows
    them): ksqlDB's internal topics (``_confluent-ksql-...``, kspark's too) and the patterns of
    ``ksql.hidden.topics`` (by default Confluent's, the registry's, Kafka's and Connect's own)."""
    return _matches_reserved(topic, [], config.get(HIDDEN_TOPICS, DEFAULT_HIDDEN_TOPICS))


def _matches_reserved(topic: str, names: list[str], configured: Any) -> bool:
    """Whether ``topic`` is one of ``names`` (patterns), an internal topic, or matches a pattern of
    the LIST config ``configured`` (a list, or comma-separated text)."""
    import re

    patterns = configured if isinstance(configured, list | tuple) else str(configured).split(",")
    alternatives = [*names, "_confluent-ksql-.*", *(p.strip() for p in patterns if p.strip())]
    try:
        return re.fullmatch("|".join(alternatives), topic) is not None
    except re.error:
        return False


# ksqlDB's DefaultSqlValueCoercer.STRICT, the coercions INSERT VALUES allows between base types
# (besides a type to itself and NULL to any type): numbers widen, text reads as a time or bytes.
_STRICT_COERCIONS = frozenset({
    ("INTEGER", "BIGINT"), ("INTEGER", "DECIMAL"), ("INTEGER", "DOUBLE"),
    ("BIGINT", "DECIMAL"), ("BIGINT", "DOUBLE"), ("DECIMAL", "DOUBLE"),
    ("STRING", "TIMESTAMP"), ("STRING", "TIME"), ("STRING", "DATE"), ("STRING", "BYTES"),
})


def _strictly_coercible(source: Any, target: Any, value: Any = ...) -> bool:
    """Whether INSERT VALUES may write a value of type ``source`` to a column of type ``target``
    (ksqlDB's strict coercer): no narrowing (a BIGINT or a DECIMAL into an INTEGER), no text
    read as a number or a BOOLEAN, nothing written as text; containers element by element, a
    struct by the fields both have (the value's other fields are dropped, missing ones NULL).
    ``value``, where given, is the value itself: a NULL goes anywhere, as ksqlDB coerces values,
    whatever type the literal's typing gave it (a struct's bare NULL field is typed STRING)."""
    from engine.plan import types as T

    if source is None or value is None:
        return True
    if isinstance(source, T.Array) and isinstance(target, T.Array):
        return _strictly_coercible(source.item, target.item)
    if isinstance(source, T.Map) and isinstance(target, T.Map):
        return _strictly_coercible(source.key, target.key) and _strictly_coercible(source.value, target.value)
    if isinstance(source, T.Struct) and isinstance(target, T.Struct):
        fields = {f.name: f.type for f in source.fields}
        values = value if isinstance(value, dict) else {}
        return all(_strictly_coercible(fields[f.name], f.type, values.get(f.name, ...))
                   for f in target.fields if f.name in fields)
    pair = (source.base.value, target.base.value)
    if pair[0] == pair[1]:
        return pair[0] not in ("ARRAY", "MAP", "STRUCT")
    return pair in _STRICT_COERCIONS


def _fits_without_rounding(value: Any, target: Any) -> bool:
    """Whether an INSERT VALUES number keeps its digits in a DECIMAL column: ksqlDB's coercion
    refuses a value it would have to round to the column's scale (1.456 into DECIMAL(4, 2))."""
    import decimal

    from engine.plan import types as T

    if not isinstance(target, T.Decimal) or isinstance(value, bool) or not isinstance(value, int | decimal.Decimal):
        return True
    with decimal.localcontext() as ctx:
        ctx.prec = 1000
        exponent = decimal.Decimal(value).normalize().as_tuple().exponent
    return not isinstance(exponent, int) or exponent >= -target.scale
