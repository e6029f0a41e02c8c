"""Fetching jars from Maven Central with Ivy (PySpark's jar): no Maven needed."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from engine.components.maven import (
    MARKER,
    Artifact,
    fetch_artifacts,
    is_fetched,
    ivy_jar,
    ivy_message,
    ivy_xml,
    kspark_home,
)
from engine.errors import ComponentError

KAFKA = "org.apache.kafka:kafka_2.13:4.4.0"


def test_artifact_parses_group_artifact_version() -> None:
    artifact = Artifact.parse(KAFKA)
    assert (artifact.group, artifact.artifact, artifact.version) == ("org.apache.kafka", "kafka_2.13", "4.4.0")
    assert str(artifact) == KAFKA


@pytest.mark.parametrize("text", ["kafka", "a:b", "a:b:c:d", "a:b c:1"])
def test_bad_coordinate_is_rejected_with_its_text(text: str) -> None:
    with pytest.raises(ComponentError, match=f"'{text}' is not a Maven coordinate"):
        Artifact.parse(text)


def test_ivy_module_declares_each_artifact_as_a_forced_runtime_dependency() -> None:
    module = ET.fromstring(ivy_xml([Artifact.parse(KAFKA), Artifact.parse("g:a:1")]))
    deps = [(d.get("org"), d.get("name"), d.get("rev"), d.get("force"), d.get("conf"))
            for d in module.findall("dependencies/dependency")]
    assert deps == [
        ("org.apache.kafka", "kafka_2.13", "4.4.0", "true", "default->default"),
        ("g", "a", "1", "true", "default->default"),
    ]


def test_ivy_ships_with_pyspark() -> None:
    assert ivy_jar().name.startswith("ivy-") and ivy_jar().is_file()


def test_ivy_unresolved_dependencies_become_one_line() -> None:
    output = """:: loading settings :: url = jar:file:/x/ivy.jar!/ivysettings.xml
:: resolving dependencies :: kspark.fetch#fetch;working@vm
:: problems summary ::
:::: WARNINGS
		module not found: org.apache.kafka#kafka_2.13;9.9.9
		::::::::::::::::::::::::::::::::::::::::::::::
		::          UNRESOLVED DEPENDENCIES         ::
		::::::::::::::::::::::::::::::::::::::::::::::
		:: org.apache.kafka#kafka_2.13;9.9.9: not found
		::::::::::::::::::::::::::::::::::::::::::::::
"""
    assert ivy_message(output) == "org.apache.kafka#kafka_2.13;9.9.9: not found (on Maven Central)"


def test_kspark_home_defaults_to_the_user_cache_and_follows_the_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("KSPARK_HOME", raising=False)
    assert kspark_home() == Path.home() / ".cache" / "kspark"
    monkeypatch.setenv("KSPARK_HOME", str(tmp_path))
    assert kspark_home() == tmp_path


def test_missing_java_is_one_line_naming_the_artifact(tmp_path) -> None:
    with pytest.raises(ComponentError) as raised:
        fetch_artifacts([KAFKA], tmp_path / "lib", java="no-such-java", home=tmp_path)
    message = str(raised.value)
    assert KAFKA in message and "Java ('no-such-java') is not on PATH" in message
    assert "\n" not in message


def test_a_completed_fetch_is_not_repeated(tmp_path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / MARKER).write_text(json.dumps([KAFKA]))
    assert is_fetched(lib, [KAFKA])
    # Java is not even looked for: the marker says the jars are there.
    assert fetch_artifacts([KAFKA], lib, java="no-such-java", home=tmp_path) == lib


def test_a_fetch_of_other_artifacts_into_the_same_directory_runs_again(tmp_path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / MARKER).write_text(json.dumps(["g:a:1"]))
    assert not is_fetched(lib, [KAFKA])
    with pytest.raises(ComponentError, match="not on PATH"):
        fetch_artifacts([KAFKA], lib, java="no-such-java", home=tmp_path)


def test_an_unknown_artifact_reports_ivys_reason(tmp_path) -> None:
    missing = "org.apache.kafka:kspark-no-such-artifact:0.0.1"
    with pytest.raises(ComponentError) as raised:
        fetch_artifacts([missing], tmp_path / "lib", home=tmp_path)
    message = str(raised.value)
    assert message.startswith(f"Cannot fetch {missing}: ")
    assert "kspark-no-such-artifact" in message.removeprefix(f"Cannot fetch {missing}: ")
    assert "\n" not in message
    assert not is_fetched(tmp_path / "lib", [missing])
