"""The shared SparkSession's set-up for small jobs: warm workers, cached JVM lookups, interpreted runs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from py4j.clientserver import JavaClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from engine.runtime import session as session_module
from engine.runtime.session import INTERPRETED_CONF, name_call_site, session_conf


def test_python_workers_start_with_the_engine_frozen_out_of_the_collector(spark: SparkSession) -> None:
    # The daemon froze the imported engine: the full collection Spark's worker loop runs
    # after each task then skips it.
    def frozen(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import gc

        for batch in batches:
            yield pa.RecordBatch.from_pylist([{"frozen": gc.get_freeze_count()}] * batch.num_rows)

    (row,) = spark.range(1).mapInArrow(frozen, "frozen long").collect()
    assert row.frozen > 10_000  # 0 unfrozen; the engine's modules alone are tens of thousands


class _Commands:
    """The Py4J commands the calling thread sends to the JVM once ``start`` is called. The
    releases Py4J's finalizer thread sends, whenever Python drops a JVM object, and what other
    threads send meanwhile (a streaming query listener's callbacks of an earlier test's query,
    say) are kept apart."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[str] = []
        self.releases: list[str] = []
        self.others: list[str] = []
        self._monkeypatch = monkeypatch

    def start(self) -> list[str]:
        send = JavaClient.send_command
        caller = threading.get_ident()

        def counting(client: Any, command: str, *args: Any, **kwargs: Any) -> Any:
            if command.startswith("m\nd\n"):
                self.releases.append(command)
            elif threading.get_ident() != caller:
                self.others.append(command)
            else:
                self.sent.append(command)
            return send(client, command, *args, **kwargs)

        self._monkeypatch.setattr(JavaClient, "send_command", counting)
        return self.sent

    def of(self, call: Callable[[], Any]) -> tuple[int, Any]:
        """How many commands ``call`` sends (counting must have started), and its result."""
        self.sent.clear()
        result = call()
        return len(self.sent), result


@pytest.fixture
def jvm_commands(monkeypatch: pytest.MonkeyPatch) -> _Commands:
    return _Commands(monkeypatch)


def test_a_jvm_class_is_looked_up_once(spark: SparkSession, jvm_commands: _Commands) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    first = jvm.org.apache.spark.sql.api.python.PythonSQLUtils
    commands = jvm_commands.start()
    again = jvm.org.apache.spark.sql.api.python.PythonSQLUtils
    assert again is first
    assert commands == []


