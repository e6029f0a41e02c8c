"""Translation of each ksqlDB step type+version into kspark steps (no Spark needed)."""

from __future__ import annotations

from typing import Any

import pytest

from engine.errors import PlanError, UnsupportedFeatureError
from engine.ksqldb_import import import_plan
from engine.parser.ast import TypeReference
from engine.plan import expr as E
from engine.plan import steps as S
from engine.plan import steps_aggregate as A
from engine.plan import steps_join as J
from engine.plan import steps_ksqldb as K
from engine.plan import types as T
from engine.plan.plan import (
    AlterSourceCommand,
    CreateStreamCommand,
    CreateTableCommand,
    DropSourceCommand,
)
from engine.plan.schema import LogicalSchema
from engine.plan.serde import dumps, loads_statement_plan
from engine.plan.steps_native import StreamSinkV4, StreamSinkV5, TableSinkV4, TableSinkV5

SOURCE = "`ID` INTEGER KEY, `NAME` STRING, `QTY` INTEGER"


def _root(kp: Any, physical: dict[str, Any], table: bool = False) -> S.Step:
    out = kp.create("OUTPUT", "`ID` INTEGER KEY, `X` INTEGER", "OUTPUT", table=table)
    imported = import_plan(kp.query_plan(physical, out, [kp.create("INPUT", SOURCE, "input", table=table)]))
    query = imported.statements[-1].query
    assert query is not None
    return query.root


def _chain(root: S.Step) -> list[S.Step]:
    chain = [root]
    while "source" in root.inputs():
        root = root.inputs()["source"]
        chain.append(root)
    return chain


def test_stream_source_select_and_sink_carry_topic_formats_and_expressions(kp: Any) -> None:
    source = kp.stream_source(SOURCE, timestampColumn={"column": "QTY", "format": None})
    root = _root(kp, kp.sink(kp.select(source, ["(QTY * 2) AS X"], ["ID"])))
    sink, select, src = _chain(root)
    assert isinstance(sink, S.StreamSink) and sink.topic == "OUTPUT" and sink.ctx == "OUTPUT"
    assert isinstance(select, S.StreamSelect) and select.key_column_names == ("ID",)
    assert select.select_expressions[0].alias == "X"
    assert isinstance(select.select_expressions[0].expression, E.Arithmetic)
    assert isinstance(src, S.StreamSource) and src.topic == "input"
    assert src.formats.key_format == "KAFKA" and src.formats.value_format == "JSON"
    assert src.timestamp_column == S.TimestampColumn(column="QTY")
    assert [c.name for c in src.source_schema.columns] == ["ID", "NAME", "QTY"]


def test_imported_plans_are_valid_kspark_plans_that_round_trip_through_serde(kp: Any) -> None:
    physical = kp.sink(kp.select(kp.stream_source(SOURCE), ["UCASE(NAME) AS X"], ["ID"]))
    out = kp.create("OUTPUT", "`ID` INTEGER KEY, `X` STRING", "OUTPUT")
    imported = import_plan(kp.query_plan(physical, out, [kp.create("INPUT", SOURCE, "input")]))
    for statement in imported.statements:
        assert loads_statement_plan(dumps(statement)) == statement
    assert isinstance(imported.statements[0].command, CreateStreamCommand)
    assert imported.configs["ksql.streams.cache.max.bytes.buffering"] == "0"


def test_table_source_v1_and_v2_both_become_kspark_table_sources(kp: Any) -> None:
    for version in (1, 2):
        physical = kp.sink(kp.select(kp.table_source(SOURCE, version=version), ["QTY AS X"], ["ID"], table=True), table=True)
        sink, select, src = _chain(_root(kp, physical, table=True))
        assert isinstance(src, S.TableSource)
        assert isinstance(select, S.TableSelect) and isinstance(sink, S.TableSink)


def test_a_select_without_key_column_names_keeps_the_source_keys_as_before_ksqldb_0_10(kp: Any) -> None:
    _, select, _ = _chain(_root(kp, kp.sink(kp.select(kp.stream_source(SOURCE), ["QTY AS X"], None))))
    assert isinstance(select, S.StreamSelect) and select.key_column_names == ("ID",)


def test_a_projection_copying_the_key_under_its_own_name_drops_the_copy(kp: Any) -> None:
    prepare = kp.select(kp.stream_source(SOURCE), ["ID AS ID", "QTY AS X"], ["ID"], ctx="Aggregate/Prepare")
    _, select, _ = _chain(_root(kp, kp.sink(prepare)))
    assert isinstance(select, S.StreamSelect)
    assert [s.alias for s in select.select_expressions] == ["X"]


def test_a_key_and_a_value_column_of_one_name_from_different_expressions_is_unsupported(kp: Any) -> None:
    with pytest.raises(UnsupportedFeatureError, match="both as a key and as a value"):
        _root(kp, kp.sink(kp.select(kp.stream_source(SOURCE), ["QTY AS ID"], ["ID"])))


def test_filters_become_stream_and_table_filters(kp: Any) -> None:
    stream = kp.step("streamFilterV1", "WhereFilter", source=kp.stream_source(SOURCE), filterExpression="(QTY > 1)")
    _, _, filtered, _ = _chain(_root(kp, kp.sink(kp.select(stream, ["QTY AS X"], ["ID"]))))
    assert isinstance(filtered, S.StreamFilter) and isinstance(filtered.predicate, E.Comparison)
    table = kp.step("tableFilterV1", "WhereFilter", source=kp.table_source(SOURCE), filterExpression="(QTY > 1)")
    _, _, filtered, _ = _chain(_root(kp, kp.sink(kp.select(table, ["QTY AS X"], ["ID"], table=True), table=True), table=True))
    assert isinstance(filtered, S.TableFilter)


@pytest.mark.parametrize(
    ("wire", "expression", "key"),
    [
        ("streamSelectKeyV1", "NAME", "ROWKEY"),  # before multi-column keys: always ROWKEY
        ("streamSelectKeyV2", ["NAME"], "NAME"),  # a column keeps its name
        ("streamSelectKeyV2", ["UCASE(NAME)"], "KSQL_COL_0"),  # an expression gets a generated name
        ("streamSelectKeyV2", "NAME", "NAME"),  # 6.x wrote one expression as text
    ],
)
def test_select_key_names_the_new_key_as_ksqldb_did(kp: Any, wire: str, expression: Any, key: str) -> None:
    rekeyed = kp.step(wire, "PartitionBy", source=kp.stream_source(SOURCE), keyExpression=expression)
    _, select, select_key, _ = _chain(_root(kp, kp.sink(kp.select(rekeyed, ["QTY AS X"], None))))
    assert isinstance(select_key, S.StreamSelectKey)
    assert [k.alias for k in select_key.key_expressions] == [key]
    assert isinstance(select, S.StreamSelect) and select.key_column_names == (key,)


