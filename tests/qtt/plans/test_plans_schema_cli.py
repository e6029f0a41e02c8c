"""``qtt schema generate|check``: breaking changes are refused by name, compatible ones written."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qtt.cli import main
from qtt.plans.schema import generate_schema, schema_text

Edit = Callable[[dict[str, Any]], None]


def _wider_enum(committed: dict[str, Any]) -> None:
    # The committed schema allowed one more join type: the generated one narrows the enum.
    committed["$defs"]["step.tableTableJoinV1"]["properties"]["joinType"]["enum"].append("CROSS")


def _extra_field(committed: dict[str, Any]) -> None:
    # The committed schema had a field the generated one lacks: a removed field.
    committed["$defs"]["step.streamFilterV1"]["properties"]["mode"] = {"type": "string"}


def _topic_optional(committed: dict[str, Any]) -> None:
    # 'topic' was optional in the committed schema: the generated one makes it required.
    committed["$defs"]["step.streamSourceV1"]["required"].remove("topic")


def _topic_integer(committed: dict[str, Any]) -> None:
    committed["$defs"]["step.streamSourceV1"]["properties"]["topic"] = {"type": "integer"}


def _without_filter_step(committed: dict[str, Any]) -> None:
    # The committed schema predates streamFilterV1: the generated one adds a step version.
    del committed["$defs"]["step.streamFilterV1"]
    union = committed["$defs"]["Step"]
    union["properties"]["@type"]["enum"].remove("streamFilterV1")
    union["allOf"] = [m for m in union["allOf"] if "streamFilterV1" not in json.dumps(m)]


def _without_optional_field(committed: dict[str, Any]) -> None:
    # The committed schema predates streamSourceV1's optional timestampColumn.
    del committed["$defs"]["step.streamSourceV1"]["properties"]["timestampColumn"]


def committed_schema(tmp_path: Path, edit: Edit | None = None) -> Path:
    schema = copy.deepcopy(generate_schema())
    if edit is not None:
        edit(schema)
    path = tmp_path / "plan.schema.json"
    path.write_text(schema_text(schema))
    return path


BREAKING_EDITS = [
    pytest.param(
        _wider_enum,
        "BREAKING /$defs/step.tableTableJoinV1/properties/joinType/enum: enum narrowed: "
        '"CROSS" removed',
        id="narrowed-enum",
    ),
    pytest.param(
        _extra_field,
        "BREAKING /$defs/step.streamFilterV1/properties/mode: field 'mode' removed",
        id="removed-field",
    ),
    pytest.param(
        _topic_optional,
        "BREAKING /$defs/step.streamSourceV1/required: field 'topic' made required",
        id="made-required",
    ),
    pytest.param(
        _topic_integer,
        'BREAKING /$defs/step.streamSourceV1/properties/topic/type: type changed from "integer" '
        'to "string"',
        id="type-change",
    ),
]


@pytest.mark.parametrize(("edit", "expected"), BREAKING_EDITS)
def test_generate_refuses_a_breaking_change_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, expected: str
) -> None:
    path = committed_schema(tmp_path, edit)
    before = path.read_text()
    assert main(["schema", "generate", "--schema", str(path)]) == 1
    err = capsys.readouterr().err
    assert expected in err
    assert f"qtt: not writing {path}: 1 breaking change(s)" in err
    assert path.read_text() == before


@pytest.mark.parametrize(("edit", "expected"), BREAKING_EDITS)
def test_check_fails_on_a_breaking_change_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, expected: str
) -> None:
    path = committed_schema(tmp_path, edit)
    assert main(["schema", "check", "--schema", str(path)]) == 1
    out = capsys.readouterr().out
    assert expected in out and "1 breaking change(s) of 1" in out


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(
            _without_filter_step,
            "COMPATIBLE /$defs/step.streamFilterV1: definition added; a new step version",
            id="new-step-version",
        ),
        pytest.param(
            _without_optional_field,
            "COMPATIBLE /$defs/step.streamSourceV1/properties/timestampColumn: optional field "
            "'timestampColumn' added",
            id="new-optional-field",
        ),
    ],
)
def test_generate_writes_a_compatible_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Edit, expected: str
) -> None:
    path = committed_schema(tmp_path, edit)
    assert main(["schema", "check", "--schema", str(path)]) == 0
    out = capsys.readouterr().out
    assert expected in out and "run `qtt schema generate`" in out
    assert main(["schema", "generate", "--schema", str(path)]) == 0
    out = capsys.readouterr().out
    assert expected in out and f"wrote {path}" in out
    assert path.read_text() == schema_text(generate_schema())


def test_check_passes_and_generate_leaves_an_up_to_date_schema(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = committed_schema(tmp_path)
    assert main(["schema", "check", "--schema", str(path)]) == 0
    assert "matches the committed one" in capsys.readouterr().out
    assert main(["schema", "generate", "--schema", str(path)]) == 0
    assert f"{path} is up to date" in capsys.readouterr().out


def test_generate_writes_a_first_schema(tmp_path: Path) -> None:
    path = tmp_path / "schemas" / "plan.schema.json"
    assert main(["schema", "generate", "--schema", str(path)]) == 0
    assert path.read_text() == schema_text(generate_schema())


def test_an_unreadable_committed_schema_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "plan.schema.json"
    path.write_text("{not json")
    for action in ("check", "generate"):
        assert main(["schema", action, "--schema", str(path)]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"qtt: cannot read the committed schema {path}: ")
    assert main(["schema", "check", "--schema", str(tmp_path / "missing.json")]) == 2
    assert "No such file" in capsys.readouterr().err
