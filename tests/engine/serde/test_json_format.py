from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import RecordSerdeError, UnsupportedFeatureError
from engine.plan.schema import Column, LogicalSchema
from engine.serde import FormatInfo, SerdeFeatures, key_serde, value_serde

JSON = FormatInfo("JSON")


def cols(text: str) -> tuple[Column, ...]:
    return LogicalSchema.parse(text).columns


def json_value(text: str, wrap: bool | None = None, fmt: FormatInfo = JSON):
    return value_serde(fmt, cols(text), SerdeFeatures(wrap))


def test_missing_fields_read_as_null() -> None:
    serde = json_value("A INT, B STRING")
    assert serde.deserialize({"A": 7}) == {"A": 7, "B": None}


def test_unquoted_columns_match_fields_in_any_case() -> None:
    serde = json_value("ORDER_ID BIGINT, CITY STRING")
    assert serde.deserialize({"order_id": 3, "City": "Oslo"}) == {"ORDER_ID": 3, "CITY": "Oslo"}


def test_quoted_lower_case_column_matches_only_its_exact_name() -> None:
    serde = json_value("`city` STRING, `Zip` STRING")
    assert serde.deserialize({"CITY": "x", "ZIP": "1"}) == {"city": None, "Zip": None}
    assert serde.deserialize({"city": "y", "Zip": "2"}) == {"city": "y", "Zip": "2"}


def test_exact_name_wins_over_upper_cased_match() -> None:
    serde = json_value("A INT")
    assert serde.deserialize({"a": 1, "A": 2}) == {"A": 2}


def test_nested_struct_fields_match_case_insensitively() -> None:
    serde = json_value("S STRUCT<INNER STRUCT<N INT>>")
    assert serde.deserialize({"s": {"inner": {"n": 4}}}) == {"S": {"INNER": {"N": 4}}}


def test_serialize_uses_schema_names_in_schema_order_with_nulls() -> None:
    serde = json_value("B INT, `a` STRING, S STRUCT<Y INT, X INT>")
    out = serde.serialize({"S": {"X": 1}, "a": "q"})
    assert out == {"B": None, "a": "q", "S": {"Y": None, "X": 1}}
    assert list(out) == ["B", "a", "S"]
    assert list(out["S"]) == ["Y", "X"]


@pytest.mark.parametrize(
    ("type_text", "given_value", "expected"),
    [
        ("INT", "42", 42),
        ("INT", Decimal("3.9"), 3),
        ("BIGINT", "-9000000000", -9000000000),
        ("DOUBLE", 3, 3.0),
        ("DOUBLE", "2.5", 2.5),
        ("DOUBLE", Decimal("0.1"), 0.1),
        ("STRING", 12, "12"),
        ("STRING", True, "true"),
        ("STRING", Decimal("1.50"), "1.50"),
        ("STRING", {"k": [1, "a"]}, '{"k":[1,"a"]}'),
        ("STRING", ["a", 1], "[a, 1]"),
        ("STRING", ["a", None, 2], "[a, null, 2]"),
        ("BOOLEAN", "TRUE", True),
        ("DECIMAL(5, 2)", Decimal("1.5"), Decimal("1.50")),
        ("DECIMAL(5, 2)", "12.345", Decimal("12.35")),
        ("DECIMAL(5, 2)", 7, Decimal("7.00")),
        ("BYTES", "aGk=", b"hi"),
        ("DATE", 3, dt.date(1970, 1, 4)),
        ("DATE", "-1", dt.date(1969, 12, 31)),
        ("TIME", 3_723_004, dt.time(1, 2, 3, 4000)),
        ("TIMESTAMP", 1_500_000_000_123, dt.datetime(2017, 7, 14, 2, 40, 0, 123000)),
        ("ARRAY<STRING>", [1, None], ["1", None]),
        ("MAP<STRING, INT>", {"a": "1"}, {"a": 1}),
    ],
)
def test_values_are_coerced_like_ksqldb(
    type_text: str, given_value: object, expected: object
) -> None:
    serde = json_value(f"V {type_text}")
    assert serde.deserialize({"V": given_value}) == {"V": expected}


def test_bytes_that_are_not_base64_raise_in_ksqldbs_words() -> None:
    with pytest.raises(RecordSerdeError) as raised:
        json_value("V BYTES").deserialize({"V": "not base64!"})
    assert str(raised.value) == "Value is not a valid Base64 encoded string: not base64!"


