"""Serde edges the planned cases do not reach (found by the mutation check)."""

from __future__ import annotations

import pytest

from engine.errors import AnalysisError
from engine.plan import types as T
from engine.plan.schema import Column, Namespace
from engine.serde import key_serde
from engine.serde.delimited import parse_record
from engine.serde.formats import FormatInfo, check_key_schema, describe


def test_spaces_between_a_quoted_field_and_the_delimiter_are_skipped() -> None:
    assert parse_record('"a"  ,b', ",") == ["a", "b"]


def test_a_quoted_field_ends_at_the_end_of_the_line() -> None:
    assert parse_record('"a"\nx', ",") == ["a"]


def test_unknown_key_formats_are_refused_by_name() -> None:
    with pytest.raises(AnalysisError, match="NOPE"):
        check_key_schema(FormatInfo("NOPE"), [])


def test_key_format_none_cannot_carry_key_columns() -> None:
    column = Column("K", T.STRING, Namespace.KEY)
    with pytest.raises(AnalysisError, match="NONE"):
        key_serde(FormatInfo("NONE"), [column])


def test_values_are_described_by_their_json_type() -> None:
    from decimal import Decimal

    assert describe(Decimal("1.50")) == "number Decimal('1.50')"
    assert describe(True) == "boolean True"
    assert describe([1]) == "array [1]"
    assert describe(b"\x01") == "bytes b'\\x01'"


def test_long_values_are_cut_to_80_characters_in_messages() -> None:
    assert describe("x" * 78) == "string " + repr("x" * 78)
    cut = describe("x" * 79)  # repr adds quotes: 81 characters
    assert cut.endswith("...") and len(cut) == len("string ") + 80
