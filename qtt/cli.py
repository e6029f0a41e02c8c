"""The ``qtt`` command: ``qtt run`` (strict, for the project's cases), ``qtt conformance``,
``qtt plans verify|regenerate`` and ``qtt schema generate|check``.

Exit codes: 0 success; 1 some case did not pass (``run`` only) or no case was found;
2 the runner itself could not work (bad arguments, missing path, report not writable).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress

from engine.errors import KsqlError
from qtt.conformance import print_summary, run_conformance, stratified_sample, write_report
from qtt.loader import QttFile, load_paths
from qtt.model import QttCase, QttFormatError
from qtt.plans.layout import DEFAULT_ROOT
from qtt.plans.schema import SCHEMA_FILE
from qtt.plans.verify import DEFAULT_CASES
from qtt.runner import (
    CaseResult,
    EngineFactory,
    Status,
    default_engine_factory,
    problem_result,
    run_case,
)

_LABELS = {
    Status.PASSED: "PASS",
    Status.FAILED: "FAIL",
    Status.ERROR: "ERROR",
    Status.UNSUPPORTED: "UNSUPPORTED",
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, one subcommand per job."""
    parser = argparse.ArgumentParser(
        prog="qtt", description="Run ksqlDB QTT (query translation test) cases against kspark."
    )
    # Later subcommands (`qtt plans ...`, `qtt schema ...`) are added to this set.
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="Run cases strictly; exit 0 only if all pass.",
        description=(
            "Run QTT cases in strict mode (a topic that receives records the case does not "
            "expect fails it). One line per case and a summary."
        ),
    )
    run.add_argument("paths", nargs="+", metavar="PATH", help="QTT files or folders.")
    run.add_argument("-k", "--filter", metavar="S", help="Only cases whose id contains S.")
    run.add_argument("--diff", action="store_true", help="Show the full diff of failing cases.")
    _add_runtime_options(run)
    run.set_defaults(handler=_cmd_run)

    conf = sub.add_parser(
        "conformance",
        help="Measure the pass rate over a corpus (never fails because cases fail).",
        description="Run QTT cases with ksqlDB's own (non-strict) semantics and report rates.",
    )
    conf.add_argument("paths", nargs="+", metavar="PATH", help="QTT files or folders.")
    conf.add_argument("-k", "--filter", metavar="S", help="Only cases whose id contains S.")
    conf.add_argument("--report", metavar="FILE", help="Write a JSON report to FILE.")
    conf.add_argument(
        "--sample",
        type=int,
        metavar="N",
        help="Run about N cases, drawn from every file in proportion (a stratified sample).",
    )
    _add_runtime_options(conf)
    conf.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help=(
            "Cases run at a time on the one SparkSession, bounded runtime only (default: "
            "$KSPARK_QTT_WORKERS or 3; always 1 on kafka)."
        ),
    )
    conf.add_argument("--no-progress", action="store_true", help="Do not show a progress bar.")
    conf.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="N",
        help="Show the N most frequent unsupported features and failure reasons (0: none).",
    )
    conf.set_defaults(handler=_cmd_conformance)
    native = sub.add_parser(
        "native-report",
        help="What of the cases' queries would still run in Python with the native step versions, and why.",
        description=(
            "Plan and build every case with kspark.native.steps=true (no Spark job runs) and count "
            "steps by type (native, partly native, Python), native expressions and columns, and "
            "the fallback reasons, most frequent first with an example."
        ),
    )
    native.add_argument("paths", nargs="+", metavar="PATH", help="QTT files or folders.")
    native.add_argument("-k", "--filter", metavar="S", help="Only cases whose id contains S.")
    native.add_argument("--report", metavar="FILE", help="Write the counts as JSON to FILE.")
    native.add_argument("--top", type=int, default=20, metavar="N", help="Show the N most frequent reasons.")
    native.add_argument("--no-progress", action="store_true", help="Do not show a progress bar.")
    native.set_defaults(handler=_cmd_native_report)
    compare = sub.add_parser(
        "compare",
        help="Two conformance reports side by side (e.g. bounded vs kafka runtime).",
        description=(
            "Pass rates per file of the cases both reports hold, then the cases the first "
            "passes and the second does not, grouped by the second's reason."
        ),
    )
    compare.add_argument("first", metavar="FIRST", help="A report of qtt conformance --report.")
    compare.add_argument("second", metavar="SECOND", help="Another report.")
    compare.add_argument(
        "--no-cases", action="store_true", help="Only count reasons; do not list the cases."
    )
    compare.set_defaults(handler=_cmd_compare)
    from qtt.rest.cli import add_rest_command

    add_rest_command(sub)
    _add_plan_commands(sub)
    return parser


