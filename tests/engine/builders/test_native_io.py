"""The native source and sink steps (V2 and V3) read and write what their V1 versions do.

Each test plans the same statements twice, with the native step versions and without, runs
both over the same input records on the bounded runtime, and compares the outputs record
for record, and the number of records each skips with a processing-log entry. The inputs
are chosen to reach every way a native read hands a record to Python (coerced text, names
in another case, non-objects, wrong KAFKA widths, out-of-range numbers, non-finite doubles).
Every test runs with each native version: the planner picks V3, and for V2 it is made to
pick the V2 steps (saved plans hold them, and their builders are frozen).
"""

from __future__ import annotations

import decimal
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from engine.builders import native_io
from engine.builders.context import BuildContext
from engine.builders.native import collecting_reports
from engine.builders.walker import build
from engine.data.records import Header, TopicInfo, TopicRecord
from engine.errors import KsqlError
from engine.facade.engine import KsqlEngine
from engine.plan import steps_native as N
from engine.plan import types as T
from engine.plan.schema import Column
from engine.plan.steps import walk_steps
from engine.planner import physical
from engine.planner.physical import NATIVE_STEPS
from engine.serde.formats import FormatInfo
from engine.serde.kafka_format import KafkaSerde

STREAM = """
CREATE STREAM S (ID BIGINT KEY, NAME STRING, V INT, L BIGINT, D DOUBLE, B BOOLEAN)
  WITH (kafka_topic='s', value_format='JSON');
CREATE STREAM OUT AS SELECT * FROM S;
"""

# Values a JSON record may hold, reaching every coercion and every record V1 skips.
EDGE_VALUES = [
    {"NAME": "a", "V": 1, "L": 2, "D": 1.5, "B": True},
    {"name": "lower-case names", "v": 2, "d": 2.5, "b": False},
    {"NAME": decimal.Decimal("12.50"), "V": "3", "L": "+4", "D": "4.5", "B": "TRUE"},
    {"NAME": {"x": decimal.Decimal("1.50")}, "V": decimal.Decimal("1.7"), "D": decimal.Decimal("1E+10")},
    {"NAME": [1, 2], "V": -2147483648, "L": -9223372036854775808, "D": -0.0},
    {"NAME": "out of range", "V": 3000000000},
    {"NAME": "not a number", "V": "abc"},
    {"NAME": "fraction text", "V": "1.5"},
    {"NAME": "spaces", "V": " 5"},
    {"NAME": "bool for int", "V": True},
    {"NAME": "string bool", "B": "yes"},
    {"NAME": "nan text", "D": "NaN"},
    {"NAME": True, "L": 12345678901234567890},
    {"NAME": "7", "D": 7},
    {},
    [1, 2],
    "just text",
    5,
    None,
]


