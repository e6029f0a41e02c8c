"""Imported ksqlDB plans run on the bounded runtime and give ksqlDB's records."""

from __future__ import annotations

from typing import Any

import pytest

from engine.data.records import TopicInfo, TopicRecord
from engine.errors import ExecutionError
from engine.facade.engine import KsqlEngine
from engine.ksqldb_import import import_plan
from engine.plan.serde import dumps

SOURCE = "`ID` INTEGER KEY, `NAME` STRING, `QTY` INTEGER"


def _run(
    plan: dict[str, Any], inputs: list[TopicRecord], release: str | None = None
) -> dict[str, list[tuple[Any, Any]]]:
    imported = import_plan(plan, release=release)
    engine = KsqlEngine(dict(imported.configs))
    for topic in {r.topic for r in inputs}:
        engine.create_topic(TopicInfo(topic))
    for statement in imported.statements:
        engine.restore(statement)
    engine.produce(inputs)
    produced = engine.run()
    engine.close()
    return {t: [(r.key, r.value) for r in records] for t, records in produced.items()}


def test_an_imported_filter_and_projection_runs(spark: Any, kp: Any) -> None:
    where = kp.step("streamFilterV1", "WhereFilter", source=kp.stream_source(SOURCE), filterExpression="(QTY > 1)")
    physical = kp.sink(kp.select(where, ["UCASE(NAME) AS N", "(QTY * 10) AS Q"], ["ID"]))
    out = kp.create("OUTPUT", "`ID` INTEGER KEY, `N` STRING, `Q` INTEGER", "OUTPUT")
    plan = kp.query_plan(physical, out, [kp.create("INPUT", SOURCE, "input")])
    outputs = _run(plan, [
        TopicRecord("input", 1, {"NAME": "a", "QTY": 1}, 10),
        TopicRecord("input", 2, {"NAME": "b", "QTY": 2}, 20),
    ])
    assert outputs == {"OUTPUT": [(2, {"N": "B", "Q": 20})]}


def test_an_imported_aggregation_with_having_runs(spark: Any, kp: Any) -> None:
    prepare = kp.select(kp.stream_source(SOURCE), ["NAME AS NAME", "QTY AS QTY"], ["ID"], ctx="Aggregate/Prepare")
    group = kp.step("streamGroupByV2", "Aggregate/GroupBy", source=prepare, internalFormats=kp.fmt(),
                    groupByExpressions=["NAME"])
    agg = kp.step("streamAggregateV1", "Aggregate/Aggregate", source=group, internalFormats=kp.fmt(),
                  nonAggregateColumns=["NAME", "QTY"], aggregationFunctions=["SUM(QTY)"])
    having = kp.step("tableFilterV1", "Aggregate/HavingFilter", source=agg, filterExpression="(KSQL_AGG_VARIABLE_0 > 2)")
    project = kp.select(having, ["KSQL_AGG_VARIABLE_0 AS TOTAL", "QTY AS LAST"], ["NAME"], ctx="Aggregate/Project", table=True)
    out = kp.create("OUTPUT", "`NAME` STRING KEY, `TOTAL` INTEGER, `LAST` INTEGER", "OUTPUT", table=True)
    plan = kp.query_plan(kp.sink(project, table=True), out, [kp.create("INPUT", SOURCE, "input")], query_id="CTAS_OUTPUT_0")
    outputs = _run(plan, [
        TopicRecord("input", 1, {"NAME": "a", "QTY": 2}, 10),
        TopicRecord("input", 2, {"NAME": "a", "QTY": 3}, 20),
        TopicRecord("input", 3, {"NAME": "b", "QTY": 1}, 30),
    ])
    assert outputs == {"OUTPUT": [("a", {"TOTAL": 5, "LAST": 3})]}


