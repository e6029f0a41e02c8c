"""DELIMITED keys and values read by Spark (format level 2: ``streamSourceV5``/``V6``,
``tableSourceV4``) give the records their V1 versions give.

As in ``test_native_io.py``, whose helpers it uses: each test plans the same statements with
the native step versions and without, runs both over the same input records on the bounded
runtime and compares the outputs record for record (a record V1 skips with a processing-log
entry must be skipped too). The inputs reach every way a record goes to Python: quotes, line breaks, a
wrong field count, text Spark reads otherwise than Java (signs, spaces, non-ASCII digits,
``NaN``, suffixes, out-of-range numbers).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.builders.context import BuildContext
from engine.builders.native import collecting_reports
from engine.builders.native_forms import level_2_reads, native_reason
from engine.builders.walker import build
from engine.data.records import TopicRecord
from engine.errors import InternalError
from engine.plan import steps as S
from engine.plan.schema import LogicalSchema
from engine.plan.steps import walk_steps
from tests.engine.builders.test_native_io import _engine, _same

STREAM = """
CREATE STREAM S (ID BIGINT KEY, NAME STRING, V INT, L BIGINT, D DOUBLE, B BOOLEAN)
  WITH (kafka_topic='s', value_format='DELIMITED');
CREATE STREAM OUT AS SELECT * FROM S;
"""

# Field texts for each column type, reaching every check of the native read.
STRINGS = ["a", "", " lead", "trail ", "#hash", "é", "\U0001f600", "a b", "'single'", "x\\y"]
INTS = ["1", "-1", "+5", "007", " 5", "5 ", "1.5", "2147483647", "2147483648", "-2147483648",
        "-2147483649", "\u0663", "abc", "", "0x10", "1e3"]
LONGS = ["9223372036854775807", "9223372036854775808", "-9223372036854775808", "12345678901234567890", "+0"]
DOUBLES = ["1.5", "-0", "-0.0", "1e3", "1E-3", "1e400", ".5", "5.", "+1.5", "1d", "2.5f", "NaN", "Infinity",
           "-Infinity", " 1.5", "0x1p3", "4.9e-324", "abc", ""]
BOOLEANS = ["true", "TRUE", "True", "tRuE", "false", "yes", "1", "", " true", "truee"]

EDGE_VALUES = [
    "a,1,2,1.5,true",
    ",,,,",
    '"quoted, name",1,2,1.5,true',
    '"with ""quotes""",3,4,2.5,false',
    'plain,"5",6,7.5,TRUE',
    '"unclosed,1,2,1.5,true',
    '"x" y,1,2,1.5,true',
    "line\nbreak,1,2,1.5,true",
    "\r\nleading break,1,2,1.5,true",
    "carriage\r,1,2,1.5,true",
    "too,few",
    "too,many,1,2,3,4",
    "",
    "a,1,2,1.5,true,",
    "a,\u0663,2,1.5,true",
    "a,1,2,NaN,true",
    "a,1,2,1e400,true",
    "a,1,2, 1.5,yes",
]


def _step_types(statements: str) -> set[str]:
    engine = _engine(True, statements, ("s", "t", "OUT"))
    (query,) = engine.query_order()
    return {s.TYPE for s in walk_steps(query.root)}


def test_edge_records_read_as_v1_reads_them(spark):
    records = [TopicRecord("s", i, v, 1000 + i) for i, v in enumerate(EDGE_VALUES)]
    records.append(TopicRecord("s", 99, None, 2000))  # a stream's null value
    got, skipped = _same(STREAM, records)
    assert got[0][1] == "a,1,2,1.5,true"
    # unclosed quote, text after a quote, too few, too many, a 6th field, a spaced DOUBLE
    assert skipped >= 6


@pytest.mark.parametrize(
    ("column", "sql_type", "texts"),
    [("V", "INT", INTS), ("L", "BIGINT", INTS + LONGS), ("D", "DOUBLE", DOUBLES), ("B", "BOOLEAN", BOOLEANS),
     ("NAME", "STRING", STRINGS)],
)
def test_each_field_text_reads_as_v1_reads_it(spark, column, sql_type, texts):
    statements = f"""
    CREATE STREAM S (ID INT KEY, {column} {sql_type}, TAIL STRING) WITH (kafka_topic='s', value_format='DELIMITED');
    CREATE STREAM OUT AS SELECT * FROM S;
    """
    records = [TopicRecord("s", i, f"{text},end", 10 + i) for i, text in enumerate(texts)]
    _same(statements, records)


def test_the_delimiter_is_a_literal_character_not_a_pattern(spark):
    for delimiter, sql in (("|", "'|'"), ("\t", "'TAB'"), (".", "'.'"), ("$", "'$'"), (" ", "'SPACE'")):
        statements = f"""
        CREATE STREAM S (A STRING, V INT) WITH (kafka_topic='s', value_format='DELIMITED', value_delimiter={sql});
        CREATE STREAM OUT AS SELECT * FROM S;
        """
        texts = [f"x{delimiter}1", f"a,b{delimiter}2", f"{delimiter}3", f"y{delimiter}", "no delimiter",
                 f"p{delimiter}q{delimiter}4"]
        records = [TopicRecord("s", None, t, 10 + i) for i, t in enumerate(texts)]
        got, _ = _same(statements, records)
        assert got[0][1] == f"x{delimiter}1", delimiter


