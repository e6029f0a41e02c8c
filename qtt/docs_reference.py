"""The docs site's reference pages, generated from the code so they cannot drift.

    python -m qtt.docs_reference            # rewrite every page under docs/
    python -m qtt.docs_reference --check    # exit 1 with a diff when a committed page is stale

Each page is rendered from what the code holds: the ``kspark`` and ``qtt`` argparse parsers
(``cli.md``), the Starlette routes of ``engine.server.app.create_app`` and the internal route
of ``engine.server.tables_service`` (``rest.md``), the configuration properties the engine
reads and the WITH-clause properties it accepts (``properties.md``), the step registry with
each version's status from the planned cases (``steps.md``), the function registry
(``functions.md``), the error classes and the messages raised with a literal text
(``errors.md``), and the committed benchmark history (``../benchmarks.md``). What the code
cannot say (an endpoint's one-line description, a property's meaning, what an error class
means to a user) lives in ``qtt/docs_reference_data/*.toml``; the generator fails when such a
file names something the code does not have, or misses something it has.

Output is deterministic: sorted, Markdown tables, one trailing newline. This is a developer
tool (``tests/qtt/test_docs_reference.py`` checks the committed pages); nothing at run time
imports it.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import inspect
import re
import sys
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parent.parent
DOCS = REPOSITORY / "docs"
DATA = Path(__file__).resolve().parent / "docs_reference_data"
ENGINE = REPOSITORY / "engine"
PLANNED_CASES = REPOSITORY / "planned_cases"
COMMAND = "python -m qtt.docs_reference"


class ReferenceDataError(Exception):
    """A data file of the reference disagrees with the code (names what the code lacks, or
    lacks what the code has)."""


def _header(source: str) -> str:
    return (
        f"<!-- Generated from {source} by `{COMMAND}`; do not edit by hand.\n"
        f"     Regenerate every reference page with `{COMMAND}` (check with `--check`). -->\n"
    )


def _cell(value: Any) -> str:
    """Text fit for one Markdown table cell: one line, pipes escaped."""
    text = " ".join(str(value).split())
    return text.replace("|", "\\|")


def _code(value: Any) -> str:
    text = _cell(value)
    if not text:
        return ""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _table(headers: Iterable[str], rows: Iterable[Iterable[Any]]) -> list[str]:
    heads = list(headers)
    lines = ["| " + " | ".join(heads) + " |", "| " + " | ".join("---" for _ in heads) + " |"]
    lines += ["| " + " | ".join(_cell(c) if not str(c).startswith("`") else str(c) for c in row) + " |"
              for row in rows]
    return lines


def _first_line(doc: str | None) -> str:
    """The first sentence-paragraph of a docstring, on one line."""
    if not doc:
        return ""
    return " ".join(inspect.cleandoc(doc).split("\n\n")[0].split())


def _data(name: str) -> dict[str, Any]:
    return tomllib.loads((DATA / f"{name}.toml").read_text(encoding="utf-8"))


def _agree(what: str, data_file: str, code: set[str], data: set[str]) -> None:
    """Raise unless the data file names exactly what the code has."""
    missing, unknown = sorted(code - data), sorted(data - code)
    problems = []
    if missing:
        problems.append(f"{what} without an entry in {data_file}: {', '.join(missing)}")
    if unknown:
        problems.append(f"{data_file} names {what} the code does not have: {', '.join(unknown)}")
    if problems:
        raise ReferenceDataError("; ".join(problems) + ".")


# ----------------------------------------------------------------------------- cli.md


def _option_names(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs == 0:
            return names
        metavar = action.metavar or (
            "{" + ",".join(map(str, action.choices)) + "}" if action.choices else action.dest.upper()
        )
        return f"{names} {metavar if isinstance(metavar, str) else ' '.join(metavar)}"
    metavar = action.metavar or action.dest
    return str(metavar) + ("..." if action.nargs in ("+", "*") else "")


def _portable(text: str) -> str:
    """``text`` with this checkout's absolute path written relative to the repository, so the
    page is the same in every clone (a default such as ``REPOSITORY / "parity"``)."""
    root = str(REPOSITORY)
    return text.replace(root + "/", "").replace(root, ".")


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ()):
        return ""
    return _portable(str(action.default))


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    text = action.help
    if "%(" in text:
        params = {**vars(action), "prog": parser.prog}
        params = {k: getattr(v, "__name__", v) for k, v in params.items()}
        text = text % params
    text = _portable(text)
    choices = ""
    if action.choices and not isinstance(action, argparse._SubParsersAction) and action.option_strings:
        choices = " (one of: " + ", ".join(map(str, action.choices)) + ")"
    return text + choices


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _command_section(parser: argparse.ArgumentParser, summary: str, depth: int) -> list[str]:
    lines = ["", "#" * min(depth, 6) + f" `{parser.prog}`", ""]
    description = " ".join((parser.description or "").split())
    if summary:
        lines.append(_cell(summary) + ("" if summary.rstrip().endswith(".") else "."))
    if description and description != summary:
        lines += (["", description] if summary else [description])
    rows = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        rows.append((_code(_option_names(action)), _code(_default(action)) if _default(action) else "",
                     "yes" if action.required else "", _help(parser, action)))
    subs = list(_subcommands(parser))
    if rows:
        lines += ["", *_table(("argument", "default", "required", "what it does"), rows)]
    if subs:
        lines += ["", *_table(("subcommand", "what it does"), ((f"`{parser.prog} {n}`", h) for n, h, _ in subs))]
        for _, help_text, sub in subs:
            lines += _command_section(sub, help_text, depth + 1)
    return lines


def cli_page() -> str:
    """``docs/reference/cli.md``: every kspark and qtt command, subcommand and option."""
    from engine.cli import build_parser as kspark_parser
    from qtt.cli import build_parser as qtt_parser

    lines = [
        _header("the argparse parsers of engine/cli.py and qtt/cli.py").rstrip("\n"),
        "",
        "# Command line",
        "",
        "Two commands: `kspark` runs the engine (statements, servers, the broker and registry it "
        "can start) and `qtt` runs ksqlDB's QTT cases and the planned-case tools against it. "
        "`COMMAND --help` prints the same options.",
    ]
    for parser in (kspark_parser(), qtt_parser()):
        lines += _command_section(parser, "", 2)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- rest.md


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One REST endpoint: method, path, where it is routed, its handler's docstring."""

    method: str
    path: str
    source: str
    docstring: str = ""

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


