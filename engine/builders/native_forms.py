"""Which record formats the native source and sink versions read in Spark, without Spark.

The builders (``engine.builders.native_io``, ``engine.builders.native_io_v3``) need a
SparkContext; the planner only needs to know whether a source's formats and columns have a
native form, to plan the versions that read a form in Spark only where they change
something. Both read the rules here, so the two cannot disagree.

Each rule is a level, frozen once a step version builds with it:

- **Level 1** (``streamSourceV2``..``V4``, ``tableSourceV2``/``V3``, every native sink):
  keys none, KAFKA (INT, BIGINT, STRING) or JSON; values NONE, JSON (wrapped or unwrapped)
  or KAFKA; JSON columns of BOOLEAN, INT, BIGINT, DOUBLE, STRING.
- **Level 2** (``streamSourceV5``/``V6``, ``tableSourceV4``): level 1, and DELIMITED keys
  and values of the same column types.

At every level: non-windowed topics, a timestamp column of type BIGINT or none.
"""

from __future__ import annotations

from engine.builders.formats import serdes_for
from engine.errors import InternalError
from engine.plan import steps as S
from engine.plan import types as T
from engine.plan.schema import LogicalSchema
from engine.serde import RecordSerde

JSON_TYPES = frozenset(
    {T.BaseType.BOOLEAN, T.BaseType.INTEGER, T.BaseType.BIGINT, T.BaseType.DOUBLE, T.BaseType.STRING}
)
KAFKA_TYPES = frozenset({T.BaseType.INTEGER, T.BaseType.BIGINT, T.BaseType.STRING})
DELIMITED_TYPES = JSON_TYPES
LEVELS = (1, 2)


def _serde_reason(serde: RecordSerde, part: str, level: int) -> str | None:
    """Why ``serde`` has no native form at ``level`` (None: it has one)."""
    if not serde.columns:
        return None
    name = serde.format.name
    types = {c.type.base for c in serde.columns}
    if name == "JSON":
        bad = [str(c.type) for c in serde.columns if c.type.base not in JSON_TYPES]
        return None if not bad else f"{part} type {bad[0]} has no native JSON form yet"
    if name == "KAFKA":
        return None if types <= KAFKA_TYPES else f"{part} type {serde.columns[0].type} in KAFKA has no native form yet"
    if name == "DELIMITED" and level >= 2:
        bad = [str(c.type) for c in serde.columns if c.type.base not in DELIMITED_TYPES]
        return None if not bad else f"{part} type {bad[0]} has no native DELIMITED form yet"
    return f"{part} format {name} has no native form yet"


def native_reason(
    formats: S.Formats,
    schema: LogicalSchema,
    timestamp: S.TimestampColumn | None,
    *,
    windowed: bool = False,
    level: int = 1,
) -> str | None:
    """Why a source or sink with these formats and columns runs in Python at ``level``
    (None: native)."""
    if level not in LEVELS:
        raise InternalError(f"No native format level {level} (a bug): the levels are {LEVELS}.")
    if windowed:
        return "windowed keys have no native form yet"
    key, value = serdes_for(formats, schema.columns)
    for serde, part in ((key, "key"), (value, "value")):
        reason = _serde_reason(serde, part, level)
        if reason is not None:
            return reason
    if timestamp is not None:
        column = schema.find(timestamp.column)
        if column is not None and column.type.base is not T.BaseType.BIGINT:
            return f"a {column.type} timestamp column has no native form yet"
    return None


def level_2_reads(formats: S.Formats, schema: LogicalSchema, timestamp: S.TimestampColumn | None) -> bool:
    """Whether level 2 reads a source natively that level 1 reads in Python: the planner
    plans the level-2 source versions for such a source only."""
    return native_reason(formats, schema, timestamp) is not None and native_reason(
        formats, schema, timestamp, level=2
    ) is None
