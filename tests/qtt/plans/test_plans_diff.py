"""Semantic plan diffs keyed by query id and step ctx, and step completeness."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from qtt.plans.completeness import check_completeness, step_types_in
from qtt.plans.diff import (
    INTERNAL_SCHEMA,
    PLAN,
    mapping_changes,
    physical_plan_changes,
    plan_changes,
    step_index,
)


def plans() -> list[dict[str, Any]]:
    source = {"@type": "streamSourceV1", "ctx": "KsqlTopic/Source", "topic": "t"}
    where = {
        "@type": "streamFilterV1",
        "ctx": "WhereFilter",
        "source": source,
        "predicate": {"kind": "comparison", "op": ">"},
    }
    sink = {"@type": "streamSinkV1", "ctx": "KsqlTopic/Sink", "source": where, "topic": "OUT"}
    return [
        {"command": {"@type": "createStreamV1", "name": "T"}, "query": None, "config": {}},
        {
            "command": None,
            "query": {"queryId": "CSAS_OUT_0", "root": sink, "sink": "OUT"},
            "config": {},
        },
    ]


def test_step_index_flattens_inputs_to_references() -> None:
    index = step_index(plans()[1]["query"]["root"])
    assert list(index) == ["KsqlTopic/Source", "WhereFilter", "KsqlTopic/Sink"]
    assert index["WhereFilter"]["source"] == {"@input": "KsqlTopic/Source"}


def test_identical_plans_have_no_changes() -> None:
    assert plan_changes(plans(), plans()) == []


def test_a_changed_field_is_reported_by_query_step_and_field() -> None:
    new = plans()
    new[1]["query"]["root"]["source"]["predicate"]["op"] = "<"
    (change,) = plan_changes(plans(), new)
    assert (change.area, change.query_id, change.ctx) == (PLAN, "CSAS_OUT_0", "WhereFilter")
    assert (change.field, change.old, change.new) == ("predicate.op", ">", "<")
    assert change.render() == "[plan] CSAS_OUT_0 / WhereFilter / predicate.op: '>' -> '<'"


def test_a_new_step_version_shows_as_a_type_change_of_that_step() -> None:
    new = plans()
    new[1]["query"]["root"]["source"]["@type"] = "streamFilterV2"
    (change,) = plan_changes(plans(), new)
    assert (change.ctx, change.field, change.new) == ("WhereFilter", "@type", "streamFilterV2")


def test_removed_and_added_steps_are_named() -> None:
    new = plans()
    sink = new[1]["query"]["root"]
    sink["source"] = sink["source"]["source"]
    changes = plan_changes(plans(), new)
    assert any(c.ctx == "WhereFilter" and c.detail == "step removed" for c in changes)
    assert any(c.ctx == "KsqlTopic/Sink" and c.field == "source.@input" for c in changes)


def test_a_removed_field_is_reported_as_absent() -> None:
    new = plans()
    del new[1]["query"]["root"]["topic"]
    (change,) = plan_changes(plans(), new)
    assert change.field == "topic" and "<absent>" in change.render()


def test_command_changes_are_reported() -> None:
    new = copy.deepcopy(plans())
    new[0]["command"]["name"] = "U"
    changes = plan_changes(plans(), new)
    assert changes and all(c.area == PLAN for c in changes)


def test_internal_schema_changes_are_keyed_by_store_name() -> None:
    (change,) = mapping_changes(INTERNAL_SCHEMA, {"Agg-Materialize": "A"}, {}, "CTAS_X_0")
    assert change.where() == "CTAS_X_0 / Agg-Materialize" and change.area == INTERNAL_SCHEMA


def test_physical_plan_changes_name_the_step_they_touch() -> None:
    old = "MapInArrow Project(A#e0)#e1\n+- MapInArrow WhereFilter(A#e2)#e3\n"
    new = "MapInArrow Project(A#e0)#e1\n+- MapInArrow KsqlTopic_Source(A#e2)#e3\n"
    (change,) = physical_plan_changes("Q", old, new)
    assert (
        change.ctx == "WhereFilter, KsqlTopic/Source"
        and "-+- MapInArrow WhereFilter" in change.detail
    )


def test_step_types_in_finds_nested_steps_only() -> None:
    assert step_types_in(plans()) == {"streamSourceV1", "streamFilterV1", "streamSinkV1"}


def test_completeness_fails_for_a_step_without_a_planned_case() -> None:
    result = check_completeness({"aV1"}, registered={"aV1", "bV1"}, allowed={})
    assert not result.ok and result.missing == ("bV1",)
    assert "'bV1' has no planned case" in result.render()


def test_an_allow_listed_step_may_be_missing() -> None:
    result = check_completeness({"aV1"}, registered={"aV1", "bV1"}, allowed={"bV1": "why"})
    assert result.ok and result.allowed == ("bV1",)


@pytest.mark.parametrize("registered", [{"aV1", "bV1"}, {"aV1"}])
def test_a_stale_allow_list_entry_fails(registered: set[str]) -> None:
    used = {"aV1", "bV1"} & registered
    result = check_completeness(used, registered=registered, allowed={"bV1": "why"})
    assert not result.ok and result.stale_allowances == ("bV1",)
    assert "remove the entry" in result.render()
