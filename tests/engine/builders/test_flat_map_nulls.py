"""A table function whose input is NULL emits nothing for that row (and does not fail)."""

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

FORMATS = S.Formats(key_format="KAFKA", value_format="JSON")
SCHEMA = LogicalSchema.parse("K STRING KEY, NAME STRING")


@pytest.fixture()
def runtime(spark):
    rt = BoundedRuntime(spark)
    rt.produce(
        [
            TopicRecord("input", "a", {"NAME": "x y"}, 10),
            TopicRecord("input", "b", {"NAME": None}, 20),
            TopicRecord("input", "c", {"NAME": "z"}, 30),
        ]
    )
    return rt


def test_explode_of_a_null_array_emits_no_record(runtime):
    split = E.FunctionCall("SPLIT", (E.ColumnRef("NAME"), E.Literal(" ", T.STRING)))
    explode = E.FunctionCall("EXPLODE", (split,))
    source = S.StreamSource(ctx="KsqlTopic/Source", topic="input", formats=FORMATS, source_schema=SCHEMA)
    flat = S.StreamFlatMap(
        ctx="FlatMap", source=source, table_functions=(S.SelectExpression(alias="W", expression=explode),)
    )
    select = S.StreamSelect(
        ctx="Project", source=flat, key_column_names=("K",),
        select_expressions=(S.SelectExpression(alias="W", expression=E.ColumnRef("W")),),
    )
    sink = S.StreamSink(ctx="KsqlTopic/Sink", source=select, topic="output", formats=FORMATS)
    built = build(sink, BuildContext(runtime=runtime, query_id="Q"))
    records = runtime.write_sink("output", built.df)
    assert [(r.key, r.value["W"]) for r in records] == [("a", "x"), ("a", "y"), ("c", "z")]
