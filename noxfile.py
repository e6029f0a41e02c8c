"""Developer and CI sessions: tests, the main QTT job, conformance, lint, benchmarks."""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True
# uv where it is installed (.ci/run installs it): it makes a session's virtualenv in seconds from
# its cache, where pip took a minute or more for PySpark alone; virtualenv otherwise.
nox.options.default_venv_backend = "uv|virtualenv"

PYTHON = "3.11"
CORPUS = "../shared/ksqldb-qtt"


def _install(session: nox.Session, *args: str) -> None:
    """``session.install``, with pip in the virtualenv too: uv's virtualenvs have none, and the
    wheel lane and the release wheels build with ``python -m pip wheel``."""
    session.install("pip", *args)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """The test suite: unit tests per layer, builders on Spark, and the project's QTT cases.

    The end-to-end runs of live servers and several processes run in ``nox -s system`` (CI runs
    it next); the three-process cluster test runs in its own session (``nox -s cluster``), and so
    do the long kill -9 runs (``nox -s soak``), the fault tests (``nox -s faults``) and the queries
    and server on the secured broker (``nox -s secured_kafka``). Two pytest-xdist workers, a test file each at a time,
    one per core (more workers are no faster on two cores). Each
    worker starts its own SparkSession, broker and registry. Files go out in collection order
    (``--no-loadscope-reorder``; by default pytest-xdist hands out the files with the most
    tests first), which ``tests/conftest.py`` sets: the QTT cases and the verify test of the
    planned cases, then the files with a test marked ``long``, then the rest. So the long
    tests run beside the short ones instead of alone at the end.
    """
    _install(session, "-e", ".[test]")
    session.run(
        "pytest", "-m", "not cluster and not soak and not spark_cluster and not docs and not faults and not secured_kafka and not system", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder",
        *session.posargs,
    )


@nox.session(python=PYTHON)
def system(session: nox.Session) -> None:
    """End-to-end runs (tests marked ``system``): servers racing and killed, SIGTERM with push
    queries open, CREATE OR REPLACE on running services, the CLI and the migrations tool against
    a live server, the REST harness over TLS and the registry, release wheels built from their
    commits. CI runs it after ``nox -s tests``; the same two workers."""
    _install(session, "-e", ".[test]")
    session.run("pytest", "-m", "system", "-n", "2", "--dist", "loadfile", "--no-loadscope-reorder",
                "-p", "no:cacheprovider", *session.posargs)