def test_a_cached_jvm_class_still_constructs_and_calls(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    for _ in range(2):
        values = jvm.java.util.ArrayList()
        values.add("a")
        assert values.size() == 1
        assert jvm.java.lang.Math.max(2, 3) == 3


def test_a_spark_function_is_looked_up_once_and_a_static_field_each_time(
    spark: SparkSession, jvm_commands: _Commands, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql import functions as F

    from engine.runtime import deferred_calls

    monkeypatch.setattr(deferred_calls, "ENABLED", False)  # each call sent as it is made
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    F.upper(F.col("x"))  # looked up here, if no test did before
    commands = jvm_commands.start()
    column = F.upper(F.col("x"))
    assert not [c for c in commands if c.startswith("r\n")]  # no reflection: calls only
    assert len(commands) == 1  # upper (col("x") is kept: engine.runtime.round_trips)
    assert str(column) == "Column<'upper(x)'>"
    commands.clear()
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    assert jvm.java.lang.Integer.MAX_VALUE == 2**31 - 1
    assert len([c for c in commands if c.startswith("r\nm\n")]) == 2  # a field is read each time


def test_session_conf_runs_the_block_interpreted_and_restores_the_settings(spark: SparkSession) -> None:
    before = spark.conf.get("spark.sql.codegen.wholeStage")
    with session_conf(spark, INTERPRETED_CONF):
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
        plan = spark.range(3).selectExpr("id * 2 AS x")._jdf.queryExecution().executedPlan().toString()
        assert spark.range(3).selectExpr("id * 2 AS x").collect()[2].x == 4
    assert "*(" not in plan
    assert spark.conf.get("spark.sql.codegen.wholeStage") == before
    restored = spark.range(3).selectExpr("id * 2 AS x")._jdf.queryExecution().executedPlan().toString()
    assert "*(1)" in restored


def test_session_conf_restores_the_settings_when_the_block_raises(spark: SparkSession) -> None:
    before = spark.conf.get("spark.sql.codegen.wholeStage")
    with pytest.raises(RuntimeError), session_conf(spark, INTERPRETED_CONF):
        raise RuntimeError("the block failed")
    assert spark.conf.get("spark.sql.codegen.wholeStage") == before


class _Builder:
    """Records what a session would start with, in place of SparkSession.builder."""

    def __init__(self) -> None:
        self.conf: dict[str, str] = {}

    def master(self, _: str) -> _Builder:
        return self

    def appName(self, _: str) -> _Builder:  # noqa: N802 - SparkSession.Builder's name
        return self

    def config(self, key: str, value: str) -> _Builder:
        self.conf[key] = value
        return self

    def getOrCreate(self) -> Any:  # noqa: N802
        return SimpleNamespace(sparkContext=SimpleNamespace(setLogLevel=lambda _: None))


@pytest.mark.parametrize("long_running", [False, True])
def test_a_long_running_session_compiles_with_c2_and_a_short_one_with_c1_only(
    monkeypatch: pytest.MonkeyPatch, long_running: bool
) -> None:
    builder = _Builder()
    monkeypatch.setattr(session_module, "_session", None)
    monkeypatch.setattr(session_module, "SparkSession", SimpleNamespace(builder=builder))
    monkeypatch.setattr(session_module, "cache_jvm_lookups", lambda: None)
    session_module.get_spark(long_running=long_running)
    options = builder.conf["spark.driver.extraJavaOptions"]
    assert ("-XX:TieredStopAtLevel=1" in options) is not long_running
    assert "-XX:ReservedCodeCacheSize=256m" in options
    assert builder.conf["spark.python.sql.dataFrameDebugging.enabled"] == "false"
    assert builder.conf["spark.sql.dataFrameQueryContext.enabled"] == "false"


def test_columns_are_built_without_walking_the_jvm_stack_for_their_call_site(spark: SparkSession) -> None:
    # With the DataFrame query context on, Spark would record the stack it walked.
    assert not F.col("x")._jc.node().origin().stackTrace().isDefined()


def test_a_named_call_site_holds_for_the_calling_thread_only(spark: SparkSession) -> None:
    import threading

    jsc = spark.sparkContext._jsc.sc()
    name_call_site(spark, "kspark: write OUTPUT")
    assert jsc.getCallSite().shortForm() == jsc.getCallSite().longForm() == "kspark: write OUTPUT"
    elsewhere: list[str] = []
    thread = threading.Thread(target=lambda: elsewhere.append(jsc.getCallSite().shortForm()))
    thread.start()
    thread.join()
    assert elsewhere and elsewhere[0] != "kspark: write OUTPUT"


def _compilations(spark: SparkSession) -> int:
    return int(spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount())


def test_the_interpreted_session_compiles_nothing_and_shows_the_whole_stage_plan(spark: SparkSession) -> None:
    from qtt.plans.normalise import normalise_physical_plan

    interpreted = session_module.interpreted_session()
    assert interpreted is session_module.interpreted_session()  # made once
    factor = 104_729  # a literal no other test compiles code for

    def query(on: SparkSession) -> Any:
        return on.range(5).selectExpr(f"id * {factor} AS x").filter("x > 0")

    before = _compilations(spark)
    assert [r.x for r in query(interpreted).collect()] == [factor * i for i in range(1, 5)]
    assert _compilations(spark) == before
    text = session_module.physical_plan_text(query(interpreted))
    assert "*(1)" in text
    assert normalise_physical_plan(text) == normalise_physical_plan(
        session_module.physical_plan_text(query(spark))
    )
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"  # the shared one unchanged


def test_the_whole_stage_plan_leaves_the_thread_s_active_session_as_it_was(spark: SparkSession) -> None:
    sessions = spark._jvm.org.apache.spark.sql.classic.SparkSession
    interpreted = session_module.interpreted_session()
    sessions.setActiveSession(interpreted._jsparkSession)
    try:
        session_module.physical_plan_text(interpreted.range(2).selectExpr("id + 1 AS y"))
        assert sessions.getActiveSession().get().equals(interpreted._jsparkSession)
    finally:
        sessions.setActiveSession(spark._jsparkSession)


def test_other_sessions_show_the_plan_they_run(spark: SparkSession) -> None:
    with session_conf(spark, INTERPRETED_CONF):  # a session whose settings a block changed
        text = session_module.physical_plan_text(spark.range(3).selectExpr("id * 3 AS z"))
    assert "Project" in text and "*(" not in text
