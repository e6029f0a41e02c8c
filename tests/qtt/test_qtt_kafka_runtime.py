"""The QTT harness on the streaming runtime: topic renaming, file-order groups, output order,
input bytes, and a representative subset of the project's cases on a real broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.data.records import Header, TopicRecord, Window
from engine.errors import UnsupportedFeatureError
from engine.facade.api import FormatDescription, SourceInfo
from engine.kafka import ConsumedRecord
from engine.plan.schema import LogicalSchema
from engine.serde.windowed import decode_session_window_key, decode_time_window_key
from qtt import cli
from qtt.conformance import stratified_sample
from qtt.kafka_runtime import (
    SourceSerdes,
    TopicPrefix,
    file_order_groups,
    order_like_expected,
    plain_bytes,
)
from qtt.loader import QttFile, load_paths
from qtt.runner import run_case

CASES = Path(__file__).resolve().parents[1] / "qtt_cases"
REGISTRY_CASES = Path(__file__).resolve().parents[1] / "qtt_registry_cases"

# ---------------------------------------------------------------------------- topic names


def test_prefix_renames_every_kafka_topic_property_whatever_its_spelling() -> None:
    names = TopicPrefix("qtt-ab-7-")
    sql = (
        "CREATE STREAM A (X INT) WITH (kafka_topic='in', value_format='JSON');\n"
        "CREATE STREAM B WITH (KAFKA_TOPIC = 'it''s') AS SELECT * FROM A;"
    )
    assert names.statement(sql) == (
        "CREATE STREAM A (X INT) WITH (kafka_topic='qtt-ab-7-in', value_format='JSON');\n"
        "CREATE STREAM B WITH (KAFKA_TOPIC = 'qtt-ab-7-it''s') AS SELECT * FROM A;"
    )


def test_prefix_maps_names_and_messages_back() -> None:
    names = TopicPrefix("qtt-ab-7-")
    assert names.topic("orders") == "qtt-ab-7-orders"
    assert names.original("qtt-ab-7-orders") == "orders"
    assert names.original("qtt-ab-8-orders") is None
    assert names.text("Kafka topic does not exist: qtt-ab-7-orders") == "Kafka topic does not exist: orders"


def test_prefix_goes_before_the_cases_own_output_topic_prefix() -> None:
    names = TopicPrefix("p-")
    assert names.properties({"ksql.output.topic.name.prefix": "some-"}) == {
        "ksql.output.topic.name.prefix": "p-some-",
        "auto.offset.reset": "earliest",
    }
    assert names.properties({})["ksql.output.topic.name.prefix"] == "p-"


# ---------------------------------------------------------------------------- groups


def _rec(topic: str, ts: int | None, key: Any = None, value: Any = None) -> TopicRecord:
    return TopicRecord(topic, key, value, ts)


def _shape(groups: list[list[TopicRecord]]) -> list[list[tuple[str, int | None]]]:
    return [[(r.topic, r.timestamp) for r in g] for g in groups]


def test_one_topic_is_one_group_even_when_time_goes_back() -> None:
    records = [_rec("a", 5), _rec("a", 1), _rec("a", 3)]
    assert _shape(file_order_groups(records)) == [[("a", 5), ("a", 1), ("a", 3)]]


def test_topics_interleaved_forward_in_time_stay_one_group() -> None:
    records = [_rec("a", 1), _rec("b", 2), _rec("a", 3), _rec("b", 4)]
    assert len(file_order_groups(records)) == 1


def test_a_record_back_in_time_on_another_topic_starts_a_group() -> None:
    records = [_rec("a", 10), _rec("b", 5), _rec("b", 20), _rec("a", 15)]
    assert _shape(file_order_groups(records)) == [[("a", 10)], [("b", 5), ("b", 20)], [("a", 15)]]


def test_a_tie_across_topics_starts_a_group_and_missing_timestamps_are_zero() -> None:
    records = [_rec("a", None), _rec("b", 0), _rec("b", 1)]
    assert _shape(file_order_groups(records)) == [[("a", None)], [("b", 0), ("b", 1)]]


def test_a_group_merges_by_running_maximum_per_partition() -> None:
    # b's running maximum stays 9 after its record at 2, so a's record at 5 sorts before it.
    records = [_rec("b", 9), _rec("a", 10), _rec("b", 2), _rec("a", 5)]
    assert _shape(file_order_groups(records)) == [[("b", 9), ("a", 10)], [("b", 2), ("a", 5)]]


def test_no_records_no_groups() -> None:
    assert file_order_groups([]) == []


# ---------------------------------------------------------------------------- output order


def test_records_of_different_keys_take_the_expected_order() -> None:
    expected = [_rec("o", 1, "x", 1), _rec("o", 2, "y", 1), _rec("o", 3, "x", 2)]
    actual = [_rec("o", 2, "y", 1), _rec("o", 1, "x", 1), _rec("o", 3, "x", 2)]
    assert order_like_expected(expected, actual) == expected


def test_records_of_one_key_keep_their_order() -> None:
    expected = [_rec("o", 1, "x", 1), _rec("o", 2, "x", 2)]
    actual = [_rec("o", 2, "x", 2), _rec("o", 1, "x", 1)]
    assert order_like_expected(expected, actual) == actual


def test_keys_match_by_value_and_windows_count_as_key() -> None:
    w1, w2 = Window(0, 10), Window(10, 20)
    expected = [
        TopicRecord("o", {"id": 1}, 1, window=w2),
        TopicRecord("o", {"id": 1}, 2, window=w1),
    ]
    actual = [
        TopicRecord("o", {"ID": 1.0}, 2, window=w1),
        TopicRecord("o", {"ID": 1.0}, 1, window=w2),
    ]
    assert order_like_expected(expected, actual) == [actual[1], actual[0]]


def test_unexpected_records_stay_at_the_end() -> None:
    expected = [_rec("o", 1, "x", 1)]
    actual = [_rec("o", 5, "z", 9), _rec("o", 1, "x", 1), _rec("o", 6, "x", 3)]
    assert order_like_expected(expected, actual) == [actual[1], actual[0], actual[2]]


# ---------------------------------------------------------------------------- bytes


def _source(schema: str, key: str = "KAFKA", value: str = "JSON", **window: Any) -> SourceInfo:
    return SourceInfo(
        name="S",
        kind="TABLE",
        schema=LogicalSchema.parse(schema),
        topic="t",
        key_format=FormatDescription(key, {}, (), window.get("type"), window.get("size")),
        value_format=FormatDescription(value),
    )


def test_inputs_encode_in_the_sources_formats() -> None:
    serdes = SourceSerdes.of(_source("ID INT KEY, NAME STRING"))
    key, value = serdes.encode(TopicRecord("t", 7, {"NAME": "x"}, 0))
    assert key == (7).to_bytes(4, "big")
    assert json.loads(value or b"") == {"NAME": "x"}


def test_windowed_input_keys_are_kafka_streams_bytes() -> None:
    serdes = SourceSerdes.of(_source("ID STRING KEY, N INT", key="KAFKA", type="SESSION"))
    key, _ = serdes.encode(TopicRecord("t", "a", {"N": 1}, 0, window=Window(5, 9, "SESSION")))
    assert decode_session_window_key(key or b"") == (b"a", 5, 9)
    key, _ = serdes.encode(TopicRecord("t", "a", {"N": 1}, 0, window=Window(5, 15, "TIME")))
    assert decode_time_window_key(key or b"") == (b"a", 5)


def test_outputs_decode_windowed_keys_with_the_window_size() -> None:
    serdes = SourceSerdes.of(_source("ID STRING KEY, N BIGINT", type="TUMBLING", size=10))
    consumed = ConsumedRecord(
        topic="t",
        partition=0,
        offset=3,
        timestamp=0,
        key=b"a" + (20).to_bytes(8, "big"),
        value=b'{"N":2}',
        headers=(Header("h", b"v"),),
    )
    assert serdes.decode("OUT", consumed) == TopicRecord(
        "OUT", "a", {"N": 2}, 0, 0, Window(20, 30, "TIME"), (Header("h", b"v"),)
    )


def test_values_a_format_cannot_hold_go_as_plain_text() -> None:
    serdes = SourceSerdes.of(_source("ID INT KEY, N INT"))
    key, _ = serdes.encode(TopicRecord("t", "not an int", {"N": 1}, 0))
    assert key == b"not an int"
    assert plain_bytes({"a": [1, None]}) == b'{"a":[1,null]}'


def test_binary_formats_the_engine_cannot_write_are_unsupported() -> None:
    serdes = SourceSerdes.of(_source("ID INT KEY, N INT", value="AVRO"))
    with pytest.raises(UnsupportedFeatureError):
        serdes.encode(TopicRecord("t", 1, {"N": 1}, 0))


def test_with_a_registry_avro_inputs_go_in_confluent_framing_under_the_topic_subject() -> None:
    import uuid

    from engine.serde.registry import registry_client, split_header

    url = f"mock://{uuid.uuid4().hex}"
    serdes = SourceSerdes.of(_source("ID STRING KEY, N INT", key="AVRO", value="AVRO"), url)
    key, value = serdes.encode(TopicRecord("t", "a", {"N": 1}, 0))
    assert split_header(value or b"", "value")[0] == registry_client(url).get_latest_version("t-value").schema_id
    assert sorted(registry_client(url).get_subjects()) == ["t-key", "t-value"]
    consumed = ConsumedRecord(topic="t", partition=0, offset=0, timestamp=0, key=key, value=value, headers=())
    assert serdes.decode("OUT", consumed) == TopicRecord("OUT", "a", {"N": 1}, 0, 0)


# ---------------------------------------------------------------------------- sampling


def test_a_stratified_sample_draws_from_every_file_in_proportion() -> None:
    files = load_paths([CASES])
    total = sum(len(f.cases) for f in files)
    size = sum(1 for f in files if f.cases) + 10  # one per file, and ten shared in proportion
    sample = stratified_sample(files, size)
    assert sum(len(f.cases) for f in sample) == size
    assert {f.display_name for f in sample} == {f.display_name for f in files if f.cases}
    biggest = max(files, key=lambda f: len(f.cases))
    drawn = next(f for f in sample if f.display_name == biggest.display_name)
    # Every file gets one case first; the rest is shared in proportion.
    rest = size - sum(1 for f in files if f.cases)
    assert len(drawn.cases) >= 1 + rest * len(biggest.cases) // total
    assert stratified_sample(files, size) == sample  # the same sample every time


def test_a_sample_larger_than_the_corpus_is_the_corpus() -> None:
    files = load_paths([CASES])
    sample = stratified_sample(files, 10_000)
    assert [c.id for f in sample for c in f.cases] == [c.id for f in files for c in f.cases]
    assert all(isinstance(f, QttFile) for f in sample)


# ---------------------------------------------------------------------------- command line


def test_bootstrap_servers_need_the_kafka_runtime(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["run", str(CASES), "--bootstrap-servers", "127.0.0.1:1"]) == 2
    assert "--bootstrap-servers needs --runtime kafka" in capsys.readouterr().err


def test_a_property_must_be_key_equals_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["conformance", str(CASES), "--property", "kspark.native.steps"]) == 2
    assert "--property 'kspark.native.steps' is not KEY=VALUE" in capsys.readouterr().err


def test_properties_go_over_the_cases_own() -> None:
    seen: list[dict[str, Any]] = []
    factory_for = cli._with_properties(lambda _case: seen.append, {"kspark.native.steps": "false", "b": "2"})
    factory_for(None)({"kspark.native.steps": "true", "a": "1"})  # type: ignore[arg-type]
    assert seen == [{"kspark.native.steps": "false", "a": "1", "b": "2"}]


def test_an_unreachable_broker_stops_the_run_with_one_line(capsys: pytest.CaptureFixture[str], spark: Any) -> None:
    argv = ["conformance", str(CASES), "--runtime", "kafka", "--bootstrap-servers", "127.0.0.1:1"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    # First, before a schema registry is fetched (on a new machine) or started for the run.
    assert err.startswith("qtt: Cannot reach the Kafka broker at 127.0.0.1:1"), err
    # The session running before the run is not the run's to stop.
    assert spark.range(3).count() == 3


def test_the_report_records_the_runtime_and_the_sample(tmp_path: Path) -> None:
    # Cases rejected at planning: no Spark job runs.
    report = tmp_path / "report.json"
    argv = ["conformance", str(CASES), "-k", "rejected", "--sample", "3", "--report", str(report)]
    assert cli.main([*argv, "--no-progress", "--top", "0"]) == 0
    written = json.loads(report.read_text())
    assert written["runtime"] == "bounded"
    assert written["sample"]["size"] == 3 and written["sample"]["of"] > 3
    assert written["totals"]["total"] == 3


def _report(runtime: str, statuses: dict[str, tuple[str, str]]) -> dict[str, Any]:
    return {
        "runtime": runtime,
        "cases": [
            {"file": "f.json", "name": n, "status": s, "reason": r}
            for n, (s, r) in statuses.items()
        ],
    }


def _compare(tmp_path: Path, first: dict[str, Any], second: dict[str, Any]) -> int:
    """``qtt compare`` of the two reports, written to files."""
    for name, report in (("1.json", first), ("2.json", second)):
        (tmp_path / name).write_text(json.dumps(report))
    return cli.main(["compare", str(tmp_path / "1.json"), str(tmp_path / "2.json")])


def test_compare_lists_what_the_second_runtime_loses_grouped_by_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bounded = _report(
        "bounded",
        {"a": ("passed", ""), "b": ("passed", ""), "c": ("passed", ""), "d": ("failed", "x")},
    )
    kafka = _report(
        "kafka",
        {
            "a": ("unsupported", "Unsupported feature: binary AVRO records."),
            "b": ("failed", "Topic 'OUT' record 1 of 2: value.N expected 1 but was 2."),
            "c": ("failed", "Topic 'X' record 2 of 3: value.M expected 'q' but was 'r'."),
            "d": ("passed", ""),
            "only-here": ("failed", "sampled out of the other"),
        },
    )
    assert _compare(tmp_path, bounded, kafka) == 0
    out = capsys.readouterr().out
    assert "passed on bounded but not on kafka: 3; the reverse: 1" in out
    assert "    2  Topic '…' record N of N: value differs" in out
    assert "    1  Unsupported feature: binary AVRO records." in out
    assert "only-here" not in out


def test_compare_counts_strictly_an_expected_error_with_another_message_did_not_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _report("before", {"e": ("passed", "")})
    after = _report("after", {"e": ("passed", "KsqlException raised with another message: ...")})
    after["cases"][0]["message_matched"] = False
    assert _compare(tmp_path, before, after) == 0
    out = capsys.readouterr().out
    assert "passed on before but not on after: 1; the reverse: 0" in out
    assert "raised with another message" in out


# ---------------------------------------------------------------------------- on a broker

# One case per kind of query: stateless with pseudo columns, a table aggregation with
# retractions, EMIT FINAL, windowed keys read back in, an outer join closing by stream time,
# a chain of queries, two inputs merged in file order, undecodable records, a sink timestamp
# column, an expected error, and a GROUP BY planned with the native step versions (whose
# aggregate runs the per-key state handler on a streaming DataFrame).
REPRESENTATIVE = (
    "projection - pseudo columns rowtime rowpartition rowoffset",
    "aggregates - aggregating a table retracts the old row before adding the new one",
    "aggregates - native group by and running aggregate turn HAVING misses into deletes",
    "windows - emit final emits each window once when stream time passes its end plus grace",
    "windowed - windowed table source projects each windowed row",
    "joins - stream stream full join with grace emits unmatched records when their window closes",
    "queries - chained queries read each other's output",
    "queries - insert into merges two streams in input order",
    "formats - records that cannot be deserialised are skipped",
    "timestamps - sink timestamp from another column",
    "aggregates - a non-aggregated column outside GROUP BY is an error",
)


def _run_on_kafka(
    bootstrap_servers: str, spark: Any, ids: tuple[str, ...], registry_url: str, cases_dir: Path = CASES
) -> tuple[list[Any], list[str]]:
    from qtt.kafka_runtime import KafkaHarness

    cases = {c.id: c for f in load_paths([cases_dir]) for c in f.cases}
    with KafkaHarness.open(bootstrap_servers, spark=spark, registry_url=registry_url) as harness:
        results = [
            run_case(cases[i], strict=True, engine_factory=harness.engine_factory(cases[i]))
            for i in ids
        ]
        prefix = f"qtt-{harness.run_id}-"
        leftover = [n for n in harness.admin.list_topics() if n.startswith(prefix)]
    return results, leftover


@pytest.mark.long
def test_representative_project_cases_pass_on_kafka(kafka_broker: Any, schema_registry: Any, spark: Any) -> None:
    results, leftover = _run_on_kafka(kafka_broker.bootstrap_servers, spark, REPRESENTATIVE, schema_registry.url)
    assert [f"{r.case_id}: {r.reason}" for r in results if not r.passed] == []
    assert leftover == []  # every case's topics are gone when it ends


def test_header_columns_reach_the_sink_on_kafka(kafka_broker: Any, schema_registry: Any, spark: Any) -> None:
    results, _ = _run_on_kafka(kafka_broker.bootstrap_servers, spark, ("ddl - headers columns",), schema_registry.url)
    assert results[0].passed, results[0].reason


def test_registry_format_cases_pass_on_kafka_through_the_real_registry(
    kafka_broker: Any, schema_registry: Any, spark: Any
) -> None:
    from engine.serde.registry import registry_client

    ids = ("registry - avro key and value through the registry", "registry - json_sr value through the registry",
           "registry - protobuf key and value through the registry",
           "registry - protobuf_nosr value keeps nulls with the optional representation")
    results, _ = _run_on_kafka(kafka_broker.bootstrap_servers, spark, ids, schema_registry.url, REGISTRY_CASES)
    assert [f"{r.case_id}: {r.reason}" for r in results if not r.passed] == []
    subjects = registry_client(schema_registry.url).get_subjects()
    for suffix in ("-orders-key", "-orders-value", "-OUT-value", "-readings-value", "-MAXES-value",
                   "-parts-key", "-parts-value", "-CHEAP-key", "-CHEAP-value"):
        assert any(s.startswith("qtt-") and s.endswith(suffix) for s in subjects), (suffix, subjects)


def test_registry_cases_pass_on_the_bounded_runtime() -> None:
    results = [run_case(c, strict=True) for f in load_paths([REGISTRY_CASES]) for c in f.cases]
    assert len(results) == 4
    assert [f"{r.case_id}: {r.reason}" for r in results if not r.passed] == []
