"""``kspark query migrate`` on a broker: queries planned with the aggregate versions before
headers were forwarded run, input arrives, the queries are migrated to the current versions,
more input arrives; the output (read_committed) is that of one uninterrupted run on the
current versions, but for the headers of the records written before the migration."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.data.records import Header
from engine.hosting.application import STATEMENTS_FILE, StreamingApplication
from engine.hosting.migrate import migrate_state_dir
from engine.kafka.admin import TopicAdmin
from engine.kafka.consume import read_topic
from engine.kafka.produce import ProducerRecord, RecordProducer
from engine.plan import serde
from engine.plan.steps import walk_steps
from tests.engine.runtime.kafka_io import run_until_caught_up, unique

pytestmark = [pytest.mark.usefixtures("spark"), pytest.mark.system]

# Older version -> the one the planner plans today, for the three migrated pairs.
PAIRS = {
    "streamAggregateV4": "streamAggregateV6",
    "streamWindowedAggregateV1": "streamWindowedAggregateV2",
    "tableAggregateV2": "tableAggregateV4",
    "streamAggregateV5": "streamAggregateV7",  # level 2 of the native compiler (QTY / 2)
    "tableAggregateV3": "tableAggregateV5",
}
QUERIES = ("CTAS_PER_ITEM_0", "CTAS_PER_WINDOW_1", "CTAS_LATEST_PER_ITEM_2", "CTAS_HALVES_3", "CTAS_LATEST_HALVES_4")


@pytest.fixture
def plans_older_versions(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """While active, the planner plans the aggregate versions before headers were forwarded
    (the builders registered first, against the real classes)."""
    from engine.builders.walker import _load_builders
    from engine.plan import steps_aggregate, steps_native

    _load_builders()
    monkeypatch.setattr(steps_native, "StreamAggregateV6", steps_native.StreamAggregateV4)
    monkeypatch.setattr(steps_native, "TableAggregateV4", steps_native.TableAggregateV2)
    monkeypatch.setattr(steps_native, "StreamAggregateV7", steps_native.StreamAggregateV5)
    monkeypatch.setattr(steps_native, "TableAggregateV5", steps_native.TableAggregateV3)
    monkeypatch.setattr(steps_aggregate, "StreamWindowedAggregateV2", steps_aggregate.StreamWindowedAggregate)
    return monkeypatch


def _produce(bootstrap: str, topic: str, first: int, count: int) -> None:
    producer = RecordProducer(bootstrap)
    for i in range(first, first + count):
        value = {"ITEM": f"item{i % 5}", "QTY": i % 7}
        producer.send(topic, ProducerRecord(key=f"o{i % 40}".encode(), value=json.dumps(value).encode(),
                                            timestamp=1_000 + 997 * i, headers=(Header("h", str(i).encode()),)))
    producer.flush()


def _statements(source: str, sinks: dict[str, str]) -> str:
    return f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE LATEST (ID STRING PRIMARY KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sinks['PER_ITEM']}') AS
            SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM ORDERS GROUP BY ITEM;
        CREATE TABLE PER_WINDOW WITH (KAFKA_TOPIC='{sinks['PER_WINDOW']}') AS
            SELECT ITEM, COUNT(*) AS N, MAX(QTY) AS TOP FROM ORDERS WINDOW TUMBLING (SIZE 20 SECONDS) GROUP BY ITEM;
        CREATE TABLE LATEST_PER_ITEM WITH (KAFKA_TOPIC='{sinks['LATEST_PER_ITEM']}') AS
            SELECT ITEM, COUNT(*) AS N, SUM(QTY) AS TOTAL FROM LATEST GROUP BY ITEM;
        CREATE TABLE HALVES WITH (KAFKA_TOPIC='{sinks['HALVES']}') AS
            SELECT ITEM, SUM(QTY / 2) AS HALF FROM ORDERS GROUP BY ITEM;
        CREATE TABLE LATEST_HALVES WITH (KAFKA_TOPIC='{sinks['LATEST_HALVES']}') AS
            SELECT ITEM, SUM(QTY / 2) AS HALF FROM LATEST GROUP BY ITEM;
    """


def _aggregate_types(state_dir: Path) -> set[str]:
    saved = json.loads((state_dir / STATEMENTS_FILE).read_text(encoding="utf-8"))
    types = set()
    for entry in saved:
        plan = serde.statement_plan_from_json(entry["plan"]) if entry["plan"] is not None else None
        if plan is not None and plan.query is not None:
            types |= {s.TYPE for s in walk_steps(plan.query.root) if "ggregate" in s.TYPE}
    return types


def _records(bootstrap: str, topic: str) -> dict[tuple[int, bytes | None], list[tuple[Any, ...]]]:
    """Each key's records in offset order (a key's updates are ordered; two keys written by
    two tasks to one partition are not ordered with each other)."""
    out: dict[tuple[int, bytes | None], list[tuple[Any, ...]]] = {}
    for r in read_topic(bootstrap, topic):
        out.setdefault((r.partition, r.key), []).append((r.value, r.timestamp, r.headers))
    return out


