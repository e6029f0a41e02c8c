"""The command topic: every statement that changes the metastore, as a log (see ``log``)."""

from engine.commandlog.command import Command, QueuedCommand
from engine.commandlog.log import CommandLog, command_topic

__all__ = ["Command", "CommandLog", "QueuedCommand", "command_topic"]
