"""The upper layer: statements become plans (no Spark needed)."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import AnalysisError, ParseError, TypeCheckError
from engine.facade.engine import KsqlEngine
from engine.parser import parse
from engine.plan import expr as E
from engine.plan import steps as S
from engine.plan import steps_native as N
from engine.plan.steps import walk_steps

SOURCE = "CREATE STREAM PAGEVIEWS (PAGEID STRING KEY, USERID STRING, VIEWTIME BIGINT) WITH (kafka_topic='pv', value_format='JSON');"


def _engine() -> KsqlEngine:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("pv"))
    engine.execute_sql(SOURCE)
    return engine


def _plan(sql: str):
    (result,) = _engine().execute_sql(sql)
    return result.plan


def test_projection_with_filter_plans_source_filter_select_sink() -> None:
    plan = _plan("CREATE STREAM LONG_VIEWS AS SELECT PAGEID, VIEWTIME * 2 AS T FROM PAGEVIEWS WHERE VIEWTIME > 10;")
    types = [s.TYPE for s in walk_steps(plan.query.root)]
    assert types == ["streamSourceV4", "streamFilterV2", "streamSelectV2", "streamSinkV3"]
    select = next(s for s in walk_steps(plan.query.root) if isinstance(s, N.StreamSelectV2))
    assert select.key_column_names == ("PAGEID",)
    assert [x.alias for x in select.select_expressions] == ["T"]
    assert plan.query.query_id == "CSAS_LONG_VIEWS_0"
    assert str(plan.command.schema) == "`PAGEID` STRING KEY, `T` BIGINT"


@pytest.mark.parametrize(
    ("sql", "source"),
    [
        ("CREATE STREAM S2 AS SELECT * FROM PAGEVIEWS;", "streamSourceV4"),
        ("INSERT INTO PAGEVIEWS SELECT * FROM PAGEVIEWS WHERE VIEWTIME > 1;", "streamSourceV4"),
        # A stateful step or a re-keying reads the records in their order across partitions.
        ("CREATE TABLE T AS SELECT USERID, COUNT(*) AS N FROM PAGEVIEWS GROUP BY USERID;", "streamSourceV3"),
        ("CREATE STREAM BY_USER AS SELECT USERID, PAGEID FROM PAGEVIEWS PARTITION BY USERID;", "streamSourceV3"),
        ("CREATE TABLE W AS SELECT USERID, COUNT(*) AS N FROM PAGEVIEWS WINDOW TUMBLING (SIZE 1 MINUTE) "
         "GROUP BY USERID;", "streamSourceV3"),
    ],
)
def test_a_stream_read_only_by_filters_and_projections_is_read_in_partition_order(sql: str, source: str) -> None:
    plan = _plan(sql)
    sources = {s.TYPE for s in walk_steps(plan.query.root) if "Source" in s.TYPE}
    assert sources == {source}


def test_partition_by_plans_a_select_key_step_with_the_new_key() -> None:
    plan = _plan("CREATE STREAM BY_USER AS SELECT USERID, PAGEID FROM PAGEVIEWS PARTITION BY USERID;")
    rekey = next(s for s in walk_steps(plan.query.root) if isinstance(s, S.StreamSelectKey))
    assert rekey.key_expressions[0].expression == E.ColumnRef("USERID")
    assert str(plan.command.schema) == "`USERID` STRING KEY, `PAGEID` STRING"


def test_sink_formats_default_to_the_source_and_can_be_overridden() -> None:
    plan = _plan("CREATE STREAM D WITH (value_format='DELIMITED') AS SELECT * FROM PAGEVIEWS;")
    assert plan.command.formats.value_format == "DELIMITED"
    assert plan.command.formats.key_format == "KAFKA"


def test_qualified_and_aliased_columns_resolve() -> None:
    plan = _plan("CREATE STREAM Q AS SELECT P.PAGEID, P.USERID AS U FROM PAGEVIEWS P;")
    assert str(plan.command.schema) == "`PAGEID` STRING KEY, `U` STRING"


def test_unknown_source_and_column_are_analysis_errors() -> None:
    engine = _engine()
    with pytest.raises(AnalysisError, match="NOPE does not exist"):
        engine.execute_sql("CREATE STREAM X AS SELECT * FROM NOPE;")
    with pytest.raises(AnalysisError, match="'MISSING' cannot be resolved"):
        engine.execute_sql("CREATE STREAM X AS SELECT PAGEID, MISSING FROM PAGEVIEWS;")


def test_type_errors_name_the_expression() -> None:
    with pytest.raises(TypeCheckError, match="Cannot compare"):
        _engine().execute_sql("CREATE STREAM X AS SELECT PAGEID FROM PAGEVIEWS WHERE USERID > 1;")


def test_parse_errors_carry_line_and_column() -> None:
    with pytest.raises(ParseError) as info:
        _engine().execute_sql("CREATE STREAM X AS\nSELECT * FORM PAGEVIEWS;")
    assert info.value.line == 2 and info.value.column == 10


def test_missing_topic_is_rejected_unless_partitions_are_given() -> None:
    engine = KsqlEngine()
    with pytest.raises(AnalysisError, match="Kafka topic does not exist: nowhere"):
        engine.execute_sql("CREATE STREAM S (ID INT KEY, V INT) WITH (kafka_topic='nowhere', value_format='JSON');")
    engine.execute_sql("CREATE STREAM S (ID INT KEY, V INT) WITH (kafka_topic='nowhere', value_format='JSON', partitions=2);")
    assert engine.source("S").topic == "nowhere"


def test_drop_of_a_source_read_by_a_query_names_the_querys_sink() -> None:
    engine = _engine()
    engine.execute_sql("CREATE STREAM COPY AS SELECT * FROM PAGEVIEWS;")
    with pytest.raises(AnalysisError, match=r"read from this source: \[COPY\]"):
        engine.execute_sql("DROP STREAM PAGEVIEWS;")
    engine.execute_sql("DROP STREAM COPY;")
    engine.execute_sql("DROP STREAM PAGEVIEWS;")
    assert engine.sources() == []


def test_saved_plans_apply_without_sql() -> None:
    from engine.plan import serde

    source_engine = _engine()
    (result,) = source_engine.execute_sql("CREATE STREAM COPY AS SELECT * FROM PAGEVIEWS;")
    text = serde.dumps(result.plan)
    replay = _engine()
    replay.execute_plan(serde.loads_statement_plan(text))
    assert replay.source("COPY") is not None
    assert list(replay.queries) == ["CSAS_COPY_0"]


@pytest.mark.parametrize(
    ("sql", "filter_type"),
    [
        # A table-table join sends its old rows: a miss deletes only a row that matched.
        ("CREATE TABLE J AS SELECT A.ID, A.V, B.W FROM A JOIN B ON A.ID = B.ID WHERE A.V > 1;", "tableFilterV3"),
        ("CREATE TABLE J AS SELECT A.ID, A.V, B.W FROM A LEFT JOIN B ON A.ID = B.ID WHERE B.W > 1;", "tableFilterV3"),
        # A foreign-key join and a source table do not: every miss is a delete.
        ("CREATE TABLE J AS SELECT A.ID, A.V, B.W FROM A JOIN B ON A.V = B.ID WHERE B.W > 1;", "tableFilterV2"),
        ("CREATE TABLE J AS SELECT ID, V FROM A WHERE V > 1;", "tableFilterV2"),
    ],
)
def test_a_table_filter_over_a_table_table_join_is_version_3(sql: str, filter_type: str) -> None:
    engine = KsqlEngine()
    for name in ("A", "B"):
        engine.create_topic(TopicInfo(name.lower()))
        engine.execute_sql(
            f"CREATE TABLE {name} (ID INT PRIMARY KEY, V INT, W INT) WITH (kafka_topic='{name.lower()}', value_format='JSON');"
        )
    (result,) = engine.execute_sql(sql)
    assert [s.TYPE for s in walk_steps(result.plan.query.root) if "Filter" in s.TYPE] == [filter_type]


@pytest.mark.parametrize(
    ("sql", "types"),
    [
        # Nothing level 2 adds: the V2 versions, whose builders compile at level 1.
        ("CREATE STREAM O AS SELECT ID, V * 2 AS W FROM S WHERE V > 1;", ["streamFilterV2", "streamSelectV2"]),
        # An integer division by a constant runs in Spark at level 2 only: that step is V3.
        ("CREATE STREAM O AS SELECT ID, V / 2 AS W FROM S WHERE V > 1;", ["streamFilterV2", "streamSelectV3"]),
        ("CREATE STREAM O AS SELECT ID, V AS W FROM S WHERE LEN(TRIM(N)) > 1;", ["streamFilterV3", "streamSelectV2"]),
        # A varying integer divisor falls back at both levels.
        ("CREATE STREAM O AS SELECT ID, V / ID AS W FROM S;", ["streamSelectV2"]),
        ("CREATE TABLE O AS SELECT ID, ROUND(D) AS R FROM T WHERE D % ID > 0;", ["tableFilterV4", "tableSelectV3"]),
    ],
)
def test_the_level_2_versions_are_planned_only_for_steps_with_a_form_only_level_2_runs_in_spark(sql, types) -> None:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("s"))
    engine.create_topic(TopicInfo("t"))
    engine.execute_sql(
        "CREATE STREAM S (ID INT KEY, V INT, N STRING) WITH (kafka_topic='s', value_format='JSON');"
        "CREATE TABLE T (ID INT PRIMARY KEY, D DOUBLE) WITH (kafka_topic='t', value_format='JSON');"
    )
    (result,) = engine.execute_sql(sql)
    steps = [s.TYPE for s in walk_steps(result.plan.query.root) if "Filter" in s.TYPE or "Select" in s.TYPE]
    assert steps == types


@pytest.mark.parametrize(
    ("sql", "filter_type"),
    [
        # ksqlDB forwards a table's changes to a push query with their old values: a miss
        # shows only as the deletion of a row that matched.
        ("SELECT * FROM A WHERE V > 1 EMIT CHANGES;", "tableFilterV3"),
        # An aggregation's input filter and a stream's filter are planned as for a CREATE ... AS.
        ("SELECT ID, COUNT(*) FROM A WHERE V > 1 GROUP BY ID EMIT CHANGES;", "tableFilterV2"),
        ("SELECT * FROM S WHERE V > 1 EMIT CHANGES;", "streamFilterV2"),
    ],
)
def test_a_push_query_filters_a_table_as_one_that_sends_its_old_rows(sql: str, filter_type: str) -> None:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("a"))
    engine.execute_sql("CREATE TABLE A (ID INT PRIMARY KEY, V INT) WITH (kafka_topic='a', value_format='JSON');")
    engine.execute_sql("CREATE STREAM S (ID INT KEY, V INT) WITH (kafka_topic='a', value_format='JSON');")
    parsed = parse(sql)[0]
    plan = engine.plan_transient_query(parsed.statement, parsed.text)
    assert [s.TYPE for s in walk_steps(plan.root) if "Filter" in s.TYPE] == [filter_type]


def test_the_persistence_defaults_give_a_source_its_value_format_and_unwrapped_single_values() -> None:
    config = {"ksql.persistence.default.format.value": "json", "ksql.persistence.wrap.single.values": "false"}
    engine = KsqlEngine(config)
    engine.execute_sql(
        "CREATE STREAM ONE (ID STRING KEY, V INT) WITH (kafka_topic='one', partitions=1);"
        "CREATE STREAM TWO (ID STRING KEY, V INT, W INT) WITH (kafka_topic='two', partitions=1);"
        "CREATE STREAM KEPT (ID STRING KEY, V INT) WITH (kafka_topic='kept', partitions=1, WRAP_SINGLE_VALUE=true);"
    )
    one, two, kept = (engine.metastore.get(name).formats for name in ("ONE", "TWO", "KEPT"))
    assert one.value_format == "JSON" and one.value_features == ("UNWRAP_SINGLES",)
    assert two.value_format == "JSON" and two.value_features == ()  # several value columns: nothing to unwrap
    assert kept.value_features == ("WRAP_SINGLES",)  # the WITH clause wins over the config
    with pytest.raises(AnalysisError, match="ksql.persistence.default.format.value"):
        KsqlEngine().execute_sql("CREATE STREAM NONE_SET (ID STRING KEY, V INT) WITH (kafka_topic='n', partitions=1);")