def _stream_table_join(kp: Any, items: dict[str, Any], join_type: str) -> dict[str, Any]:
    """The plan of ORDERS joined with the table ITEMS (read through the step ``items``)."""
    def aliased(source: dict[str, Any], alias: str, side: str, table: bool) -> dict[str, Any]:
        exprs = [f"{c} AS {alias}_{c}" for c in ("NAME", "QTY", "ROWTIME", "ROWPARTITION", "ROWOFFSET", "ID")]
        return kp.select(source, exprs, [f"{alias}_ID"], ctx=f"PrependAlias{side}", table=table)

    left = aliased(kp.stream_source(SOURCE, "orders", "KafkaTopic_Left/Source"), "O", "Left", False)
    right = aliased(items, "I", "Right", True)
    join = kp.step("streamTableJoinV1", "Join", leftSource=left, rightSource=right, joinType=join_type,
                   internalFormats=kp.fmt(), keyColName="O_ID")
    physical = kp.sink(kp.select(join, ["O_QTY AS QTY", "I_NAME AS ITEM"], ["O_ID"]))
    out = kp.create("OUTPUT", "`O_ID` INTEGER KEY, `QTY` INTEGER, `ITEM` STRING", "OUTPUT")
    return kp.query_plan(
        physical, out,
        [kp.create("ORDERS", SOURCE, "orders"), kp.create("ITEMS", SOURCE, "items", table=True)],
        sources=("ORDERS", "ITEMS"),
    )


def test_an_imported_stream_table_join_runs(spark: Any, kp: Any) -> None:
    plan = _stream_table_join(kp, kp.table_source(SOURCE, "items", "KafkaTopic_Right/Source"), "LEFT")
    outputs = _run(plan, [
        TopicRecord("orders", 1, {"NAME": "x", "QTY": 5}, 10),
        TopicRecord("items", 1, {"NAME": "pear", "QTY": 0}, 20),
        TopicRecord("orders", 1, {"NAME": "y", "QTY": 6}, 30),
    ])
    assert outputs == {"OUTPUT": [(1, {"QTY": 5, "ITEM": None}), (1, {"QTY": 6, "ITEM": "pear"})]}


def test_a_table_re_keyed_by_its_own_key_for_a_join_runs_as_the_table(spark: Any, kp: Any) -> None:
    """ksqlDB's tableSelectKeyV1 by the table's key column only changes the key's format."""
    items = kp.table_source(SOURCE, "items", "KafkaTopic_Right/Source")
    rekeyed = kp.step("tableSelectKeyV1", "RightSourceKeyed", source=items, internalFormats=kp.fmt(),
                      keyExpression=["ID"])
    outputs = _run(_stream_table_join(kp, rekeyed, "INNER"), [
        TopicRecord("items", 1, {"NAME": "pear", "QTY": 0}, 10),
        TopicRecord("orders", 1, {"NAME": "x", "QTY": 5}, 20),
        TopicRecord("orders", 2, {"NAME": "y", "QTY": 6}, 30),
    ])
    assert outputs == {"OUTPUT": [(1, {"QTY": 5, "ITEM": "pear"})]}


def test_a_v1_grouping_by_several_expressions_keys_by_their_joined_texts(spark: Any, kp: Any) -> None:
    group = kp.step("streamGroupByV1", "Aggregate/GroupBy", source=kp.stream_source(SOURCE), internalFormats=kp.fmt(),
                    groupByExpressions=["NAME", "(QTY * 2)"])
    agg = kp.step("streamAggregateV1", "Aggregate/Aggregate", source=group, internalFormats=kp.fmt(),
                  nonAggregateColumns=["NAME", "QTY"], aggregationFunctions=["COUNT(QTY)"])
    project = kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS N"], None, ctx="Aggregate/Project", table=True)
    out = kp.create("OUTPUT", "`KSQL_COL_0` STRING KEY, `N` BIGINT", "OUTPUT", table=True)
    plan = kp.query_plan(kp.sink(project, table=True), out, [kp.create("INPUT", SOURCE, "input")],
                         query_id="CTAS_OUTPUT_0")
    outputs = _run(plan, [
        TopicRecord("input", 1, {"NAME": "a", "QTY": 1}, 10),
        TopicRecord("input", 2, {"NAME": "b", "QTY": 1}, 20),
        TopicRecord("input", 3, {"NAME": None, "QTY": 1}, 25),  # a null grouping value: dropped
        TopicRecord("input", 4, {"NAME": "a", "QTY": 1}, 30),
    ])
    assert outputs == {"OUTPUT": [("a|+|2", {"N": 1}), ("b|+|2", {"N": 1}), ("a|+|2", {"N": 2})]}


