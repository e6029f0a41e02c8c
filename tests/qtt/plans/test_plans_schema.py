"""The plan-schema guard: deterministic generation and backward-compatibility verdicts."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from engine.plan import serde
from engine.plan import steps as S
from engine.plan.expr import ColumnRef, Comparison, Literal
from engine.plan.plan import QueryPlan, StatementPlan
from engine.plan.schema import LogicalSchema
from engine.plan.types import INTEGER
from qtt.plans.schema import (
    BREAKING,
    COMPATIBLE,
    compare_schemas,
    generate_schema,
    schema_text,
    validate_plan_file,
)


def verdicts(old: dict[str, Any], new: dict[str, Any]) -> set[tuple[str, str | None, str, str]]:
    return {(c.definition, c.field, c.change, c.verdict) for c in compare_schemas(old, new)}


@pytest.fixture
def schema() -> dict[str, Any]:
    return generate_schema()


def test_generation_is_deterministic(schema: dict[str, Any]) -> None:
    assert schema_text(schema) == schema_text(generate_schema())


def test_every_registered_step_has_a_schema_entry(schema: dict[str, Any]) -> None:
    for wire in S.STEP_TYPES:
        assert schema["$defs"][f"step.{wire}"]["properties"]["@type"] == {"const": wire}


def test_required_fields_are_those_without_defaults(schema: dict[str, Any]) -> None:
    source = schema["$defs"]["step.streamSourceV1"]
    assert "timestampColumn" not in source["required"]
    assert {"ctx", "topic", "formats", "sourceSchema"} <= set(source["required"])


def test_identical_schemas_have_no_changes(schema: dict[str, Any]) -> None:
    assert compare_schemas(schema, copy.deepcopy(schema)) == []


def test_a_removed_step_type_is_breaking(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    del new["$defs"]["step.streamFilterV1"]
    assert ("step.streamFilterV1", None, "type removed", BREAKING) in verdicts(schema, new)


def test_a_new_step_type_is_compatible(schema: dict[str, Any]) -> None:
    old = copy.deepcopy(schema)
    del old["$defs"]["step.streamFilterV1"]
    assert ("step.streamFilterV1", None, "type added", COMPATIBLE) in verdicts(old, schema)


def test_a_removed_field_is_breaking(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    del new["$defs"]["step.streamSelectV1"]["properties"]["keyColumnNames"]
    changes = verdicts(schema, new)
    assert ("step.streamSelectV1", "keyColumnNames", "field removed", BREAKING) in changes


def test_a_new_required_field_is_breaking_and_a_new_optional_one_compatible(
    schema: dict[str, Any],
) -> None:
    required = copy.deepcopy(schema)
    definition = required["$defs"]["step.streamFilterV1"]
    definition["properties"]["mode"] = {"type": "string"}
    definition["required"].append("mode")
    assert ("step.streamFilterV1", "mode", "required field added", BREAKING) in verdicts(
        schema, required
    )
    optional = copy.deepcopy(schema)
    optional["$defs"]["step.streamFilterV1"]["properties"]["mode"] = {"type": "string"}
    assert ("step.streamFilterV1", "mode", "optional field added", COMPATIBLE) in verdicts(
        schema, optional
    )


def test_a_changed_field_type_is_breaking(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    new["$defs"]["step.streamSourceV1"]["properties"]["topic"] = {"type": "integer"}
    (change,) = [c for c in compare_schemas(schema, new) if c.field == "topic"]
    assert change.verdict == BREAKING and "type changed" in change.change
    assert change.render().startswith("BREAKING: step.streamSourceV1.topic")


def test_the_committed_schema_file_matches_the_registries() -> None:
    committed = Path(__file__).resolve().parents[3] / "schemas" / "plan.schema.json"
    changes = compare_schemas(json.loads(committed.read_text()), generate_schema())
    assert not changes, "run `qtt schema generate`:\n" + "\n".join(c.render() for c in changes)


def sample_plan() -> dict[str, Any]:
    schema = LogicalSchema.parse("`ID` INTEGER KEY, `V` INTEGER")
    formats = S.Formats(key_format="KAFKA", value_format="JSON")
    source = S.StreamSource(
        ctx="KsqlTopic/Source", topic="t", formats=formats, source_schema=schema
    )
    where = S.StreamFilter(
        ctx="WhereFilter",
        source=source,
        predicate=Comparison(">", ColumnRef("V"), Literal(1, INTEGER)),
    )
    sink = S.StreamSink(ctx="KsqlTopic/Sink", source=where, topic="OUT", formats=formats)
    plan = StatementPlan(
        statement_text="CREATE STREAM OUT AS SELECT * FROM T WHERE V > 1;",
        query=QueryPlan(query_id="CSAS_OUT_0", sources=("T",), sink="OUT", root=sink),
    )
    return {"configs": {}, "plans": [serde.to_json_value(plan)]}


def test_a_plan_written_by_the_serde_validates(schema: dict[str, Any]) -> None:
    assert validate_plan_file(sample_plan(), schema) == []


def test_a_plan_missing_a_field_names_it(schema: dict[str, Any]) -> None:
    plan = sample_plan()
    del plan["plans"][0]["query"]["root"]["source"]["predicate"]
    (message,) = validate_plan_file(plan, schema)
    assert "plans/0/query/root/source" in message and "'predicate'" in message


def test_a_plan_with_an_unknown_step_type_names_it(schema: dict[str, Any]) -> None:
    plan = sample_plan()
    plan["plans"][0]["query"]["root"]["source"]["@type"] = "streamFilterV9"
    (message,) = validate_plan_file(plan, schema)
    assert "'streamFilterV9' is not in the schema" in message


def test_every_reference_in_the_schema_has_a_definition(schema: dict[str, Any]) -> None:
    refs: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                refs.add(node["$ref"].removeprefix("#/$defs/"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert refs and refs <= set(schema["$defs"])
