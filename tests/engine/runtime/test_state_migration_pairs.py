"""The state migrations' table: every older version of a stateful step against each current
one is a migration or a refusal that names the pair; plans are rewritten step by step."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import ExecutionError
from engine.facade.engine import KsqlEngine
from engine.hosting import migrate as M
from engine.plan.steps import STEP_TYPES, walk_steps
from engine.plan.steps_native import StreamAggregateV3, StreamAggregateV4

SOURCE = "CREATE STREAM S (ID STRING KEY, NAME STRING, V INT) WITH (kafka_topic='s', value_format='JSON');"
AGGREGATE = "CREATE TABLE T AS SELECT NAME, COUNT(*) AS N FROM S WHERE V > 0 GROUP BY NAME;"


def _query(engine_sql: str = SOURCE + AGGREGATE):  # type: ignore[no-untyped-def]
    from engine.data.records import TopicInfo

    engine = KsqlEngine()
    for topic in ("s", "T"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(engine_sql)
    (query,) = engine.query_order()
    return query


def _with_aggregate(query, cls):  # type: ignore[no-untyped-def]
    """The query with its aggregate step built as ``cls`` (an older version)."""
    import dataclasses

    def rewrite(step):  # type: ignore[no-untyped-def]
        inputs = {name: rewrite(child) for name, child in step.inputs().items()}
        if step.TYPE.startswith("streamAggregate"):
            fields = {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}
            return cls(**{**fields, **inputs})
        return dataclasses.replace(step, **inputs) if inputs else step

    return dataclasses.replace(query, root=rewrite(query.root))


def test_every_older_version_of_a_stateful_step_is_migrated_or_refused_against_each_current_one() -> None:
    pairs = M.every_pair()
    assert {(old, new) for old, new, _ in pairs} == set(M.MIGRATIONS) | set(M.REFUSALS)
    assert not set(M.MIGRATIONS) & set(M.REFUSALS)
    migrated = sorted((old, new) for old, new, reason in pairs if reason is None)
    assert migrated == [
        ("streamAggregateV4", "streamAggregateV6"),
        ("streamAggregateV5", "streamAggregateV7"),
        ("streamWindowedAggregateV1", "streamWindowedAggregateV2"),
        ("tableAggregateV2", "tableAggregateV4"),
        ("tableAggregateV3", "tableAggregateV5"),
    ]
    for family, current in M.CURRENT.items():
        assert all(t in STEP_TYPES for t in current), family
    # Every registered version of a stateful family is either current or has its pairs listed.
    listed = {old for old, _, _ in pairs}
    for step_type in STEP_TYPES:
        family = M.family_of(step_type)
        if family in M.CURRENT and step_type not in M.CURRENT[family]:
            assert step_type in listed, step_type


def test_a_refusal_names_the_pair_and_why() -> None:
    assert M.refusal("streamAggregateV3", "streamAggregateV6") == (
        "Cannot migrate streamAggregateV3 -> streamAggregateV6: its running aggregates are grouped by key in "
        "Spark's state store, the current version's by task."
    )


def test_an_older_aggregate_is_rewritten_as_the_current_version_and_the_other_steps_stay() -> None:
    current = _query()
    older = _with_aggregate(current, StreamAggregateV4)
    migration = M.migrate_plan(older)
    assert migration.changes == (("streamAggregateV4", "streamAggregateV6"),)
    assert migration.migrated == current
    assert [s.TYPE for s in walk_steps(migration.migrated.root)] == [s.TYPE for s in walk_steps(current.root)]


def test_a_query_on_the_current_versions_has_nothing_to_migrate() -> None:
    assert M.migrate_plan(_query()).changes == ()


def test_an_aggregate_whose_state_differs_is_refused_naming_the_pair() -> None:
    with pytest.raises(ExecutionError) as raised:
        M.migrate_plan(_with_aggregate(_query(), StreamAggregateV3))
    assert str(raised.value).startswith("Cannot migrate streamAggregateV3 -> streamAggregateV6: ")


def test_the_command_refuses_a_folder_that_is_no_state_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from engine.cli import main

    code = main(["query", "migrate", "CTAS_T_0", "--state-dir", str(tmp_path), "--bootstrap-servers", "127.0.0.1:1"])
    assert code == 1
    assert capsys.readouterr().err == (
        f"kspark: ExecutionError: {tmp_path} is not the state dir of an application: it has no statements.json.\n"
    )