@nox.session(python=PYTHON, reuse_venv=False)
def wheel(session: nox.Session) -> None:
    """kspark as a user installs it: the wheel, built and installed without extras into a fresh
    virtualenv, runs the main job, bad input, a stateless and a stateful query on a broker and
    three racing servers, from outside the checkout (``ci/wheel_lane.py``)."""
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    session.install("pip")  # uv's virtualenvs have none
    session.run("python", "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist), ".")
    [wheel_file] = dist.glob("kspark-*.whl")
    _install(session, str(wheel_file))
    session.run("python", "ci/wheel_lane.py", "--repo", str(Path.cwd()), *session.posargs)


@nox.session(python=PYTHON)
def load(session: nox.Session) -> None:
    """A load test of a three-server service: 256 clients over HTTP/1.1 and HTTP/2 mixing inserts,
    pull and push queries and DDL; fails on a 5xx or a lost, duplicated or falsely failed row."""
    _install(session, "-e", ".[test]")
    session.run("python", "-m", "benchmarks.load", *session.posargs)


@nox.session(python=PYTHON)
def spark_cluster(session: nox.Session) -> None:
    """kspark on a Spark standalone master and two workers whose executors' Python has only
    PySpark: persistent queries with the engine shipped, kill -9 of a worker, the errors."""
    _install(session, "-e", ".[test]")
    session.run("pytest", "-m", "spark_cluster", "tests/cluster", *session.posargs)


@nox.session(python=PYTHON)
def cluster(session: nox.Session) -> None:
    """Three kspark server processes of one service on one broker: kill -9 of owners, failover."""
    _install(session, "-e", ".[test]")
    session.run("pytest", "-m", "cluster", "-s", *session.posargs)


@nox.session(python=PYTHON)
def soak(session: nox.Session) -> None:
    """Long kill -9 runs: the kill -9 test of a running query with native sources and sinks."""
    _install(session, "-e", ".[test]")
    session.run("pytest", "-m", "soak", *session.posargs)


@nox.session(python=PYTHON)
def soak_bench(session: nox.Session) -> None:
    """A soak of one server (benchmarks/soak.py): 20 persistent queries under steady input for an
    hour by default, pull and push queries, a restart half-way; memory, threads, open files, state
    and lag sampled and plotted; outputs exact at the end."""
    _install(session, "-e", ".[test]")
    session.run("python", "-m", "benchmarks.soak", *session.posargs)


@nox.session(python=PYTHON)
def upgrade(session: nox.Session) -> None:
    """A rolling upgrade of a three-server service from the previous release's wheel to the
    current one under load and statements, then the downgrade; every output topic checked
    against a bounded run of the same input (``ci/rolling_upgrade.py``, report in build/)."""
    _install(session, "-e", ".[test]")
    session.run("python", "ci/rolling_upgrade.py", "--repo", str(Path.cwd()), *session.posargs)


@nox.session(python=PYTHON)
def faults(session: nox.Session) -> None:
    """Faults by real means under running queries, one test at a time: the broker stopped and
    restarted or SIGSTOPped, the schema registry down, the network to the broker delayed and cut
    through toxiproxy (built with go install on first use)."""
    _install(session, "-e", ".[test]")
    session.run("pytest", "-m", "faults", "tests/faults", "-p", "no:cacheprovider", *session.posargs)


@nox.session(python=PYTHON)
def secured_kafka(session: nox.Session) -> None:
    """kspark run (exact output, and kill -9 in the middle of a stream) and kspark server
    against the SASL_SSL broker (minutes); the client and error tests of the secured broker run
    in ``nox -s tests``."""
    _install(session, "-e", ".[test]")
    session.run("pytest", "-m", "secured_kafka", "tests/engine/kafka/test_secured_kafka.py",
                "tests/engine/runtime/test_kafka_runtime.py", "-p", "no:cacheprovider", *session.posargs)


@nox.session(python=PYTHON)
def qtt(session: nox.Session) -> None:
    """The main job: run the project's own QTT cases on local Spark (no broker needed)."""
    _install(session, "-e", ".")
    session.run("qtt", "run", "tests/qtt_cases", *session.posargs)


@nox.session(python=PYTHON)
def qtt_kafka(session: nox.Session) -> None:
    """The project's QTT cases on the streaming runtime: a Kafka broker started for the run."""
    _install(session, "-e", ".")
    session.run("qtt", "run", "tests/qtt_cases", "--runtime", "kafka", *session.posargs)


@nox.session(python=PYTHON)
def rest(session: nox.Session) -> None:
    """The project's REST QTT cases against a kspark server and broker started for the run."""
    _install(session, "-e", ".")
    args = session.posargs or ["tests/rest_cases", "--strict"]
    session.run("qtt", "rest", *args)


@nox.session(python=PYTHON)
def conformance(session: nox.Session) -> None:
    """Run the conformance runner: `nox -s conformance -- PATH [--report FILE]`."""
    _install(session, "-e", ".")
    args = session.posargs or [CORPUS, "--report", "reports/conformance.json"]
    session.run("qtt", "conformance", *args)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff and mypy on the engine and the harness."""
    _install(session, "-e", ".[lint]")
    session.run("ruff", "check", "engine", "qtt", "tests")
    session.run("mypy", "engine", "qtt")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """The docs site (mkdocs-material), built strictly: a broken link or a page missing from nav
    fails; the site and the server's console in headless Chromium."""
    _install(session, "-e", ".[docs]")
    session.run("mkdocs", "build", "--strict", "--site-dir", "build/site", *session.posargs)
    # The built site in headless Chromium (Debian's chromium and chromium-driver): the index, a
    # guide and a reference page render, and every internal link on them answers. Then the
    # server's browser console, driven through its editor against a server on a broker.
    session.run("pytest", "-m", "docs", "tests/docs", "tests/engine/server/test_console_in_browser.py",
                "-p", "no:cacheprovider", "-q",
                env={"KSPARK_DOCS_SITE": "build/site", "NO_MKDOCS_2_WARNING": "1"})


@nox.session(python=PYTHON)
def plans_report(session: nox.Session) -> None:
    """HTML view of saved vs current plan DAGs, changes marked: reports/planned_cases.html."""
    _install(session, "-e", ".")
    session.run("python", "-m", "qtt.plans.html", "planned_cases", "reports/planned_cases.html", *session.posargs)


@nox.session(python=PYTHON)
def mutation(session: nox.Session) -> None:
    """Seeded mutants of the lower layer applied in process; the share the checks catch."""
    _install(session, "-e", ".[test]")
    session.run("python", "-m", "qtt.plans.mutation", *(session.posargs or ["--count", "120"]))


@nox.session(python=PYTHON)
def replay_bench(session: nox.Session) -> None:
    """Planned-case versions replayed per second (Spark start-up excluded)."""
    _install(session, "-e", ".")
    session.run("python", "-m", "benchmarks.replay_bench", "planned_cases", *session.posargs)


@nox.session(python=PYTHON)
def benchmark(session: nox.Session) -> None:
    """Conformance throughput in cases/s, and how the time splits between planning and Spark."""
    _install(session, "-e", ".")
    args = session.posargs or [CORPUS, "--report", "reports/benchmark.json"]
    session.run("python", "-m", "benchmarks.conformance", *args)


@nox.session(python=PYTHON)
def metastore_bench(session: nox.Session) -> None:
    """Server restart time with 50 live sources after 5,000 create/drop cycles: tables vs command topic."""
    _install(session, "-e", ".")
    session.run("python", "-m", "benchmarks.metastore_bench", *session.posargs)


@nox.session(python=PYTHON)
def pull_bench(session: nox.Session) -> None:
    """Pull-query key lookups through HTTP on a materialized table of 100,000 keys: p50/p99."""
    _install(session, "-e", ".")
    session.run("python", "-m", "benchmarks.pull_bench", *session.posargs)


@nox.session(python=PYTHON)
def stream_bench(session: nox.Session) -> None:
    """Streaming records/s on a real broker, engine vs hand-written PySpark, and latency."""
    _install(session, "-e", ".")
    session.run("python", "-m", "benchmarks.stream_bench", *session.posargs)


@nox.session(python=PYTHON)
def metrics_bench(session: nox.Session) -> None:
    """A query's records/s on a real broker with its metrics gathered and without (target: within 3 %)."""
    _install(session, "-e", ".")
    session.run("python", "-m", "benchmarks.metrics_bench", *session.posargs)


@nox.session(python=PYTHON)
def perf(session: nox.Session) -> None:
    """100,000 JSON records in memory: the engine's stateless CSAS and running GROUP BY against hand-written PySpark."""
    _install(session, "-e", ".")
    session.run("python", "-m", "benchmarks.perf", *session.posargs)
