"""Builders of the lean native source and sink steps (V3): V2's exactness, less work per record.

The contract is V2's (``engine.builders.native_io``): the same formats and types run
natively, each record's native reading is checked for everything Spark would read otherwise
than the V1 Python serdes, and such a record is read by the V1 serdes instead. What changes
is how the check is made:

- **Typed parsing.** A JSON value is parsed once by ``from_json`` with each field's own
  Spark type and a corrupt-record column. Spark's typed reader refuses every token ksqlDB
  would coerce or reject for BOOLEAN, INT and BIGINT (a string, a fraction, a number out of
  range, a value that is not an object, broken JSON): the record is marked corrupt and goes
  to Python. V2 read every field as text and tested each with patterns and casts. Spark
  accepts, and may read otherwise, only a STRING field from a token that is not a string
  (checked as in V2) and a DOUBLE that is not finite (``NaN`` and ``Infinity`` tokens or
  strings): those records go to Python too. The JSON text ``null`` goes to Python (V2 read
  it natively as all columns null; V1 reads the same).
- **No lambda.** A field in another case is found from the record's keys (listed only when
  a field is null) with array functions, so the whole projection compiles to Java code.
- **An unwrapped value** is read as a one-element JSON array (``[`` text ``]``): anything
  but exactly one element of the column's type goes to Python.
- **A vectorised fallback.** The V1 serdes run in an Arrow UDF that returns at once for a
  batch with no record for Python; otherwise it reads those records only.
- **A sink without Python.** Spark's ``to_json`` writes a non-finite DOUBLE as V1 writes it
  (the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``), and no other supported type needs
  Python to be written: V2's per-record writer UDF is gone.

Formats and types without a native form build exactly as their V1 versions do, as in V2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Column as SparkColumn
from pyspark.sql import functions as F
from pyspark.sql import types as ST
from pyspark.sql.pandas.types import to_arrow_type

from engine.builders.context import BuildContext, Built
from engine.builders.formats import serdes_for
from engine.builders.native_io import (
    _DOUBLE_TEXT,
    _RANGES,
    _STRING_SUSPECT,
    _any,
    _part_bytes,
    _python_source_reader,
    _read_kafka,
    integer_text,
    sink_or_v1,
    source_columns,
    source_or_v1,
)
from engine.builders.walker import builds, checks_consumers
from engine.errors import InternalError, PlanError
from engine.plan import types as T
from engine.plan.steps import Step
from engine.plan.steps_native import (
    PARTITION_ORDER_CONSUMERS,
    StreamSinkV3,
    StreamSinkV4,
    StreamSinkV5,
    StreamSourceV3,
    StreamSourceV4,
    StreamSourceV5,
    StreamSourceV6,
    TableSinkV3,
    TableSinkV4,
    TableSinkV5,
    TableSourceV3,
    TableSourceV4,
)
from engine.runtime import rows as R
from engine.runtime.adapter import PartitionOrderReads, TopicCodec
from engine.runtime.convert import spark_type
from engine.serde import RecordSerde

SourceStep = StreamSourceV3 | TableSourceV3
# The sources that read in partition order (V4, V6) and those of format level 2 (V5, V6, table V4).
AnySourceStep = SourceStep | StreamSourceV4 | StreamSourceV5 | StreamSourceV6 | TableSourceV4
# (``streamSinkV4``/``tableSinkV4`` build as these when they write no registered schema's extra fields,
# and so do V5's.)
SinkStep = StreamSinkV3 | TableSinkV3 | StreamSinkV4 | TableSinkV4 | StreamSinkV5 | TableSinkV5
_KEYS_SEPARATOR = "\u0000"


# --------------------------------------------------------------------------- decoding


def _field_needs_python(value: SparkColumn, t: T.SqlType) -> SparkColumn | None:
    """Whether a field Spark's typed reader accepted may hold another value for ksqlDB
    (None: it never does for this type)."""
    if t.base is T.BaseType.STRING:
        return value.rlike(_STRING_SUSPECT)
    if t.base is T.BaseType.DOUBLE:
        return F.isnan(value) | (F.abs(value) == F.lit(float("inf")))
    return None


def _corrupt_column(serde: RecordSerde) -> str:
    """A corrupt-record column name no column of the value has."""
    name = "__corrupt"
    names = {c.name for c in serde.columns}
    while name in names:
        name += "_"
    return name


def _read_json(text: SparkColumn, serde: RecordSerde, parsed: SparkColumn) -> tuple[SparkColumn, dict[str, SparkColumn], SparkColumn]:
    """A JSON key or value parsed once with its columns' types (to be added to the rows and
    read back as ``parsed``), each column's value from it, and whether the record needs Python."""
    columns = serde.columns
    if not serde.wrapped:
        (column,) = columns
        parse = F.from_json(F.concat(F.lit("["), text, F.lit("]")), ST.ArrayType(spark_type(column.type)))
        value = F.try_element_at(parsed, F.lit(1))
        flags = [parsed.isNull(), F.size(parsed) != F.lit(1)]
        check = _field_needs_python(value, column.type)
        if check is not None:
            flags.append(check)
        return parse, {column.name: value}, _any(flags)
    corrupt = _corrupt_column(serde)
    schema = ST.StructType(
        [ST.StructField(c.name, spark_type(c.type)) for c in columns] + [ST.StructField(corrupt, ST.StringType())]
    )
    parse = F.from_json(text, schema, {"columnNameOfCorruptRecord": corrupt})
    values = {c.name: parsed.getField(c.name) for c in columns}
    flags = [parsed.isNull(), parsed.getField(corrupt).isNotNull()]
    flags += [check for c in columns if (check := _field_needs_python(values[c.name], c.type)) is not None]
    any_null = _any([v.isNull() for v in values.values()])
    # A record with a null field may name a column in another case: the keys no column has
    # exactly, upper-cased, against the column names (joined and split, not a lambda, so the
    # projection compiles; a key holding the separator can only send a record to Python).
    names = F.array(*[F.lit(c.name) for c in columns])
    others = F.array_except(F.when(any_null, F.json_object_keys(text)), names)
    upper = F.split(F.upper(F.array_join(others, _KEYS_SEPARATOR)), _KEYS_SEPARATOR)
    flags.append(any_null & (F.size(others) > F.lit(0)) & F.arrays_overlap(upper, names))
    return parse, values, _any(flags)


