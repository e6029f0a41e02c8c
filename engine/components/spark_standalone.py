"""A Spark standalone cluster from the pinned PySpark's own files: one master, N workers.

    with SparkStandalone(directory, workers=2) as spark_cluster:
        spark_cluster.master_url                 # 'spark://127.0.0.1:40123'
        spark_cluster.kill_worker(0)             # kill -9, as a node failure
        spark_cluster.start_worker(0)            # back again

PySpark's package holds a whole Spark distribution (``bin/spark-class``, ``jars/``): the
master and workers run ``org.apache.spark.deploy.master.Master`` and
``org.apache.spark.deploy.worker.Worker`` from it, each in its own process group, with their
logs in ``directory``. Every worker offers ``cores`` cores and ``memory`` of memory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Self

from engine.components.process import HOST, free_port
from engine.errors import ComponentError


def spark_home() -> Path:
    """The Spark distribution inside the installed PySpark package."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkStandalone:
    """A standalone master and its workers on this machine (``HOST``)."""

    def __init__(self, directory: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.directory = Path(directory)
        self.cores = cores
        self.memory = memory
        self.port = free_port()
        self.ui_port = free_port()
        self._master: subprocess.Popen[bytes] | None = None
        self._workers: list[subprocess.Popen[bytes] | None] = [None] * workers

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        self.directory.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": HOST,
               "SPARK_LOG_DIR": str(self.directory), "SPARK_NO_DAEMONIZE": "1"}
        log = (self.directory / f"{name}.log").open("ab")
        return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], stdout=log,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def start(self, timeout: float = 120.0) -> Self:
        self._master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", HOST,
                                   "--port", str(self.port), "--webui-port", str(self.ui_port))
        for index in range(len(self._workers)):
            self.start_worker(index)
        self.wait_for_workers(len(self._workers), timeout)
        return self

    def start_worker(self, index: int) -> None:
        work = self.directory / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        self._workers[index] = self._spawn(
            f"worker-{index}", "org.apache.spark.deploy.worker.Worker", "--host", HOST,
            "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work),
            "--webui-port", str(free_port()), self.master_url,
        )

    def alive_workers(self) -> int:
        """How many workers the master counts alive (0 while its web UI does not answer)."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=2) as answer:
                state = json.loads(answer.read())
        except (OSError, ValueError):
            return 0
        return int(state.get("aliveworkers", 0))

    def wait_for_workers(self, count: int, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() < count:
            if self._master is not None and self._master.poll() is not None:
                raise ComponentError(f"The Spark master exited at start: see {self.directory / 'master.log'}.")
            if time.monotonic() >= deadline:
                raise ComponentError(
                    f"The Spark master counts {self.alive_workers()} of {count} workers after {timeout:g} s: "
                    f"see the logs in {self.directory}."
                )
            time.sleep(0.5)

    def kill_worker(self, index: int) -> None:
        """kill -9 of the worker and of the executors it started (its process group)."""
        process = self._workers[index]
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        self._workers[index] = None

    def stop(self) -> None:
        for process in [*self._workers, self._master]:
            if process is not None and process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                    process.wait(timeout=20)
                except (subprocess.TimeoutExpired, ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(timeout=20)
        self._workers = [None] * len(self._workers)
        self._master = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