def _add_runtime_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runtime",
        choices=("bounded", "kafka"),
        default="bounded",
        help=(
            "bounded: queries as Spark batch jobs over in-memory topics (default); kafka: "
            "Structured Streaming queries on a Kafka broker."
        ),
    )
    parser.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="The broker for --runtime kafka (default: start one in a temp dir for the run).",
    )
    parser.add_argument(
        "--schema-registry-url",
        metavar="URL",
        help=(
            "The schema registry (Confluent API) for --runtime kafka's AVRO and JSON_SR topics "
            "(default: start one in a temp dir for the run)."
        ),
    )
    parser.add_argument(
        "--property",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help=(
            "A property every case's engine gets, over the case's own (repeatable), e.g. "
            "kspark.native.steps=false to run with the Python step versions."
        ),
    )


def _properties(args: argparse.Namespace) -> dict[str, str] | None:
    """The --property pairs, or None (printing why) when one has no '='."""
    out: dict[str, str] = {}
    for pair in getattr(args, "property", []):
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            print(f"qtt: --property '{pair}' is not KEY=VALUE.", file=sys.stderr)
            return None
        out[key.strip()] = value.strip()
    return out


def _with_properties(
    factory_for: Callable[[QttCase], EngineFactory], extra: Mapping[str, str]
) -> Callable[[QttCase], EngineFactory]:
    def for_case(case: QttCase) -> EngineFactory:
        factory = factory_for(case)
        return lambda properties: factory({**properties, **extra})

    return for_case


@contextlib.contextmanager
def _engines(args: argparse.Namespace) -> Iterator[Callable[[QttCase], EngineFactory] | None]:
    """Per-case engine factories for the chosen runtime (None: the bounded engine as it is)."""
    extra = _properties(args) or {}
    if args.runtime != "kafka":
        yield _with_properties(lambda _case: default_engine_factory, extra) if extra else None
        return
    from qtt.kafka_runtime import KafkaHarness

    with KafkaHarness.open(args.bootstrap_servers, registry_url=args.schema_registry_url) as harness:
        yield _with_properties(harness.engine_factory, extra) if extra else harness.engine_factory


def _check_runtime(args: argparse.Namespace) -> bool:
    if _properties(args) is None:
        return False
    if args.bootstrap_servers and args.runtime != "kafka":
        print("qtt: --bootstrap-servers needs --runtime kafka.", file=sys.stderr)
        return False
    if args.schema_registry_url and args.runtime != "kafka":
        print("qtt: --schema-registry-url needs --runtime kafka.", file=sys.stderr)
        return False
    return True