def test_a_v1_table_grouping_by_several_expressions_moves_rows_between_joined_keys(spark: Any, kp: Any) -> None:
    group = kp.step("tableGroupByV1", "Aggregate/GroupBy", source=kp.table_source(SOURCE), internalFormats=kp.fmt(),
                    groupByExpressions=["NAME", "QTY"])
    agg = kp.step("tableAggregateV1", "Aggregate/Aggregate", source=group, internalFormats=kp.fmt(),
                  nonAggregateColumns=["NAME", "QTY"], aggregationFunctions=["COUNT(QTY)"])
    project = kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS N"], None, ctx="Aggregate/Project", table=True)
    out = kp.create("OUTPUT", "`KSQL_COL_0` STRING KEY, `N` BIGINT", "OUTPUT", table=True)
    plan = kp.query_plan(kp.sink(project, table=True), out, [kp.create("INPUT", SOURCE, "input", table=True)],
                         query_id="CTAS_OUTPUT_0")
    outputs = _run(plan, [
        TopicRecord("input", 1, {"NAME": "a", "QTY": 1}, 10),
        TopicRecord("input", 1, {"NAME": "b", "QTY": 1}, 20),
    ])
    assert outputs == {"OUTPUT": [("a|+|1", {"N": 1}), ("a|+|1", {"N": 0}), ("b|+|1", {"N": 1})]}


def _table_sum_plan(kp: Any) -> dict[str, Any]:
    group = kp.step("tableGroupByV2", "Aggregate/GroupBy", source=kp.table_source(SOURCE), internalFormats=kp.fmt(),
                    groupByExpressions=["NAME"])
    agg = kp.step("tableAggregateV1", "Aggregate/Aggregate", source=group, internalFormats=kp.fmt(),
                  nonAggregateColumns=["NAME", "QTY"], aggregationFunctions=["SUM(QTY)"])
    project = kp.select(agg, ["KSQL_AGG_VARIABLE_0 AS TOTAL"], None, ctx="Aggregate/Project", table=True)
    out = kp.create("OUTPUT", "`NAME` STRING KEY, `TOTAL` INTEGER", "OUTPUT", table=True)
    return kp.query_plan(kp.sink(project, table=True), out, [kp.create("INPUT", SOURCE, "input", table=True)],
                         query_id="CTAS_OUTPUT_0")


TABLE_UPDATES = [
    TopicRecord("input", 1, {"NAME": "a", "QTY": 2}, 10),
    TopicRecord("input", 2, {"NAME": "a", "QTY": 3}, 20),
    TopicRecord("input", 1, {"NAME": "a", "QTY": 7}, 30),  # a change within group a
    TopicRecord("input", 2, {"NAME": "b", "QTY": 3}, 40),  # a move from a to b
]


def test_a_table_aggregate_saved_before_kip_904_emits_a_change_within_its_group_twice(spark: Any, kp: Any) -> None:
    plan = _table_sum_plan(kp)
    assert "tableAggregateTwoUpdatesV1" in dumps(import_plan(plan, release="7.4.0").statements[-1])
    assert "tableAggregateTwoUpdatesV1" not in dumps(import_plan(plan, release="8.0.0").statements[-1])
    old = _run(plan, TABLE_UPDATES, release="7.4.0")
    assert old == {"OUTPUT": [
        ("a", {"TOTAL": 2}), ("a", {"TOTAL": 5}),
        ("a", {"TOTAL": 3}), ("a", {"TOTAL": 10}),  # retraction of 2, then addition of 7
        ("a", {"TOTAL": 7}), ("b", {"TOTAL": 3}),
    ]}


def test_a_table_aggregate_saved_by_a_release_with_kip_904_or_of_unknown_release_emits_once(
    spark: Any, kp: Any
) -> None:
    plan = _table_sum_plan(kp)
    once = {"OUTPUT": [
        ("a", {"TOTAL": 2}), ("a", {"TOTAL": 5}), ("a", {"TOTAL": 10}), ("a", {"TOTAL": 7}), ("b", {"TOTAL": 3}),
    ]}
    assert _run(plan, TABLE_UPDATES, release="8.0.0") == once
    assert _run(plan, TABLE_UPDATES) == once


