"""Mutation check of the lower layer: how many small changes to builders, expression
evaluation, serdes, plan serde and the bounded operators do the checks catch?

``python -m qtt.plans.mutation [--count N] [--seed S]`` (``nox -s mutation``). One process,
one SparkSession. A seeded sample of mutants (see ``qtt.plans.mutants``) is applied in
process, one at a time, in the driver and in Spark's Python workers
(``qtt.plans.mutation_worker``), and reverted afterwards; nothing on disk changes.

A baseline run first replays the latest saved version of every planned case, checks that each
case's plan is still up to date with it (as ``qtt plans verify`` does), and runs the
unit tests of the mutated packages with line tracing, which tells, for every line, the
checks that execute it (cached in ``reports/mutation-baseline.json`` until a source, test
or planned case changes). Each mutant then runs only the checks that execute its line: the
replays, fastest first, then the unit tests, and stops at the first check that fails.
The report (``reports/mutation.json``) lists every mutant with its verdict; mutants
reviewed as equivalent (``qtt/plans/mutation_equivalents.json``: id -> reason) are left out
of the score.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import hashlib
import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qtt.optional import require
from qtt.plans.mutants import Applied, Mutant, find_mutants, module_name, target_files
from qtt.plans.mutation_worker import (
    CHECK_PROPERTY,
    CONTROL_ENV,
    Hits,
    LineTracer,
    tracer_files,
    write_control,
)

_TOOL = "The mutation check (python -m qtt.plans.mutation)"
pytest = require("pytest", extra="test", tool=_TOOL)  # it runs the project's unit tests
require("hypothesis", extra="test", tool=_TOOL)

TARGETS = (
    "engine/builders",
    "engine/expressions",
    "engine/serde",
    "engine/plan/serde.py",
    "engine/runtime/closes.py",
    "engine/runtime/suppress.py",
    "engine/runtime/keyed.py",
    "engine/runtime/tasks.py",
)
# The tests the baseline traces besides the replays (``select_tests``): every test module that
# imports the lower layer (the mutated code and the function library it calls), wherever it
# lives under ``tests/``, and the project's QTT case files, which run whole statements through
# the planner and the lower layer. Tests needing a real component are deselected.
LOWER_LAYER = (*TARGETS, "engine/functions")
QTT_CASES = "tests/qtt_cases"
EXTERNAL_FIXTURES = frozenset({"kafka_broker", "schema_registry"})
EXCLUDED_MARKS = "not cluster and not soak"
# Tests of the mutation check itself run their own line tracer: never traced.
MUTATION_MODULES = frozenset({"qtt.plans.mutation", "qtt.plans.mutants", "qtt.plans.mutation_worker"})
EQUIVALENTS = Path(__file__).with_name("mutation_equivalents.json")
REPORT = Path("reports/mutation.json")
BASELINE = Path("reports/mutation-baseline.json")
TARGET_SCORE = 0.95
REPLAY, TEST, UP_TO_DATE = "replay:", "test:", "uptodate:"


class CheckTimeout(Exception):
    """A check ran longer than its limit under a mutant (an endless loop counts as caught)."""


# ------------------------------------------------------------------------- check labels

_label = threading.local()


def _current_label() -> str | None:
    return getattr(_label, "value", None)


@contextlib.contextmanager
def _labelled(label: str, *, spark: bool = True) -> Iterator[None]:
    """Attribute what this thread runs (its lines, and with ``spark`` its Spark tasks) to the
    check ``label``."""
    if not spark:  # a check that starts no Spark job (planning only)
        _label.value = label
        try:
            yield
        finally:
            _label.value = None
        return
    from engine.runtime.session import get_spark

    sc = get_spark(kafka=True).sparkContext
    _label.value = label
    sc.setLocalProperty(CHECK_PROPERTY, label)
    sc.setJobGroup(label, label, True)
    try:
        yield
    finally:
        _label.value = None
        sc.setLocalProperty(CHECK_PROPERTY, None)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ replays


@dataclass(frozen=True, slots=True)
class Outcome:
    """A check's result: failed (caught the mutant) and a one-line reason."""

    failed: bool
    detail: str = ""


