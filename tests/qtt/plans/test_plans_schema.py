"""The plan-schema guard: a precise generated schema and backward-compatibility verdicts."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Annotated, Any, ClassVar

import pytest
from jsonschema import Draft202012Validator

from engine.plan import expr as E
from engine.plan import serde
from engine.plan import steps as S
from engine.plan import steps_join as J
from engine.plan.constraints import OneOf
from engine.plan.expr import ColumnRef, Comparison, Expr, Literal
from engine.plan.plan import QueryPlan, StatementPlan
from engine.plan.schema import LogicalSchema
from engine.plan.steps import Step, step_dataclass
from engine.plan.types import INTEGER
from qtt.plans.schema import (
    BREAKING,
    COMPATIBLE,
    SchemaChange,
    compare_schemas,
    generate_schema,
    schema_text,
    validate_plan_file,
)

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def schema() -> dict[str, Any]:
    return generate_schema()


def breaking(changes: list[SchemaChange]) -> list[SchemaChange]:
    return [c for c in changes if c.verdict == BREAKING]


def only(changes: list[SchemaChange], pointer: str) -> SchemaChange:
    (change,) = [c for c in changes if c.pointer == pointer]
    return change


# ------------------------------------------------------------------------------ generation


def test_generation_is_deterministic(schema: dict[str, Any]) -> None:
    assert schema_text(schema) == schema_text(generate_schema())


def test_the_schema_is_a_valid_draft_2020_12_schema(schema: dict[str, Any]) -> None:
    Draft202012Validator.check_schema(schema)


def test_every_registered_step_has_a_closed_schema_entry(schema: dict[str, Any]) -> None:
    for wire in S.STEP_TYPES:
        entry = schema["$defs"][f"step.{wire}"]
        assert entry["properties"]["@type"] == {"const": wire}
        assert entry["additionalProperties"] is False
    assert sorted(S.STEP_TYPES) == schema["$defs"]["Step"]["properties"]["@type"]["enum"]


def test_every_expression_kind_is_closed_and_typed(schema: dict[str, Any]) -> None:
    for kind in E._KINDS:
        entry = schema["$defs"][f"expr.{kind}"]
        assert entry["properties"]["kind"] == {"const": kind}
        assert entry["additionalProperties"] is False
        for name, field in entry["properties"].items():
            assert field or (kind, name) == ("literal", "value"), f"expr.{kind}.{name} is free-form"


def test_no_step_or_command_field_is_free_form(schema: dict[str, Any]) -> None:
    for name, entry in schema["$defs"].items():
        if name.startswith(("step.", "command.")):
            for field, sub in entry["properties"].items():
                assert sub, f"{name}.{field} has an empty schema"


def test_required_fields_are_those_without_defaults(schema: dict[str, Any]) -> None:
    source = schema["$defs"]["step.streamSourceV1"]
    assert "timestampColumn" not in source["required"]
    assert {"ctx", "topic", "formats", "sourceSchema"} <= set(source["required"])


def test_fixed_option_strings_are_enums(schema: dict[str, Any]) -> None:
    defs = schema["$defs"]
    join = defs["step.streamTableJoinV1"]["properties"]["joinType"]
    assert join == {"type": "string", "enum": list(J.STREAM_TABLE_JOIN_TYPES)}
    assert defs["Formats"]["properties"]["keyFormat"]["enum"] == list(S.FORMAT_NAMES)
    assert defs["Formats"]["properties"]["valueFeatures"]["items"]["enum"] == list(S.SERDE_FEATURES)
    assert defs["Formats"]["properties"]["keyProperties"]["propertyNames"] == {
        "enum": list(S.FORMAT_PROPERTIES)
    }
    assert defs["WindowSpec"]["properties"]["type"]["enum"] == list(S.WINDOW_TYPES)
    assert defs["command.dropSourceV1"]["properties"]["kind"]["enum"] == ["STREAM", "TABLE"]
    assert defs["expr.comparison"]["properties"]["op"]["enum"] == list(E.COMPARISON_OPS)
    assert defs["expr.intervalUnit"]["properties"]["unit"]["enum"] == list(E.INTERVAL_UNITS)


def test_sql_types_and_schemas_refer_to_their_definitions(schema: dict[str, Any]) -> None:
    defs = schema["$defs"]
    assert defs["expr.cast"]["properties"]["type"] == {"$ref": "#/$defs/SqlType"}
    assert defs["step.streamSourceV1"]["properties"]["sourceSchema"] == {
        "$ref": "#/$defs/LogicalSchema"
    }
    assert defs["expr.case"]["properties"]["whens"]["items"] == {"$ref": "#/$defs/expr.when"}


def test_the_plan_constants_match_the_lower_layer() -> None:
    from engine.builders.formats import features_of
    from engine.serde import formats

    assert set(S.FORMAT_NAMES) == set(formats.FORMAT_NAMES)
    supported = set().union(*formats._SUPPORTED_PROPERTIES.values())
    assert set(S.FORMAT_PROPERTIES) == supported
    assert all(features_of((f,)).wrap_single_value is not None for f in S.SERDE_FEATURES)


def test_interval_units_are_those_the_parser_writes() -> None:
    from engine.parser import parse_expression

    for word in ("MILLISECOND", "MILLISECONDS", "SECONDS", "MINUTES", "HOURS", "DAYS"):
        call = parse_expression(f"TIMESTAMPADD({word}, 1, T)")
        assert isinstance(call, E.FunctionCall) and isinstance(call.args[0], E.IntervalUnit)
        assert call.args[0].unit in E.INTERVAL_UNITS


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


# --------------------------------------------------------------------- compatibility verdicts


def test_identical_schemas_have_no_changes(schema: dict[str, Any]) -> None:
    assert compare_schemas(schema, copy.deepcopy(schema)) == []


def test_the_committed_schema_file_matches_the_registries() -> None:
    committed = ROOT / "schemas" / "plan.schema.json"
    changes = compare_schemas(json.loads(committed.read_text()), generate_schema())
    assert not changes, "run `qtt schema generate`:\n" + "\n".join(c.render() for c in changes)


def test_a_narrowed_enum_is_breaking_and_names_the_lost_value(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    new["$defs"]["step.tableTableJoinV1"]["properties"]["joinType"]["enum"].remove("FULL")
    (change,) = compare_schemas(schema, new)
    assert change.verdict == BREAKING
    assert change.pointer == "/$defs/step.tableTableJoinV1/properties/joinType/enum"
    assert '"FULL" removed' in change.change
    assert "tableTableJoinV2" in change.reason  # a published version: add a new one


def test_a_widened_enum_is_compatible(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    new["$defs"]["Formats"]["properties"]["keyFormat"]["enum"].append("XML")
    (change,) = compare_schemas(schema, new)
    assert change.verdict == COMPATIBLE and '"XML" added' in change.change


def test_a_removed_field_is_breaking(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    del new["$defs"]["step.streamSelectV1"]["properties"]["keyColumnNames"]
    new["$defs"]["step.streamSelectV1"]["required"].remove("keyColumnNames")
    change = only(compare_schemas(schema, new), "/$defs/step.streamSelectV1/properties/keyColumnNames")
    assert change.verdict == BREAKING and "field 'keyColumnNames' removed" in change.change


def test_a_renamed_field_is_breaking_and_named_as_a_rename(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    props = new["$defs"]["step.streamSinkV1"]["properties"]
    props["topicName"] = props.pop("topic")
    changes = compare_schemas(schema, new)
    change = only(changes, "/$defs/step.streamSinkV1/properties/topic")
    assert change.verdict == BREAKING and "renamed to 'topicName'" in change.change


def test_a_field_made_required_is_breaking(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    new["$defs"]["step.streamSourceV1"]["required"].append("timestampColumn")
    (change,) = compare_schemas(schema, new)
    assert change.verdict == BREAKING
    assert change.pointer == "/$defs/step.streamSourceV1/required"
    assert "field 'timestampColumn' made required" in change.change


def test_a_changed_field_type_is_breaking(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    new["$defs"]["step.streamSourceV1"]["properties"]["topic"] = {"type": "integer"}
    (change,) = compare_schemas(schema, new)
    assert change.verdict == BREAKING
    assert change.render().startswith(
        'BREAKING /$defs/step.streamSourceV1/properties/topic/type: type changed from "string" '
        'to "integer"'
    )


def test_a_widened_type_is_compatible(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    new["$defs"]["step.tableSuppressV1"]["properties"]["graceMs"]["type"] = "number"
    (change,) = compare_schemas(schema, new)
    assert change.verdict == COMPATIBLE


def test_a_raised_minimum_is_breaking_and_a_lowered_one_compatible(schema: dict[str, Any]) -> None:
    raised = copy.deepcopy(schema)
    raised["$defs"]["step.tableSuppressV1"]["properties"]["graceMs"]["minimum"] = 1
    assert [c.verdict for c in compare_schemas(schema, raised)] == [BREAKING]
    lowered = copy.deepcopy(schema)
    lowered["$defs"]["step.tableSuppressV1"]["properties"]["graceMs"]["minimum"] = -1
    assert [c.verdict for c in compare_schemas(schema, lowered)] == [COMPATIBLE]


def test_a_changed_discriminator_is_a_changed_meaning(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    new["$defs"]["step.streamFilterV1"]["properties"]["@type"] = {"const": "streamWhereV1"}
    change = only(compare_schemas(schema, new), "/$defs/step.streamFilterV1/properties/@type/const")
    assert change.verdict == BREAKING and "names what a plan object means" in change.reason


def test_a_removed_step_version_is_breaking(schema: dict[str, Any]) -> None:
    new = copy.deepcopy(schema)
    del new["$defs"]["step.streamFilterV1"]
    change = only(compare_schemas(schema, new), "/$defs/step.streamFilterV1")
    assert change.verdict == BREAKING and change.change == "definition removed"


# Hypothetical next versions, registered only inside the tests below.


@step_dataclass
class _StreamFilterV9(Step):
    """Keeps the records matching the predicate, evaluated with a null policy."""

    TYPE: ClassVar[str] = "streamFilterV9"
    source: Step
    predicate: Expr
    nulls: Annotated[str, OneOf(("DROP", "KEEP"))] = "DROP"


@step_dataclass
class _StreamFilterWithOption(Step):
    """streamFilterV1 with one more optional field."""

    TYPE: ClassVar[str] = "streamFilterV1"
    source: Step
    predicate: Expr
    trace: bool = False


@step_dataclass
class _StreamFilterWithRequired(Step):
    """streamFilterV1 with one more required field."""

    TYPE: ClassVar[str] = "streamFilterV1"
    source: Step
    predicate: Expr
    trace: bool


@step_dataclass
class _StreamTableJoinInnerOnly(Step):
    """streamTableJoinV1 that accepts only inner joins."""

    TYPE: ClassVar[str] = "streamTableJoinV1"
    left: Step
    right: Step
    join_type: Annotated[str, OneOf(("INNER",))]
    left_alias: str
    right_alias: str
    key_column: str
    left_key: Expr
    right_key: Expr


def _with_step(monkeypatch: pytest.MonkeyPatch, cls: type[Step]) -> dict[str, Any]:
    monkeypatch.setitem(S.STEP_TYPES, cls.TYPE, cls)
    return generate_schema()


def test_a_new_step_version_is_compatible(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    changes = compare_schemas(schema, _with_step(monkeypatch, _StreamFilterV9))
    assert changes and not breaking(changes), "\n".join(c.render() for c in changes)
    added = only(changes, "/$defs/step.streamFilterV9")
    assert added.change == "definition added" and "a new step version" in added.reason


def test_a_new_optional_field_in_a_published_step_is_compatible(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    (change,) = compare_schemas(schema, _with_step(monkeypatch, _StreamFilterWithOption))
    assert change.verdict == COMPATIBLE
    assert change.pointer == "/$defs/step.streamFilterV1/properties/trace"
    assert change.change == "optional field 'trace' added"


def test_a_new_required_field_in_a_published_step_is_breaking(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    (change,) = compare_schemas(schema, _with_step(monkeypatch, _StreamFilterWithRequired))
    assert change.verdict == BREAKING and change.change == "required field 'trace' added"
    # streamFilterV2 is taken (the native filter): the advice names the next free version
    assert "streamFilterV4" in change.reason


def test_narrowing_an_annotated_enum_in_code_is_breaking(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    (change,) = compare_schemas(schema, _with_step(monkeypatch, _StreamTableJoinInnerOnly))
    assert change.verdict == BREAKING
    assert change.pointer == "/$defs/step.streamTableJoinV1/properties/joinType/enum"
    assert '"LEFT" removed' in change.change


# ------------------------------------------------------------------------------ validation


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


def test_a_plan_missing_a_field_names_it_by_json_pointer(schema: dict[str, Any]) -> None:
    plan = sample_plan()
    del plan["plans"][0]["query"]["root"]["source"]["predicate"]
    (message,) = validate_plan_file(plan, schema)
    assert message.startswith("at /plans/0/query/root/source: ") and "'predicate'" in message


def test_a_plan_with_an_unknown_step_type_names_it(schema: dict[str, Any]) -> None:
    plan = sample_plan()
    plan["plans"][0]["query"]["root"]["source"]["@type"] = "streamFilterV9"
    (message,) = validate_plan_file(plan, schema)
    assert "'streamFilterV9' is not in the schema" in message


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("formats", "keyFormat"), "XML", "at /plans/0/query/root/formats/keyFormat: 'XML'"),
        (("source", "predicate", "op"), "!=", "at /plans/0/query/root/source/predicate/op: '!='"),
        (("source", "predicate", "right", "value"), "1", "predicate/right/value: '1' is not of"),
        (("source", "predicate", "right", "type"), "INTEGR", "right/type: "),
        (("source", "source", "sourceSchema"), "`ID` INTEGER KEY,", "source/sourceSchema: "),
        (("source", "ctx"), "", "at /plans/0/query/root/source/ctx: '' should be non-empty"),
    ],
)
def test_a_plan_with_a_bad_value_names_its_json_pointer(
    schema: dict[str, Any], path: tuple[str, ...], value: Any, expected: str
) -> None:
    plan = sample_plan()
    node = plan["plans"][0]["query"]["root"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    messages = validate_plan_file(plan, schema)
    assert any(expected in m for m in messages), messages


def test_a_cast_to_a_type_the_engine_cannot_parse_is_refused(schema: dict[str, Any]) -> None:
    plan = sample_plan()
    predicate = plan["plans"][0]["query"]["root"]["source"]["predicate"]
    predicate["left"] = {"kind": "cast", "operand": predicate["left"], "type": "ARRAY<INTEGER"}
    (message,) = validate_plan_file(plan, schema)
    assert "predicate/left/type" in message and "Cannot parse type 'ARRAY<INTEGER'" in message


def test_every_committed_plan_validates_against_the_current_schema(schema: dict[str, Any]) -> None:
    files = sorted((ROOT / "planned_cases").glob("*/*/plan.json"))
    assert files
    problems = [
        f"{path.relative_to(ROOT)} {message}"
        for path in files
        for message in validate_plan_file(json.loads(path.read_text()), schema)
    ]
    assert not problems, "\n".join(problems)


def test_verify_names_the_file_and_json_pointer_of_a_bad_plan(tmp_path: Path) -> None:
    from qtt.plans.schema import write_schema
    from qtt.plans.verify import check_schema

    version = tmp_path / "cases" / "some_case" / "0.1.0_1700000000000"
    version.mkdir(parents=True)
    plan = sample_plan()
    plan["plans"][0]["query"]["root"]["formats"]["valueFormat"] = "XML"
    (version / "plan.json").write_text(json.dumps(plan))
    schema_path = write_schema(tmp_path / "plan.schema.json")
    changes, problems = check_schema(tmp_path / "cases", schema_path)
    assert changes == []
    (problem,) = problems
    assert str(version / "plan.json") in problem
    assert "at /plans/0/query/root/formats/valueFormat: 'XML' is not one of" in problem


@E._node_dc
class _Coalesce(E.Expr):
    """A hypothetical new expression kind."""

    KIND: ClassVar[str] = "coalesce"
    items: tuple[Expr, ...]


def test_a_new_expression_kind_is_compatible(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(E._KINDS, _Coalesce.KIND, _Coalesce)
    changes = compare_schemas(schema, generate_schema())
    assert {c.pointer for c in changes} == {
        "/$defs/expr.coalesce",
        "/$defs/Expr/properties/kind/enum",
        f"/$defs/Expr/allOf/{sorted(E._KINDS).index('coalesce')}",
    }
    assert not breaking(changes), "\n".join(c.render() for c in changes)


def test_a_plan_validated_again_against_an_equal_schema_reuses_the_result(
    schema: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import qtt.plans.schema as schema_module

    calls: list[Any] = []
    validate = schema_module._validate_plan_file

    def counted(data: Any, against: dict[str, Any]) -> list[str]:
        calls.append(data)
        return validate(data, against)

    monkeypatch.setattr(schema_module, "_validate_plan_file", counted)
    monkeypatch.setattr(schema_module, "_RESULTS", {})  # nothing kept from earlier tests
    bad = sample_plan()
    bad["plans"][0]["query"]["root"]["formats"]["valueFormat"] = "XML"
    first = validate_plan_file(bad, schema)
    assert validate_plan_file(copy.deepcopy(bad), copy.deepcopy(schema)) == first and first
    assert len(calls) == 1
    bad["plans"][0]["query"]["root"]["formats"]["valueFormat"] = "JSON"  # content changed
    assert validate_plan_file(bad, schema) == []
    changed = copy.deepcopy(schema)
    changed["$defs"]["extra"] = {"type": "string"}  # another schema: validated anew
    assert validate_plan_file(bad, changed) == []
    assert len(calls) == 3