def test_a_grouping_column_selected_under_its_own_name_before_key_column_names_is_a_value_column(
    spark: Any, kp: Any
) -> None:
    # ksqlDB 6.0 and earlier: the last projection names no keys; the key is the DDL's ROWKEY
    # and `NAME AS NAME` copies the grouping value into the value.
    group = kp.step("streamGroupByV1", "Aggregate/GroupBy", source=kp.stream_source(SOURCE), internalFormats=kp.fmt(),
                    groupByExpressions=["NAME"])
    agg = kp.step("streamAggregateV1", "Aggregate/Aggregate", source=group, internalFormats=kp.fmt(),
                  nonAggregateColumns=["NAME", "QTY"], aggregationFunctions=["COUNT(QTY)"])
    project = kp.select(agg, ["NAME AS NAME", "KSQL_AGG_VARIABLE_0 AS N"], None, ctx="Aggregate/Project", table=True)
    out = kp.create("OUTPUT", "`ROWKEY` STRING KEY, `NAME` STRING, `N` BIGINT", "OUTPUT", table=True)
    plan = kp.query_plan(kp.sink(project, table=True), out, [kp.create("INPUT", SOURCE, "input")],
                         query_id="CTAS_OUTPUT_0")
    outputs = _run(plan, [
        TopicRecord("input", 1, {"NAME": "a", "QTY": 1}, 10),
        TopicRecord("input", 2, {"NAME": "a", "QTY": 1}, 20),
    ])
    assert outputs == {"OUTPUT": [("a", {"NAME": "a", "N": 1}), ("a", {"NAME": "a", "N": 2})]}


def test_after_a_v1_re_keying_rowkey_in_the_values_is_still_the_old_key_as_in_ksqldb_5_5(spark: Any, kp: Any) -> None:
    """ksqlDB 5.5 kept a copy of ROWKEY in each value and streamSelectKeyV1 changed only the
    record key: a join's ``ROWKEY AS L_ROWKEY`` after re-keying by L0 read the old key."""
    schema = "`ROWKEY` STRING KEY, `L0` INTEGER, `L1` INTEGER"

    def side(alias: str, topic: str, which: str) -> dict[str, Any]:
        source = kp.stream_source(schema, topic, f"KafkaTopic_{which}/Source")
        keyed = kp.step("streamSelectKeyV1", f"{which}SourceKeyed", source=source, keyExpression="L0")
        exprs = [f"L0 AS {alias}_L0", f"L1 AS {alias}_L1", f"ROWTIME AS {alias}_ROWTIME", f"ROWKEY AS {alias}_ROWKEY"]
        return kp.select(keyed, exprs, None, ctx=f"PrependAlias{which}")

    join = kp.step("streamStreamJoinV1", "Join", leftSource=side("L", "left", "Left"),
                   rightSource=side("R", "right", "Right"), joinType="INNER",
                   leftInternalFormats=kp.fmt(), rightInternalFormats=kp.fmt(), beforeMillis=11.0, afterMillis=11.0)
    physical = kp.sink(kp.select(join, ["L_ROWKEY AS L_ROWKEY", "R_ROWKEY AS R_ROWKEY", "L_L1 AS L1"], None))
    out = kp.create("OUTPUT", "`ROWKEY` INTEGER KEY, `L_ROWKEY` STRING, `R_ROWKEY` STRING, `L1` INTEGER", "OUTPUT")
    plan = kp.query_plan(physical, out, [kp.create("L", schema, "left"), kp.create("R", schema, "right")],
                         sources=("L", "R"))
    outputs = _run(plan, [
        TopicRecord("left", "a", {"L0": 10, "L1": 1}, 0),
        TopicRecord("right", "b", {"L0": 10, "L1": 2}, 5),
    ])
    assert outputs == {"OUTPUT": [(10, {"L_ROWKEY": "a", "R_ROWKEY": "b", "L1": 1})]}


def test_a_table_aggregate_non_aggregate_column_holds_the_row_it_last_added_or_retracted(spark: Any, kp: Any) -> None:
    group = kp.step("tableGroupByV2", "Aggregate/GroupBy", source=kp.table_source(SOURCE), internalFormats=kp.fmt(),
                    groupByExpressions=["NAME"])
    agg = kp.step("tableAggregateV1", "Aggregate/Aggregate", source=group, internalFormats=kp.fmt(),
                  nonAggregateColumns=["NAME", "QTY"], aggregationFunctions=["COUNT(QTY)"])
    project = kp.select(agg, ["QTY AS LAST", "KSQL_AGG_VARIABLE_0 AS N"], ["NAME"], ctx="Aggregate/Project", table=True)
    out = kp.create("OUTPUT", "`NAME` STRING KEY, `LAST` INTEGER, `N` BIGINT", "OUTPUT", table=True)
    plan = kp.query_plan(kp.sink(project, table=True), out, [kp.create("INPUT", SOURCE, "input", table=True)],
                         query_id="CTAS_OUTPUT_0")
    outputs = _run(plan, [
        TopicRecord("input", 1, {"NAME": "a", "QTY": 1}, 10),
        TopicRecord("input", 1, {"NAME": "a", "QTY": 5}, 20),  # within the group: the new row's value
        TopicRecord("input", 1, None, 30),  # retracted: the value of the row taken out
    ])
    assert outputs == {"OUTPUT": [("a", {"LAST": 1, "N": 1}), ("a", {"LAST": 5, "N": 1}), ("a", {"LAST": 5, "N": 0})]}


