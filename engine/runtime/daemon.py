"""PySpark's Python worker daemon, with the engine imported before it forks any worker.

Spark starts Python workers by forking a daemon process. Every step of a query runs in its
own worker, and each worker would otherwise import the engine (expressions, functions,
serdes: about 0.7 s of CPU) before its first record; forked from a daemon that has already
imported them, workers start warm. ``spark.python.daemon.module`` names this module.

Before every task Spark's worker calls ``importlib.invalidate_caches()``, which makes each
``zipimporter`` re-read its whole archive (Python 3.11) (Spark puts ``pyspark.zip``
and py4j's zip on the workers' path: about 0.1 s of CPU per Python evaluation, and a query
runs several). The archives do not change while a worker lives, so the workers forked from
this daemon keep the directories they read once.
"""

from __future__ import annotations

import gc
import zipimport

from pyspark import daemon

import engine.builders.walker as _walker
import engine.runtime.kafka  # noqa: F401 - the streaming operators' modules
import engine.runtime.kafka_sink  # noqa: F401

_walker._load_builders()

zipimport.zipimporter.invalidate_caches = lambda self: None  # type: ignore[method-assign]

# The daemon's worker loop runs a full ``gc.collect()`` after every task, which walks every
# object the imports above made (about 40 ms of CPU a task: most of the workers' CPU on small
# jobs). Frozen, they sit in the permanent generation the collector skips; forked workers
# inherit that, and their pages stay shared with the daemon's.
gc.freeze()

if __name__ == "__main__":
    daemon.manager()
