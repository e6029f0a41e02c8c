"""Registered schema text: the error a schema without a ksqlDB equivalent raises, and the
.proto parser.

Schema inference (the planner's side: a schema's columns) and the PROTOBUF codec (the
records' side: a schema's descriptors) both read .proto text and both report a schema they
cannot translate. They share this module rather than importing each other, so the serde
modules import in one direction: ``schema_inference`` -> ``registry`` -> ``protobuf`` ->
``schema_text``.
"""

from __future__ import annotations

from typing import Any


class SchemaTranslationError(Exception):
    """A registered schema has no ksqlDB equivalent; the message says which part."""


def parse_proto(text: str) -> Any:
    """The ``proto_schema_parser`` AST of .proto ``text``; a syntax error raises
    ``SchemaTranslationError`` naming its line and column."""
    from antlr4.error.ErrorListener import ErrorListener
    from proto_schema_parser.parser import Parser

    class _Raise(ErrorListener):  # type: ignore[misc]
        def syntaxError(self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any) -> None:  # noqa: N802
            raise SchemaTranslationError(f"Invalid protobuf schema: line {line}:{column}: {msg}")

    def quiet(recognizer: Any) -> None:
        recognizer.removeErrorListeners()
        recognizer.addErrorListener(_Raise())

    return Parser(setup_lexer=quiet, setup_parser=quiet).parse(text)
