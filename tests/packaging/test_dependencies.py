"""Every module the package imports at run time, lazily too, comes from a declared dependency.

A plain ``pip install kspark`` installs ``[project] dependencies`` only; the test environment
has every extra, so an import of a package that only an extra brings works here and fails for
a user. This walks every import statement of the installed packages (module level or inside a
function) and checks it against the distributions that provide it.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engine", "qtt", "benchmarks")

# Modules of an extra, and the only files that may import them: the pytest plugin (loaded by
# pytest itself) and the developer tools that ask for their extra by name (qtt.optional.require).
OPTIONAL = {
    "pytest": {"qtt/plugin.py", "qtt/hookspecs.py", "qtt/plans/mutation.py"},
    "hypothesis": {"qtt/plans/mutation.py"},
    "tree_sitter": {"qtt/parity/functions.py"},
    "tree_sitter_java": {"qtt/parity/functions.py"},
}


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.split(r"[<>=!~\[; ]", requirement.strip(), maxsplit=1)[0]).lower()


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {_name(r) for r in project["dependencies"]}


def imports() -> dict[str, set[str]]:
    """Top-level module -> the package files importing it (absolute imports, any depth)."""
    found: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], set()).add(path.relative_to(ROOT).as_posix())
    return found


def undeclared(found: dict[str, set[str]], deps: set[str]) -> dict[str, set[str]]:
    providers = packages_distributions()
    own = {*PACKAGES, "__future__"}
    missing: dict[str, set[str]] = {}
    for module, files in found.items():
        if module in sys.stdlib_module_names or module in own:
            continue
        if module in OPTIONAL:
            files = files - OPTIONAL[module]
            if not files:
                continue
        if not any(_name(dist) in deps for dist in providers.get(module, [module])):
            missing[module] = files
    return missing


def test_every_runtime_import_is_a_declared_dependency() -> None:
    missing = undeclared(imports(), declared())
    assert not missing, "Imported but not in [project] dependencies (a plain pip install lacks them):\n" + "\n".join(
        f"  {module}: {', '.join(sorted(files))}" for module, files in sorted(missing.items())
    )


def test_the_check_finds_an_import_that_only_an_extra_brings() -> None:
    found = {"httpx": {"engine/server/tables_service.py"}, "pytest": {"engine/x.py", "qtt/plugin.py"}}
    missing = undeclared(found, {"pyspark"})
    assert missing == {"httpx": {"engine/server/tables_service.py"}, "pytest": {"engine/x.py"}}


def test_a_tool_without_its_extra_names_the_extra_in_one_line() -> None:
    import pytest

    from qtt.optional import require

    with pytest.raises(SystemExit) as exited:
        require("no_such_module_kspark", extra="test", tool="The mutation check")
    assert str(exited.value) == (
        "The mutation check needs the Python package 'no_such_module_kspark', from kspark's 'test' extra: "
        "pip install 'kspark[test]'."
    )
