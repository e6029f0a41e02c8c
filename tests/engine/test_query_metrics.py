"""A query's figures from Spark's progress reports, ksqlDB's statistics strings, ``kspark run --metrics-interval``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from engine.hosting.query_metrics import (
    OBSERVATION,
    SOURCE_OBSERVATION,
    QueryFigures,
    QueryMetrics,
    Stat,
    committed_offsets,
    format_stats,
    iso_timestamp,
)


def _progress(batch: int, *, rows: int, produced: int, end: dict[str, dict[str, int]], millis: int = 200,
              state_rows: int = 0, run: str = "run-1") -> dict:
    return {
        "id": "stream-1", "runId": run, "batchId": batch, "numInputRows": rows,
        "durationMs": {"triggerExecution": millis},
        "sources": [{"description": "KafkaV2[Subscribe[t]]", "endOffset": json.dumps(end), "numInputRows": rows}],
        "stateOperators": [{"numRowsTotal": state_rows}],
        "observedMetrics": {OBSERVATION: {"records": produced, "bytes": produced * 10},
                            f"{SOURCE_OBSERVATION}0": {"bytes": rows * 4}, f"{SOURCE_OBSERVATION}1": {"bytes": 1}},
    }


class _Handle:
    id = "stream-1"


def test_progress_reports_fold_into_running_figures_and_a_repeated_report_counts_once() -> None:
    metrics = QueryMetrics()
    metrics.progressed(_progress(0, rows=4, produced=2, end={"t": {"0": 4, "1": 0}}), now=100.0)  # before tracking
    metrics.track("CSAS_X_0", _Handle(), sink_topic="x", source_topics=["t"])
    metrics.progressed(_progress(1, rows=3, produced=3, end={"t": {"0": 5, "1": 2}}, state_rows=7), now=101.0)
    metrics.progressed(_progress(1, rows=3, produced=3, end={"t": {"0": 5, "1": 2}}, state_rows=7), now=101.0)
    figures = metrics.figures("CSAS_X_0")
    assert figures is not None
    assert (figures.batches, figures.records_consumed, figures.records_produced, figures.bytes_produced) == (2, 7, 5, 50)
    assert figures.bytes_consumed == 7 * 4 + 2
    assert figures.rows_in_state == 7 and figures.last_batch_seconds == pytest.approx(0.2)
    assert figures.committed == {"t": {0: 5, 1: 2}}
    lag = figures.lag({("t", 0): 9, ("t", 1): 2, ("other", 0): 5})
    assert [(p.partition, p.current_offset, p.end_offset, p.lag) for p in lag] == [(0, 5, 9, 4), (1, 2, 2, 0)]
    report = figures.to_json({("t", 0): 9, ("t", 1): 2}, now=101.0)
    assert report["totalLag"] == 4 and report["recordsConsumed"] == 7 and report["processingErrors"] == 0
    assert report["partitions"][0] == {"topic": "t", "partition": 0, "currentOffset": 5, "endOffset": 9, "lag": 4}


def _checkpoint(root: Path, offsets: dict[int, list[str]], commits: list[int]) -> Path:
    """A checkpoint's offset and commit logs as Spark writes them (a version line, the batch's
    metadata, one line per source)."""
    for batch, sources in offsets.items():
        (root / "offsets").mkdir(parents=True, exist_ok=True)
        (root / "offsets" / str(batch)).write_text("\n".join(["v1", '{"batchWatermarkMs":0}', *sources]))
    (root / "commits").mkdir(parents=True, exist_ok=True)
    for batch in commits:
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    (root / "commits" / ".1.tmp").write_text("")  # a write a killed process left unfinished
    return root


def test_a_restarted_query_lags_from_its_last_committed_batch_until_its_first_report(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path / "cp", {0: ['{"t":{"0":3,"1":1}}', "-"],
                                               1: ['{"t":{"0":8,"1":2}}', '{"u":{"0":5}}'],
                                               2: ['{"t":{"0":9,"1":2}}', '{"u":{"0":6}}']}, commits=[0, 1])
    assert committed_offsets(checkpoint) == {"t": {0: 8, 1: 2}, "u": {0: 5}}  # batch 2 never committed
    metrics = QueryMetrics()
    metrics.track("CSAS_X_0", _Handle(), sink_topic="x", source_topics=["t", "u"], checkpoint=checkpoint)
    figures = metrics.figures("CSAS_X_0")
    assert figures is not None
    report = figures.to_json({("t", 0): 10, ("t", 1): 2, ("u", 0): 5}, now=1.0)
    assert report["totalLag"] == 2
    assert [(p["topic"], p["partition"], p["currentOffset"]) for p in report["partitions"]] == [
        ("t", 0, 8), ("t", 1, 2), ("u", 0, 5)]


@pytest.mark.parametrize("layout", ["missing", "no commit", "not kafka offsets"])
def test_a_checkpoint_without_committed_kafka_offsets_gives_none(tmp_path: Path, layout: str) -> None:
    if layout == "no commit":
        _checkpoint(tmp_path, {0: ['{"t":{"0":3}}']}, commits=[])
    elif layout == "not kafka offsets":
        _checkpoint(tmp_path, {0: ["12", "{not json", '["a"]']}, commits=[0])
    assert committed_offsets(tmp_path / ("missing" if layout == "missing" else "")) == {}


def test_saturation_is_the_busy_share_of_the_last_minute() -> None:
    figures = QueryFigures("Q", "x", tracked_at=0.0)
    for second in range(10, 70, 10):
        figures.add(_progress(second, rows=1, produced=0, end={}, millis=5000), now=float(second))
    assert figures.saturation(now=60.0) == pytest.approx(30.0 / 60.0)
    assert figures.saturation(now=200.0) == 0.0  # nothing ran in the last minute
    assert figures.busy_seconds == pytest.approx(30.0)


def test_statistics_read_as_ksqldb_formats_them() -> None:
    stats = [Stat("consumer-messages-per-sec", 1.5, 1_700_000_000_120), Stat("consumer-total-messages", 6, 1)]
    text = format_stats(stats, "last-message")
    assert text == ("consumer-messages-per-sec:      1.50 consumer-total-messages:         6 "
                    "    last-message: 2023-11-14T22:13:20.12Z")
    assert format_stats([], "last-failed") == ""
    assert format_stats([Stat("total-messages", 0, 0)], "last-message").endswith("last-message:       n/a")
    assert iso_timestamp(1_700_000_000_000) == "2023-11-14T22:13:20Z"


def test_processing_log_entries_count_for_their_query_and_topic() -> None:
    metrics = QueryMetrics()
    metrics.track("CSAS_X_0", _Handle(), sink_topic="x", source_topics=["t"])
    metrics.logged(json.dumps({"logger": "processing.CSAS_X_0.KsqlTopic.Source", "time": 5000,
                               "message": {"type": 0, "deserializationError": {"topic": "t"}}}).encode())
    metrics.logged(b"not json")
    figures = metrics.figures("CSAS_X_0")
    assert figures is not None and figures.errors == 1 and figures.last_error_ms == 5000
    [failed, _] = metrics.topic_error_statistics("t", now=10.0)
    assert (failed.name, failed.value, failed.timestamp) == ("consumer-failed-messages", 1, 5000)
    assert metrics.topic_error_statistics("x") == []


@pytest.mark.long
def test_kspark_run_writes_each_querys_figures_as_json_lines(kafka_broker, tmp_path: Path, monkeypatch) -> None:
    from engine.cli import main
    from engine.kafka.admin import TopicAdmin
    from engine.kafka.produce import ProducerRecord, produce

    monkeypatch.chdir(tmp_path)
    topic = f"runm_{uuid.uuid4().hex[:8]}"
    TopicAdmin(kafka_broker.bootstrap_servers).create_topic(topic, 1)
    produce(kafka_broker.bootstrap_servers, topic,
            [ProducerRecord(key=b"k", value=json.dumps({"V": i}).encode()) for i in range(4)], timeout=60)
    sql = tmp_path / "q.sql"
    sql.write_text(f"CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');\n"
                   "CREATE STREAM T AS SELECT ID, V FROM S WHERE V > 0;\n")
    lines = tmp_path / "metrics.jsonl"
    code = main(["run", str(sql), "--bootstrap-servers", kafka_broker.bootstrap_servers, "--state-dir",
                 str(tmp_path / "state"), "--property", "auto.offset.reset=earliest", "--until-caught-up",
                 "--metrics-interval", "0.5", "--metrics-file", str(lines)])
    assert code == 0
    reports = [json.loads(line) for line in lines.read_text().splitlines()]
    assert reports and {r["queryId"] for r in reports} == {"CSAS_T_0"}
    last = reports[-1]
    assert last["recordsConsumed"] == 4 and last["recordsProduced"] == 3 and last["totalLag"] == 0
    assert last["partitions"] == [{"topic": topic, "partition": 0, "currentOffset": 4, "endOffset": 4, "lag": 0}]


def test_a_metrics_interval_must_be_a_positive_number(capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    with pytest.raises(SystemExit):
        main(["run", "x.sql", "--metrics-interval", "0"])
    assert "argument --metrics-interval: must be more than 0 seconds, not 0" in capsys.readouterr().err