def _add_plan_commands(sub: Any) -> None:
    """``qtt plans verify|regenerate`` and ``qtt schema generate|check``."""
    plans = sub.add_parser("plans", help="Planned cases: verify and regenerate.")
    plans_sub = plans.add_subparsers(dest="plans_command", required=True, metavar="ACTION")
    verify = plans_sub.add_parser(
        "verify",
        help="Replay, up-to-date, orphans, completeness and schema checks; non-zero on failure.",
    )
    _plan_paths(verify)
    verify.add_argument(
        "--allow-orphans", action="store_true", help="Report orphaned planned cases, do not fail."
    )
    verify.add_argument(
        "--schema", default=str(SCHEMA_FILE), metavar="FILE", help="Committed plan schema."
    )
    verify.add_argument(
        "--report", metavar="FILE", help="Also write the report (with coverage) as JSON to FILE."
    )
    verify.add_argument(
        "--replay-all",
        action="store_true",
        help="Also replay versions that a newer version of their case covers (same plan, "
        "nothing saved that the newer one does not save identically).",
    )
    verify.add_argument(
        "--shard",
        default="1/1",
        metavar="K/N",
        help="Do part K of N: the replays and up-to-date checks of about 1/N of the case "
        "folders (by saved versions); shard 1 also checks orphans, completeness and the "
        "schema. N processes with K = 1..N verify the tree together (default 1/1).",
    )
    verify.set_defaults(handler=_cmd_plans_verify)
    regen = plans_sub.add_parser(
        "regenerate",
        help="Write new planned cases for cases whose latest one is missing or stale.",
        description=(
            "Record a new planned-case version for every positive case whose latest saved "
            "plan differs from what the engine plans now. Never rewrites saved versions. With "
            "--release VERSION, then fold each case's unreleased versions into one VERSION_<time> "
            "folder and add VERSION to planned_cases/RELEASES."
        ),
    )
    _plan_paths(regen)
    regen.add_argument("--filter", metavar="S", help="Only cases whose id contains S.")
    regen.add_argument(
        "--release", metavar="VERSION", help="Fold unreleased versions into VERSION."
    )
    regen.add_argument("--no-progress", action="store_true", help="Do not show a progress bar.")
    regen.set_defaults(handler=_cmd_plans_regenerate)
    wheel = plans_sub.add_parser(
        "release-wheel",
        help="Build the wheel of a released engine from the commit RELEASES records for it.",
        description=(
            "Check out the commit planned_cases/RELEASES records for VERSION in a temporary "
            "git worktree and build its wheel into --out (the previous release, for upgrade "
            "tests). Needs the repository's history (not a shallow clone)."
        ),
    )
    wheel.add_argument("version", metavar="VERSION", help="A released engine version.")
    wheel.add_argument(
        "--root", default=str(DEFAULT_ROOT), metavar="DIR", help="The planned cases folder."
    )
    wheel.add_argument("--out", default="dist", metavar="DIR", help="Where to write the wheel.")
    wheel.set_defaults(handler=_cmd_plans_release_wheel)
    from qtt.plans.ksqldb_replay import add_command as add_replay_ksqldb

    add_replay_ksqldb(plans_sub)

    from qtt.parity import cli as parity_cli

    parity_cli.add_parser(sub)

    schema = sub.add_parser("schema", help="The plan JSON Schema guard.")
    schema_sub = schema.add_subparsers(dest="schema_command", required=True, metavar="ACTION")
    gen = schema_sub.add_parser(
        "generate", help="Write the generated plan schema unless a change is breaking."
    )
    gen.add_argument(
        "--schema", default=str(SCHEMA_FILE), metavar="FILE", help="Where to write it."
    )
    gen.set_defaults(handler=_cmd_schema_generate)
    check = schema_sub.add_parser(
        "check", help="Compare the generated schema with the committed one (compatibility rules)."
    )
    check.add_argument(
        "--schema", default=str(SCHEMA_FILE), metavar="FILE", help="Committed schema."
    )
    check.set_defaults(handler=_cmd_schema_check)


def _plan_paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root", default=str(DEFAULT_ROOT), metavar="DIR", help="Planned cases folder."
    )
    parser.add_argument(
        "--cases",
        nargs="+",
        default=[str(DEFAULT_CASES)],
        metavar="PATH",
        help="QTT case files or folders.",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``qtt`` command; returns the exit code.

    A malformed file the harness reads (a case, a planned case, a plan) ends in one line naming
    it and exit 2; a failure no check foresaw is a bug, reported as ``kspark`` reports one.
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130
    except (QttFormatError, KsqlError) as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last resort: never a traceback on the console
        from engine.cli import internal_error

        return internal_error(exc, program="qtt")


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "command", None) == "plans":
        # Planned cases also build every query for the Kafka runtime (streaming plans).
        from engine.runtime.session import load_kafka_connector_by_default

        load_kafka_connector_by_default()
    return int(args.handler(args))