ORDERS = "`OID` INTEGER KEY, `CUST` INTEGER, `QTY` INTEGER"


def _foreign_key_join_plan(kp: Any, join_type: str) -> dict[str, Any]:
    """ORDERS (table) joined to ITEMS by the foreign key ORDERS.CUST, as ksqlDB 0.24+ saves it."""
    def aliased(schema_names: tuple[str, ...], key: str, source: dict[str, Any], alias: str, side: str) -> Any:
        exprs = [f"{c} AS {alias}_{c}" for c in (*schema_names, "ROWTIME", "ROWPARTITION", "ROWOFFSET", key)]
        return kp.select(source, exprs, [f"{alias}_{key}"], ctx=f"PrependAlias{side}", table=True)

    left = aliased(("CUST", "QTY"), "OID", kp.table_source(ORDERS, "orders", "KafkaTopic_Left/Source"), "O", "Left")
    right = aliased(("NAME", "QTY"), "ID", kp.table_source(SOURCE, "items", "KafkaTopic_Right/Source"), "I", "Right")
    join = kp.step("fkTableTableJoinV1", "Join", leftSource=left, rightSource=right, joinType=join_type,
                   leftJoinColumnName=None, leftJoinExpression="O_CUST", formats=kp.fmt())
    project = kp.select(join, ["O_QTY AS QTY", "I_NAME AS ITEM"], ["O_OID"], table=True)
    out = kp.create("OUTPUT", "`O_OID` INTEGER KEY, `QTY` INTEGER, `ITEM` STRING", "OUTPUT", table=True)
    return kp.query_plan(
        kp.sink(project, table=True), out,
        [kp.create("ORDERS", ORDERS, "orders", table=True), kp.create("ITEMS", SOURCE, "items", table=True)],
        sources=("ORDERS", "ITEMS"), query_id="CTAS_OUTPUT_0",
    )


FOREIGN_KEY_UPDATES = [
    TopicRecord("orders", 1, {"CUST": 10, "QTY": 5}, 10),
    TopicRecord("items", 10, {"NAME": "pear", "QTY": 0}, 20),
    TopicRecord("orders", 2, {"CUST": 10, "QTY": 6}, 30),
    TopicRecord("orders", 1, {"CUST": None, "QTY": 7}, 40),
    TopicRecord("items", 10, {"NAME": "plum", "QTY": 0}, 50),
    TopicRecord("orders", 2, None, 60),
]


def test_an_imported_foreign_key_left_join_joins_each_left_row_to_the_row_its_foreign_key_names(
    spark: Any, kp: Any
) -> None:
    # Kafka Streams' KIP-213 left join: an unmatched or null foreign key joins nulls, a right
    # change reaches every left row subscribed to it, a left delete deletes its result.
    outputs = _run(_foreign_key_join_plan(kp, "LEFT"), FOREIGN_KEY_UPDATES)
    assert outputs == {"OUTPUT": [
        (1, {"QTY": 5, "ITEM": None}),
        (1, {"QTY": 5, "ITEM": "pear"}),
        (2, {"QTY": 6, "ITEM": "pear"}),
        (1, {"QTY": 7, "ITEM": None}),
        (2, {"QTY": 6, "ITEM": "plum"}),
        (2, None),
    ]}


def test_an_imported_foreign_key_inner_join_emits_only_matches_and_deletes_what_stops_matching(
    spark: Any, kp: Any
) -> None:
    # Inner: a new left row without a match emits nothing; a row that loses its foreign key
    # deletes its result.
    outputs = _run(_foreign_key_join_plan(kp, "INNER"), FOREIGN_KEY_UPDATES)
    assert outputs == {"OUTPUT": [
        (1, {"QTY": 5, "ITEM": "pear"}),
        (2, {"QTY": 6, "ITEM": "pear"}),
        (1, None),
        (2, {"QTY": 6, "ITEM": "plum"}),
        (2, None),
    ]}