@pytest.fixture(autouse=True, params=["V2", "V3", "V4"])
def io_version(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The native stream source version the planner picks in this test (its sink: V2 with
    V2, V3 otherwise; V4 is planned for queries with only filters and projections)."""
    if request.param == "V2":
        kinds = ("StreamSource", "TableSource", "StreamSink", "TableSink")
        older = {f"{kind}V3": getattr(N, f"{kind}V2") for kind in kinds}
        monkeypatch.setattr(physical, "N", SimpleNamespace(**{**vars(N), **older}))
    if request.param != "V4":
        monkeypatch.setattr(physical, "_in_partition_order", lambda step: step)
    return str(request.param)


def _sink_version(io_version: str) -> str:
    return "V2" if io_version == "V2" else "V3"


def _engine(native: bool, statements: str, topics: tuple[str, ...]) -> KsqlEngine:
    engine = KsqlEngine({NATIVE_STEPS: "true" if native else "false"})
    for topic in topics:
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(statements)
    return engine


def _run(native: bool, statements: str, records: list[TopicRecord], sink: str = "OUT"):
    engine = _engine(native, statements, tuple({r.topic for r in records} | {sink}))
    for record in records:
        engine.store.append(record)
    out = engine.run()
    return [(r.key, r.value, r.timestamp, r.headers) for r in out.get(sink, [])]


def _same(statements, records, sink="OUT"):
    """Both ways' records, which must be equal; and how many input records were skipped."""
    want = _run(False, statements, records, sink)
    got = _run(True, statements, records, sink)
    assert got == want
    return got, len(records) - len(got)


def test_native_source_and_sink_give_the_v1_records_and_skip_the_same(spark):
    records = [TopicRecord("s", i, v, 1000 + i) for i, v in enumerate(EDGE_VALUES)]
    records.append(TopicRecord("s", None, {"NAME": "null key"}, 50))
    records.append(TopicRecord("s", 7, None, 60))  # a stream's null value
    got, skipped = _same(STREAM, records)
    # out of range (INT, BIGINT), text, fraction, spaces, boolean, "yes", array, text, 5
    assert skipped == 10
    assert got[0][1] == {"NAME": "a", "V": 1, "L": 2, "D": 1.5, "B": True}
    assert got[1][1]["NAME"] == "lower-case names"  # names match in any case, as in ksqlDB


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["NAME", "name", "V", "v", "L", "D", "B", "X"]),
            st.one_of(
                st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=4),
                # The QTT loader reads fractional JSON numbers as decimals, as ksqlDB's reader does.
                st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**20), max_value=10**20),
                st.sampled_from(["1", "-2", "+3", "1.5", "true", "False", "1e3", "", "x"]),
            ),
            max_size=5,
        ),
        min_size=1,
        max_size=40,
    )
)
def test_random_json_records_read_alike(spark, values):
    records = [TopicRecord("s", i, v, 1000 + i) for i, v in enumerate(values)]
    _same(STREAM, records)


@pytest.mark.parametrize(
    ("sql_type", "keys"),
    [
        ("INT", [0, 1, -1, 2147483647, -2147483648, None]),
        ("BIGINT", [0, -1, 9223372036854775807, -9223372036854775808, 2**40, None]),
        ("STRING", ["", "é", "a b", None]),
    ],
)
def test_kafka_keys_read_and_write_alike(spark, sql_type, keys):
    statements = f"""
    CREATE STREAM S (K {sql_type} KEY, V STRING) WITH (kafka_topic='s', value_format='KAFKA');
    CREATE STREAM OUT AS SELECT * FROM S;
    """
    records = [TopicRecord("s", k, f"v{i}", 10 + i) for i, k in enumerate(keys)]
    got, _ = _same(statements, records)
    assert [r[0] for r in got] == keys


def test_kafka_bytes_of_the_wrong_width_or_bad_utf8_go_to_python(spark):
    rows = [(b"\x00\x00\x00\x07",), (b"\x00\x07",), (b"\xff" * 8,), (b"\xc3\x28",), (None,)]
    df = spark.createDataFrame(rows, "b binary")
    reads = {
        "INT": native_io._read_kafka(F.col("b"), T.INTEGER),
        "BIGINT": native_io._read_kafka(F.col("b"), T.BIGINT),
        "STRING": native_io._read_kafka(F.col("b"), T.STRING),
    }
    got = df.select(*[c for r in reads.values() for c in (r.value, r.python)]).collect()
    for (data,), row in zip(rows, got, strict=True):
        for i, (name, sql_type) in enumerate((("INT", T.INTEGER), ("BIGINT", T.BIGINT), ("STRING", T.STRING))):
            serde = KafkaSerde(FormatInfo("KAFKA"), [Column("K", sql_type)], wrapped=False, is_key=True)
            try:
                want, fails = serde.from_bytes(data), False
            except KsqlError:
                want, fails = None, True
            value, python = row[2 * i], row[2 * i + 1]
            assert python == fails, (name, data)
            if not fails:
                assert value == want, (name, data)