def _delimited_field(field: SparkColumn, t: T.SqlType) -> tuple[SparkColumn, SparkColumn | None]:
    """A DELIMITED field's value (NULL when empty) and whether the record needs Python for it
    (None: never). Spark reads only the text V1 reads alike: Java's ``Boolean.parseBoolean``
    (``true`` in any case, else false), integer digits in range, and plain decimal numbers;
    V1 reads every other non-empty text, or fails on it, in Python."""
    filled = field != F.lit("")
    base = t.base
    if base is T.BaseType.STRING:
        return F.when(filled, field), None
    if base is T.BaseType.BOOLEAN:
        return F.when(filled, field.rlike("^[Tt][Rr][Uu][Ee]$")), None
    if base in _RANGES:
        number, fits = integer_text(field, t)
        return F.when(filled & fits, number).cast(spark_type(t)), filled & ~fits
    ok = field.rlike(_DOUBLE_TEXT)
    return F.when(filled & ok, field.try_cast("double")), filled & ~ok


def _read_delimited(text: SparkColumn, serde: RecordSerde, parsed: SparkColumn) -> tuple[SparkColumn, dict[str, SparkColumn], SparkColumn]:
    """A DELIMITED key or value split once at its delimiter (to be added to the rows and read
    back as ``parsed``), each column's value from it, and whether the record needs Python.

    A record with a quote or a line break goes to Python (quoting, and Commons CSV's end of
    record), and so does one whose field count differs from the columns' (an error in V1).
    Without them, V1's parse is exactly a split at every delimiter."""
    delimiter = getattr(serde, "delimiter", None)
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise InternalError(f"The serde of the {serde.what} has no one-character delimiter (a bug).")
    parse = F.split(text, "\\Q" + delimiter + "\\E", -1)
    values: dict[str, SparkColumn] = {}
    flags = [text.rlike('["\\r\\n]'), F.size(parsed) != F.lit(len(serde.columns))]
    for index, column in enumerate(serde.columns):
        value, check = _delimited_field(F.get(parsed, F.lit(index)), column.type)
        values[column.name] = value
        if check is not None:
            flags.append(check)
    return parse, values, _any(flags)


