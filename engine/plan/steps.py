"""Execution steps: one immutable dataclass per step *version*.

A step has a wire name (``TYPE``, e.g. ``streamSelectV1``), a query-context id (``ctx``,
stable across releases, names the step in diffs and state stores), its input steps as
fields, and type-specific parameters. A published wire name never changes meaning: adding
an optional field with a default is the only in-place change; anything else is a new
version class, and the old class and its builder stay.

This module imports no pyspark.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, TypeVar, dataclass_transform

from engine.errors import PlanError
from engine.plan.constraints import NON_EMPTY, OneOf
from engine.plan.expr import OMIT_DEFAULT, Expr
from engine.plan.schema import LogicalSchema

_WIRE_NAME = re.compile(r"^[a-z][A-Za-z]*V[0-9]+$")

# Enumerated options of plan fields (the JSON Schema enums; see engine.plan.constraints).
# The record formats the serdes know (engine.serde.formats.FORMAT_NAMES, kept equal by a test).
FORMAT_NAMES = ("JSON", "DELIMITED", "KAFKA", "NONE", "AVRO", "JSON_SR", "PROTOBUF", "PROTOBUF_NOSR")
# Format property names, lower case (the union of what engine.serde.formats accepts).
FORMAT_PROPERTIES = ("delimiter", "nullable_representation", "schema_full_name", "schema_id", "subject_name")
# Serde features as the builders read them (engine.builders.formats.features_of).
SERDE_FEATURES = ("UNWRAP_SINGLES", "WRAP_SINGLES")
WINDOW_TYPES = ("TUMBLING", "HOPPING", "SESSION")

FormatName = Annotated[str, OneOf(FORMAT_NAMES)]
FormatProperties = Annotated[tuple[tuple[str, str], ...], OneOf(FORMAT_PROPERTIES)]
SerdeFeature = Annotated[str, OneOf(SERDE_FEATURES)]
WindowType = Annotated[str, OneOf(WINDOW_TYPES)]

STEP_TYPES: dict[str, type[Step]] = {}

S = TypeVar("S", bound="type[Step]")


def register_step(cls: S) -> S:
    """Class decorator: add a step version to the registry, refusing bad or duplicate names."""
    wire = getattr(cls, "TYPE", None)
    if not isinstance(wire, str) or not _WIRE_NAME.match(wire):
        raise TypeError(
            f"Step class {cls.__name__} has the wire name {wire!r}; expected a camelCase "
            "name ending in a version such as 'streamSelectV1'."
        )
    if wire in STEP_TYPES:
        raise TypeError(
            f"Step wire name '{wire}' is registered twice "
            f"({STEP_TYPES[wire].__name__} and {cls.__name__})."
        )
    if not cls.__doc__ or not cls.__doc__.strip():
        raise TypeError(f"Step class {cls.__name__} needs a one-line docstring.")
    STEP_TYPES[wire] = cls
    return cls


T_cls = TypeVar("T_cls")


@dataclass_transform(frozen_default=True, kw_only_default=True)
def step_dataclass(cls: type[T_cls]) -> type[T_cls]:
    """``@dataclass(frozen=True, slots=True, kw_only=True)``, the shape of every plan value."""
    return dataclass(frozen=True, slots=True, kw_only=True)(cls)


@step_dataclass
class Step:
    """Base of all steps."""

    TYPE: ClassVar[str] = ""
    ctx: Annotated[str, NON_EMPTY]

    def __post_init__(self) -> None:
        if not self.ctx:
            raise PlanError(f"Step {self.TYPE} needs a non-empty query-context id (ctx).")

    def inputs(self) -> dict[str, Step]:
        """Input steps by field name (the walker builds these first)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if isinstance(getattr(self, f.name), Step)
        }


# --------------------------------------------------------------------- parameter values


@step_dataclass
class Formats:
    """Key and value formats of a topic, with format properties and serde features."""

    key_format: FormatName
    value_format: FormatName
    key_properties: FormatProperties = ()
    value_properties: FormatProperties = ()
    key_features: tuple[SerdeFeature, ...] = ()
    value_features: tuple[SerdeFeature, ...] = ()


@step_dataclass
class TimestampColumn:
    """The column that gives record time, with an optional Java time pattern for strings.

    ``throw_on_invalid`` (a source's, from ksqlDB's ``ksql.timestamp.throw.on.invalid=true``):
    a record whose timestamp cannot be extracted stops the query instead of being skipped.
    """

    column: str
    format: str | None = None
    throw_on_invalid: bool = dataclasses.field(default=False, metadata={OMIT_DEFAULT: True})


@step_dataclass
class WindowInfo:
    """How a windowed source or aggregate windows its keys."""

    type: WindowType
    size_ms: int | None = None

    def __post_init__(self) -> None:
        if self.type not in WINDOW_TYPES:
            raise PlanError(
                f"Window type must be TUMBLING, HOPPING or SESSION, got '{self.type}'."
            )