def endpoints() -> list[Endpoint]:
    """Every route of the server: ``create_app``'s Starlette routes and the tables service's
    internal route, sorted by path then method."""
    from starlette.routing import Route, WebSocketRoute

    from engine.server import tables_service
    from engine.server.app import create_app

    app = create_app(None)  # type: ignore[arg-type]  # routes only: no request is served
    found = []
    for route in app.routes:
        if isinstance(route, Route):
            for method in sorted((route.methods or set()) - {"HEAD"}):
                found.append(Endpoint(method, route.path, "engine/server/app.py",
                                      _first_line(route.endpoint.__doc__)))
        elif isinstance(route, WebSocketRoute):  # a WebSocket opens with a GET
            found.append(Endpoint("GET", route.path, "engine/server/app.py", _first_line(route.endpoint.__doc__)))
    found.append(Endpoint("POST", tables_service.INTERNAL_PATH, "engine/server/tables_service.py",
                          _first_line(tables_service.TablesService.handle_internal.__doc__)))
    return sorted(found, key=lambda e: (e.path, e.method))


def rest_page() -> str:
    """``docs/reference/rest.md``: every endpoint, method and path, with one line on each."""
    data = _data("rest")
    found = endpoints()
    _agree("endpoints", "qtt/docs_reference_data/rest.toml", {e.key for e in found}, set(data["endpoints"]))
    lines = [
        _header("the Starlette routes of engine/server/app.py create_app and "
                "engine/server/tables_service.py").rstrip("\n"),
        "",
        "# REST API",
        "",
        _cell(data["intro"]),
        "",
        *_table(("method", "path", "what it does", "routed in"),
                ((e.method, f"`{e.path}`", data["endpoints"][e.key], f"`{e.source}`") for e in found)),
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- properties.md

PROPERTY_NAME = re.compile(r"^(?:ksql|kspark)\.[a-z0-9_]+(?:\.[a-z0-9_-]+)+$|^auto\.offset\.reset$")


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _engine_files() -> list[Path]:
    return sorted(p for p in ENGINE.rglob("*.py") if "__pycache__" not in p.parts)


def property_names_in_code() -> dict[str, list[str]]:
    """Every string constant in the engine's code (docstrings left out) that names a
    configuration property, with the modules it appears in."""
    found: dict[str, set[str]] = {}
    for path in _engine_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstring_nodes(tree)
        module = path.relative_to(REPOSITORY).as_posix()
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and PROPERTY_NAME.match(node.value)):
                found.setdefault(node.value, set()).add(module)
    return {name: sorted(modules) for name, modules in sorted(found.items())}