def _arrow_reader(read: Callable[[Any], Any], result: ST.StructType) -> Any:
    """``read`` over a batch of records as an Arrow UDF: the records for Python are the
    non-null ones, and a batch without any costs one null count."""
    arrow_type = to_arrow_type(result)

    def read_batch(records: pa.Array) -> pa.Array:
        if records.null_count == len(records):
            return pa.nulls(len(records), arrow_type)
        return pa.array([read(r) for r in records.to_pylist()], arrow_type)

    return F.arrow_udf(read_batch, result).asNondeterministic()  # type: ignore[call-overload]


def _build_source(step: AnySourceStep, ctx: BuildContext, *, is_table: bool) -> Built:
    schema = step.source_schema
    codec = TopicCodec(*serdes_for(step.formats, schema.columns))
    if isinstance(step, StreamSourceV4 | StreamSourceV6) and isinstance(ctx.runtime, PartitionOrderReads):
        raw = ctx.runtime.read_topic_bytes_in_partition_order(step.topic, codec)
    else:  # V3, V5; V4 and V6 on the bounded runtime, whose reads are in input order at no cost
        raw = ctx.runtime.read_topic_bytes(step.topic, codec)
    deleted = F.col("__value").isNull()
    parses: list[SparkColumn] = []
    values: dict[str, SparkColumn] = {}
    flags: list[SparkColumn] = []
    for serde, data, name in ((codec.key, "__key", "__key_fields"), (codec.value, "__value", "__value_fields")):
        if not serde.columns:
            continue
        present = F.col(data).isNotNull() if serde is codec.key else ~deleted
        if serde.format.name == "KAFKA":
            (column,) = serde.columns
            read = _read_kafka(F.col(data), column.type)
            parses.append(read.value.alias(name))
            values[column.name] = F.col(name)
            flags.append(read.python)
            continue
        text = F.col(data).cast("string")
        reader = _read_delimited if serde.format.name == "DELIMITED" else _read_json
        parse, read_values, python = reader(text, serde, F.col(name))
        parses.append(parse.alias(name))
        values.update(read_values)
        flags.append(present & (python | ~F.is_valid_utf8(text)))
    raw = raw.select("*", *parses)
    rowtime = F.col("__ts")
    if step.timestamp_column is not None:
        ts_column = schema.find(step.timestamp_column.column)
        if ts_column is not None:
            native_ts = values[ts_column.name]
            rowtime = F.when(deleted, rowtime).otherwise(native_ts)
            flags.append(~deleted & (native_ts.isNull() | (native_ts < 0)))
    user_fields = [ST.StructField(R.spark_name(c.name), spark_type(c.type)) for c in schema.key + schema.value]
    python_type = ST.StructType([*user_fields, ST.StructField(R.ROWTIME, ST.LongType())])
    python_read = _arrow_reader(_python_source_reader(step, codec, is_table, ctx), python_type)
    record = F.struct(
        F.col("__key").alias("key"), F.col("__value").alias("value"), F.col("__ts").alias("ts"),
        F.col("__partition").alias("partition"), F.col("__offset").alias("offset"),
    )
    python = F.col("__python")
    staged = raw.select("*", _any(flags).alias("__python"))
    staged = staged.select("*", python_read(F.when(python, record)).alias("__read"))
    read_back = F.col("__read").isNotNull()
    if is_table and schema.key:
        staged = staged.filter(~python & _any([values[c.name].isNotNull() for c in schema.key]) | python & read_back)
    else:
        staged = staged.filter(~python | read_back)

    def pick(name: str, native: SparkColumn) -> SparkColumn:
        return F.when(python, F.col("__read").getField(name)).otherwise(native)

    out = source_columns(schema, values, pick, deleted, rowtime)
    return Built(df=staged.select(*out), schema=schema, is_table=is_table)


def _source(step: AnySourceStep, ctx: BuildContext, *, is_table: bool, level: int = 1) -> Built:
    return source_or_v1(step, ctx, is_table=is_table, native=_build_source, level=level)


@builds(StreamSourceV3)
def build_stream_source_v3(step: StreamSourceV3, *, ctx: BuildContext) -> Built:
    return _source(step, ctx, is_table=False)


@builds(TableSourceV3)
def build_table_source_v3(step: TableSourceV3, *, ctx: BuildContext) -> Built:
    return _source(step, ctx, is_table=True)