def test_migrated_aggregates_carry_their_state_and_offsets_to_the_current_versions(
    kafka_broker: Any, tmp_path: Path, plans_older_versions: pytest.MonkeyPatch
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    admin = TopicAdmin(bootstrap)
    source = unique("orders")
    admin.create_topic(source, 2)
    migrated = {name: unique(name) for name in ("PER_ITEM", "PER_WINDOW", "LATEST_PER_ITEM", "HALVES", "LATEST_HALVES")}
    reference = {name: unique(name) for name in migrated}
    _produce(bootstrap, source, 0, 300)

    # On the older versions: the first input.
    state = tmp_path / "migrated"
    sql = _statements(source, migrated)
    run_until_caught_up(bootstrap, state, sql)
    assert _aggregate_types(state) == set(PAIRS)
    before = {name: len(read_topic(bootstrap, topic)) for name, topic in migrated.items()}

    # The engine of today plans the current versions; the stopped queries are migrated.
    plans_older_versions.undo()
    lines = [migrate_state_dir(bootstrap, state, query_id) for query_id in QUERIES]
    # The state read back with Spark's state data source: one MapState entry per item.
    assert lines[0] == ("Migrated CTAS_PER_ITEM_0: streamAggregateV4 -> streamAggregateV6; state kept: "
                        "operator 0 groups (5 entries).")
    assert "streamWindowedAggregateV1 -> streamWindowedAggregateV2" in lines[1]
    assert "tableAggregateV2 -> tableAggregateV4" in lines[2]
    assert "streamAggregateV5 -> streamAggregateV7" in lines[3]
    assert "tableAggregateV3 -> tableAggregateV5" in lines[4]
    assert _aggregate_types(state) == set(PAIRS.values())
    assert migrate_state_dir(bootstrap, state, "CTAS_PER_ITEM_0") == (
        "Query CTAS_PER_ITEM_0 runs on the current versions of its stateful steps: nothing to migrate."
    )

    # More input, read by the migrated queries from where the old ones stood.
    _produce(bootstrap, source, 300, 300)
    run_until_caught_up(bootstrap, state, sql)

    # One uninterrupted run on the current versions over the same input.
    run_until_caught_up(bootstrap, tmp_path / "reference", _statements(source, reference))
    assert _aggregate_types(tmp_path / "reference") == set(PAIRS.values())

    for name in migrated:
        got, want = _records(bootstrap, migrated[name]), _records(bootstrap, reference[name])
        assert got.keys() == want.keys(), name
        total = sum(len(v) for v in got.values())
        assert total == sum(len(v) for v in want.values()) > before[name] > 0, name  # none lost or repeated
        for key, records in got.items():
            # Exact, but for the headers the older versions did not forward.
            assert [r[:2] for r in records] == [r[:2] for r in want[key]], (name, key)
            for g, w in zip(records, want[key], strict=True):
                assert g == w or g[2] == (), (name, key, g, w)
        assert sum(1 for records in got.values() for r in records if r[2] == ()) == before[name], name


def test_a_refused_pair_is_named_and_leaves_the_saved_plan_as_it_was(
    kafka_broker: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from engine.builders.walker import _load_builders
    from engine.cli import main
    from engine.plan import steps_native

    bootstrap = kafka_broker.bootstrap_servers
    source, sink = unique("orders"), unique("PER_ITEM")
    TopicAdmin(bootstrap).create_topic(source, 1)
    _load_builders()
    monkeypatch.setattr(steps_native, "StreamAggregateV6", steps_native.StreamAggregateV3)
    app = StreamingApplication(bootstrap, tmp_path / "state")
    app.submit(f"""
        CREATE STREAM ORDERS (ID STRING KEY, ITEM STRING, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE PER_ITEM WITH (KAFKA_TOPIC='{sink}') AS SELECT ITEM, COUNT(*) AS N FROM ORDERS GROUP BY ITEM;
    """)
    app.stop()
    monkeypatch.undo()
    saved = (tmp_path / "state" / STATEMENTS_FILE).read_text(encoding="utf-8")

    code = main(["query", "migrate", "CTAS_PER_ITEM_0", "--state-dir", str(tmp_path / "state"),
                 "--bootstrap-servers", bootstrap])
    assert code == 1
    assert capsys.readouterr().err == (
        "kspark: ExecutionError: Cannot migrate streamAggregateV3 -> streamAggregateV6: its running aggregates are "
        "grouped by key in Spark's state store, the current version's by task.\n"
    )
    assert (tmp_path / "state" / STATEMENTS_FILE).read_text(encoding="utf-8") == saved
    code = main(["query", "migrate", "CTAS_NONE_0", "--state-dir", str(tmp_path / "state"),
                 "--bootstrap-servers", bootstrap])
    assert code == 1
    assert capsys.readouterr().err == (
        f"kspark: ExecutionError: Query CTAS_NONE_0 does not exist in the state dir {tmp_path / 'state'} "
        "(queries: CTAS_PER_ITEM_0).\n"
    )
