"""The mutation check's parts that need no Spark: mutants, in-process swaps, workers' sync,
check selection, scoring, options and the reviewed equivalents."""

from __future__ import annotations

import importlib
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from qtt.plans import mutation_worker
from qtt.plans.mutants import OPERATORS, Applied, Mutant, find_mutants, target_files
from qtt.plans.mutation import (
    EQUIVALENTS,
    TARGETS,
    UP_TO_DATE,
    Baseline,
    Outcome,
    Replays,
    Verdict,
    _PytestPlugin,
    _up_to_date_cases,
    _up_to_date_check,
    imported_modules,
    load_equivalents,
    parse_args,
    sample,
    select_tests,
    summarise,
    traced_test_paths,
)

REPO = Path(__file__).resolve().parents[3]

TOY = '''\
"""A module to mutate."""
from functools import lru_cache

LIMIT = 3


def above(x, y):
    """Docstrings are never mutated."""
    return x > y


def clamp(values):
    out = []
    for v in values:
        if v < 0 and v != -1:
            continue
        out.append(v + 1 if v <= LIMIT else LIMIT)
    return out


@lru_cache(maxsize=None)
def double(x):
    return x * 2


class Box:
    def keep(self, flag):
        return not flag
'''


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    package = tmp_path / "toymut"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "calc.py").write_text(TOY)
    (package / "user.py").write_text("from toymut.calc import above, clamp, double, Box\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("toymut")]:
        del sys.modules[name]


def _one(repo: Path, qualname: str, operator: str, before: str) -> Mutant:
    found = [
        m for m in find_mutants(repo, "toymut/calc.py")
        if m.qualname == qualname and m.operator == operator and before in m.after
    ]
    assert found, (qualname, operator, before)
    return found[0]


def test_mutants_cover_every_operator_and_skip_docstrings_and_module_code(toy: Path) -> None:
    mutants = find_mutants(toy, "toymut/calc.py")
    assert {m.operator for m in mutants} == set(OPERATORS)
    assert all(m.qualname in {"above", "clamp", "double", "Box.keep"} for m in mutants)
    assert not [m for m in mutants if "Docstrings" in m.before]
    assert len({m.id for m in mutants}) == len(mutants)
    compare = _one(toy, "above", "compare", ">=")
    assert (compare.line, compare.before.strip(), compare.after.strip()) == (
        9, "return x > y", "return x >= y"
    )


def test_mutant_ids_survive_edits_elsewhere_in_the_file(toy: Path) -> None:
    before = {m.id: m.line for m in find_mutants(toy, "toymut/calc.py")}
    path = toy / "toymut/calc.py"
    path.write_text(path.read_text().replace("LIMIT = 3\n", "LIMIT = 3\n\n\nOTHER = 1\n"))
    after = {m.id: m.line for m in find_mutants(toy, "toymut/calc.py")}
    assert set(after) == set(before)
    assert all(after[i] == before[i] + 3 for i in before if before[i] > 4)


def test_applied_mutant_changes_every_reference_and_revert_restores_it(toy: Path) -> None:
    user = importlib.import_module("toymut.user")
    assert user.above(2, 2) is False
    applied = Applied(_one(toy, "above", "compare", ">="))
    try:
        assert user.above(2, 2) is True  # a copy imported by name runs the mutant
    finally:
        applied.revert()
    assert user.above(2, 2) is False


def test_a_mutant_applies_to_functions_frozen_out_of_the_collector(toy: Path) -> None:
    # kspark's Python workers fork from a daemon that calls gc.freeze() after its imports, and
    # gc.get_objects() leaves frozen objects out: the swap must still find the functions
    # (it raised "no loaded function", the worker died, and the mutant counted as caught).
    import gc

    user = importlib.import_module("toymut.user")
    gc.freeze()
    try:
        applied = Applied(_one(toy, "Box.keep", "boolean", "return flag"))
        try:
            assert user.Box().keep(True) is True
        finally:
            applied.revert()
        assert user.Box().keep(True) is False
        applied = Applied(_one(toy, "double", "arithmetic", "x / 2"))  # behind lru_cache's wrapper
        try:
            assert user.double(4) == 2
        finally:
            applied.revert()
    finally:
        gc.unfreeze()


def test_a_mutant_drawn_before_its_file_changed_is_refused_not_misapplied(toy: Path) -> None:
    importlib.import_module("toymut.user")
    mutant = _one(toy, "above", "compare", ">=")
    path = toy / "toymut/calc.py"
    path.write_text(path.read_text().replace("LIMIT = 3\n", "LIMIT = 3\nOTHER = 1\n"))
    with pytest.raises(ValueError, match=r"toymut/calc.py changed since the mutants were drawn"):
        Applied(mutant)


def test_methods_statements_conditions_and_constants_mutate(toy: Path) -> None:
    user = importlib.import_module("toymut.user")
    cases = [
        (_one(toy, "Box.keep", "boolean", "return flag"), lambda: user.Box().keep(True), False),
        (_one(toy, "clamp", "statement", "pass"), lambda: user.clamp([-5, 9]), [3]),
        (_one(toy, "clamp", "condition", "if v < 0:"), lambda: user.clamp([-1, 1]), [0, 2]),
        (_one(toy, "clamp", "constant", "v + 2"), lambda: user.clamp([1]), [2]),
        (_one(toy, "clamp", "return", "return None"), lambda: user.clamp([1]), [2]),
    ]
    for mutant, call, original in cases:
        assert call() == original
        applied = Applied(mutant)
        try:
            assert call() != original, mutant.id
        finally:
            applied.revert()
        assert call() == original


def test_a_mutant_empties_functools_caches_on_apply_and_revert(toy: Path) -> None:
    user = importlib.import_module("toymut.user")
    assert user.double(4) == 8
    applied = Applied(_one(toy, "double", "arithmetic", "x / 2"))
    try:
        assert user.double(4) == 2
    finally:
        applied.revert()
    assert user.double(4) == 8


def test_a_worker_follows_the_control_file(
    toy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = importlib.import_module("toymut.user")
    control = tmp_path / "control.json"
    monkeypatch.setenv(mutation_worker.CONTROL_ENV, str(control))
    monkeypatch.setattr(
        mutation_worker, "_state", {"stamp": None, "mutant": None, "applied": None, "coverage": None}
    )
    mutant = _one(toy, "above", "compare", ">=")
    mutation_worker.write_control(control, mutant, None)
    mutation_worker.sync()
    assert user.above(2, 2) is True
    mutation_worker.write_control(control, None, None)
    mutation_worker.sync()
    assert user.above(2, 2) is False


def test_line_tracer_records_lines_per_check(toy: Path) -> None:
    user = importlib.import_module("toymut.user")
    calc = sys.modules["toymut.calc"]
    tracer = mutation_worker.LineTracer({calc.__file__: "toymut/calc.py"}, lambda: "check-a")
    tracer.start()
    try:
        user.clamp([1])
    finally:
        tracer.stop()
    lines = {line for _, line in tracer.hits["check-a"]}
    assert {14, 15, 17, 18} <= lines and 16 not in lines  # ``continue`` never ran


def test_checks_for_a_mutant_are_the_passing_checks_on_its_lines_fastest_first() -> None:
    baseline = Baseline(
        key="k", seconds=1.0,
        durations={"replay:slow": 9.0, "replay:fast": 1.0, "test:t": 0.1, "replay:broken": 0.5},
        failing=["replay:broken"],
        coverage={"engine/x.py": {10: ["replay:slow", "test:t"], 11: ["replay:fast", "replay:broken"]}},
    )
    mutant = Mutant(
        id="i", path="engine/x.py", line=10, end_line=11, qualname="f", operator="compare",
        node=0, variant=0, before="", after="",
    )
    assert baseline.checks_for(mutant) == ["test:t", "replay:fast", "replay:slow"]
    assert Baseline.from_json(baseline.to_json()).checks_for(mutant) == baseline.checks_for(mutant)


def test_traced_tests_are_chosen_by_what_they_import_wherever_they_live() -> None:
    selected = select_tests(REPO)
    assert "tests/engine/serde/test_schema_inference.py" in selected  # the mirror of a target
    assert "tests/engine/ksqldb_import/test_import_runs.py" in selected  # imports engine.plan.serde
    assert "tests/engine/functions/test_string.py" in selected  # the function library
    assert "tests/qtt_cases" in selected  # QTT cases run statements through the planner too
    assert "tests/engine/parser/test_parse_statements.py" not in selected
    assert not [t for t in selected if t.endswith("test_plans_mutation.py")]  # traces itself


def test_imported_modules_name_packages_and_their_imported_members(tmp_path: Path) -> None:
    source = tmp_path / "test_x.py"
    source.write_text("import a.b\nfrom c.d import e, f\nfrom . import g\n")
    assert imported_modules(source) == {"a.b", "c.d", "c.d.e", "c.d.f"}


def test_test_modules_with_a_test_needing_a_real_component_are_deselected() -> None:
    items = [
        SimpleNamespace(nodeid=f"tests/{module}.py::t{i}", fixturenames=names)
        for i, (module, names) in enumerate(
            [("a", ["spark"]), ("b", ["kafka_broker"]), ("b", ["spark"]), ("c", ["schema_registry"]), ("d", [])]
        )
    ]
    dropped: list[Any] = []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: dropped.extend(items)))
    kept = list(items)
    _PytestPlugin().pytest_collection_modifyitems(config, kept)
    assert kept == [items[0], items[4]] and dropped == [items[1], items[2], items[3]]


