"""The module a Spark cluster's Python workers import needs only what their Python has.

On a cluster the executors' interpreter has PySpark and its own dependencies (``pyarrow``,
``pandas``, ``numpy``, ``protobuf``, ``py4j``); kspark ships its engine and ``lark``
(``engine.runtime.cluster.SHIPPED_PACKAGES``). The worker daemon kspark configures
(``engine.runtime.daemon``) must import without any other of kspark's dependencies, or every
task fails on a missing module (``confluent_kafka`` once came in this way).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.runtime.cluster import SHIPPED_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
ON_EXECUTORS = {"pyspark", "py4j", "pyarrow", "pandas", "numpy", "google"}  # google: protobuf
# kspark's own dependencies (pyproject.toml) by import name, less those the executors have
NOT_ON_EXECUTORS = (
    "confluent_kafka", "rich", "prompt_toolkit", "jsonschema", "deepdiff", "proto_schema_parser",
    "antlr4", "fastavro", "starlette", "uvicorn", "hypercorn", "anyio", "httpx", "cryptography",
    "prometheus_client",
)


def test_the_worker_daemon_imports_with_pyspark_alone() -> None:
    assert not set(NOT_ON_EXECUTORS) & (ON_EXECUTORS | set(SHIPPED_PACKAGES))
    hide = "; ".join(f"sys.modules[{name!r}] = None" for name in NOT_ON_EXECUTORS)
    program = f"import sys; {hide}; import engine.runtime.daemon"
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr.strip().splitlines()[-1:]
