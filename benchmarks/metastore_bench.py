"""Restart time of a server: metastore tables (KLIP-18) vs command topic, in the same run.

    python -m benchmarks.metastore_bench [--cycles 5000] [--live 50] [--bootstrap-servers HOST:PORT] [--record]
    nox -s metastore_bench

Both services get the same history: ``--cycles`` CREATE STREAM / DROP STREAM pairs, then
``--live`` sources that stay. The history is written straight to Kafka in transactions, in
each mode's own record format (a command per statement on the command topic; a row or a
tombstone per statement on the UserDataSources changelog, created with small segments so
the broker's log cleaner compacts it), not through the REST API: writing 10,000
statements one by one would measure the write path, not the restart. Once the changelog
is compacted (or ``--compaction-wait`` passed), each mode's restart is timed: a new server
(no persistent queries: their Spark start is the same in both modes) is started until it
is ready, ``--repeats`` times; the median is reported with the records each had to read.
Both restarted servers must list the live sources before a figure is set; the command
topic's restart is the baseline of the tables' (``benchmarks.report``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks import report as R
from benchmarks.timing import Clock

STATEMENT = "CREATE STREAM {name} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='bench_topic', VALUE_FORMAT='JSON', PARTITIONS=1);"


def _plans() -> tuple[dict[str, Any], dict[str, Any]]:
    """The create and drop plan JSON of one source named ``__NAME__`` (renamed per statement)."""
    from engine.facade.engine import KsqlEngine
    from engine.plan import serde

    engine = KsqlEngine()
    create, drop = engine.execute_sql(STATEMENT.format(name="NAME__X") + "DROP STREAM NAME__X;")
    return serde.to_json_value(create.plan), serde.to_json_value(drop.plan)


def _renamed(plan: dict[str, Any], name: str) -> dict[str, Any]:
    return json.loads(json.dumps(plan).replace("NAME__X", name))


def history(cycles: int, live: int) -> list[tuple[str, dict[str, Any]]]:
    """(source name, statement plan JSON) of every statement, in order."""
    create, drop = _plans()
    statements = []
    for n in range(cycles):
        statements.append((f"C{n}", _renamed(create, f"C{n}")))
        statements.append((f"C{n}", _renamed(drop, f"C{n}")))
    statements += [(f"L{n}", _renamed(create, f"L{n}")) for n in range(live)]
    return statements


def _produce(bootstrap: str, transactional_id: str, topic: str, records: list[tuple[bytes, bytes | None]]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "enable.idempotence": True, "linger.ms": 20})
    producer.init_transactions(30)
    for start in range(0, len(records), 1000):
        producer.begin_transaction()
        for key, value in records[start:start + 1000]:
            producer.produce(topic, key=key, value=value, partition=0)
        producer.commit_transaction(60)


def write_command_topic(bootstrap: str, service_id: str, statements: list[tuple[str, dict[str, Any]]]) -> str:
    from engine.commandlog import Command, CommandLog

    log = CommandLog(bootstrap, service_id)
    log.create_topic()
    log.close()
    records: list[tuple[bytes, bytes | None]] = []
    for name, plan in statements:
        verb = "drop" if plan["command"]["@type"].startswith("drop") else "create"
        command = Command(command_id=f"stream/`{name}`/{verb}", statement=plan["statementText"], plan=plan)
        records.append((command.key_bytes(), command.value_bytes()))
    _produce(bootstrap, service_id, log.topic, records)
    return log.topic


def write_tables(bootstrap: str, service_id: str, statements: list[tuple[str, dict[str, Any]]]) -> str:
    from engine.kafka.admin import TopicAdmin
    from engine.metastore.database import SOURCES, SourceRow, changelog_topic
    from engine.metastore.database.rows import encode_row

    topic = changelog_topic(service_id, SOURCES)
    TopicAdmin(bootstrap).create_topic(topic, 1, configs={
        "cleanup.policy": "compact", "segment.bytes": str(1024 * 1024), "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "1000", "min.compaction.lag.ms": "0", "segment.ms": "1000",
    })
    records: list[tuple[bytes, bytes | None]] = []
    for name, plan in statements:
        row = None if plan["command"]["@type"].startswith("drop") else SourceRow.from_statement_plan(plan)
        records.append((name.encode(), encode_row(SOURCES, row)))
    _produce(bootstrap, f"{service_id}-{topic}-0", topic, records)
    return topic


def count_records(bootstrap: str, topic: str) -> int:
    from engine.kafka.consume import read_topic

    return len(read_topic(bootstrap, topic, timeout=120))


def await_compaction(bootstrap: str, topic: str, live: int, wait: float) -> tuple[int, float]:
    """Wait until the changelog holds about the live rows (tombstones gone), or ``wait`` passed."""
    from confluent_kafka import Producer

    started = time.monotonic()
    poke = Producer({"bootstrap.servers": bootstrap})
    count = count_records(bootstrap, topic)
    while count > live * 2 and time.monotonic() - started < wait:
        time.sleep(5)
        # A new record rolls the active segment once segment.ms passed: the cleaner then sees it.
        poke.produce(topic, key=b"L0", value=_last_row(bootstrap, topic), partition=0)  # the same row again
        poke.flush(10)
        count = count_records(bootstrap, topic)
    return count, time.monotonic() - started


def _last_row(bootstrap: str, topic: str) -> bytes | None:
    from engine.kafka.consume import read_topic

    rows = [r.value for r in read_topic(bootstrap, topic, timeout=120) if r.key == b"L0" and r.value is not None]
    return rows[-1] if rows else None


def time_restart(mode: str, bootstrap: str, service_id: str, state: Path, repeats: int) -> dict[str, Any]:
    from engine.server.service import KsqlService
    from engine.server.tables_service import TablesService

    seconds = []
    listed = 0
    for _ in range(repeats):
        service_class: Any = TablesService if mode == "tables" else KsqlService
        service = service_class(bootstrap, service_id, state, run_queries=False, command_timeout=120.0)
        clock = Clock().start()
        service.start(timeout=300)
        seconds.append(clock.stop().seconds)
        listed = len(service.engine.metastore.all())
        service.close()
    return {"median_s": round(statistics.median(seconds), 3), "runs_s": [round(s, 3) for s in seconds],
            "sources_listed": listed}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from benchmarks.stream_bench import kafka_cluster

    statements = history(args.cycles, args.live)
    with kafka_cluster(args.bootstrap_servers, work) as bootstrap:
        command_service = f"bench_ct_{uuid.uuid4().hex[:6]}"
        tables_service = f"bench_tb_{uuid.uuid4().hex[:6]}"
        command_topic = write_command_topic(bootstrap, command_service, statements)
        changelog = write_tables(bootstrap, tables_service, statements)
        compacted, waited = await_compaction(bootstrap, changelog, args.live, args.compaction_wait)
        report = {
            "cycles": args.cycles, "live": args.live, "statements": len(statements),
            "command_topic": {"records": count_records(bootstrap, command_topic),
                              **time_restart("command-topic", bootstrap, command_service, work, args.repeats)},
            "tables": {"records": compacted, "compaction_wait_s": round(waited, 1),
                       **time_restart("tables", bootstrap, tables_service, work, args.repeats)},
        }
    report["speedup"] = round(report["command_topic"]["median_s"] / max(report["tables"]["median_s"], 1e-6), 1)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.metastore_bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=5000, help="CREATE/DROP pairs before the live sources")
    parser.add_argument("--live", type=int, default=50, help="sources alive at restart (default 50)")
    parser.add_argument("--repeats", type=int, default=3, help="restarts timed per mode (median reported)")
    parser.add_argument("--compaction-wait", type=float, default=180.0, help="seconds to wait for the log cleaner")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="use this broker instead of starting one")
    R.add_report_options(parser, "metastore_bench")
    args = parser.parse_args(argv)
    bench = R.Run("metastore_bench", load={"cycles": args.cycles, "live": args.live, "repeats": args.repeats},
                  baseline="the same history restarted from the command topic, same run")
    with tempfile.TemporaryDirectory(prefix="metastore-bench-") as tmp:
        report = run(args, Path(tmp))
    ct, tb = report["command_topic"], report["tables"]
    try:
        bench.check_outputs(
            f"both restarted servers list the {args.live} live sources",
            [f"the restarted servers listed {ct['sources_listed']} and {tb['sources_listed']} sources, "
             f"expected {args.live}"] if not ct["sources_listed"] == tb["sources_listed"] == args.live else [],
        )
    except R.OutputsWrong as exc:
        print(exc, file=sys.stderr)
        return 1
    bench.figure("restart_seconds", tb["median_s"], unit="s", baseline=ct["median_s"])
    R.write(bench, report, report=args.report, record=args.record)
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