@pytest.mark.parametrize(
    ("type_text", "given_value"),
    [
        ("INT", "abc"),
        ("INT", True),
        ("INT", 2**31),
        ("BIGINT", [1]),
        ("DOUBLE", "1.2.3"),
        ("BOOLEAN", 1),
        ("BOOLEAN", "yes"),
        ("DECIMAL(3, 1)", Decimal("123.4")),
        ("DATE", "2020-01-01"),
        ("ARRAY<INT>", {"a": 1}),
        ("MAP<STRING, INT>", [1]),
        ("STRUCT<A INT>", "x"),
    ],
)
def test_values_that_cannot_be_coerced_raise(type_text: str, given_value: object) -> None:
    serde = json_value(f"V {type_text}")
    with pytest.raises(RecordSerdeError, match="field V"):
        serde.deserialize({"V": given_value})


def test_coercion_error_names_nested_path_and_value() -> None:
    serde = json_value("S STRUCT<A ARRAY<INT>>")
    with pytest.raises(RecordSerdeError) as info:
        serde.deserialize({"S": {"A": [1, "x"]}})
    assert "S.A[]" in str(info.value)
    assert "'x'" in str(info.value)
    assert "INTEGER" in str(info.value)


def test_wrapped_value_that_is_not_an_object_raises() -> None:
    serde = json_value("A INT, B INT")
    with pytest.raises(RecordSerdeError, match="expected a JSON object with the fields A, B"):
        serde.deserialize([1, 2])


def test_single_column_is_wrapped_by_default() -> None:
    serde = json_value("A INT")
    assert serde.serialize({"A": 1}) == {"A": 1}
    assert serde.deserialize({"A": 1}) == {"A": 1}


def test_unwrapped_single_column_is_the_bare_value() -> None:
    serde = json_value("A ARRAY<STRING>", wrap=False)
    assert serde.deserialize(["x", None]) == {"A": ["x", None]}
    assert serde.serialize({"A": ["y"]}) == ["y"]
    assert serde.serialize({"A": None}) is None


def test_unwrapped_struct_column_reads_the_object_as_the_struct() -> None:
    serde = json_value("S STRUCT<F1 STRING>", wrap=False)
    assert serde.deserialize({"f1": "v"}) == {"S": {"F1": "v"}}
    assert serde.serialize({"S": {"F1": "v"}}) == {"F1": "v"}


def test_tombstone_is_none_both_ways() -> None:
    serde = json_value("A INT")
    assert serde.deserialize(None) is None
    assert serde.serialize(None) is None


def test_serialize_writes_temporal_bytes_and_decimal_forms() -> None:
    serde = json_value("D DATE, T TIME, TS TIMESTAMP, B BYTES, DEC DECIMAL(6, 4), X DOUBLE")
    row = {
        "D": dt.date(1970, 1, 11),
        "T": dt.time(0, 0, 1),
        "TS": dt.datetime(1970, 1, 1, 0, 0, 2),
        "B": b"{",
        "DEC": Decimal("10"),
        "X": 2,
    }
    out = serde.serialize(row)
    assert out == {"D": 10, "T": 1000, "TS": 2000, "B": "ew==", "DEC": Decimal("10.0000"), "X": 2.0}
    assert str(out["DEC"]) == "10.0000"
    assert isinstance(out["X"], float)


def test_json_key_single_column_is_unwrapped_and_multi_column_is_an_object() -> None:
    single = key_serde(JSON, cols("K STRING KEY"))
    assert single.deserialize("abc") == {"K": "abc"}
    assert single.serialize({"K": "abc"}) == "abc"
    multi = key_serde(JSON, cols("K INT KEY, K2 INT KEY"))
    assert multi.deserialize({"k": None, "K2": 2}) == {"K": None, "K2": 2}
    assert multi.serialize({"K": 1, "K2": 2}) == {"K": 1, "K2": 2}


def test_struct_key_keeps_its_object_shape() -> None:
    serde = key_serde(JSON, cols("K STRUCT<F DOUBLE> KEY"))
    assert serde.deserialize({"f": Decimal("4.5")}) == {"K": {"F": 4.5}}
    assert serde.serialize({"K": {"F": 4.5}}) == {"F": 4.5}


def test_json_bytes_round_trip_keeps_decimal_scale() -> None:
    serde = json_value("A DECIMAL(6, 3), S STRING")
    qtt = serde.serialize({"A": Decimal("1.5"), "S": 'q"é'})
    raw = serde.to_bytes(qtt)
    assert raw == '{"A":1.500,"S":"q\\"é"}'.encode()
    back = serde.from_bytes(raw)
    assert back == {"A": Decimal("1.500"), "S": 'q"é'}
    assert str(back["A"]) == "1.500"


