"""Step versions whose builders run on Spark's own expressions.

Same fields and meaning as their V1 versions in ``steps.py``. The filter and select V2
builders (``engine.builders.native``) compile each expression to a Spark Column where it has
an exact Spark form and evaluate only the others in Python. The source and sink V2 builders
(``engine.builders.native_io``) read and write Kafka bytes with Spark's functions
(``from_json``, ``to_json``, binary casts) where the format and column types allow, and hand
only the records those cannot read exactly to the V1 Python serdes. The source and sink V3
builders (``engine.builders.native_io_v3``) do the same with less work per record: a typed
``from_json`` whose failures mark the records for Python, and a sink with no Python at all.
The filter and select V3 versions (``tableFilterV4`` for tables, since ``tableFilterV3`` is the
filter over a table-table join) build as V2 with the native compiler's level 2, which runs more
operators and functions in Spark (``engine.expressions.native``). The source versions
``streamSourceV5``/``V6`` and ``tableSourceV4`` build as V3 with the native formats' level 2
(``engine.builders.native_forms``), which also reads DELIMITED keys and values in Spark. The
group-by and aggregate V2 builders (``engine.builders.native_aggregate``) compute grouping
keys as Spark Columns and, on bounded runs, running aggregates as window functions ordered by
input position; the group-by V3 versions compile their keys, ``streamAggregateV5`` and
``tableAggregateV3`` their arguments and HAVING, with the compiler's level 2. The aggregate
versions ``streamAggregateV6``/``V7`` and ``tableAggregateV4``/``V5`` build as
``streamAggregateV4``/``V5`` and ``tableAggregateV2``/``V3``, their output records carrying
the headers of the input record that triggered them. The planner picks the newest of these for new queries
(``kspark.native.steps``; the level-2 versions only for steps with a form level 2 runs in
Spark, or a source whose format level 2 reads); saved plans keep their steps and builders.

This module imports no pyspark.
"""

from __future__ import annotations

from typing import ClassVar

from engine.plan.expr import Expr
from engine.plan.schema import LogicalSchema
from engine.plan.steps import (
    Formats,
    SelectExpression,
    Step,
    TimestampColumn,
    _check_unique_aliases,
    register_step,
    step_dataclass,
)
from engine.plan.steps_aggregate import _check_aggregations, _check_keys


@register_step
@step_dataclass
class StreamFilterV2(Step):
    """Keeps the stream records for which the predicate is true (Spark Columns)."""

    TYPE: ClassVar[str] = "streamFilterV2"
    source: Step
    predicate: Expr


@register_step
@step_dataclass
class TableFilterV2(Step):
    """Keeps matching table rows, others become deletes (Spark Columns)."""

    TYPE: ClassVar[str] = "tableFilterV2"
    source: Step
    predicate: Expr


@register_step
@step_dataclass
class StreamSelectV2(Step):
    """Projects each stream record onto new value columns, keeping the keys (Spark Columns)."""

    TYPE: ClassVar[str] = "streamSelectV2"
    source: Step
    key_column_names: tuple[str, ...]
    select_expressions: tuple[SelectExpression, ...]

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_unique_aliases(self.TYPE, self.key_column_names, self.select_expressions)


@register_step
@step_dataclass
class TableSelectV2(Step):
    """Projects each table row onto new value columns, keeping the keys (Spark Columns)."""

    TYPE: ClassVar[str] = "tableSelectV2"
    source: Step
    key_column_names: tuple[str, ...]
    select_expressions: tuple[SelectExpression, ...]

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_unique_aliases(self.TYPE, self.key_column_names, self.select_expressions)


@register_step
@step_dataclass
class StreamFilterV3(Step):
    """Keeps the stream records for which the predicate is true (compiler level 2)."""

    TYPE: ClassVar[str] = "streamFilterV3"
    source: Step
    predicate: Expr


@register_step
@step_dataclass
class TableFilterV4(Step):
    """Keeps matching table rows, others become deletes, as tableFilterV2 (compiler level 2)."""

    TYPE: ClassVar[str] = "tableFilterV4"
    source: Step
    predicate: Expr


@register_step
@step_dataclass
class StreamSelectV3(Step):
    """Projects each stream record onto new value columns, keeping the keys (compiler level 2)."""

    TYPE: ClassVar[str] = "streamSelectV3"
    source: Step
    key_column_names: tuple[str, ...]
    select_expressions: tuple[SelectExpression, ...]

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_unique_aliases(self.TYPE, self.key_column_names, self.select_expressions)


@register_step
@step_dataclass
class TableSelectV3(Step):
    """Projects each table row onto new value columns, keeping the keys (compiler level 2)."""

    TYPE: ClassVar[str] = "tableSelectV3"
    source: Step
    key_column_names: tuple[str, ...]
    select_expressions: tuple[SelectExpression, ...]

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_unique_aliases(self.TYPE, self.key_column_names, self.select_expressions)


