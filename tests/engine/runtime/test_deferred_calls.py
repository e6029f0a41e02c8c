"""Column calls queued and sent in one round trip when a DataFrame operation uses them."""

from __future__ import annotations

import gc
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.errors import ParseException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from engine.runtime import deferred_calls, round_trips
from tests.engine.runtime.test_session import _Commands


@pytest.fixture
def trips(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> _Commands:
    round_trips.install()
    monkeypatch.setattr(deferred_calls, "ENABLED", True)
    commands = _Commands(monkeypatch)
    commands.start()
    return commands


def _frame(spark: SparkSession) -> DataFrame:
    return spark.createDataFrame(
        [(1, "a", [1, 2], None), (2, None, [3], 2.5), (3, "c", [], 1.0)],
        "ID long, NAME string, XS array<int>, V double",
    )


def _columns() -> list[Any]:
    """Expressions of the kinds step builders make: names, literals, casts, CASE, NULL tests,
    functions over lists, struct fields, IN, arithmetic, a window."""
    name = F.col("NAME")
    return [
        F.col("ID").cast("string").alias("ID_TEXT"),
        F.when(name.isNull(), F.lit("none")).when(name == "a", F.upper(name)).otherwise(name).alias("CASED"),
        F.coalesce(F.col("V"), F.lit(0.0).cast("double")).alias("V0"),
        F.struct(F.col("ID").alias("K"), name.alias("N")).getField("K").alias("K"),
        F.col("ID").isin(1, 3).alias("IN13"),
        (F.col("ID") * 2 + F.lit(1)).alias("ODD"),
        F.size(F.col("XS")).alias("SIZE"),
        F.sum("ID").over(Window.orderBy("ID")).alias("RUNNING"),
        (~F.col("ID").between(2, 3) & F.col("V").isNotNull()).alias("FLAG"),
    ]


def _analysed(df: DataFrame) -> str:
    text = str(df._jdf.queryExecution().analyzed().toString())
    ids: dict[str, str] = {}
    return re.sub(r"#\d+", lambda m: ids.setdefault(m.group(0), f"#{len(ids)}"), text)


def _one_at_a_time(monkeypatch: pytest.MonkeyPatch, work: Callable[[], Any]) -> Any:
    with monkeypatch.context() as m:
        m.setattr(deferred_calls, "ENABLED", False)
        return work()


def test_column_calls_wait_for_the_operation_that_uses_them(spark: SparkSession, trips: _Commands) -> None:
    df = _frame(spark)
    assert _frame(spark).select(*_columns()).columns  # first lookups of classes and settings
    count, columns = trips.of(_columns)
    assert count == 2  # Window.orderBy and its list of names are sent as they come
    count, out = trips.of(lambda: df.select(*columns))
    assert count == 2  # the queued calls in one round trip, then the select
    assert out.columns == ["ID_TEXT", "CASED", "V0", "K", "IN13", "ODD", "SIZE", "RUNNING", "FLAG"]


def test_queued_calls_build_the_plan_and_rows_of_calls_sent_alone(
    spark: SparkSession, trips: _Commands, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued = _frame(spark).select(*_columns())
    alone = _one_at_a_time(monkeypatch, lambda: _frame(spark).select(*_columns()))
    assert _analysed(queued) == _analysed(alone)
    assert queued.orderBy("ID_TEXT").collect() == alone.orderBy("ID_TEXT").collect()


def test_a_failing_queued_call_raises_pysparks_exception_where_it_is_used(
    spark: SparkSession, trips: _Commands, monkeypatch: pytest.MonkeyPatch
) -> None:
    df = _frame(spark)
    with pytest.raises(ParseException) as alone:
        _one_at_a_time(monkeypatch, lambda: F.col("ID").cast("no such type"))
    bad = F.col("ID").cast("no such type")  # queued: nothing fails yet
    named = bad.alias("X")  # names the failed call: answers its exception, never runs
    fine = F.col("NAME").alias("N")  # same queue, independent: runs
    for column in (bad, named):
        with pytest.raises(ParseException) as queued:
            df.select(column)
        assert queued.value.getCondition() == alone.value.getCondition()
    assert df.select(fine).columns == ["N"]


def _bindings(spark: SparkSession) -> int:
    gc.collect()
    time.sleep(0.3)  # the finalizer thread's releases
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    return int(gateway.java_gateway_server.getGateway().getBindings().size())


def test_results_python_dropped_before_their_queue_ran_are_released(spark: SparkSession, trips: _Commands) -> None:
    df = _frame(spark)
    assert df.select(F.col("ID") + 1).columns
    before = _bindings(spark)
    for i in range(200):
        F.col("ID") + i  # dropped at once (F.lit's Columns are kept: round_trips)
    assert df.select(F.col("ID") + 2).columns  # runs the queue
    assert _bindings(spark) - before < 20


def test_a_full_queue_runs_at_once(spark: SparkSession, trips: _Commands, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deferred_calls, "MAX_QUEUED", 5)
    name = F.col("ID")
    count, kept = trips.of(lambda: [name + i for i in range(12)])
    assert count == 2  # after the 5th and the 10th call
    alone = _one_at_a_time(monkeypatch, lambda: [F.col("ID") + i for i in range(12)])
    assert [str(c) for c in kept] == [str(c) for c in alone]


def test_a_column_queued_on_one_thread_is_used_on_another(spark: SparkSession, trips: _Commands) -> None:
    df = _frame(spark)
    made: list[Any] = []
    maker = threading.Thread(target=lambda: made.append(F.upper(F.col("NAME")).alias("UP")))
    maker.start()
    maker.join()
    rows = df.select(made[0]).orderBy("UP").collect()
    assert [r.UP for r in rows] == [None, "A", "C"]


def test_calls_go_one_at_a_time_when_the_queue_is_off(
    spark: SparkSession, trips: _Commands, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued = F.upper(F.col("NAME"))  # in the thread's queue when it is turned off
    monkeypatch.setattr(deferred_calls, "ENABLED", False)
    name = F.col("ID")
    assert not isinstance(name._jc, deferred_calls.DeferredObject) or name._jc._id is not None
    count, column = trips.of(lambda: name.alias("I"))
    # The alias alone, after the queue left open (if no call has run it since) in one round trip.
    assert count in (1, 2) and trips.sent[-1].split("\n")[2] == "as"
    assert not isinstance(column._jc, deferred_calls.DeferredObject)
    assert _frame(spark).select(queued.alias("UP")).orderBy("UP").collect()[1].UP == "A"


def test_a_pipeline_that_does_not_compile_is_logged_and_calls_go_alone(
    spark: SparkSession, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = spark.sparkContext._gateway
    assert gateway is not None
    with caplog.at_level("WARNING", logger=deferred_calls.__name__):
        found = deferred_calls._compile_pipeline(gateway._gateway_client, "public class CallPipeline {")
    assert found is None
    assert "CallPipeline.java did not compile" in caplog.text and "CompileException" in caplog.text