def test_a_table_with_a_delimited_key_of_two_columns(spark):
    statements = """
    CREATE TABLE T (K1 STRING PRIMARY KEY, K2 INT PRIMARY KEY, V DOUBLE)
      WITH (kafka_topic='t', format='DELIMITED');
    CREATE TABLE OUT AS SELECT * FROM T;
    """
    keys = ["a,1", "a,2", ",3", "b,", "a,x", "a", '"q,1",5', None, "c,4"]
    records = [TopicRecord("t", k, f"{i}.5", 10 + i) for i, k in enumerate(keys)]
    records.append(TopicRecord("t", "a,1", None, 50))  # a tombstone
    got, _ = _same(statements, records)
    assert ("a,1", "0.5", 10) in [r[:3] for r in got]
    assert _step_types(statements) >= {"tableSourceV4"}


def test_a_bigint_timestamp_column_read_from_delimited_text(spark):
    statements = """
    CREATE STREAM S (V STRING, T BIGINT) WITH (kafka_topic='s', value_format='DELIMITED', timestamp='T');
    CREATE STREAM OUT AS SELECT * FROM S;
    """
    texts = ["a,5000", "b,", "c,-1", "d,x", "e,0", "f,+7"]
    records = [TopicRecord("s", None, t, 10 + i) for i, t in enumerate(texts)]
    got, _ = _same(statements, records)
    assert [r[2] for r in got][:1] == [5000]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.lists(
            st.one_of(st.sampled_from(STRINGS + INTS + DOUBLES + BOOLEANS + ['"', '""', "\n"]), st.text(max_size=3)),
            min_size=3,
            max_size=7,
        ),
        min_size=1,
        max_size=30,
    )
)
def test_random_records_read_alike(spark, fields):
    records = [TopicRecord("s", i, ",".join(f), 1000 + i) for i, f in enumerate(fields)]
    _same(STREAM, records)


def test_the_planner_picks_format_level_2_only_for_a_source_it_reads(spark):
    assert _step_types(STREAM) >= {"streamSourceV6"}  # filters and projections only
    grouped = STREAM.replace("SELECT * FROM S", "SELECT NAME, COUNT(*) AS C FROM S GROUP BY NAME")
    assert "streamSourceV5" in _step_types(grouped.replace("CREATE STREAM OUT", "CREATE TABLE OUT"))
    # JSON is read at level 1 already: its plans keep streamSourceV3/V4.
    assert "streamSourceV4" in _step_types(STREAM.replace("'DELIMITED'", "'JSON'"))
    # A DECIMAL column has no native DELIMITED form: level 2 changes nothing, V3 is planned.
    decimal = STREAM.replace("D DOUBLE", "D DECIMAL(4, 2)")
    assert "streamSourceV4" in _step_types(decimal)


def test_level_rules_name_what_each_level_reads():
    formats = S.Formats(key_format="KAFKA", value_format="DELIMITED")
    schema = LogicalSchema.parse("ID INT KEY, A STRING, B DOUBLE")
    assert native_reason(formats, schema, None) == "value format DELIMITED has no native form yet"
    assert native_reason(formats, schema, None, level=2) is None
    assert level_2_reads(formats, schema, None)
    decimal = LogicalSchema.parse("ID INT KEY, A DECIMAL(4, 2)")
    assert native_reason(formats, decimal, None, level=2) == (
        "value type DECIMAL(4, 2) has no native DELIMITED form yet"
    )
    assert not level_2_reads(formats, decimal, None)
    with pytest.raises(InternalError, match="No native format level 3"):
        native_reason(formats, schema, None, level=3)


def test_a_delimited_source_reports_native_columns_and_has_one_python_fallback(spark):
    engine = _engine(True, STREAM, ("s", "OUT"))
    (query,) = engine.query_order()
    engine.store.append(TopicRecord("s", 1, "a,1,2,1.5,true", 10))
    with collecting_reports() as reports:
        built = build(query.root, BuildContext(runtime=engine.runtime(), query_id=query.query_id))
    hows = {(r.step_type, r.name): r.how for r in reports}
    assert hows[("streamSourceV6", "NAME")] == "native"
    assert hows[("streamSourceV6", "D")] == "native"
    # The sink writes DELIMITED with the V1 serdes (no native DELIMITED writer yet).
    assert hows[("streamSinkV3", "NAME")] == "fallback: value format DELIMITED has no native form yet"
    execution = built.df._jdf.queryExecution()
    assert "split(" in execution.analyzed().toString()
    # One Python pass over whole records: the sink's. The V1 source would add a second.
    assert execution.executedPlan().toString().count("MapInArrow") == 1
