"""A soak of one server: persistent queries under steady input for a long time (``nox -s soak_bench``).

    python -m benchmarks.soak [--minutes 60] [--queries 20] [--rate 10] [--record]

A broker and one ``kspark server`` start. The queries start in stages of 1, 5 and then
``--queries`` (stateless, aggregates, tumbling windows and stream-table joins in turn), all
reading one input stream that a producer feeds ``--rate`` records a second from the start to
the end. A client runs a pull query and a push query (``LIMIT 3``) every few seconds. Every
``--sample-seconds`` the run samples the server's process tree (resident memory, threads, open
files), its state directory's size and its queries' lag (``GET /lag``). Half-way through the
server is restarted (SIGTERM, then started again on its state directory); its queries go on
from their checkpoints.

At the end the input stops, the queries catch up, and every output is checked exactly
(read_committed): each stateless and join output holds every input record once, each
aggregate's and window's latest counts add up to the input. Only then are the figures set:
memory, threads and open files at the start and the end of the steady part (after the last
stage's warm-up), their growth per hour, memory per query at each stage, records/s and batch
time per stage, pull and push latencies, and the restart's times. The samples go into the
report and a plot (PNG, ``reports/soak.png``; with ``--record`` also ``docs/soak.png``, which
the docs' benchmarks page shows).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.report import REPOSITORY, OutputsWrong, Run, add_report_options, write
from engine.components.kspark_server import ServerProcess
from engine.errors import ComponentError
from qtt.optional import require

KINDS = ("stateless", "aggregate", "window", "join")
GROUPS = 8  # the input's G column takes the values 0..7; the join's table has a row for each


def query_statement(number: int) -> tuple[str, str]:
    """The kind and CREATE statement of soak query ``number`` (1-based), kinds in turn."""
    kind = KINDS[(number - 1) % len(KINDS)]
    name = f"Q{number}"
    sink = f"WITH (KAFKA_TOPIC='soak_q{number}', VALUE_FORMAT='JSON')"
    statement = {
        "stateless": f"CREATE STREAM {name} {sink} AS SELECT G, N, ID FROM SRC WHERE N >= 0;",
        "aggregate": f"CREATE TABLE {name} {sink} AS SELECT G, COUNT(*) AS C, SUM(N) AS S FROM SRC GROUP BY G;",
        "window": (f"CREATE TABLE {name} {sink} AS SELECT G, COUNT(*) AS C FROM SRC "
                   "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY G;"),
        "join": (f"CREATE STREAM {name} {sink} AS SELECT SRC.G AS G, SRC.N AS N, DIM.NAME AS NAME "
                 "FROM SRC LEFT JOIN DIM ON SRC.G = DIM.G;"),
    }[kind]
    return kind, statement


def stages(queries: int) -> list[int]:
    """How many queries run after each stage: 1, 5, then ``queries`` (fewer when fewer)."""
    return sorted({n for n in (1, 5, queries) if n <= queries})


def output_problems(kind: str, topic: str, records: list[Any], produced: int) -> list[str]:
    """What is wrong with one query's output, given that the input held N = 0..produced-1,
    each with G = N % 8 (records sorted by partition and offset, as read_topic returns them)."""
    values = [json.loads(r.value) for r in records if r.value is not None]
    if kind in ("stateless", "join"):
        seen = collections.Counter(int(v["N"]) for v in values)
        lost = produced - len(set(seen) & set(range(produced)))
        duplicated = sum(1 for c in seen.values() if c > 1)
        extra = len(set(seen) - set(range(produced)))
        wrong_names = sum(1 for v in values if kind == "join" and v.get("NAME") != f"g{int(v['N']) % GROUPS}")
        found = [f"{topic}: {what} {count}" for what, count in (
            ("lost", lost), ("duplicated", duplicated), ("unexpected", extra), ("joined wrongly", wrong_names))
            if count]
        return found
    latest: dict[bytes | None, int] = {}
    for record, value in zip((r for r in records if r.value is not None), values, strict=True):
        latest[record.key] = int(value["C"])
    counted = sum(latest.values())
    if counted != produced:
        return [f"{topic}: the latest counts add up to {counted}, not {produced}"]
    return []


def tree_usage(pid: int) -> dict[str, float]:
    """Resident memory (MiB), threads and open files of a process and its descendants
    (the server's Python and the JVM it started)."""
    psutil = require("psutil", extra="test", tool="benchmarks/soak.py")

    try:
        root = psutil.Process(pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return {"rss_mib": 0.0, "threads": 0, "open_files": 0}
    rss = threads = files = 0
    for process in processes:
        try:
            with process.oneshot():
                rss += process.memory_info().rss
                threads += process.num_threads()
                files += process.num_fds()
        except psutil.NoSuchProcess:
            continue
    return {"rss_mib": round(rss / 2**20, 1), "threads": threads, "open_files": files}


def directory_mib(path: Path) -> float:
    """The size of the files under ``path`` in MiB."""
    total = 0
    for item in path.rglob("*"):
        try:
            if item.is_file():
                total += item.stat().st_size
        except OSError:
            continue
    return round(total / 2**20, 2)


@dataclass
class Feed:
    """The steady input: N = 0, 1, 2, ... at ``rate`` records a second until stopped."""

    bootstrap: str
    rate: float
    produced: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "log_level": 0})
        began = time.monotonic()
        n = 0
        while not self.stop.is_set():
            due = int((time.monotonic() - began) * self.rate)
            while n < due:
                producer.produce("soak_src", key=struct.pack(">i", n % GROUPS),
                                 value=json.dumps({"N": n, "ID": f"r{n}"}).encode())
                n += 1
            producer.poll(0)
            self.stop.wait(0.2)
        if producer.flush(120) != 0:
            raise RuntimeError("soak: the input producer could not deliver its last records")
        self.produced = n