@register_step
@step_dataclass
class StreamSourceV2(Step):
    """Reads a stream from a topic with Spark's decoders (Python for what they cannot read)."""

    TYPE: ClassVar[str] = "streamSourceV2"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class TableSourceV2(Step):
    """Reads a table's changelog with Spark's decoders: upserts by key, null values delete."""

    TYPE: ClassVar[str] = "tableSourceV2"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class StreamSinkV2(Step):
    """Serialises stream records into a topic with Spark's encoders."""

    TYPE: ClassVar[str] = "streamSinkV2"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class TableSinkV2(Step):
    """Serialises a table's changelog into a topic with Spark's encoders (deletes as tombstones)."""

    TYPE: ClassVar[str] = "tableSinkV2"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class StreamSourceV3(Step):
    """Reads a stream with Spark's typed decoders, checking only what they may read otherwise."""

    TYPE: ClassVar[str] = "streamSourceV3"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class StreamSourceV4(Step):
    """Reads a stream as V3 does, for a query that needs no order across its source's
    partitions (no stateful step: only filters and projections up to its sink)."""

    TYPE: ClassVar[str] = "streamSourceV4"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class TableSourceV3(Step):
    """Reads a table's changelog with Spark's typed decoders: upserts by key, null values delete."""

    TYPE: ClassVar[str] = "tableSourceV3"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class StreamSourceV5(Step):
    """Reads a stream as V3 does; Spark also reads DELIMITED keys and values (format level 2
    of ``engine.builders.native_forms``)."""

    TYPE: ClassVar[str] = "streamSourceV5"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class StreamSourceV6(Step):
    """Reads a stream as V5 does, for a query that needs no order across its source's
    partitions (as ``streamSourceV4`` to V3)."""

    TYPE: ClassVar[str] = "streamSourceV6"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class TableSourceV4(Step):
    """Reads a table's changelog as V3 does; Spark also reads DELIMITED keys and values
    (format level 2 of ``engine.builders.native_forms``)."""

    TYPE: ClassVar[str] = "tableSourceV4"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class StreamSinkV3(Step):
    """Serialises stream records into a topic with Spark's encoders alone."""

    TYPE: ClassVar[str] = "streamSinkV3"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class TableSinkV3(Step):
    """Serialises a table's changelog into a topic with Spark's encoders alone (deletes as tombstones)."""

    TYPE: ClassVar[str] = "tableSinkV3"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class StreamSinkV4(Step):
    """Serialises stream records as ``streamSinkV3`` does, except that a key or value format
    naming a registered schema (KEY/VALUE_SCHEMA_ID) writes that schema's every field: one the
    sink has no column for takes what the schema gives it (AVRO: its default, else null when
    it is nullable, else the query fails; PROTOBUF: proto3's default; JSON_SR: null)."""

    TYPE: ClassVar[str] = "streamSinkV4"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class TableSinkV4(Step):
    """Serialises a table's changelog as ``tableSinkV3`` does, writing a registered schema's
    every field as ``streamSinkV4`` does."""

    TYPE: ClassVar[str] = "tableSinkV4"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class StreamSinkV5(Step):
    """Serialises stream records as ``streamSinkV4`` does, except that a windowed record goes
    to the partition of its key without the window: murmur2 of the key's bytes as if it were
    not windowed, as Kafka Streams' ``WindowedStreamPartitioner`` places ksqlDB's windowed
    records (V4 and older let the producer hash the whole windowed key, so one key's windows
    went to different partitions). Planned for windowed sinks."""

    TYPE: ClassVar[str] = "streamSinkV5"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class TableSinkV5(Step):
    """Serialises a table's changelog as ``tableSinkV4`` does, placing a windowed record in the
    partition of its key without the window as ``streamSinkV5`` does."""

    TYPE: ClassVar[str] = "tableSinkV5"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class StreamGroupByV2(Step):
    """Re-keys a stream by grouping expressions computed as Spark Columns; null keys are dropped."""

    TYPE: ClassVar[str] = "streamGroupByV2"
    source: Step
    group_by_expressions: tuple[SelectExpression, ...]
    internal_formats: Formats

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_keys(self.TYPE, self.group_by_expressions)


@register_step
@step_dataclass
class StreamGroupByKeyV2(Step):
    """Groups a stream by its existing key (no repartition): a Spark filter drops null keys."""

    TYPE: ClassVar[str] = "streamGroupByKeyV2"
    source: Step
    internal_formats: Formats


