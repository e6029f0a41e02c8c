"""HTTP/1.1 status lines with their reason phrase (``HTTP/1.1 200 OK``) on Hypercorn.

Hypercorn's h11 protocol builds its responses without a reason, so h11 writes
``HTTP/1.1 200 `` and clients that show or check the phrase (ksqlDB's do) see none.
``install()`` makes Hypercorn's connections use ``ReasonPhraseH11Protocol``, which gives
every response whose reason is empty the standard phrase of its status (``http.HTTPStatus``).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import hypercorn.protocol
from hypercorn.protocol.h11 import H11Protocol


def reason_phrase(status_code: int) -> bytes:
    """The standard reason phrase of ``status_code`` (empty for a code without one)."""
    try:
        return HTTPStatus(status_code).phrase.encode("ascii")
    except ValueError:
        return b""


class ReasonPhraseH11Protocol(H11Protocol):
    """Hypercorn's HTTP/1.1 protocol, writing a reason phrase in every status line."""

    async def _send_h11_event(self, event: Any) -> None:
        if getattr(event, "reason", None) == b"" and hasattr(event, "status_code"):  # h11 (Informational)Response
            # h11's events are frozen; the reason is only read when the status line is written
            object.__setattr__(event, "reason", reason_phrase(event.status_code))
        await super()._send_h11_event(event)


def install() -> None:
    """Make Hypercorn's protocol wrapper build ``ReasonPhraseH11Protocol`` connections."""
    hypercorn.protocol.H11Protocol = ReasonPhraseH11Protocol  # type: ignore[misc]
