"""``qtt rest PATH... [--report FILE] [--server URL] [--bootstrap-servers HOST:PORT] [--registry URL] [-k S]``.

Runs REST QTT files against a kspark server (started with its broker and a schema registry
unless ``--server`` names one; over HTTPS with ``--tls``, or an ``https://`` ``--server`` with
``--ca`` and ``--client-cert``), prints a line per case and a pass rate per file, then the conformance summary;
``--report`` writes the same JSON report as ``qtt conformance`` (``runtime``: ``rest``).
Exit codes: 0 done (with ``--strict``: every case passed); 1 no case found or, with
``--strict``, a case did not pass; 2 the run itself failed (bad path, no broker, no server,
report not writable); 130 interrupted (everything started is stopped first).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from qtt.conformance import ConformanceRun, Counts, print_summary, write_report
from qtt.rest.loader import load_rest_paths
from qtt.rest.model import RestFile
from qtt.runner import CaseResult, Status, problem_result

_LABELS = {
    Status.PASSED: "PASS",
    Status.FAILED: "FAIL",
    Status.ERROR: "ERROR",
    Status.UNSUPPORTED: "UNSUPPORTED",
}


def add_rest_command(sub: Any) -> None:
    """Register ``qtt rest`` on the ``qtt`` subparsers."""
    rest = sub.add_parser(
        "rest",
        help="Run REST QTT cases against a kspark server on a Kafka broker; per-file pass rates.",
        description=(
            "Run ksqlDB's REST query-validation tests: each statement is a request to a real "
            "kspark server, responses and output topics are compared. Without --server a "
            "broker and a server are started for the run and stopped at its end."
        ),
    )
    rest.add_argument("paths", nargs="+", metavar="PATH", help="REST QTT files or folders.")
    rest.add_argument("-k", "--filter", metavar="S", help="Only cases whose id contains S.")
    rest.add_argument("--report", metavar="FILE", help="Write a JSON report to FILE.")
    rest.add_argument(
        "--server", metavar="URL", help="A running server (default: start one for the run)."
    )
    rest.add_argument(
        "--bootstrap-servers",
        metavar="HOST:PORT",
        help="The broker (default: start one; needed with --server: the server's broker).",
    )
    rest.add_argument(
        "--registry",
        metavar="URL",
        help=(
            "A running schema registry (Confluent API) for AVRO/JSON_SR (default: start one for "
            "a started server; with --server: the server's ksql.schema.registry.url, else none)."
        ),
    )
    rest.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="S",
        help="Seconds to wait for push query rows, pull query retries and outputs (30).",
    )
    rest.add_argument(
        "--server-timeout",
        type=float,
        default=180.0,
        metavar="S",
        help="Seconds a started server may take to answer /healthcheck (180).",
    )
    rest.add_argument(
        "--work-dir",
        metavar="DIR",
        help="Keep the broker's and server's files and logs in DIR (default: a temp dir, removed).",
    )
    rest.add_argument(
        "--tls",
        action="store_true",
        help=(
            "The server started for the run serves HTTPS and asks for the runner's client "
            "certificate (certificates made for the run in the work dir)."
        ),
    )
    rest.add_argument(
        "--ca", metavar="FILE", help="With an https:// --server: the PEM CA its certificate is signed by."
    )
    rest.add_argument(
        "--client-cert",
        metavar="FILE",
        help="With an https:// --server that asks for one: the runner's PEM certificate (and key).",
    )
    rest.add_argument(
        "--client-key", metavar="FILE", help="The PEM key of --client-cert (default: in the same file)."
    )
    rest.add_argument(
        "--strict", action="store_true", help="Exit 1 unless every case passed (for CI)."
    )
    rest.add_argument("--top", type=int, default=10, metavar="N", help="Top reasons shown (10).")
    rest.set_defaults(handler=cmd_rest)


def ignored_keys_note(files: list[RestFile]) -> str | None:
    """One line naming the case keys the runner ignored (as ksqlDB's does) and how many cases
    carry each, or None when there are none."""
    counts: dict[str, int] = {}
    for file in files:
        for case in file.cases:
            for key in case.ignored_keys:
                counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None
    listed = ", ".join(f"{key} ({n} case{'s' if n != 1 else ''})" for key, n in sorted(counts.items()))
    return f"qtt: case keys ignored, as ksqlDB's runner ignores keys it does not know: {listed}"


def cmd_rest(args: argparse.Namespace) -> int:
    """The ``qtt rest`` handler."""
    from qtt.rest.client import ClientTls
    from qtt.rest.runner import HarnessError, RestHarness

    tls_files = [f"--{o.replace('_', '-')}" for o in ("ca", "client_cert", "client_key") if getattr(args, o, None)]
    if args.tls and args.server:
        print("qtt: --tls is for the server started for the run; for --server give its https:// URL "
              "and --ca, --client-cert.", file=sys.stderr)
        return 2
    if tls_files and not (args.server or "").startswith("https://"):
        print(f"qtt: {tls_files[0]} needs an https:// --server.", file=sys.stderr)
        return 2
    client_tls = ClientTls(ca=args.ca, cert=args.client_cert, key=args.client_key) if tls_files else None
    try:
        files = load_rest_paths(args.paths, filter=args.filter)
    except FileNotFoundError as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return 2
    if not any(f.cases or f.problems for f in files):
        print("qtt: no REST QTT cases found.", file=sys.stderr)
        return 1
    note = ignored_keys_note(files)
    if note is not None:
        print(note, file=sys.stderr)
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        with RestHarness.open(
            server_url=args.server,
            bootstrap_servers=args.bootstrap_servers,
            work_dir=Path(args.work_dir) if args.work_dir else None,
            wait=args.wait,
            server_timeout=args.server_timeout,
            registry_url=args.registry,
            tls=args.tls,
            client_tls=client_tls,
        ) as harness:
            registry = f", schema registry {harness.registry_url}" if harness.registry_url else ""
            print(f"server {harness.client.url}, broker {harness.bootstrap_servers}{registry}", flush=True)
            run = run_rest_files(files, lambda case, file: _run_case(harness, case, file))
            for warning in dict.fromkeys(harness.warnings):
                print(f"warning: {warning}", file=sys.stderr)
            if harness.restarts:
                print(f"the server was restarted {harness.restarts} time(s) after failed clean-ups")
    except HarnessError as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("qtt: interrupted; the broker and server started for the run were stopped.", file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    status = 0
    if args.report:
        try:
            write_report(run, args.report)
        except OSError as exc:
            print(f"qtt: cannot write the report '{args.report}': {exc}", file=sys.stderr)
            status = 2
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 140)
    print_summary(run, console, top=args.top)
    totals = run.totals
    if status == 0 and args.strict and totals.passed != totals.total:
        status = 1
    return status


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _run_case(harness: Any, case: Any, file: str) -> CaseResult:
    from qtt.rest.runner import run_rest_case

    return run_rest_case(case, harness, file=file)


def run_rest_files(
    files: list[RestFile], run_case: Callable[[Any, str], CaseResult], *, out: Any = None
) -> ConformanceRun:
    """Run every case of ``files`` with ``run_case``; load problems count as errors.

    Prints a line per case and, per file, its pass rate.
    """
    out = out or sys.stdout
    run = ConformanceRun(runtime="rest")
    start = time.perf_counter()
    for f in files:
        counts = run.files.setdefault(f.display_name, Counts())
        counts.disabled += len(f.disabled)
        print(f"== {f.display_name}: {len(f.cases) + len(f.problems)} cases", file=out, flush=True)
        results = [problem_result(p, f.display_name) for p in f.problems]
        for result in results:
            _show(result, out)
        for case in f.cases:
            result = run_case(case, f.display_name)
            _show(result, out)
            results.append(result)
        for result in results:
            run.results.append(result)
            counts.add(result.status)
        pct = 100.0 * counts.passed / counts.total if counts.total else 0.0
        print(
            f"== {f.display_name}: {counts.passed}/{counts.total} passed ({pct:.1f}%)",
            file=out,
            flush=True,
        )
    run.wall_seconds = time.perf_counter() - start
    return run


def _show(result: CaseResult, out: Any) -> None:
    line = f"{_LABELS[result.status]} {result.case_id} ({result.seconds:.1f}s)"
    if result.reason:
        line += f" - {result.reason}"
    print(line, file=out, flush=True)