def test_a_projection_after_a_v1_re_keying_reads_rowkey_from_a_copy_of_the_old_key(kp: Any) -> None:
    schema = "`ROWKEY` STRING KEY, `L0` INTEGER"
    source = kp.stream_source(schema)
    rekeyed = kp.step("streamSelectKeyV1", "PartitionBy", source=source, keyExpression="L0")
    project = kp.select(rekeyed, ["ROWKEY AS OLD", "L0 AS L0"], None)
    out = kp.create("OUTPUT", "`ROWKEY` INTEGER KEY, `OLD` STRING, `L0` INTEGER", "OUTPUT")
    query = import_plan(kp.query_plan(kp.sink(project), out, [kp.create("INPUT", schema, "input")])).statements[-1].query
    assert query is not None
    _, select, select_key, copy, _ = _chain(query.root)
    assert isinstance(copy, S.StreamSelect) and copy.ctx == "PartitionBy/RowKeyValue"
    assert [(s.alias, s.expression) for s in copy.select_expressions] == [
        ("L0", E.ColumnRef("L0")), ("KSQL_ROWKEY_VALUE_0", E.ColumnRef("ROWKEY"))]
    assert isinstance(select_key, S.StreamSelectKey) and select_key.key_expressions[0].alias == "ROWKEY"
    assert isinstance(select, S.StreamSelect)
    assert select.select_expressions[0].expression == E.ColumnRef("KSQL_ROWKEY_VALUE_0")


@pytest.mark.parametrize(("selected", "key"), [([], ()), (["ID"], ("ID",))])
def test_a_stream_projection_leaving_out_its_key_re_keys_to_the_selected_keys_as_ksqldb_7_2(
    kp: Any, selected: list[str], key: tuple[str, ...]
) -> None:
    project = kp.select(kp.stream_source(SOURCE), ["QTY AS X"], ["ID"])
    project["selectedKeys"] = selected
    chain = _chain(_root(kp, kp.sink(project)))
    select = chain[1]
    assert isinstance(select, S.StreamSelect) and select.key_column_names == key
    if key:  # the key is selected: nothing to re-key
        assert not any(isinstance(s, S.StreamSelectKey) for s in chain)
    else:  # none selected: ksqlDB writes a null key
        rekey = chain[2]
        assert isinstance(rekey, S.StreamSelectKey) and rekey.key_expressions == ()
        assert rekey.ctx == "Project/SelectedKeys"


@pytest.mark.parametrize("expression", ["null", ["null"]])
def test_partition_by_null_imports_as_a_select_key_without_key_columns(kp: Any, expression: Any) -> None:
    rekeyed = kp.step("streamSelectKeyV2", "PartitionBy", source=kp.stream_source(SOURCE), keyExpression=expression)
    _, select, select_key, _ = _chain(_root(kp, kp.sink(kp.select(rekeyed, ["QTY AS X", "ID AS ID"], None))))
    assert isinstance(select_key, S.StreamSelectKey) and select_key.key_expressions == ()
    assert isinstance(select, S.StreamSelect) and select.key_column_names == ()


def _aggregate(kp: Any, group: dict[str, Any], agg_wire: str = "streamAggregateV1", **agg: Any) -> dict[str, Any]:
    fields = dict(source=group, internalFormats=kp.fmt(), nonAggregateColumns=["QTY"], aggregationFunctions=["SUM(QTY)"])
    fields.update(agg)
    return kp.step(agg_wire, "Aggregate/Aggregate", **fields)


def _group(kp: Any, wire: str, exprs: Any, source: dict[str, Any] | None = None) -> dict[str, Any]:
    return kp.step(wire, "Aggregate/GroupBy", source=source or kp.stream_source(SOURCE),
                   internalFormats=kp.fmt(), groupByExpressions=exprs)


def test_a_grouping_key_named_like_rowoffset_gets_a_generated_name_the_projection_renames(kp: Any) -> None:
    agg = _aggregate(kp, _group(kp, "streamGroupByV2", ["ROWOFFSET"]), nonAggregateColumns=["QTY", "ROWOFFSET"])
    project = kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], ["RO"], ctx="Aggregate/Project", table=True)
    _, select, aggregate, group, _ = _chain(_root(kp, kp.sink(project, table=True), table=True))
    assert isinstance(group, A.StreamGroupBy)
    assert [(k.alias, k.expression) for k in group.group_by_expressions] == [("KSQL_COL_0", E.ColumnRef("ROWOFFSET"))]
    assert isinstance(aggregate, A.StreamAggregate) and aggregate.key_column_names == ("KSQL_COL_0",)
    assert isinstance(select, S.TableSelect) and select.key_column_names == ("RO",)


def test_group_by_v2_names_keys_like_ksqldb_and_the_aggregate_numbers_its_results(kp: Any) -> None:
    agg = _aggregate(kp, _group(kp, "streamGroupByV2", ["NAME", "LEN(NAME)"]))
    project = kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], ["NAME", "LEN"], ctx="Aggregate/Project", table=True)
    _, select, aggregate, group, _ = _chain(_root(kp, kp.sink(project, table=True), table=True))
    assert isinstance(group, A.StreamGroupBy)
    assert [k.alias for k in group.group_by_expressions] == ["NAME", "KSQL_COL_0"]
    assert isinstance(aggregate, A.StreamAggregate)
    assert aggregate.key_column_names == ("NAME", "KSQL_COL_0")
    # the non-aggregate column holds the latest record's value, as in ksqlDB's store
    assert [a.alias for a in aggregate.aggregation_functions] == ["QTY", "KSQL_AGG_VARIABLE_0"]
    latest = aggregate.aggregation_functions[0].expression
    assert isinstance(latest, E.FunctionCall) and latest.name == "LATEST_BY_OFFSET"
    assert isinstance(select, S.TableSelect) and select.key_column_names == ("NAME", "LEN")


