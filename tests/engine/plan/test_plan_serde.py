"""Plan serde: deterministic JSON, round trips of every step version, clear errors."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import SerdeError
from engine.plan import expr as E
from engine.plan import serde
from engine.plan import steps as S
from engine.plan import types as T
from engine.plan.plan import CreateStreamCommand, QueryPlan, StatementPlan
from engine.plan.schema import LogicalSchema

NAMES = st.from_regex(r"[A-Z][A-Z0-9_]{0,6}", fullmatch=True)
SCHEMA = LogicalSchema.parse("K STRING KEY, ID BIGINT, NAME STRING")
FORMATS = st.builds(
    S.Formats,
    key_format=st.sampled_from(["KAFKA", "JSON", "NONE"]),
    value_format=st.sampled_from(["JSON", "DELIMITED", "KAFKA"]),
    value_properties=st.sampled_from([(), (("delimiter", "|"),)]),
    value_features=st.sampled_from([(), ("UNWRAP_SINGLES",)]),
)
LITERALS = st.one_of(
    st.builds(E.Literal, st.integers(-(2**31), 2**31 - 1), st.just(T.INTEGER)),
    st.builds(E.Literal, st.text(max_size=5), st.just(T.STRING)),
    st.builds(E.Literal, st.booleans(), st.just(T.BOOLEAN)),
    st.just(E.Literal(None, None)),
)
EXPRS = st.recursive(
    st.one_of(LITERALS, st.builds(E.ColumnRef, NAMES)),
    lambda inner: st.one_of(
        st.builds(E.Arithmetic, st.sampled_from(["+", "-", "*", "/", "%"]), inner, inner),
        st.builds(E.Comparison, st.sampled_from(["=", "<", ">="]), inner, inner),
        st.builds(E.Logical, st.sampled_from(["AND", "OR"]), inner, inner),
        st.builds(E.Not, inner),
        st.builds(E.IsNull, inner, st.booleans()),
        st.builds(
            E.FunctionCall,
            NAMES,
            st.lists(inner, max_size=3).map(tuple),
            semantics=st.integers(min_value=1, max_value=3),
        ),
        st.builds(E.Cast, inner, st.sampled_from([T.BIGINT, T.Decimal(5, 2), T.Array(T.STRING)])),
    ),
    max_leaves=8,
)
SELECTS = st.lists(
    st.builds(S.SelectExpression, alias=NAMES.filter(lambda n: n != "K"), expression=EXPRS),
    min_size=1,
    max_size=3,
    unique_by=lambda s: s.alias,
).map(tuple)


def sources() -> st.SearchStrategy[S.Step]:
    return st.one_of(
        st.builds(S.StreamSource, ctx=st.just("KsqlTopic/Source"), topic=NAMES, formats=FORMATS, source_schema=st.just(SCHEMA)),
        st.builds(S.TableSource, ctx=st.just("KsqlTopic/Source"), topic=NAMES, formats=FORMATS, source_schema=st.just(SCHEMA)),
    )


def chains() -> st.SearchStrategy[S.Step]:
    return st.recursive(
        sources(),
        lambda inner: st.one_of(
            st.builds(S.StreamFilter, ctx=st.just("WhereFilter"), source=inner, predicate=EXPRS),
            st.builds(S.TableFilter, ctx=st.just("WhereFilter"), source=inner, predicate=EXPRS),
            st.builds(S.StreamSelect, ctx=st.just("Project"), source=inner, key_column_names=st.just(("K",)), select_expressions=SELECTS),
            st.builds(S.StreamSelectKey, ctx=st.just("PartitionBy"), source=inner, key_expressions=SELECTS),
            st.builds(S.StreamSink, ctx=st.just("KsqlTopic/Sink"), source=inner, topic=NAMES, formats=FORMATS),
        ),
        max_leaves=4,
    )


@settings(max_examples=60, deadline=None)
@given(chains())
def test_every_step_tree_round_trips_through_json(step: S.Step) -> None:
    text = json.dumps(serde.to_json_value(step), sort_keys=True)
    assert serde.step_from_json(json.loads(text)) == step


@settings(max_examples=40, deadline=None)
@given(EXPRS)
def test_expressions_round_trip_through_json(expr: E.Expr) -> None:
    assert E.from_json(json.loads(json.dumps(E.to_json(expr)))) == expr


def _plan() -> StatementPlan:
    formats = S.Formats(key_format="KAFKA", value_format="JSON")
    source = S.StreamSource(ctx="KsqlTopic/Source", topic="in", formats=formats, source_schema=SCHEMA)
    sink = S.StreamSink(ctx="KsqlTopic/Sink", source=source, topic="OUT", formats=formats)
    return StatementPlan(
        statement_text="CREATE STREAM OUT AS SELECT * FROM IN;",
        command=CreateStreamCommand(name="OUT", schema=SCHEMA, topic="OUT", formats=formats),
        query=QueryPlan(query_id="CSAS_OUT_0", sources=("IN",), sink="OUT", root=sink),
    )


def test_dumps_is_deterministic_sorted_and_ends_with_a_newline() -> None:
    text = serde.dumps(_plan())
    assert text == serde.dumps(serde.loads_statement_plan(text))
    assert text.endswith("}\n")
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert '\n  "command"' in text


def test_field_names_are_camel_case_in_json() -> None:
    data = json.loads(serde.dumps(_plan()))
    assert "statementText" in data and "queryId" in data["query"]
    assert serde.json_key("key_column_names") == "keyColumnNames"


def test_unknown_step_type_names_it_and_the_known_ones() -> None:
    data = json.loads(serde.dumps(_plan()))
    data["query"]["root"]["source"]["@type"] = "streamTeleportV9"
    with pytest.raises(SerdeError, match="streamTeleportV9.*known types: .*streamSourceV1"):
        serde.statement_plan_from_json(data)


def test_unknown_and_missing_fields_are_errors() -> None:
    data = json.loads(serde.dumps(_plan()))
    data["query"]["root"]["colour"] = "red"
    with pytest.raises(SerdeError, match="Unknown field.*colour"):
        serde.statement_plan_from_json(data)
    data = json.loads(serde.dumps(_plan()))
    del data["query"]["root"]["topic"]
    with pytest.raises(SerdeError, match="missing its required field 'topic'"):
        serde.statement_plan_from_json(data)


def test_registry_refuses_duplicate_and_badly_formed_wire_names() -> None:
    with pytest.raises(TypeError, match="registered twice"):

        @S.register_step
        @S.step_dataclass
        class Again(S.Step):
            """Duplicate."""

            TYPE = "streamSourceV1"

    with pytest.raises(TypeError, match="wire name"):

        @S.register_step
        @S.step_dataclass
        class Bad(S.Step):
            """Bad name."""

            TYPE = "stream_select"


def test_every_registered_step_version_has_a_builder() -> None:
    from engine.builders.walker import BUILDERS, _load_builders

    _load_builders()
    missing = sorted(set(S.STEP_TYPES) - set(BUILDERS))
    assert missing == []


def test_loading_the_builders_imports_every_module_of_their_package(monkeypatch: pytest.MonkeyPatch) -> None:
    # What makes a fresh process (a Spark worker, the CLI) know every builder: importing a
    # module registers its builders. Here they are imported already, so watch the imports.
    import importlib
    import pkgutil

    import engine.builders as package
    from engine.builders.walker import _load_builders

    imported: list[str] = []
    real = importlib.import_module

    def watched(name: str, package: str | None = None) -> object:
        imported.append(name)
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", watched)
    _load_builders()
    modules = {f"engine.builders.{m.name}" for m in pkgutil.iter_modules(package.__path__)}
    assert modules and {n for n in imported if n.startswith("engine.builders.")} == modules


def test_step_invariants_name_the_offending_value() -> None:
    from engine.errors import PlanError

    source = S.StreamSource(ctx="src", topic="t", formats=S.Formats(key_format="KAFKA", value_format="JSON"), source_schema=SCHEMA)
    select = S.SelectExpression(alias="K", expression=E.ColumnRef("ID"))
    with pytest.raises(PlanError, match="`K` twice"):
        S.StreamSelect(ctx="Project", source=source, key_column_names=("K",), select_expressions=(select,))
    with pytest.raises(PlanError, match="ctx"):
        S.StreamFilter(ctx="", source=source, predicate=E.Literal(True, T.BOOLEAN))


def test_a_plan_saved_before_an_optional_field_existed_still_loads() -> None:
    # Adding an optional field with a default is the one allowed in-place change: plans
    # written before the field existed must load with the default.
    data = json.loads(serde.dumps(_plan()))
    del data["query"]["root"]["timestampColumn"]
    del data["command"]["windowInfo"]
    loaded = serde.statement_plan_from_json(data)
    assert loaded == _plan()


def test_a_call_records_its_function_version_only_from_version_2() -> None:
    # Plans saved before functions were versioned have no "semantics": they read as 1, and a
    # version-1 call still writes none, so their JSON is unchanged.
    args = (E.ColumnRef("X"),)
    assert "semantics" not in E.to_json(E.FunctionCall("LN", args))
    assert E.to_json(E.FunctionCall("LOG", args, semantics=2))["semantics"] == 2
    assert E.from_json({"kind": "call", "name": "LOG", "args": [E.to_json(args[0])]}).semantics == 1
    assert "semantics" not in E.to_json(E.Cast(args[0], T.INTEGER))
    assert E.to_json(E.Cast(args[0], T.DATE, semantics=2))["semantics"] == 2


def test_a_plan_value_that_breaks_its_invariant_is_a_serde_error_naming_it() -> None:
    data = json.loads(serde.dumps(_plan()))
    data["query"]["queryId"] = ""
    with pytest.raises(SerdeError, match=r"^Invalid statement plan\.query: A query plan needs a query id\.$"):
        serde.statement_plan_from_json(data)
    data = json.loads(serde.dumps(_plan()))
    data["query"]["root"]["ctx"] = ""
    with pytest.raises(
        SerdeError,
        match=r"^Invalid streamSinkV1: Step streamSinkV1 needs a non-empty query-context id \(ctx\)\.$",
    ):
        serde.statement_plan_from_json(data)