def _replay_check(version: Any, label: str) -> Outcome:
    from qtt.plans.replay import replay

    with _labelled(label):
        result = replay(version)
    if result.ok:
        return Outcome(False)
    first = result.changes[0]
    where = " / ".join(x for x in (first.query_id, first.ctx, first.field) if x)
    detail = f"[{first.area}] {where}: {first.detail}".splitlines()[0]
    return Outcome(True, detail[:300])


def _up_to_date_check(case: Any, root: Path, label: str) -> Outcome:
    """``qtt plans verify``'s up-to-date check of ``case``: the plan the engine builds now
    from its statements equals its latest planned case (an exception fails it, as in verify)."""
    from qtt.plans.uptodate import check_up_to_date

    with _labelled(label, spark=False):
        try:
            result = check_up_to_date(case, root)
        except Exception as exc:  # noqa: BLE001 - verify reports it as a stale case
            return Outcome(True, f"[up to date] {type(exc).__name__}: {exc}".splitlines()[0][:300])
    if result.ok:
        return Outcome(False)
    first = result.changes[0] if result.changes else None
    detail = f"[up to date] {result.state}" + (f": {first.detail}" if first is not None else "")
    return Outcome(True, detail.splitlines()[0][:300])


class Replays:
    """Runs replays and up-to-date checks on ``jobs`` threads; stops handing out work once
    one fails."""

    def __init__(
        self, versions: dict[str, Any], jobs: int, cases: dict[str, Any] | None = None,
        root: Path = Path("planned_cases"),
    ) -> None:
        self.versions = versions
        self.cases = dict(cases or {})  # UP_TO_DATE label -> the QTT case it plans
        self.root = root
        self.jobs = max(1, jobs)
        self.seconds: dict[str, float] = {}

    @property
    def labels(self) -> list[str]:
        """Every check: the replays, then the up-to-date checks."""
        return [*self.versions, *self.cases]

    def run(
        self, labels: Sequence[str], *, timeout: dict[str, float], stop_on_failure: bool
    ) -> dict[str, Outcome]:
        """Outcome per label run (in order of completion); a label over its limit fails."""
        results: dict[str, Outcome] = {}
        pending = list(labels)
        idents: dict[str, int] = {}
        with ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="mutation") as pool:
            running: dict[str, tuple[Future[Outcome], float]] = {}
            while pending or running:
                while pending and len(running) < self.jobs and not (
                    stop_on_failure and any(o.failed for o in results.values())
                ):
                    label = pending.pop(0)
                    future = pool.submit(self._one, label, idents)
                    running[label] = (future, time.monotonic() + timeout.get(label, 300.0))
                if not running:
                    break
                time.sleep(0.05)
                for label, (future, deadline) in list(running.items()):
                    if future.done():
                        del running[label]
                        try:
                            results[label] = future.result()
                        except BaseException as exc:  # noqa: BLE001 - the check's failure
                            results[label] = Outcome(True, f"{type(exc).__name__}: {exc}"[:300])
                    elif time.monotonic() > deadline:
                        _interrupt(label, idents.get(label))
                        try:
                            future.result(timeout=180)
                        except BaseException:  # noqa: BLE001 - we only wait for the thread
                            pass
                        if not future.done():
                            raise RuntimeError(
                                f"The check {label} does not stop after its time limit; "
                                "the run cannot go on safely."
                            )
                        del running[label]
                        results[label] = Outcome(True, "timeout: ran past its time limit")
                if stop_on_failure and any(o.failed for o in results.values()):
                    pending.clear()
        return results

    def _one(self, label: str, idents: dict[str, int]) -> Outcome:
        idents[label] = threading.get_ident()
        start = time.perf_counter()
        try:
            if label in self.cases:
                return _up_to_date_check(self.cases[label], self.root, label)
            return _replay_check(self.versions[label], label)
        finally:
            self.seconds[label] = time.perf_counter() - start


