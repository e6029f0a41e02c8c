"""The Spark Kafka connector matching the installed PySpark, as SparkSession conf.

    conf = kafka_connector_conf()   # {'spark.jars.packages': ..., 'spark.jars.ivy': ...}
    SparkSession.builder.config(map=conf)

Spark resolves ``spark.jars.packages`` with Ivy from Maven Central when the session
starts; ``spark.jars.ivy`` keeps Ivy's cache under kspark's cache directory, so a fresh
machine needs no manual step and later sessions start from the cache. This module only
builds the conf: it never starts Spark.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from engine.components.maven import kspark_home
from engine.errors import ComponentError

SCALA_BINARY_VERSION = "2.13"  # PySpark 4 is built for Scala 2.13 only
KAFKA_CONNECTOR = f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}"


def pyspark_version() -> str:
    """The installed PySpark's version, e.g. ``'4.1.1'``."""
    try:
        return version("pyspark")
    except PackageNotFoundError:
        raise ComponentError(
            "PySpark is not installed: the Spark Kafka connector must match its version."
        ) from None


def kafka_connector_coordinates(spark_version: str | None = None) -> str:
    """Maven coordinates of the Kafka connector for ``spark_version`` (default: installed)."""
    return f"{KAFKA_CONNECTOR}:{spark_version or pyspark_version()}"


def ivy_home(home: Path | None = None) -> Path:
    """Ivy's directory for ``spark.jars.packages`` inside kspark's cache."""
    return (home or kspark_home()) / "ivy"


def kafka_connector_conf(home: Path | None = None) -> dict[str, str]:
    """SparkSession conf that loads the Kafka connector, resolved into kspark's cache."""
    return {
        "spark.jars.packages": kafka_connector_coordinates(),
        "spark.jars.ivy": str(ivy_home(home)),
    }