@pytest.mark.parametrize(
    ("wire", "table", "cls"),
    [("streamGroupByV1", False, K.StreamGroupByJoinedKey), ("tableGroupByV1", True, K.TableGroupByJoinedKey)],
)
def test_group_by_v1_with_several_expressions_becomes_the_joined_key_step(
    kp: Any, wire: str, table: bool, cls: type
) -> None:
    source = kp.table_source(SOURCE) if table else kp.stream_source(SOURCE)
    aggregate = "tableAggregateV1" if table else "streamAggregateV1"
    agg = _aggregate(kp, _group(kp, wire, ["NAME", "(QTY + 1)"], source), aggregate)
    physical = kp.sink(kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], None, table=True), table=True)
    out = kp.create("OUTPUT", "`KSQL_COL_0` STRING KEY, `X` INTEGER", "OUTPUT", table=True)
    imported = import_plan(kp.query_plan(physical, out, [kp.create("INPUT", SOURCE, "input", table=table)]))
    statement = imported.statements[-1]
    assert loads_statement_plan(dumps(statement)) == statement
    assert statement.query is not None
    chain = _chain(statement.query.root)
    group = chain[3]
    assert isinstance(group, cls)
    assert group.key_name == "KSQL_COL_0"
    assert [E.format_sql(e) for e in group.group_by_expressions] == ["NAME", "(QTY + 1)"]
    assert chain[2].key_column_names == ("KSQL_COL_0",)


@pytest.mark.parametrize(("exprs", "key"), [(["NAME", "QTY"], "KSQL_COL_1"), (["(QTY + 1)"], "KSQL_COL_1")])
def test_a_v1_grouping_key_name_avoids_the_names_the_query_projects_as_ksqldb_did(
    kp: Any, exprs: list[str], key: str
) -> None:
    agg = _aggregate(kp, _group(kp, "streamGroupByV1", exprs))
    project = kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS KSQL_COL_0"], None, ctx="Aggregate/Project", table=True)
    chain = _chain(_root(kp, kp.sink(project, table=True)))
    assert chain[2].key_column_names == (key,)
    assert [s.alias for s in chain[1].select_expressions] == ["KSQL_COL_0"]


def test_group_by_v1_with_one_expression_stays_the_plain_grouping_step(kp: Any) -> None:
    agg = _aggregate(kp, _group(kp, "streamGroupByV1", ["NAME"]))
    chain = _chain(_root(kp, kp.sink(kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], None, table=True), table=True)))
    assert isinstance(chain[3], A.StreamGroupBy)


def test_a_joined_key_step_needs_several_expressions() -> None:
    formats = S.Formats(key_format="KAFKA", value_format="JSON")
    source = S.StreamSource(
        ctx="KsqlTopic/Source", topic="t", formats=formats, source_schema=LogicalSchema.parse(SOURCE)
    )
    with pytest.raises(PlanError, match="joins several grouping expressions into one key, got 1"):
        K.StreamGroupByJoinedKey(
            ctx="Aggregate/GroupBy", source=source, key_name="K",
            group_by_expressions=(E.ColumnRef("NAME"),), internal_formats=formats,
        )


def test_group_by_key_and_table_group_by_map_to_their_kspark_steps(kp: Any) -> None:
    by_key = kp.step("streamGroupByKeyV1", "Aggregate/GroupBy", source=kp.stream_source(SOURCE), internalFormats=kp.fmt())
    chain = _chain(_root(kp, kp.sink(kp.select(_aggregate(kp, by_key), ["KSQL_AGG_VARIABLE_0 AS X"], ["ID"], table=True), table=True)))
    assert isinstance(chain[3], A.StreamGroupByKey)
    table_group = _group(kp, "tableGroupByV1", ["NAME"], source=kp.table_source(SOURCE))
    agg = _aggregate(kp, table_group, "tableAggregateV1", nonAggregateColumns=["NAME"])
    chain = _chain(_root(kp, kp.sink(kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], None, table=True), table=True), table=True))
    assert isinstance(chain[2], A.TableAggregate) and isinstance(chain[3], A.TableGroupBy)


def test_a_table_aggregate_keeps_its_non_aggregate_columns_as_the_last_applied_row_value(kp: Any) -> None:
    agg = _aggregate(kp, _group(kp, "tableGroupByV2", ["NAME"], kp.table_source(SOURCE)), "tableAggregateV1")
    _, select, aggregate, _, _ = _chain(
        _root(kp, kp.sink(kp.select(agg, ["QTY AS X"], None, table=True), table=True), table=True)
    )
    assert isinstance(aggregate, A.TableAggregate)
    first = aggregate.aggregation_functions[0]
    assert first.alias == "QTY"
    assert first.expression == E.FunctionCall("KSQL_NON_AGGREGATE_VALUE", (E.ColumnRef("QTY"),))
    assert isinstance(select, S.TableSelect) and select.select_expressions[0].expression == E.ColumnRef("QTY")


def test_having_over_an_aggregate_becomes_the_kspark_aggregate_having(kp: Any) -> None:
    agg = _aggregate(kp, _group(kp, "streamGroupByV2", ["NAME"]))
    having = kp.step("tableFilterV1", "Aggregate/HavingFilter", source=agg, filterExpression="(KSQL_AGG_VARIABLE_0 > 2)")
    chain = _chain(_root(kp, kp.sink(kp.select(having, ["KSQL_AGG_VARIABLE_0 AS X"], None, table=True), table=True)))
    aggregate = chain[2]
    assert isinstance(aggregate, A.StreamAggregate) and isinstance(aggregate.having, E.Comparison)


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        (" TUMBLING ( SIZE 1 MINUTES ) ", A.WindowSpec(type="TUMBLING", size_ms=60_000)),
        (" HOPPING ( SIZE 30 SECONDS , ADVANCE BY 10 SECONDS , GRACE PERIOD 2 MILLISECONDS ) ",
         A.WindowSpec(type="HOPPING", size_ms=30_000, advance_ms=10_000, grace_ms=2)),
        (" SESSION ( 5 SECONDS ) ", A.WindowSpec(type="SESSION", gap_ms=5_000)),
        ({"windowType": "TUMBLING", "size": {"value": 2, "timeUnit": "MILLISECONDS"},
          "gracePeriod": {"value": 1, "timeUnit": "MILLISECONDS"}, "retention": None, "emitStrategy": "CHANGES"},
         A.WindowSpec(type="TUMBLING", size_ms=2, grace_ms=1)),
        ({"windowType": "SESSION", "gap": {"value": 1, "timeUnit": "HOURS"}},
         A.WindowSpec(type="SESSION", gap_ms=3_600_000)),
    ],
)
def test_windowed_aggregates_read_both_forms_of_window_expression(kp: Any, window: Any, expected: A.WindowSpec) -> None:
    agg = _aggregate(kp, _group(kp, "streamGroupByV2", ["NAME"]), "streamWindowedAggregateV1", windowExpression=window)
    chain = _chain(_root(kp, kp.sink(kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], None, table=True), table=True)))
    assert isinstance(chain[2], A.StreamWindowedAggregate) and chain[2].window == expected


