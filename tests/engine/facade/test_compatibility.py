"""Compatibility-breaking configs (engine.facade.compatibility): a service created by an earlier
release keeps that release's function versions for new queries until it opts in."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from engine.expressions.cast import make_cast
from engine.facade import compatibility as C
from engine.facade.engine import KsqlEngine
from engine.functions.registry import REGISTRY
from engine.plan import expr as E
from engine.plan import serde
from engine.plan import types as T
from tests.engine.plan_versions import recorded_versions

FLAG = C.FUNCTIONS_JAVA_SEMANTICS.name
ROOT = Path(__file__).resolve().parents[3]
SOURCE = (
    "CREATE STREAM S (ID INT KEY, D DOUBLE, N INT) "
    "WITH (kafka_topic='s', value_format='JSON', partitions=1);"
)
QUERY = "CREATE STREAM OUT{n} AS SELECT ID, CAST(D AS STRING) AS T, ABS(N) AS A FROM S;"


def _engine(**config) -> KsqlEngine:
    engine = KsqlEngine(config)
    engine.execute_sql(SOURCE)
    return engine


def test_an_old_service_plans_the_function_versions_of_0_11() -> None:
    [result] = _engine(**{FLAG: False}).execute_sql(QUERY.format(n=1))
    assert recorded_versions(result.plan) == {"CAST": 1, "ABS": 1}
    # CAST version 1 writes the shortest text that reads back, not Java's digits.
    assert make_cast(T.DOUBLE, T.STRING, 1)(1e23) == "1.0E23"


def test_a_new_service_plans_the_current_versions() -> None:
    [result] = _engine().execute_sql(QUERY.format(n=1))  # no value: an engine with no older log
    assert recorded_versions(result.plan) == {"CAST": 3, "ABS": 2}
    assert make_cast(T.DOUBLE, T.STRING, 3)(1e23) == "9.999999999999999E22"
    [explicit] = _engine(**{FLAG: "true"}).execute_sql(QUERY.format(n=1))
    assert recorded_versions(explicit.plan) == {"CAST": 3, "ABS": 2}


def test_opting_in_changes_new_queries_and_keeps_the_saved_ones() -> None:
    engine = _engine(**{FLAG: False})
    [old] = engine.execute_sql(QUERY.format(n=1))
    [_, new] = engine.execute_sql(f"SET '{FLAG}'='true';" + QUERY.format(n=2))
    assert recorded_versions(new.plan) == {"CAST": 3, "ABS": 2}
    assert recorded_versions(engine.queries[old.query_id]) == {"CAST": 1, "ABS": 1}
    # A saved plan replays with its own versions, whatever the service's value.
    current = KsqlEngine({FLAG: False})
    current.execute_sql(SOURCE)
    current.restore(serde.statement_plan_from_json(serde.to_json_value(new.plan)))
    assert recorded_versions(current.queries[new.query_id]) == {"CAST": 3, "ABS": 2}


def test_pinning_leaves_unchanged_functions_and_other_casts_alone() -> None:
    engine = _engine(**{FLAG: False})
    [result] = engine.execute_sql(
        "CREATE STREAM OUT3 AS SELECT ID, CAST(N AS DOUBLE) AS X, UCASE('a') AS U, "
        "CAST('2020-01-01' AS DATE) AS DT FROM S;"
    )
    calls = recorded_versions(result.plan)
    assert calls["UCASE"] == REGISTRY.current_semantics("UCASE")
    # CAST version 2 (STRING to DATE) was in 0.11 already and stays.
    assert sorted(cast.semantics for cast in _casts(serde.to_json_value(result.plan))) == [1, 2]


def _casts(value) -> list[E.Cast]:
    out: list[E.Cast] = []
    if isinstance(value, dict):
        if value.get("kind") == "cast":
            out.append(E.from_json(value))  # type: ignore[arg-type]
        for v in value.values():
            out.extend(_casts(v))
    elif isinstance(value, list):
        for v in value:
            out.extend(_casts(v))
    return out


def test_the_service_value_comes_from_the_log_with_its_defaults() -> None:
    new_service: dict = {}
    C.settle_after_replay(new_service, commands_replayed=0)
    assert new_service == {}
    first: dict = {}
    C.record_service_values(first, new_service)
    assert first == {FLAG: True}  # the write default, recorded with the first command

    old_service: dict = {}
    C.settle_after_replay(old_service, commands_replayed=3)  # commands of an earlier release
    assert old_service == {FLAG: False}
    command: dict = {"auto.offset.reset": "earliest"}
    C.record_service_values(command, old_service)
    assert command == {"auto.offset.reset": "earliest", FLAG: False}

    opt_in: dict = {FLAG: "'true'"}
    C.record_service_values(opt_in, old_service)
    assert opt_in == {FLAG: True}
    C.replay_values(old_service, opt_in)  # every server replaying that command agrees
    assert old_service == {FLAG: True}
    later: dict = {}
    C.record_service_values(later, old_service)
    assert later == {FLAG: True}
    # Replayed in any order (the metastore tables replay sources before queries), an opt-in holds.
    C.replay_values(old_service, {FLAG: False})
    assert old_service == {FLAG: True}
    unordered: dict = {}
    for recorded in ({FLAG: True}, {FLAG: False}, {}):
        C.replay_values(unordered, recorded)
    assert unordered == {FLAG: True}


def test_a_command_keeps_the_values_beside_its_properties() -> None:
    from engine.commandlog.command import Command

    command = Command(command_id="stream/`S`/create", statement="CREATE STREAM S ...;",
                      properties={"auto.offset.reset": "earliest"}, original_properties={FLAG: True})
    value = json.loads(command.value_bytes())
    assert value["originalProperties"] == {FLAG: True}
    assert value["streamsProperties"] == {"auto.offset.reset": "earliest"}
    assert Command.from_record(command.key_bytes(), command.value_bytes(), 0) == command
    older = Command(command_id="stream/`S`/create", statement="CREATE STREAM S ...;")
    assert "originalProperties" not in json.loads(older.value_bytes())  # as 0.11.0 wrote it


def _release_0_11_versions() -> dict:
    releases = (ROOT / "planned_cases" / "RELEASES").read_text(encoding="utf-8").splitlines()
    [commit] = [line.split()[2] for line in releases if line.startswith("0.11.0 ")]
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "engine"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        pytest.skip(f"release 0.11.0's commit {commit} is not in this clone (a shallow clone)")
    return {"commit": commit, "tar": archive.stdout}


def test_the_table_is_release_0_11s_function_versions(tmp_path: Path) -> None:
    release = _release_0_11_versions()
    with tarfile.open(fileobj=BytesIO(release["tar"])) as tar:
        tar.extractall(tmp_path, filter="data")
    script = (
        "import json; import engine.functions; from engine.functions.registry import REGISTRY;"
        "from engine.expressions import cast;"
        "print(json.dumps({'f': {n: REGISTRY.current_semantics(n) for n in REGISTRY._by_name},"
        " 'cast': cast.CAST_SEMANTICS}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env={"PYTHONPATH": str(tmp_path)},
        capture_output=True, text=True, check=True,
    )
    old = json.loads(out.stdout)
    assert old["cast"] == C.RELEASE_0_11_CAST_VERSION
    for name, version in old["f"].items():
        pinned = C.RELEASE_0_11_FUNCTION_VERSIONS.get(name, REGISTRY.current_semantics(name))
        assert pinned == version, name
    assert set(C.RELEASE_0_11_FUNCTION_VERSIONS) <= set(old["f"])