def _interrupt(label: str, ident: int | None) -> None:
    """Cancel a check's Spark jobs and raise ``CheckTimeout`` in the thread running it."""
    from engine.runtime.session import get_spark

    with contextlib.suppress(Exception):
        get_spark(kafka=True).sparkContext.cancelJobGroup(label)
    if ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(ident), ctypes.py_object(CheckTimeout)
        )


# -------------------------------------------------------------------------- unit tests


class _PytestPlugin:
    """Labels each test (tracing, Spark tasks), records outcomes, bounds each test's time,
    and keeps the shared SparkSession alive between ``pytest.main`` calls."""

    def __init__(self, timeouts: dict[str, float] | None = None) -> None:
        self.timeouts = timeouts or {}
        self.first_failure: tuple[str, str] | None = None
        self.outcomes: dict[str, str] = {}
        self.seconds: dict[str, float] = {}

    def pytest_configure(self, config: Any) -> None:
        from hypothesis import settings

        settings.register_profile(
            "kspark-mutation", database=None, derandomize=True, deadline=None
        )
        settings.load_profile("kspark-mutation")

    def pytest_collection_modifyitems(self, config: Any, items: list[Any]) -> None:
        """Leave out the test modules with a test that needs a real component (a broker, a
        schema registry): their module-level setup serves those tests too, and one that
        reconfigures the process (the Kafka runtime's) stops Spark's workers from applying
        mutants to the replays that follow."""
        modules = {
            _module_of(i) for i in items if EXTERNAL_FIXTURES & set(getattr(i, "fixturenames", ()))
        }
        external = [i for i in items if _module_of(i) in modules]
        if external:
            items[:] = [i for i in items if i not in external]
            config.hook.pytest_deselected(items=external)

    def pytest_plugin_registered(self, plugin: Any, manager: Any) -> None:
        # tests/conftest.py stops the shared session at the end of a run: not here.
        if getattr(plugin, "__name__", "").endswith("conftest") and hasattr(plugin, "stop_spark"):
            plugin.stop_spark = lambda: None

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Iterator[None]:
        label = TEST + item.nodeid
        limit = self.timeouts.get(label)
        if limit is not None:
            signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, limit)
        with _labelled(label):
            try:
                yield
            finally:
                if limit is not None:
                    signal.setitimer(signal.ITIMER_REAL, 0)

    def pytest_runtest_logreport(self, report: Any) -> None:
        label = TEST + report.nodeid
        self.seconds[label] = self.seconds.get(label, 0.0) + report.duration
        if report.failed:
            self.outcomes[label] = "failed"
            if self.first_failure is None:
                message = str(report.longrepr).strip().splitlines()
                self.first_failure = (label, (message[-1] if message else "failed")[:300])
        elif report.when == "call" or report.skipped:
            self.outcomes.setdefault(label, "skipped" if report.skipped else "passed")


def _module_of(item: Any) -> str:
    return str(item.nodeid).split("::", 1)[0]


def _alarm(signum: int, frame: Any) -> None:
    from engine.runtime.session import get_spark

    with contextlib.suppress(Exception):
        get_spark(kafka=True).sparkContext.cancelAllJobs()
    raise CheckTimeout("the test ran past its time limit under the mutant")


def _pytest(args: list[str], plugin: _PytestPlugin, repo: Path) -> int:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = pytest.main(
            [*args, "-q", "-p", "no:cacheprovider", "-m", EXCLUDED_MARKS, "--qtt-allow-orphans",
             "--rootdir", str(repo)],
            plugins=[plugin],
        )
    return int(code)


# ---------------------------------------------------------------------------- baseline


