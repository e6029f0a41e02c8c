"""``qtt_from_bytes``: bytes a serde wrote read back as the QTT form ``serialize`` gives."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from engine.plan import types as T
from engine.plan.schema import Column
from engine.serde.formats import FormatInfo
from engine.serde.json_format import JsonSerde
from engine.serde.kafka_format import KafkaSerde

COLUMNS = [Column("B", T.BOOLEAN), Column("I", T.INTEGER), Column("L", T.BIGINT), Column("D", T.DOUBLE),
           Column("S", T.STRING)]
ROWS = st.fixed_dictionaries(
    {
        "B": st.none() | st.booleans(),
        "I": st.none() | st.integers(T.INT_MIN, T.INT_MAX),
        "L": st.none() | st.integers(T.BIGINT_MIN, T.BIGINT_MAX),
        "D": st.none() | st.floats(),  # NaN and infinities included
        "S": st.none() | st.text(),
    }
)


def _same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


@given(ROWS)
def test_plain_json_reads_back_as_serialize_writes(row):
    serde = JsonSerde(FormatInfo("JSON"), COLUMNS, wrapped=True, is_key=False)
    qtt = serde.serialize(row)
    assert _same(serde.qtt_from_bytes(serde.to_bytes(qtt)), qtt)


@given(st.none() | st.floats())
def test_a_kafka_double_reads_back_as_serialize_writes(value):
    serde = KafkaSerde(FormatInfo("KAFKA"), [Column("D", T.DOUBLE)], wrapped=False, is_key=True)
    qtt = serde.serialize({"D": value})
    assert _same(serde.qtt_from_bytes(serde.to_bytes(qtt)), qtt)


def test_a_decimal_column_takes_the_general_path():
    serde = JsonSerde(FormatInfo("JSON"), [Column("M", T.Decimal(4, 2))], wrapped=True, is_key=False)
    qtt = serde.serialize({"M": __import__("decimal").Decimal("1.50")})
    assert serde.qtt_from_bytes(serde.to_bytes(qtt)) == qtt
