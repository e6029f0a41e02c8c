"""Push queries plan like persistent ones, with ksqlDB's transient projection (no Spark needed)."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import AnalysisError, UnsupportedFeatureError
from engine.facade.engine import KsqlEngine
from engine.parser import ast, parse
from engine.plan import steps_native as N
from engine.plan.plan import TransientQueryPlan
from engine.plan.steps import walk_steps

SOURCES = """
CREATE STREAM PAGEVIEWS (PAGEID STRING KEY, USERID STRING, VIEWTIME BIGINT) WITH (kafka_topic='pv', value_format='JSON');
CREATE TABLE USERS (ID STRING PRIMARY KEY, NAME STRING) WITH (kafka_topic='users', value_format='JSON');
CREATE STREAM WINDOWED (K STRING KEY, N INT) WITH (kafka_topic='w', value_format='JSON', window_type='TUMBLING', window_size='1 SECOND');
"""


@pytest.fixture
def engine() -> KsqlEngine:
    engine = KsqlEngine()
    for topic in ("pv", "users", "w"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(SOURCES)
    return engine


def _plan(engine: KsqlEngine, text: str) -> TransientQueryPlan:
    (parsed,) = parse(text)
    assert isinstance(parsed.statement, ast.Query)
    return engine.plan_transient_query(parsed.statement, parsed.text)


def test_a_push_query_plans_up_to_its_projection_and_registers_nothing(engine: KsqlEngine) -> None:
    before = ([s.name for s in engine.metastore.all()], dict(engine.queries), list(engine.plans))
    plan = _plan(engine, "SELECT USERID, VIEWTIME * 2 AS T FROM PAGEVIEWS WHERE VIEWTIME > 1 EMIT CHANGES LIMIT 3;")
    assert [s.TYPE for s in walk_steps(plan.root)] == ["streamSourceV3", "streamFilterV2", "streamSelectV2"]
    assert str(plan.schema) == "`USERID` STRING, `T` BIGINT"  # the key need not be selected
    assert (plan.limit, plan.is_table, plan.sources) == (3, False, ("PAGEVIEWS",))
    assert plan.query_id.startswith("transient_PAGEVIEWS_")
    assert ([s.name for s in engine.metastore.all()], dict(engine.queries), list(engine.plans)) == before


def test_columns_keep_the_select_order_and_a_selected_key_shows_in_deletions(engine: KsqlEngine) -> None:
    plan = _plan(engine, "SELECT NAME, ID FROM USERS EMIT CHANGES;")
    assert str(plan.schema) == "`NAME` STRING, `ID` STRING"
    assert plan.is_table and plan.limit is None
    select = plan.root
    assert isinstance(select, N.TableSelectV2)
    assert plan.tombstone_keys == (None, select.key_column_names[0])


def test_a_grouped_push_query_need_not_select_its_grouping_columns(engine: KsqlEngine) -> None:
    plan = _plan(engine, "SELECT COUNT(*) AS N FROM PAGEVIEWS GROUP BY USERID EMIT CHANGES;")
    assert str(plan.schema) == "`N` BIGINT"
    assert plan.is_table and plan.tombstone_keys == (None,)
    keyed = _plan(engine, "SELECT USERID, COUNT(*) AS N FROM PAGEVIEWS GROUP BY USERID EMIT CHANGES;")
    assert str(keyed.schema) == "`USERID` STRING, `N` BIGINT"
    assert keyed.tombstone_keys[0] is not None and keyed.tombstone_keys[1] is None


def test_star_over_a_windowed_source_selects_the_window_bounds_after_the_key(engine: KsqlEngine) -> None:
    plan = _plan(engine, "SELECT * FROM WINDOWED EMIT CHANGES;")
    assert str(plan.schema) == "`K` STRING, `WINDOWSTART` BIGINT, `WINDOWEND` BIGINT, `N` INTEGER"


def test_window_bounds_of_a_windowed_aggregate_can_be_selected(engine: KsqlEngine) -> None:
    plan = _plan(
        engine,
        "SELECT WINDOWSTART, USERID, COUNT(*) AS N FROM PAGEVIEWS WINDOW TUMBLING (SIZE 1 MINUTE) "
        "GROUP BY USERID EMIT CHANGES;",
    )
    assert str(plan.schema) == "`WINDOWSTART` BIGINT, `USERID` STRING, `N` BIGINT"


def test_a_windowed_deletion_shows_the_window_bounds_it_selects(engine: KsqlEngine) -> None:
    plan = _plan(
        engine,
        "SELECT USERID, WINDOWEND AS UNTIL, COUNT(*) AS N, WINDOWSTART FROM PAGEVIEWS "
        "WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY USERID EMIT CHANGES;",
    )
    assert str(plan.schema) == "`USERID` STRING, `UNTIL` BIGINT, `N` BIGINT, `WINDOWSTART` BIGINT"
    key, until, count, start = plan.tombstone_keys
    assert key is not None and key not in ("USERID", "UNTIL", "N", "WINDOWSTART")  # a hidden key column
    assert (until, count, start) == ("WINDOWEND", None, "WINDOWSTART")  # the bounds, however named


def test_a_persistent_query_still_needs_its_key_in_the_projection(engine: KsqlEngine) -> None:
    with pytest.raises(AnalysisError, match="must include the grouping expression USERID"):
        engine.execute_sql("CREATE TABLE C AS SELECT COUNT(*) AS N FROM PAGEVIEWS GROUP BY USERID;")


@pytest.mark.parametrize(
    "statement",
    [
        "CREATE STREAM ONLY_KEY AS SELECT PAGEID FROM PAGEVIEWS;",
        "CREATE TABLE ONLY_ID AS SELECT ID FROM USERS;",
    ],
)
def test_a_persistent_query_selecting_only_its_keys_is_refused(engine: KsqlEngine, statement: str) -> None:
    with pytest.raises(AnalysisError, match=r"^The projection contains no value columns\.$"):
        engine.execute_sql(statement)


def test_a_push_query_may_select_only_the_key(engine: KsqlEngine) -> None:
    assert str(_plan(engine, "SELECT PAGEID FROM PAGEVIEWS EMIT CHANGES;").schema) == "`PAGEID` STRING"


def test_a_pull_query_is_not_supported_yet(engine: KsqlEngine) -> None:
    with pytest.raises(UnsupportedFeatureError, match="Pull queries .* not supported yet.*EMIT CHANGES"):
        _plan(engine, "SELECT * FROM USERS WHERE ID = 'a';")


def test_an_unknown_source_is_an_analysis_error(engine: KsqlEngine) -> None:
    with pytest.raises(AnalysisError, match="NOPE"):
        _plan(engine, "SELECT * FROM NOPE EMIT CHANGES;")


def test_a_stream_table_join_plans_as_a_push_query(engine: KsqlEngine) -> None:
    plan = _plan(engine, "SELECT P.USERID, U.NAME FROM PAGEVIEWS P JOIN USERS U ON P.USERID = U.ID EMIT CHANGES;")
    assert str(plan.schema) == "`USERID` STRING, `NAME` STRING"
    assert "streamTableJoinV1" in {s.TYPE for s in walk_steps(plan.root)}
    assert not plan.is_table and plan.sources == ("PAGEVIEWS", "USERS")
