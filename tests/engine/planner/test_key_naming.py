"""ksqlDB's names for new key columns (PARTITION BY) and for a join's synthetic key."""

from __future__ import annotations

from engine.analysis.joins import synthetic_key_name
from engine.analysis.scope import column_alias_generator
from engine.metastore import DataSource
from engine.parser import parse_expression
from engine.plan import types as T
from engine.plan.schema import Column, LogicalSchema, Namespace
from engine.plan.steps import Formats


def test_a_struct_field_is_named_after_the_field_and_numbered_past_the_columns_holding_it() -> None:
    name = column_alias_generator(["ID", "ZIP", "ZIP_2", "KSQL_COL_0"])
    assert name(parse_expression("ADDR->ZIP")) == "ZIP_1"
    assert name(parse_expression("OTHER->ZIP")) == "ZIP_3"
    assert name(parse_expression("ADDR->CITY")) == "CITY"
    assert name(parse_expression("UCASE(NAME)")) == "KSQL_COL_1"
    assert name(parse_expression("ID + 1")) == "KSQL_COL_2"


def test_a_field_named_with_a_number_draws_from_its_stem() -> None:
    name = column_alias_generator(["ID"])
    assert name(parse_expression("S->F_7")) == "F"
    assert name(parse_expression("S->F")) == "F_1"


def _source(name: str, *columns: str) -> DataSource:
    schema = LogicalSchema(tuple(Column(c, T.INTEGER, Namespace.VALUE) for c in columns))
    return DataSource(name=name, kind="STREAM", schema=schema, topic=name.lower(), formats=Formats(key_format="KAFKA", value_format="JSON"))


def test_the_synthetic_join_key_skips_only_numbers_the_sources_own_columns_hold() -> None:
    assert synthetic_key_name([_source("A", "ID"), _source("B", "ID")]) == "ROWKEY"
    assert synthetic_key_name([_source("A", "ROWKEY"), _source("B", "ROWKEY_2")]) == "ROWKEY_1"
    assert synthetic_key_name([_source("A", "ROWKEY", "ROWKEY_1"), _source("B", "MY_ROWKEY")]) == "ROWKEY_2"