def test_a_query_saved_after_an_alter_source_reads_the_added_column(spark: Any, kp: Any) -> None:
    altered = SOURCE + ", `NOTE` STRING"
    alter = {"@type": "alterSourceV1", "sourceName": "INPUT", "ksqlType": "STREAM", "newColumns": ["`NOTE` STRING"]}
    physical = kp.sink(kp.select(kp.stream_source(altered), ["NOTE AS NOTE"], ["ID"]))
    out = kp.create("OUTPUT", "`ID` INTEGER KEY, `NOTE` STRING", "OUTPUT")
    plan = kp.plan(kp.entry(kp.create("INPUT", SOURCE, "input")), kp.entry(alter), kp.entry(out, physical))
    imported = import_plan(plan)
    engine = KsqlEngine(dict(imported.configs))
    for statement in imported.statements:
        engine.restore(statement)
    source = engine.metastore.get("INPUT")
    assert source is not None and [c.name for c in source.schema.columns][-1] == "NOTE"
    engine.close()
    outputs = _run(plan, [TopicRecord("input", 1, {"NAME": "a", "QTY": 1, "NOTE": "n"}, 10)])
    assert outputs == {"OUTPUT": [(1, {"NOTE": "n"})]}


def _one_select(kp: Any, select: list[str], out_schema: str, config: dict[str, str]) -> dict[str, Any]:
    physical = kp.sink(kp.select(kp.stream_source(SOURCE), select, ["ID"]))
    plan = kp.query_plan(physical, kp.create("OUTPUT", out_schema, "OUTPUT"), [kp.create("INPUT", SOURCE, "input")])
    plan["configs"].update(config)
    return plan


def test_a_plan_saved_with_cast_strings_preserve_nulls_false_casts_a_null_to_the_text_null(spark: Any, kp: Any) -> None:
    """ksql.cast.strings.preserve.nulls=false: ksqlDB's CAST to STRING is String.valueOf, so a NULL
    INT is 'null' (a NULL STRING is not cast at all, and stays NULL)."""
    select = ["CAST(QTY AS STRING) AS Q", "CAST(NAME AS STRING) AS N"]
    inputs = [TopicRecord("input", 1, {"NAME": None, "QTY": None}, 10), TopicRecord("input", 2, {"NAME": "b", "QTY": 2}, 20)]
    schema = "`ID` INTEGER KEY, `Q` STRING, `N` STRING"
    kept = _run(_one_select(kp, select, schema, {"ksql.cast.strings.preserve.nulls": "true"}), inputs)
    assert kept == {"OUTPUT": [(1, {"Q": None, "N": None}), (2, {"Q": "2", "N": "b"})]}
    text = _run(_one_select(kp, select, schema, {"ksql.cast.strings.preserve.nulls": "false"}), inputs)
    assert text == {"OUTPUT": [(1, {"Q": "null", "N": None}), (2, {"Q": "2", "N": "b"})]}


def test_a_plan_saved_with_nested_error_set_null_false_nulls_the_whole_select_item(spark: Any, kp: Any) -> None:
    """ksql.nested.error.set.null=false: a failing CAST inside COALESCE fails the whole select
    item, which is NULL; with true only the CAST is NULL and COALESCE gives its default."""
    select = ["COALESCE(CAST(NAME AS INTEGER), -1) AS N", "QTY AS Q"]
    inputs = [TopicRecord("input", 1, {"NAME": "abc", "QTY": 1}, 10), TopicRecord("input", 2, {"NAME": "7", "QTY": 2}, 20)]
    schema = "`ID` INTEGER KEY, `N` INTEGER, `Q` INTEGER"
    nested = _run(_one_select(kp, select, schema, {"ksql.nested.error.set.null": "true"}), inputs)
    assert nested == {"OUTPUT": [(1, {"N": -1, "Q": 1}), (2, {"N": 7, "Q": 2})]}
    whole = _run(_one_select(kp, select, schema, {"ksql.nested.error.set.null": "false"}), inputs)
    assert whole == {"OUTPUT": [(1, {"N": None, "Q": 1}), (2, {"N": 7, "Q": 2})]}


