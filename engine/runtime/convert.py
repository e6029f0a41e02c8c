"""SQL types as Spark types, and engine values to and from Spark's Arrow/Python values.

Mapping: BOOLEAN boolean, INTEGER int, BIGINT bigint, DOUBLE double, DECIMAL(p,s)
decimal(p,s) (precision above Spark's 38 is carried as its string form), STRING string,
BYTES binary, DATE date, TIME bigint milliseconds of the day, TIMESTAMP timestamp (UTC),
ARRAY array, MAP array<struct<key, value>> (ksqlDB maps may hold a NULL key, which Spark's
map type cannot), STRUCT struct.

Converters are built once per type and applied per value; identity where the two
representations agree.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable
from typing import Any

from pyspark.sql import types as ST

from engine.data.values import time_from_millis, time_to_millis
from engine.plan import types as T
from engine.plan.types import SqlType

SPARK_MAX_DECIMAL_PRECISION = 38

Converter = Callable[[Any], Any]


def _identity(value: Any) -> Any:
    return value


def spark_type(t: SqlType) -> ST.DataType:
    """The Spark type that carries values of SQL type ``t``."""
    base = t.base
    if isinstance(t, T.Decimal):
        if t.precision > SPARK_MAX_DECIMAL_PRECISION:
            return ST.StringType()
        return ST.DecimalType(t.precision, t.scale)
    if isinstance(t, T.Array):
        return ST.ArrayType(spark_type(t.item), containsNull=True)
    if isinstance(t, T.Map):
        entry = ST.StructType(
            [
                ST.StructField("key", spark_type(t.key), nullable=True),
                ST.StructField("value", spark_type(t.value), nullable=True),
            ]
        )
        return ST.ArrayType(entry, containsNull=False)
    if isinstance(t, T.Struct):
        return ST.StructType(
            [ST.StructField(f.name, spark_type(f.type), nullable=True) for f in t.fields]
        )
    return _PRIMITIVES[base]()


_PRIMITIVES: dict[T.BaseType, Callable[[], ST.DataType]] = {
    T.BaseType.BOOLEAN: ST.BooleanType,
    T.BaseType.INTEGER: ST.IntegerType,
    T.BaseType.BIGINT: ST.LongType,
    T.BaseType.DOUBLE: ST.DoubleType,
    T.BaseType.STRING: ST.StringType,
    T.BaseType.BYTES: ST.BinaryType,
    T.BaseType.DATE: ST.DateType,
    T.BaseType.TIME: ST.LongType,
    T.BaseType.TIMESTAMP: ST.TimestampType,
}


def _needs_conversion(t: SqlType) -> bool:
    if t.base in (T.BaseType.TIMESTAMP, T.BaseType.TIME, T.BaseType.MAP):
        return True
    if isinstance(t, T.Decimal):
        return t.precision > SPARK_MAX_DECIMAL_PRECISION
    if isinstance(t, T.Array):
        return _needs_conversion(t.item)
    if isinstance(t, T.Struct):
        return any(_needs_conversion(f.type) for f in t.fields)
    return False


def from_spark(t: SqlType) -> Converter:
    """A converter from the value Arrow's ``to_pylist`` gives to the engine's value."""
    if not _needs_conversion(t):
        return _identity
    if t.base is T.BaseType.TIMESTAMP:
        return _timestamp_from_spark
    if t.base is T.BaseType.TIME:
        return lambda v: None if v is None else time_from_millis(v)
    if isinstance(t, T.Decimal):
        return lambda v: None if v is None else decimal.Decimal(v)
    if isinstance(t, T.Array):
        item = from_spark(t.item)
        return lambda v: None if v is None else [item(x) for x in v]
    if isinstance(t, T.Map):
        k, val = from_spark(t.key), from_spark(t.value)
        return lambda v: None if v is None else {k(e["key"]): val(e["value"]) for e in v}
    if isinstance(t, T.Struct):
        convs = [(f.name, from_spark(f.type)) for f in t.fields]
        return lambda v: None if v is None else {n: c(v.get(n)) for n, c in convs}
    return _identity


def to_spark(t: SqlType) -> Converter:
    """A converter from the engine's value to what Arrow's ``from_pylist`` accepts."""
    if not _needs_conversion(t):
        return _identity
    if t.base is T.BaseType.TIMESTAMP:
        return _identity
    if t.base is T.BaseType.TIME:
        return lambda v: None if v is None else time_to_millis(v)
    if isinstance(t, T.Decimal):
        return lambda v: None if v is None else str(v)
    if isinstance(t, T.Array):
        item = to_spark(t.item)
        return lambda v: None if v is None else [item(x) for x in v]
    if isinstance(t, T.Map):
        k, val = to_spark(t.key), to_spark(t.value)
        return lambda v: (
            None if v is None else [{"key": k(a), "value": val(b)} for a, b in v.items()]
        )
    if isinstance(t, T.Struct):
        convs = [(f.name, to_spark(f.type)) for f in t.fields]
        return lambda v: None if v is None else {n: c(v.get(n)) for n, c in convs}
    return _identity


def _timestamp_from_spark(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value
