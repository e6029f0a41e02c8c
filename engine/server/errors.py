"""What the service refuses, with ksqlDB's error code; the HTTP layer turns it into a body.

ksqlDB's error codes start with their HTTP status: 40001 is a 400, 50301 a 503.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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