@builds(StreamSourceV4)
def build_stream_source_v4(step: StreamSourceV4, *, ctx: BuildContext) -> Built:
    """V3's source over the runtime's read in partition order (``PartitionOrderReads``): on
    Kafka, ``__seq`` made in Spark instead of a Python pass over every record. Only for
    queries that compare no records of two partitions (see ``check_stream_source_v4``)."""
    return _source(step, ctx, is_table=False)


@builds(StreamSourceV5)
def build_stream_source_v5(step: StreamSourceV5, *, ctx: BuildContext) -> Built:
    """V3's source with the native formats' level 2: DELIMITED keys and values read by Spark."""
    return _source(step, ctx, is_table=False, level=2)


@builds(StreamSourceV6)
def build_stream_source_v6(step: StreamSourceV6, *, ctx: BuildContext) -> Built:
    """V5's source over the runtime's read in partition order, as V4 is V3's."""
    return _source(step, ctx, is_table=False, level=2)


@builds(TableSourceV4)
def build_table_source_v4(step: TableSourceV4, *, ctx: BuildContext) -> Built:
    """V3's table source with the native formats' level 2: DELIMITED keys and values read by Spark."""
    return _source(step, ctx, is_table=True, level=2)


@checks_consumers(StreamSourceV4)
@checks_consumers(StreamSourceV6)
def check_stream_source_v4(step: Step, consumers: Sequence[Step]) -> None:
    """A V4 or V6 source's records carry no merge order across partitions: every step that
    reads them, up to the sink, must be a filter, a projection or a sink."""
    ordered = StreamSourceV5.TYPE if isinstance(step, StreamSourceV6) else StreamSourceV3.TYPE
    for consumer in consumers:
        if not isinstance(consumer, PARTITION_ORDER_CONSUMERS):
            raise PlanError(
                f"Step {step.ctx} ({step.TYPE}) feeds step {consumer.ctx} ({consumer.TYPE}), which needs its "
                f"records in input order across partitions: plan {ordered} for this query."
            )


# --------------------------------------------------------------------------- encoding


def _build_sink(step: SinkStep, source: Built, _ctx: BuildContext) -> Built:
    schema = source.schema
    codec = TopicCodec(*serdes_for(step.formats, schema.columns))
    row = {c.name: F.col(R.spark_name(c.name)) for c in schema.columns}
    deleted = F.coalesce(F.col(R.DELETED), F.lit(False))
    key_bytes = F.lit(None).cast("binary")
    if schema.key:
        key_bytes = F.when(_any([row[c.name].isNotNull() for c in schema.key]), _part_bytes(codec.key, row))
    if codec.value.columns:
        value_bytes = _part_bytes(codec.value, row)
    else:  # no value columns: what V1 writes for an empty row (JSON: {}; NONE: nothing)
        empty = codec.value.to_bytes(codec.value.serialize({}))
        value_bytes = F.lit(None if empty is None else bytearray(empty)).cast("binary")
    ts = F.col(R.ROWTIME)
    if step.timestamp_column is not None:
        column = schema.find(step.timestamp_column.column)
        if column is not None:
            ts = F.when(deleted, ts).otherwise(row[column.name].cast("bigint"))
    out = source.df.select(
        F.col(R.SEQ),
        key_bytes.alias("__key"),
        F.when(~deleted, value_bytes).alias("__value"),
        ts.alias("__ts"),
        F.col(R.ROWPARTITION).alias("__partition"),
        F.lit(None).cast("bigint").alias("__offset"),
        F.col(R.HEADERS),
        F.lit(None).cast("bigint").alias("__wstart"),
        F.lit(None).cast("bigint").alias("__wend"),
    )
    return Built(df=out, schema=schema, is_table=source.is_table, window=source.window,
                 internal_schemas=source.internal_schemas, codec=codec)


def _sink(step: SinkStep, source: Built, ctx: BuildContext, *, is_table: bool) -> Built:
    return sink_or_v1(step, source, ctx, is_table=is_table, native=_build_sink)


@builds(StreamSinkV3)
def build_stream_sink_v3(step: StreamSinkV3, *, source: Built, ctx: BuildContext) -> Built:
    return _sink(step, source, ctx, is_table=False)


@builds(TableSinkV3)
def build_table_sink_v3(step: TableSinkV3, *, source: Built, ctx: BuildContext) -> Built:
    return _sink(step, source, ctx, is_table=True)
