"""kspark's JVM helpers: Java sources shipped with the package, compiled once into a jar.

    jar = helpers_jar()      # ~/.cache/kspark/jvm/kspark-helpers-<hash>.jar

Some work belongs in Spark's executors' JVMs rather than in Python workers: the exactly-once
Kafka writer (``kspark.TransactionalKafkaWriter``) sends records with the Java Kafka client,
which keeps every record timestamp (librdkafka reads a timestamp of 0 as "now") and spares a
Python round trip per record. The sources under ``engine/components/java`` are compiled with
``javac`` against PySpark's jars and the Kafka connector's (fetched from Maven Central) on
first use; the jar's name carries a hash of the sources and the PySpark version, so an upgrade
builds a new one. The session loads it through ``spark.jars``.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from engine.components.maven import kspark_home
from engine.components.spark_packages import connector_lib, pyspark_version
from engine.errors import ComponentError

SOURCES = Path(__file__).with_name("java")


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _source_files() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def _digest() -> str:
    h = hashlib.sha256(pyspark_version().encode())
    for path in _source_files():
        h.update(path.relative_to(SOURCES).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def helpers_jar(home: Path | None = None) -> Path:
    """The compiled helpers jar, built on first use. Raises ``ComponentError`` without a JDK."""
    root = (home or kspark_home()) / "jvm"
    jar = root / f"kspark-helpers-{_digest()}.jar"
    if jar.is_file():
        return jar
    javac = shutil.which("javac")
    if javac is None:
        raise ComponentError(
            "Cannot build kspark's JVM helpers: 'javac' is not on PATH; install a JDK 17 "
            "(e.g. 'apt-get install openjdk-17-jdk-headless')."
        )
    # The Kafka client comes with the connector: compile against the jars the session loads.
    classpath = f"{_pyspark_jars()}/*:{connector_lib(home)}/*"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as build:
        classes = Path(build) / "classes"
        result = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-d", str(classes), "-cp", classpath,
             *[str(p) for p in _source_files()]],
            capture_output=True, text=True, timeout=300,
        )
        if result.returncode != 0:
            first = next((line for line in result.stderr.splitlines() if line.strip()), "no output")
            raise ComponentError(f"Cannot compile kspark's JVM helpers with {javac}: {first}")
        staged = Path(build) / jar.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        staged.replace(jar)
    return jar
