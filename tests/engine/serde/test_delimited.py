from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import RecordSerdeError
from engine.plan.schema import Column, LogicalSchema
from engine.serde import FormatInfo, SerdeFeatures, key_serde, value_serde
from engine.serde.delimited import format_record, parse_record


def cols(text: str) -> tuple[Column, ...]:
    return LogicalSchema.parse(text).columns


def delimited(text: str, delimiter: str | None = None):
    props = {} if delimiter is None else {"delimiter": delimiter}
    return value_serde(FormatInfo("DELIMITED", props), cols(text), SerdeFeatures())


def test_fields_are_read_in_column_order() -> None:
    serde = delimited("ID BIGINT, NAME STRING, PRICE DOUBLE, OK BOOLEAN")
    assert serde.deserialize("7,lamp,2.5,true") == {
        "ID": 7,
        "NAME": "lamp",
        "PRICE": 2.5,
        "OK": True,
    }


def test_empty_fields_are_null() -> None:
    serde = delimited("A INT, B STRING, C INT")
    assert serde.deserialize(",,") == {"A": None, "B": None, "C": None}
    assert serde.deserialize('1,"",3') == {"A": 1, "B": None, "C": 3}


def test_quoted_fields_may_hold_delimiters_quotes_and_newlines() -> None:
    serde = delimited("A STRING, B STRING, C INT")
    assert serde.deserialize('"x,y","say ""hi""\nthere",3') == {
        "A": "x,y",
        "B": 'say "hi"\nthere',
        "C": 3,
    }


def test_quotes_inside_an_unquoted_field_are_literal() -> None:
    assert parse_record('ab"c,d', ",") == ['ab"c', "d"]


def test_each_space_between_a_quoted_field_and_the_delimiter_is_skipped() -> None:
    assert parse_record('"a" ,b', ",") == ["a", "b"]
    assert parse_record('"a"   ,b', ",") == ["a", "b"]


def test_unclosed_quote_raises() -> None:
    with pytest.raises(RecordSerdeError, match="not closed"):
        parse_record('"abc', ",")


def test_text_after_closing_quote_raises() -> None:
    with pytest.raises(RecordSerdeError, match="between a quoted field and the delimiter"):
        parse_record('"a"b,c', ",")


def test_only_the_first_record_is_read() -> None:
    assert parse_record("\n1,2\n3,4", ",") == ["1", "2"]


def test_wrong_field_count_raises_column_count_mismatch() -> None:
    serde = delimited("A INT, B INT")
    with pytest.raises(RecordSerdeError, match="Column count mismatch on deserialization") as info:
        serde.deserialize("1,2,3")
    assert "expected 2 columns" in str(info.value)
    assert "got 3" in str(info.value)


def test_unparsable_field_names_column_and_type() -> None:
    serde = delimited("A INT, B INT")
    with pytest.raises(RecordSerdeError, match="field B") as info:
        serde.deserialize("1,x")
    assert "INTEGER" in str(info.value)


def test_boolean_parses_like_java_parse_boolean() -> None:
    serde = delimited("B BOOLEAN")
    assert serde.deserialize("TRUE") == {"B": True}
    assert serde.deserialize("yes") == {"B": False}


def test_decimals_are_rescaled_and_printed_plainly() -> None:
    serde = delimited("D DECIMAL(6, 4)")
    row = serde.deserialize("12.0")
    assert row == {"D": Decimal("12.0000")}
    assert serde.serialize(row) == "12.0000"
    assert serde.serialize({"D": Decimal("1E+1")}) == "10.0000"


def test_doubles_print_as_java_does() -> None:
    serde = delimited("X DOUBLE, Y DOUBLE")
    assert serde.serialize({"X": 1e10, "Y": 0.5}) == "1.0E10,0.5"


def test_temporal_and_bytes_fields_use_numbers_and_base64() -> None:
    serde = delimited("D DATE, T TIME, TS TIMESTAMP, B BYTES")
    row = serde.deserialize("2,1500,86400001,aGk=")
    assert row == {
        "D": dt.date(1970, 1, 3),
        "T": dt.time(0, 0, 1, 500000),
        "TS": dt.datetime(1970, 1, 2, 0, 0, 0, 1000),
        "B": b"hi",
    }
    assert serde.serialize(row) == "2,1500,86400001,aGk="


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (["-10"], '"-10"'),  # a first field not starting with a letter or digit is quoted
        (["a", "-10"], "a,-10"),
        (["", "x"], '"",x'),
        (["x", ""], "x,"),
        (["x", None, "y"], "x,,y"),
        (["a,b"], '"a,b"'),
        (['say "hi"'], '"say ""hi"""'),
        (["ok", " lead"], 'ok," lead"'),
        (["ok", "trail "], 'ok,"trail "'),
        (["ok", "#tag"], 'ok,"#tag"'),
        (["ok", "line\nbreak"], 'ok,"line\nbreak"'),
        (["with white space", "x"], "with white space,x"),
    ],
)
def test_fields_are_quoted_as_commons_csv_does(fields: list[str | None], expected: str) -> None:
    assert format_record(fields, ",") == expected


