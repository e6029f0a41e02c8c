"""``qtt_from_bytes``: bytes a serde wrote read back as the QTT form ``serialize`` gives."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import RecordSerdeError
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


def _each(serde, data):
    """``qtt_from_bytes`` of each item, or the type of the error it raises."""
    out = []
    for d in data:
        try:
            out.append(serde.qtt_from_bytes(d))
        except Exception as exc:  # noqa: BLE001 - the error is what is compared
            return type(exc)
    return out


@given(st.lists(st.none() | ROWS, max_size=20))
def test_many_plain_json_texts_read_as_each_alone(rows):
    serde = JsonSerde(FormatInfo("JSON"), COLUMNS, wrapped=True, is_key=False)
    data = [None if r is None else serde.to_bytes(serde.serialize(r)) for r in rows]
    assert _same(dict(enumerate(serde.qtt_from_bytes_many(data))), dict(enumerate(_each(serde, data))))


def test_texts_that_are_not_one_json_value_each_are_read_one_by_one():
    serde = JsonSerde(FormatInfo("JSON"), [Column("I", T.INTEGER)], wrapped=False, is_key=False)
    # Each list joins into a valid JSON array of another length, or into no JSON at all.
    for data in ([b"1,2", b"3"], [b"[1", b"2]"], [b'"a', b'b"'], [b"1", b""], [b"\xef\xbb\xbf1", b"2"]):
        want = _each(serde, data)
        if isinstance(want, list):
            assert serde.qtt_from_bytes_many(data) == want, data
        else:
            try:
                serde.qtt_from_bytes_many(data)
            except want:
                continue
            raise AssertionError(f"{data!r} read without the error {want.__name__}")
    assert serde.qtt_from_bytes_many([None, b"7", None]) == [None, 7, None]
    assert serde.qtt_from_bytes_many([]) == []


@given(st.sampled_from([T.INTEGER, T.BIGINT]), st.lists(st.none() | st.integers(T.INT_MIN, T.INT_MAX)))
def test_kafka_integers_read_back_many_at_once_as_one_at_a_time(sql_type, values):
    serde = KafkaSerde(FormatInfo("KAFKA"), [Column("K", sql_type)], wrapped=False, is_key=True)
    data = [None if v is None else serde.to_bytes(v) for v in values]
    assert serde.qtt_from_bytes_many(data) == [serde.qtt_from_bytes(d) for d in data] == values


def test_kafka_integers_of_another_width_fail_as_one_at_a_time():
    serde = KafkaSerde(FormatInfo("KAFKA"), [Column("K", T.BIGINT)], wrapped=False, is_key=True)
    with pytest.raises(RecordSerdeError, match="expected 8 bytes, got 4"):
        serde.qtt_from_bytes_many([serde.to_bytes(1), b"\0\0\0\1"])
