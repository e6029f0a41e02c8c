"""The statement that created a source, read back from the source's saved text."""

from __future__ import annotations

from engine.parser import ast, creating_statement


def test_the_first_statement_of_a_text_an_alter_extended_is_the_create() -> None:
    created = creating_statement(
        "CREATE STREAM S2 AS SELECT * FROM S1;\nALTER STREAM S2 ADD COLUMN X INT;"
    )
    assert created is not None
    assert isinstance(created.statement, ast.CreateAsSelect)
    assert created.text == "CREATE STREAM S2 AS SELECT * FROM S1;"


def test_an_empty_or_unparsable_text_has_no_creating_statement() -> None:
    assert creating_statement("  ") is None
    assert creating_statement("CREATE STREAM (") is None