@dataclass
class Clients:
    """A pull and a push query every ``every`` seconds; their latencies and failures."""

    url: str
    every: float
    latencies: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    server_errors: int = 0
    paused: threading.Event = field(default_factory=threading.Event)  # set while the server restarts
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        import httpx

        with httpx.Client(timeout=120) as http:
            while not self.stop.wait(self.every):
                if self.paused.is_set():
                    continue
                for kind, sql in (("pull", "SELECT * FROM Q2 WHERE G = 3;"),
                                  ("push", "SELECT * FROM SRC EMIT CHANGES LIMIT 3;")):
                    started = time.monotonic()
                    try:
                        answer = http.post(f"{self.url}/query-stream", json={"sql": sql})
                    except httpx.HTTPError as exc:
                        if not self.paused.is_set():
                            self.errors[f"{kind}: {type(exc).__name__}"] += 1
                        continue
                    if self.paused.is_set():
                        continue  # answered while the server drains for its restart
                    if answer.status_code >= 500:
                        self.server_errors += 1
                    if answer.status_code != 200:
                        self.errors[f"{kind}: {answer.status_code}"] += 1
                        continue
                    self.latencies[kind].append(time.monotonic() - started)


def lag_report(url: str) -> dict[str, Any]:
    """Sums over the server's queries from GET /lag: lag, records/s consumed, batch time."""
    import httpx

    try:
        queries = httpx.get(f"{url}/lag", timeout=60).json()["queries"]
    except (httpx.HTTPError, ValueError, KeyError):
        return {"lag": None, "consumed_per_second": None, "batch_seconds": None, "running": None}
    batches = [q["lastBatchSeconds"] for q in queries if q.get("lastBatchSeconds") is not None]
    return {
        "lag": sum(int(q.get("totalLag") or 0) for q in queries),
        "consumed_per_second": round(sum(float(q.get("consumedPerSecond") or 0) for q in queries), 2),
        "batch_seconds": round(sum(batches) / len(batches), 3) if batches else None,
        "running": sum(1 for q in queries if q.get("state") == "RUNNING"),
    }


