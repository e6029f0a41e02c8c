"""The Spark Kafka connector conf follows the installed PySpark and kspark's cache."""

from __future__ import annotations

from pathlib import Path

import pyspark

from engine.components import spark_packages
from engine.components.spark_packages import (
    kafka_connector_conf,
    kafka_connector_coordinates,
    pyspark_version,
)


def test_the_connector_version_is_the_installed_pysparks() -> None:
    assert pyspark_version() == pyspark.__version__
    assert kafka_connector_coordinates() == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    assert kafka_connector_coordinates("4.0.0") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"


def test_the_conf_loads_the_connector_jars_fetched_into_the_kspark_cache(monkeypatch, tmp_path: Path) -> None:
    version = pyspark.__version__
    lib = tmp_path / f"spark-kafka-{version}" / "lib"
    fetched: list[tuple[list[str], Path]] = []

    def fetch(coordinates, dest, **_):
        fetched.append((list(coordinates), dest))
        dest.mkdir(parents=True, exist_ok=True)
        for name in ("spark-sql-kafka-0-10_2.13-4.1.1.jar", "kafka-clients-3.9.1.jar", "scala-library-2.13.15.jar"):
            (dest / name).write_bytes(b"")
        return dest

    monkeypatch.setenv("KSPARK_HOME", str(tmp_path))
    monkeypatch.setattr(spark_packages, "fetch_artifacts", fetch)
    conf = kafka_connector_conf()
    assert fetched == [([f"org.apache.spark:spark-sql-kafka-0-10_2.13:{version}"], lib)]
    # Scala comes with PySpark already, in its own version: only the connector's own jars load.
    assert conf == {
        "spark.jars": f"{lib / 'kafka-clients-3.9.1.jar'},{lib / 'spark-sql-kafka-0-10_2.13-4.1.1.jar'}"
    }