def test_score_leaves_equivalent_and_invalid_mutants_out() -> None:
    m = Mutant(id="i", path="p", line=1, end_line=1, qualname="f", operator="compare",
               node=0, variant=0, before="", after="")
    verdicts = [
        Verdict(m, "caught", caught_by="replay:a"), Verdict(m, "caught", caught_by="test:b"),
        Verdict(m, "caught", caught_by="test:b"), Verdict(m, "survived"),
        Verdict(m, "equivalent"), Verdict(m, "invalid"),
    ]
    totals = summarise(verdicts)
    assert totals["score"] == 0.75
    assert totals["caught_by"] == {"replay": 1, "unit test": 2, "timeout": 0}
    assert (totals["equivalent"], totals["invalid"], totals["mutants"]) == (1, 1, 6)


def test_sampling_is_reproducible_and_draws_from_every_target() -> None:
    first = sample(REPO, 120, seed=0)
    assert [m.id for m in first] == [m.id for m in sample(REPO, 120, seed=0)]
    assert [m.id for m in first] != [m.id for m in sample(REPO, 120, seed=1)]
    assert len(first) == 120
    assert {m.path.split("/")[1] for m in first} >= {"builders", "expressions", "serde"}


def test_every_reviewed_equivalent_names_a_current_mutant_with_a_reason() -> None:
    equivalents = load_equivalents(EQUIVALENTS)
    ids = {m.id for path in target_files(REPO, TARGETS) for m in find_mutants(REPO, path)}
    assert not sorted(set(equivalents) - ids), "stale ids in mutation_equivalents.json"