def plot(samples: list[dict[str, Any]], marks: dict[str, float], path: Path) -> None:
    """Memory, threads, open files, state size and lag against minutes, one panel each,
    the stages and the restart marked."""
    matplotlib = require("matplotlib", extra="test", tool="benchmarks/soak.py")
    matplotlib.use("Agg")
    plt = require("matplotlib.pyplot", extra="test", tool="benchmarks/soak.py")

    minutes = [s["minute"] for s in samples]
    panels = (("rss_mib", "resident memory (MiB)"), ("threads", "threads"), ("open_files", "open files"),
              ("state_mib", "state directory (MiB)"), ("lag", "lag (records, all queries)"),
              ("load_1m", "machine load (1 min average)"))
    figure, axes = plt.subplots(len(panels), 1, figsize=(9, 13), sharex=True)
    for axis, (key, label) in zip(axes, panels, strict=True):
        axis.plot(minutes, [s[key] if s.get(key) is not None else float("nan") for s in samples], marker=".")
        axis.set_ylabel(label, fontsize=8)
        axis.set_ylim(bottom=0)
        axis.grid(True, alpha=0.3)
        for name, minute in marks.items():
            axis.axvline(minute, color="grey", linestyle="--", linewidth=0.8)
            if axis is axes[0]:
                axis.annotate(name, (minute, 0), textcoords="offset points", xytext=(2, 4), fontsize=7)
    axes[-1].set_xlabel("minutes since the server started")
    figure.suptitle("kspark server soak: the server's process tree sampled every interval", fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=80)
    plt.close(figure)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def _per_hour(first: dict[str, Any], last: dict[str, Any], key: str) -> float:
    hours = (last["minute"] - first["minute"]) / 60
    return round((last[key] - first[key]) / hours, 1) if hours > 0 else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="the whole run, from the first query on")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--rate", type=float, default=10.0, help="input records a second")
    parser.add_argument("--sample-seconds", type=float, default=60.0)
    parser.add_argument("--stage-minutes", type=float, default=3.0, help="time each stage runs before the next")
    parser.add_argument("--no-restart", action="store_true", help="do not restart the server half-way")
    parser.add_argument("--catch-up-minutes", type=float, default=15.0,
                        help="how long the outputs may take to be complete once the input stops")
    add_report_options(parser, "soak")
    args = parser.parse_args(argv)
    if args.queries < 2:
        parser.error("--queries must be at least 2 (the pull query reads Q2, an aggregate)")
    import httpx

    from engine.components.broker import Broker
    from engine.kafka.consume import read_topic

    # Date, commit and load average as at the start: the code that ran and the machine it met.
    run = Run("soak", load={"minutes": args.minutes, "queries": args.queries, "rate": args.rate,
                            "sample_seconds": args.sample_seconds, "stage_minutes": args.stage_minutes,
                            "kinds": "stateless, aggregate, tumbling window, stream-table join in turn",
                            "restart": not args.no_restart, "server": "one kspark server, --spark-master local[2]"})
    report = Path(args.report)
    report.parent.mkdir(parents=True, exist_ok=True)
    samples_file = report.with_suffix(".samples.jsonl")  # each sample as it is taken: kept if the run fails
    samples_file.write_text("", encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="kspark-soak-") as tmp, ExitStack() as stack:
        work = Path(tmp)
        broker = stack.enter_context(Broker(work / "broker", stop_with_parent=True))
        state = work / "state"
        server = ServerProcess(broker.bootstrap_servers, f"soak_{uuid.uuid4().hex[:8]}", state,
                               log=work / "server.log", args=("--spark-master", "local[2]"))
        try:
            server.start(timeout=300)
        except ComponentError as exc:
            raise SystemExit(f"soak: {exc}") from None
        # The server's log kept beside the report (callbacks run last first: this one after the stop).
        stack.callback(shutil.copyfile, work / "server.log", report.with_suffix(".server.log"))
        stack.callback(server.stop, 120)
        born = time.monotonic()

        def ksql(statement: str) -> None:
            answer = httpx.post(f"{server.url}/ksql", json={"ksql": statement, "streamsProperties": {
                "auto.offset.reset": "earliest"}}, timeout=600)
            if answer.status_code != 200:
                raise SystemExit(f"soak: {statement} answered {answer.status_code}: {answer.text}\n{server.tail()}")

        ksql("CREATE STREAM SRC (G INT KEY, N INT, ID STRING) WITH (KAFKA_TOPIC='soak_src', "
             "VALUE_FORMAT='JSON', PARTITIONS=2);")
        ksql("CREATE TABLE DIM (G INT PRIMARY KEY, NAME STRING) WITH (KAFKA_TOPIC='soak_dim', "
             "VALUE_FORMAT='JSON', PARTITIONS=2);")
        for g in range(GROUPS):
            ksql(f"INSERT INTO DIM (G, NAME) VALUES ({g}, 'g{g}');")

        feed = Feed(broker.bootstrap_servers, args.rate)
        clients = Clients(server.url, every=5.0)
        workers = [threading.Thread(target=feed.run, name="soak-feed", daemon=True),
                   threading.Thread(target=clients.run, name="soak-clients", daemon=True)]  # once Q2 runs
        samples: list[dict[str, Any]] = []
        marks: dict[str, float] = {}
        restart: dict[str, Any] = {}
        kinds: dict[int, str] = {}

        def sample(stage: int) -> dict[str, Any]:
            entry = {"minute": round((time.monotonic() - born) / 60, 2), "queries": stage,
                     **tree_usage(server.process.pid if server.process else 0),
                     "state_mib": directory_mib(state), **lag_report(server.url),
                     "load_1m": round(os.getloadavg()[0], 2)}
            samples.append(entry)
            with samples_file.open("a", encoding="utf-8") as out:
                out.write(json.dumps(entry, sort_keys=True) + "\n")
            print(f"soak: {json.dumps(entry, sort_keys=True)}", flush=True)
            return entry

        started = time.monotonic()
        until = started + args.minutes * 60
        stage_samples: dict[int, dict[str, Any]] = {}
        running = 0
        workers[0].start()
        for count in stages(args.queries):
            marks[f"{count} queries"] = round((time.monotonic() - born) / 60, 2)
            while running < count:
                running += 1
                kinds[running], statement = query_statement(running)
                ksql(statement)
            if running >= 2 and not workers[1].is_alive():
                workers[1].start()
            settle = time.monotonic() + args.stage_minutes * 60
            while time.monotonic() < settle:
                time.sleep(min(args.sample_seconds, max(0.0, settle - time.monotonic())))
                sample(count)
            stage_samples[count] = samples[-1]
        steady_first = samples[-1]
        half = started + args.minutes * 60 / 2
        next_sample = time.monotonic() + args.sample_seconds
        while time.monotonic() < until:
            if not restart and not args.no_restart and time.monotonic() >= half:
                clients.paused.set()
                marks["restart"] = round((time.monotonic() - born) / 60, 2)
                began = time.monotonic()
                code = server.stop(timeout=120)
                stopped = time.monotonic() - began
                server.start(timeout=600)
                restart = {"exit_code": code, "stop_seconds": round(stopped, 1),
                           "start_seconds": round(time.monotonic() - began - stopped, 1)}
                clients.paused.clear()
                print(f"soak: restart {json.dumps(restart)}", flush=True)
            time.sleep(max(0.0, min(next_sample, until) - time.monotonic()))
            if time.monotonic() >= next_sample:
                sample(running)
                next_sample += args.sample_seconds
        steady_last = sample(running)
        clients.stop.set()
        feed.stop.set()
        for thread in workers:
            if thread.is_alive():
                thread.join(timeout=180)
        produced = feed.produced

        caught_up = time.monotonic()
        deadline = caught_up + args.catch_up_minutes * 60
        problems: list[str] = []
        while True:
            problems = []
            for number, kind in sorted(kinds.items()):
                topic = f"soak_q{number}"
                problems += output_problems(kind, topic, read_topic(broker.bootstrap_servers, topic, timeout=120),
                                            produced)
            if not problems or time.monotonic() > deadline:
                break
            time.sleep(15)
        catch_up_seconds = round(time.monotonic() - caught_up, 1)
        final = sample(running)

    if clients.server_errors:
        problems.append(f"{clients.server_errors} pull or push answers were 5xx")
    if restart and restart["exit_code"] != 0:
        problems.append(f"the server's restart: SIGTERM ended it with {restart['exit_code']}")
    details: dict[str, Any] = {"produced": produced, "restart": restart, "marks": marks, "samples": samples,
                               "catch_up_seconds": catch_up_seconds, "client_errors": dict(clients.errors),
                               "pull_queries": len(clients.latencies["pull"]),
                               "push_queries": len(clients.latencies["push"]), "final": final}
    plot(samples, marks, report.with_suffix(".png"))
    try:
        run.check_outputs("every stateless and join output holds each input record once, every aggregate's and "
                          "window's latest counts add up to the input (read_committed); no 5xx; SIGTERM exits 0",
                          problems)
    except OutputsWrong as exc:
        # No figures from wrong outputs; what was seen is kept beside the report for the diagnosis.
        failed = report.with_suffix(".failed.json")
        failed.write_text(json.dumps({**run.to_json(details), "problems": problems}, indent=2, sort_keys=True) + "\n",
                          encoding="utf-8")
        print(json.dumps({k: v for k, v in details.items() if k != "samples"}, indent=2, sort_keys=True))
        print(f"soak: {exc} (what the run saw: {failed})", file=sys.stderr)
        return 1
    if args.record:  # the docs' benchmarks page shows the newest recorded run's plot
        plot(samples, marks, REPOSITORY / "docs" / "soak.png")
        details["plot"] = "soak.png"
    first = stage_samples[min(stage_samples)]
    run.figure("records_produced", produced, unit="records", higher_is_better=True)
    for key, unit in (("rss_mib", "MiB"), ("threads", "threads"), ("open_files", "files")):
        run.figure(f"{key} steady start", steady_first[key], unit=unit)
        run.figure(f"{key} steady end", steady_last[key], unit=unit)
        run.figure(f"{key} growth per hour", _per_hour(steady_first, steady_last, key), unit=f"{unit}/h")
    run.figure("state_mib end", steady_last["state_mib"], unit="MiB")
    for count, entry in sorted(stage_samples.items()):
        if count != min(stage_samples):
            per_query = (entry["rss_mib"] - first["rss_mib"]) / (count - min(stage_samples))
            run.figure(f"memory per added query at {count} queries", round(per_query, 1), unit="MiB")
        run.figure(f"records_per_second consumed at {count} queries", entry["consumed_per_second"], unit="1/s",
                   higher_is_better=True)
        run.figure(f"batch_seconds at {count} queries", entry["batch_seconds"], unit="s")
    for kind in ("pull", "push"):
        run.figure(f"{kind} p50", round(_quantile(clients.latencies[kind], 0.5) * 1000, 1), unit="ms")
        run.figure(f"{kind} p99", round(_quantile(clients.latencies[kind], 0.99) * 1000, 1), unit="ms")
    if restart:
        run.figure("restart stop_seconds", restart["stop_seconds"], unit="s")
        run.figure("restart start_seconds", restart["start_seconds"], unit="s")
    run.figure("catch_up_seconds", catch_up_seconds, unit="s")
    write(run, details, report=report, record=args.record)
    print(json.dumps({k: v for k, v in details.items() if k != "samples"}, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
