"""pytest plugin: every expanded case of the project's QTT files is one test item.

Files (``*.json``) are collected under the folders of the ini option ``qtt_paths``
(default ``tests/qtt_cases``, relative to the rootdir). Cases run in strict mode; an
unsupported feature or a file that cannot be loaded fails. A conftest can share one engine
setup for the session by implementing ``pytest_qtt_engine_factory(config)``.

Planned cases (``qtt.plans``): when the folder of the ini option ``qtt_planned_cases``
(default ``planned_cases``) exists, every positive case that passes must also match its
latest planned case; ``--qtt-update`` writes a new planned case instead of failing (never
rewriting a saved one). After a full run, planned cases with no current case are orphans
and fail the session unless ``--qtt-allow-orphans``. The terminal summary counts passed,
failed, written and orphaned planned cases and prints the command that fixes the state.

Sharing with ``qtt plans verify``: a test that asks for the fixture ``qtt_case_runs`` runs
after every QTT case of the session, and gets what their runs proved (``CaseRuns``): the
cases whose plan is up to date, and for each, its run compared with its latest saved
version as a replay compares (``qtt.plans.case_runs``). Passed to ``verify(known_replays=,
known_up_to_date=)``, these versions are not replayed a second time. Alone, the test gets
an empty ``CaseRuns`` and verify replays everything.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qtt import hookspecs

_FACTORY_KEY = pytest.StashKey[Any]()
_COUNTS_KEY = pytest.StashKey[dict[str, int]]()
_PLANS_KEY = pytest.StashKey[dict[str, Any]]()
_CASE_RUNS_KEY = pytest.StashKey[Any]()  # a CaseRuns when a test of the session asks for it
CASE_RUNS_FIXTURE = "qtt_case_runs"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the "qtt" option group and the ``qtt_paths`` ini option."""
    group = parser.getgroup("qtt", "QTT (query translation test) cases")
    group.addoption(
        "--qtt-filter",
        action="store",
        default=None,
        metavar="SUBSTRING",
        help="Only run QTT cases whose id contains SUBSTRING.",
    )
    group.addoption(
        "--qtt-update",
        action="store_true",
        default=False,
        help="Write a new planned case for every case whose planned case is missing or stale.",
    )
    group.addoption(
        "--qtt-allow-orphans",
        action="store_true",
        default=False,
        help="Report planned cases that no current case uses, but do not fail the run.",
    )
    parser.addini(
        "qtt_planned_cases",
        "Folder of the planned cases (relative to the rootdir).",
        default="planned_cases",
    )
    parser.addini(
        "qtt_paths",
        "Folders holding the project's QTT case files (relative to the rootdir).",
        type="linelist",
        default=["tests/qtt_cases"],
    )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Add the ``pytest_qtt_*`` hooks."""
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    """Start the session's QTT counters."""
    config.stash[_COUNTS_KEY] = {}
    config.stash[_PLANS_KEY] = {
        "counts": {"passed": 0, "failed": 0, "written": 0, "orphaned": 0},
        "collected_files": set(),
        "orphans": [],
    }


def _planned_root(config: pytest.Config) -> Path | None:
    """The planned-cases folder, or None when planned cases are not in use."""
    path = Path(config.getini("qtt_planned_cases"))
    root = path if path.is_absolute() else config.rootpath / path
    if root.is_dir() or config.getoption("qtt_update"):
        return root
    return None


def _qtt_roots(config: pytest.Config) -> list[Path]:
    roots: list[Path] = []
    for entry in config.getini("qtt_paths"):
        path = Path(entry)
        roots.append((path if path.is_absolute() else config.rootpath / path).resolve())
    return roots


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect ``*.json`` files under the ``qtt_paths`` folders as QTT files."""
    if file_path.suffix != ".json":
        return None
    resolved = file_path.resolve()
    for root in _qtt_roots(parent.config):
        if resolved.is_relative_to(root):
            return QttFileCollector.from_parent(parent, path=file_path)
    return None


class QttFileCollector(pytest.File):
    """One QTT file: an item per expanded case, per load problem and per skipped case."""

    def collect(self) -> Iterator[pytest.Item]:
        from qtt.loader import load_file

        wanted = self.config.getoption("qtt_filter")
        loaded = load_file(self.path)
        self.config.stash[_PLANS_KEY]["collected_files"].add(self.path.resolve())

        def keep(case_id: str) -> bool:
            return wanted is None or wanted in case_id

        for problem in loaded.problems:
            if keep(problem.id):
                yield QttProblemItem.from_parent(self, name=problem.id, problem=str(problem))
        for case in loaded.cases:
            if keep(case.id):
                yield QttCaseItem.from_parent(self, name=case.id, case=case)
        for case_id, why in [(c, "disabled (enabled: false)") for c in loaded.disabled] + [
            (c, "not applicable to the emulated ksqlDB version") for c in loaded.not_applicable
        ]:
            if keep(case_id):
                yield QttSkippedItem.from_parent(self, name=case_id, why=why)


class QttCaseFailed(Exception):
    """A QTT case did not pass; carries the runner's result."""

    def __init__(self, result: Any) -> None:
        super().__init__(result.reason)
        self.result = result


