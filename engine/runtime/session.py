"""The process-wide SparkSession, configured for small, deterministic, fast jobs."""

from __future__ import annotations

import os
import sys
import threading

from pyspark.sql import SparkSession

_lock = threading.Lock()
_session: SparkSession | None = None

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
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss16m",
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    "spark.sql.warehouse.dir": os.path.join(
        os.environ.get("TMPDIR", "/tmp"), "kspark-spark-warehouse"
    ),
    "spark.driver.memory": "2g",
}


def get_spark(master: str = "local[2]", extra_conf: dict[str, str] | None = None) -> SparkSession:
    """The shared SparkSession, created on first use (6-15 s on 2 cores)."""
    global _session
    with _lock:
        if _session is not None and _session.sparkContext._jsc is not None:
            return _session
        # Workers must run the same interpreter (and so see the same packages) as the driver.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = SparkSession.builder.master(master).appName("kspark")
        for key, value in {**DEFAULT_CONF, **(extra_conf or {})}.items():
            builder = builder.config(key, value)
        _session = builder.getOrCreate()
        _session.sparkContext.setLogLevel("FATAL")
        return _session


def stop_spark() -> None:
    """Stop the shared session (end of a test run or CLI command)."""
    global _session
    with _lock:
        if _session is not None:
            _session.stop()
            _session = None
