"""The process-wide SparkSession, configured for small, deterministic, fast jobs."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from engine.errors import ExecutionError, InternalError, root_cause_line
from engine.runtime import cluster, round_trips
from engine.runtime.jvm_lookups import cache_jvm_lookups
from engine.runtime.spark_home import use_spark_home

_lock = threading.Lock()
_session: SparkSession | None = None
_session_has_kafka = False
_kafka_by_default = False
# Sessions made from the shared one (``_derived_session``), by (id of the shared one, role).
_derived: dict[tuple[int, str], SparkSession] = {}


def load_kafka_connector_by_default() -> None:
    """Make every new shared session load the Kafka connector (test runs mixing both runtimes)."""
    global _kafka_by_default
    _kafka_by_default = True

# C1 only: a short job never repays C2's compile time (see LONG_RUNNING_CONF).
_C1_ONLY = "-XX:TieredStopAtLevel=1"
# With C2's code cache size: at the C1-only default of 48 MB a long run (the conformance
# corpus) filled it, and the JVM stopped compiling and ran the rest in its bytecode interpreter.
_DRIVER_JAVA_OPTIONS = "-XX:ReservedCodeCacheSize=256m -XX:+UseSerialGC -Xss16m"

# Settings that make plans comparable and start-up short on 2 cores.
DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.sql.caseSensitive": "true",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "10000",
    "spark.python.worker.reuse": "true",
    # PySpark records the Python call site of every Column function for error messages: a
    # JVM round trip or three per function, most of a step builder's time. The engine's
    # errors name statements, not PySpark calls.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # Spark 4 records where each Column and DataFrame call came from by walking the JVM
    # thread's stack and matching every frame with a regex: 7% of the JVM's sampled CPU on
    # QTT's small queries. Called through Py4J, the site found is always a Py4J frame, and
    # no engine message shows it.
    "spark.sql.dataFrameQueryContext.enabled": "false",
    # Spark keeps the classes it compiled for generated code by their source text, the last
    # 100 by default. Replaying saved plans compiled 406 classes for 60 planned-case runs
    # with 100 kept, 281 with more kept: the same queries' code recurs further apart than 100.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # Workers fork from a daemon that has imported the engine already.
    "spark.python.daemon.module": "engine.runtime.daemon",
    "spark.driver.extraJavaOptions": f"{_C1_ONLY} {_DRIVER_JAVA_OPTIONS}",
    "spark.executor.extraJavaOptions": f"{_C1_ONLY} -XX:+UseSerialGC",
    "spark.sql.warehouse.dir": os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "kspark-spark-warehouse"
    ),
    "spark.driver.memory": "2g",
    # Streaming queries keep their keyed state with transformWithState, which needs RocksDB.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
}

LONG_RUNNING_CONF: dict[str, str] = {
    "spark.driver.extraJavaOptions": _DRIVER_JAVA_OPTIONS,
}
"""For a session whose jobs run long (a server, streaming queries, large batches): the JVM's
full tiered compiler. C2 repays its compile time after a few seconds of work on the same
operators (100,000 records through a stateless query: 4.7 s with C1 only, 4.3 s tiered);
the many small jobs of QTT runs and tests are faster with C1 alone."""


def get_spark(
    master: str = "local[2]",
    extra_conf: dict[str, str] | None = None,
    *,
    kafka: bool = False,
    long_running: bool = False,
) -> SparkSession:
    """The shared SparkSession, created on first use (6-15 s on 2 cores).

    With ``kafka`` the session loads Spark's Kafka connector (resolved from Maven Central into
    kspark's cache on first use); the connector must be asked for by the first caller. With
    ``long_running`` it starts with ``LONG_RUNNING_CONF`` (the first caller decides).
    """
    global _session, _session_has_kafka
    kafka = kafka or _kafka_by_default
    with _lock:
        if _session is not None and _session.sparkContext._jsc is not None:
            if kafka and not _session_has_kafka:
                raise InternalError(
                    "The shared SparkSession was started without the Kafka connector; "
                    "start it with get_spark(kafka=True) before any bounded work."
                )
            return _session
        conf = dict(DEFAULT_CONF)
        if long_running:
            conf.update(LONG_RUNNING_CONF)
        if kafka:
            from engine.components.spark_packages import kafka_connector_conf

            jars = kafka_connector_conf()["spark.jars"]
            conf["spark.jars"] = f"{jars},{_helpers_jar()}"
        conf.update(extra_conf or {})
        # The executors' interpreter, chosen the Spark way; by default the driver's, whose
        # packages local executors see.
        os.environ["PYSPARK_PYTHON"] = cluster.executor_python(conf)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        on_cluster = not cluster.is_local(master)
        if on_cluster:
            cluster.check_master(master)
            if "spark.python.daemon.module" not in (extra_conf or {}):
                # The daemon starts before the shipped engine is on the workers' path: PySpark's
                # own daemon, and each worker imports the engine from the shipped zip.
                del conf["spark.python.daemon.module"]
        builder = SparkSession.builder.master(master).appName("kspark")
        for key, value in conf.items():
            builder = builder.config(key, value)
        cache_jvm_lookups()
        round_trips.install()
        use_spark_home()
        try:
            session = builder.getOrCreate()
        except Exception as exc:  # noqa: BLE001 - Py4J's and Spark's errors alike, in one line
            raise ExecutionError(f"Spark did not start on master {master}: {root_cause_line(str(exc))}") from None
        session.sparkContext.setLogLevel("FATAL")
        if on_cluster:
            try:
                cluster.await_executors(session, master)
            except ExecutionError:
                session.stop()
                raise
            session.sparkContext.addPyFile(str(cluster.engine_archive()))
        _session = session
        _session_has_kafka = kafka
        return _session


INTERPRETED_CONF: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
"""Spark's interpreted operators and expressions instead of generated Java code. A small job
compiles more code than it runs records: on the replay of ksqlDB's saved plans (a few
records per query) this cuts the JVM's CPU by about a fifth. Physical plans then lose their
``*(n)`` whole-stage markers, so planned cases are never recorded under it."""


def interpreted_session() -> SparkSession:
    """A session on the shared session's SparkContext whose jobs run ``INTERPRETED_CONF``.

    Replays run many small saved queries: each compiled classes for generated code it ran
    for a handful of records (472 compilations in 120 replays, 11% of their time). On their
    own session they run interpreted without changing the shared session's settings, which
    other threads' queries read meanwhile. ``physical_plan_text`` still shows their plans
    with the whole-stage stages a session with generated code would run.
    """
    return _derived_session("interpreted", INTERPRETED_CONF)


def partitioned_session(partitions: int) -> SparkSession:
    """A session on the shared session's SparkContext whose ``spark.sql.shuffle.partitions``
    is ``partitions`` (one per count, made once).

    A query started on it takes that count without setting it on the shared session, whose
    setting other threads' query starts read meanwhile, so its start needs no lock: push
    queries start on these, side by side and beside the persistent queries' starts.
    """
    if partitions < 1:
        raise InternalError(f"A session needs at least one shuffle partition, got {partitions}; this is a bug.")
    return _derived_session(f"shuffle-{partitions}", {"spark.sql.shuffle.partitions": str(partitions)})


def _derived_session(role: str, conf: Mapping[str, str]) -> SparkSession:
    """A session made once per shared session by ``newSession`` (the same SparkContext and
    startup settings, its own runtime settings), with ``conf`` set on it."""
    spark = get_spark()
    with _lock:
        key = (id(spark), role)
        derived = _derived.get(key)
        if derived is None:
            derived = spark.newSession()
            for name, value in conf.items():
                derived.conf.set(name, value)
            _derived[key] = derived
        return derived


_WHOLE_STAGE = "spark.sql.codegen.wholeStage"


def physical_plan_text(df: DataFrame) -> str:
    """The physical plan Spark runs ``df`` with, as ``explain()`` prints it (not normalised);
    for a DataFrame of ``interpreted_session()``, the plan with whole-stage code generation.

    That session's plans have no whole-stage stages (``*(n)``), so the plan Spark planned for
    ``df`` is prepared for execution again on a session that generates code, as planned cases
    save it and the Kafka runtime runs it. Preparation only: no code is generated or
    compiled. Both are prepared without adaptive execution, which the sessions here keep
    off. Other sessions' plans are the ones they run.
    """
    query = df._jdf.queryExecution()
    if df.sparkSession is not _derived.get((id(_session), "interpreted")):
        return str(query.executedPlan().toString())
    planner = _derived_session("whole-stage", {_WHOLE_STAGE: "true"})
    jvm: Any = planner._jvm
    sessions = jvm.org.apache.spark.sql.classic.SparkSession
    execution = getattr(getattr(jvm.org.apache.spark.sql.execution, "QueryExecution$"), "MODULE$")
    # Preparation rules read the settings of the thread's active session.
    previous = sessions.getActiveSession()
    sessions.setActiveSession(planner._jsparkSession)
    try:
        rules = execution.preparations(planner._jsparkSession, jvm.scala.Option.empty(), False)
        return str(execution.prepareForExecution(rules, query.sparkPlan()).toString())
    finally:
        if previous.isDefined():
            sessions.setActiveSession(previous.get())
        else:
            sessions.clearActiveSession()


@contextmanager
def session_conf(spark: SparkSession, conf: Mapping[str, str]) -> Iterator[None]:
    """Set runtime SQL settings on ``spark`` for the block and restore the earlier values."""
    before = {key: spark.conf.get(key, None) for key in conf}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, earlier in before.items():
            if earlier is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, earlier)


def name_call_site(spark: SparkSession, name: str) -> None:
    """Name the Spark jobs and RDDs this thread makes from now on ``name``.

    Spark gives each RDD and job a call site in a short and a long form. PySpark sets the
    short form around each action (``collect at file.py:12``) and clears it after, but not
    the long one, which Spark then takes from the JVM thread's stack, walked and matched
    frame by frame for every RDD: about 5% of the JVM's CPU on QTT's small jobs. Both forms
    are thread-local Spark properties, so concurrent runs each keep their own.
    """
    sc = spark.sparkContext
    sc.setLocalProperty("callSite.short", name)
    sc.setLocalProperty("callSite.long", name)


def _helpers_jar() -> str:
    from engine.components.jvm import helpers_jar

    return str(helpers_jar())


def spark_started() -> bool:
    """Whether the shared session is running (``stop_spark`` has not stopped it since)."""
    return _session is not None


def stop_spark() -> None:
    """Stop the shared session (end of a test run or CLI command)."""
    global _session
    with _lock:
        _derived.clear()
        if _session is not None:
            _session.stop()
            _session = None