def _load(args: argparse.Namespace) -> list[QttFile] | None:
    try:
        return load_paths(args.paths, filter=args.filter)
    except FileNotFoundError as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return None


def _cmd_run(args: argparse.Namespace) -> int:
    files = _load(args)
    if files is None or not _check_runtime(args):
        return 2
    start = time.perf_counter()
    results: list[CaseResult] = []
    not_applicable = sum(len(f.not_applicable) for f in files)
    disabled = sum(len(f.disabled) for f in files)
    try:
        with _engines(args) as factory_for:
            for f in files:
                for problem in f.problems:
                    results.append(_print(problem_result(problem, f.display_name), args.diff))
                for case in f.cases:
                    factory = factory_for(case) if factory_for is not None else None
                    result = run_case(case, strict=True, file=f.display_name, engine_factory=factory)
                    results.append(_print(result, args.diff))
    except KsqlError as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return 2
    counts = {s: sum(r.status is s for r in results) for s in Status}
    elapsed = time.perf_counter() - start
    print(
        f"{len(results)} cases: {counts[Status.PASSED]} passed, {counts[Status.FAILED]} failed, "
        f"{counts[Status.ERROR]} errors, {counts[Status.UNSUPPORTED]} unsupported "
        f"({not_applicable} not applicable, {disabled} disabled) in {elapsed:.1f}s"
        + (" on Kafka" if args.runtime == "kafka" else "")
    )
    if not results:
        print("qtt: no QTT cases found.", file=sys.stderr)
        return 1
    return 0 if counts[Status.PASSED] == len(results) else 1


def _print(result: CaseResult, diff: bool) -> CaseResult:
    line = f"{_LABELS[result.status]} {result.case_id}"
    if result.reason:
        line += f" - {result.reason}"
    print(line, flush=True)
    if diff and not result.passed:
        print(result.render())
    return result


def _cmd_conformance(args: argparse.Namespace) -> int:
    files = _load(args)
    if files is None or not _check_runtime(args):
        return 2
    sample = None
    if args.sample is not None:
        total = sum(len(f.cases) for f in files)
        files = stratified_sample(files, args.sample)
        sample = {"size": sum(len(f.cases) for f in files), "of": total}
    try:
        with _engines(args) as factory_for:
            run = run_conformance(
                files,
                strict=False,
                progress=not args.no_progress and sys.stderr.isatty(),
                runtime=args.runtime,
                engine_factory_for=factory_for,
                workers=args.workers,
            )
    except KsqlError as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return 2
    run.sample = sample
    status = 0
    if args.report:
        try:
            write_report(run, args.report)
        except OSError as exc:
            print(f"qtt: cannot write the report '{args.report}': {exc}", file=sys.stderr)
            status = 2
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 120)
    print_summary(run, console, top=args.top)
    return status


def _cmd_native_report(args: argparse.Namespace) -> int:
    from qtt.native_report import build_report, format_report, write_report

    files = _load(args)
    if files is None:
        return 2
    report = build_report(files, progress=not args.no_progress and sys.stderr.isatty())
    if not report.cases:
        print("qtt: no QTT cases found.", file=sys.stderr)
        return 1
    print(format_report(report, top=args.top), end="")
    if args.report:
        try:
            write_report(report, args.report)
        except OSError as exc:
            print(f"qtt: cannot write the report '{args.report}': {exc}", file=sys.stderr)
            return 2
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from qtt.compare import compare_reports, load_report, print_comparison

    try:
        first, second = load_report(args.first), load_report(args.second)
    except (OSError, ValueError) as exc:
        print(f"qtt: cannot read a report: {exc}", file=sys.stderr)
        return 2
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 160)
    print_comparison(compare_reports(first, second), console, cases=not args.no_cases)
    return 0