@step_dataclass
class SelectExpression:
    """One output column of a projection: its alias and its expression."""

    alias: str
    expression: Expr


# --------------------------------------------------------------------- sources


@register_step
@step_dataclass
class StreamSource(Step):
    """Reads a stream from a topic: deserialises key and value, assigns ROWTIME."""

    TYPE: ClassVar[str] = "streamSourceV1"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class WindowedStreamSource(Step):
    """Reads a stream whose keys are windowed (written by a windowed aggregate)."""

    TYPE: ClassVar[str] = "windowedStreamSourceV1"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    window_info: WindowInfo
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class TableSource(Step):
    """Reads a table's changelog from a topic: upserts by key, null values delete."""

    TYPE: ClassVar[str] = "tableSourceV1"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class WindowedTableSource(Step):
    """Reads a table whose keys are windowed."""

    TYPE: ClassVar[str] = "windowedTableSourceV1"
    topic: str
    formats: Formats
    source_schema: LogicalSchema
    window_info: WindowInfo
    timestamp_column: TimestampColumn | None = None


# --------------------------------------------------------------------- stateless


@register_step
@step_dataclass
class StreamFilter(Step):
    """Keeps the stream records for which the predicate is true."""

    TYPE: ClassVar[str] = "streamFilterV1"
    source: Step
    predicate: Expr


@register_step
@step_dataclass
class TableFilter(Step):
    """Keeps matching table rows; a row that does not match becomes a delete."""

    TYPE: ClassVar[str] = "tableFilterV1"
    source: Step
    predicate: Expr


@register_step
@step_dataclass
class TableFilterV3(Step):
    """Keeps matching table rows; a row that does not match deletes the key's row only when
    the key's last row matched.

    Kafka Streams' filter over a table that sends its old values (a table-table join's
    result): a change whose new and old rows both miss forwards nothing, where
    ``tableFilterV1`` and ``tableFilterV2`` forward a delete for every miss.
    """

    TYPE: ClassVar[str] = "tableFilterV3"
    source: Step
    predicate: Expr


@register_step
@step_dataclass
class StreamSelect(Step):
    """Projects each stream record onto new value columns, keeping the key columns."""

    TYPE: ClassVar[str] = "streamSelectV1"
    source: Step
    key_column_names: tuple[str, ...]
    select_expressions: tuple[SelectExpression, ...]

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_unique_aliases(self.TYPE, self.key_column_names, self.select_expressions)


@register_step
@step_dataclass
class TableSelect(Step):
    """Projects each table row onto new value columns, keeping the key columns."""

    TYPE: ClassVar[str] = "tableSelectV1"
    source: Step
    key_column_names: tuple[str, ...]
    select_expressions: tuple[SelectExpression, ...]

    def __post_init__(self) -> None:
        Step.__post_init__(self)
        _check_unique_aliases(self.TYPE, self.key_column_names, self.select_expressions)


@register_step
@step_dataclass
class StreamSelectKey(Step):
    """Re-keys a stream (PARTITION BY): new key columns from expressions."""

    TYPE: ClassVar[str] = "streamSelectKeyV1"
    source: Step
    key_expressions: tuple[SelectExpression, ...]


@register_step
@step_dataclass
class StreamFlatMap(Step):
    """Applies table functions: one output record per element of their results."""

    TYPE: ClassVar[str] = "streamFlatMapV1"
    source: Step
    table_functions: tuple[SelectExpression, ...]


# --------------------------------------------------------------------- sinks


@register_step
@step_dataclass
class StreamSink(Step):
    """Serialises stream records into a topic."""

    TYPE: ClassVar[str] = "streamSinkV1"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


@register_step
@step_dataclass
class TableSink(Step):
    """Serialises a table's changelog into a topic (deletes as tombstones)."""

    TYPE: ClassVar[str] = "tableSinkV1"
    source: Step
    topic: str
    formats: Formats
    timestamp_column: TimestampColumn | None = None


def _check_unique_aliases(
    wire: str, keys: tuple[str, ...], selects: tuple[SelectExpression, ...]
) -> None:
    seen = set(keys)
    for s in selects:
        if s.alias in seen:
            raise PlanError(f"Step {wire} has the output column `{s.alias}` twice.")
        seen.add(s.alias)


def walk_steps(root: Step) -> list[Step]:
    """All steps of a plan, inputs before the steps that use them, each once."""
    out: list[Step] = []
    seen: set[int] = set()

    def visit(step: Step) -> None:
        if id(step) in seen:
            return
        seen.add(id(step))
        for child in step.inputs().values():
            visit(child)
        out.append(step)

    visit(root)
    return out


def step_fields(cls: type[Step]) -> list[dataclasses.Field[Any]]:
    """The serialised fields of a step class, in declaration order."""
    return [f for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
