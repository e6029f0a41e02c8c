"""The Spark Kafka connector conf follows the installed PySpark and kspark's cache."""

from __future__ import annotations

from pathlib import Path

import pyspark

from engine.components.spark_packages import (
    kafka_connector_conf,
    kafka_connector_coordinates,
    pyspark_version,
)


def test_the_connector_version_is_the_installed_pysparks() -> None:
    assert pyspark_version() == pyspark.__version__
    assert kafka_connector_coordinates() == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
    assert kafka_connector_coordinates("4.0.0") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"


def test_the_conf_loads_the_connector_through_ivy_in_the_kspark_cache(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KSPARK_HOME", str(tmp_path))
    assert kafka_connector_conf() == {
        "spark.jars.packages": f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}",
        "spark.jars.ivy": str(tmp_path / "ivy"),
    }
