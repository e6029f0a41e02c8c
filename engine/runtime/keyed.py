"""Keyed, input-ordered processing: the one mechanism behind every stateful step.

Stateful steps (aggregations, windows, joins, table materialisation) all reduce to: route
each record to a group key, then let a handler see that key's records one at a time **in
input order** (``__seq``), keeping state between them, and emit zero or more output rows
per record. Spark does not keep input order within a group, so the handler sorts by seq.

Each record also carries the *stream time* of the processor at that record: the largest
record timestamp seen so far by that processor (across all keys, per input partition), as
Kafka Streams tracks it. Windows use it for grace periods and closing.

``process_keyed`` runs a handler over one or more input DataFrames on bounded data with
``groupBy().applyInArrow``; a streaming runtime runs the same handler under
``transformWithStateInPandas``, loading ``state`` from Spark's state store (the handler
only sees a dict).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from engine.plan.schema import LogicalSchema
from engine.runtime import rows as R

GROUP = "__group"
SIDE = "__side"
ROW = "__row"
TS = "__ts"
STREAM_TIME = "__stream_time"
PARTITION = "__part"

ENVELOPE_SCHEMA = ST.StructType(
    [
        ST.StructField(GROUP, ST.BinaryType()),
        ST.StructField(SIDE, ST.IntegerType()),
        ST.StructField(R.SEQ, ST.ArrayType(ST.LongType(), containsNull=False)),
        ST.StructField(TS, ST.LongType()),
        ST.StructField(PARTITION, ST.IntegerType()),
        ST.StructField(ROW, ST.BinaryType()),
    ]
)


@dataclass(frozen=True, slots=True)
class KeyedRecord:
    """One record as a handler sees it."""

    side: int
    seq: tuple[int, ...]
    row: dict[str, Any]
    stream_time: int
    # Per input side (indexed by side tag): the largest timestamp of that side's records so
    # far. Joins need it: each side's window store expires records by its own stream time.
    side_times: tuple[int | None, ...] = ()


class KeyedHandler(Protocol):
    """Processes one group's records in input order; ``state`` persists between records."""

    def process(self, state: dict[str, Any], record: KeyedRecord) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class KeyedInput:
    """One input of a keyed process: its DataFrame, schema, side tag and group-key function.

    ``group_key`` maps a row (engine values) to a hashable key tuple, or None to drop the
    row (ksqlDB drops records whose grouping/join key is null).
    """

    df: DataFrame
    schema: LogicalSchema
    side: int
    group_key: Callable[[dict[str, Any]], tuple[Any, ...] | None]


def envelope(inp: KeyedInput, name: str) -> DataFrame:
    """One input's records as envelopes: group key, side, seq, timestamp, partition, pickled row."""
    group_key, side = inp.group_key, inp.side

    def wrap(row: dict[str, Any]) -> list[dict[str, Any]]:
        key = group_key(row)
        if key is None:
            return []
        return [
            {
                GROUP: pickle.dumps(key),
                SIDE: side,
                R.SEQ: row[R.SEQ],
                TS: row[R.ROWTIME],
                PARTITION: row[R.ROWPARTITION],
                ROW: pickle.dumps(row),
            }
        ]

    return R.map_rows(
        inp.df,
        input_schema=inp.schema,
        output_schema=None,
        output_spark_schema=ENVELOPE_SCHEMA,
        fn=wrap,
        name=f"{name}_side{side}",
    )


def with_stream_time(envelopes: DataFrame) -> DataFrame:
    """Adds each record's stream time: the running max of timestamps in input order, per partition."""
    timeline = (
        Window.partitionBy(PARTITION)
        .orderBy(R.SEQ)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return envelopes.withColumn(STREAM_TIME, F.max(TS).over(timeline))


def side_time_column(side: int) -> str:
    """The timeline column with the running max timestamp of one side's records."""
    return f"{STREAM_TIME}_{side}"


def timeline(inputs: Sequence[KeyedInput], *, name: str) -> DataFrame:
    """The envelopes of every input with their stream time and each side's stream time."""
    envelopes: DataFrame | None = None
    for inp in inputs:
        env = envelope(inp, name)
        envelopes = env if envelopes is None else envelopes.unionByName(env)
    assert envelopes is not None
    timed = with_stream_time(envelopes)
    order = (
        Window.partitionBy(PARTITION)
        .orderBy(R.SEQ)
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    for side in sorted({inp.side for inp in inputs}):
        timed = timed.withColumn(
            side_time_column(side), F.max(F.when(F.col(SIDE) == side, F.col(TS))).over(order)
        )
    return timed


def process_keyed(
    inputs: Sequence[KeyedInput],
    *,
    handler: KeyedHandler,
    output_schema: LogicalSchema,
    name: str,
) -> DataFrame:
    """Run ``handler`` over the records of every input, grouped by key, in input order."""
    timed = timeline(inputs, name=name)
    sides = tuple(range(max(inp.side for inp in inputs) + 1))

    encode = R.encoders(output_schema)
    out_spark_schema = R.row_spark_schema(output_schema)
    arrow_schema = R.arrow_schema_of(out_spark_schema)

    def run(table: pa.Table) -> pa.Table:
        records = table.to_pylist()
        records.sort(key=lambda r: r[R.SEQ])
        state: dict[str, Any] = {}
        out: list[dict[str, Any]] = []
        for rec in records:
            row = pickle.loads(rec[ROW])
            produced = handler.process(
                state,
                KeyedRecord(
                    rec[SIDE],
                    tuple(rec[R.SEQ]),
                    row,
                    rec[STREAM_TIME],
                    tuple(rec.get(side_time_column(s)) for s in sides),
                ),
            )
            for p in produced:
                encoded = {sn: conv(p.get(n)) for n, sn, conv in encode}
                for m in R.META_NAMES:
                    encoded[m] = p.get(m)
                out.append(encoded)
        return pa.Table.from_pylist(out, schema=arrow_schema)

    run.__name__ = R._function_name(name)
    run.__qualname__ = run.__name__
    return timed.groupBy(GROUP).applyInArrow(run, out_spark_schema)
