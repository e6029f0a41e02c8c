"""Outer-join window closes: pending outer-store entries emitted once stream time passes them.

A stream-stream outer join with a grace period keeps an unmatched record in Kafka Streams'
shared "outer store" until its window closes by stream time; the join handler sees only its
key, so it emits the record as a *pending* entry (``KIND`` = ``PENDING_ENTRY``, with the
stream time ``CLOSE`` after which it closes) and a *cancel* marker when a later record of its
key matches it. Kafka Streams emits every closed entry of the store (all keys, ordered by
timestamp, then right before left) when a record whose timestamp equals the stream time
arrives: the first such record after the put whose stream time exceeds the close emits the
null-joined row, with that record's seq (``seq + [0, rank]``, before the record's own outputs
at ``seq + [1, i]``), unless the entry was cancelled before.

``resolve_closes`` is the plain-Python statement of that rule; ``resolve_closes_df`` is the
bounded runtime's DataFrame pass; the streaming runtime applies the same rule record by record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from engine.plan import types as T
from engine.plan.schema import Column, LogicalSchema
from engine.runtime import keyed as K
from engine.runtime import rows as R

Row = dict[str, Any]

KIND = "__join_kind"  # 0: a result row, 1: a pending outer-store entry, 2: a cancel marker
PENDING = "__join_pending"  # the seq of the record that put the entry
CLOSE = "__join_close"  # the entry is emitted once stream time exceeds this
ORDER = "__join_order"  # store order at equal timestamps: right (0) before left (1)
RESULT, PENDING_ENTRY, CANCEL = 0, 1, 2

INTERNAL_COLUMNS = (
    Column(KIND, T.INTEGER),
    Column(PENDING, T.Array(T.BIGINT)),
    Column(CLOSE, T.BIGINT),
    Column(ORDER, T.INTEGER),
)



def resolve_closes(rows: Sequence[Row], timeline: Sequence[Row]) -> list[Row]:
    """Plain-Python ``resolve_closes``: results plus the pending entries that close, by seq.

    ``timeline`` holds every join input record as ``{seq, ts, stream_time, partition}``.
    """
    triggers = [t for t in timeline if t["ts"] == t["stream_time"]]
    triggers.sort(key=lambda t: t["seq"])
    cancels: dict[tuple[int, ...], list[int]] = {}
    for r in rows:
        if r.get(KIND) == CANCEL:
            pid = tuple(r[PENDING])
            cancels[pid] = min(cancels.get(pid) or r[R.SEQ], r[R.SEQ])
    out = [r for r in rows if r.get(KIND) in (None, RESULT)]
    by_trigger: dict[tuple[int, ...], list[Row]] = {}
    for r in rows:
        if r.get(KIND) != PENDING_ENTRY:
            continue
        put = list(r[PENDING])
        trigger = next(
            (
                t for t in triggers
                if t["partition"] == r[R.ROWPARTITION] and list(t["seq"]) > put
                and t["stream_time"] > r[CLOSE]
            ),
            None,
        )
        if trigger is None:
            continue
        cancelled = cancels.get(tuple(put))
        if cancelled is not None and list(cancelled) < list(trigger["seq"]):
            continue
        by_trigger.setdefault(tuple(trigger["seq"]), []).append(r)
    for tseq, entries in by_trigger.items():
        entries.sort(key=lambda r: (r[R.ROWTIME], r[ORDER], r[PENDING]))
        for rank, r in enumerate(entries):
            emitted = dict(r)
            emitted[R.SEQ] = [*tseq, 0, rank]
            out.append(emitted)
    out.sort(key=lambda r: r[R.SEQ])
    return [{k: v for k, v in r.items() if k not in (KIND, PENDING, CLOSE, ORDER)} for r in out]


def resolve_closes_df(results: DataFrame, timeline: DataFrame, schema: LogicalSchema) -> DataFrame:
    """Spark version of ``resolve_closes`` over the handler output and the input timeline."""
    kind, pid, close, order = (R.spark_name(n) for n in (KIND, PENDING, CLOSE, ORDER))
    names = [c.name for c in R.row_spark_schema(schema).fields]
    results = results.fillna({kind: RESULT})
    final = results.filter(F.col(kind) == RESULT).select(*names)
    pending = results.filter(F.col(kind) == PENDING_ENTRY)
    cancels = (
        results.filter(F.col(kind) == CANCEL)
        .groupBy(F.col(pid).alias("__c_pid"))
        .agg(F.min(R.SEQ).alias("__c_seq"))
    )
    triggers = timeline.filter(F.col(K.TS) == F.col(K.STREAM_TIME)).select(
        F.col(K.PARTITION).alias("__t_part"),
        F.col(R.SEQ).alias("__t_seq"),
        F.col(K.STREAM_TIME).alias("__t_time"),
    )
    candidates = pending.join(
        triggers,
        (F.col(R.ROWPARTITION) == F.col("__t_part"))
        & (F.col("__t_seq") > F.col(pid))
        & (F.col("__t_time") > F.col(close)),
    )
    first = candidates.groupBy(pid).agg(F.min("__t_seq").alias("__t_seq"))
    closing = (
        pending.join(first, pid)
        .join(cancels, F.col(pid) == F.col("__c_pid"), "left")
        .filter(F.col("__c_seq").isNull() | (F.col("__c_seq") > F.col("__t_seq")))
    )
    rank = F.row_number().over(Window.partitionBy("__t_seq").orderBy(R.ROWTIME, order, pid)) - 1
    closing = closing.withColumn(
        R.SEQ, F.concat(F.col("__t_seq"), F.array(F.lit(0).cast("long"), rank.cast("long")))
    )
    return final.unionByName(closing.select(*names))