def test_absent_json_fields_are_read_natively_and_only_texts_spark_reads_otherwise_go_to_python(spark):
    # A field's JSON text (NULL: absent or JSON null) -> (value, whether Python reads it).
    cases = {
        T.BOOLEAN: [(None, None, False), ("true", True, False), ("FALSE", False, False), ("yes", None, True)],
        T.INTEGER: [(None, None, False), ("12", 12, False), ("2147483648", None, True), (" 1", None, True)],
        T.DOUBLE: [(None, None, False), ("1.5", 1.5, False), ("NaN", None, True)],
        T.STRING: [(None, None, False), ("text", "text", False)],
    }
    for sql_type, expected in cases.items():
        df = spark.createDataFrame([(text,) for text, _, _ in expected], "t string")
        read = native_io._read_text(F.col("t"), sql_type)
        got = [tuple(row) for row in df.select(read.value, read.python).collect()]
        assert got == [(value, python) for _, value, python in expected], sql_type


def test_json_keys_unwrapped_values_and_a_bigint_timestamp(spark):
    statements = """
    CREATE STREAM S (K STRING KEY, T BIGINT) WITH (kafka_topic='s', key_format='JSON', value_format='JSON',
      wrap_single_value=false, timestamp='T');
    CREATE STREAM OUT WITH (wrap_single_value=false) AS SELECT * FROM S;
    """
    values = [5000, "6000", 0, None, -1, 1.5, "x", [1]]
    records = [TopicRecord("s", f"k{i}", v, 10 + i) for i, v in enumerate(values)]
    records.append(TopicRecord("s", 12, 7000, 99))  # a number for a STRING key
    records.append(TopicRecord("s", 1.5, 0, 100))  # read in Python (a fraction for a STRING key), at the epoch
    got, skipped = _same(statements, records)
    assert [r[2] for r in got][:3] == [5000, 6000, 0]  # the epoch is a timestamp; negatives are not
    assert ("1.5", 0, 0) in [(r[0], r[1], r[2]) for r in got]
    assert skipped >= 3


def test_table_source_and_sink_keep_tombstones_and_drop_null_keys(spark):
    statements = """
    CREATE TABLE T (ID STRING PRIMARY KEY, V DOUBLE) WITH (kafka_topic='t', value_format='JSON');
    CREATE TABLE OUT AS SELECT ID, V * 2 AS W FROM T;
    """
    records = [
        TopicRecord("t", "a", {"V": 1.25}, 10),
        TopicRecord("t", None, {"V": 2}, 11),
        TopicRecord("t", "a", None, 12),
        TopicRecord("t", "b", {"V": "Infinity"}, 13),
        TopicRecord("t", "c", {"V": 3}, 14, headers=(Header("h", b"x"),)),
    ]
    got, _ = _same(statements, records)
    assert [(k, v) for k, v, *_ in got][:2] == [("a", {"W": 2.5}), ("a", None)]


def test_a_sink_without_value_columns_writes_what_v1_writes(spark):
    # The planner now refuses such a projection ("The projection contains no value columns."),
    # but plans saved before that still hold it: the steps are built directly.
    from engine.plan import steps as S
    from engine.plan.schema import LogicalSchema
    from engine.runtime.adapter import BoundedRuntime

    formats = S.Formats(key_format="KAFKA", value_format="JSON")
    schema = LogicalSchema.parse("ID INT KEY")
    written = []
    pairs = (
        (S.StreamSource, S.StreamSink), (N.StreamSourceV2, N.StreamSinkV2), (N.StreamSourceV3, N.StreamSinkV3),
        (N.StreamSourceV4, N.StreamSinkV3),
    )
    for source_cls, sink_cls in pairs:
        runtime = BoundedRuntime(spark)
        runtime.produce([TopicRecord("s", 1, {"A": True}, 10), TopicRecord("s", 2, None, 11)])
        source = source_cls(ctx="KsqlTopic/Source", topic="s", formats=formats, source_schema=schema)
        sink = sink_cls(ctx="KsqlTopic/Sink", source=source, topic="OUT", formats=formats)
        built = build(sink, BuildContext(runtime=runtime, query_id="Q"))
        records = runtime.write_sink("OUT", built.df, None, built.codec)
        written.append([(r.key, r.value) for r in records])
    assert written[3] == written[2] == written[1] == written[0] == [(1, {}), (2, None)]