def test_a_plan_saved_with_timestamp_throw_on_invalid_true_stops_the_query_on_an_invalid_timestamp(
    spark: Any, kp: Any
) -> None:
    """ksql.timestamp.throw.on.invalid=true: a record whose TIMESTAMP column cannot be parsed
    stops the query; with false it is logged and skipped."""
    schema = "`ID` INTEGER KEY, `TS` STRING, `QTY` INTEGER"
    source = kp.stream_source(schema, timestampColumn={"column": "TS", "format": "yyyy-MM-dd"})
    physical = kp.sink(kp.select(source, ["QTY AS QTY"], ["ID"]))
    out = kp.create("OUTPUT", "`ID` INTEGER KEY, `QTY` INTEGER", "OUTPUT")

    def saved(value: str) -> dict[str, Any]:
        plan = kp.query_plan(physical, out, [kp.create("INPUT", schema, "input")])
        plan["configs"]["ksql.timestamp.throw.on.invalid"] = value
        return plan

    inputs = [TopicRecord("input", 1, {"TS": "not a date", "QTY": 1}, 10),
              TopicRecord("input", 2, {"TS": "2020-01-01", "QTY": 2}, 20)]
    assert _run(saved("false"), inputs) == {"OUTPUT": [(2, {"QTY": 2})]}
    with pytest.raises(ExecutionError, match=r"Query CSAS_OUTPUT_0 failed: .*Failed to extract timestamp from row"):
        _run(saved("true"), inputs)


def test_a_plan_saved_with_json_sr_converter_deserializer_enabled_false_reads_json_sr_as_the_plain_json_deserializer(
    spark: Any, kp: Any
) -> None:
    """ksql.json_sr.converter.deserializer.enabled=false: ksqlDB reads JSON_SR values with its
    plain JSON deserializer past the registry header, which coerces a JSON text to an INT
    column as it does for JSON; kspark reads JSON_SR that way."""
    source = kp.step("streamSourceV1", "KsqlTopic/Source", topicName="input", formats=kp.fmt(value="JSON_SR"),
                     sourceSchema=SOURCE, timestampColumn=None, pseudoColumnVersion=1)
    physical = kp.sink(kp.select(source, ["(QTY + 1) AS Q", "NAME AS N"], ["ID"]))
    out = kp.create("OUTPUT", "`ID` INTEGER KEY, `Q` INTEGER, `N` STRING", "OUTPUT")
    source_ddl = kp.create("INPUT", SOURCE, "input", formats=kp.fmt(value="JSON_SR"))
    plan = kp.query_plan(physical, out, [source_ddl])
    plan["configs"]["ksql.json_sr.converter.deserializer.enabled"] = "false"
    outputs = _run(plan, [TopicRecord("input", 1, {"NAME": "a", "QTY": "12"}, 10)])
    assert outputs == {"OUTPUT": [(1, {"Q": 13, "N": "a"})]}


def test_a_protobuf_sink_saved_with_a_subject_name_writes_the_latest_schema_of_that_subject(spark: Any, kp: Any) -> None:
    """A PROTOBUF format's "subjectName" (no schema id): ksqlDB's serde writes with the latest
    schema registered under that subject, so its field past the sink's columns gets proto3's
    default, as with a schema id."""
    import uuid

    from confluent_kafka.schema_registry import Schema

    from engine.serde.registry import registry_client

    url = f"mock://{uuid.uuid4().hex}"
    proto = 'syntax = "proto3";\nmessage Row {\n  int32 X = 1;\n  string SITE = 2;\n}\n'
    registry_client(url).register_schema("rows-custom-value", Schema(proto, "PROTOBUF"))
    proto_fmt = {"keyFormat": {"format": "KAFKA", "properties": {}},
                 "valueFormat": {"format": "PROTOBUF", "properties": {"subjectName": "rows-custom-value"}}}
    sink = kp.sink(kp.select(kp.stream_source(SOURCE), ["QTY AS X"], ["ID"]))
    sink["formats"] = proto_fmt
    out = kp.create("OUTPUT", "`ID` INTEGER KEY, `X` INTEGER", "OUTPUT", formats=proto_fmt)
    plan = kp.query_plan(sink, out, [kp.create("INPUT", SOURCE, "input")])
    plan["configs"]["ksql.schema.registry.url"] = url
    outputs = _run(plan, [TopicRecord("input", 1, {"NAME": "a", "QTY": 3}, 10)])
    assert outputs == {"OUTPUT": [(1, {"X": 3, "SITE": ""})]}
