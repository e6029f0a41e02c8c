"""Windowed sinks place a record by its key without the window (``streamSinkV5`` /
``tableSinkV5``), as Kafka Streams' WindowedStreamPartitioner places ksqlDB's: all windows of a
key land in one partition, the partition the key alone would get. Older sink versions keep
hashing the whole windowed key."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.data.partitioner import murmur2, partition_for
from engine.data.records import TopicInfo, TopicRecord
from engine.facade.engine import KsqlEngine
from engine.hosting.application import StreamingApplication
from engine.kafka.admin import TopicAdmin
from engine.kafka.consume import read_topic
from engine.kafka.produce import ProducerRecord, RecordProducer
from engine.serde.windowed import decode_time_window_key, encode_time_window_key

# Kafka's own test vectors for Utils.murmur2 (clients' UtilsTest).
KAFKA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

KEYS = ["a", "b", "c", "d", "e", "f"]
WINDOW_STARTS = [0, 1000, 2000]
PARTITIONS = 4

WINDOWED_COUNT = "SELECT K, COUNT(*) AS N FROM S WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY K"


def test_murmur2_gives_kafkas_test_vectors() -> None:
    assert {data: murmur2(data) for data in KAFKA_MURMUR2} == KAFKA_MURMUR2


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=40), partitions=st.integers(1, 64))
def test_partition_for_is_the_java_clients(spark: Any, data: bytes, partitions: int) -> None:
    utils = spark._jvm.org.apache.kafka.common.utils.Utils
    java = utils.toPositive(utils.murmur2(bytearray(data))) % partitions
    assert partition_for(data, partitions) == java


def test_partition_for_refuses_a_topic_without_partitions() -> None:
    with pytest.raises(ValueError, match="at least one partition, not 0"):
        partition_for(b"k", 0)


def _windows_split_by_whole_key_hashing() -> bool:
    """Whether hashing the whole windowed key would put some key's windows in two
    partitions (the data must be able to tell the two placements apart)."""
    return any(
        len({partition_for(encode_time_window_key(key.encode(), start), PARTITIONS) for start in WINDOW_STARTS}) > 1
        for key in KEYS
    )


def test_the_planner_plans_v5_sinks_for_windowed_outputs_only() -> None:
    engine = KsqlEngine({})
    engine.execute_sql(
        "CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);\n"
        f"CREATE TABLE W AS {WINDOWED_COUNT};\n"
        "CREATE TABLE C AS SELECT K, COUNT(*) AS N FROM S GROUP BY K;\n"
        "CREATE STREAM WS (K STRING KEY, V INT) WITH (KAFKA_TOPIC='ws', VALUE_FORMAT='JSON', PARTITIONS=1,"
        " WINDOW_TYPE='TUMBLING', WINDOW_SIZE='1 SECOND');\n"
        "CREATE STREAM OUT AS SELECT * FROM WS;"
    )
    windowed, counts, changes = engine.query_order()
    assert (windowed.root.TYPE, counts.root.TYPE, changes.root.TYPE) == ("tableSinkV5", "tableSinkV3", "streamSinkV5")


def test_a_bounded_run_places_windowed_records_by_their_key_alone() -> None:
    assert _windows_split_by_whole_key_hashing()
    engine = KsqlEngine({})
    engine.create_topic(TopicInfo("s", partitions=PARTITIONS))
    engine.execute_sql(
        "CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');\n"
        f"CREATE TABLE W AS {WINDOWED_COUNT};"
    )
    engine.produce([
        TopicRecord("s", key, {"V": 1}, timestamp=start + 10, partition=i % PARTITIONS)
        for i, (key, start) in enumerate((k, s) for s in WINDOW_STARTS for k in KEYS)
    ])
    written = engine.run()["W"]
    assert len(written) == len(KEYS) * len(WINDOW_STARTS)
    assert {(r.key, r.partition) for r in written} == {(k, partition_for(k.encode(), PARTITIONS)) for k in KEYS}


def test_a_bounded_run_keeps_the_partitions_of_registry_format_keys() -> None:
    # An AVRO key's bytes need a registered schema's id, which bounded runs never register.
    engine = KsqlEngine({})
    engine.create_topic(TopicInfo("s", partitions=PARTITIONS))
    engine.execute_sql(
        "CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='s', KEY_FORMAT='AVRO', VALUE_FORMAT='JSON');\n"
        f"CREATE TABLE W AS {WINDOWED_COUNT};"
    )
    engine.produce([TopicRecord("s", {"K": key}, {"V": 1}, timestamp=10, partition=3) for key in KEYS])
    written = engine.run()["W"]
    assert [r.partition for r in written] == [3] * len(KEYS)


def test_a_windowed_table_on_kafka_writes_each_key_to_its_base_key_partition(
    kafka_broker: Any, tmp_path: Path
) -> None:
    assert _windows_split_by_whole_key_hashing()
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = f"wsrc_{uuid.uuid4().hex[:8]}", f"WOUT_{uuid.uuid4().hex[:8]}"
    TopicAdmin(bootstrap).create_topic(source, PARTITIONS)
    producer = RecordProducer(bootstrap)
    for start in WINDOW_STARTS:
        for key in KEYS:
            producer.send(source, ProducerRecord(key=key.encode(), value=json.dumps({"V": 1}).encode(),
                                                 timestamp=start + 10))
    producer.flush()

    app = StreamingApplication(bootstrap, tmp_path / "state")
    app.load()
    app.submit(f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM S (K STRING KEY, V INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE {sink} WITH (KAFKA_TOPIC='{sink}', PARTITIONS={PARTITIONS}) AS {WINDOWED_COUNT};
    """)
    try:
        app.run_until_caught_up()
    finally:
        app.stop()
    assert [q.root.TYPE for q in app.engine.query_order()] == ["tableSinkV5"]

    records = read_topic(bootstrap, sink)
    placed = {(decode_time_window_key(r.key or b"")[0].decode(), r.partition) for r in records}
    assert len(records) == len(KEYS) * len(WINDOW_STARTS)
    assert placed == {(k, partition_for(k.encode(), PARTITIONS)) for k in KEYS}
