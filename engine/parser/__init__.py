"""The ksqlDB-dialect SQL parser (upper layer): text to ``engine.parser.ast`` statements."""

from __future__ import annotations

from engine.parser.parser import (
    ParsedStatement,
    column_reference,
    creating_statement,
    parse,
    parse_expression,
    reserved_words,
)

__all__ = ["ParsedStatement", "column_reference", "creating_statement", "parse", "parse_expression", "reserved_words"]
