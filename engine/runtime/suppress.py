"""EMIT FINAL on bounded data: each window's last result, emitted when its window closes.

Kafka Streams' suppression buffer keeps the latest result per windowed key and emits it
once the suppress processor's stream time (the largest timestamp of the records reaching
it, per partition) is at least the window end plus the grace period. The record that
advances stream time that far triggers the emission, so the final result takes that
record's seq (plus an index when one record closes several windows, in window-end order).
Tombstones are not emitted. With a retention (``tableSuppressV2``, Kafka Streams' emit on
window close), a window is emitted only if it is still in the window store when it closes:
its start is at least the closing stream time minus the retention.

This is a second DataFrame pass over the aggregate's updates: a per-partition timeline of
stream time gives, for each stream-time level, the first seq reaching it; each window's
close threshold is resolved against that timeline with a range join.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from engine.plan.schema import LogicalSchema
from engine.runtime import rows as R

_ST, _TRIGGER, _KEY, _RANK, _CLOSE, _IDX = "__st", "__trigger", "__k", "__rank", "__close", "__idx"


def suppress_until_window_closes(
    df: DataFrame, schema: LogicalSchema, grace_ms: int, *, retention_ms: int | None = None
) -> DataFrame:
    """The final result of every window whose close the input's stream time reaches
    (and, with ``retention_ms``, that has not expired by then)."""
    columns = df.columns
    part, seq = R.ROWPARTITION, R.SEQ
    timeline_order = (
        Window.partitionBy(part).orderBy(seq).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    levels = (
        df.select(part, seq, R.ROWTIME)
        .withColumn(_ST, F.max(R.ROWTIME).over(timeline_order))
        .groupBy(part, _ST)
        .agg(F.min(seq).alias(_TRIGGER))
    )
    key = F.to_json(F.struct(*[F.col(c.name) for c in schema.key])) if schema.key else F.lit("")
    latest_first = Window.partitionBy(_KEY, R.WINDOWSTART, R.WINDOWEND).orderBy(F.col(seq).desc())
    finals = (
        df.withColumn(_KEY, key)
        .withColumn(_RANK, F.row_number().over(latest_first))
        .where(F.col(_RANK) == 1)
        .where(~F.coalesce(F.col(R.DELETED), F.lit(False)))
        .withColumn(_CLOSE, F.col(R.WINDOWEND) + F.lit(grace_ms))
    )
    f, lv = finals.alias("f"), levels.alias("lv")
    triggers = (
        f.join(lv, F.col(f"f.{part}").eqNullSafe(F.col(f"lv.{part}")) & (F.col(f"lv.{_ST}") >= F.col(f"f.{_CLOSE}")))
        .groupBy(F.col(f"f.{_KEY}").alias(_KEY), F.col(f"f.{R.WINDOWSTART}").alias(R.WINDOWSTART),
                 F.col(f"f.{R.WINDOWEND}").alias(R.WINDOWEND))
        .agg(F.min(F.col(f"lv.{_TRIGGER}")).alias(_TRIGGER), F.min(F.col(f"lv.{_ST}")).alias(_ST))
    )
    if retention_ms is not None:
        # stream time never decreases along seq, so the first trigger has the least level
        triggers = triggers.where(F.col(R.WINDOWSTART) >= F.col(_ST) - F.lit(retention_ms))
    closed = finals.join(triggers.drop(_ST), [_KEY, R.WINDOWSTART, R.WINDOWEND])
    same_trigger = Window.partitionBy(_TRIGGER).orderBy(R.WINDOWEND, _KEY, R.WINDOWSTART)
    emitted = closed.withColumn(_IDX, (F.row_number().over(same_trigger) - 1).cast("long")).withColumn(
        seq, F.concat(F.col(_TRIGGER), F.array(F.col(_IDX)))
    )
    return emitted.select(*columns)
