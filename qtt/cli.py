"""The ``qtt`` command: ``qtt run`` (strict, for the project's cases) and ``qtt conformance``.

Exit codes: 0 success; 1 some case did not pass (``run`` only) or no case was found;
2 the runner itself could not work (bad arguments, missing path, report not writable).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from rich.console import Console

from qtt.conformance import print_summary, run_conformance, write_report
from qtt.loader import QttFile, load_paths
from qtt.runner import CaseResult, Status, problem_result, run_case

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
    run.add_argument("--filter", metavar="S", help="Only cases whose id contains S.")
    run.add_argument("--diff", action="store_true", help="Show the full diff of failing cases.")
    run.set_defaults(handler=_cmd_run)

    conf = sub.add_parser(
        "conformance",
        help="Measure the pass rate over a corpus (never fails because cases fail).",
        description="Run QTT cases with ksqlDB's own (non-strict) semantics and report rates.",
    )
    conf.add_argument("paths", nargs="+", metavar="PATH", help="QTT files or folders.")
    conf.add_argument("--filter", metavar="S", help="Only cases whose id contains S.")
    conf.add_argument("--report", metavar="FILE", help="Write a JSON report to FILE.")
    conf.add_argument("--no-progress", action="store_true", help="Do not show a progress bar.")
    conf.add_argument(
        "--top",
        type=int,
        default=10,
        metavar="N",
        help="Show the N most frequent unsupported features and failure reasons (0: none).",
    )
    conf.set_defaults(handler=_cmd_conformance)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``qtt`` command; returns the exit code."""
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


def _load(args: argparse.Namespace) -> list[QttFile] | None:
    try:
        return load_paths(args.paths, filter=args.filter)
    except FileNotFoundError as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return None


def _cmd_run(args: argparse.Namespace) -> int:
    files = _load(args)
    if files is None:
        return 2
    start = time.perf_counter()
    results: list[CaseResult] = []
    not_applicable = sum(len(f.not_applicable) for f in files)
    disabled = sum(len(f.disabled) for f in files)
    for f in files:
        for problem in f.problems:
            results.append(_print(problem_result(problem, f.display_name), args.diff))
        for case in f.cases:
            results.append(_print(run_case(case, strict=True, file=f.display_name), args.diff))
    counts = {s: sum(r.status is s for r in results) for s in Status}
    elapsed = time.perf_counter() - start
    print(
        f"{len(results)} cases: {counts[Status.PASSED]} passed, {counts[Status.FAILED]} failed, "
        f"{counts[Status.ERROR]} errors, {counts[Status.UNSUPPORTED]} unsupported "
        f"({not_applicable} not applicable, {disabled} disabled) in {elapsed:.1f}s"
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
    if files is None:
        return 2
    run = run_conformance(
        files, strict=False, progress=not args.no_progress and sys.stderr.isatty()
    )
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
