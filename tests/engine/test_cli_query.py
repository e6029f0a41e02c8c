"""``kspark query``: push queries, PRINT and INSERT VALUES on a real broker; one-line errors."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from engine.cli import main
from engine.hosting.application import StreamingApplication
from engine.kafka import ProducerRecord, TopicAdmin, produce, read_topic


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _query(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], list[str]]:
    code = main(["query", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err.splitlines()


def _one_error(err: list[str], start: str) -> str:
    assert len(err) == 1, err
    assert err[0].startswith(start), err[0]
    return err[0]


# ---------------------------------------------------------------------- errors


def test_a_parse_error_is_one_line_with_line_and_column(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _query(capsys, "--bootstrap-servers", "127.0.0.1:1", "SELECT * FROM S EMIT CHANGES;\nSELEC 1;")
    assert code == 1 and out == []
    _one_error(err, "kspark: ParseError: line 2:1: ")


def test_an_unreachable_broker_is_named_after_the_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    code, _, err = _query(capsys, "--bootstrap-servers", f"127.0.0.1:{port}", "--timeout", "1", "PRINT 't';")
    assert code == 1
    _one_error(err, f"kspark: KafkaClientError: Cannot reach the Kafka broker at 127.0.0.1:{port} within 1 s")


@pytest.fixture
def sources(kafka_broker: Any, tmp_path: Path) -> tuple[str, str, Path]:
    """A stream on a fresh topic and a read-only source stream, defined by a SQL file."""
    bootstrap = kafka_broker.bootstrap_servers
    topic = _unique("people")
    TopicAdmin(bootstrap).create_topic(topic, 1)
    sql = tmp_path / "sources.sql"
    sql.write_text(f"""
        CREATE STREAM PEOPLE (ID INT KEY, NAME STRING, SCORE DECIMAL(4, 2))
            WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='DELIMITED');
        CREATE SOURCE STREAM FROZEN (ID INT KEY, NAME STRING) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');
    """)
    return bootstrap, topic, sql


@pytest.mark.parametrize(
    ("statement", "error"),
    [
        ("SELECT * FROM NOPE EMIT CHANGES;", "kspark: AnalysisError: "),
        ("SELECT * FROM PEOPLE;", "kspark: UnsupportedFeatureError: Pull queries (a SELECT without EMIT CHANGES)"),
        ("INSERT INTO NOPE (ID) VALUES (1);", "kspark: AnalysisError: Cannot insert values into an unknown stream/table: `NOPE`"),
        ("INSERT INTO FROZEN (ID, NAME) VALUES (1, 'a');", "kspark: AnalysisError: Cannot insert values into read-only stream: FROZEN"),
        ("CREATE STREAM X AS SELECT * FROM PEOPLE;", "kspark: AnalysisError: kspark query runs SELECT ... EMIT CHANGES"),
        ("PRINT 'no_such_topic_at_all';", "kspark: KafkaClientError: Topic 'no_such_topic_at_all' does not exist."),
    ],
)
def test_statement_errors_are_one_line_and_exit_1(
    sources: tuple[str, str, Path], capsys: pytest.CaptureFixture[str], statement: str, error: str
) -> None:
    bootstrap, _, sql = sources
    code, out, err = _query(capsys, "--bootstrap-servers", bootstrap, "--sql", str(sql), statement)
    assert code == 1 and out == []
    _one_error(err, error)


def test_a_directory_that_is_no_state_dir_is_an_error(kafka_broker: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _query(
        capsys, "--bootstrap-servers", kafka_broker.bootstrap_servers, "--state-dir", str(tmp_path), "PRINT 'x';"
    )
    assert code == 1
    _one_error(err, f"kspark: ExecutionError: {tmp_path} is not the state dir of a kspark run application")


# ---------------------------------------------------------------------- INSERT VALUES and PRINT


def test_insert_values_writes_the_sources_formats_and_print_shows_them(
    sources: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap, topic, sql = sources
    code, out, err = _query(
        capsys, "--bootstrap-servers", bootstrap, "--sql", str(sql),
        "INSERT INTO PEOPLE (ID, NAME, SCORE) VALUES (7, 'ann', 1.5); "
        "INSERT INTO PEOPLE (ROWTIME, NAME, ID) VALUES (1000, 'bob', 8);",
    )
    assert (code, out, err) == (0, [], [])
    records = read_topic(bootstrap, topic)
    assert [(r.key, r.value) for r in records] == [
        (b"\x00\x00\x00\x07", b"ann,1.50"),  # KAFKA key (4-byte INT), DELIMITED value
        (b"\x00\x00\x00\x08", b"bob,"),
    ]
    assert records[1].timestamp == 1000

    code, out, err = _query(capsys, "--bootstrap-servers", bootstrap, f"PRINT '{topic}' FROM BEGINNING LIMIT 2;")
    assert code == 0 and err == []
    assert out == [
        "Key format: KAFKA_INT",
        "Value format: KAFKA_STRING",
        f"rowtime: {out[2].split('rowtime: ')[1].split(', key')[0]}, key: 7, value: ann,1.50, partition: 0",
        "rowtime: 1970/01/01 00:00:01.000 Z, key: 8, value: bob,, partition: 0",
    ]


def test_print_stops_cleanly_on_ctrl_c(sources: tuple[str, str, Path]) -> None:
    bootstrap, topic, _ = sources
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.cli", "query", "--bootstrap-servers", bootstrap, f"PRINT '{topic}';"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stdout is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)
        reader.start()
        deadline = time.monotonic() + 30
        while not any(line.startswith("rowtime:") for line in lines) and time.monotonic() < deadline:
            produce(bootstrap, topic, [ProducerRecord(key=b"\x00\x00\x00\x01", value=b"x,1")])
            time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert any("value: x,1" in line for line in lines)
    assert process.returncode == 0
    assert err.strip() == "kspark: interrupted; stopped."


# ---------------------------------------------------------------------- push queries and kspark run


@pytest.mark.usefixtures("spark")
def test_a_push_query_over_an_applications_state_dir_and_insert_values_its_query_sees(
    kafka_broker: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    source, sink = _unique("orders"), _unique("BIG")
    TopicAdmin(bootstrap).create_topic(source, 1)
    state = tmp_path / "state"
    app = StreamingApplication(bootstrap, state)
    app.submit(f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM ORDERS (ID STRING KEY, QTY INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE STREAM BIG WITH (KAFKA_TOPIC='{sink}') AS SELECT ID, QTY * 100 AS Q FROM ORDERS WHERE QTY > 1;
    """)
    saved = (state / "statements.json").read_text()
    base = ["--bootstrap-servers", bootstrap, "--state-dir", str(state)]

    code, out, err = _query(capsys, *base, "INSERT INTO ORDERS (ID, QTY) VALUES ('a', 1); INSERT INTO ORDERS (ID, QTY) VALUES ('b', 2);")
    assert (code, err) == (0, [])
    app.run_until_caught_up()  # what `kspark run --until-caught-up` runs
    assert [(r.key, json.loads(r.value or b"")) for r in read_topic(bootstrap, sink)] == [(b"b", {"Q": 200})]

    code, out, err = _query(
        capsys, *base, "--output", "json", "--property", "auto.offset.reset=earliest",
        "SELECT Q, ID FROM BIG EMIT CHANGES LIMIT 1;",
    )
    assert (code, err) == (0, [])
    header, row, final = (json.loads(line) for line in out)
    assert header["header"]["schema"] == "`Q` INTEGER, `ID` STRING"
    assert header["header"]["queryId"].startswith("transient_BIG_")
    assert row == {"row": {"columns": [200, "b"]}}
    assert final == {"finalMessage": "Limit Reached"}

    code, out, err = _query(
        capsys, *base, "SET 'auto.offset.reset'='earliest'; SELECT ID, QTY FROM ORDERS EMIT CHANGES LIMIT 2;"
    )
    assert (code, err) == (0, [])
    assert [line.split() for line in out] == [
        ["ID", "|", "QTY"], [out[1].strip()], ["a", "|", "1"], ["b", "|", "2"], ["Limit", "Reached"]
    ]
    assert set(out[1].strip()) == {"-", "+"}
    assert (state / "statements.json").read_text() == saved  # read only


@pytest.mark.usefixtures("spark")
def test_ctrl_c_stops_a_push_query_cleanly(sources: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    import _thread

    from engine.runtime.session import get_spark

    bootstrap, _, sql = sources

    def interrupt_once_listening() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(q.name.startswith("transient_") for q in get_spark().streams.active):
            time.sleep(0.1)
        time.sleep(1.0)
        _thread.interrupt_main()

    interrupter = threading.Thread(target=interrupt_once_listening, daemon=True)
    interrupter.start()
    code, out, err = _query(capsys, "--bootstrap-servers", bootstrap, "--sql", str(sql), "SELECT * FROM PEOPLE EMIT CHANGES;")
    interrupter.join()
    assert code == 0
    assert out[0].split() == ["ID", "|", "NAME", "|", "SCORE"]
    assert err == ["kspark: interrupted; stopped."]
    assert not [q for q in get_spark().streams.active if q.name.startswith("transient_")]
    assert not list(Path(tempfile.gettempdir()).glob("kspark-transient_PEOPLE_*"))  # checkpoint removed
