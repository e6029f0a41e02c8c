"""The one error of the migrations tool: its message is the line the command prints."""

from __future__ import annotations


class MigrationError(Exception):
    """A migrations command cannot go on; the message says why, in ksqlDB's tool's words."""
