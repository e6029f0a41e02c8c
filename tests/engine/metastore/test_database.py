"""The metastore database on a real broker: tables, integrity, ownership and fencing."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from engine.errors import MetastoreError
from engine.facade.engine import KsqlEngine
from engine.kafka.admin import TopicAdmin
from engine.kafka.client import client_config
from engine.metastore.database import (
    SOURCES,
    TYPES,
    Change,
    MetastoreDatabase,
    NotOwnerError,
    SourceRow,
    TypeRow,
    Write,
    pack_sequence,
    unpack_sequence,
)
from engine.plan import serde


def _rows(sql: str) -> dict[str, SourceRow]:
    engine = KsqlEngine()
    rows = {}
    for result in engine.execute_sql(sql):
        if result.plan is not None:
            row = SourceRow.from_statement_plan(serde.to_json_value(result.plan))
            rows[row.name] = row
    return rows


ROWS = _rows(
    "CREATE STREAM A (ID INT KEY, V STRING) WITH (kafka_topic='a', value_format='JSON', partitions=1);"
    "CREATE STREAM B AS SELECT * FROM A WHERE V = 'x';"
    "CREATE STREAM C AS SELECT * FROM B;"
)


def _db(bootstrap: str, service: str, name: str = "", **kwargs: Any) -> MetastoreDatabase:
    db = MetastoreDatabase(bootstrap, service, internal_url=name or f"local-{uuid.uuid4().hex[:6]}", timeout=20.0, **kwargs)
    db.create_topics()
    return db


def _await_owner(db: MetastoreDatabase, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not (db.owns(SOURCES) and db.owns(TYPES)):
        assert time.monotonic() < deadline, "this server never became the owner"
        time.sleep(0.1)


@pytest.fixture
def service() -> str:
    return f"svc_{uuid.uuid4().hex[:8]}"


def test_sequence_numbers_pack_the_three_positions() -> None:
    assert unpack_sequence(pack_sequence(12345, 67)) == (12345, 67, 0)
    assert unpack_sequence(pack_sequence(12345, 67, 89)) == (12345, 67, 89)
    assert pack_sequence(2, 0) > pack_sequence(1, 5, 7)
    assert pack_sequence(1, 0, 2) > pack_sequence(1, 5, 1)


def test_rows_round_trip_through_their_json_and_the_schema() -> None:
    row = ROWS["B"]
    assert SourceRow.from_json(row.to_json()) == row
    assert row.upstream == ("A",) and row.query_id == "CSAS_B_0"
    assert row.statement_plan()["query"]["sink"] == "B"
    plan = serde.statement_plan_from_json(row.statement_plan())  # loads as a saved plan
    assert plan.command.name == "B"


def test_a_damaged_row_is_refused_naming_the_field() -> None:
    from engine.metastore.database.rows import validate_row

    value = ROWS["A"].to_json()
    value["type"] = "VIEW"
    with pytest.raises(MetastoreError, match="UserDataSources row 'A' is not valid: at type"):
        validate_row(SOURCES, value, "'A'")


def test_changelogs_are_compacted_single_partition_internal_topics(kafka_broker, service) -> None:
    db = _db(kafka_broker.bootstrap_servers, service)
    admin = TopicAdmin(kafka_broker.bootstrap_servers)
    for topic in db.topics.values():
        assert topic.startswith(f"_confluent-ksql-{service}_metastore_")
        assert admin.partition_count(topic) == 1
        assert admin.topic_config(topic)["cleanup.policy"] == "compact"
    db.close()


def test_writes_reach_every_view_and_a_restart_reloads_them(kafka_broker, service) -> None:
    owner = _db(kafka_broker.bootstrap_servers, service)
    changes: list[Change] = []
    owner.start(changes.append)
    _await_owner(owner)
    reader = _db(kafka_broker.bootstrap_servers, service)
    reader.start(join_group=False)
    for name in "ABC":
        sequence = owner.write(Write(SOURCES, name, ROWS[name]))
        reader.wait_for(sequence)  # read your own writes, on another server
    sequence = owner.write(Write(TYPES, "ADDRESS", TypeRow(name="ADDRESS", sql_type="STRUCT<STREET STRING>")))
    reader.wait_for(sequence)
    sequence = owner.write(Write(SOURCES, "C", None))
    reader.wait_for(sequence)
    assert sorted(reader.rows(SOURCES)) == ["A", "B"] and list(reader.rows(TYPES)) == ["ADDRESS"]
    assert reader.rows(SOURCES)["B"] == ROWS["B"]
    owner.wait_for(sequence)
    assert [(c.table, c.key, c.new is None) for c in changes] == [
        (SOURCES, "A", False), (SOURCES, "B", False), (SOURCES, "C", False), (TYPES, "ADDRESS", False),
        (SOURCES, "C", True),
    ]
    assert changes[-1].old == ROWS["C"]
    owner.close()
    reader.close()

    restarted = _db(kafka_broker.bootstrap_servers, service)
    restarted.start(join_group=False)
    restarted.wait_until_caught_up()
    assert sorted(restarted.rows(SOURCES)) == ["A", "B"] and list(restarted.rows(TYPES)) == ["ADDRESS"]
    restarted.close()


def test_integrity_is_enforced_by_the_owner_naming_the_dependents(kafka_broker, service) -> None:
    db = _db(kafka_broker.bootstrap_servers, service)
    db.start()
    _await_owner(db)
    with pytest.raises(MetastoreError, match="its query reads unknown sources: A"):
        db.write(Write(SOURCES, "B", ROWS["B"]))
    for name in "ABC":
        db.write(Write(SOURCES, name, ROWS[name]))
    with pytest.raises(MetastoreError, match=r"Cannot drop A: the queries of these sources read from it: \[B\]"):
        db.write(Write(SOURCES, "A", None))
    with pytest.raises(MetastoreError, match=r"read from it: \[C\]"):
        db.write(Write(SOURCES, "B", None))
    with pytest.raises(MetastoreError, match="A stream with the same name already exists"):
        db.write(Write(SOURCES, "A", ROWS["A"]))
    with pytest.raises(MetastoreError, match="Source NOPE does not exist"):
        db.write(Write(SOURCES, "NOPE", None))
    with pytest.raises(MetastoreError, match="Type T does not exist"):
        db.write(Write(TYPES, "T", None))
    for name in "CBA":
        sequence = db.write(Write(SOURCES, name, None))
    db.wait_for(sequence)  # the end offset may not show the last commit yet: its sequence does
    assert db.rows(SOURCES) == {}
    db.close()


def test_a_retried_write_is_committed_once(kafka_broker, service) -> None:
    db = _db(kafka_broker.bootstrap_servers, service)
    db.start()
    _await_owner(db)
    write = Write(SOURCES, "A", ROWS["A"], request_id="r-1")
    first = db.write(write)
    assert db.write(write) == first  # the answer was lost: the same request id answers again
    db.wait_for(first)  # a read_committed view has it: the commit marker is written, the end offset past it
    assert db.end_offset(SOURCES) == unpack_sequence(first)[0] + 1  # one record and its commit marker
    db.close()


def test_a_non_owner_forwards_and_a_fenced_owner_answers_not_the_owner(kafka_broker, service) -> None:
    servers: dict[str, MetastoreDatabase] = {}

    def forward(url: str, payload: dict[str, Any], timeout: float) -> tuple[int, dict[str, Any]]:
        return servers[url].handle_forwarded(payload)

    first = _db(kafka_broker.bootstrap_servers, service, "http://first", forward=forward)
    servers["http://first"] = first
    first.start()
    _await_owner(first)
    second = _db(kafka_broker.bootstrap_servers, service, "http://second", forward=forward)
    servers["http://second"] = second
    second.start()
    deadline = time.monotonic() + 30
    while first.owner_of(SOURCES) is None or not any(db.owns(SOURCES) for db in (first, second)):
        assert time.monotonic() < deadline, "the group never settled"
        time.sleep(0.2)
    owner = next(db for db in (first, second) if db.owns(SOURCES))
    other = second if owner is first else first
    other.wait_for(other.write(Write(SOURCES, "A", ROWS["A"])))  # forwarded to the owner
    assert "A" in other.rows(SOURCES)
    status, body = other.handle_forwarded(Write(SOURCES, "B", ROWS["B"]).to_json())
    assert status == 409 and body["message"].startswith("not the owner")

    # A zombie: the owner's producer survives while a new producer with its transactional.id inits.
    deadline = time.monotonic() + 30
    while (owner := next((db for db in (first, second) if db.owns(SOURCES)), None)) is None:
        assert time.monotonic() < deadline, "the partition has no owner"
        time.sleep(0.1)
    zombie = owner._owned[SOURCES]
    from confluent_kafka import Producer

    usurper = Producer(client_config(kafka_broker.bootstrap_servers,
                                     **{"transactional.id": f"{service}-{owner.topics[SOURCES]}-0"}))
    usurper.init_transactions(20)
    with pytest.raises(NotOwnerError, match="not the owner"):
        owner.write_as_owner(Write(SOURCES, "B", ROWS["B"]))
    assert owner._owned.get(SOURCES) is not zombie  # it gave the partition's producer up
    assert "B" not in owner.rows(SOURCES)
    for db in (first, second):
        db.close()


def test_concurrent_writers_during_rebalances_lose_and_duplicate_nothing(kafka_broker, service) -> None:
    servers: dict[str, MetastoreDatabase] = {}

    def forward(url: str, payload: dict[str, Any], timeout: float) -> tuple[int, dict[str, Any]]:
        if url not in servers:
            raise ConnectionError(f"{url} is gone")
        return servers[url].handle_forwarded(payload)

    def server(name: str) -> MetastoreDatabase:
        db = _db(kafka_broker.bootstrap_servers, service, name, forward=forward)
        servers[name] = db
        db.start()
        return db

    dbs = [server(f"http://s{i}") for i in range(3)]
    template = ROWS["A"]
    failures: list[str] = []
    sequences: list[int] = []

    def writer(index: int) -> None:
        db = dbs[1 + index % 2]  # s0 only owns (perhaps) and leaves
        for n in range(15):
            name = f"S{index}_{n}"
            row = SourceRow(name=name, kind="STREAM", sql=template.sql, command={**template.command, "name": name})
            try:
                sequences.append(db.write(Write(SOURCES, name, row)))
            except MetastoreError as exc:
                failures.append(f"{name}: {exc}")

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    leaving = servers.pop("http://s0")  # a rebalance in the middle of the burst, then another
    leaving.close()
    extra = server("http://s3")
    for thread in threads:
        thread.join(timeout=300)
    assert failures == []
    expected = {f"S{i}_{n}" for i in range(6) for n in range(15)}
    for db in (dbs[1], dbs[2], extra):
        db.wait_for(max(sequences))
        assert set(db.rows(SOURCES)) == expected  # identical views on every server
    from engine.kafka.consume import read_topic

    records = read_topic(kafka_broker.bootstrap_servers, dbs[1].topics[SOURCES])
    keys = [r.key for r in records]
    assert len(keys) == len(set(keys)) == len(expected)  # no duplicated row, none lost
    for db in servers.values():
        db.close()


_BURST = """
import sys, uuid
from engine.metastore.database import SOURCES, MetastoreDatabase, SourceRow, Write
from tests.engine.metastore.test_database import ROWS, _await_owner
db = MetastoreDatabase(sys.argv[1], sys.argv[2], internal_url="http://burst", timeout=20.0)
db.create_topics()
db.start()
_await_owner(db)
template = ROWS["A"]
print("owner", flush=True)
n = 0
while True:
    name = f"K{n}"
    db.write(Write(SOURCES, name, SourceRow(name=name, kind="STREAM", sql=template.sql,
                                             command={**template.command, "name": name})))
    print(name, flush=True)
    n += 1