def test_bad_equivalents_and_options_are_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "eq.json"
    bad.write_text('{"some id": ""}')
    with pytest.raises(ValueError, match="non-empty reasons"):
        load_equivalents(bad)
    with pytest.raises(ValueError, match="Unknown option '--cont'"):
        parse_args(["--cont", "3"])
    with pytest.raises(ValueError, match="--count needs a number, not 'x'"):
        parse_args(["--count", "x"])
    options = parse_args(["--count", "5", "--tests", "tests/engine/plan", "--cases", "ddl"])
    assert (options.count, options.tests, options.cases) == (5, ["tests/engine/plan"], "ddl")


def test_replays_only_traces_and_runs_no_unit_test() -> None:
    # The planned cases alone (what qtt plans verify checks): no unit test is traced or run.
    options = parse_args(["--replays-only", "--count", "3"])
    assert options.replays_only and traced_test_paths(options, REPO) == []
    assert "tests/qtt_cases" in traced_test_paths(parse_args([]), REPO)
    assert traced_test_paths(parse_args(["--tests", "tests/engine/plan"]), REPO) == ["tests/engine/plan"]
    with pytest.raises(ValueError, match="--replays-only runs no unit test; drop --tests"):
        parse_args(["--replays-only", "--tests", "tests/engine/plan"])


def test_up_to_date_checks_plan_each_replayed_case_and_fail_on_a_changed_plan(tmp_path: Path) -> None:
    # The planned cases alone include verify's up-to-date check: a mutant that changes what a
    # statement plans (the typer, schema inference, a format check) fails it without a replay.
    slug = "ddl_drop_then_recreate"
    versions = {f"replay:{slug}/x": SimpleNamespace(slug=slug)}
    checks = _up_to_date_cases(REPO, versions)
    assert list(checks) == [f"{UP_TO_DATE}{slug}"]
    (label, case), = checks.items()
    replays = Replays(versions, 1, checks, REPO / "planned_cases")
    assert replays.labels == [*versions, label]
    assert _up_to_date_check(case, REPO / "planned_cases", label) == Outcome(False)
    latest = sorted((REPO / "planned_cases" / slug).iterdir())[-1]
    copy = tmp_path / slug / latest.name
    shutil.copytree(latest, copy)
    plan = json.loads((copy / "plan.json").read_text(encoding="utf-8"))
    plan["plans"] = plan["plans"][:-1]  # as if the last statement planned nothing now
    (copy / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    outcome = _up_to_date_check(case, tmp_path, label)
    assert outcome.failed and outcome.detail.startswith("[up to date] stale")
