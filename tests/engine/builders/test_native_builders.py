"""The native stateless builders (V2) give the records their V1 versions give, on the same inputs."""

from __future__ import annotations

import pytest

from engine.builders.context import BuildContext
from engine.builders.walker import build
from engine.data.records import TopicRecord
from engine.parser.parser import parse_expression
from engine.plan import steps as S
from engine.plan import steps_native as N
from engine.plan.schema import LogicalSchema
from engine.runtime.adapter import BoundedRuntime

JSON_FORMATS = S.Formats(key_format="KAFKA", value_format="JSON")
SCHEMA = LogicalSchema.parse("K STRING KEY, ID INT, NAME STRING")
# Native and fallback expressions mixed; V / 0 fails in Python (a processing-log entry, NULL).
SELECTS = (
    ("UP", "UCASE(NAME)"),
    ("HALF", "ID / 2"),
    ("BAD", "ID / 0"),
    ("WRAPPED", "ID * 2147483647"),
    ("BIG", "ID > 100"),
    ("N", "LEN(NAME)"),
)


@pytest.fixture()
def runtime(spark):
    rt = BoundedRuntime(spark)
    rt.produce(
        [
            TopicRecord("input", "a", {"ID": 1, "NAME": "one"}, 10),
            TopicRecord("input", "b", {"ID": 200, "NAME": "two hundred"}, 20),
            TopicRecord("input", "c", None, 30),
            TopicRecord("input", "d", {"ID": 300, "NAME": None}, 40),
            TopicRecord("input", "e", {"ID": None, "NAME": "x"}, 50),
        ]
    )
    return rt


def _records(runtime, sink):
    built = build(sink, BuildContext(runtime=runtime, query_id="Q"))
    return [(r.key, r.value, r.timestamp) for r in runtime.write_sink(f"out-{sink.ctx}", built.df)]


def _selects():
    return tuple(S.SelectExpression(alias=a, expression=parse_expression(t)) for a, t in SELECTS)


def _stream(filter_cls, select_cls, where):
    source = S.StreamSource(ctx="KsqlTopic/Source", topic="input", formats=JSON_FORMATS, source_schema=SCHEMA)
    filtered = filter_cls(ctx="WhereFilter", source=source, predicate=parse_expression(where))
    select = select_cls(ctx="Project", source=filtered, key_column_names=("K",), select_expressions=_selects())
    return select


@pytest.mark.parametrize("where", ["ID >= 1", "ID / 2 > 50"])  # native, fallback
def test_native_stream_filter_and_select_give_the_v1_records(runtime, where):
    v1 = _stream(S.StreamFilter, S.StreamSelect, where)
    v2 = _stream(N.StreamFilterV2, N.StreamSelectV2, where)
    want = _records(runtime, S.StreamSink(ctx="V1", source=v1, topic="o1", formats=JSON_FORMATS))
    got = _records(runtime, S.StreamSink(ctx="V2", source=v2, topic="o2", formats=JSON_FORMATS))
    assert got == want
    assert got  # something passed the filter
    assert all(value["BAD"] is None for _, value, _ in got)


def test_native_stream_select_keeps_a_null_value_a_null_value(runtime):
    source = S.StreamSource(ctx="KsqlTopic/Source", topic="input", formats=JSON_FORMATS, source_schema=SCHEMA)
    select = N.StreamSelectV2(ctx="Project", source=source, key_column_names=("K",), select_expressions=_selects())
    records = _records(runtime, S.StreamSink(ctx="V2", source=select, topic="o", formats=JSON_FORMATS))
    assert [(k, v is None) for k, v, _ in records] == [("a", False), ("b", False), ("c", True), ("d", False), ("e", False)]
    assert records[0][1] == {"UP": "ONE", "HALF": 0, "BAD": None, "WRAPPED": 2147483647, "BIG": False, "N": 3}
    assert records[1][1]["WRAPPED"] == -200  # 200 * MAX_INT wraps like Java's int


@pytest.mark.parametrize("where", ["ID > 100", "ID / 2 > 50"])  # native, fallback
def test_native_table_filter_and_select_turn_non_matching_rows_into_deletes_as_v1(runtime, where):
    def table(filter_cls, select_cls):
        source = S.TableSource(ctx="KsqlTopic/Source", topic="input", formats=JSON_FORMATS, source_schema=SCHEMA)
        filtered = filter_cls(ctx="WhereFilter", source=source, predicate=parse_expression(where))
        return select_cls(ctx="Project", source=filtered, key_column_names=("K",), select_expressions=_selects())

    want = _records(runtime, S.TableSink(ctx="V1", source=table(S.TableFilter, S.TableSelect), topic="o1", formats=JSON_FORMATS))
    got = _records(runtime, S.TableSink(ctx="V2", source=table(N.TableFilterV2, N.TableSelectV2), topic="o2", formats=JSON_FORMATS))
    assert got == want
    assert [k for k, v, _ in got if v is None] == ["a", "c", "e"]  # a and e stop matching, c is a delete


def test_native_steps_read_pseudo_columns_from_the_row_as_v1(runtime):
    # ROWTIME and ROWPARTITION are no user columns: the compiled Column reads the row's meta
    # column of that name (a user column of that name does not exist: Spark's analysis would fail).
    v1 = _pseudo(S.StreamFilter, S.StreamSelect)
    v2 = _pseudo(N.StreamFilterV2, N.StreamSelectV2)
    want = _records(runtime, S.StreamSink(ctx="V1", source=v1, topic="o1", formats=JSON_FORMATS))
    got = _records(runtime, S.StreamSink(ctx="V2", source=v2, topic="o2", formats=JSON_FORMATS))
    assert got == want
    assert [(k, v["RT"], v["P"]) for k, v, _ in got] == [("d", 41, 0), ("e", 51, 0)]


def _pseudo(filter_cls, select_cls):
    source = S.StreamSource(ctx="KsqlTopic/Source", topic="input", formats=JSON_FORMATS, source_schema=SCHEMA)
    filtered = filter_cls(ctx="WhereFilter", source=source, predicate=parse_expression("ROWTIME > 30"))
    selects = (
        S.SelectExpression(alias="RT", expression=parse_expression("ROWTIME + 1")),
        S.SelectExpression(alias="P", expression=parse_expression("ROWPARTITION")),
    )
    return select_cls(ctx="Project", source=filtered, key_column_names=("K",), select_expressions=selects)
