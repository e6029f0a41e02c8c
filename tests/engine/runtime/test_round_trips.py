"""Fewer Py4J round trips: lists in chunks, data types parsed once, names and literals kept."""

from __future__ import annotations

import decimal
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as ST

from engine.runtime import deferred_calls, round_trips
from tests.engine.runtime.test_session import _Commands


@pytest.fixture
def trips(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> _Commands:
    round_trips.install()  # the shared session installs it; a second call changes nothing
    # Counted one call at a time: queued calls (tests/engine/runtime/test_deferred_calls.py)
    # would make no round trip until a call uses them.
    monkeypatch.setattr(deferred_calls, "ENABLED", False)
    commands = _Commands(monkeypatch)
    commands.start()
    return commands


@pytest.mark.parametrize("size", [0, 1, 2, 3, 10, 11, 25])
def test_a_list_reaches_the_jvm_whole_and_in_order(spark: SparkSession, trips: _Commands, size: int) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    values = [f"v{i}" for i in range(size)]
    jvm.PythonUtils.toSeq(["warm", "the", "lookups"])  # first lookups of a class are round trips of their own
    count, seq = trips.of(lambda: jvm.PythonUtils.toSeq(values))
    assert seq.toString() == f"List({', '.join(values)})"
    # One add per element used to follow the ArrayList's constructor: size + 2 in all. Up to
    # 10 elements are one List.of, which toSeq copies.
    assert count == (2 if 0 < size <= 10 else size + 2 if size < 3 else 2 + 2 * -(-size // 10))


def test_a_list_holding_none_and_nested_lists_still_converts(spark: SparkSession, trips: _Commands) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    _, seq = trips.of(lambda: jvm.PythonUtils.toSeq(["a", None, "b", "c"]))
    assert seq.toString() == "List(a, null, b, c)"
    _, nested = trips.of(lambda: jvm.PythonUtils.toSeq([[1, 2, 3], [4], [5, 6, 7, 8]]))
    assert nested.toString() == "List([1, 2, 3], [4], [5, 6, 7, 8])"


def test_a_select_of_many_columns_gives_the_same_frame(spark: SparkSession, trips: _Commands) -> None:
    df = spark.range(2).selectExpr("id AS a", "id * 2 AS b")
    names = ["a", "b"] * 8

    def select() -> Any:
        return df.select(*[F.col(n).alias(f"{n}{i}") for i, n in enumerate(names)])

    select()  # first lookups of classes and settings are round trips of their own
    count, out = trips.of(select)
    assert out.columns == [f"{n}{i}" for i, n in enumerate(names)]
    assert out.collect()[1] == tuple([1, 2] * 8)
    # 16 aliases and the select's list: 16 + 5, where one add per element made it 16 + 18.
    assert count <= 16 + 8


@pytest.mark.parametrize("method", ["cast", "try_cast"])
@pytest.mark.parametrize(
    ("data_type", "name"),
    [
        (ST.LongType(), "bigint"),
        (ST.DecimalType(12, 3), "decimal(12,3)"),
        (ST.ArrayType(ST.StringType()), "array<string>"),
        (ST.StructType([ST.StructField("X", ST.IntegerType())]), "struct<X:int>"),
    ],
)
def test_a_cast_to_a_data_type_builds_the_cast_to_its_name_in_one_round_trip(
    trips: _Commands, method: str, data_type: ST.DataType, name: str
) -> None:
    column = F.col("a")
    by_type = getattr(column, method)(data_type)
    count, again = trips.of(lambda: getattr(column, method)(data_type))
    assert count == 1
    assert str(again) == str(by_type) == str(getattr(column, method)(name))


def test_a_cast_to_a_data_type_not_seen_before_parses_it_without_asking_for_the_session(trips: _Commands) -> None:
    import uuid

    F.col("a").cast(ST.LongType())  # first lookups of classes
    new_type = ST.StructType([ST.StructField(f"F_{uuid.uuid4().hex}", ST.DecimalType(7, 2))])
    count, column = trips.of(lambda: F.col("a").cast(new_type))
    assert count == 2  # DataType.fromJson and the cast; PySpark's way made 4
    assert not any("getActiveSession" in c for c in trips.sent)
    assert str(column) == str(F.col("a").cast(new_type.simpleString()))


def test_a_cast_to_something_else_fails_as_pyspark_says(trips: _Commands) -> None:
    with pytest.raises(Exception, match="NOT_DATATYPE_OR_STR"):
        F.col("a").cast(3)  # type: ignore[arg-type]


def test_names_and_literals_are_asked_for_once(trips: _Commands) -> None:
    F.col("kept_name")
    F.lit("kept text")
    assert trips.of(lambda: F.col("kept_name"))[0] == 0
    assert trips.of(lambda: F.lit("kept text"))[0] == 0
    assert trips.of(lambda: F.col("kept_name") + F.lit("kept text"))[0] == 1  # the plus only


@pytest.mark.parametrize(
    ("one", "other"),
    [(0.0, -0.0), (1, True), (0, False), (1, 1.0), ("1", 1), (float("nan"), float("inf"))],
)
def test_literals_that_python_finds_equal_stay_apart(spark: SparkSession, trips: _Commands, one: Any, other: Any) -> None:
    (row,) = spark.range(1).select(F.lit(one).alias("one"), F.lit(other).alias("other")).collect()
    assert repr(row.one) == repr(one) and repr(row.other) == repr(other)
    assert str(F.lit(one)) != str(F.lit(other))


def test_other_literals_are_asked_for_each_time(trips: _Commands) -> None:
    F.lit(decimal.Decimal("1.50"))
    assert trips.of(lambda: F.lit(decimal.Decimal("1.50")))[0] == 1
    assert str(F.lit(decimal.Decimal("1.50"))) == "Column<'1.50'>"


def test_kept_columns_are_bounded(trips: _Commands, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(round_trips, "MEMO_SIZE", 3)
    for i in range(5):
        F.col(f"bounded_{i}")
    assert trips.of(lambda: F.col("bounded_4"))[0] == 0
    assert trips.of(lambda: F.col("bounded_0"))[0] == 1  # evicted: asked again


def _analysed(df: Any) -> str:
    """The analysed plan with expression ids numbered in order of appearance."""
    import re

    text = str(df._jdf.queryExecution().analyzed().toString())
    ids: dict[str, str] = {}
    return re.sub(r"#\d+", lambda m: ids.setdefault(m.group(0), f"#{len(ids)}"), text)


def _plus_one(values: pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    return pc.add(values, 1)


def test_a_python_udf_is_created_and_called_in_five_round_trips(spark: SparkSession, trips: _Commands) -> None:
    from pyspark.sql.udf import UserDefinedFunction

    df = spark.range(3).selectExpr("id AS a")
    F.arrow_udf(_plus_one, ST.LongType())(F.col("a"))  # first lookups of classes and settings
    count, column = trips.of(lambda: F.arrow_udf(_plus_one, ST.LongType())(F.col("a")))
    # PySpark's own path asks for the session (2), the broadcast threshold, a new environment
    # map (2), two lists and the return type besides the function (2), and two profiler
    # settings before the call (4): 16 round trips. kspark's sends the function, the UDF, and
    # the call with its list of one column (3).
    assert count == 5
    pyspark_column = UserDefinedFunction.__call__.__wrapped__(  # type: ignore[attr-defined]
        F.arrow_udf(_plus_one, ST.LongType())._unwrapped, F.col("a")  # type: ignore[attr-defined]
    )
    ours, theirs = df.select(column.alias("b")), df.select(pyspark_column.alias("b"))
    assert _analysed(ours) == _analysed(theirs)
    assert [r.b for r in ours.collect()] == [r.b for r in theirs.collect()] == [1, 2, 3]


def test_a_python_udf_holding_a_broadcast_variable_goes_pysparks_own_way(spark: SparkSession) -> None:
    offset = spark.sparkContext.broadcast(10)

    def shifted(values: pa.Array) -> pa.Array:
        import pyarrow.compute as pc

        return pc.add(values, offset.value)

    out = spark.range(2).select(F.arrow_udf(shifted, ST.LongType())(F.col("id")).alias("b"))
    assert [r.b for r in out.collect()] == [10, 11]
    # Nothing of it is left behind for the next UDF to carry.
    plain = spark.range(1).select(F.arrow_udf(_plus_one, ST.LongType())(F.col("id")).alias("b"))
    assert plain.collect()[0].b == 1


def _batches_plus_one(batches: Any) -> Any:
    import pyarrow.compute as pc

    for batch in batches:
        yield pa.RecordBatch.from_arrays(
            [pc.add(batch.column(0), 1), batch.column(1)], names=["__seq", "KSQL_COL_0"]
        )


def test_map_in_arrow_passes_the_columns_by_name_to_the_same_plan(spark: SparkSession, trips: _Commands) -> None:
    from pyspark.sql.pandas.map_ops import PandasMapOpsMixin

    df = spark.range(3).selectExpr("id AS __seq", "CAST(id AS STRING) AS KSQL_COL_0")
    schema = df.schema
    df.mapInArrow(_batches_plus_one, schema)  # first lookups of classes and settings
    count, ours = trips.of(lambda: df.mapInArrow(_batches_plus_one, schema))
    pyspark_count, theirs = trips.of(
        lambda: PandasMapOpsMixin.mapInArrow.__wrapped__(df, _batches_plus_one, schema)  # type: ignore[attr-defined]
    )
    assert count <= pyspark_count - len(schema.fields)  # one round trip less per column
    assert _analysed(ours) == _analysed(theirs)
    assert ours.collect() == theirs.collect() == [(1, "0"), (2, "1"), (3, "2")]


def _held_by_the_jvm(spark: SparkSession, target_ids: list[str]) -> list[str]:
    bindings = spark.sparkContext._gateway.java_gateway_server.getGateway().getBindings()
    return [i for i in target_ids if bindings.containsKey(i)]


def test_released_objects_are_dropped_by_the_jvm_in_one_write(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    jvm = spark.sparkContext._jvm
    client = spark.sparkContext._gateway._gateway_client
    held = [jvm.java.util.ArrayList() for _ in range(50)]
    ids = [obj._target_id for obj in held]
    assert _held_by_the_jvm(spark, ids) == ids
    connection = client._get_connection()
    client._give_back_connection(connection)
    writes: list[bytes] = []
    send = connection.socket.sendall
    monkeypatch.setattr(connection, "socket", SimpleNamespace(sendall=lambda data: (writes.append(data), send(data))))
    round_trips.release_objects(client, ids)
    monkeypatch.undo()
    assert len(writes) == 1 and writes[0].count(b"m\nd\n") == 50
    assert _held_by_the_jvm(spark, ids) == []
    assert jvm.java.lang.Math.max(2, 3) == 3  # the connection still answers in turn


def test_py4j_s_finalizer_thread_releases_in_batches(spark: SparkSession) -> None:
    import gc
    import time

    from py4j import clientserver

    assert clientserver.FinalizerWorker.run is round_trips._release_in_batches
    jvm = spark.sparkContext._jvm
    ids = [jvm.java.util.ArrayList()._target_id for _ in range(30)]  # dropped at once
    gc.collect()
    deadline = time.monotonic() + 10
    while _held_by_the_jvm(spark, ids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _held_by_the_jvm(spark, ids) == []


def test_plain_arguments_skip_the_input_converters(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    from py4j.java_collections import ListConverter

    jvm = spark.sparkContext._jvm
    offered: list[Any] = []
    can_convert = ListConverter.can_convert

    def watched(self: Any, value: Any) -> bool:
        offered.append(value)
        return bool(can_convert(self, value))

    monkeypatch.setattr(ListConverter, "can_convert", watched)
    assert jvm.java.lang.Integer.sum(2, 3) == 5
    assert jvm.java.lang.Double.sum(1.5, 2.0) == 3.5
    assert jvm.java.lang.Boolean.logicalAnd(True, False) is False
    assert jvm.java.lang.String.valueOf("x") == "x"
    assert jvm.java.util.Objects.isNull(None) is True
    assert jvm.java.util.Objects.toString(b"ab").startswith("[B")
    assert offered == []
    assert jvm.java.util.Collections.max(["b", "c", "a"]) == "c"  # a list still converts
    assert offered == [["b", "c", "a"]]
