"""kspark on a Spark standalone cluster whose executors' Python has only PySpark (``nox -s spark_cluster``).

A master and two workers start from the pinned PySpark's own files; the executors run a
virtualenv with PySpark and its dependencies only, so the engine reaches them the way it does
on a real cluster: shipped by the driver. The state dir is a ``file:`` URI of a folder the
driver and the workers share (here, the same machine).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from engine.components.spark_standalone import SparkStandalone
from engine.kafka import ProducerRecord, TopicAdmin, produce, read_topic

pytestmark = pytest.mark.spark_cluster
KSPARK = [sys.executable, "-m", "engine.cli"]


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory) -> str:
    """A virtualenv with PySpark and its dependencies, and nothing of kspark."""
    import pyspark

    venv = tmp_path_factory.mktemp("executor-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    # PySpark with what its pandas/Arrow UDFs and transformWithState need (kspark's stateful steps).
    subprocess.run([python, "-m", "pip", "install", "-q", f"pyspark=={pyspark.__version__}", "pandas", "pyarrow",
                    "numpy", "protobuf"], check=True, timeout=900)
    lacks = subprocess.run([python, "-c", "import engine"], capture_output=True, cwd=venv)
    assert lacks.returncode != 0, "the executors' Python must not see kspark"
    return python


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    with SparkStandalone(tmp_path_factory.mktemp("spark-standalone"), workers=2, cores=1, memory="1g") as cluster:
        yield cluster


def _app(tmp_path: Path, topic: str) -> Path:
    sql = tmp_path / "app.sql"
    sql.write_text(
        f"CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{topic}', "
        "VALUE_FORMAT='JSON', PARTITIONS=2);\n"
        f"CREATE STREAM COPIED WITH (KAFKA_TOPIC='{topic}_copied') AS SELECT ID, QTY FROM ORDERS;\n"
        f"CREATE TABLE TOTALS WITH (KAFKA_TOPIC='{topic}_totals') AS SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS S "
        "FROM ORDERS GROUP BY ITEM;\n", encoding="utf-8")
    return sql


def _produce(bootstrap: str, topic: str, count: int) -> None:
    TopicAdmin(bootstrap).create_topic(topic, partitions=2)
    records = (ProducerRecord(key=f"o{i}".encode(), value=json.dumps({"ITEM": f"i{i % 7}", "QTY": i % 13}).encode())
               for i in range(count))
    produce(bootstrap, topic, records, timeout=120)


def _run(cluster: SparkStandalone, python: str, bootstrap: str, sql: Path, state: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [*KSPARK, "run", str(sql), "--bootstrap-servers", bootstrap, "--state-dir", f"file://{state}",
               "--property", "auto.offset.reset=earliest", "--until-caught-up", "--spark-master", cluster.master_url,
               "--spark-conf", f"spark.pyspark.python={python}", "--spark-conf", "spark.driver.host=127.0.0.1",
               "--spark-conf", "spark.executor.memory=768m"]
    return subprocess.Popen(command, stdout=log.open("ab"), stderr=subprocess.STDOUT)


def _check_exact(bootstrap: str, topic: str, count: int) -> None:
    copied = [json.loads(r.value)["QTY"] for r in read_topic(bootstrap, f"{topic}_copied", timeout=60)]
    ids = sorted(r.key.decode() for r in read_topic(bootstrap, f"{topic}_copied", timeout=60))
    assert len(copied) == count, f"{len(copied)} of {count} records copied"
    assert ids == sorted(f"o{i}" for i in range(count)), "a record is missing or repeated"
    last: dict[str, dict] = {}
    for record in read_topic(bootstrap, f"{topic}_totals", timeout=60):
        last[record.key.decode()] = json.loads(record.value)
    expected = {f"i{k}": {"N": len(range(k, count, 7)), "S": sum(i % 13 for i in range(k, count, 7))} for k in range(7)}
    assert last == expected


@pytest.mark.long
def test_persistent_queries_run_on_the_cluster_with_the_engine_shipped(spark_cluster, executor_python, kafka_broker, tmp_path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"cl_{uuid.uuid4().hex[:8]}"
    _produce(bootstrap, topic, 5_000)
    log = tmp_path / "run.log"
    process = _run(spark_cluster, executor_python, bootstrap, _app(tmp_path, topic), tmp_path / "state", log)
    assert process.wait(timeout=900) == 0, log.read_text()[-3000:]
    assert (tmp_path / "state" / "statements.json").is_file() and not (tmp_path / "file:").exists()
    _check_exact(bootstrap, topic, 5_000)


@pytest.mark.long
def test_kill_9_of_a_worker_in_a_stateful_query_loses_and_repeats_nothing(spark_cluster, executor_python, kafka_broker, tmp_path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"kill_{uuid.uuid4().hex[:8]}"
    count = 60_000
    _produce(bootstrap, topic, count)
    log = tmp_path / "run.log"
    state = tmp_path / "state"
    process = _run(spark_cluster, executor_python, bootstrap, _app(tmp_path, topic), state, log)
    try:
        deadline = time.monotonic() + 600
        commits = state / "CTAS_TOTALS_1" / "checkpoint" / "commits"
        while not (commits.is_dir() and any(commits.iterdir())):  # the aggregate has committed a batch
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the aggregate committed no batch"
            time.sleep(0.5)
        spark_cluster.kill_worker(0)
        time.sleep(5)
        spark_cluster.start_worker(0)
        assert process.wait(timeout=1200) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
    _check_exact(bootstrap, topic, count)


@pytest.mark.long
def test_an_executor_python_without_a_module_is_one_line_naming_it(spark_cluster, kafka_broker, tmp_path) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    topic = f"nomod_{uuid.uuid4().hex[:8]}"
    _produce(bootstrap, topic, 10)
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)  # no pyspark there
    log = tmp_path / "run.log"
    process = _run(spark_cluster, str(bare / "bin" / "python"), bootstrap, _app(tmp_path, topic), tmp_path / "state", log)
    assert process.wait(timeout=600) != 0
    text = log.read_text()
    # The first module the bare interpreter lacks (pyspark's own zip is on its path: pyarrow, say).
    [line] = [line for line in text.splitlines() if line.startswith("kspark: ")][-1:]
    assert "has no module '" in line and "--spark-conf spark.pyspark.python=PATH" in line, text[-3000:]
    assert "Traceback" not in text


def test_an_unreachable_master_is_one_line_within_seconds(kafka_broker, tmp_path) -> None:
    topic = f"unreach_{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    done = subprocess.run([*KSPARK, "run", str(_app(tmp_path, topic)), "--bootstrap-servers", kafka_broker.bootstrap_servers,
                           "--state-dir", str(tmp_path / "state"), "--spark-master", "spark://127.0.0.1:1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    assert time.monotonic() - started < 60
    lines = [line for line in done.stderr.splitlines() if line.startswith("kspark:")]
    assert any("Cannot reach the Spark master spark://127.0.0.1:1" in line for line in lines), done.stderr
    assert "Traceback" not in done.stderr
