"""The text form of logical schemas, as plans and QTT post-conditions write it."""

from __future__ import annotations

import pytest

from engine.errors import PlanError
from engine.plan.schema import LogicalSchema, Namespace


def test_a_tables_primary_key_reads_as_a_key_column() -> None:
    table = LogicalSchema.parse("K INT PRIMARY KEY, K2 INT primary   key, V INT")
    assert table == LogicalSchema.parse("K INT KEY, K2 INT KEY, V INT")
    assert [c.namespace for c in table.columns] == [Namespace.KEY, Namespace.KEY, Namespace.VALUE]


def test_primary_without_key_is_refused() -> None:
    with pytest.raises(PlanError, match="Cannot parse schema"):
        LogicalSchema.parse("K INT PRIMARY, V INT")


def test_unquoted_names_may_start_with_digits_as_ksqldb_identifiers_do() -> None:
    schema = LogicalSchema.parse("ID STRING KEY, 1R DECIMAL(33,16), s STRUCT<2x INT>")
    assert str(schema) == "`ID` STRING KEY, `1R` DECIMAL(33, 16), `S` STRUCT<`2X` INTEGER>"
    with pytest.raises(PlanError, match="Cannot parse schema"):
        LogicalSchema.parse("ID STRING KEY, 12 INT")  # a number is no name