def test_suppress_closes_windows_with_the_aggregate_grace(kp: Any) -> None:
    window = " TUMBLING ( SIZE 1 SECONDS , GRACE PERIOD 5 MILLISECONDS ) "
    agg = _aggregate(kp, _group(kp, "streamGroupByV2", ["NAME"]), "streamWindowedAggregateV1", windowExpression=window)
    project = kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], None, ctx="Aggregate/Project", table=True)
    suppress = kp.step("tableSuppressV1", "Suppress", source=project, internalFormats=kp.fmt(),
                       refinementInfo={"outputRefinement": "FINAL"})
    chain = _chain(_root(kp, kp.sink(suppress, table=True)))
    assert isinstance(chain[1], A.TableSuppress) and chain[1].grace_ms == 5


@pytest.mark.parametrize(
    ("window", "grace", "retention"),
    [
        ({"windowType": "TUMBLING", "size": {"value": 2, "timeUnit": "SECONDS"},
          "gracePeriod": {"value": 5, "timeUnit": "MILLISECONDS"}, "emitStrategy": "FINAL"}, 5, 2_005),
        ({"windowType": "HOPPING", "size": {"value": 2, "timeUnit": "SECONDS"}, "advanceBy": {"value": 1, "timeUnit": "SECONDS"},
          "retention": {"value": 1, "timeUnit": "MINUTES"}, "gracePeriod": None, "emitStrategy": "FINAL"}, 0, 60_000),
        ({"windowType": "SESSION", "gap": {"value": 1, "timeUnit": "SECONDS"}, "emitStrategy": "FINAL"}, 0, None),
    ],
)
def test_an_aggregate_emitting_final_results_gets_the_emit_final_suppression(
    kp: Any, window: Any, grace: int, retention: int | None
) -> None:
    # ksqlDB 7.3 and later: EMIT FINAL is the windowed aggregate's emit strategy, no suppress step.
    agg = _aggregate(kp, _group(kp, "streamGroupByV2", ["NAME"]), "streamWindowedAggregateV1", windowExpression=window)
    chain = _chain(_root(kp, kp.sink(kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], None, table=True), table=True)))
    suppress, aggregate = chain[2], chain[3]
    assert isinstance(suppress, A.TableSuppressV2) and isinstance(aggregate, A.StreamWindowedAggregate)
    assert (suppress.grace_ms, suppress.retention_ms) == (grace, retention)


def test_flat_map_names_its_results_ksql_synth(kp: Any) -> None:
    source = kp.stream_source("`ID` INTEGER KEY, `XS` ARRAY<INTEGER>")
    flat = kp.step("streamFlatMapV1", "FlatMap", source=source, tableFunctions=["EXPLODE(XS)"])
    chain = _chain(_root(kp, kp.sink(kp.select(flat, ["KSQL_SYNTH_0 AS X"], ["ID"]))))
    assert isinstance(chain[2], S.StreamFlatMap)
    assert [f.alias for f in chain[2].table_functions] == ["KSQL_SYNTH_0"]


def _aliased(kp: Any, source: dict[str, Any], alias: str, side: str, table: bool = False) -> dict[str, Any]:
    exprs = [f"{c} AS {alias}_{c}" for c in ("NAME", "QTY", "ROWTIME", "ROWPARTITION", "ROWOFFSET", "ID")]
    return kp.select(source, exprs, [f"{alias}_ID"], ctx=f"PrependAlias{side}", table=table)


def test_a_stream_stream_join_takes_the_alias_prefix_of_its_inputs_and_durations_in_seconds(kp: Any) -> None:
    left = _aliased(kp, kp.stream_source(SOURCE, "left", "KafkaTopic_Left/Source"), "L", "Left")
    right = _aliased(kp, kp.stream_source(SOURCE, "right", "KafkaTopic_Right/Source"), "R", "Right")
    join = kp.step("streamStreamJoinV1", "Join", leftSource=left, rightSource=right, joinType="LEFT",
                   leftInternalFormats=kp.fmt(), rightInternalFormats=kp.fmt(), keyColName="L_ID",
                   beforeMillis=11.0, afterMillis=0.5, graceMillis=None)
    chain = _chain(_root(kp, kp.sink(kp.select(join, ["L_QTY AS X"], ["L_ID"]))))
    step = chain[2]
    assert isinstance(step, J.StreamStreamJoin)
    assert (step.left_alias, step.right_alias, step.key_column) == ("L", "R", "L_ID")
    assert (step.before_ms, step.after_ms, step.grace_ms) == (11_000, 500, None)
    assert isinstance(step.left, S.StreamSource) and step.left_key == E.ColumnRef("ID")


def test_stream_table_and_table_table_joins_map_to_their_kspark_steps(kp: Any) -> None:
    left = _aliased(kp, kp.stream_source(SOURCE, "left", "KafkaTopic_Left/Source"), "L", "Left")
    right = _aliased(kp, kp.table_source(SOURCE, "right", "KafkaTopic_Right/Source"), "R", "Right", table=True)
    join = kp.step("streamTableJoinV1", "Join", leftSource=left, rightSource=right, joinType="INNER",
                   internalFormats=kp.fmt(), keyColName="L_ID")
    assert isinstance(_chain(_root(kp, kp.sink(kp.select(join, ["R_QTY AS X"], ["L_ID"]))))[2], J.StreamTableJoin)
    left = _aliased(kp, kp.table_source(SOURCE, "left", "KafkaTopic_Left/Source"), "L", "Left", table=True)
    join = kp.step("tableTableJoinV1", "Join", leftSource=left, rightSource=right, joinType="OUTER")
    step = _chain(_root(kp, kp.sink(kp.select(join, ["R_QTY AS X"], None, table=True), table=True)))[2]
    assert isinstance(step, J.TableTableJoin) and step.join_type == "FULL" and step.key_column == "ROWKEY"