def _cmd_plans_verify(args: argparse.Namespace) -> int:
    from qtt.plans.verify import parse_shard, verify

    try:
        shard = parse_shard(args.shard)
    except ValueError as exc:
        print(f"qtt: --shard: {exc}", file=sys.stderr)
        return 2

    def show(result: Any) -> None:
        print(
            f"{'PASS' if result.ok else 'FAIL'} replay {result.label} ({result.seconds:.2f}s)",
            flush=True,
        )

    try:
        report = verify(
            Path(args.root),
            [Path(p) for p in args.cases],
            allow_orphans=args.allow_orphans,
            schema_path=Path(args.schema),
            on_replay=show,
            replay_all_versions=args.replay_all,
            shard=shard,
        )
    except FileNotFoundError as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return 2
    print(report.render())
    if args.report:
        try:
            Path(args.report).parent.mkdir(parents=True, exist_ok=True)
            Path(args.report).write_text(
                json.dumps(report.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8"
            )
        except OSError as exc:
            print(f"qtt: cannot write the report {args.report}: {exc}", file=sys.stderr)
            return 2
    return 0 if report.ok else 1


def _cmd_plans_regenerate(args: argparse.Namespace) -> int:
    from qtt.plans.regenerate import fold_release, regenerate
    from qtt.plans.verify import current_cases

    try:
        cases, problems = current_cases([Path(p) for p in args.cases])
    except FileNotFoundError as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return 2
    if args.filter:
        cases = [c for c in cases if args.filter in c.id]
    root = Path(args.root)
    with Progress(disable=args.no_progress, transient=True) as progress:
        task = progress.add_task("recording planned cases", total=len(cases))
        report = regenerate(root, cases, advance=lambda _case: progress.advance(task))
    for path in report.written:
        print(f"WROTE {path}")
    for line in report.failed + problems:
        print(f"FAIL {line}")
    print(
        f"{len(report.written)} written, {len(report.current)} up to date, {len(report.failed)} failed"
    )
    if args.release:
        if report.failed:
            print("qtt: not releasing while some cases cannot be recorded.", file=sys.stderr)
            return 1
        try:
            for line in fold_release(root, args.release):
                print(f"RELEASED {line}")
        except ValueError as exc:
            print(f"qtt: {exc}", file=sys.stderr)
            return 1
    return 1 if report.failed or problems else 0


def _cmd_plans_release_wheel(args: argparse.Namespace) -> int:
    from qtt.plans.release_wheel import ReleaseError, build_release_wheel, release_commit

    root = Path(args.root)
    try:
        commit = release_commit(root, args.version)
        wheel = build_release_wheel(root, commit, Path(args.out))
    except (ReleaseError, ValueError) as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return 1
    print(wheel)
    return 0


def _cmd_schema_generate(args: argparse.Namespace) -> int:
    from qtt.plans.schema import update_schema

    path = Path(args.schema)
    try:
        update = update_schema(path)
    except (OSError, ValueError) as exc:
        print(f"qtt: cannot read the committed schema {path}: {exc}", file=sys.stderr)
        return 2
    if update.breaking:
        for change in update.breaking:
            print(change.render(), file=sys.stderr)
        print(
            f"qtt: not writing {path}: {len(update.breaking)} breaking change(s) above; plans "
            "written before would no longer load. Add a new step version instead of changing "
            "a published one.",
            file=sys.stderr,
        )
        return 1
    for change in update.changes:
        print(change.render())
    print(f"wrote {path}" if update.written else f"{path} is up to date")
    return 0


def _cmd_schema_check(args: argparse.Namespace) -> int:
    from qtt.plans.schema import BREAKING, compare_schemas, generate_schema, read_schema

    try:
        committed = read_schema(Path(args.schema))
    except (OSError, ValueError) as exc:
        print(f"qtt: cannot read the committed schema {args.schema}: {exc}", file=sys.stderr)
        return 2
    changes = compare_schemas(committed, generate_schema())
    for change in changes:
        print(change.render())
    breaking = [c for c in changes if c.verdict == BREAKING]
    if breaking:
        print(
            f"{len(breaking)} breaking change(s) of {len(changes)}: plans written before would "
            "no longer load. Add a new step version instead of changing a published one."
        )
        return 1
    if changes:
        print(
            f"{len(changes)} compatible change(s): run `qtt schema generate` and commit the schema."
        )
        return 0
    print("The plan schema matches the committed one.")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
