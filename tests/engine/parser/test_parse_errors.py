"""Parse errors carry the position of the offending token and say what was expected."""

from __future__ import annotations

import pytest

from engine.errors import ParseError
from engine.parser import parse, parse_expression, reserved_words
from engine.plan.expr import RESERVED_WORDS


def error_of(text: str, **kwargs: object) -> ParseError:
    with pytest.raises(ParseError) as info:
        parse(text, **kwargs)  # type: ignore[arg-type]
    return info.value


def test_misspelt_keyword_points_at_the_token_and_lists_expected() -> None:
    err = error_of("SELECT * FORM s;")
    assert (err.line, err.column) == (1, 10)
    assert "Syntax error at or near 'FORM' at line 1:10" in str(err)
    assert "FROM" in str(err)


def test_a_syntax_error_starts_with_ksqldb_words_then_says_what_kspark_met_and_expected() -> None:
    err = error_of("CREATE TABLE T AS SELECT COUNT(*) FROM S\n  GROUP BY DATA AND ID;")
    assert err.reason.split("\n") == [
        "Syntax Error",
        "Syntax error at or near 'AND' at line 2:17: expected one of EMIT, HAVING, LIMIT, PARTITION, ',', ';', '||'.",
    ]
    assert str(err).startswith("line 2:17: Syntax Error\nSyntax error at or near 'AND' at line 2:17")


def test_one_missing_token_is_named_as_antlr_recovery_names_it() -> None:
    err = error_of("CREATE TABLE T AS SELECT F1, COUNT(*) FROM S GROUP BY F3, (F2, F1);")
    assert str(err).startswith("line 1:62: Syntax Error\nmissing ')' at ','\nSyntax error at or near ','")
    at_end = error_of("SELECT * FROM S WHERE (X > 1")
    assert "Syntax Error\nmissing ')' at '<EOF>'\n" in str(at_end)


def test_positions_are_relative_to_the_whole_text() -> None:
    err = error_of(
        "CREATE STREAM a (x INT) WITH (kafka_topic='a');\nSELECT CAST(x AS NULL) FROM a;"
    )
    assert (err.line, err.column) == (2, 18)
    assert "'NULL'" in str(err)
    assert err.snippet == "SELECT CAST(x AS NULL) FROM a;"


def test_a_statement_parsed_alone_counts_lines_from_where_it_starts_in_its_script() -> None:
    err = error_of("SELECT *\n  FORM s;", first_line=4)
    assert (err.line, err.column) == (5, 3)
    assert "Syntax error at or near 'FORM' at line 5:3" in str(err)
    (parsed,) = parse("\n  SELECT * FROM s;", first_line=3)
    assert (parsed.line, parsed.column) == (4, 3)
    assert parsed.text == "SELECT * FROM s;"


def test_unknown_statement_names_the_first_word() -> None:
    err = error_of("FROB s;")
    assert (err.line, err.column) == (1, 1)
    assert "Unknown statement 'FROB'" in str(err)


def test_missing_end_of_statement_is_reported_at_the_end() -> None:
    err = error_of("SELECT * FROM")
    assert "end of input" in str(err)
    assert err.line == 1


def test_reserved_word_as_unquoted_identifier_fails() -> None:
    err = error_of("CREATE STREAM s (select INT) WITH (kafka_topic='s');")
    assert (err.line, err.column) == (1, 18)
    assert parse("CREATE STREAM s (`select` INT) WITH (kafka_topic='s');")


def test_group_by_takes_value_expressions_only() -> None:
    with pytest.raises(ParseError):
        parse("SELECT COUNT(*) FROM s GROUP BY a AND b;")


def test_table_function_in_from_is_a_syntax_error() -> None:
    with pytest.raises(ParseError):
        parse("SELECT * FROM EXPLODE(arr);")


def test_key_on_a_table_and_primary_key_on_a_stream_are_rejected_with_position() -> None:
    table = error_of("CREATE TABLE t (id INT KEY) WITH (kafka_topic='t');")
    stream = error_of("CREATE STREAM s (v INT, id INT PRIMARY KEY) WITH (kafka_topic='s');")
    assert (table.line, table.column) == (1, 17)
    assert "please use 'PRIMARY KEY' for tables" in str(table)
    assert (stream.line, stream.column) == (1, 25)
    assert "please use 'KEY' for streams" in str(stream)


def test_test_script_asserts_are_rejected_by_default() -> None:
    err = error_of("ASSERT VALUES out (k) VALUES (1);")
    assert (err.line, err.column) == (1, 8)


def test_unknown_variable_is_an_error() -> None:
    err = error_of("SELECT ${missing} FROM s;")
    assert "Variable 'missing' is not defined" in str(err)


def test_integer_literal_out_of_bigint_range_is_an_error() -> None:
    with pytest.raises(ParseError, match="^line 1:1: Invalid numeric literal: 99999999999999999999$"):
        parse_expression("99999999999999999999")


def test_double_literal_out_of_double_range_is_an_error() -> None:
    with pytest.raises(ParseError, match="^line 1:1: Number overflows DOUBLE: 2E999$"):
        parse_expression("2E999")


def test_like_escape_must_be_one_character() -> None:
    with pytest.raises(ParseError, match="single character"):
        parse_expression("a LIKE 'x' ESCAPE 'ab'")


def test_unexpected_character_is_reported() -> None:
    err = error_of("SELECT a # b FROM s;")
    assert (err.line, err.column) == (1, 10)


def test_formatter_reserved_words_match_the_grammar() -> None:
    assert reserved_words() == RESERVED_WORDS


def test_a_missing_keyword_is_quoted_and_a_missing_kind_of_token_is_not_called_missing() -> None:
    assert "Syntax Error\nmissing 'BY' at 'X'\n" in str(error_of("SELECT * FROM S PARTITION X;"))
    err = error_of("CREATE STREAM S (X INT) WITH (KAFKA_TOPIC=);")
    assert err.reason.startswith("Syntax Error\nSyntax error at or near ')'") and "missing" not in err.reason