def test_a_table_filter_over_a_table_table_join_deletes_only_rows_that_matched(kp: Any) -> None:
    left = _aliased(kp, kp.table_source(SOURCE, "left", "KafkaTopic_Left/Source"), "L", "Left", table=True)
    right = _aliased(kp, kp.table_source(SOURCE, "right", "KafkaTopic_Right/Source"), "R", "Right", table=True)
    join = kp.step("tableTableJoinV1", "Join", leftSource=left, rightSource=right, joinType="INNER")
    where = kp.step("tableFilterV1", "WhereFilter", source=join, filterExpression="(R_QTY > 1)")
    step = _chain(_root(kp, kp.sink(kp.select(where, ["R_QTY AS X"], None, table=True), table=True)))[2]
    assert isinstance(step, S.TableFilterV3) and isinstance(step.source, J.TableTableJoin)


def test_a_join_input_projection_that_is_not_a_prefix_is_unsupported(kp: Any) -> None:
    left = kp.select(kp.stream_source(SOURCE), ["UCASE(NAME) AS L_NAME"], ["L_ID"], ctx="PrependAliasLeft")
    right = _aliased(kp, kp.table_source(SOURCE, "right"), "R", "Right", table=True)
    join = kp.step("streamTableJoinV1", "Join", leftSource=left, rightSource=right, joinType="INNER",
                   internalFormats=kp.fmt(), keyColName="L_ID")
    with pytest.raises(UnsupportedFeatureError, match="is not '<column> AS <alias>_<column>'"):
        _root(kp, kp.sink(kp.select(join, ["R_QTY AS X"], ["L_ID"])))


def test_table_select_key_is_reported_unsupported_with_its_reason(kp: Any) -> None:
    rekey = kp.step("tableSelectKeyV1", "PartitionBy", source=kp.table_source(SOURCE), internalFormats=kp.fmt(), keyExpression=["NAME"])
    with pytest.raises(UnsupportedFeatureError, match="no table re-keying step") as info:
        _root(kp, kp.sink(kp.select(rekey, ["QTY AS X"], None, table=True), table=True), table=True)
    assert info.value.feature == "step tableSelectKeyV1"


def test_table_select_key_by_the_tables_own_key_stands_for_the_table(kp: Any) -> None:
    rekey = kp.step("tableSelectKeyV1", "RightSourceKeyed", source=kp.table_source(SOURCE), internalFormats=kp.fmt(),
                    keyExpression=["ID"])
    root = _root(kp, kp.sink(kp.select(rekey, ["QTY AS X"], ["ID"], table=True), table=True), table=True)
    sink, select, source = _chain(root)
    assert isinstance(select, S.TableSelect) and isinstance(source, S.TableSource)


def test_an_unknown_step_type_is_unsupported_and_named(kp: Any) -> None:
    with pytest.raises(UnsupportedFeatureError, match="streamMagicV9") as info:
        _root(kp, kp.sink(kp.step("streamMagicV9", "Magic", source=kp.stream_source(SOURCE))))
    assert info.value.feature == "step streamMagicV9"


def test_a_function_kspark_does_not_have_is_unsupported_and_named(kp: Any) -> None:
    with pytest.raises(UnsupportedFeatureError, match="NO_SUCH_UDF") as info:
        _root(kp, kp.sink(kp.select(kp.stream_source(SOURCE), ["NO_SUCH_UDF(QTY) AS X"], ["ID"])))
    assert info.value.feature == "function NO_SUCH_UDF"


def test_an_unparsable_expression_is_a_plan_error_quoting_it(kp: Any) -> None:
    with pytest.raises(PlanError, match=r"cannot parse the expression '\(QTY \+\)'"):
        _root(kp, kp.sink(kp.select(kp.stream_source(SOURCE), ["(QTY +) AS X"], ["ID"])))


def test_a_missing_field_is_a_plan_error_naming_it(kp: Any) -> None:
    broken = kp.stream_source(SOURCE)
    del broken["topicName"]
    with pytest.raises(PlanError, match="has no 'topicName'"):
        _root(kp, kp.sink(kp.select(broken, ["QTY AS X"], ["ID"])))


def test_create_table_command_carries_window_info_in_milliseconds(kp: Any) -> None:
    ddl = kp.create("W", "`ID` INTEGER KEY, `N` BIGINT", "w", table=True,
                    windowInfo={"type": "HOPPING", "size": 0.005, "emitStrategy": "CHANGES"})
    command = import_plan(kp.plan(kp.entry(ddl))).statements[0].command
    assert isinstance(command, CreateTableCommand)
    assert command.window_info == S.WindowInfo(type="HOPPING", size_ms=5)


def test_a_pseudo_column_copied_under_its_own_name_is_dropped_and_stays_out_of_aggregates(kp: Any) -> None:
    prepare = kp.select(kp.stream_source(SOURCE), ["ROWTIME AS ROWTIME", "QTY AS QTY"], ["ID"], ctx="Aggregate/Prepare")
    group = _group(kp, "streamGroupByV2", ["QTY"], source=prepare)
    agg = _aggregate(kp, group, nonAggregateColumns=["ROWTIME", "QTY"], aggregationFunctions=["COUNT(ROWTIME)"])
    chain = _chain(_root(kp, kp.sink(kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], None, table=True), table=True)))
    aggregate, prepared = chain[2], chain[4]
    assert isinstance(prepared, S.StreamSelect) and [s.alias for s in prepared.select_expressions] == ["QTY"]
    assert isinstance(aggregate, A.StreamAggregate)
    assert [a.alias for a in aggregate.aggregation_functions] == ["KSQL_AGG_VARIABLE_0"]


def test_a_value_column_named_like_a_pseudo_column_is_unsupported(kp: Any) -> None:
    with pytest.raises(UnsupportedFeatureError, match="pseudo column"):
        _root(kp, kp.sink(kp.select(kp.stream_source(SOURCE), ["QTY AS ROWTIME"], ["ID"])))


def test_saved_schema_texts_are_parsed_once_and_a_bad_one_fails_every_time() -> None:
    from engine.ksqldb_import import values as V

    text = "`K` STRING KEY, `V` BIGINT"
    assert V.schema(text) is V.schema(text) and V.schema(text) == LogicalSchema.parse(text)
    for _ in range(2):
        with pytest.raises(PlanError, match="Unknown type 'NOT_A_TYPE'"):
            V.schema("`K` NOT_A_TYPE KEY")