def test_json_from_bytes_rejects_invalid_json() -> None:
    with pytest.raises(RecordSerdeError, match="not valid JSON"):
        json_value("A INT").from_bytes(b"{nope")


def test_json_sr_bytes_carry_the_schema_registry_header() -> None:
    serde = json_value("A INT", fmt=FormatInfo("JSON_SR", {"schema_id": "7"}))
    raw = serde.to_bytes({"A": 1})
    assert raw == b"\x00\x00\x00\x00\x07" + b'{"A":1}'
    assert serde.from_bytes(raw) == {"A": 1}
    with pytest.raises(RecordSerdeError) as raised:
        serde.from_bytes(b'{"A":1}')
    assert str(raised.value) == (
        "Got unexpected JSON serialization format that did not start with the magic byte. If this "
        "stream was not serialized using the JsonSchemaConverter, then make sure the stream is "
        "declared with JSON format (not JSON_SR)."
    )


def test_json_sr_bytes_without_a_schema_id_name_schema_id_1() -> None:
    serde = json_value("A INT", fmt=FormatInfo("JSON_SR"))
    assert serde.to_bytes({"A": 1}) == b"\x00\x00\x00\x00\x01" + b'{"A":1}'


def test_avro_bytes_are_not_supported_yet() -> None:
    serde = json_value("A INT", fmt=FormatInfo("AVRO"))
    with pytest.raises(UnsupportedFeatureError) as info:
        serde.to_bytes({"A": 1})
    assert "AVRO" in info.value.feature


def test_avro_reads_maps_and_unwrapped_single_keys() -> None:
    avro = FormatInfo("AVRO")
    serde = json_value("M1 MAP<STRING, INT>, M2 MAP<STRING, STRING>", fmt=avro)
    data = {"M1": {"k": 1}, "M2": {"k": "v"}}
    assert serde.serialize(serde.deserialize(data)) == data
    assert key_serde(avro, cols("K INT KEY")).deserialize(42) == {"K": 42}


def test_protobuf_nulls_read_and_write_as_defaults() -> None:
    serde = json_value(
        "I INT, L BIGINT, D DOUBLE, B BOOLEAN, S STRING, A ARRAY<INT>, M MAP<STRING, INT>, "
        "ST STRUCT<F INT>, BY BYTES",
        fmt=FormatInfo("PROTOBUF"),
    )
    row = serde.deserialize({"i": None, "st": {}})
    assert row == {
        "I": 0,
        "L": 0,
        "D": 0.0,
        "B": False,
        "S": "",
        "A": [],
        "M": {},
        "ST": {"F": 0},
        "BY": None,
    }
    assert serde.serialize({"ST": None})["ST"] is None
    assert serde.serialize({"I": None})["I"] == 0


def test_protobuf_with_nullable_representation_keeps_nulls() -> None:
    fmt = FormatInfo("PROTOBUF", {"nullable_representation": "OPTIONAL"})
    serde = json_value("I INT, S STRING", fmt=fmt)
    assert serde.deserialize({"i": None}) == {"I": None, "S": None}
    assert serde.serialize({"I": None}) == {"I": None, "S": None}


def test_protobuf_single_key_is_wrapped() -> None:
    serde = key_serde(FormatInfo("PROTOBUF"), cols("F1 INT KEY"))
    assert serde.deserialize({"F1": None}) == {"F1": 0}
    assert serde.serialize({"F1": 3}) == {"F1": 3}


_PRIMITIVES = {
    "BOOLEAN": st.booleans(),
    "INT": st.integers(-(2**31), 2**31 - 1),
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "DOUBLE": st.floats(allow_nan=False, allow_infinity=False),
    "STRING": st.text(),
    "DECIMAL(8, 3)": st.decimals(
        min_value=Decimal("-99999.999"), max_value=Decimal("99999.999"), places=3
    ),
    "BYTES": st.binary(),
    "DATE": st.dates(),
    "TIMESTAMP": st.datetimes(min_value=dt.datetime(1900, 1, 1)).map(
        lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)
    ),
    "TIME": st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)),
}
_NAMES = list(_PRIMITIVES)
_SCHEMA = ", ".join(f"C{i} {t}" for i, t in enumerate(_NAMES))
_ROWS = st.fixed_dictionaries({f"C{i}": st.none() | _PRIMITIVES[t] for i, t in enumerate(_NAMES)})


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


@given(_ROWS)
def test_json_round_trips_rows_of_primitive_types(row: dict[str, object]) -> None:
    serde = json_value(_SCHEMA)
    back = serde.deserialize(serde.from_bytes(serde.to_bytes(serde.serialize(row))))
    assert back is not None
    assert all(_same(back[k], row[k]) for k in row), (row, back)
