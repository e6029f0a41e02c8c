"""Row-at-a-time Python functions applied to DataFrames through ``mapInArrow``.

Every stream or table DataFrame of a query has the user columns of its logical schema
(key columns first) plus the meta columns below. ``map_rows`` converts each Arrow record
to the engine's Python values, calls a row function that returns zero or more output rows,
and converts those back. The same operator runs on bounded DataFrames and on Structured
Streaming ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as ST
from pyspark.sql.pandas.types import to_arrow_schema

from engine.plan.schema import LogicalSchema
from engine.runtime.convert import from_spark, spark_type, to_spark

SEQ = "__seq"  # array<bigint>: input-order key (lexicographic provenance of the record)
DELETED = "__deleted"  # boolean: a table changelog delete (tombstone)
HEADERS = "__headers"  # array<struct<KEY string, VALUE binary>>: the record's headers
ROWTIME, ROWPARTITION, ROWOFFSET = "ROWTIME", "ROWPARTITION", "ROWOFFSET"
WINDOWSTART, WINDOWEND = "WINDOWSTART", "WINDOWEND"

HEADER_SPARK_TYPE = ST.ArrayType(
    ST.StructType(
        [ST.StructField("KEY", ST.StringType()), ST.StructField("VALUE", ST.BinaryType())]
    )
)

META_FIELDS: tuple[ST.StructField, ...] = (
    ST.StructField(SEQ, ST.ArrayType(ST.LongType(), containsNull=False), nullable=False),
    ST.StructField(ROWTIME, ST.LongType()),
    ST.StructField(ROWPARTITION, ST.IntegerType()),
    ST.StructField(ROWOFFSET, ST.LongType()),
    ST.StructField(HEADERS, HEADER_SPARK_TYPE),
    ST.StructField(DELETED, ST.BooleanType()),
    ST.StructField(WINDOWSTART, ST.LongType()),
    ST.StructField(WINDOWEND, ST.LongType()),
)
META_NAMES: tuple[str, ...] = tuple(f.name for f in META_FIELDS)

# Raw topic records, as a runtime adapter reads them: key and value in QTT form, pickled.
RAW_FIELDS: tuple[ST.StructField, ...] = (
    ST.StructField(SEQ, ST.ArrayType(ST.LongType(), containsNull=False), nullable=False),
    ST.StructField("__key", ST.BinaryType()),
    ST.StructField("__value", ST.BinaryType()),
    ST.StructField("__ts", ST.LongType()),
    ST.StructField("__partition", ST.IntegerType()),
    ST.StructField("__offset", ST.LongType()),
    ST.StructField(HEADERS, HEADER_SPARK_TYPE),
    ST.StructField("__wstart", ST.LongType()),
    ST.StructField("__wend", ST.LongType()),
)
RAW_SCHEMA = ST.StructType(list(RAW_FIELDS))

Row = dict[str, Any]
RowFunction = Callable[[Row], Iterable[Row]]


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SPARK_TIME_ZONE = "UTC"


def spark_name(name: str) -> str:
    """The Spark column name of a user column.

    PySpark resolves names with dots or back-quotes as nested fields, and a user column may
    share its name with a meta column (``PARTITION BY ROWOFFSET``), so such names are
    encoded; plain names stay readable in physical plans.
    """
    if _PLAIN_NAME.fullmatch(name) and name not in META_NAMES and not name.startswith("__"):
        return name
    return "__c_" + name.encode("utf-8").hex()


def row_spark_schema(schema: LogicalSchema) -> ST.StructType:
    """The Spark schema of a stream/table DataFrame with this logical schema."""
    user = [
        ST.StructField(spark_name(c.name), spark_type(c.type), nullable=True)
        for c in schema.columns
    ]
    return ST.StructType(user + list(META_FIELDS))


def arrow_schema_of(schema: ST.StructType) -> pa.Schema:
    """The Arrow schema Spark expects for batches of ``schema`` (timestamps in UTC)."""
    return to_arrow_schema(schema, timestamp_utc=True)


def decoders(schema: LogicalSchema) -> tuple[tuple[str, str, Callable[[Any], Any]], ...]:
    """(user name, Spark name, Arrow value -> engine value) per column."""
    return tuple((c.name, spark_name(c.name), from_spark(c.type)) for c in schema.columns)


def encoders(schema: LogicalSchema) -> tuple[tuple[str, str, Callable[[Any], Any]], ...]:
    """(user name, Spark name, engine value -> Arrow value) per column."""
    return tuple((c.name, spark_name(c.name), to_spark(c.type)) for c in schema.columns)


def map_rows(
    df: DataFrame,
    *,
    input_schema: LogicalSchema | None,
    output_schema: LogicalSchema | None,
    fn: RowFunction,
    name: str,
    input_fields: Sequence[str] = META_NAMES,
    output_spark_schema: ST.StructType | None = None,
) -> DataFrame:
    """Apply ``fn`` to every row; ``fn`` returns the output rows (dicts) for one input row.

    With ``input_schema`` None, rows hold only ``input_fields`` as Spark gives them (raw
    topic records); with ``output_schema`` None, ``output_spark_schema`` gives the output.
    """
    decode = decoders(input_schema) if input_schema is not None else ()
    if output_schema is not None:
        encode = encoders(output_schema)
        out_schema = row_spark_schema(output_schema)
        passthrough = META_NAMES
    else:
        assert output_spark_schema is not None
        encode = ()
        out_schema = output_spark_schema
        passthrough = tuple(f.name for f in output_spark_schema.fields)
    arrow_schema = arrow_schema_of(out_schema)
    meta_in = tuple(input_fields)

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: list[Row] = []
            for record in batch.to_pylist():
                row = {n: conv(record[sn]) for n, sn, conv in decode}
                for m in meta_in:
                    row[m] = record[m]
                for produced in fn(row):
                    encoded = {sn: conv(produced.get(n)) for n, sn, conv in encode}
                    for m in passthrough:
                        if m not in encoded:
                            encoded[m] = produced.get(m)
                    out.append(encoded)
            yield pa.RecordBatch.from_pylist(out, schema=arrow_schema)

    run.__name__ = _function_name(name)
    run.__qualname__ = run.__name__
    return df.mapInArrow(run, out_schema)


def _function_name(ctx: str) -> str:
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in ctx)
    return cleaned or "step"
