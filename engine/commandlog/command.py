"""One command on the command topic: a statement, its execution plan and its properties.

The record's value is JSON (sorted keys), ksqlDB's command shape with kspark's plan:

    {"statement": "CREATE STREAM S (...) WITH (...);",
     "plan": {...} | null,          # the statement plan, as planned cases save it
     "terminate": "CSAS_T_1" | null, # TERMINATE carries the query id instead of a plan
     "streamsProperties": {...},     # the request's properties (auto.offset.reset, ...)
     "originalProperties": {...},    # the service's compatibility-breaking configs, when any
     "version": 1}

The record's key is the command id (``stream/`S`/create``), as ksqlDB keys it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from engine.errors import CommandLogError

COMMAND_VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """What a server executes from the log: never validated again, never skipped."""

    command_id: str
    statement: str
    plan: Any = None  # the statement plan's JSON value
    terminate: str | None = None  # TERMINATE: a query id, or ALL
    properties: dict[str, Any] = field(default_factory=dict)
    # The compatibility-breaking configs it was planned with (engine.facade.compatibility), as
    # ksqlDB's commands keep theirs in originalProperties; none in logs of 0.11.0 and earlier.
    original_properties: dict[str, Any] = field(default_factory=dict)

    def key_bytes(self) -> bytes:
        return self.command_id.encode("utf-8")

    def value_bytes(self) -> bytes:
        value = {
            "statement": self.statement,
            "plan": self.plan,
            "terminate": self.terminate,
            "streamsProperties": self.properties,
            "version": COMMAND_VERSION,
        }
        if self.original_properties:
            value["originalProperties"] = self.original_properties
        return json.dumps(value, sort_keys=True, default=str).encode("utf-8")

    @classmethod
    def from_record(cls, key: bytes | None, value: bytes | None, offset: int) -> Command:
        """Decode a command record; a damaged one is a ``CommandLogError`` naming its offset."""
        try:
            data = json.loads(value or b"")
            if not isinstance(data, dict) or not isinstance(data.get("statement"), str):
                raise ValueError("no statement")
            version = data.get("version", COMMAND_VERSION)
            if version > COMMAND_VERSION:
                raise CommandLogError(
                    f"The command at offset {offset} has version {version}; this kspark reads "
                    f"versions up to {COMMAND_VERSION}: upgrade kspark."
                )
            return cls(
                command_id=(key or b"").decode("utf-8"),
                statement=data["statement"],
                plan=data.get("plan"),
                terminate=data.get("terminate"),
                properties=dict(data.get("streamsProperties") or {}),
                original_properties=dict(data.get("originalProperties") or {}),
            )
        except (ValueError, UnicodeDecodeError) as exc:
            raise CommandLogError(
                f"The command at offset {offset} of the command topic is not a kspark command: {exc}."
            ) from None


@dataclass(frozen=True, slots=True)
class QueuedCommand:
    """A command as the log holds it: its sequence number is its offset in the topic."""

    sequence: int
    command: Command
