"""Plans statements: DDL commands and persistent queries (upper layer).

``Planner`` turns parsed statements into ``StatementPlan`` values. It reads the metastore
and the known topics but changes neither: the engine applies the plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.analysis.properties import WithProperties
from engine.analysis.properties import duration_ms as _duration_ms
from engine.analysis.query import (
    EMIT_FINAL_UNWINDOWED,
    AnalyzedQuery,
    analyze_query,
    find_select,
    is_null_literal,
    rewrite,
)
from engine.analysis.scope import column_alias_generator
from engine.analysis.statement_text import format_create_as_select
from engine.data.records import TopicInfo
from engine.errors import (
    AnalysisError,
    InternalError,
    StatementPrepareError,
    TypeCheckError,
    UnsupportedFeatureError,
    UnsupportedSchemaError,
)
from engine.expressions import infer_type
from engine.metastore import DataSource, MetaStore
from engine.metastore.model import alternatives_hint
from engine.parser import ast, column_reference
from engine.plan import expr as E
from engine.plan import types as T
from engine.plan.plan import (
    AlterSourceCommand,
    CreateStreamCommand,
    CreateTableCommand,
    DropSourceCommand,
    QueryPlan,
    StatementPlan,
    TransientQueryPlan,
)
from engine.plan.query_configs import with_query_configs
from engine.plan.schema import (
    HEADERS_TYPE,
    PSEUDO_COLUMNS,
    WINDOW_BOUNDS,
    Column,
    LogicalSchema,
    Namespace,
)
from engine.plan.steps import Formats, Step, TimestampColumn, WindowInfo
from engine.planner import logical as L
from engine.planner import logical_join as LJ
from engine.planner.physical import native_steps_enabled, to_steps
from engine.serde import FormatInfo, SerdeFeatures, check_key_schema, check_value_schema
from engine.serde.formats import (
    NULLABLE_REPRESENTATION,
    PROTOBUF_FORMATS,
    SCHEMA_FULL_NAME,
    parse_delimiter,
)
from engine.serde.schema_inference import (
    INFERRING_FORMATS,
    SCHEMA_REGISTRY_URL,
    fetch_schema,
    infer_columns,
    multiple_definitions_message,
    multiple_key_columns_message,
    protobuf_type_names,
)

RESERVED_COLUMN_NAMES = frozenset({*PSEUDO_COLUMNS, *WINDOW_BOUNDS})
# Key formats that support both wrapping and unwrapping a single column, whose single key
# ksqlDB unwraps (SerdeFeaturesFactory.getKeyWrapping); PROTOBUF supports wrapping only.
WRAPPABLE_KEY_FORMATS = frozenset({"JSON", "JSON_SR", "AVRO", "PROTOBUF_NOSR"})

DEFAULT_KEY_FORMAT = "ksql.persistence.default.format.key"
DEFAULT_VALUE_FORMAT = "ksql.persistence.default.format.value"
WRAP_SINGLE_VALUES = "ksql.persistence.wrap.single.values"
OUTPUT_TOPIC_PREFIX = "ksql.output.topic.name.prefix"
SUPPRESS_ENABLED = "ksql.suppress.enabled"
SUPPRESS_DISABLED = f"Suppression is currently disabled. You can enable it by setting {SUPPRESS_ENABLED} to true"


@dataclass
class Planner:
    """Plans one statement at a time against the current metastore and topics."""

    metastore: MetaStore
    topics: Callable[[], Mapping[str, TopicInfo]]
    config: Mapping[str, Any]
    # The registry CREATE without columns reads; None: the config's ksql.schema.registry.url.
    registry_url: str | None = None

    # ------------------------------------------------------------------ DDL

    def _steps(self, node: L.LogicalNode) -> Step:
        """The step tree of a logical plan, with the config's expression semantics recorded
        on its expressions (``engine.plan.query_configs``)."""
        return with_query_configs(to_steps(node, native=native_steps_enabled(self.config)), self.config)

    def plan_create_source(self, stmt: ast.CreateSource, text: str) -> StatementPlan | None:
        """CREATE [OR REPLACE] STREAM|TABLE name (columns) WITH (...)."""
        refuse_unknown_types(stmt)
        props = WithProperties.of(stmt.properties, statement=text, create_as=False)
        _refuse_cleanup_policy(props)
        is_table = stmt.kind == "TABLE"
        existing = self.metastore.get(stmt.name)
        if stmt.or_replace and (stmt.is_source or (existing is not None and existing.is_source)):
            # ksqlDB refuses CREATE OR REPLACE SOURCE even when nothing is there to replace.
            raise AnalysisError(
                _replace_source_message(existing) if existing is not None
                else _replace_source_text(stmt.kind.lower(), stmt.name)
            )
        if existing is not None and not stmt.or_replace:
            if stmt.if_not_exists:
                return None
            raise AnalysisError(
                f"Cannot add {stmt.kind.lower()} '{stmt.name}': A "
                f"{existing.kind.lower()} with the same name already exists."
            )
        schema = self._declared_schema(stmt, is_table)
        topic = props.string("KAFKA_TOPIC")
        if topic is None:
            raise AnalysisError('Missing required property "KAFKA_TOPIC" which has no default value.')
        if topic not in self.topics() and props.integer("PARTITIONS") is None:
            raise AnalysisError(f"Kafka topic does not exist: {topic}")
        _refuse_retention(props, compacted=is_table)
        _refuse_blank_topic(topic)
        _check_value_delimiter(props, self.config.get(DEFAULT_VALUE_FORMAT))
        schema, schema_ids = self._inferred_schema(props, schema, topic)
        if not schema.columns:
            raise AnalysisError("No columns supplied.")
        if is_table and not schema.key:
            raise AnalysisError("Tables require a PRIMARY KEY. Please define the PRIMARY KEY.")
        if not schema.key and props.string("WINDOW_TYPE") is not None:
            raise AnalysisError("Windowed sources require a key column.")
        formats = self._source_formats(props, schema, stmt.name)
        if schema_ids:
            formats = _with_schema_ids(formats, schema_ids)
        ts = self._timestamp_column(props, schema)
        window = self._window_info(props)
        cls = CreateTableCommand if is_table else CreateStreamCommand
        command = cls(
            name=stmt.name,
            schema=schema,
            topic=topic,
            formats=formats,
            timestamp_column=ts,
            window_info=window,
            or_replace=stmt.or_replace,
            is_source=getattr(stmt, "is_source", False),
        )
        return StatementPlan(statement_text=text, command=command)

    def _check_join_partitions(self, node: Any, topics: Mapping[str, TopicInfo] | None = None) -> None:
        """Each join that is not on a foreign key reads inputs of as many partitions (ksqlDB
        checks it as it builds the join, from the outermost join in): a join's partitions
        are those of its right input."""
        if not isinstance(node, LJ.JoinNode):
            return
        topics = self.topics() if topics is None else topics  # one look-up of the cluster's topics
        if node.kind != LJ.FOREIGN_KEY:
            left, right = _partitions(node.left, topics), _partitions(node.right, topics)
            if left is not None and right is not None and left != right:
                left_name, right_name = _leftmost_alias(node), node.right_alias
                raise AnalysisError(
                    f"Can't join {left_name} with {right_name} since the number of partitions don't match. "
                    f"{left_name} partitions = {left}; {right_name} partitions = {right}. "
                    "Please repartition either one so that the number of partitions match."
                )
        self._check_join_partitions(node.left, topics)

    def _declared_schema(self, stmt: ast.CreateSource, is_table: bool) -> LogicalSchema:
        columns: list[Column] = []
        seen: set[str] = set()
        header_keys: set[str | None] = set()
        for el in stmt.elements:
            if el.name in RESERVED_COLUMN_NAMES:
                raise AnalysisError(
                    f"'{el.name}' is a reserved column name. You cannot use it as a name for a column."
                )
            if el.name in seen:
                raise AnalysisError(f"Duplicate column names: `{el.name}`.")
            seen.add(el.name)
            if el.constraint == "PRIMARY KEY" and not is_table:
                raise AnalysisError(
                    f"Column `{el.name}` is a 'PRIMARY KEY' column: please use 'KEY' for streams.\n"
                    "Tables have PRIMARY KEYs, which are unique and NON NULL.\n"
                    "Streams have KEYs, which have no uniqueness or NULL constraints."
                )
            if el.constraint == "KEY" and is_table:
                raise AnalysisError(
                    f"Column `{el.name}` is a 'KEY' column: please use 'PRIMARY KEY' for tables.\n"
                    "Tables have PRIMARY KEYs, which are unique and NON NULL.\n"
                    "Streams have KEYs, which have no uniqueness or NULL constraints."
                )
            if el.constraint in ("KEY", "PRIMARY KEY"):
                columns.append(Column(el.name, el.type, Namespace.KEY))
            elif el.constraint in ("HEADERS", "HEADER"):
                _check_header_type(el)
                # A HEADERS column holds every header: no header column may follow it.
                if None in header_keys:
                    raise AnalysisError("Schema already contains a HEADERS column.")
                if el.header_key is not None and el.header_key in header_keys:
                    raise AnalysisError(f"Schema already contains a HEADER('{el.header_key}') column.")
                header_keys.add(el.header_key)
                columns.append(Column(el.name, el.type, Namespace.HEADERS, el.header_key))
            else:
                columns.append(Column(el.name, el.type))
        keys = [c for c in columns if c.namespace is Namespace.KEY]
        others = [c for c in columns if c.namespace is not Namespace.KEY]
        return LogicalSchema(tuple(keys + others))

    def _inferred_schema(
        self, props: WithProperties, schema: LogicalSchema, topic: str
    ) -> tuple[LogicalSchema, dict[str, int]]:
        """``schema`` with the key and value columns a schema registry gives, where the
        statement leaves them out and the format infers them (ksqlDB's schema injector);
        also the schema ids the statement named, per ``key``/``value``."""
        key_fmt, value_fmt = self._declared_format_names(props)
        has_key = bool(schema.key)
        has_value = any(c.namespace is Namespace.VALUE for c in schema.columns)
        ids: dict[str, int] = {}
        for side, fmt, has_columns in (("KEY", key_fmt, has_key), ("VALUE", value_fmt, has_value)):
            schema_id = props.integer(f"{side}_SCHEMA_ID")
            if schema_id is None:
                continue
            if fmt not in INFERRING_FORMATS:
                raise AnalysisError(
                    f"{side}_FORMAT should support schema inference when {side}_SCHEMA_ID is provided. "
                    f"Current format is {fmt}."
                )
            if has_columns:
                raise AnalysisError(
                    f"Table elements and {side}_SCHEMA_ID cannot both exist for create statement."
                )
            ids[side.lower()] = schema_id
        infer_key = not has_key and key_fmt in INFERRING_FORMATS
        infer_value = not has_value and value_fmt in INFERRING_FORMATS
        if not infer_key and not infer_value:
            return schema, ids
        registry = self.registry_url or self.config.get(SCHEMA_REGISTRY_URL)
        keys = list(schema.key)
        values = [c for c in schema.columns if c.namespace is Namespace.VALUE]
        headers = [c for c in schema.columns if c.namespace is Namespace.HEADERS]
        if infer_key:
            keys = self._registry_columns(
                registry, topic, key_fmt, True, ids.get("key"), False, props.string("KEY_SCHEMA_FULL_NAME"),
                single_definition=True,
            )
        if infer_value:
            unwrapped = props.boolean("WRAP_SINGLE_VALUE") is False
            values = self._registry_columns(
                registry, topic, value_fmt, False, ids.get("value"), unwrapped,
                props.string("VALUE_SCHEMA_FULL_NAME"), single_definition=True,
            )
        seen: set[str] = set()
        for column in keys + values + headers:
            if column.name in seen:
                raise AnalysisError(f"Duplicate column names: `{column.name}`.")
            seen.add(column.name)
        return LogicalSchema(tuple(keys + values + headers)), ids

    @staticmethod
    def _registry_columns(
        registry: Any, topic: str | None, fmt: str | None, is_key: bool, schema_id: int | None, unwrapped: bool,
        full_name: str | None, *, single_definition: bool = False,
    ) -> list[Column]:
        """The columns of the registered schema; ``single_definition`` (a CREATE that infers
        its columns): a PROTOBUF schema of several definitions needs ``full_name``."""
        fetched = fetch_schema(str(registry) if registry else None, topic, is_key=is_key, schema_id=schema_id)
        pairs = infer_columns(
            fetched, fmt=str(fmt), topic=topic, is_key=is_key, unwrapped=unwrapped,
            keep_names=schema_id is not None, full_name=full_name, schema_id=schema_id,
        )
        if is_key and len(pairs) > 1:  # a PROTOBUF key message of several fields
            raise AnalysisError(multiple_key_columns_message(topic, schema_id, fetched.text))
        if single_definition and fmt == "PROTOBUF" and full_name is None:
            names = protobuf_type_names(fetched.text)
            if len(names) > 1:
                raise AnalysisError(multiple_definitions_message(is_key, names))
        namespace = Namespace.KEY if is_key else Namespace.VALUE
        return [Column(name, sql_type, namespace) for name, sql_type in pairs]

    def _sink_schema_ids(
        self, props: WithProperties, formats: Formats, schema: LogicalSchema, topic: str
    ) -> dict[str, int]:
        """The KEY/VALUE_SCHEMA_ID a CREATE ... AS SELECT names for its sink, each checked
        against the sink's columns as ksqlDB does: the registered schema's columns must start
        with the sink's, same names and types in the same order (more columns may follow)."""
        ids: dict[str, int] = {}
        for side, fmt, is_key in (("KEY", formats.key_format, True), ("VALUE", formats.value_format, False)):
            schema_id = props.integer(f"{side}_SCHEMA_ID")
            if schema_id is None:
                continue
            if fmt not in INFERRING_FORMATS:
                raise AnalysisError(
                    f"{side}_FORMAT should support schema inference when {side}_SCHEMA_ID is provided. "
                    f"Current format is {fmt}."
                )
            columns = (
                list(schema.key) if is_key else [c for c in schema.columns if c.namespace is Namespace.VALUE]
            )
            unwrapped = not is_key and "UNWRAP_SINGLES" in formats.value_features
            registry = self.registry_url or self.config.get(SCHEMA_REGISTRY_URL)
            # ksqlDB's messages quote the sink's topic only when the statement names it.
            registered = self._registry_columns(
                registry, props.string("KAFKA_TOPIC"), fmt, is_key, schema_id, unwrapped,
                props.string(f"{side}_SCHEMA_FULL_NAME"),
            )
            changed = [
                c for i, c in enumerate(columns)
                if i >= len(registered) or (registered[i].name, registered[i].type) != (c.name, c.type)
            ]
            if changed:
                raise AnalysisError(
                    f"The following {side.lower()} columns are changed, missing or reordered: "
                    f"[{', '.join(_column_text(c) for c in changed)}]. Schema from schema registry is "
                    f"[{', '.join(_column_text(c) for c in registered)}]"
                )
            ids[side.lower()] = schema_id
        return ids

    def _declared_format_names(self, props: WithProperties) -> tuple[str | None, str | None]:
        """The key and value format names the statement (or the config's defaults) give,
        before any column is known: ksqlDB's key default is KAFKA."""
        fmt = props.string("FORMAT")
        key_fmt = props.string("KEY_FORMAT") or fmt or self.config.get(DEFAULT_KEY_FORMAT) or "KAFKA"
        value_fmt = props.string("VALUE_FORMAT") or fmt or self.config.get(DEFAULT_VALUE_FORMAT)
        return str(key_fmt).upper(), (str(value_fmt).upper() if value_fmt is not None else None)

    def _source_formats(self, props: WithProperties, schema: LogicalSchema, name: str) -> Formats:
        fmt = props.string("FORMAT")
        key_fmt = props.string("KEY_FORMAT")
        value_fmt = props.string("VALUE_FORMAT")
        if fmt is not None and (key_fmt is not None or value_fmt is not None):
            both = "KEY_FORMAT" if key_fmt is not None else "VALUE_FORMAT"
            raise AnalysisError(
                f"Cannot supply both '{both}' and 'FORMAT' properties, as 'FORMAT' sets both key and "
                "value formats. Either use just 'FORMAT', or use 'KEY_FORMAT' and 'VALUE_FORMAT'."
            )
        if fmt is not None:
            key_fmt = value_fmt = fmt
        if value_fmt is None:
            value_fmt = self.config.get(DEFAULT_VALUE_FORMAT)
            if value_fmt is None:
                raise AnalysisError(
                    "Statement is missing the 'VALUE_FORMAT' property from the WITH clause. "
                    "Either provide one or set a default via the "
                    "'ksql.persistence.default.format.value' config."
                )
        if key_fmt is None:
            key_fmt = "NONE" if not schema.key else str(self.config.get(DEFAULT_KEY_FORMAT, "KAFKA"))
        return self._formats(props, schema, key_fmt.upper(), str(value_fmt).upper(), name=name)

    def _formats(
        self, props: WithProperties, schema: LogicalSchema, key_fmt: str, value_fmt: str,
        inherited_value_props: tuple[tuple[str, str], ...] = (),
        *,
        name: str | None = None,
    ) -> Formats:
        value_props = dict(inherited_value_props)
        if props.string("VALUE_AVRO_SCHEMA_FULL_NAME") is not None and props.string("VALUE_SCHEMA_FULL_NAME") is not None:
            raise AnalysisError(
                "Cannot supply both 'VALUE_AVRO_SCHEMA_FULL_NAME' and 'VALUE_SCHEMA_FULL_NAME' properties. "
                "Please only set 'VALUE_SCHEMA_FULL_NAME'."
            )
        delimiter = props.string("VALUE_DELIMITER")
        if delimiter is not None:
            if value_fmt != "DELIMITED":
                raise AnalysisError(
                    f"VALUE_DELIMITER is only valid with VALUE_FORMAT='DELIMITED', not '{value_fmt}'."
                )
            value_props["delimiter"] = delimiter
        key_props: dict[str, str] = {}
        key_delimiter = props.string("KEY_DELIMITER")
        if key_delimiter is not None:
            key_props["delimiter"] = key_delimiter
        for side, side_fmt, side_props in (("KEY", key_fmt, key_props), ("VALUE", value_fmt, value_props)):
            nullable = props.string(f"{side}_PROTOBUF_NULLABLE_REPRESENTATION")
            if nullable is not None:
                if side_fmt not in PROTOBUF_FORMATS:
                    raise AnalysisError(
                        f"Property {side}_PROTOBUF_NULLABLE_REPRESENTATION can only be enabled with protobuf format"
                    )
                side_props[NULLABLE_REPRESENTATION] = nullable.upper()
            full_name = props.string(f"{side}_SCHEMA_FULL_NAME")
            if side == "VALUE" and full_name is None:
                full_name = props.string("VALUE_AVRO_SCHEMA_FULL_NAME")  # the older name of the same
            if full_name is not None:
                _check_full_schema_name(side_fmt, full_name)
                if side_fmt in SCHEMA_FULL_NAME_FORMATS:
                    side_props[SCHEMA_FULL_NAME] = full_name
        if key_fmt == "AVRO" and schema.key and name is not None and SCHEMA_FULL_NAME not in key_props:
            key_props[SCHEMA_FULL_NAME] = avro_key_schema_name(name)
        value_columns = [c for c in schema.columns if c.namespace is Namespace.VALUE]
        wrap = props.boolean("WRAP_SINGLE_VALUE")
        if wrap is None and WRAP_SINGLE_VALUES in self.config:
            configured = str(self.config[WRAP_SINGLE_VALUES]).lower() == "true"
            wrap = None if configured else (False if len(value_columns) == 1 else None)
        value_features: tuple[str, ...] = ()
        if wrap is not None:
            if len(value_columns) != 1 and props.boolean("WRAP_SINGLE_VALUE") is not None:
                raise AnalysisError(
                    "'WRAP_SINGLE_VALUE' is only valid for single-field value schemas"
                )
            value_features = ("WRAP_SINGLES",) if wrap else ("UNWRAP_SINGLES",)
        key_features: tuple[str, ...] = ()
        if key_fmt in WRAPPABLE_KEY_FORMATS and len(schema.key) == 1:
            key_features = ("UNWRAP_SINGLES",)
        key_info = FormatInfo(key_fmt, key_props)
        value_info = FormatInfo(value_fmt, value_props)
        check_key_schema(key_info, list(schema.key))
        check_value_schema(value_info, value_columns, SerdeFeatures(wrap_single_value=wrap))
        return Formats(
            key_format=key_fmt,
            value_format=value_fmt,
            key_properties=tuple(sorted(key_props.items())),
            value_properties=tuple(sorted(value_props.items())),
            key_features=key_features,
            value_features=value_features,
        )

    def _timestamp_column(self, props: WithProperties, schema: LogicalSchema) -> TimestampColumn | None:
        name = props.string("TIMESTAMP")
        fmt = props.string("TIMESTAMP_FORMAT")
        if name is None:
            if fmt is not None:
                raise AnalysisError("TIMESTAMP_FORMAT is only valid together with TIMESTAMP.")
            return None
        column_name = column_reference(name)
        column = schema.find(column_name)
        if column is None:
            raise AnalysisError(
                f"The TIMESTAMP column set in the WITH clause does not exist in the schema: '{column_name}'"
            )
        base = column.type.base
        if base is T.BaseType.STRING:
            if fmt is None:
                raise AnalysisError(
                    "A String timestamp field has been specified without also specifying the timestamp_format"
                )
        elif fmt is not None:
            raise AnalysisError(
                "'TIMESTAMP_FORMAT' set in the WITH clause can only be used when the timestamp column is of type STRING."
            )
        elif base not in (T.BaseType.BIGINT, T.BaseType.TIMESTAMP):
            raise AnalysisError(
                f"Timestamp column, `{column_name}`, should be LONG(INT64), TIMESTAMP, or a "
                f"String with a timestamp_format specified."
            )
        return TimestampColumn(column=column_name, format=fmt)

    def _window_info(self, props: WithProperties) -> WindowInfo | None:
        kind = props.string("WINDOW_TYPE")
        if kind is None:
            return None
        if kind.upper() not in ("TUMBLING", "HOPPING", "SESSION"):
            raise AnalysisError(
                f"Error in WITH clause property 'WINDOW_TYPE': Unknown window type: '{kind}' \n"
                "Valid values are: SESSION, HOPPING, TUMBLING"
            )
        kind = kind.upper()
        size = props.string("WINDOW_SIZE")
        try:
            size_ms = _duration_ms(size) if size is not None else None
        except AnalysisError as exc:
            raise AnalysisError(
                f"Error in WITH clause property 'WINDOW_SIZE': {exc.reason}\nExample valid value: '10 SECONDS'"
            ) from exc
        if kind != "SESSION" and size is None:
            raise AnalysisError(
                f"{kind} windows require 'WINDOW_SIZE' to be provided in the WITH clause. "
                "For example: 'WINDOW_SIZE'='10 SECONDS'"
            )
        if kind == "SESSION" and size is not None:
            raise AnalysisError("'WINDOW_SIZE' should not be set for SESSION windows.")
        if size_ms is not None and size_ms <= 0:
            raise AnalysisError("Size must be positive")  # ksqlDB's WindowInfo
        return WindowInfo(type=kind, size_ms=size_ms)

    def plan_drop(self, stmt: ast.DropSource, text: str) -> StatementPlan | None:
        existing = self.metastore.get(stmt.name)
        # DELETE TOPIC's checks come first, as ksqlDB's topic-delete injector runs before the drop.
        if existing is None:
            if stmt.if_exists:
                return None
            if stmt.delete_topic:
                raise AnalysisError(f"Could not find source to delete topic for: {text.strip()}")
            # ksqlDB's DropSourceFactory: the statement's kind, and the sources of that kind
            # whose names differ in case only
            raise AnalysisError(
                f"{stmt.kind.capitalize()} {stmt.name} does not exist."
                + alternatives_hint(self.metastore.all(), stmt.name, stmt.kind)
            )
        if stmt.delete_topic:
            if existing.is_source:
                raise AnalysisError(f"Cannot delete topic for read-only source: {stmt.name}")
            sharing = sorted(s.name for s in self.metastore.all() if s.topic == existing.topic and s.name != existing.name)
            if sharing:
                raise AnalysisError(
                    f"Refusing to delete topic. Found other data sources ({', '.join(sharing)}) "
                    f"using topic {existing.topic}"
                )
        if existing.kind != stmt.kind:
            raise AnalysisError(
                f"Incompatible data source type is {existing.kind.lower()}, but statement was DROP {stmt.kind.lower()}"
            )
        return StatementPlan(statement_text=text, command=DropSourceCommand(name=stmt.name, kind=stmt.kind))

    def plan_alter(self, stmt: ast.AlterSource, text: str) -> StatementPlan:
        """ALTER STREAM|TABLE name ADD [COLUMN] col type, ...: new value columns, in ksqlDB's order of checks."""
        refuse_unknown_types(stmt)
        kind = stmt.kind.lower()
        existing = self.metastore.get(stmt.name)
        if existing is not None and existing.is_source:
            raise AnalysisError(
                f"Cannot alter {kind} '{stmt.name}': ALTER operations are not supported on source {kind}s."
            )
        if existing is None:
            raise AnalysisError(f"Source {stmt.name} does not exist.")
        if existing.kind != stmt.kind:
            raise AnalysisError(
                f"Incompatible data source type is {existing.kind}, but statement was ALTER {stmt.kind}"
            )
        if _is_create_as_select(existing):
            raise AnalysisError("ALTER command is not supported for CREATE ... AS statements.")
        added: list[Column] = []
        for el in stmt.columns:
            if el.name in RESERVED_COLUMN_NAMES:
                raise AnalysisError(
                    f"'{el.name}' is a reserved column name. You cannot use it as a name for a column."
                )
            if existing.schema.find(el.name) is not None or any(c.name == el.name for c in added):
                raise AnalysisError(
                    f"Cannot add column `{el.name}` to schema. A column with the same name already exists."
                )
            added.append(Column(el.name, el.type))
        command = AlterSourceCommand(name=stmt.name, kind=stmt.kind, new_columns=LogicalSchema(tuple(added)))
        return StatementPlan(statement_text=text, command=command)

    # ------------------------------------------------------------------ queries

    def _analyze(self, query: ast.Query, **options: Any) -> Any:
        """``analyze_query``; an EMIT FINAL while ``ksql.suppress.enabled`` is false is refused
        where ksqlDB's logical planner refuses it: after the analysis, before its check that
        the query is a windowed aggregation."""
        suppress_off = query.emit == "FINAL" and str(self.config.get(SUPPRESS_ENABLED, "true")).strip().lower() == "false"
        try:
            analysis = analyze_query(query, self.metastore, **options)
        except AnalysisError as exc:
            if suppress_off and str(exc) == EMIT_FINAL_UNWINDOWED:
                raise AnalysisError(SUPPRESS_DISABLED) from None
            raise
        if suppress_off:
            raise AnalysisError(SUPPRESS_DISABLED)
        return analysis

    def plan_create_as_select(
        self, stmt: ast.CreateAsSelect, text: str, query_id: str
    ) -> StatementPlan | None:
        """CREATE STREAM|TABLE name WITH (...) AS SELECT ..."""
        refuse_unknown_types(stmt)
        if stmt.query.limit is not None:  # a persistent query never ends: ksqlDB refuses LIMIT
            raise AnalysisError(f"CREATE {stmt.kind} AS SELECT statements don't support LIMIT clause.")
        props = WithProperties.of(stmt.properties, statement=text, create_as=True)
        _refuse_cleanup_policy(props)
        _refuse_retention(props, compacted=stmt.kind == "TABLE" and stmt.query.window is None)
        existing = self.metastore.get(stmt.name)
        if existing is not None and not stmt.or_replace:
            if stmt.if_not_exists:
                return None
            raise AnalysisError(
                f"Cannot add {stmt.kind.lower()} '{stmt.name}': A "
                f"{existing.kind.lower()} with the same name already exists."
            )
        if existing is not None and stmt.or_replace and existing.is_source:
            raise AnalysisError(_replace_source_message(existing))
        analysis = self._analyze(stmt.query, sink_name=stmt.name)
        if analysis.is_table != (stmt.kind == "TABLE"):
            if stmt.kind == "TABLE":
                raise AnalysisError(
                    "Invalid result type. Your SELECT query produces a STREAM. "
                    "Please use CREATE STREAM AS SELECT statement instead."
                )
            raise AnalysisError(
                "Invalid result type. Your SELECT query produces a TABLE. "
                "Please use CREATE TABLE AS SELECT statement instead."
            )
        if analysis.partition_by and any(is_null_literal(p) for p in analysis.partition_by):
            explicit = props.string("KEY_FORMAT") or props.string("FORMAT")
            if explicit is not None and explicit.upper() != "NONE":
                raise AnalysisError("Key format specified for stream without key columns.")
        projected = self._logical_query(analysis, stmt.name)
        self._check_join_partitions(analysis.from_clause.node)
        named_topic = props.string("KAFKA_TOPIC")
        if named_topic is not None:
            _refuse_blank_topic(named_topic)
        topic = named_topic or (str(self.config.get(OUTPUT_TOPIC_PREFIX, "")) + stmt.name)
        try:
            formats = self._sink_formats(props, analysis.from_clause.sources[0], projected.schema, stmt.name)
        except UnsupportedSchemaError as exc:
            # ksqlDB quotes the statement it planned, rewritten (engine.analysis.statement_text).
            raise UnsupportedSchemaError(f"{exc.reason}\nStatement: {self._planned_text(stmt, analysis)}") from None
        sink_ids = self._sink_schema_ids(props, formats, projected.schema, topic)
        if sink_ids:
            formats = _with_schema_ids(formats, sink_ids)
        ts = self._timestamp_column(props, projected.schema)
        sink = L.SinkNode(
            schema=projected.schema, is_table=projected.is_table, window=projected.window,
            input=projected, name=stmt.name, topic=topic, formats=formats, timestamp_column=ts,
        )
        cls = CreateTableCommand if analysis.is_table else CreateStreamCommand
        command = cls(
            name=stmt.name,
            schema=projected.schema,
            topic=topic,
            formats=formats,
            timestamp_column=ts,
            window_info=projected.window,
            or_replace=stmt.or_replace,
        )
        query = QueryPlan(
            query_id=query_id, sources=analysis.source_names, sink=stmt.name, root=self._steps(sink)
        )
        return StatementPlan(statement_text=text, command=command, query=query)

    def plan_insert_into(self, stmt: ast.InsertInto, text: str, query_id: str) -> StatementPlan:
        """INSERT INTO target SELECT ..."""
        refuse_unknown_types(stmt)
        if stmt.query.limit is not None:
            raise AnalysisError("INSERT INTO statements don't support LIMIT clause.")
        target = self.metastore.get(stmt.target)
        if target is None:
            raise AnalysisError(f"Source `{stmt.target}` does not exist.", node=stmt)
        # ksqlDB's order: its AST sanitizer refuses a table or a target with headers, its planner a
        # query that does not fit the target, and only then its executor a read-only target.
        if target.is_table:
            raise AnalysisError(f"INSERT INTO can only be used to insert into a stream. {target.name} is a table.")
        if target.schema.headers:
            raise AnalysisError(f"Cannot insert into {target.name} because it has header columns")
        analysis = self._analyze(stmt.query, sink_name=stmt.target)
        if analysis.is_table:
            raise AnalysisError(
                "Incompatible data sink and query result. Data sink "
                f"({target.name}) type is KSTREAM but select query result is KTABLE."
            )
        projected = self._logical_query(analysis, stmt.target)
        self._check_join_partitions(analysis.from_clause.node)
        if _comparable(projected.schema) != _comparable(target.schema):
            projected = _implicit_casts(projected, target.schema) or projected
        if _comparable(projected.schema) != _comparable(target.schema):
            raise AnalysisError(
                "Incompatible schema between results and sink.\n"
                f"Result schema is {projected.schema}\nSink schema is {target.schema}"
            )
        if target.is_source:
            raise AnalysisError(f"Cannot insert into read-only {target.kind.lower()}: {target.name}")
        sink = L.SinkNode(
            schema=target.schema, is_table=False, window=projected.window, input=projected,
            name=target.name, topic=target.topic, formats=target.formats,
            timestamp_column=target.timestamp_column,
        )
        query = QueryPlan(
            query_id=query_id, sources=analysis.source_names, sink=target.name, root=self._steps(sink)
        )
        return StatementPlan(statement_text=text, query=query)

    def plan_transient_query(self, query: ast.Query, text: str, query_id: str) -> TransientQueryPlan:
        """SELECT ... EMIT CHANGES [LIMIT n]: a push query, planned up to its projection.

        The same logical and physical planning as a persistent query, with ksqlDB's
        transient projection: the result columns are the SELECT list in order, and the key
        columns travel under hidden names (a table row's deletion shows its key).
        """
        refuse_unknown_types(query)
        if query.emit is None:
            raise UnsupportedFeatureError(
                "pull queries",
                "Pull queries (a SELECT without EMIT CHANGES) are not supported yet: "
                "add EMIT CHANGES to run a push query.",
            )
        analysis = self._analyze(query, transient=True)
        projected = self._logical_query(analysis, query_id, transient=True)
        self._check_join_partitions(analysis.from_clause.node)
        project: Any = projected
        while not isinstance(project, L.ProjectNode):
            project = getattr(project, "input", None)
            if project is None:
                raise InternalError(f"Transient query {query_id} has no projection (a bug).")
        keys = {c.name: hidden for c, hidden in zip(project.input.schema.key, project.key_names, strict=True)}
        for name, equal in key_equivalents(project.input).items():
            for other in equal:
                keys.setdefault(other, keys[name])
        # A windowed row's bounds are part of its key: a deletion shows them too.
        tombstone_keys = tuple(
            (keys.get(e.name) or (e.name if e.name in WINDOW_BOUNDS else None)) if isinstance(e, E.ColumnRef) else None
            for _, e in project.values
        )
        return TransientQueryPlan(
            query_id=query_id,
            statement_text=text,
            sources=analysis.source_names,
            root=self._steps(projected),
            schema=LogicalSchema(projected.schema.value),
            is_table=projected.is_table,
            tombstone_keys=tombstone_keys,
            limit=query.limit,
        )

    def _planned_text(self, stmt: ast.CreateAsSelect, analysis: AnalyzedQuery) -> str:
        """``stmt`` as ksqlDB prints the statement it plans (``format_create_as_select``)."""

        def columns_of(name: str) -> list[str]:
            source = self.metastore.get(name)
            if source is None:
                return []
            return [*(c.name for c in source.schema.columns), *PSEUDO_COLUMNS, *(WINDOW_BOUNDS if source.window_info else ())]

        # A `*` or `struct->*` expands to columns the select list does not name one by one.
        stars = any(isinstance(item, ast.AllColumns | ast.StructAll) for item in stmt.query.select)
        aliases = [] if stars else [s.alias for s in analysis.select]
        return format_create_as_select(stmt, columns_of, aliases)

    def _sink_formats(
        self, props: WithProperties, source: DataSource, schema: LogicalSchema, name: str
    ) -> Formats:
        fmt = props.string("FORMAT")
        key_fmt = props.string("KEY_FORMAT") or fmt
        value_fmt = props.string("VALUE_FORMAT") or fmt
        inherited: tuple[tuple[str, str], ...] = ()
        if value_fmt is None:
            value_fmt = source.formats.value_format
            if props.string("VALUE_DELIMITER") is None:
                # A source's schema id and full name name its own registered schema, never a sink's.
                inherited = tuple(
                    p for p in source.formats.value_properties if p[0] not in ("schema_id", SCHEMA_FULL_NAME)
                )
        if key_fmt is None:
            key_fmt = source.formats.key_format
            if key_fmt == "NONE" and schema.key:
                key_fmt = str(self.config.get(DEFAULT_KEY_FORMAT, "KAFKA"))
        if not schema.key:
            key_fmt = "NONE"
        return self._formats(props, schema, key_fmt.upper(), value_fmt.upper(), inherited, name=name)

    def _logical_query(self, analysis: AnalyzedQuery, sink_name: str, transient: bool = False) -> L.LogicalNode:
        node: L.LogicalNode = analysis.node
        select = list(analysis.select)
        if analysis.where is not None:
            node = L.FilterNode(
                schema=node.schema, is_table=node.is_table, window=node.window,
                input=node, predicate=analysis.where,
                # A push query of a table's rows (no aggregation) shows a miss only as the
                # deletion of a row it showed.
                old_values=transient and node.is_table and analysis.aggregation is None,
            )
        if analysis.aggregation is not None:
            from engine.planner.logical_aggregate import finish_aggregation, plan_aggregation

            node = plan_aggregation(node, analysis.aggregation, analysis.from_clause.sources[0].formats)
            projected = self._project(node, select, sink_name, False, transient)
            return finish_aggregation(
                dataclasses.replace(projected, ctx="Aggregate/Project"), analysis.aggregation
            )
        if analysis.table_functions:
            functions: list[tuple[str, E.FunctionCall]] = []
            for i, call in enumerate(dict.fromkeys(analysis.table_functions)):
                functions.append((f"KSQL_SYNTH_{i}", call))
            columns = node.columns()
            extra = tuple(
                Column(alias, _type_of(call, columns, alias)) for alias, call in functions
            )
            node = L.FlatMapNode(
                schema=LogicalSchema(node.schema.columns + extra), is_table=False,
                window=node.window, input=node, functions=tuple(functions),
            )
            replacements: dict[E.Expr, E.Expr] = {call: E.ColumnRef(alias) for alias, call in functions}
            select = [
                type(s)(s.alias, rewrite(s.expression, lambda e: replacements.get(e)))
                for s in select
            ]
        if analysis.partition_by is not None:
            node, select = self._repartition(node, analysis, select, sink_name)
        return self._project(node, select, sink_name, analysis.star_expanded, transient)

    def _repartition(
        self, node: L.LogicalNode, analysis: AnalyzedQuery, select: list[Any], sink_name: str
    ) -> tuple[L.LogicalNode, list[Any]]:
        assert analysis.partition_by is not None
        columns = node.columns()
        keys: list[tuple[str, E.Expr]] = []
        generated = column_alias_generator(c.name for c in node.schema.columns)
        for p in analysis.partition_by:
            if is_null_literal(p):  # PARTITION BY NULL: no key columns
                continue
            if isinstance(p, E.ColumnRef):
                name = p.name
            else:
                # Named as ksqlDB names a new key column (every expression of the list draws a
                # name), unless the projection selects the expression: then by its alias.
                name = generated(p)
                match = find_select(select, p)
                if match is not None:
                    name = match.alias
            keys.append((name, p))
        key_columns = [Column(n, _type_of(e, columns, n), Namespace.KEY) for n, e in keys]
        key_names = {n for n, _ in keys}
        values = [
            Column(c.name, c.type)
            for c in (*node.schema.value, *node.schema.key)
            if c.name not in key_names and c.namespace is not Namespace.HEADERS
        ]
        rekeyed = L.RepartitionNode(
            schema=LogicalSchema(tuple(key_columns + values)), is_table=False,
            window=node.window, input=node, keys=tuple(keys),
        )
        replacements = {e: E.ColumnRef(n) for n, e in keys if not isinstance(e, E.ColumnRef)}
        if analysis.star_expanded:
            # SELECT * after PARTITION BY: the new key, then every other column.
            from engine.analysis.query import SelectColumn

            select = [SelectColumn(c.name, E.ColumnRef(c.name)) for c in rekeyed.schema.columns]
        else:
            select = [
                type(s)(s.alias, rewrite(s.expression, lambda e: replacements.get(e)))
                for s in select
            ]
        return rekeyed, select

    def _project(
        self, node: L.LogicalNode, select: list[Any], sink_name: str, star: bool, transient: bool = False
    ) -> L.LogicalNode:
        columns = node.columns()
        if transient:
            return _transient_project(node, select)
        if self.config.get(NEW_QUERY_PLANNER) in (True, "true", "TRUE", "True"):
            node = _new_planner_key(node, select)
        key_columns = node.schema.key
        key_names: list[str] = []
        used: set[int] = set()
        equivalents = key_equivalents(node)
        for key in key_columns:
            names = {key.name, *equivalents.get(key.name, ())}
            matches = [
                i for i, s in enumerate(select)
                if isinstance(s.expression, E.ColumnRef) and s.expression.name in names
            ]
            if len(names) > 1 and matches:
                # The key column itself wins over columns merely equal to it, then the viable
                # key column ksqlDB prefers (a join's first viable key in the projection).
                rank = _key_preference(node, key.name)
                best = min(rank(select[i].expression.name) for i in matches)
                matches = [i for i in matches if rank(select[i].expression.name) == best]
                if best > 0:
                    matches = matches[:1]
            if not matches and _join_message(node):
                raise AnalysisError(_join_message(node).replace("{sink}", sink_name))
            if not matches:
                raise AnalysisError(
                    "Key missing from projection (ie, SELECT). See https://cnfl.io/2LV7ouS.\n"
                    f"The query used to build `{sink_name}` must include the key column"
                    f"{'s' if len(key_columns) > 1 else ''} "
                    f"{_and_list([k.name for k in key_columns])} in its projection (eg, SELECT "
                    f"{', '.join(k.name for k in key_columns)}...)."
                )
            if len(matches) > 1:
                aliases = " and ".join(sorted(select[i].alias for i in matches))
                raise AnalysisError(
                    f"The projection contains a key column (`{key.name}`) more than once, "
                    f"aliased as: {aliases}.\nEach key column must only be in the projection once. "
                    "If you intended to copy the key into the value, then consider using the "
                    "AS_VALUE function to indicate which key reference should be copied."
                )
            used.add(matches[0])
            key_names.append(select[matches[0]].alias)
        values = [(s.alias, s.expression) for i, s in enumerate(select) if i not in used]
        if key_columns and not values:
            raise AnalysisError("The projection contains no value columns.")
        out_columns = [
            Column(n, k.type, Namespace.KEY) for n, k in zip(key_names, key_columns, strict=True)
        ] + [Column(a, _type_of(e, columns, a)) for a, e in values]
        return L.ProjectNode(
            schema=LogicalSchema(tuple(out_columns)), is_table=node.is_table, window=node.window,
            input=node, key_names=tuple(key_names), values=tuple(values),
        )


NEW_QUERY_PLANNER = "ksql.new.query.planner.enabled"


def _new_planner_key(node: L.LogicalNode, select: list[Any]) -> L.LogicalNode:
    """ksqlDB's new query planner: a stream's key follows the projection. Key columns it does
    not select are dropped (the stream loses its key when none is selected), and selected
    key columns come in projection order; either is a re-keying of the stream."""
    if node.is_table or not node.schema.key or node.window is not None or _join_message(node):
        return node  # tables, windowed streams and joins keep the old planner's key rules
    key_names = [k.name for k in node.schema.key]
    selected = [
        s.expression.name for s in select
        if isinstance(s.expression, E.ColumnRef) and s.expression.name in key_names
    ]
    order = list(dict.fromkeys(selected))
    if order == key_names:
        return node
    types = {k.name: k.type for k in node.schema.key}
    keys = tuple((n, E.ColumnRef(n)) for n in order)
    values = [
        Column(c.name, c.type)
        for c in (*node.schema.value, *node.schema.key)
        if c.name not in order and c.namespace is not Namespace.HEADERS
    ]
    key_columns = [Column(n, types[n], Namespace.KEY) for n in order]
    return L.RepartitionNode(
        schema=LogicalSchema(tuple(key_columns + values)), is_table=False,
        window=node.window, input=node, keys=keys,
    )


def _transient_project(node: L.LogicalNode, select: list[Any]) -> L.ProjectNode:
    """A push query's projection: every SELECT item a value column, the keys under hidden names."""
    columns = node.columns()
    taken = {s.alias for s in select} | set(columns)
    hidden: list[str] = []
    counter = 0
    for _ in node.schema.key:
        while f"KSQL_TRANSIENT_KEY_{counter}" in taken:
            counter += 1
        hidden.append(f"KSQL_TRANSIENT_KEY_{counter}")
        counter += 1
    values = [(s.alias, s.expression) for s in select]
    out_columns = [Column(n, k.type, Namespace.KEY) for n, k in zip(hidden, node.schema.key, strict=True)]
    out_columns += [Column(a, _type_of(e, columns, a)) for a, e in values]
    return L.ProjectNode(
        schema=LogicalSchema(tuple(out_columns)), is_table=node.is_table, window=node.window,
        input=node, key_names=tuple(hidden), values=tuple(values),
    )


def _join_message(node: L.LogicalNode) -> str:
    """A join's own "key missing from projection" message, if ``node`` reads a join."""
    current: Any = node
    while isinstance(current, L.FilterNode | L.FlatMapNode):
        current = current.input
    return str(getattr(current, "missing_key_message", "") or "")


def _column_text(column: Column) -> str:
    """A column as ksqlDB lists it in schema messages: name and type, no namespace."""
    return f"{T.quote_identifier(column.name)} {column.type}"


# Formats whose registered schemas carry a full name (KEY/VALUE_SCHEMA_FULL_NAME).
SCHEMA_FULL_NAME_FORMATS = frozenset({"AVRO", "PROTOBUF"})
# The formats whose properties take a schema full name in ksqlDB (JSON_SR's is not used by kspark).
_FULL_NAME_PROPERTY_FORMATS = SCHEMA_FULL_NAME_FORMATS | {"JSON_SR"}


def _check_full_schema_name(fmt: str, full_name: str) -> None:
    """ksqlDB's format properties refuse a schema full name in a format without one, then a
    blank one (its property is ``fullSchemaName``)."""
    if fmt not in _FULL_NAME_PROPERTY_FORMATS:
        raise AnalysisError(f"{fmt} does not support the following configs: [fullSchemaName]")
    if not full_name.strip():
        raise AnalysisError(
            f"fullSchemaName cannot be empty. Format configuration: {{fullSchemaName={full_name}}}"
        )
AVRO_SCHEMA_NAMESPACE = "io.confluent.ksql.avro_schemas"


def avro_key_schema_name(source_name: str) -> str:
    """ksqlDB's full name of a source's AVRO key schema: the source name in upper camel
    case, then ``Key`` (``OUTPUT`` -> ``io.confluent.ksql.avro_schemas.OutputKey``)."""
    camel = "".join(part[:1].upper() + part[1:].lower() for part in source_name.split("_") if part)
    return f"{AVRO_SCHEMA_NAMESPACE}.{camel}Key"


def _with_schema_ids(formats: Formats, ids: Mapping[str, int]) -> Formats:
    """``formats`` with the KEY/VALUE_SCHEMA_ID the statement named: the topic's records are
    written with that registered schema."""
    key_props, value_props = dict(formats.key_properties), dict(formats.value_properties)
    if "key" in ids:
        key_props["schema_id"] = str(ids["key"])
    if "value" in ids:
        value_props["schema_id"] = str(ids["value"])
    return dataclasses.replace(
        formats,
        key_properties=tuple(sorted(key_props.items())),
        value_properties=tuple(sorted(value_props.items())),
    )


def _and_list(names: list[str]) -> str:
    """``A``, ``A and B``, ``A, B and C``: how ksqlDB lists names in a sentence."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def refuse_unknown_types(node: Any) -> None:
    """Refuse a statement naming a type that is neither built in nor resolved by the parser
    (a ``CREATE TYPE`` of the same text): ksqlDB refuses it as it prepares the statement."""
    found = _type_reference(node, 0)
    if found is not None:
        raise StatementPrepareError(f"Failed to prepare statement: Cannot resolve unknown type: {found.name}")


def _type_reference(node: Any, depth: int) -> ast.TypeReference | None:
    if isinstance(node, ast.TypeReference):
        return node
    if depth > 200 or node is None or isinstance(node, str | int | float | bool):
        return None
    if isinstance(node, list | tuple | frozenset | set):
        children: Iterable[Any] = node
    elif isinstance(node, Mapping):
        children = node.values()
    elif dataclasses.is_dataclass(node):
        children = (getattr(node, f.name, None) for f in dataclasses.fields(node))
    else:
        return None
    for child in children:
        found = _type_reference(child, depth + 1)
        if found is not None:
            return found
    return None


def _partitions(node: Any, topics: Mapping[str, TopicInfo]) -> int | None:
    """The partitions a join input reads: a source's topic's, a join's right input's."""
    if isinstance(node, LJ.JoinNode):
        return _partitions(node.right, topics)
    if isinstance(node, L.SourceNode):
        topic = topics.get(node.source.topic)
        return None if topic is None else topic.partitions
    return None


def _leftmost_alias(node: Any) -> str:
    """The alias of a join's leftmost source (how ksqlDB names a join's left input)."""
    while isinstance(node, LJ.JoinNode) and not node.left_alias and isinstance(node.left, LJ.JoinNode):
        node = node.left
    return str(node.left_alias)


def _refuse_cleanup_policy(props: WithProperties) -> None:
    """A topic's cleanup policy follows from the source's kind; a statement may not set it
    (ksqlDB's topic-create injector, which runs before the statement is planned)."""
    if "CLEANUP_POLICY" in props:
        raise AnalysisError(
            "Invalid config variable in the WITH clause: CLEANUP_POLICY.\n"
            "The CLEANUP_POLICY config is automatically inferred based on the type of source (STREAM or TABLE).\n"
            "Users can't set the CLEANUP_POLICY config manually."
        )


def _refuse_retention(props: WithProperties, *, compacted: bool) -> None:
    """RETENTION_MS on a source whose topic is compacted only (a table that is not windowed)."""
    if compacted and props.values.get("RETENTION_MS") is not None:
        raise AnalysisError(
            "Invalid config variable in the WITH clause: RETENTION_MS. Non-windowed tables do not support retention."
        )


def _replace_source_message(existing: DataSource) -> str:
    return _replace_source_text(existing.kind.lower(), existing.name)


def _replace_source_text(kind: str, name: str) -> str:
    return f"Cannot add {kind} '{name}': CREATE OR REPLACE is not supported on source {kind}s."


def _check_value_delimiter(props: WithProperties, default_value_format: object) -> None:
    """VALUE_DELIMITER is checked with the WITH clause, before the columns (as ksqlDB does)."""
    delimiter = props.string("VALUE_DELIMITER")
    if delimiter is None:
        return
    value_fmt = props.string("FORMAT") or props.string("VALUE_FORMAT") or default_value_format
    if value_fmt is None:
        return
    if str(value_fmt).upper() != "DELIMITED":
        raise AnalysisError(
            f"{str(value_fmt).upper()} does not support the following configs: [delimiter]"
        )
    parse_delimiter(delimiter)


def _refuse_blank_topic(topic: str) -> None:
    """ksqlDB's topic properties refuse a blank KAFKA_TOPIC of a topic they would create."""
    if not topic.strip():
        raise AnalysisError("Must have non-empty topic name.")


def _check_header_type(element: ast.TableElement) -> None:
    """HEADERS columns hold every header; HEADER('k') columns the bytes of one."""
    if element.constraint == "HEADERS" and element.type != HEADERS_TYPE:
        raise AnalysisError(
            f"Invalid type for HEADERS column: expected {HEADERS_TYPE}, got {element.type}"
        )
    if element.constraint == "HEADER" and element.type != T.BYTES:
        raise AnalysisError(
            f"Invalid type for HEADER('{element.header_key}') column: expected BYTES, "
            f"got {element.type}"
        )


def _key_preference(node: L.LogicalNode, key: str) -> Callable[[str], int]:
    """Rank of a column equal to ``key``: 0 for the key itself, then a join's viable key order."""
    current: Any = node
    while isinstance(current, L.FilterNode | L.FlatMapNode):
        current = current.input
    order = [key, *(n for n in getattr(current, "viable_keys", ()) if n != key)]
    return lambda name: order.index(name) if name in order else len(order)


def key_equivalents(node: L.LogicalNode) -> dict[str, frozenset[str]]:
    """Columns equal to each key column by construction (a join's key equals both sides' keys).

    A node may declare ``key_equivalents``; filters and flat maps keep their input's.
    """
    current: Any = node
    while current is not None:
        found = getattr(current, "key_equivalents", None)
        if found is not None:
            return dict(found)
        if isinstance(current, L.FilterNode | L.FlatMapNode):
            current = current.input
        else:
            return {}
    return {}


def _type_of(expr: E.Expr, columns: Mapping[str, T.SqlType], alias: str) -> T.SqlType:
    t = infer_type(expr, columns)
    if t is None:
        raise TypeCheckError(
            "Can't infer a type of null. Please explicitly cast it to a required type, "
            f"e.g. CAST(null AS VARCHAR). Column: {alias}."
        )
    return t


_NUMERIC_WIDENING = (T.BaseType.INTEGER, T.BaseType.BIGINT, T.BaseType.DECIMAL, T.BaseType.DOUBLE)


def _widens(source: T.SqlType, target: T.SqlType) -> bool:
    """ksqlDB's implicit cast of an INSERT INTO's result column into its sink column: a
    numeric type to one at least as wide by base type (INTEGER, BIGINT, DECIMAL, DOUBLE;
    a DECIMAL into any DECIMAL)."""
    if source.base not in _NUMERIC_WIDENING or target.base not in _NUMERIC_WIDENING:
        return False
    return _NUMERIC_WIDENING.index(source.base) <= _NUMERIC_WIDENING.index(target.base)


def _implicit_casts(node: L.LogicalNode, sink: LogicalSchema) -> L.LogicalNode | None:
    """An INSERT INTO's projection with its value columns cast to the sink's types, when
    every column matches the sink's by name and namespace and each value column's type
    widens to the sink's (None: no such projection)."""
    if not isinstance(node, L.ProjectNode):
        return None
    ours = [c for c in node.schema.columns if c.namespace is not Namespace.HEADERS]
    theirs = [c for c in sink.columns if c.namespace is not Namespace.HEADERS]
    if len(ours) != len(theirs):
        return None
    casts: dict[str, T.SqlType] = {}
    for mine, wanted in zip(ours, theirs, strict=True):
        if (mine.name, mine.namespace) != (wanted.name, wanted.namespace):
            return None
        if mine.type == wanted.type:
            continue
        if mine.namespace is not Namespace.VALUE or not _widens(mine.type, wanted.type):
            return None
        casts[mine.name] = wanted.type
    values = tuple(
        (alias, E.Cast(expr, casts[alias]) if alias in casts else expr) for alias, expr in node.values
    )
    return dataclasses.replace(node, schema=LogicalSchema(tuple(theirs)), values=values)


def _comparable(schema: LogicalSchema) -> list[tuple[str, str, str]]:
    return [(c.name, str(c.type), c.namespace.value) for c in schema.columns if c.namespace is not Namespace.HEADERS]


def _is_create_as_select(source: DataSource) -> bool:
    """Whether ``source`` was created by CREATE ... AS SELECT (its statement text says so)."""
    from engine.parser import creating_statement

    created = creating_statement(source.sql)
    return created is not None and isinstance(created.statement, ast.CreateAsSelect)
