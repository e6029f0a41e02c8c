"""Constraints on plan field values, attached to field annotations with ``typing.Annotated``.

``join_type: Annotated[str, OneOf(JOIN_TYPES)]`` is a ``str`` to the serde (``typing.
get_type_hints`` strips ``Annotated``), so a constraint never changes the JSON a plan
serialises to. ``qtt schema generate`` reads them to give each field a precise JSON Schema:
``OneOf`` becomes an ``enum`` (or, on a ``tuple[tuple[str, str], ...]`` of properties, the
allowed property names), ``Minimum`` a ``minimum`` and ``MinLength`` a ``minLength``.

Each constraint states what the plan's readers accept (the steps' ``__post_init__`` checks
and the builders), so the schema refuses exactly the plans the engine cannot load.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OneOf:
    """The value is one of these strings (JSON Schema ``enum``)."""

    values: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.values or len(set(self.values)) != len(self.values):
            raise TypeError(f"OneOf needs distinct values, got {self.values!r}.")


@dataclass(frozen=True, slots=True)
class Minimum:
    """The integer is at least ``value`` (JSON Schema ``minimum``)."""

    value: int


@dataclass(frozen=True, slots=True)
class MinLength:
    """The string has at least ``value`` characters (JSON Schema ``minLength``)."""

    value: int


NON_EMPTY = MinLength(1)
NOT_NEGATIVE = Minimum(0)