"""


def test_kill_9_of_the_owner_during_a_write_burst_leaves_nothing_partial(kafka_broker, service, tmp_path) -> None:
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    burst = subprocess.Popen([sys.executable, "-c", _BURST, kafka_broker.bootstrap_servers, service],
                             cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert burst.stdout is not None
    acknowledged: list[str] = []
    try:
        assert burst.stdout.readline().strip() == "owner"
        while len(acknowledged) < 30:
            acknowledged.append(burst.stdout.readline().strip())
    finally:
        burst.send_signal(signal.SIGKILL)
        burst.wait(timeout=30)
    heir = _db(kafka_broker.bootstrap_servers, service, "http://heir")
    heir.start()
    _await_owner(heir)  # the dead owner's session expires; its open transaction is aborted at init
    heir.wait_until_caught_up()
    survivor = heir.write(Write(SOURCES, "AFTER", SourceRow(
        name="AFTER", kind="STREAM", sql=ROWS["A"].sql, command={**ROWS["A"].command, "name": "AFTER"})))
    reader = _db(kafka_broker.bootstrap_servers, service)
    reader.start(join_group=False)
    reader.wait_for(survivor)
    heir.wait_for(survivor)
    rows = reader.rows(SOURCES)
    assert set(acknowledged) <= set(rows)  # every acknowledged write is there
    assert set(rows) == set(heir.rows(SOURCES))  # identical views
    names = sorted(int(k[1:]) for k in rows if k.startswith("K"))
    assert names == list(range(len(names)))  # no gap, nothing out of order
    from engine.kafka.consume import read_topic

    committed = read_topic(kafka_broker.bootstrap_servers, heir.topics[SOURCES])
    assert len(committed) == len(rows)  # no duplicate, no partial record; the aborted one is invisible
    heir.close()
    reader.close()


def test_an_offset_too_large_for_a_sequence_number_is_refused() -> None:
    with pytest.raises(MetastoreError, match="sequence numbers hold offsets below 65536"):
        pack_sequence(1, 1 << 16)
    with pytest.raises(MetastoreError, match="UserQueries changelog reached offset 262144"):
        pack_sequence(1, 0, 1 << 18)
    with pytest.raises(MetastoreError, match="UserDataSources changelog reached offset 536870912"):
        pack_sequence(1 << 29, 0, 0)


def test_the_largest_sequence_number_is_a_java_long() -> None:
    largest = pack_sequence((1 << 29) - 1, (1 << 16) - 1, (1 << 18) - 1)
    assert largest == (1 << 63) - 1  # every bit used, none past a signed 64-bit integer
    assert unpack_sequence(largest) == ((1 << 29) - 1, (1 << 16) - 1, (1 << 18) - 1)
