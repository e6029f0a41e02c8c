"""Builders of stateless steps, run on the shared SparkSession."""

from __future__ import annotations

import pytest

from engine.builders.context import BuildContext
from engine.builders.walker import build
from engine.data.records import TopicRecord
from engine.plan import expr as E
from engine.plan import steps as S
from engine.plan import types as T
from engine.plan.schema import LogicalSchema
from engine.runtime.adapter import BoundedRuntime

JSON_FORMATS = S.Formats(key_format="KAFKA", value_format="JSON")
SCHEMA = LogicalSchema.parse("K STRING KEY, ID BIGINT, NAME STRING")


@pytest.fixture()
def runtime(spark):
    rt = BoundedRuntime(spark)
    rt.produce(
        [
            TopicRecord("input", "a", {"ID": 1, "NAME": "one"}, 10),
            TopicRecord("input", "b", {"ID": 200, "NAME": "two hundred"}, 20),
            TopicRecord("input", "c", None, 30),
            TopicRecord("input", "d", {"ID": 300, "NAME": None}, 40),
        ]
    )
    return rt


def _source() -> S.StreamSource:
    return S.StreamSource(ctx="KsqlTopic/Source", topic="input", formats=JSON_FORMATS, source_schema=SCHEMA)


def _run(runtime: BoundedRuntime, root: S.Step) -> list[TopicRecord]:
    built = build(root, BuildContext(runtime=runtime, query_id="Q"))
    return runtime.write_sink("output", built.df)


def test_filter_and_select_produce_records_in_input_order(runtime):
    predicate = E.Comparison(">", E.ColumnRef("ID"), E.Literal(100, T.INTEGER))
    select = S.StreamSelect(
        ctx="Project",
        source=S.StreamFilter(ctx="WhereFilter", source=_source(), predicate=predicate),
        key_column_names=("K",),
        select_expressions=(
            S.SelectExpression(alias="DOUBLED", expression=E.Arithmetic("*", E.ColumnRef("ID"), E.Literal(2, T.INTEGER))),
            S.SelectExpression(alias="TS", expression=E.ColumnRef("ROWTIME")),
        ),
    )
    sink = S.StreamSink(ctx="KsqlTopic/Sink", source=select, topic="output", formats=JSON_FORMATS)
    records = _run(runtime, sink)
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        ("b", {"DOUBLED": 400, "TS": 20}, 20),
        ("d", {"DOUBLED": 600, "TS": 40}, 40),
    ]


def test_stream_null_values_pass_through_as_null_values(runtime):
    sink = S.StreamSink(ctx="KsqlTopic/Sink", source=_source(), topic="output", formats=JSON_FORMATS)
    records = _run(runtime, sink)
    assert [(r.key, r.value is None) for r in records] == [("a", False), ("b", False), ("c", True), ("d", False)]


def _id_over_100(filter_step: type[S.TableFilter | S.TableFilterV3]) -> S.TableSink:
    """A table of topic ``input`` filtered on ``ID > 100`` by ``filter_step``, into ``output``."""
    source = S.TableSource(ctx="KsqlTopic/Source", topic="input", formats=JSON_FORMATS, source_schema=SCHEMA)
    predicate = E.Comparison(">", E.ColumnRef("ID"), E.Literal(100, T.INTEGER))
    return S.TableSink(
        ctx="KsqlTopic/Sink",
        source=filter_step(ctx="WhereFilter", source=source, predicate=predicate),
        topic="output",
        formats=JSON_FORMATS,
    )


def test_table_filter_turns_non_matching_rows_into_deletes(runtime):
    records = _run(runtime, _id_over_100(S.TableFilter))
    assert [(r.key, r.value) for r in records] == [
        ("a", None),
        ("b", {"ID": 200, "NAME": "two hundred"}),
        ("c", None),
        ("d", {"ID": 300, "NAME": None}),
    ]


def test_table_filter_v3_deletes_only_rows_that_matched_before(spark):
    runtime = BoundedRuntime(spark)
    runtime.produce(
        [
            TopicRecord("input", "a", {"ID": 1, "NAME": "never"}, 10),  # miss, nothing before
            TopicRecord("input", "a", {"ID": 2, "NAME": "never"}, 11),  # miss again: nothing
            TopicRecord("input", "b", {"ID": 200, "NAME": "in"}, 20),
            TopicRecord("input", "b", {"ID": 3, "NAME": "out"}, 21),  # matched before: delete
            TopicRecord("input", "b", {"ID": 4, "NAME": "out"}, 22),  # miss after a delete
            TopicRecord("input", "a", {"ID": 500, "NAME": "in"}, 23),
            TopicRecord("input", "a", None, 24),  # delete of a row that matched: delete
            TopicRecord("input", "b", None, 25),  # delete of a row that missed: nothing
        ]
    )
    records = _run(runtime, _id_over_100(S.TableFilterV3))
    assert [(r.key, r.value, r.timestamp) for r in records] == [
        ("b", {"ID": 200, "NAME": "in"}, 20),
        ("b", None, 21),
        ("a", {"ID": 500, "NAME": "in"}, 23),
        ("a", None, 24),
    ]


def test_flat_map_emits_one_record_per_element_in_order(runtime):
    explode = E.FunctionCall("EXPLODE", (E.CreateArray((E.ColumnRef("ID"), E.Literal(7, T.BIGINT))),))
    flat = S.StreamFlatMap(
        ctx="FlatMap", source=_source(), table_functions=(S.SelectExpression(alias="X", expression=explode),)
    )
    select = S.StreamSelect(
        ctx="Project",
        source=flat,
        key_column_names=("K",),
        select_expressions=(S.SelectExpression(alias="X", expression=E.ColumnRef("X")),),
    )
    sink = S.StreamSink(ctx="KsqlTopic/Sink", source=select, topic="output", formats=JSON_FORMATS)
    records = _run(runtime, sink)
    assert [(r.key, r.value["X"]) for r in records] == [
        ("a", 1), ("a", 7), ("b", 200), ("b", 7), ("d", 300), ("d", 7)
    ]