def test_custom_delimiters_are_used_both_ways() -> None:
    for name, char in (("|", "|"), ("TAB", "\t"), ("SPACE", " "), ("$", "$")):
        serde = delimited("A INT, B STRING", name)
        assert serde.deserialize(f"1{char}x") == {"A": 1, "B": "x"}
        assert serde.serialize({"A": 2, "B": "y"}) == f"2{char}y"


def test_serde_accepts_an_already_parsed_delimiter_character() -> None:
    serde = delimited("A INT, B STRING", "\t")
    assert serde.deserialize("1\tx y") == {"A": 1, "B": "x y"}
    assert serde.serialize({"A": 1, "B": "x y"}) == "1\tx y"


def test_field_containing_the_custom_delimiter_is_quoted() -> None:
    serde = delimited("A STRING, B STRING", "|")
    assert serde.serialize({"A": "x", "B": "p|q"}) == 'x|"p|q"'


def test_keys_use_fields_in_order_and_null_when_all_null() -> None:
    serde = key_serde(
        FormatInfo("DELIMITED", {"delimiter": ";"}), cols("K1 STRING KEY, K2 STRING KEY")
    )
    assert serde.deserialize("a,b;c") == {"K1": "a,b", "K2": "c"}
    assert serde.deserialize('"x";"y"') == {"K1": "x", "K2": "y"}
    assert serde.serialize({"K1": None, "K2": None}) is None
    assert serde.deserialize(None) is None


def test_bare_key_values_from_qtt_files_are_read_as_text() -> None:
    serde = key_serde(FormatInfo("DELIMITED"), cols("K INT KEY"))
    assert serde.deserialize(5) == {"K": 5}


def test_bytes_form_is_utf8_text() -> None:
    serde = delimited("A STRING, B INT")
    assert serde.to_bytes("é,1") == "é,1".encode()
    assert serde.from_bytes("é,1".encode()) == "é,1"
    assert serde.to_bytes(None) is None and serde.from_bytes(None) is None


def test_bare_qtt_values_are_written_as_their_text() -> None:
    # A QTT file may give a DELIMITED record as a JSON number or boolean: its bytes are its text.
    serde = key_serde(FormatInfo("DELIMITED"), cols("K INT KEY"))
    assert serde.to_bytes(5) == b"5"
    assert serde.to_bytes(2.5) == b"2.5"
    assert serde.to_bytes(True) == b"true"


_PRIMITIVES = {
    "BOOLEAN": st.booleans(),
    "INT": st.integers(-(2**31), 2**31 - 1),
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "DOUBLE": st.floats(allow_nan=False, allow_infinity=False),
    # Empty text reads back as NULL, as in ksqlDB.
    "STRING": st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1),
    "DECIMAL(10, 2)": st.decimals(
        min_value=Decimal("-99999999.99"), max_value=Decimal("99999999.99"), places=2
    ),
    "BYTES": st.binary(min_size=1),
    "DATE": st.dates(),
}
_NAMES = list(_PRIMITIVES)
_SCHEMA = ", ".join(f"C{i} {t}" for i, t in enumerate(_NAMES))


@given(
    st.permutations(_NAMES),
    st.sampled_from([",", "|", "TAB", "SPACE", ";"]),
    st.data(),
)
def test_delimited_round_trips_rows_of_primitive_types(
    order: list[str], delimiter: str, data: st.DataObject
) -> None:
    schema = ", ".join(f"C{i} {t}" for i, t in enumerate(order))
    row = data.draw(
        st.fixed_dictionaries({f"C{i}": st.none() | _PRIMITIVES[t] for i, t in enumerate(order)})
    )
    serde = delimited(schema, delimiter)
    text = serde.serialize(row)
    assert serde.deserialize(serde.from_bytes(serde.to_bytes(text))) == row, text


def test_bytes_that_are_not_base64_name_ksqldbs_reason() -> None:
    with pytest.raises(RecordSerdeError) as raised:
        delimited("B BYTES").deserialize("!!!")
    assert str(raised.value).endswith("Value is not a valid Base64 encoded string: !!!")
