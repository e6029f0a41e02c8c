"""The Spark side of the mutation run: Python workers that follow the driver's mutant.

The mutation run starts its SparkSession with ``spark.python.daemon.module`` set to this
module. Workers fork from it with the engine imported (as from ``engine.runtime.daemon``);
before each task a worker reads the control file the driver writes (``$KSPARK_MUTATION_
CONTROL``) and swaps in the driver's current mutant, or reverts to the original code. During
the baseline the control file also names a folder where each task writes the lines of the
mutated files it executed, keyed by the check (a replay or a unit test) that ran the task,
which Spark hands over as the local property ``kspark.mutation.check``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from qtt.plans.mutants import Applied, Mutant

CONTROL_ENV = "KSPARK_MUTATION_CONTROL"
CHECK_PROPERTY = "kspark.mutation.check"

Hits = dict[str, set[tuple[str, int]]]


def write_control(path: Path, mutant: Mutant | None, coverage_dir: Path | None) -> None:
    """Tell the workers which mutant to run (None: the original code) and where to trace."""
    data = {
        "mutant": None if mutant is None else mutant.to_json(),
        "coverage": None if coverage_dir is None else str(coverage_dir),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


class LineTracer:
    """Records (file, line) of the given files executed, per check label (``sys.settrace``)."""

    def __init__(self, files: dict[str, str], label: Callable[[], str | None]) -> None:
        self.files = files  # absolute filename -> path relative to the repository
        self.label = label
        self.hits: Hits = {}

    def __call__(self, frame: FrameType, event: str, arg: Any) -> Any:
        rel = self.files.get(frame.f_code.co_filename)
        if rel is None:
            return None
        label = self.label()
        if label is None:
            return None
        hits = self.hits.setdefault(label, set())
        hits.add((rel, frame.f_lineno))

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                hits.add((rel, frame.f_lineno))
            return local

        return local

    def start(self) -> None:
        threading.settrace(self)
        sys.settrace(self)

    @staticmethod
    def stop() -> None:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]


def tracer_files(repo: Path, paths: list[str]) -> dict[str, str]:
    """Absolute filename (as in code objects) -> relative path, for the mutated files."""
    return {str((repo / p).resolve()): p for p in paths}


# ------------------------------------------------------------------------- worker side

_state: dict[str, Any] = {"stamp": None, "mutant": None, "applied": None, "coverage": None}
_tasks = {"count": 0}


def sync() -> None:
    """Make this worker run the control file's mutant (cheap when nothing changed)."""
    control = os.environ.get(CONTROL_ENV)
    if not control:
        return
    try:
        stat = os.stat(control)
    except OSError:
        return
    stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    if stamp == _state["stamp"]:
        return
    data = json.loads(Path(control).read_text(encoding="utf-8"))
    _state["stamp"] = stamp
    _state["coverage"] = data.get("coverage")
    wanted = data.get("mutant")
    if wanted == _state["mutant"]:
        return
    applied: Applied | None = _state["applied"]
    if applied is not None:
        applied.revert()
        _state["applied"] = None
    _state["mutant"] = None
    if wanted is not None:
        _state["applied"] = Applied(Mutant.from_json(wanted))
        _state["mutant"] = wanted


def _task_label() -> str | None:
    from pyspark import TaskContext

    context = TaskContext.get()
    return None if context is None else context.getLocalProperty(CHECK_PROPERTY)


def run_task(main: Callable[[Any, Any], Any], infile: Any, outfile: Any) -> Any:
    """Run one Spark task in this worker with the driver's mutant (and tracing, if asked).

    A reused worker enters this as soon as its previous task ends, long before the next
    one comes: wait for the task's first bytes before reading the control file.
    """
    peek = getattr(infile, "peek", None)
    if peek is not None:
        peek(1)
    sync()
    folder = _state["coverage"]
    if not folder:
        return main(infile, outfile)
    files = json.loads((Path(folder) / "files.json").read_text(encoding="utf-8"))
    tracer = LineTracer(files, _task_label)
    tracer.start()
    try:
        return main(infile, outfile)
    finally:
        tracer.stop()
        if tracer.hits:
            _tasks["count"] += 1
            out = Path(folder) / f"worker-{os.getpid()}-{_tasks['count']}.json"
            out.write_text(
                json.dumps({k: sorted(v) for k, v in tracer.hits.items()}), encoding="utf-8"
            )


def _install() -> None:
    from pyspark import daemon

    import engine.runtime.daemon  # noqa: F401 - imports the engine before workers fork

    original = daemon.worker_main

    def worker_main(infile: Any, outfile: Any) -> Any:
        return run_task(original, infile, outfile)

    daemon.worker_main = worker_main


if __name__ == "__main__":  # pragma: no cover - started by Spark as the Python daemon
    _install()
    from pyspark import daemon as _daemon

    _daemon.manager()
