"""The schema registry component on a real Apicurio Registry, and the wire serdes against it."""

from __future__ import annotations

import decimal
import json
import socket
import urllib.request
import uuid
from pathlib import Path

import pytest

from engine.cli import main
from engine.components.registry import SchemaRegistry, fetch_distribution
from engine.errors import ComponentError
from engine.plan import types as T
from engine.plan.schema import Column
from engine.serde import FormatInfo, SerdeFeatures, value_serde
from engine.serde.registry import registry_client, split_header, wire_serde

COLUMNS = (
    Column("ID", T.parse_type("BIGINT")),
    Column("PRICE", T.parse_type("DECIMAL(6, 2)")),
    Column("ADDRESS", T.parse_type("STRUCT<STREET STRING, ZIP INT>")),
    Column("AT", T.parse_type("TIMESTAMP")),
)
RECORD = {"ID": 1, "PRICE": decimal.Decimal("3.10"), "ADDRESS": {"STREET": "Main", "ZIP": 7}, "AT": 1700000000123}


def test_the_real_registry_holds_avro_and_json_sr_under_ksqldb_subjects(schema_registry: SchemaRegistry) -> None:
    topic = f"orders_{uuid.uuid4().hex[:8]}"
    for fmt, suffix in (("AVRO", ""), ("JSON_SR", "_json")):
        serde = wire_serde(value_serde(FormatInfo(fmt, {}), COLUMNS, SerdeFeatures()), topic + suffix,
                           schema_registry.url)
        data = serde.to_bytes(RECORD)
        schema_id, _ = split_header(data or b"", "value")
        assert serde.from_bytes(data) == RECORD
        latest = registry_client(schema_registry.url).get_latest_version(f"{topic}{suffix}-value")
        assert latest.schema_id == schema_id
        assert latest.schema.schema_type == ("AVRO" if fmt == "AVRO" else "JSON")
    with urllib.request.urlopen(f"{schema_registry.url}/subjects") as answer:
        subjects = json.loads(answer.read())
    assert {f"{topic}-value", f"{topic}_json-value"} <= set(subjects)


@pytest.mark.parametrize("sql_type", ["STRING", "INT", "ARRAY<STRING>"])
def test_the_real_registry_takes_json_sr_keys_of_one_column(schema_registry: SchemaRegistry, sql_type: str) -> None:
    # Apicurio guesses the type from the content: {"oneOf": ...} alone is refused as JSON.
    from engine.serde import key_serde

    topic = f"keys_{uuid.uuid4().hex[:8]}"
    serde = wire_serde(key_serde(FormatInfo("JSON_SR", {}), [Column("K", T.parse_type(sql_type))]), topic,
                       schema_registry.url)
    value = {"STRING": "k1", "INT": 7, "ARRAY<STRING>": ["a", None]}[sql_type]
    data = serde.to_bytes(value)
    assert data is not None and data[:1] == b"\x00"
    assert serde.from_bytes(data) == value
    assert registry_client(schema_registry.url).get_latest_version(f"{topic}-key").schema.schema_type == "JSON"


def test_the_mock_and_the_real_registry_give_the_same_bytes_after_the_header(schema_registry: SchemaRegistry) -> None:
    topic = f"same_{uuid.uuid4().hex[:8]}"
    real = wire_serde(value_serde(FormatInfo("AVRO", {}), COLUMNS, SerdeFeatures()), topic, schema_registry.url)
    mock = wire_serde(value_serde(FormatInfo("AVRO", {}), COLUMNS, SerdeFeatures()), topic,
                      f"mock://{uuid.uuid4().hex}")
    assert split_header(real.to_bytes(RECORD) or b"", "v")[1] == split_header(mock.to_bytes(RECORD) or b"", "v")[1]


