"""ksqlDB's REST entities, as JSON values (what ``/ksql`` answers), built from the engine's objects.

Every entity carries ``@type``, ``statementText`` and ``warnings``, as ksqlDB's
``KsqlEntity`` subclasses serialise. Nothing here knows HTTP: the service returns these
values and the HTTP layer writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.hosting.query_metrics import Stat, format_stats
from engine.metastore import DataSource
from engine.plan import types as T
from engine.plan.schema import Column, Namespace

# Error codes of ksqlDB's REST API (io.confluent.ksql.rest.Errors).
ERROR_BAD_REQUEST = 40000
ERROR_BAD_STATEMENT = 40001
ERROR_QUERY_ENDPOINT = 40002
ERROR_NOT_FOUND = 40400
ERROR_REQUEST_TIMEOUT = 40800
ERROR_SERVER_ERROR = 50000
ERROR_NOT_READY = 50300
# The codes ksqlDB answers with a statement_error (KsqlStatementErrorMessage, naming the
# statement); its other codes come as a generic_error (KsqlErrorMessage).
STATEMENT_ERROR_CODES = frozenset({ERROR_BAD_STATEMENT, ERROR_QUERY_ENDPOINT, ERROR_SERVER_ERROR})


@dataclass(frozen=True, slots=True)
class CommandStatus:
    """The state of a command (``QUEUED``, ``EXECUTING``, ``SUCCESS``, ``ERROR``, ...)."""

    status: str
    message: str
    query_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message, "queryId": self.query_id}


def _entity(kind: str, statement_text: str, **fields: Any) -> dict[str, Any]:
    return {"@type": kind, "statementText": statement_text, **fields, "warnings": []}


def current_status(
    statement_text: str, command_id: str, status: CommandStatus, sequence: int
) -> dict[str, Any]:
    """``currentStatus``: a statement written to the command topic and what executing it did."""
    return _entity(
        "currentStatus",
        statement_text,
        commandId=command_id,
        commandStatus=status.to_json(),
        commandSequenceNumber=sequence,
    )


def _format(source: DataSource, key: bool) -> str:
    return source.formats.key_format if key else source.formats.value_format


def source_list(statement_text: str, kind: str, sources: Iterable[DataSource]) -> dict[str, Any]:
    """``streams`` or ``tables``: LIST STREAMS / LIST TABLES."""
    items = [
        {
            "type": source.kind,
            "name": source.name,
            "topic": source.topic,
            "keyFormat": _format(source, True),
            "valueFormat": _format(source, False),
            "isWindowed": source.window_info is not None,
        }
        for source in sorted(sources, key=lambda s: s.name)
        if source.kind == kind
    ]
    plural = "streams" if kind == "STREAM" else "tables"
    return _entity(plural, statement_text, **{plural: items})


@dataclass(frozen=True, slots=True)
class RunningQueryInfo:
    """A persistent query as LIST QUERIES shows it."""

    query_id: str
    statement_text: str
    sink: str
    sink_topic: str
    state: str  # RUNNING, ERROR, UNRESPONSIVE (no live owner), PENDING (queries not run)
    owner: str | None = None  # the server running it (its HOST:PORT), None while it moves
    query_type: str = "PERSISTENT"  # PUSH: a push query being streamed (no sink)
    errors: tuple[dict[str, Any], ...] = ()  # its latest failures on this server (``query_error``)


# ksqlDB's error classifiers (its QueryErrorClassifier implementations) call these the user's:
# a missing topic or subject, an authorization refusal, a record that does not deserialize.
_USER_ERRORS = ("does not exist", "UNKNOWN_TOPIC", "UnknownTopicOrPartition", "not authorized", "Authorization",
                "TOPIC_AUTHORIZATION_FAILED", "Subject not found", "under subject", "deserializ")


def query_error(message: str, timestamp_ms: int) -> dict[str, Any]:
    """ksqlDB's ``QueryError`` of a failure: when, its message, and its type (``USER`` for what
    ksqlDB's classifiers call the user's, else ``UNKNOWN``)."""
    kind = "USER" if any(marker in message for marker in _USER_ERRORS) else "UNKNOWN"
    return {"timestamp": timestamp_ms, "errorMessage": message, "type": kind}


def queries_list(statement_text: str, queries: Sequence[RunningQueryInfo]) -> dict[str, Any]:
    """``queries``: LIST QUERIES. ``owner`` and ``ksqlHostQueryStatus`` (ksqlDB's per-host
    state map, as in its query descriptions) name the server running each query; ksqlDB's
    clients ignore fields they do not know."""
    items = [
        {
            "queryString": q.statement_text,
            "sinks": [q.sink] if q.sink else [],
            "sinkKafkaTopics": [q.sink_topic] if q.sink_topic else [],
            "id": q.query_id,
            "statusCount": {q.state: 1},
            "queryType": q.query_type,
            "state": q.state,
            "owner": q.owner,
            "ksqlHostQueryStatus": {q.owner: q.state} if q.owner is not None else {},
        }
        for q in queries
    ]
    return _entity("queries", statement_text, queries=items)


def topics_list(statement_text: str, topics: Mapping[str, int]) -> dict[str, Any]:
    """``kafka_topics``: LIST TOPICS (of the topics given: the caller leaves out hidden ones)."""
    items = [{"name": name, "replicaInfo": [1] * partitions} for name, partitions in sorted(topics.items())]
    return _entity("kafka_topics", statement_text, topics=items)


@dataclass(frozen=True, slots=True)
class TopicConsumers:
    """A topic as LIST TOPICS EXTENDED shows it: partitions, consumers and consumer groups."""

    partitions: int
    consumer_count: int = 0
    consumer_group_count: int = 0


def topics_list_extended(statement_text: str, topics: Mapping[str, TopicConsumers]) -> dict[str, Any]:
    """``kafka_topics_extended``: LIST TOPICS EXTENDED (ksqlDB's ``KafkaTopicInfoExtended``), of the
    topics given."""
    items = [
        {"name": name, "replicaInfo": [1] * topic.partitions, "consumerCount": topic.consumer_count,
         "consumerGroupCount": topic.consumer_group_count}
        for name, topic in sorted(topics.items())
    ]
    return _entity("kafka_topics_extended", statement_text, topics=items)


def terminate_query(statement_text: str, query_id: str) -> dict[str, Any]:
    """``terminate_query``: TERMINATE of a push query (persistent ones answer ``currentStatus``)."""
    return _entity("terminate_query", statement_text, queryId=query_id, wasTerminated=True)


# ksqlDB's PropertiesList: the properties SET may change per query, and those ALTER SYSTEM may.
QUERY_LEVEL_PROPERTIES = frozenset({
    "auto.offset.reset", "buffered.records.per.partition", "cache.max.bytes.buffering",
    "ksql.fail.on.deserialization.error", "ksql.cast.strings.preserve.nulls", "ksql.nested.error.set.null",
    "ksql.query.retry.backoff.max.ms", "ksql.query.pull.max.allowed.offset.lag",
    "ksql.query.pull.table.scan.enabled", "ksql.timestamp.throw.on.invalid", "max.task.idle.ms", "task.timeout.ms",
})
MUTABLE_SYSTEM_PROPERTIES = frozenset({
    "max.poll.records", "max.poll.interval.ms", "session.timeout.ms", "heartbeat.interval.ms", "fetch.min.bytes",
    "fetch.max.bytes", "fetch.max.wait.ms", "metadata.max.age.ms", "max.partition.fetch.bytes", "batch.size",
    "linger.ms", "delivery.timeout.ms", "max.request.size", "max.block.ms", "buffer.memory", "compression.type",
    "acceptable.recovery.lag", "commit.interval.ms", "max.warmup.replicas", "num.standby.replicas", "poll.ms",
    "probing.rebalance.interval.ms", "processing.guarantee", "window.size.ms",
})


def _plain(name: str) -> str:
    """A property's name as Kafka Streams reads it (``ksql.streams.`` and client prefixes gone)."""
    from engine.server.properties import canonical_name

    return canonical_name(name)[0]


def properties_list(
    statement_text: str, properties: Mapping[str, Any], overridden: Mapping[str, Any]
) -> dict[str, Any]:
    """``properties``: LIST PROPERTIES (the server's, then the request's overrides)."""
    merged = {**properties, **overridden}
    items = [
        {"name": name, "scope": "KSQL" if name.startswith("ksql.") else "STREAMS", "value": str(value),
         "level": "QUERY" if _plain(name) in QUERY_LEVEL_PROPERTIES else "SERVER",
         "editable": _plain(name) in QUERY_LEVEL_PROPERTIES | MUTABLE_SYSTEM_PROPERTIES}
        for name, value in sorted(merged.items())
    ]
    return _entity(
        "properties",
        statement_text,
        properties=items,
        overwrittenProperties=sorted(overridden),
        defaultProperties=[],
    )


def schema_info(sql_type: T.SqlType) -> dict[str, Any]:
    """ksqlDB's ``SchemaInfo`` of a type: base type name, struct fields, member schema."""
    fields = None
    member = None
    parameters: dict[str, Any] = {}
    if isinstance(sql_type, T.Struct):
        fields = [{"name": f.name, "schema": schema_info(f.type)} for f in sql_type.fields]
    elif isinstance(sql_type, T.Array):
        member = schema_info(sql_type.item)
    elif isinstance(sql_type, T.Map):
        member = schema_info(sql_type.value)
    elif isinstance(sql_type, T.Decimal):
        parameters = {"precision": sql_type.precision, "scale": sql_type.scale}
    info: dict[str, Any] = {"type": sql_type.base.value, "fields": fields, "memberSchema": member}
    if parameters:
        info["parameters"] = parameters
    return info


def field_info(column: Column) -> dict[str, Any]:
    info: dict[str, Any] = {"name": column.name, "schema": schema_info(column.type)}
    if column.namespace is Namespace.KEY:
        info["type"] = "KEY"
    elif column.namespace is Namespace.HEADERS:
        info["type"] = "HEADER"
        if column.header_key is not None:
            info["headerKey"] = column.header_key
    return info


def source_description(
    source: DataSource,
    *,
    read_queries: Sequence[RunningQueryInfo],
    write_queries: Sequence[RunningQueryInfo],
    extended: bool,
    partitions: int,
    statistics: Sequence[Stat] = (),
    error_stats: Sequence[Stat] = (),
    host: str = "",
) -> dict[str, Any]:
    """ksqlDB's ``SourceDescription`` (the body of ``sourceDescription``); ``statistics`` and
    ``error_stats`` are the topic's figures, formatted as ksqlDB formats them (EXTENDED only)."""

    def query(q: RunningQueryInfo) -> dict[str, Any]:
        return {
            "queryString": q.statement_text,
            "sinks": [q.sink],
            "sinkKafkaTopics": [q.sink_topic],
            "id": q.query_id,
            "statusCount": {q.state: 1},
            "queryType": "PERSISTENT",
            "state": q.state,
        }

    window = source.window_info
    timestamp = source.timestamp_column.column if source.timestamp_column is not None else ""
    return {
        "name": source.name,
        "windowType": window.type if window is not None else None,
        "readQueries": [query(q) for q in read_queries],
        "writeQueries": [query(q) for q in write_queries],
        "fields": [field_info(c) for c in source.schema.columns],
        "type": source.kind,
        "timestamp": timestamp,
        "statistics": format_stats(statistics, "last-message") if extended else "",
        "errorStats": format_stats(error_stats, "last-failed") if extended else "",
        "extended": extended,
        "keyFormat": source.formats.key_format,
        "valueFormat": source.formats.value_format,
        "topic": source.topic,
        "partitions": partitions if extended else 0,
        "replication": 1 if extended else 0,
        "statement": source.sql,
        "queryOffsetSummaries": [],
        "sourceConstraints": [],
        "clusterStatistics": [_host_stat(stat, host) for stat in statistics] if extended else [],
        "clusterErrorStats": [_host_stat(stat, host) for stat in error_stats] if extended else [],
    }


def _host_stat(stat: Stat, host: str) -> dict[str, Any]:
    """ksqlDB's ``QueryHostStat``: one statistic with the host that measured it."""
    return {"name": stat.name, "host": host, "value": stat.value, "timestamp": stat.timestamp}


def source_description_entity(statement_text: str, description: dict[str, Any]) -> dict[str, Any]:
    """``sourceDescription``: DESCRIBE source [EXTENDED]."""
    return _entity("sourceDescription", statement_text, sourceDescription=description)


def source_descriptions_entity(statement_text: str, descriptions: list[dict[str, Any]]) -> dict[str, Any]:
    """``source_descriptions``: LIST STREAMS/TABLES EXTENDED, DESCRIBE STREAMS/TABLES."""
    return _entity("source_descriptions", statement_text, sourceDescriptions=descriptions)


def statement_error(
    message: str, statement_text: str, entities: Sequence[Any] = (), code: int = ERROR_BAD_STATEMENT
) -> dict[str, Any]:
    """``statement_error``: a statement the server refused (HTTP 400 unless said otherwise)."""
    return {
        "@type": "statement_error",
        "error_code": code,
        "message": message,
        "statementText": statement_text,
        "entities": list(entities),
    }


def generic_error(code: int, message: str) -> dict[str, Any]:
    """``generic_error``: a request the server refused before any statement ran."""
    return {"@type": "generic_error", "error_code": code, "message": message}


# ---------------------------------------------------------------- functions, types, EXPLAIN

# ksqlDB's function categories, by the library module a function lives in.
_CATEGORIES = {
    "lib_math": "MATHEMATICAL",
    "lib_string": "STRING",
    "lib_datetime": "DATE / TIME",
    "lib_json": "JSON",
    "lib_collections": "ARRAY / MAP",
    "lib_lambda": "LAMBDA",
    "lib_url": "URL",
    "lib_bytes": "BYTES",
}


def function_category(signature: Any) -> str:
    """ksqlDB's category of a function: AGGREGATE, TABLE, or its scalar family (OTHER)."""
    kind = signature.kind.name
    if kind in ("AGGREGATE", "TABLE"):
        return kind
    module = str(getattr(signature.impl, "__module__", "")).rsplit(".", 1)[-1]
    return _CATEGORIES.get(module, "OTHER")


def function_names(statement_text: str, signatures_by_name: Mapping[str, Sequence[Any]]) -> dict[str, Any]:
    """``function_names``: LIST/SHOW FUNCTIONS (name, SCALAR/AGGREGATE/TABLE, category)."""
    items = [
        {"name": name, "type": sigs[0].kind.name, "category": function_category(sigs[0])}
        for name, sigs in sorted(signatures_by_name.items())
        if sigs
    ]
    return _entity("function_names", statement_text, functions=items)


def _return_type(signature: Any) -> str:
    returns = signature.returns
    return str(returns) if isinstance(returns, T.SqlType) else "ANY"


def _argument_names(signature: Any) -> list[str]:
    import inspect

    try:
        names = [
            p.name for p in inspect.signature(signature.impl).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        ]
    except (TypeError, ValueError):
        return [""] * len(signature.params)
    return names if len(names) == len(signature.params) else [""] * len(signature.params)


def describe_function(statement_text: str, name: str, signatures: Sequence[Any]) -> dict[str, Any]:
    """``describe_function``: DESCRIBE FUNCTION, one entry per overload."""
    overloads = []
    for sig in signatures:
        names = _argument_names(sig)
        last = len(sig.params) - 1
        arguments = [
            {"name": arg_name, "type": str(param), "description": "",
             "isVariadic": bool(sig.variadic and index == last)}
            for index, (arg_name, param) in enumerate(zip(names, sig.params, strict=True))
        ]
        overloads.append({"arguments": arguments, "returnType": _return_type(sig), "description": sig.description})
    first = signatures[0]
    return _entity(
        "describe_function",
        statement_text,
        name=name.upper(),
        description=first.description,
        author="kspark",
        version="",
        path="internal",
        functions=overloads,
        type=first.kind.name,
    )


def warning_entity(statement_text: str, message: str) -> dict[str, Any]:
    """``warning_entity``: a statement that did nothing, and why (ksqlDB's ``WarningEntity``)."""
    return _entity("warning_entity", statement_text, message=message)


def variables_list(statement_text: str, variables: Mapping[str, str]) -> dict[str, Any]:
    """``variables``: SHOW VARIABLES, the session's variables (the request's and its DEFINEs)."""
    return _entity("variables", statement_text,
                   variables=[{"name": name, "value": value} for name, value in variables.items()])


def type_list(statement_text: str, types: Mapping[str, T.SqlType]) -> dict[str, Any]:
    """``type_list``: LIST/SHOW TYPES, the custom types by name with their schema."""
    return _entity("type_list", statement_text, types={name: schema_info(t) for name, t in sorted(types.items())})


def execution_plan_text(root: Any) -> str:
    """A query's step DAG as indented lines, the sink first (the shape of ksqlDB's executionPlan)."""
    lines: list[str] = []

    def visit(step: Any, depth: int) -> None:
        lines.append("\t" * depth + f" > [ {step.TYPE} ] | ctx: {step.ctx}")
        for child in step.inputs().values():
            visit(child, depth + 1)

    visit(root, 0)
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, slots=True)
class QueryDescription:
    """What EXPLAIN tells of a query (persistent, or a statement planned but not run)."""

    query_id: str
    statement_text: str
    fields: Sequence[Column]
    sources: Sequence[str]
    sinks: Sequence[str]
    sink_topics: Sequence[str]
    execution_plan: str
    query_type: str  # PERSISTENT or PUSH
    state: str | None
    window_type: str | None = None
    overridden_properties: Mapping[str, Any] | None = None
    host: str | None = None
    errors: Sequence[Mapping[str, Any]] = ()  # queryErrors (``query_error``)