def test_a_sink_naming_a_registered_schema_id_imports_as_the_v4_sink_that_writes_its_fields(kp: Any) -> None:
    for table, expected in ((False, StreamSinkV4), (True, TableSinkV4)):
        physical = kp.sink(kp.select(kp.table_source(SOURCE) if table else kp.stream_source(SOURCE),
                                     ["QTY AS X"], ["ID"], table=table), table=table)
        physical["formats"]["valueFormat"] = {"format": "AVRO", "properties": {"schemaId": "2"}}
        sink = _root(kp, physical, table=table)
        assert type(sink) is expected and dict(sink.formats.value_properties) == {"schema_id": "2"}
    plain = _root(kp, kp.sink(kp.select(kp.stream_source(SOURCE), ["QTY AS X"], ["ID"])))
    assert type(plain) is S.StreamSink  # no schema id: the V1 sink, as before


def test_a_windowed_sink_imports_as_the_v5_sink_that_places_records_by_the_key_alone(kp: Any) -> None:
    window = " TUMBLING ( SIZE 1 MINUTES ) "
    agg = _aggregate(kp, _group(kp, "streamGroupByV2", ["NAME"]), "streamWindowedAggregateV1", windowExpression=window)
    sink = _root(kp, kp.sink(kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], None, table=True), table=True))
    assert type(sink) is TableSinkV5  # Kafka Streams' WindowedStreamPartitioner, as kspark's V5 sinks
    plain = _root(kp, kp.sink(kp.select(_aggregate(kp, _group(kp, "streamGroupByV2", ["NAME"])),
                                        ["KSQL_AGG_VARIABLE_0 AS X"], None, table=True), table=True))
    assert type(plain) is S.TableSink


ORDERS = "`OID` INTEGER KEY, `CUST` INTEGER, `QTY` INTEGER"


def _foreign_key_join(kp: Any, **key: Any) -> dict[str, Any]:
    exprs = [f"{c} AS O_{c}" for c in ("CUST", "QTY", "ROWTIME", "ROWPARTITION", "ROWOFFSET", "OID")]
    left = kp.select(kp.table_source(ORDERS, "orders", "KafkaTopic_Left/Source"), exprs, ["O_OID"],
                     ctx="PrependAliasLeft", table=True)
    right = _aliased(kp, kp.table_source(SOURCE, "items", "KafkaTopic_Right/Source"), "I", "Right", table=True)
    return kp.step("fkTableTableJoinV1", "Join", leftSource=left, rightSource=right, formats=kp.fmt(), **key)


@pytest.mark.parametrize(
    ("key", "foreign_key"),
    [
        ({"joinType": "LEFT", "leftJoinColumnName": "O_CUST", "leftJoinExpression": None}, E.ColumnRef("CUST")),
        ({"joinType": "INNER", "leftJoinColumnName": None, "leftJoinExpression": "(O_CUST + 1)"},
         E.Arithmetic("+", E.ColumnRef("CUST"), E.Literal(1, T.INTEGER))),
    ],
)
def test_a_foreign_key_join_reads_its_foreign_key_over_the_left_inputs_own_columns(
    kp: Any, key: dict[str, Any], foreign_key: E.Expr
) -> None:
    join = _foreign_key_join(kp, **key)
    step = _chain(_root(kp, kp.sink(kp.select(join, ["I_NAME AS X"], ["O_OID"], table=True), table=True), table=True))[2]
    assert isinstance(step, J.ForeignKeyTableTableJoin)
    assert (step.left_alias, step.right_alias, step.key_column) == ("O", "I", "O_OID")
    assert step.join_type == key["joinType"] and step.foreign_key == foreign_key
    assert isinstance(step.left, S.TableSource) and isinstance(step.right, S.TableSource)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ({"leftJoinColumnName": "O_CUST", "leftJoinExpression": "O_CUST"}, "exactly one of leftJoinColumnName"),
        ({"leftJoinColumnName": None, "leftJoinExpression": None}, "exactly one of leftJoinColumnName"),
        ({"leftJoinColumnName": "CUST"}, "reads `CUST`, which is no column of the left input"),
    ],
)
def test_a_foreign_key_join_without_one_readable_foreign_key_is_a_plan_error(
    kp: Any, key: dict[str, Any], message: str
) -> None:
    join = _foreign_key_join(kp, joinType="INNER", **key)
    with pytest.raises(PlanError, match=message):
        _root(kp, kp.sink(kp.select(join, ["I_NAME AS X"], ["O_OID"], table=True), table=True), table=True)


def test_alter_source_imports_as_the_command_adding_value_columns(kp: Any) -> None:
    alter = {"@type": "alterSourceV1", "sourceName": "INPUT", "ksqlType": "STREAM",
             "newColumns": ["`EXTRA` STRING", "`AMOUNTS` ARRAY<DECIMAL(4, 2)>"]}
    imported = import_plan(kp.plan(kp.entry(kp.create("INPUT", SOURCE, "input")), kp.entry(alter)))
    command = imported.statements[-1].command
    assert isinstance(command, AlterSourceCommand)
    assert (command.name, command.kind) == ("INPUT", "STREAM")
    assert command.new_columns == LogicalSchema.parse("`EXTRA` STRING, `AMOUNTS` ARRAY<DECIMAL(4, 2)>")


def test_alter_source_adding_a_key_column_is_a_plan_error(kp: Any) -> None:
    alter = {"@type": "alterSourceV1", "sourceName": "INPUT", "ksqlType": "TABLE", "newColumns": ["`K2` STRING KEY"]}
    with pytest.raises(PlanError, match="not a value column"):
        import_plan(kp.plan(kp.entry(alter)))


@pytest.mark.parametrize("wire", ["tableSourceV1", "tableSourceV2"])
def test_both_table_source_versions_import_as_the_kspark_table_source(kp: Any, wire: str) -> None:
    source = kp.table_source(SOURCE, version=int(wire[-1]))
    assert source["@type"] == wire
    sink, select, src = _chain(_root(kp, kp.sink(kp.select(source, ["QTY AS X"], ["ID"], table=True), table=True),
                                     table=True))
    assert isinstance(src, S.TableSource) and src.topic == "input"


@pytest.mark.parametrize(("wire", "cls"), [("windowedStreamSourceV1", S.WindowedStreamSource),
                                           ("windowedTableSourceV1", S.WindowedTableSource)])
