"""What every step of a query builds to: its key and value columns with their SQL types in
order, stream or table, windowing, and the internal topic or state schemas it adds.

Planned cases save this per step (``spec.json`` ``schemas.steps``) and replay compares it
with what the builders produce now, so a builder that changes an output type fails even
when the saved inputs do not show it. The description is plain JSON: no pyspark needed to
read or compare it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from engine.plan.schema import Column, LogicalSchema, Namespace
from engine.plan.types import quote_identifier

if TYPE_CHECKING:
    from engine.builders.context import BuildContext, Built
    from engine.plan.steps import Step, WindowInfo

StepSchema = dict[str, Any]


def column_text(column: Column) -> str:
    """```NAME` TYPE`` for a key column; value and header columns as the schema prints them."""
    if column.namespace is Namespace.KEY:
        return f"{quote_identifier(column.name)} {column.type}"
    return str(column)


def schema_columns(schema: LogicalSchema) -> tuple[list[str], list[str]]:
    """The key columns and the value (and header) columns of ``schema``, in order."""
    return [column_text(c) for c in schema.key], [column_text(c) for c in schema.value]


def window_json(window: WindowInfo | None) -> dict[str, Any] | None:
    """A step's windowing as saved: ``{"type": "TUMBLING", "sizeMs": 1000}`` or None."""
    if window is None:
        return None
    return {"type": window.type, "sizeMs": window.size_ms}


def step_schema(step: Step, built: Built, inherited: set[tuple[str, str]]) -> StepSchema:
    """The saved form of one built step; ``inherited`` are the internal schemas of its inputs."""
    key, value = schema_columns(built.schema)
    return {
        "ctx": step.ctx,
        "step": step.TYPE,
        "kind": "TABLE" if built.is_table else "STREAM",
        "key": key,
        "value": value,
        "window": window_json(built.window),
        "internal": {n: d for n, d in built.internal_schemas if (n, d) not in inherited},
    }


class BuiltSchemas:
    """Collects, per query id, the schema of every step the builders build inside ``collect()``.

    Steps are listed in build order (inputs first, the sink last). Also keeps each query's
    last built step, whose schema is what the query writes to its sink.
    """

    def __init__(self) -> None:
        self.steps: dict[str, list[StepSchema]] = {}
        self.sinks: dict[str, Built] = {}
        self._built: dict[int, Built] = {}

    def observe(self, step: Step, ctx: BuildContext, built: Built) -> None:
        """Walker observer: record ``step`` as built for query ``ctx.query_id``."""
        inherited: set[tuple[str, str]] = set()
        for child in step.inputs().values():
            child_built = self._built.get(id(child))
            if child_built is not None:
                inherited |= set(child_built.internal_schemas)
        self._built[id(step)] = built
        self.steps.setdefault(ctx.query_id, []).append(step_schema(step, built, inherited))
        self.sinks[ctx.query_id] = built

    @contextmanager
    def collect(self) -> Iterator[BuiltSchemas]:
        """Observe every build on this thread inside the block."""
        from engine.builders.walker import observing_builds

        with observing_builds(self.observe):
            yield self

    def to_json(self) -> dict[str, list[StepSchema]]:
        """Per query id, its steps' schemas in build order."""
        return {qid: list(steps) for qid, steps in sorted(self.steps.items())}


def saved_source_columns(source: Mapping[str, Any]) -> StepSchema:
    """A saved source (``spec.json`` ``schemas.sources``) in the shape of a step schema."""
    key, value = schema_columns(LogicalSchema.parse(str(source.get("schema", ""))))
    key_format = source.get("keyFormat") or {}
    window_type = key_format.get("windowType")
    window = (
        None
        if window_type is None
        else {"type": window_type, "sizeMs": key_format.get("windowSizeMs")}
    )
    return {"kind": source.get("kind"), "key": key, "value": value, "window": window}