def properties_page() -> str:
    """``docs/reference/properties.md``: the configuration properties kspark reads (with their
    defaults), the WITH-clause properties it accepts, and the ksqlDB configs an imported plan
    is checked against."""
    from engine.analysis.properties import SOURCE_PROPERTIES
    from engine.ksqldb_import.command_topic import CACHE_CONFIGS
    from engine.ksqldb_import.plan import SEMANTIC_CONFIGS

    data = _data("properties")
    in_code = property_names_in_code()
    not_properties = set(data.get("not_properties", {}))
    imported = set(SEMANTIC_CONFIGS) | {c for c in CACHE_CONFIGS if PROPERTY_NAME.match(c)}
    read = {n for n in in_code if n not in not_properties and n not in imported}
    _agree("configuration properties", "qtt/docs_reference_data/properties.toml [properties]",
           read, set(data["properties"]))
    _agree("names", "qtt/docs_reference_data/properties.toml [not_properties]",
           not_properties & set(in_code), not_properties)
    _agree("WITH-clause properties", "qtt/docs_reference_data/properties.toml [with]",
           set(SOURCE_PROPERTIES), set(data["with"]))
    lines = [
        _header("the engine's code (every property name it holds), engine/analysis/properties.py, "
                "engine/ksqldb_import and qtt/docs_reference_data/properties.toml").rstrip("\n"),
        "",
        "# Properties",
        "",
        "## Configuration properties",
        "",
        _cell(data["intro"]),
        "",
        *_table(
            ("property", "default", "what it does", "read in"),
            ((f"`{name}`", _code(entry["default"]) if entry["default"] != "" else "(none)",
              entry["description"], ", ".join(f"`{m}`" for m in in_code[name]))
             for name, entry in sorted(data["properties"].items())),
        ),
        "",
        "## WITH-clause properties",
        "",
        _cell(data["with_intro"]),
        "",
        *_table(("property", "what it sets"), ((f"`{name}`", data["with"][name]) for name in sorted(SOURCE_PROPERTIES))),
        "",
        "## ksqlDB configs of imported plans",
        "",
        "A saved ksqlDB plan (`qtt plans replay-ksqldb`, `kspark import-command-topic`) records the "
        "configs its query ran with. Those that change what a query computes must hold a value "
        "kspark implements, or the import refuses the plan:",
        "",
        *_table(("config", "values kspark implements", "meaning"),
                ((f"`{name}`", ", ".join(f"`{v}`" for v in sorted(values)), meaning)
                 for name, (values, meaning) in sorted(SEMANTIC_CONFIGS.items()))),
        "",
        "Configs that only change how many intermediate updates ksqlDB emitted are noted, not "
        "refused: " + ", ".join(f"`{c}`" for c in sorted(CACHE_CONFIGS)) + ".",
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- steps.md

CURRENT = "current"
NATIVE_OFF = "current with kspark.native.steps=false"
SAVED_PLANS = "kept for saved plans"
IMPORT_ONLY = "import only"
UNUSED = "registered, in no planned case"


def step_statuses(root: Path = PLANNED_CASES) -> dict[str, str]:
    """Each registered step version's status: ``current`` (in the latest saved version of a
    planned case: what the planner plans today), ``kept for saved plans`` (only in older saved
    versions), ``import only`` (built for imported ksqlDB plans; the planner never plans it).

    A version not current by that measure that the planner plans for the latest saved
    versions' statements with ``kspark.native.steps=false`` is ``current with
    kspark.native.steps=false``."""
    import json

    from engine.plan.steps import STEP_TYPES
    from qtt.plans.completeness import step_types_in
    from qtt.plans.layout import PLAN_FILE, case_dirs, latest_version, saved_versions

    latest: set[str] = set()
    older: set[str] = set()
    for case in case_dirs(root):
        newest = latest_version(case)
        for version in saved_versions(case):
            plans = json.loads((version.path / PLAN_FILE).read_text(encoding="utf-8"))["plans"]
            (latest if version == newest else older).update(step_types_in(plans))
    native_off = _planned_with_native_steps_off(root)
    statuses = {}
    for wire, cls in STEP_TYPES.items():
        if cls.__module__ == "engine.plan.steps_ksqldb":
            statuses[wire] = IMPORT_ONLY
        elif wire in latest:
            statuses[wire] = CURRENT
        elif wire in native_off:
            statuses[wire] = NATIVE_OFF
        elif wire in older:
            statuses[wire] = SAVED_PLANS
        else:
            statuses[wire] = UNUSED
    return statuses


def _planned_with_native_steps_off(root: Path) -> set[str]:
    """The step versions the planner plans, with ``kspark.native.steps=false``, for the
    statements of every planned case's latest saved version (planning only: no Spark)."""
    import dataclasses

    from engine.errors import KsqlError
    from engine.planner.physical import NATIVE_STEPS
    from qtt.plans import codec
    from qtt.plans.completeness import step_types_in
    from qtt.plans.layout import SPEC_FILE, case_dirs, latest_version
    from qtt.plans.record import plan_case

    found: set[str] = set()
    for case_dir in case_dirs(root):
        newest = latest_version(case_dir)
        if newest is None:
            continue
        spec = codec.read_json(newest.path / SPEC_FILE)
        case = codec.case_from_json(spec["testCase"], case_id=spec["caseId"], file=newest.path / SPEC_FILE)
        case = dataclasses.replace(case, properties={**dict(case.properties), NATIVE_STEPS: "false"})
        try:
            _, plans, _ = plan_case(case)
        except KsqlError:
            continue  # a case whose statements are refused plans nothing either way
        found |= step_types_in(plans)
    return found


def _version_key(wire: str) -> tuple[str, int]:
    found = re.match(r"^(.*?)V(\d+)$", wire)
    return (found.group(1), int(found.group(2))) if found else (wire, 0)


def steps_page() -> str:
    """``docs/reference/steps.md``: every registered step version with its status."""
    from engine.plan.steps import STEP_TYPES

    statuses = step_statuses()
    counts = {s: sum(1 for v in statuses.values() if v == s)
              for s in (CURRENT, NATIVE_OFF, SAVED_PLANS, IMPORT_ONLY, UNUSED)}
    lines = [
        _header("the step registry of engine/plan (STEP_TYPES) and the saved plans under planned_cases/").rstrip("\n"),
        "",
        "# Step versions",
        "",
        "A plan is a DAG of versioned steps; a published step version always builds the same "
        "behaviour, so new behaviour is a new version and the old one stays for the plans that "
        "name it. Status:",
        "",
        f"- **{CURRENT}**: in the latest saved version of a planned case, i.e. what the planner "
        "plans today (the planned cases are kept up to date with the planner);",
        f"- **{NATIVE_OFF}**: what the planner plans for the same cases' statements when "
        "`kspark.native.steps` is `false` (the Python versions of the native steps);",
        f"- **{SAVED_PLANS}**: only in older saved versions of planned cases: no new plan names "
        "it, saved plans still build with it;",
        f"- **{IMPORT_ONLY}**: built for imported ksqlDB plans only (`engine/plan/steps_ksqldb.py`); "
        "the planner never plans it.",
        "",
        f"{len(statuses)} step versions: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + ".",
        "",
        *_table(
            ("step version", "status", "class", "what it does"),
            ((f"`{wire}`", statuses[wire], f"`{STEP_TYPES[wire].__module__}.{STEP_TYPES[wire].__name__}`",
              _first_line(STEP_TYPES[wire].__doc__))
             for wire in sorted(STEP_TYPES, key=_version_key)),
        ),
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- functions.md


DEPENDS = "depends on the arguments"


def _returns(signature: Any) -> str:
    returns = signature.returns
    if callable(returns) and not hasattr(returns, "base"):
        return DEPENDS
    return str(returns)


def _returns_cell(signature: Any) -> str:
    returns = _returns(signature)
    return returns if returns == DEPENDS else _code(returns)


def _versions(signature: Any, current: int) -> str:
    if signature.since == 1 and signature.until is None:
        return "all" if current == 1 else f"1-{current}"
    until = signature.until if signature.until is not None else current
    return str(signature.since) if signature.since == until else f"{signature.since}-{until}"


def functions_page() -> str:
    """``docs/reference/functions.md``: every function of the registry, kind, overloads, versions."""
    from engine.functions import REGISTRY

    public = REGISTRY.names()
    everything = sorted(REGISTRY._by_name)  # the internal ones too, listed apart
    internal = [n for n in everything if n not in set(public)]

    def rows(names: Iterable[str]) -> Iterator[tuple[str, ...]]:
        for name in names:
            current = REGISTRY.current_semantics(name)
            kind = REGISTRY.kind_of(name)
            signatures = sorted(REGISTRY._by_name[name], key=lambda s: (s.since, s.describe(), _returns(s)))
            for sig in signatures:
                described = sig.describe().replace(sig.name, REGISTRY.declared_name(name), 1)
                yield (f"`{REGISTRY.declared_name(name)}`", kind.value.lower() if kind else "",
                       _code(described), _returns_cell(sig), _versions(sig, current), sig.description)

    kinds: dict[str, int] = {}
    for name in public:
        kind = REGISTRY.kind_of(name)
        key = kind.value.lower() if kind else "?"
        kinds[key] = kinds.get(key, 0) + 1
    lines = [
        _header("the function registry of engine/functions (REGISTRY)").rstrip("\n"),
        "",
        "# Functions",
        "",
        f"{len(public)} functions ksqlDB users see (`SHOW FUNCTIONS`): "
        + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ". One row per overload. "
        "A function's behaviour is versioned: a plan records the version each call was planned "
        "with, and a fix that changes results adds overloads from the next version on, so saved "
        "plans keep their results. *versions* is the range of versions an overload serves "
        "(*all*: the function has one version).",
        "",
        *_table(("function", "kind", "signature", "returns", "versions", "description"), rows(public)),
    ]
    if internal:
        lines += [
            "",
            "## Internal functions",
            "",
            "kspark's own, for plans it imports from ksqlDB; not listed by `SHOW FUNCTIONS`.",
            "",
            *_table(("function", "kind", "signature", "returns", "versions", "description"), rows(internal)),
        ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- errors.md


@dataclass(frozen=True, slots=True)
class ErrorClass:
    """An exception class defined in the engine: name, module, base name, docstring."""

    name: str
    module: str
    base: str
    doc: str


@dataclass(frozen=True, slots=True)
class Message:
    """A message raised with a literal text: error class, text (placeholders as ``{expr}``),
    error code where given, and the module."""

    error: str
    text: str
    code: str
    module: str


def _base_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def error_classes() -> list[ErrorClass]:
    """Every exception class of the engine's code: subclasses of ``KsqlError`` and the
    engine's other ``*Error`` / ``*Failure`` classes, read from the source (nothing imported)."""
    candidates: list[ErrorClass] = []
    for path in _engine_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = path.relative_to(REPOSITORY).with_suffix("").as_posix().replace("/", ".")
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.bases and not node.name.startswith("_"):
                candidates.append(ErrorClass(node.name, module, _base_name(node.bases[0]),
                                             _first_line(ast.get_docstring(node))))
    known = {"Exception", "RuntimeError", "ValueError"}
    chosen: dict[str, ErrorClass] = {}
    changed = True
    while changed:
        changed = False
        for c in candidates:
            if c.name in chosen:
                continue
            if c.base in chosen or (c.base in known and re.search(r"(Error|Failure)$", c.name)):
                chosen[c.name] = c
                changed = True
    return sorted(chosen.values(), key=lambda c: c.name)


def _render_text(node: ast.expr) -> str | None:
    """The message template of a literal (f-)string argument, or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue):
                parts.append("{" + ast.unparse(value.value) + "}")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _render_text(node.left), _render_text(node.right)
        return None if left is None or right is None else left + right
    return None


def error_messages(classes: Iterable[ErrorClass]) -> list[Message]:
    """Every ``raise SomeError("...")`` of the engine whose message is a literal text."""
    names = {c.name for c in classes}
    found = set()
    for path in _engine_files():
        module = path.relative_to(REPOSITORY).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)):
                continue
            error = _base_name(node.exc.func)
            if error not in names or not node.exc.args:
                continue
            text = _render_text(node.exc.args[0])
            if text is None or not text.strip():
                continue
            code = next((ast.unparse(k.value) for k in node.exc.keywords if k.arg == "code"), "")
            found.add(Message(error, " ".join(text.split()), code, module))
    return sorted(found, key=lambda m: (m.error, m.text, m.module))


def _tree_lines(classes: list[ErrorClass], explanations: Mapping[str, str]) -> list[str]:
    children: dict[str, list[ErrorClass]] = {}
    for c in classes:
        children.setdefault(c.base, []).append(c)
    names = {c.name for c in classes}
    lines: list[str] = []

    def visit(c: ErrorClass, depth: int) -> None:
        meaning = explanations.get(c.name, "")
        text = f"{'    ' * depth}- `{c.name}` (`{c.module}`): {c.doc}"
        lines.append(text + (f" {meaning}" if meaning else ""))
        for child in sorted(children.get(c.name, []), key=lambda x: x.name):
            visit(child, depth + 1)

    for root in sorted((c for c in classes if c.base not in names), key=lambda x: (x.name != "KsqlError", x.name)):
        visit(root, 0)
    return lines


def errors_page() -> str:
    """``docs/reference/errors.md``: the error class tree, what each means, and the messages."""
    data = _data("errors")
    classes = error_classes()
    _agree("error classes", "qtt/docs_reference_data/errors.toml [classes]",
           {c.name for c in classes}, set(data["classes"]))
    messages = error_messages(classes)
    lines = [
        _header("the exception classes and raise statements of engine/ and "
                "qtt/docs_reference_data/errors.toml").rstrip("\n"),
        "",
        "# Errors",
        "",
        _cell(data["intro"]),
        "",
        "## Error classes",
        "",
        *_tree_lines(classes, data["classes"]),
        "",
        "## Messages",
        "",
        f"{len(messages)} messages the engine raises with a literal text, by class. `{{...}}` "
        "stands for a value filled in when the error is raised (the expression that gives it). "
        "Messages built elsewhere (by a helper function, or passed on from Spark or Kafka) are "
        "not listed. *code* is the ksqlDB error code a REST answer carries, where the raise "
        "gives one.",
    ]
    by_class: dict[str, list[Message]] = {}
    for m in messages:
        by_class.setdefault(m.error, []).append(m)
    for name in sorted(by_class):
        rows = by_class[name]
        with_code = any(m.code for m in rows)
        lines += ["", f"### `{name}`", ""]
        if with_code:
            lines += _table(("message", "code", "raised in"),
                            ((_code(m.text), _code(m.code), f"`{m.module}`") for m in rows))
        else:
            lines += _table(("message", "raised in"), ((_code(m.text), f"`{m.module}`") for m in rows))
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- all pages


def benchmarks_page() -> str:
    """``docs/benchmarks.md``, from the committed history ``benchmarks/reports/``."""
    from benchmarks.page import render

    return render()


PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/rest.md": rest_page,
    "reference/properties.md": properties_page,
    "reference/steps.md": steps_page,
    "reference/functions.md": functions_page,
    "reference/errors.md": errors_page,
    "benchmarks.md": benchmarks_page,
}


def stale_pages(docs: Path = DOCS) -> dict[str, str]:
    """Page path -> a unified diff from the committed page to the generated one, for every
    page that is missing or out of date."""
    stale = {}
    for relative, render in PAGES.items():
        path = docs / relative
        want = render()
        have = path.read_text(encoding="utf-8") if path.exists() else ""
        if have != want:
            diff = difflib.unified_diff(have.splitlines(keepends=True), want.splitlines(keepends=True),
                                        f"docs/{relative} (committed)", f"docs/{relative} (generated)")
            stale[relative] = "".join(diff)
    return stale


def write_pages(docs: Path = DOCS) -> list[str]:
    """Write every page; the ones whose text changed."""
    changed = []
    for relative, render in PAGES.items():
        path = docs / relative
        text = render()
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            changed.append(relative)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=COMMAND, description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a page is out of date")
    parser.add_argument("--docs", default=str(DOCS), metavar="DIR", help="the docs folder (default: the repository's)")
    args = parser.parse_args(argv)
    try:
        if args.check:
            stale = stale_pages(Path(args.docs))
            for diff in stale.values():
                sys.stdout.write(diff)
            if stale:
                print(f"{len(stale)} page(s) out of date: {', '.join(sorted(stale))}; run `{COMMAND}`.",
                      file=sys.stderr)
                return 1
            print(f"{len(PAGES)} pages up to date.")
            return 0
        changed = write_pages(Path(args.docs))
    except ReferenceDataError as exc:
        print(f"docs_reference: {exc}", file=sys.stderr)
        return 2
    print(f"{len(changed)} of {len(PAGES)} pages rewritten" + (f": {', '.join(changed)}" if changed else "."))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
