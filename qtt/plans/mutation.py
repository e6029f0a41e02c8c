"""Mutation check: inject small changes into builders, expression evaluation and plan serde,
run the planned-case replays and then the mutated package's unit tests for each mutant on a
temporary copy of the tree, and report how many mutants the suite catches.

``python -m qtt.plans.mutation [--limit N]``. The real tree is never modified: each mutant
is written into a copy under a temporary folder, which is removed even on Ctrl-C.
"""

from __future__ import annotations

import ast
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

TARGETS = ("engine/build", "engine/expressions", "engine/plan/serde.py")
_SWAPS = (
    (r" > ", " >= "),
    (r" < ", " <= "),
    (r" == ", " != "),
    (r" \+ 1\b", " + 2"),
    (r"\bTrue\b", "False"),
    (r" and ", " or "),
)
_COPY = (
    "engine", "qtt", "tests/qtt_cases", "tests/engine", "tests/conftest.py",
    "planned_cases", "schemas", "pyproject.toml",
)


@dataclass(frozen=True)
class Mutant:
    """One change: file, line number, original and mutated line."""

    path: str
    line: int
    before: str
    after: str


def find_mutants(repo: Path) -> list[Mutant]:
    """Every single-operator swap in the target files (skipping comments and docstrings)."""
    out: list[Mutant] = []
    for target in TARGETS:
        base = repo / target
        files = [base] if base.is_file() else sorted(base.rglob("*.py"))
        for file in files:
            text = file.read_text()
            strings = _string_lines(text)
            for number, line in enumerate(text.splitlines(), start=1):
                code = line.strip()
                if not code or code.startswith("#") or number in strings:
                    continue
                for pattern, replacement in _SWAPS:
                    if re.search(pattern, line):
                        mutated = re.sub(pattern, replacement, line, count=1)
                        out.append(Mutant(str(file.relative_to(repo)), number, line, mutated))
    return out


def _string_lines(text: str) -> set[int]:
    """Lines of docstrings and other bare string statements (mutating them changes nothing)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


# The unit tests that mirror each mutated package (run when the replays did not catch it).
UNIT_TESTS = {
    "engine/build": ("tests/engine/build",),
    "engine/expressions": ("tests/engine/expressions", "tests/engine/functions"),
    "engine/plan/serde.py": ("tests/engine/plan",),
}


def _run(repo_copy: Path, command: list[str]) -> bool:
    """Run ``command`` in the copy; True when it fails (or hangs)."""
    try:
        run = subprocess.run(
            command,
            cwd=repo_copy,
            capture_output=True,
            timeout=900,
            env={**os.environ, "PYTHONPATH": str(repo_copy)},
        )
    except subprocess.TimeoutExpired:
        return True
    return run.returncode != 0


def checks_fail(repo_copy: Path, mutant: Mutant | None = None) -> bool:
    """The suite against a mutant: ``qtt plans verify``, then the unit tests of its package.

    True when any check fails. Without a mutant, everything runs (the baseline must pass).
    """
    if _run(repo_copy, [sys.executable, "-m", "qtt.cli", "plans", "verify", "--allow-orphans"]):
        return True
    targets = [
        t for prefix, tests in UNIT_TESTS.items()
        if mutant is None or mutant.path.startswith(prefix)
        for t in tests
    ]
    pytest = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-p", "no:qtt"]
    return bool(targets) and _run(repo_copy, [*pytest, *dict.fromkeys(targets)])


def killed(repo_copy: Path, mutant: Mutant) -> bool:
    """Apply the mutant in the copy, run the checks, restore the file; True when caught."""
    path = repo_copy / mutant.path
    original = path.read_text()
    lines = original.splitlines(keepends=True)
    lines[mutant.line - 1] = mutant.after + "\n"
    path.write_text("".join(lines))
    try:
        return checks_fail(repo_copy, mutant)
    finally:
        path.write_text(original)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Sample mutants (``--limit N``, default 20, seed 0), run them, print the kill rate."""
    args = sys.argv[1:] if argv is None else argv
    limit = int(args[args.index("--limit") + 1]) if "--limit" in args else 20
    repo = Path.cwd()
    mutants = find_mutants(repo)
    random.Random(0).shuffle(mutants)
    mutants = mutants[:limit]
    signal.signal(signal.SIGTERM, _interrupt)  # clean the copy up on kill, as on Ctrl-C
    workdir = Path(tempfile.mkdtemp(prefix="kspark-mutation-"))
    caught = 0
    try:
        for item in _COPY:
            src = repo / item
            if src.is_dir():
                shutil.copytree(src, workdir / item, ignore=shutil.ignore_patterns("__pycache__"))
            elif src.exists():
                (workdir / item).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, workdir / item)
        if checks_fail(workdir):
            print("The checks fail without any mutant: fix `qtt plans verify` first.")
            return 2
        for i, mutant in enumerate(mutants, start=1):
            hit = killed(workdir, mutant)
            caught += hit
            verdict = "caught " if hit else "MISSED "
            print(
                f"[{i}/{len(mutants)}] {verdict}{mutant.path}:{mutant.line}: {mutant.after.strip()}"
            )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    rate = caught / len(mutants) if mutants else 1.0
    print(f"{caught}/{len(mutants)} mutants caught ({rate:.0%})")
    return 0 if rate >= 0.9 else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