def test_cli_start_status_stop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = str(tmp_path / "registry")
    try:
        assert main(["registry", "start", "--dir", directory]) == 0
        url = capsys.readouterr().out.strip().removeprefix("ksql.schema.registry.url=")
        assert url.startswith("http://127.0.0.1:") and url.endswith("/apis/ccompat/v7")
        with urllib.request.urlopen(f"{url}/subjects") as answer:
            assert json.loads(answer.read()) == []
        assert main(["registry", "status", "--dir", directory]) == 0
        assert capsys.readouterr().out.strip().endswith(f"ksql.schema.registry.url={url}")
        assert main(["registry", "start", "--dir", directory]) == 0
        captured = capsys.readouterr()
        assert captured.out.strip() == f"ksql.schema.registry.url={url}" and "already running" in captured.err
        assert main(["registry", "stop", "--dir", directory]) == 0
        assert main(["registry", "status", "--dir", directory]) == 3
        assert capsys.readouterr().out.strip() == "stopped"
    finally:
        SchemaRegistry(directory).stop()


def test_a_port_in_use_is_one_line_on_stderr_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["registry", "start", "--dir", str(tmp_path), "--port", str(port)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"kspark: Port {port} on 127.0.0.1 is already in use: choose another port "
                            "or stop what listens there.\n")


def test_no_java_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(ComponentError, match="Java is not installed .* the schema registry needs Java 17"):
        SchemaRegistry(tmp_path / "r").start()


def test_a_failed_download_names_the_url(tmp_path: Path) -> None:
    with pytest.raises(ComponentError, match=r"Cannot fetch http://127\.0\.0\.1:9/.*apicurio-registry-app-3\.0\.9-all\.tar\.gz\.sha1"):
        fetch_distribution(tmp_path, base_url="http://127.0.0.1:9", timeout=5)


def test_stopping_where_nothing_runs_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["registry", "stop", "--dir", str(tmp_path)]) == 0
    assert "no schema registry runs in" in capsys.readouterr().err


def test_a_restarted_registry_answers_the_ids_it_gave_before(tmp_path: Path) -> None:
    topic = f"kept_{uuid.uuid4().hex[:8]}"
    with SchemaRegistry(tmp_path / "registry", stop_with_parent=True) as registry:
        serde = wire_serde(value_serde(FormatInfo("AVRO", {}), COLUMNS, SerdeFeatures()), topic, registry.url)
        data = serde.to_bytes(RECORD) or b""
        schema_id, _ = split_header(data, "value")
        with urllib.request.urlopen(f"{registry.url}/schemas/ids/{schema_id}") as answer:
            before = json.loads(answer.read())["schema"]
        assert registry.stop()
        registry.start()
        registry.wait_ready(timeout=300)
        with urllib.request.urlopen(f"{registry.url}/schemas/ids/{schema_id}") as answer:
            assert json.loads(answer.read())["schema"] == before
        assert registry_client(registry.url).get_latest_version(f"{topic}-value").schema_id == schema_id
        fresh = wire_serde(value_serde(FormatInfo("AVRO", {}), COLUMNS, SerdeFeatures()), topic, registry.url)
        assert fresh.from_bytes(data) == RECORD
        assert split_header(fresh.to_bytes(RECORD) or b"", "value")[0] == schema_id


def test_a_registry_that_does_not_answer_fails_the_write_as_unavailable_not_as_the_records_fault() -> None:
    # A sink skips a record it cannot serialise (processing log); a registry that is away is no
    # record's fault: the query must fail and restart, or the records written meanwhile are lost.
    from engine.errors import RecordSerdeError, SchemaRegistryUnavailableError

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    serde = wire_serde(value_serde(FormatInfo("AVRO", {}), COLUMNS, SerdeFeatures()), "away",
                       f"http://127.0.0.1:{port}")
    with pytest.raises(SchemaRegistryUnavailableError, match="Cannot write the .* to away-value: the schema registry did not answer"):
        serde.to_bytes(RECORD)
    json_sr = wire_serde(value_serde(FormatInfo("JSON_SR", {}), COLUMNS, SerdeFeatures()), "away",
                         f"http://127.0.0.1:{port}")
    with pytest.raises(SchemaRegistryUnavailableError, match="Cannot register the .* schema under away-value"):
        json_sr.to_bytes(RECORD)
    assert not issubclass(SchemaRegistryUnavailableError, RecordSerdeError)
