"""The Spark Kafka connector matching the installed PySpark, as SparkSession conf.

    conf = kafka_connector_conf()   # {'spark.jars': '/.../spark-sql-kafka-0-10_2.13-4.1.1.jar,...'}
    SparkSession.builder.config(map=conf)

The connector and its runtime dependencies (the Kafka client among them) are fetched from
Maven Central with ``engine.components.maven`` into kspark's cache on first use
(``<cache>/spark-kafka-<version>/lib``) and loaded as local jars: later sessions start from
the cache without resolving anything, and Spark ships the jars to a cluster's executors.
This module only builds the conf: it never starts Spark.
"""

from __future__ import annotations

import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from engine.components.maven import fetch_artifacts, kspark_home
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


def connector_lib(home: Path | None = None) -> Path:
    """The directory of the connector's jars, fetched on first use."""
    version = pyspark_version()
    dest = (home or kspark_home()) / f"spark-kafka-{version}" / "lib"
    return fetch_artifacts([kafka_connector_coordinates(version)], dest, home=home)


_VERSION_SUFFIX = re.compile(r"-\d[\w.]*\.jar$")


def _artifact_name(jar: Path) -> str:
    """``scala-library`` for ``scala-library-2.13.15.jar``."""
    return _VERSION_SUFFIX.sub("", jar.name)


def connector_jars(home: Path | None = None) -> list[Path]:
    """The connector's jars that PySpark does not ship itself.

    The fetch also copies libraries Spark already has (Scala, SLF4J, Hadoop client, ...), in
    other versions; loading those twice would invite class conflicts, so PySpark's win.
    """
    import pyspark

    shipped = {_artifact_name(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(j for j in connector_lib(home).glob("*.jar") if _artifact_name(j) not in shipped)


def kafka_connector_conf(home: Path | None = None) -> dict[str, str]:
    """SparkSession conf that loads the Kafka connector from kspark's cache."""
    return {"spark.jars": ",".join(str(j) for j in connector_jars(home))}