def test_windowed_sources_import_with_their_window_and_keep_it_to_the_sink(kp: Any, wire: str, cls: type) -> None:
    table = wire == "windowedTableSourceV1"
    source = kp.step(wire, "KsqlTopic/Source", topicName="input", formats=kp.fmt(), timestampColumn=None,
                     sourceSchema=SOURCE, windowInfo={"type": "HOPPING", "size": 30.0, "emitStrategy": None},
                     pseudoColumnVersion=1)
    root = _root(kp, kp.sink(kp.select(source, ["QTY AS X"], ["ID"], table=table), table=table), table=table)
    sink, select, src = _chain(root)
    assert isinstance(src, cls) and src.window_info == S.WindowInfo(type="HOPPING", size_ms=30_000)
    assert type(sink) is (TableSinkV5 if table else StreamSinkV5)


@pytest.mark.parametrize("name", ["KAFKA", "JSON", "JSON_SR", "AVRO", "PROTOBUF", "PROTOBUF_NOSR", "DELIMITED", "NONE"])
def test_every_ksqldb_format_imports_under_its_name(kp: Any, name: str) -> None:
    source = kp.stream_source(SOURCE)
    source["formats"] = {"keyFormat": {"format": "NONE" if name == "NONE" else "KAFKA", "properties": {}},
                         "valueFormat": {"format": "JSON" if name == "NONE" else name, "properties": {}}}
    src = _chain(_root(kp, kp.sink(kp.select(source, ["QTY AS X"], ["ID"]))))[-1]
    assert name in (src.formats.key_format, src.formats.value_format)


@pytest.mark.parametrize(
    ("value_format", "properties", "expected"),
    [
        ("DELIMITED", {"delimiter": "|"}, (("delimiter", "|"),)),
        ("AVRO", {"fullSchemaName": "io.example.Row"}, (("schema_full_name", "io.example.Row"),)),
        ("JSON_SR", {"schemaId": "7"}, (("schema_id", "7"),)),
        ("PROTOBUF", {"nullableRepresentation": "wrapper", "unwrapPrimitives": "true"},
         (("nullable_representation", "wrapper"),)),
        ("PROTOBUF", {"subjectName": "rows-value"}, (("subject_name", "rows-value"),)),
    ],
)
def test_format_properties_import_under_kspark_names(
    kp: Any, value_format: str, properties: dict[str, str], expected: tuple[tuple[str, str], ...]
) -> None:
    source = kp.stream_source(SOURCE)
    source["formats"] = {"keyFormat": {"format": "KAFKA", "properties": {}},
                         "valueFormat": {"format": value_format, "properties": properties}}
    src = _chain(_root(kp, kp.sink(kp.select(source, ["QTY AS X"], ["ID"]))))[-1]
    assert src.formats.value_properties == expected


@pytest.mark.parametrize(("properties", "feature"), [({"unwrapPrimitives": "false"}, "unwrapPrimitives=false"),
                                                     ({"noSuchProperty": "x"}, "noSuchProperty")])
def test_format_properties_kspark_does_not_implement_are_unsupported_and_named(
    kp: Any, properties: dict[str, str], feature: str
) -> None:
    source = kp.stream_source(SOURCE)
    source["formats"] = {"keyFormat": {"format": "KAFKA", "properties": {}},
                         "valueFormat": {"format": "PROTOBUF", "properties": properties}}
    with pytest.raises(UnsupportedFeatureError) as info:
        _root(kp, kp.sink(kp.select(source, ["QTY AS X"], ["ID"])))
    assert feature in info.value.feature


@pytest.mark.parametrize("feature", ["UNWRAP_SINGLES", "WRAP_SINGLES"])
def test_serde_features_import_on_keys_and_values_and_from_the_old_options(kp: Any, feature: str) -> None:
    source = kp.stream_source(SOURCE)
    source["formats"] = {**kp.fmt(), "keyFeatures": [feature], "valueFeatures": [feature]}
    src = _chain(_root(kp, kp.sink(kp.select(source, ["QTY AS X"], ["ID"]))))[-1]
    assert (src.formats.key_features, src.formats.value_features) == ((feature,), (feature,))
    source["formats"] = {**kp.fmt(), "options": [feature.replace("SINGLES", "SINGLE_VALUES")]}
    src = _chain(_root(kp, kp.sink(kp.select(source, ["QTY AS X"], ["ID"]))))[-1]
    assert src.formats.value_features == (feature,)


def test_drop_source_imports_as_the_drop_command(kp: Any) -> None:
    drop = {"@type": "dropSourceV1", "sourceName": "INPUT"}
    imported = import_plan(kp.plan(kp.entry(kp.create("INPUT", SOURCE, "input")), kp.entry(drop)))
    command = imported.statements[-1].command
    assert isinstance(command, DropSourceCommand) and command.name == "INPUT"


def test_a_dropped_type_no_longer_resolves_in_later_plans(kp: Any) -> None:
    register = {"@type": "registerTypeV1", "typeName": "ADDR", "type": "STRUCT<`CITY` STRING>"}
    drop = {"@type": "dropTypeV1", "typeName": "ADDR"}
    physical = kp.sink(kp.select(kp.stream_source(SOURCE), ["CAST(NULL AS ADDR) AS HOME"], ["ID"]))
    out = kp.create("OUTPUT", "`ID` INTEGER KEY, `HOME` STRUCT<`CITY` STRING>", "OUTPUT")

    def cast_type(*entries: dict[str, Any]) -> Any:
        query = import_plan(kp.plan(*entries)).statements[-1].query
        assert query is not None
        select = _chain(query.root)[1]
        assert isinstance(select, S.StreamSelect)
        cast = select.select_expressions[0].expression
        assert isinstance(cast, E.Cast)
        return cast.type

    assert cast_type(kp.entry(register), kp.entry(out, physical)) == T.parse_type("STRUCT<`CITY` STRING>")
    dropped = cast_type(kp.entry(register), kp.entry(drop), kp.entry(out, physical))
    assert isinstance(dropped, TypeReference) and dropped.name == "ADDR"  # no longer resolved