@register_step
@step_dataclass
class TableGroupByV2(Step):
    """Re-keys a table with Spark Columns: a change retracts the old row and adds the new one."""

    TYPE: ClassVar[str] = "tableGroupByV2"
    source: Step
    group_by_expressions: tuple[SelectExpression, ...]
    internal_formats: Formats

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_keys(self.TYPE, self.group_by_expressions)


@register_step
@step_dataclass
class StreamGroupByV3(Step):
    """Re-keys a stream as V2 does, its grouping expressions compiled with the native
    compiler's level 2."""

    TYPE: ClassVar[str] = "streamGroupByV3"
    source: Step
    group_by_expressions: tuple[SelectExpression, ...]
    internal_formats: Formats

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_keys(self.TYPE, self.group_by_expressions)


@register_step
@step_dataclass
class TableGroupByV3(Step):
    """Re-keys a table as V2 does, its grouping expressions compiled with the native
    compiler's level 2."""

    TYPE: ClassVar[str] = "tableGroupByV3"
    source: Step
    group_by_expressions: tuple[SelectExpression, ...]
    internal_formats: Formats

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_keys(self.TYPE, self.group_by_expressions)


@register_step
@step_dataclass
class TableAggregateV2(Step):
    """Aggregates a grouped table, undoing retractions; bounded runs use window functions."""

    TYPE: ClassVar[str] = "tableAggregateV2"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class StreamAggregateV2(Step):
    """Aggregates a grouped stream, one update per record; bounded runs use window functions."""

    TYPE: ClassVar[str] = "streamAggregateV2"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)



@register_step
@step_dataclass
class StreamAggregateV3(Step):
    """``streamAggregateV2`` whose Kafka-runtime form is native too: running results per key
    computed a micro-batch at a time over typed columns in Spark's state store (bounded runs
    build exactly as V2)."""

    TYPE: ClassVar[str] = "streamAggregateV3"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class StreamAggregateV4(Step):
    """``streamAggregateV3`` whose Kafka-runtime form runs by task, keeping input order across
    a task's groups, and runs a HAVING natively too: each record's results come with the
    group's results before it, HAVING is a Spark expression over both, and a miss deletes
    the group's row only when the results before it passed (bounded runs build exactly as V3)."""

    TYPE: ClassVar[str] = "streamAggregateV4"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class StreamAggregateV5(Step):
    """``streamAggregateV4`` with its arguments and HAVING compiled with the native compiler's
    level 2."""

    TYPE: ClassVar[str] = "streamAggregateV5"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class TableAggregateV3(Step):
    """``tableAggregateV2`` with its arguments and HAVING compiled with the native compiler's
    level 2."""

    TYPE: ClassVar[str] = "tableAggregateV3"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class StreamAggregateV6(Step):
    """``streamAggregateV4`` whose output records carry the headers of the input record that
    triggered them, as Kafka Streams forwards them (V4's carry none)."""

    TYPE: ClassVar[str] = "streamAggregateV6"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class StreamAggregateV7(Step):
    """``streamAggregateV5`` whose output records carry the headers of the input record that
    triggered them (V5's carry none)."""

    TYPE: ClassVar[str] = "streamAggregateV7"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class TableAggregateV4(Step):
    """``tableAggregateV2`` whose output records carry the headers of the input record that
    triggered them (V2's carry none)."""

    TYPE: ClassVar[str] = "tableAggregateV4"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


@register_step
@step_dataclass
class TableAggregateV5(Step):
    """``tableAggregateV3`` whose output records carry the headers of the input record that
    triggered them (V3's carry none)."""

    TYPE: ClassVar[str] = "tableAggregateV5"
    source: Step
    key_column_names: tuple[str, ...]
    aggregation_functions: tuple[SelectExpression, ...]
    internal_formats: Formats
    having: Expr | None = None

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_aggregations(self.TYPE, self.key_column_names, self.aggregation_functions)


# The source and sink versions: their explain reports are per column, not per expression.
IO_STEP_TYPES = frozenset(
    c.TYPE
    for c in (
        StreamSourceV2, TableSourceV2, StreamSinkV2, TableSinkV2, StreamSourceV3, TableSourceV3, StreamSinkV3, TableSinkV3,
        StreamSourceV4, StreamSinkV4, TableSinkV4, StreamSourceV5, StreamSourceV6, TableSourceV4,
        StreamSinkV5, TableSinkV5,
    )
)

# The steps that may read a ``streamSourceV4``'s or ``streamSourceV6``'s records (directly or
# through one another): none of them orders records of two partitions against each other.
PARTITION_ORDER_CONSUMERS: tuple[type[Step], ...] = (
    StreamFilterV2,
    StreamSelectV2,
    StreamFilterV3,
    StreamSelectV3,
    StreamSinkV3,
    StreamSinkV4,
)
