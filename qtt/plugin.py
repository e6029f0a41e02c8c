"""pytest plugin: every expanded case of the project's QTT files is one test item.

Files (``*.json``) are collected under the folders of the ini option ``qtt_paths``
(default ``tests/qtt_cases``, relative to the rootdir). Cases run in strict mode; an
unsupported feature or a file that cannot be loaded fails. A conftest can share one engine
setup for the session by implementing ``pytest_qtt_engine_factory(config)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from qtt import hookspecs

_FACTORY_KEY = pytest.StashKey[Any]()
_COUNTS_KEY = pytest.StashKey[dict[str, int]]()


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


class QttLoadFailed(Exception):
    """A QTT file or case could not be loaded."""


class QttCaseItem(pytest.Item):
    """One expanded QTT case, run strictly."""

    def __init__(self, *, case: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case

    def runtest(self) -> None:
        from qtt.runner import Status, run_case

        result = run_case(self.case, strict=True, engine_factory=_engine_factory(self.config))
        counts = self.config.stash[_COUNTS_KEY]
        counts[result.status.value] = counts.get(result.status.value, 0) + 1
        if result.status is not Status.PASSED:
            raise QttCaseFailed(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """The readable diff for case failures; the usual traceback otherwise."""
        if isinstance(excinfo.value, QttCaseFailed):
            result = excinfo.value.result
            where = f"QTT case '{self.case.id}' is case #{self.case.index + 1} of {self.case.file}"
            return result.render() + where
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


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """One line counting QTT case verdicts, when any ran."""
    counts = config.stash.get(_COUNTS_KEY, {})
    if counts:
        text = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        terminalreporter.write_line(f"qtt: {sum(counts.values())} cases ran: {text}")