@pytest.mark.parametrize(
    ("config", "implemented", "other"),
    [
        ("ksql.streams.cache.max.bytes.buffering", "0", "10485760"),
        ("ksql.query.persistent.max.bytes.buffering.total", "-1", "10485760"),
    ],
)
def test_a_semantic_config_at_the_value_kspark_implements_imports_and_any_other_is_unsupported(
    kp: Any, config: str, implemented: str, other: str
) -> None:
    physical = kp.sink(kp.select(kp.stream_source(SOURCE), ["QTY AS X"], ["ID"]))
    out = kp.create("OUTPUT", "`ID` INTEGER KEY, `X` INTEGER", "OUTPUT")

    def saved(value: str) -> dict[str, Any]:
        plan = kp.query_plan(physical, out, [kp.create("INPUT", SOURCE, "input")])
        plan["configs"][config] = value
        return plan

    assert import_plan(saved(implemented)).configs[config] == implemented
    with pytest.raises(UnsupportedFeatureError) as info:
        import_plan(saved(other))
    assert info.value.feature == f"config {config}={other}"


def test_a_source_value_column_named_rowoffset_before_pseudo_column_version_1_is_unsupported(kp: Any) -> None:
    """ksqlDB before 7.1 (pseudoColumnVersion 0) let a value column be named ROWOFFSET; kspark's
    rows carry the record's offset under that name, so the plan is reported, not misread."""
    source = kp.stream_source("`ID` INTEGER KEY, `ROWOFFSET` STRING", pseudoColumnVersion=0)
    with pytest.raises(UnsupportedFeatureError, match="reads a value column `ROWOFFSET`") as info:
        _root(kp, kp.sink(kp.select(source, ["ROWOFFSET AS X"], ["ID"])))
    assert info.value.feature == "a value column named like a pseudo column"


def test_a_sink_projection_writing_windowstart_as_a_value_column_is_unsupported(kp: Any) -> None:
    """ksqlDB 6.0 wrote ``WINDOWSTART AS WINDOWSTART`` of a windowed source into the sink's
    values; kspark's rows carry the window bounds under those names, so the plan is reported."""
    source = kp.step("windowedStreamSourceV1", "KsqlTopic/Source", topicName="input", formats=kp.fmt(),
                     timestampColumn=None, sourceSchema=SOURCE, windowInfo={"type": "TUMBLING", "size": 30.0})
    with pytest.raises(UnsupportedFeatureError, match="writes a value column `WINDOWSTART`"):
        _root(kp, kp.sink(kp.select(source, ["WINDOWSTART AS WINDOWSTART", "QTY AS X"], None)))
    # Under an aggregation's projection the same copy is the pseudo column, left to kspark's rows.
    prepare = kp.select(source, ["WINDOWSTART AS WINDOWSTART", "QTY AS QTY"], ["ID"], ctx="Aggregate/Prepare")
    group = kp.step("streamGroupByKeyV1", "Aggregate/GroupBy", source=prepare, internalFormats=kp.fmt())
    agg = kp.step("streamAggregateV1", "Aggregate/Aggregate", source=group, internalFormats=kp.fmt(),
                  nonAggregateColumns=["QTY"], aggregationFunctions=["COUNT(QTY)"])
    root = _root(kp, kp.sink(kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], ["ID"], table=True), table=True))
    assert isinstance(root, TableSinkV5)


@pytest.mark.parametrize(("field", "expected"), [("keyColName", "L_ID"), ("keyName", "L_ID"), (None, "ROWKEY")])
def test_a_join_key_name_is_read_from_either_of_ksqldbs_field_names(kp: Any, field: str | None, expected: str) -> None:
    left = _aliased(kp, kp.stream_source(SOURCE, "left", "KafkaTopic_Left/Source"), "L", "Left")
    right = _aliased(kp, kp.table_source(SOURCE, "right", "KafkaTopic_Right/Source"), "R", "Right", table=True)
    key = {field: "L_ID"} if field else {}
    join = kp.step("streamTableJoinV1", "Join", leftSource=left, rightSource=right, joinType="INNER",
                   internalFormats=kp.fmt(), **key)
    step = _chain(_root(kp, kp.sink(kp.select(join, ["R_QTY AS X"], [expected]))))[2]
    assert isinstance(step, J.StreamTableJoin) and step.key_column == expected


def _suppressing_plan(kp: Any, buffer_bytes: str | None) -> dict[str, Any]:
    window = " TUMBLING ( SIZE 1 SECONDS ) "
    agg = _aggregate(kp, _group(kp, "streamGroupByV2", ["NAME"]), "streamWindowedAggregateV1", windowExpression=window)
    project = kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS X"], None, ctx="Aggregate/Project", table=True)
    suppress = kp.step("tableSuppressV1", "Suppress", source=project, internalFormats=kp.fmt(),
                       refinementInfo={"outputRefinement": "FINAL"})
    out = kp.create("OUTPUT", "`NAME` STRING KEY, `X` BIGINT", "OUTPUT", table=True,
                    windowInfo={"type": "TUMBLING", "size": 1.0})
    plan: dict[str, Any] = kp.query_plan(kp.sink(suppress, table=True), out, [kp.create("INPUT", SOURCE, "input")],
                                         query_id="CTAS_OUTPUT_0")
    if buffer_bytes is not None:
        plan["configs"]["ksql.suppress.buffer.size.bytes"] = buffer_bytes
    return plan


def test_suppress_buffer_size_bytes_minus_1_is_kspark_s_unbounded_emit_final_and_a_bound_is_unsupported(kp: Any) -> None:
    """ksql.suppress.buffer.size.bytes=-1 (ksqlDB's default): EMIT FINAL's tableSuppressV1 buffers
    without bound, as kspark's does; a bound stops ksqlDB's query when its buffer fills, by the
    buffer's own record-size estimate, so a suppressing plan saved with one is reported."""
    for unbounded in (None, "-1"):
        chain = _chain(import_plan(_suppressing_plan(kp, unbounded)).statements[-1].query.root)  # type: ignore[union-attr]
        assert isinstance(chain[1], A.TableSuppress)
    with pytest.raises(UnsupportedFeatureError) as info:
        import_plan(_suppressing_plan(kp, "1048576"))
    assert info.value.feature == "config ksql.suppress.buffer.size.bytes=1048576"
    # Without a suppression the bound bounds nothing.
    physical = kp.sink(kp.select(kp.stream_source(SOURCE), ["QTY AS X"], ["ID"]))
    plan = kp.query_plan(physical, kp.create("OUTPUT", "`ID` INTEGER KEY, `X` INTEGER", "OUTPUT"),
                         [kp.create("INPUT", SOURCE, "input")])
    plan["configs"]["ksql.suppress.buffer.size.bytes"] = "1048576"
    assert import_plan(plan).statements
