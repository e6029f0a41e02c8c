"""PySpark's Python worker daemon, with the engine imported before it forks any worker.

Spark starts Python workers by forking a daemon process. Every step of a query runs in its
own worker, and each worker would otherwise import the engine (expressions, functions,
serdes: about 0.7 s of CPU) before its first record; forked from a daemon that has already
imported them, workers start warm. ``spark.python.daemon.module`` names this module.
"""

from __future__ import annotations

from pyspark import daemon

import engine.builders.walker as _walker
import engine.runtime.kafka  # noqa: F401 - the streaming operators' modules
import engine.runtime.kafka_sink  # noqa: F401

_walker._load_builders()

if __name__ == "__main__":
    daemon.manager()
