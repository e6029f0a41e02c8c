"""What kspark needs from a Spark cluster, without one: the executors' Python, the shipped code, the errors."""

from __future__ import annotations

import socket
import time
import zipfile

import pytest

from engine.errors import ExecutionError, missing_module, root_cause_line
from engine.runtime import cluster


def test_the_executors_python_is_chosen_the_spark_way(monkeypatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/env/bin/python")
    assert cluster.executor_python({"spark.pyspark.python": "/cluster/python3"}) == "/cluster/python3"
    assert cluster.executor_python({}) == "/opt/env/bin/python"
    monkeypatch.delenv("PYSPARK_PYTHON")
    import sys

    assert cluster.executor_python({}) == sys.executable


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local-cluster[2,1,1024]"])
def test_local_masters_are_local(master: str) -> None:
    assert cluster.is_local(master)


def test_a_master_that_does_not_answer_is_one_line_within_seconds() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: refused
        started = time.monotonic()
        with pytest.raises(ExecutionError) as raised:
            cluster.check_master(f"spark://127.0.0.1:{port}", timeout=2)
    assert time.monotonic() - started < 5
    assert str(raised.value).startswith(f"Cannot reach the Spark master spark://127.0.0.1:{port} (127.0.0.1:{port}: ")
    assert "\n" not in str(raised.value)
    with pytest.raises(ExecutionError, match="is not spark://HOST:PORT"):
        cluster.check_master("spark://nohost")
    cluster.check_master("yarn")  # left to Spark


def test_a_python_worker_too_slow_to_start_is_explained() -> None:
    failure = ("org.apache.spark.SparkException: Python worker failed to connect back.\n"
               "\tat org.apache.spark.api.python.PythonWorkerFactory.createSimpleWorker(PythonWorkerFactory.scala:1)\n"
               "Caused by: java.net.SocketTimeoutException: Timed out while waiting for the Python worker to "
               "connect back\n")
    line = root_cause_line(failure)
    assert line.startswith("Python worker failed to connect back: Spark waits 10 s") and "too busy" in line


def test_a_module_an_executor_lacks_is_named_with_the_executor() -> None:
    failure = (
        "py4j.protocol.Py4JJavaError: An error occurred while calling o468.foreachPartition.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 4 times, "
        "most recent failure: Lost task 0.3 in stage 3.0 (TID 9) (10.1.2.3 executor 1): "
        "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
        '  File "/opt/spark/python/pyspark/worker.py", line 1, in main\n'
        "ModuleNotFoundError: No module named 'engine'\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)\n"
    )
    expected = ("The Python of executor 1 on 10.1.2.3 has no module 'engine': install it there, or choose an "
                "interpreter that has it with --spark-conf spark.pyspark.python=PATH.")
    assert missing_module(failure) == expected
    assert root_cause_line(failure) == expected
    assert missing_module("ValueError: no") is None
    driver_side = ("TransformWithStateInPySpark driver worker exited unexpectedly (crashed)\n"
                   "ImportError: cannot import name 'descriptor' from 'google.protobuf' (unknown location)")
    assert missing_module(driver_side) == (
        "The Python of a Spark Python worker has no module 'google.protobuf.descriptor': install it there, "
        "or choose an interpreter that has it with --spark-conf spark.pyspark.python=PATH.")


def test_the_engine_ships_as_one_zip_made_once(tmp_path) -> None:
    first = cluster.engine_archive(tmp_path)
    assert cluster.engine_archive(tmp_path) == first
    names = set(zipfile.ZipFile(first).namelist())
    assert {"engine/__init__.py", "engine/parser/ksql.lark", "engine/runtime/cluster.py", "lark/__init__.py"} <= names
    assert not [n for n in names if n.endswith((".pyc", ".so")) or "__pycache__" in n]


@pytest.mark.parametrize(
    ("location", "path"),
    [("file:/data/kspark", "/data/kspark"), ("file:///data/kspark", "/data/kspark"),
     ("file://localhost/data/k%20s", "/data/k s"), ("/data/kspark", "/data/kspark"), ("rel/dir", "rel/dir")],
)
def test_a_state_dir_is_a_path_or_a_file_uri(location: str, path: str) -> None:
    from pathlib import Path

    from engine.hosting.application import state_dir_path

    assert state_dir_path(location) == Path(path)


@pytest.mark.parametrize(("location", "message"), [
    ("hdfs://nn:8020/kspark", "The state dir 'hdfs://nn:8020/kspark' is on a 'hdfs:' file system"),
    ("file://other-host/data", "names the host 'other-host'"),
])
def test_a_state_dir_kspark_cannot_keep_is_one_line(location: str, message: str) -> None:
    from engine.hosting.application import state_dir_path

    with pytest.raises(ExecutionError, match=message):
        state_dir_path(location)


@pytest.mark.long
def test_kspark_run_with_a_file_uri_state_dir_keeps_its_state_there(kafka_broker, tmp_path, monkeypatch) -> None:
    import uuid

    from engine.cli import main

    monkeypatch.chdir(tmp_path)
    topic = f"uri_{uuid.uuid4().hex[:8]}"
    sql = tmp_path / "q.sql"
    sql.write_text(f"CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', "
                   "PARTITIONS=1);\nCREATE STREAM T AS SELECT ID, V FROM S;\n")
    code = main(["run", str(sql), "--bootstrap-servers", kafka_broker.bootstrap_servers,
                 "--state-dir", f"file://{tmp_path}/state", "--until-caught-up"])
    assert code == 0
    assert (tmp_path / "state" / "statements.json").is_file()
    assert (tmp_path / "state" / "CSAS_T_0" / "checkpoint").is_dir()
    assert not (tmp_path / "file:").exists()
