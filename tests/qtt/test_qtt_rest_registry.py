"""``qtt rest`` with a schema registry: a real kspark server, broker and registry.

The project's ``tests/rest_cases/schema-registry.json`` (AVRO, JSON_SR and PROTOBUF inputs in
the registry's wire format, PROTOBUF_NOSR as the bare payload; persistent, push and pull
queries, INSERT VALUES and schema inference on the server) must pass.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.server.cli import read_config
from qtt.rest.loader import load_rest_file
from qtt.rest.runner import RestHarness, run_rest_case
from qtt.rest.server import ServerProcess
from qtt.runner import Status

CASES = Path(__file__).parents[1] / "rest_cases" / "schema-registry.json"


def test_a_started_server_gets_the_registry_url_in_its_config_file(tmp_path: Path) -> None:
    server = ServerProcess("127.0.0.1:9092", tmp_path, properties={"ksql.schema.registry.url": "http://r:1/x"})
    command = server.command(8088, tmp_path / "state")
    config = command[command.index("--config") + 1]
    assert read_config(config) == {"ksql.schema.registry.url": "http://r:1/x"}
    assert "--config" not in ServerProcess("127.0.0.1:9092", tmp_path).command(8088, tmp_path / "state")


def test_the_registry_option_reaches_the_harness(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from qtt.cli import main
    from qtt.rest import runner

    seen: dict[str, Any] = {}

    def fake_open(**kwargs: Any) -> Any:
        seen.update(kwargs)
        raise runner.HarnessError("stopped here")

    monkeypatch.setattr(runner.RestHarness, "open", fake_open)
    (tmp_path / "one.json").write_text('{"tests": [{"name": "x", "statements": ["SELECT 1 FROM S;"]}]}')
    assert main(["rest", str(tmp_path), "--registry", "http://127.0.0.1:1/apis/ccompat/v7"]) == 2
    assert seen["registry_url"] == "http://127.0.0.1:1/apis/ccompat/v7"
    assert "stopped here" in capsys.readouterr().err


@pytest.fixture(scope="module")
def harness(kafka_broker: Any, schema_registry: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    with RestHarness.open(
        bootstrap_servers=kafka_broker.bootstrap_servers,
        registry_url=schema_registry.url,
        work_dir=tmp_path_factory.mktemp("rest-registry"),
        wait=45.0,
    ) as opened:
        yield opened


@pytest.mark.long
@pytest.mark.system
def test_the_project_registry_cases_pass(harness: RestHarness) -> None:
    assert harness.registry_url is not None
    cases = load_rest_file(CASES).cases
    assert {c.id.rsplit(" - ", 1)[-1] for c in cases} >= {"AVRO", "JSON_SR", "PROTOBUF", "PROTOBUF_NOSR"}
    results = [run_rest_case(case, harness) for case in cases]
    assert [(r.case_id, r.status, r.reason) for r in results if r.status is not Status.PASSED] == []


@pytest.mark.system
def test_protobuf_key_and_value_through_the_server(harness: RestHarness, tmp_path: Path) -> None:
    path = tmp_path / "protobuf.json"
    path.write_text(json.dumps({"tests": [
        {"name": "inputs", "statements": [
            "CREATE STREAM P (ID STRING KEY, N INT) WITH (kafka_topic='pb_in', format='PROTOBUF');",
            "SELECT * FROM P EMIT CHANGES LIMIT 1;"],
         "inputs": [{"topic": "pb_in", "key": {"ID": "a"}, "value": {"N": 1}}],
         "responses": [{"admin": {"@type": "currentStatus"}}, {"query": [
             {"header": {"schema": "`ID` STRING, `N` INTEGER"}}, {"row": {"columns": ["a", 1]}},
             {"finalMessage": "Limit Reached"}]}]},
        {"name": "insert values", "statements": [
            "CREATE STREAM Q (ID STRING KEY, N INT) WITH (kafka_topic='pb_out', format='PROTOBUF');",
            "INSERT INTO Q (ID, N) VALUES ('a', 1);"],
         "outputs": [{"topic": "pb_out", "key": {"ID": "a"}, "value": {"N": 1}}]},
    ]}))
    results = [run_rest_case(case, harness) for case in load_rest_file(path).cases]
    assert [(r.status, r.reason) for r in results] == [(Status.PASSED, "")] * 2