@dataclass
class Baseline:
    """What the unmutated checks do: outcome and time per check, and which lines they run."""

    key: str
    seconds: float
    durations: dict[str, float]
    failing: list[str]
    coverage: dict[str, dict[int, list[str]]]  # file -> line -> labels of checks
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        labels = sorted({label for lines in self.coverage.values() for ls in lines.values() for label in ls})
        index = {label: i for i, label in enumerate(labels)}
        return {
            "key": self.key,
            "seconds": round(self.seconds, 1),
            "durations": self.durations,
            "failing": self.failing,
            "labels": labels,
            "coverage": {
                path: {str(line): [index[x] for x in ls] for line, ls in sorted(lines.items())}
                for path, lines in sorted(self.coverage.items())
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Baseline:
        labels = data["labels"]
        return cls(
            key=data["key"], seconds=data["seconds"], durations=data["durations"],
            failing=data["failing"], cached=True,
            coverage={
                path: {int(line): [labels[i] for i in ls] for line, ls in lines.items()}
                for path, lines in data["coverage"].items()
            },
        )

    def checks_for(self, mutant: Mutant) -> list[str]:
        """The passing checks that run any line of the mutated node."""
        lines = self.coverage.get(mutant.path, {})
        found = {
            label
            for line in range(mutant.line, mutant.end_line + 1)
            for label in lines.get(line, ())
        }
        found -= set(self.failing)
        return sorted(found, key=lambda x: (self.durations.get(x, 0.0), x))


def select_tests(repo: Path) -> list[str]:
    """The tests the baseline traces: the test modules under ``tests/`` that import a module
    of ``LOWER_LAYER`` (not those of the mutation check), and the QTT case files."""
    lower = {module_name(p) for p in target_files(repo, LOWER_LAYER)}
    selected: list[str] = []
    for path in sorted((repo / "tests").rglob("test_*.py")):
        imported = imported_modules(path)
        if imported & lower and not imported & MUTATION_MODULES:
            selected.append(str(path.relative_to(repo)))
    if (repo / QTT_CASES).is_dir():
        selected.append(QTT_CASES)
    return selected


def imported_modules(path: Path) -> set[str]:
    """The absolute module names a Python file imports (``from a.b import c`` gives ``a.b``
    and ``a.b.c``, as ``c`` may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def baseline_key(
    repo: Path, files: Sequence[str], versions: Sequence[str], unit_tests: Sequence[str]
) -> str:
    """A hash of the engine's sources, the traced unit tests, the QTT case files (the
    up-to-date checks plan them) and the replayed versions."""
    digest = hashlib.sha256()
    cases = repo / QTT_CASES
    paths = sorted(
        {str(p.relative_to(repo)) for p in (repo / "engine").rglob("*.py")}
        | {str(p.relative_to(repo)) for t in unit_tests for p in _test_files(repo / t)}
        | ({str(p.relative_to(repo)) for p in cases.rglob("*.json")} if cases.is_dir() else set())
        | {"tests/conftest.py", *files}
    )
    for rel in paths:
        digest.update(rel.encode() + b"\0" + (repo / rel).read_bytes() + b"\0")
    for name in [*versions, *unit_tests]:
        digest.update(name.encode() + b"\0")
    return digest.hexdigest()


def _test_files(path: Path) -> list[Path]:
    """A test file, or the Python and QTT (``.json``) files of a test folder."""
    return [path] if path.is_file() else sorted([*path.rglob("*.py"), *path.rglob("*.json")])


def run_baseline(
    repo: Path, files: list[str], replays: Replays, unit_tests: Sequence[str], workdir: Path,
    control: Path, key: str,
) -> Baseline:
    """Run every check once without mutants, tracing the lines of ``files`` per check."""
    start = time.perf_counter()
    folder = workdir / "coverage"
    folder.mkdir()
    traced = tracer_files(repo, files)
    (folder / "files.json").write_text(json.dumps(traced), encoding="utf-8")
    write_control(control, None, folder)
    tracer = LineTracer(traced, _current_label)
    durations: dict[str, float] = {}
    failing: list[str] = []
    tracer.start()
    try:
        labels = replays.labels
        t0 = time.perf_counter()
        outcomes = replays.run(labels, timeout=dict.fromkeys(labels, 900.0), stop_on_failure=False)
        for label in labels:
            durations[label] = replays.seconds.get(label, 0.0)
            if outcomes[label].failed:
                failing.append(label)
                print(f"baseline {label} FAILS: {outcomes[label].detail}", flush=True)
        print(f"baseline replays and up-to-date checks: {len(labels)} run in {time.perf_counter() - t0:.0f}s", flush=True)
        if unit_tests:  # pytest given no path would collect the whole suite
            plugin = _PytestPlugin()
            t0 = time.perf_counter()
            _pytest([*unit_tests], plugin, repo)
            print(f"baseline unit tests: {len(plugin.outcomes)} run in "
                  f"{time.perf_counter() - t0:.0f}s", flush=True)
            durations.update(plugin.seconds)
            failing += sorted(label for label, o in plugin.outcomes.items() if o == "failed")
    finally:
        tracer.stop()
        write_control(control, None, None)
    hits: Hits = tracer.hits
    parts = sorted(folder.glob("worker-*.json"))
    print(f"baseline: lines traced in the driver and in {len(parts)} Spark tasks", flush=True)
    for part in parts:
        for label, pairs in json.loads(part.read_text(encoding="utf-8")).items():
            hits.setdefault(label, set()).update((p, n) for p, n in pairs)
    coverage: dict[str, dict[int, list[str]]] = {}
    for label, pairs in hits.items():
        for path, line in pairs:
            coverage.setdefault(path, {}).setdefault(line, []).append(label)
    for lines in coverage.values():
        for line in lines:
            lines[line] = sorted(set(lines[line]))
    return Baseline(key, time.perf_counter() - start, durations, failing, coverage)


# ------------------------------------------------------------------------------ mutants


@dataclass
class Verdict:
    """The result of one mutant."""

    mutant: Mutant
    verdict: str  # caught | survived | equivalent | invalid
    caught_by: str | None = None
    detail: str = ""
    checks_run: int = 0
    covering: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        m = self.mutant
        return {
            "id": m.id, "file": m.path, "line": m.line, "function": m.qualname,
            "operator": m.operator, "original": m.before.strip(), "mutated": m.after.strip(),
            "verdict": self.verdict, "caught_by": self.caught_by, "detail": self.detail,
            "checks_run": self.checks_run, "covering_checks": self.covering,
            "seconds": round(self.seconds, 2),
        }


def sample(repo: Path, count: int, seed: int) -> list[Mutant]:
    """``count`` mutants of the target files drawn with ``seed``, in file and line order."""
    everything = [m for path in target_files(repo, TARGETS) for m in find_mutants(repo, path)]
    chosen = random.Random(seed).sample(everything, min(count, len(everything)))
    return sorted(chosen, key=lambda m: (m.path, m.line, m.id))


def load_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """Reviewed equivalent mutants: id -> why no check can tell them from the original."""
    if not path.exists():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in data.items()
    ):
        raise ValueError(f"{path} must map mutant ids to non-empty reasons.")
    return data


def check_mutant(
    mutant: Mutant, baseline: Baseline, replays: Replays, control: Path, repo: Path,
    max_replays: int,
) -> Verdict:
    """Apply ``mutant`` (driver and workers), run the checks that execute it, revert."""
    checks = baseline.checks_for(mutant)
    replay_labels = [c for c in checks if c.startswith(REPLAY)]
    plan_labels = [c for c in checks if c.startswith(UP_TO_DATE)]
    test_labels = [c for c in checks if c.startswith(TEST)]
    covering = {"replays": len(replay_labels), "up_to_date": len(plan_labels),
                "tests": len(test_labels)}
    if not checks:
        return Verdict(mutant, "survived", detail="no check executes this line", covering=covering)
    try:
        applied = Applied(mutant)
    except (ValueError, SyntaxError, TypeError) as exc:  # TypeError: compile refused the tree
        return Verdict(mutant, "invalid", detail=str(exc), covering=covering)
    write_control(control, mutant, None)
    try:
        limits = {c: 60.0 + 4 * baseline.durations.get(c, 30.0) for c in checks}
        # Planning a case takes no Spark job: every covering up-to-date check runs, first.
        chosen = plan_labels + replay_labels[:max_replays]
        results = replays.run(chosen, timeout=limits, stop_on_failure=True)
        run = len(results)
        for label in chosen:
            if label in results and results[label].failed:
                return Verdict(mutant, "caught", label, results[label].detail, run, covering)
        if test_labels:
            plugin = _PytestPlugin(limits)
            code = _pytest(["-x", *[t[len(TEST):] for t in test_labels]], plugin, repo)
            run += len(plugin.outcomes)
            if plugin.first_failure is not None:
                label, detail = plugin.first_failure
                return Verdict(mutant, "caught", label, detail, run, covering)
            if code not in (0, 5):
                return Verdict(mutant, "caught", "pytest", f"pytest exit code {code}", run, covering)
        skipped = len(replay_labels) - len(chosen)
        note = f" ({skipped} more covering replays not run)" if skipped else ""
        return Verdict(mutant, "survived", detail="no check failed" + note, checks_run=run,
                       covering=covering)
    finally:
        applied.revert()
        write_control(control, None, None)


# ---------------------------------------------------------------------------------- main


@dataclass
class Options:
    count: int = 120
    seed: int = 0
    jobs: int = 2
    max_replays: int = 10
    report: Path = REPORT
    baseline: Path = BASELINE
    fresh_baseline: bool = False
    all_versions: bool = False
    check_equivalents: bool = False
    replays_only: bool = False  # the planned cases alone, as qtt plans verify checks them
    record: bool = False  # append the run to the benchmark history (benchmarks.mutation)
    cases: str = ""  # replay only the cases whose folder name contains this
    tests: list[str] = field(default_factory=list)  # empty: select_tests chooses


def parse_args(argv: Sequence[str]) -> Options:
    """``--count N --seed S --jobs J --max-replays K --report PATH --baseline PATH
    --cases TEXT --tests PATH (repeatable) --fresh-baseline --all-versions
    --check-equivalents --replays-only --record``."""
    options = Options()
    tests: list[str] = []
    args = list(argv)
    flags = {"--fresh-baseline": "fresh_baseline", "--all-versions": "all_versions",
             "--check-equivalents": "check_equivalents", "--replays-only": "replays_only",
             "--record": "record"}
    valued = {"--count": ("count", int), "--seed": ("seed", int), "--jobs": ("jobs", int),
              "--max-replays": ("max_replays", int), "--report": ("report", Path),
              "--baseline": ("baseline", Path), "--cases": ("cases", str)}
    while args:
        arg = args.pop(0)
        if arg in flags:
            setattr(options, flags[arg], True)
        elif arg == "--tests":
            if not args:
                raise ValueError("Option --tests needs a path.")
            tests.append(args.pop(0))
        elif arg in valued:
            name, kind = valued[arg]
            if not args:
                raise ValueError(f"Option {arg} needs a value.")
            value = args.pop(0)
            try:
                setattr(options, name, kind(value))
            except ValueError:
                raise ValueError(f"Option {arg} needs a number, not {value!r}.") from None
        else:
            known = ", ".join([*valued, "--tests", *flags])
            raise ValueError(f"Unknown option {arg!r}; known: {known}.")
    if tests:
        if options.replays_only:
            raise ValueError("--replays-only runs no unit test; drop --tests.")
        options.tests = tests
    if options.count < 1 or options.jobs < 1 or options.max_replays < 0:
        raise ValueError("--count and --jobs must be at least 1, --max-replays at least 0.")
    return options


def traced_test_paths(options: Options, repo: Path) -> list[str]:
    """The unit tests the run traces and runs: none with ``--replays-only``, those given
    with ``--tests``, else ``select_tests``."""
    if options.replays_only:
        return []
    return list(options.tests) or select_tests(repo)


def _versions(repo: Path, all_versions: bool, cases: str) -> dict[str, Any]:
    from qtt.plans.layout import case_dirs, latest_version, saved_versions

    out: dict[str, Any] = {}
    for case in case_dirs(repo / "planned_cases"):
        if cases not in case.name:
            continue
        chosen = saved_versions(case) if all_versions else [latest_version(case)]
        for version in chosen:
            if version is not None:
                out[f"{REPLAY}{version.slug}/{version.name}"] = version
    return out


def _up_to_date_cases(repo: Path, versions: dict[str, Any]) -> dict[str, Any]:
    """An up-to-date check (label -> QTT case) for each positive case of ``tests/qtt_cases``
    whose planned-case folder is replayed."""
    from qtt.plans.layout import case_slug
    from qtt.plans.verify import current_cases

    if not (repo / QTT_CASES).is_dir():
        return {}
    slugs = {v.slug for v in versions.values()}
    cases, _ = current_cases([repo / QTT_CASES])
    return {f"{UP_TO_DATE}{case_slug(c.id)}": c for c in cases if case_slug(c.id) in slugs}


def summarise(verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """Totals and the score: caught / (caught + survived); equivalent and invalid excluded."""
    counts = {k: sum(v.verdict == k for v in verdicts)
              for k in ("caught", "survived", "equivalent", "invalid")}
    scored = counts["caught"] + counts["survived"]
    by_check = {
        "replay": sum(v.verdict == "caught" and (v.caught_by or "").startswith(REPLAY) for v in verdicts),
        "unit test": sum(v.verdict == "caught" and not (v.caught_by or "").startswith(REPLAY)
                         for v in verdicts),
        "timeout": sum(v.verdict == "caught" and v.detail.startswith("timeout") for v in verdicts),
    }
    return {"mutants": len(verdicts), **counts, "caught_by": by_check,
            "score": round(counts["caught"] / scored, 4) if scored else 1.0}


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _git_commit(repo: Path) -> str | None:
    """The commit the run measures, ``+dirty`` when the mutated code, the tests or the planned
    cases have uncommitted changes (the report then names no exact state)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--", "engine", "tests", "planned_cases")
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the mutation check; 0 when the score reaches the target, 1 below it, 2 on errors."""
    try:
        options = parse_args(sys.argv[1:] if argv is None else argv)
        equivalents = load_equivalents()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    repo = Path.cwd()
    if not (repo / "planned_cases").is_dir() or not (repo / "engine").is_dir():
        print("error: run the mutation check from the repository root (no planned_cases/ or "
              "engine/ here).", file=sys.stderr)
        return 2
    started, load_start = time.perf_counter(), _load()
    started_at, commit = _utc_now(), _git_commit(repo)
    mutants = sample(repo, options.count, options.seed)
    files = sorted({m.path for m in mutants} | set(target_files(repo, TARGETS)))
    workdir = Path(tempfile.mkdtemp(prefix="kspark-mutation-"))
    control = workdir / "control.json"
    write_control(control, None, None)
    os.environ[CONTROL_ENV] = str(control)
    try:
        return _run(repo, options, mutants, files, equivalents, workdir, control,
                    started, load_start, started_at, commit)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _run(
    repo: Path, options: Options, mutants: list[Mutant], files: list[str],
    equivalents: dict[str, str], workdir: Path, control: Path, started: float,
    load_start: list[float], started_at: str, commit: str | None,
) -> int:
    from engine.builders import walker
    from engine.runtime.session import get_spark

    get_spark(kafka=True, extra_conf={"spark.python.daemon.module": "qtt.plans.mutation_worker"})
    walker._load_builders()
    import engine.runtime.kafka  # noqa: F401 - the streaming operators, as workers have them

    versions = _versions(repo, options.all_versions, options.cases)
    replays = Replays(versions, options.jobs, _up_to_date_cases(repo, versions), repo / "planned_cases")
    options.tests = traced_test_paths(options, repo)
    for test in options.tests:
        if not (repo / test.split("::")[0]).exists():
            print(f"error: unit test path {test} does not exist.", file=sys.stderr)
            return 2
    key = baseline_key(repo, files, replays.labels, options.tests)
    baseline: Baseline | None = None
    if options.baseline.exists() and not options.fresh_baseline:
        cached = Baseline.from_json(json.loads(options.baseline.read_text(encoding="utf-8")))
        baseline = cached if cached.key == key else None
    if baseline is None:
        print(f"Baseline: {len(replays.versions)} replays, {len(replays.cases)} up-to-date checks and the tests of {len(options.tests)} "
              "test modules and folders, traced.", flush=True)
        baseline = run_baseline(repo, files, replays, options.tests, workdir, control, key)
        options.baseline.parent.mkdir(parents=True, exist_ok=True)
        options.baseline.write_text(json.dumps(baseline.to_json()), encoding="utf-8")
    else:
        print(f"Baseline: cached in {options.baseline} (sources unchanged).", flush=True)
    if baseline.failing:
        print(f"{len(baseline.failing)} checks fail without a mutant and are not used: "
              + ", ".join(baseline.failing[:5]) + (" ..." if len(baseline.failing) > 5 else ""))
    verdicts: list[Verdict] = []
    mutation_start = time.perf_counter()
    for i, mutant in enumerate(mutants, start=1):
        t0 = time.perf_counter()
        if mutant.id in equivalents and not options.check_equivalents:
            verdict = Verdict(mutant, "equivalent", detail=equivalents[mutant.id])
        else:
            verdict = check_mutant(mutant, baseline, replays, control, repo, options.max_replays)
            if mutant.id in equivalents:
                verdict.detail = f"listed as equivalent ({equivalents[mutant.id]}); {verdict.verdict}"
                verdict.verdict = "equivalent"
        verdict.seconds = time.perf_counter() - t0
        verdicts.append(verdict)
        by = f" by {verdict.caught_by}" if verdict.caught_by else ""
        print(f"[{i}/{len(mutants)}] {mutant.path}:{mutant.line} {mutant.operator}: "
              f"{verdict.verdict}{by} ({verdict.seconds:.1f}s)", flush=True)
        if verdict.verdict == "survived":
            print(f"    {mutant.before.strip()}  ->  {mutant.after.strip()}", flush=True)
    totals = summarise(verdicts)
    report: dict[str, Any] = {
        "date": started_at, "commit": commit,
        "seed": options.seed, "count": options.count, "targets": list(TARGETS),
        "unit_tests": options.tests, "replays_only": options.replays_only,
        "replays": len(replays.versions), "up_to_date_checks": len(replays.cases),
        "all_versions": options.all_versions, "max_replays": options.max_replays,
        "jobs": options.jobs,
        "seconds": round(time.perf_counter() - started, 1),
        "mutation_seconds": round(time.perf_counter() - mutation_start, 1),
        "load_average": {"start": load_start, "end": _load()},
        "baseline": {"cached": baseline.cached, "seconds": baseline.seconds,
                     "failing": baseline.failing},
        "totals": totals,
        "mutants": [v.to_json() for v in verdicts],
    }
    options.report.parent.mkdir(parents=True, exist_ok=True)
    options.report.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{totals['caught']} of {totals['caught'] + totals['survived']} non-equivalent mutants "
          f"caught ({totals['score']:.1%}; {totals['equivalent']} equivalent, "
          f"{totals['invalid']} invalid) in {report['seconds']:.0f}s, load average "
          f"{load_start} -> {_load()}; report: {options.report}")
    if options.record:
        from benchmarks.mutation import record

        record(options.report, out=options.report.with_name("mutation-benchmark.json"))
        print("Recorded in benchmarks/reports/mutation.json; regenerate docs/benchmarks.md with "
              "python -m qtt.docs_reference.")
    return 0 if totals["score"] >= TARGET_SCORE else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