def query_description(statement_text: str, query: QueryDescription) -> dict[str, Any]:
    """``queryDescription``: EXPLAIN query id, or EXPLAIN statement."""
    return _entity("queryDescription", statement_text, queryDescription=query_description_value(query))


def query_descriptions(statement_text: str, queries: Sequence[QueryDescription]) -> dict[str, Any]:
    """``query_descriptions``: SHOW QUERIES EXTENDED (ksqlDB's ``QueryDescriptionList``)."""
    return _entity("query_descriptions", statement_text,
                   queryDescriptions=[query_description_value(q) for q in queries])


def query_description_value(query: QueryDescription) -> dict[str, Any]:
    """ksqlDB's ``QueryDescription`` of a query."""
    return {
        "id": query.query_id,
        "statementText": query.statement_text,
        "windowType": query.window_type,
        "fields": [field_info(c) for c in query.fields],
        "sources": list(query.sources),
        "sinks": list(query.sinks),
        "sinkKafkaTopics": list(query.sink_topics),
        "topology": query.execution_plan,
        "executionPlan": query.execution_plan,
        "overriddenProperties": dict(query.overridden_properties or {}),
        "ksqlHostQueryStatus": {query.host: query.state} if query.host and query.state else {},
        "queryType": query.query_type,
        "queryErrors": [dict(e) for e in query.errors],
        "tasksMetadata": [],
        "state": query.state,
    }