def test_header_columns_are_read_natively(spark):
    statements = """
    CREATE STREAM S (V INT, H BYTES HEADER('h'), ALL_H ARRAY<STRUCT<KEY STRING, VALUE BYTES>> HEADERS)
      WITH (kafka_topic='s', value_format='JSON');
    CREATE STREAM OUT AS SELECT V, ALL_H, H FROM S;
    """
    # (a HEADER('k') column before the HEADERS one: ksqlDB refuses one after it)
    records = [
        TopicRecord("s", None, {"V": 1}, 10, headers=(Header("h", b"1"), Header("g", None), Header("h", b"2"))),
        TopicRecord("s", None, {"V": 2}, 11),
    ]
    got, _ = _same(statements, records)
    assert got[0][1]["H"] == "Mg=="  # the last header 'h', base64 in QTT form


def test_formats_without_a_native_form_fall_back_to_the_v1_serdes(spark, io_version):
    statements = """
    CREATE STREAM S (ID BIGINT KEY, AMOUNT DECIMAL(4, 2), TAGS ARRAY<STRING>)
      WITH (kafka_topic='s', value_format='JSON');
    CREATE STREAM OUT AS SELECT * FROM S;
    """
    records = [TopicRecord("s", 1, {"AMOUNT": decimal.Decimal("1.50"), "TAGS": ["a"]}, 10)]
    _same(statements, records)
    engine = _engine(True, statements, ("s", "OUT"))
    (query,) = engine.query_order()
    with collecting_reports() as reports:
        built = build(query.root, BuildContext(runtime=engine.runtime(), query_id=query.query_id))
    assert not built.encoded
    hows = {(r.step_type, r.name): r.how for r in reports}
    assert hows[(f"streamSource{io_version}", "AMOUNT")] == (
        "fallback: value type DECIMAL(4, 2) has no native JSON form yet"
    )
    assert hows[(f"streamSink{_sink_version(io_version)}", "ID")].startswith("fallback: ")


def test_native_plans_use_the_native_io_steps_and_spark_reads_the_bytes(spark, io_version):
    engine = _engine(True, STREAM, ("s", "OUT"))
    (query,) = engine.query_order()
    types = {s.TYPE for s in walk_steps(query.root)}
    assert {f"streamSource{io_version}", f"streamSink{_sink_version(io_version)}"} <= types
    engine.store.append(TopicRecord("s", 1, {"NAME": "a"}, 10))
    built = build(query.root, BuildContext(runtime=engine.runtime(), query_id=query.query_id))
    assert built.encoded
    execution = built.df._jdf.queryExecution()
    analyzed = execution.analyzed().toString()
    assert "from_json" in analyzed and "to_json" in analyzed
    # No record goes through Python whole: only the per-record fallback UDFs remain, the
    # source's alone in V3 (its sink has no Python), with no lambda to keep Spark from
    # compiling the source's projection.
    executed = execution.executedPlan().toString()
    assert "MapInArrow" not in executed
    assert executed.count("ArrowEvalPython") == (2 if io_version == "V2" else 1)
    if io_version != "V2":
        assert "lambdafunction" not in executed


def test_non_finite_doubles_are_written_as_v1_writes_them(spark):
    # Division by zero and logarithms of 0 give NaN / Infinity: V1 decides, V2 must agree.
    statements = """
    CREATE STREAM S (ID BIGINT KEY, D DOUBLE) WITH (kafka_topic='s', value_format='JSON');
    CREATE STREAM OUT AS SELECT ID, D / 0.0 AS Q, LN(D) AS L FROM S;
    """
    records = [TopicRecord("s", 1, {"D": 0.0}, 10), TopicRecord("s", 2, {"D": 1.0}, 11)]
    _same(statements, records)
