"""Running on a Spark cluster: what the executors need and the errors a cluster gives.

On ``local[N]`` the executors are threads of the driver's JVM whose Python workers run the
driver's interpreter, so they import the engine as the driver does. On a cluster
(``spark://``, ``yarn``, ``k8s://``) the executors' Python is the cluster's:

- which interpreter they run is chosen the Spark way: ``spark.pyspark.python`` (a
  ``--spark-conf``), else ``PYSPARK_PYTHON``, else the driver's own interpreter path;
- they need kspark's code and its pure-Python dependencies: ``engine_archive()`` zips them
  once per engine build into kspark's cache, and the session ships the zip to every executor
  through Spark's ``pyFiles`` mechanism (``SparkContext.addPyFile``). Their Python needs only
  PySpark and what its pandas UDFs and transformWithState need (pandas, pyarrow, numpy,
  protobuf, py4j) besides;
- a module still missing there is reported in one line naming it and the executor
  (``engine.errors.missing_module``), not as a 700-line Java stack;
- a master that cannot be reached is one line within seconds (``check_master``), before Spark's
  own client retries for a minute.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import socket
import sys
import zipfile
from pathlib import Path
from typing import Any

from engine.errors import ExecutionError

PYSPARK_PYTHON = "spark.pyspark.python"
# Pure-Python packages the executors' Python workers import, shipped with the engine.
SHIPPED_PACKAGES = ("lark",)


def is_local(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local-cluster[...]``: executors on this machine."""
    return master.startswith("local")


def executor_python(conf: dict[str, str]) -> str:
    """The interpreter the executors' Python workers run (Spark's order of precedence)."""
    return conf.get(PYSPARK_PYTHON) or os.environ.get("PYSPARK_PYTHON") or sys.executable


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ExecutionError(f"Cannot ship the Python package '{name}' to the executors: it is not installed here.")
    return Path(next(iter(spec.submodule_search_locations)))


def _files(package: str) -> list[tuple[Path, str]]:
    root = _package_dir(package)
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".so"):
            found.append((path, f"{package}/{path.relative_to(root).as_posix()}"))
    return found


def engine_archive(cache: Path | None = None) -> Path:
    """A zip of the engine and ``SHIPPED_PACKAGES``, made once per content into kspark's cache."""
    from engine import __version__
    from engine.components.maven import kspark_home

    files = [entry for package in ("engine", *SHIPPED_PACKAGES) for entry in _files(package)]
    digest = hashlib.sha256()
    for path, name in files:
        stat = path.stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    directory = cache or kspark_home() / "pyfiles"
    target = directory / f"kspark-{__version__}-{digest.hexdigest()[:12]}.zip"
    if not target.is_file():
        directory.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(f".{os.getpid()}.part")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
            for path, name in files:
                archive.write(path, name)
        partial.replace(target)
    return target


def check_master(master: str, timeout: float = 5.0) -> None:
    """Raise one line when a standalone master (``spark://host:port[,host:port]``) answers on
    none of its addresses; other masters are left to Spark."""
    if not master.startswith("spark://"):
        return
    problems = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ExecutionError(f"The Spark master URL '{master}' is not spark://HOST:PORT[,HOST:PORT].")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return
        except OSError as exc:
            problems.append(f"{address}: {exc.strerror or exc}")
    raise ExecutionError(f"Cannot reach the Spark master {master} ({'; '.join(problems)}).")


EXECUTOR_WAIT = 90.0  # seconds a cluster may take to give the application its first executor


def await_executors(session: Any, master: str, timeout: float = EXECUTOR_WAIT) -> None:
    """Return once the cluster runs at least one executor for ``session``; else one line
    (a master that accepted the application but has no worker with the cores or memory asked)."""
    import time

    status = session.sparkContext._jsc.sc().getExecutorMemoryStatus()
    deadline = time.monotonic() + timeout
    while status.size() < 2:  # the driver's block manager counts as one
        if time.monotonic() >= deadline:
            conf = session.sparkContext.getConf()
            raise ExecutionError(
                f"The Spark master {master} started no executor for kspark within {timeout:g} s: no "
                f"worker has the free cores and memory it asks for (spark.executor.cores="
                f"{conf.get('spark.executor.cores', '1')}, spark.executor.memory="
                f"{conf.get('spark.executor.memory', '1g')}, spark.cores.max={conf.get('spark.cores.max', 'all')})."
            )
        time.sleep(0.5)
        status = session.sparkContext._jsc.sc().getExecutorMemoryStatus()
