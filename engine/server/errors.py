"""What the service refuses, with ksqlDB's error code; the HTTP layer turns it into a body.

ksqlDB's error codes start with their HTTP status: 40001 is a 400, 50301 a 503.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.errors import KsqlError, ParseError
from engine.server import entities


class ServiceError(Exception):
    """A request or statement the service refused: ksqlDB error code, message, statement."""

    def __init__(
        self,
        message: str,
        *,
        code: int = entities.ERROR_BAD_STATEMENT,
        statement_text: str | None = None,
        entities_so_far: Sequence[Any] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.statement_text = statement_text
        self.entities = list(entities_so_far)

    @property
    def http_status(self) -> int:
        return self.code // 100

    def body(self) -> dict[str, Any]:
        """ksqlDB's error body: ``statement_error`` when a statement is named, else ``generic_error``."""
        if self.statement_text is not None:
            return entities.statement_error(self.message, self.statement_text, self.entities, self.code)
        return entities.generic_error(self.code, self.message)


def statement_failure(exc: KsqlError, text: str) -> str:
    """The message of a statement the service could not parse, as ksqlDB words it.

    Text off the grammar: ``line L:C: Syntax Error`` and the statement (ksqlDB's shape),
    then kspark's own detail (what it met and expected). Text refused while it is built
    (a LIMIT that is no integer, an undefined variable): ``Failed to prepare statement:
    ...`` with the position after it. Any other error: its message as it is.
    """
    if not isinstance(exc, ParseError):
        return str(exc)
    where = f"line {exc.line}:{exc.column}" if exc.line is not None else ""
    if exc.syntax:
        if exc.reason.startswith("Syntax Error\nUnknown statement"):  # ksqlDB's words alone
            return f"{where}: {exc.reason}" if where else exc.reason
        detail = exc.reason.removeprefix("Syntax Error\n")
        return f"{where + ': ' if where else ''}Syntax Error\n\nStatement: {text.strip()}\n{detail}"
    return f"Failed to prepare statement: {exc.reason}" + (f" ({where})" if where else "")