class QttPlannedCaseStale(Exception):
    """A case's latest planned case is missing or differs from what the engine plans now."""


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Tests asking for ``qtt_case_runs`` run after the QTT cases, which then keep their runs.

    The QTT cases go first and those tests right after them, before every other test: such
    a test (``qtt plans verify`` over the committed planned cases) is long, and under
    pytest-xdist with ``--no-loadscope-reorder``, which hands out test files in this order, it
    then runs alongside the rest of the suite on the other workers instead of alone at the
    end (by default pytest-xdist hands out the files with the most tests first). It gets the
    runs of the QTT cases its own worker ran.
    """
    users = [i for i in items if CASE_RUNS_FIXTURE in getattr(i, "fixturenames", ())]
    if not users or config.getoption("qtt_update"):
        return
    if any(isinstance(i, QttCaseItem) for i in items):
        from qtt.plans.case_runs import CaseRuns

        config.stash[_CASE_RUNS_KEY] = CaseRuns()
    cases = [i for i in items if isinstance(i.parent, QttFileCollector)]
    rest = [i for i in items if i not in users and not isinstance(i.parent, QttFileCollector)]
    items[:] = cases + users + rest


@pytest.fixture(name=CASE_RUNS_FIXTURE)
def qtt_case_runs(request: pytest.FixtureRequest) -> Any:
    """What the session's QTT case runs proved (``qtt.plans.case_runs.CaseRuns``); empty when
    no QTT case ran in this session."""
    from qtt.plans.case_runs import CaseRuns

    return request.config.stash.get(_CASE_RUNS_KEY, None) or CaseRuns()


def _check_planned_case(
    config: pytest.Config, case: Any, root: Path, capture: Any = None
) -> None:
    from qtt.plans.record import record_case, write_planned_case
    from qtt.plans.uptodate import check_up_to_date

    counts = config.stash[_PLANS_KEY]["counts"]
    result = check_up_to_date(case, root)
    if result.ok:
        counts["passed"] += 1
        if capture is not None and _CASE_RUNS_KEY in config.stash:
            config.stash[_CASE_RUNS_KEY].add(result, capture.result())
    elif config.getoption("qtt_update"):
        write_planned_case(root, record_case(case))
        counts["written"] += 1
    else:
        counts["failed"] += 1
        raise QttPlannedCaseStale(
            result.render() + "\nOr with pytest: pytest --qtt-update --qtt-filter " + repr(case.id)
        )


class QttLoadFailed(Exception):
    """A QTT file or case could not be loaded."""


class QttCaseItem(pytest.Item):
    """One expanded QTT case, run strictly."""

    def __init__(self, *, case: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        from qtt.runner import Status, run_case

        root = _planned_root(self.config)
        factory = _engine_factory(self.config)
        capture = None
        if (
            root is not None
            and factory is None
            and self.case.expected_exception is None
            and _CASE_RUNS_KEY in self.config.stash
        ):
            from qtt.plans.case_runs import CaseRunCapture

            capture = CaseRunCapture(self.case, root)
            factory = capture.engine_factory
        result = run_case(self.case, strict=True, engine_factory=factory)
        counts = self.config.stash[_COUNTS_KEY]
        counts[result.status.value] = counts.get(result.status.value, 0) + 1
        if result.status is not Status.PASSED:
            raise QttCaseFailed(result)
        if root is not None and self.case.expected_exception is None:
            _check_planned_case(self.config, self.case, root, capture)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """The readable diff for case failures; the usual traceback otherwise."""
        if isinstance(excinfo.value, QttCaseFailed):
            result = excinfo.value.result
            where = f"QTT case '{self.case.id}' is case #{self.case.index + 1} of {self.case.file}"
            return result.render() + where
        if isinstance(excinfo.value, QttPlannedCaseStale):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"qtt: {self.name}"


class QttProblemItem(pytest.Item):
    """A file or case that cannot be loaded: always fails with the loader's message."""

    def __init__(self, *, problem: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.problem = problem

    def runtest(self) -> None:
        raise QttLoadFailed(self.problem)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return f"QTT file cannot be loaded: {self.problem}"

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"qtt: {self.name}"


class QttSkippedItem(pytest.Item):
    """A disabled or not-applicable case, reported as skipped."""

    def __init__(self, *, why: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.why = why

    def runtest(self) -> None:
        pytest.skip(self.why)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"qtt: {self.name}"


def _engine_factory(config: pytest.Config) -> Any:
    if _FACTORY_KEY not in config.stash:
        config.stash[_FACTORY_KEY] = config.hook.pytest_qtt_engine_factory(config=config)
    return config.stash[_FACTORY_KEY]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Find orphaned planned cases after a full QTT run; they fail it unless allowed.

    Under pytest-xdist each worker hands its counts and orphans to the controller
    (``pytest_testnodedown``), which prints them and fails the run."""
    config = session.config
    _find_orphans(session, exitstatus)
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:
        state = config.stash.get(_PLANS_KEY, None)
        cases: dict[str, int] = config.stash[_COUNTS_KEY] if _COUNTS_KEY in config.stash else {}
        workeroutput[_WORKER_OUTPUT] = {
            "counts": dict(cases),
            "plans": dict(state["counts"]) if state is not None else {},
            "orphans": list(state["orphans"]) if state is not None else [],
        }
    elif _orphans_fail(config):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


_WORKER_OUTPUT = "qtt"


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """The controller of a pytest-xdist run adds up what a finished worker counted."""
    output = getattr(node, "workeroutput", {}).get(_WORKER_OUTPUT)
    if not output:
        return
    config = node.config
    counts = config.stash[_COUNTS_KEY]
    for status, n in output["counts"].items():
        counts[status] = counts.get(status, 0) + n
    state = config.stash[_PLANS_KEY]
    for key in ("passed", "failed", "written"):
        state["counts"][key] += output["plans"].get(key, 0)
    # Every worker collects every file, so each finds the same orphans.
    state["orphans"] = sorted(set(state["orphans"]) | set(output["orphans"]))
    state["counts"]["orphaned"] = len(state["orphans"])


def _orphans_fail(config: pytest.Config) -> bool:
    state = config.stash.get(_PLANS_KEY, None)
    return bool(state and state["orphans"]) and not config.getoption("qtt_allow_orphans")


def _find_orphans(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(_PLANS_KEY, None)
    root = _planned_root(config)
    if state is None or root is None or config.getoption("qtt_filter"):
        return
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return
    from qtt.loader import discover
    from qtt.plans.verify import current_cases, find_orphans

    roots = [r for r in _qtt_roots(config) if r.is_dir()]
    every_file = {p.resolve() for p, _ in discover(roots)} if roots else set()
    if not every_file or not every_file <= state["collected_files"]:
        return  # only part of the QTT files ran: orphans cannot be told apart
    cases, _ = current_cases(roots)
    state["orphans"] = find_orphans(root, cases)
    state["counts"]["orphaned"] = len(state["orphans"])


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """Lines counting QTT case verdicts and planned cases, with the command that fixes them."""
    counts = config.stash.get(_COUNTS_KEY, {})
    if counts:
        text = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        terminalreporter.write_line(f"qtt: {sum(counts.values())} cases ran: {text}")
    state = config.stash.get(_PLANS_KEY, None)
    if state is None or not any(state["counts"].values()):
        return
    plans = state["counts"]
    terminalreporter.write_line(
        f"qtt planned cases: {plans['passed']} passed, {plans['failed']} failed, "
        f"{plans['written']} written, {plans['orphaned']} orphaned"
    )
    if plans["failed"]:
        terminalreporter.write_line(
            "qtt: write the missing or stale planned cases with: pytest --qtt-update "
            "(or: qtt plans regenerate)"
        )
    if state["orphans"]:
        allowed = config.getoption("qtt_allow_orphans")
        for slug in state["orphans"]:
            terminalreporter.write_line(f"qtt: orphaned planned case: {slug}")
        if not allowed:
            terminalreporter.write_line(
                "qtt: delete the orphaned folders under planned_cases/ if their cases were "
                "removed on purpose, or pass --qtt-allow-orphans"
            )
