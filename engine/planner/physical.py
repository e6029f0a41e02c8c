"""The physical planner: logical nodes -> versioned execution steps.

Query-context ids follow ksqlDB's names (``KsqlTopic/Source``, ``WhereFilter``,
``PartitionBy``, ``FlatMap``, ``Project``, ``KsqlTopic/Sink``) so that they stay stable
across releases and name steps in plan diffs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from engine.builders.native_forms import level_2_reads
from engine.errors import InternalError
from engine.expressions.native_levels import level_2_forms
from engine.plan import steps as S
from engine.plan import steps_native as N
from engine.planner import logical as L
from engine.planner import logical_join as LJ
from engine.serde.formats import SCHEMA_ID, SUBJECT_NAME

PhysicalRule = Callable[[Any], S.Step]
RULES: dict[type[L.LogicalNode], PhysicalRule] = {}

# Query property choosing the native step versions (steps_native) for filters, projections,
# non-windowed sources and sinks, grouping and aggregation. On by default (engine 0.3.0, and
# again from 0.4.0 on, once the exactly-once sink's replay rule that lost records after a
# kill -9 was fixed); with it set to false, the planner plans the Python (V1) versions.
NATIVE_STEPS = "kspark.native.steps"
_NATIVE: ContextVar[bool] = ContextVar("native_steps", default=False)


def native_steps_enabled(config: Any) -> bool:
    """Whether ``config`` leaves the native step versions on (all but ``kspark.native.steps=false``)."""
    return str(config.get(NATIVE_STEPS, "true")).strip().lower() != "false"


def native_chosen() -> bool:
    """Whether the ``to_steps`` call in progress plans the native step versions."""
    return _NATIVE.get()


def rule(node_type: type[L.LogicalNode]) -> Callable[[PhysicalRule], PhysicalRule]:
    """Register the decorated function as the physical rule for one logical node type."""

    def wrap(fn: PhysicalRule) -> PhysicalRule:
        if node_type in RULES:
            raise TypeError(f"Logical node {node_type.__name__} has two physical rules.")
        RULES[node_type] = fn
        return fn

    return wrap


def to_steps(node: L.LogicalNode, *, native: bool | None = None) -> S.Step:
    """The step DAG that executes ``node`` (and its inputs).

    ``native`` chooses the native filter/projection step versions for the whole DAG (None:
    as the enclosing call chose).
    """
    if native is not None:
        token = _NATIVE.set(native)
        try:
            return to_steps(node)
        finally:
            _NATIVE.reset(token)
    fn = RULES.get(type(node))
    if fn is None:
        raise InternalError(f"The physical planner has no rule for {type(node).__name__} (a bug).")
    return fn(node)


@rule(L.SourceNode)
def _source(node: L.SourceNode) -> S.Step:
    src = node.source
    common: dict[str, Any] = dict(
        ctx=node.ctx or "KsqlTopic/Source",
        topic=src.topic,
        formats=src.formats,
        source_schema=src.schema,
        timestamp_column=src.timestamp_column,
    )
    if src.window_info is not None:
        if src.is_table:
            return S.WindowedTableSource(window_info=src.window_info, **common)
        return S.WindowedStreamSource(window_info=src.window_info, **common)
    if _NATIVE.get() and level_2_reads(src.formats, src.schema, src.timestamp_column):
        # Level 2 of the native formats reads this source's format in Spark (DELIMITED).
        return N.TableSourceV4(**common) if src.is_table else N.StreamSourceV5(**common)
    if _NATIVE.get():
        return N.TableSourceV3(**common) if src.is_table else N.StreamSourceV3(**common)
    if src.is_table:
        return S.TableSource(**common)
    return S.StreamSource(**common)


@rule(L.FilterNode)
def _filter(node: L.FilterNode) -> S.Step:
    cls: type[S.Step]
    if node.input.is_table and (node.old_values or (isinstance(node.input, LJ.JoinNode)
                                                    and node.input.kind == LJ.TABLE_TABLE)):
        # A table-table join (and a push query's table) sends its old rows: only a row that
        # matched before is deleted.
        cls = S.TableFilterV3
    elif _NATIVE.get() and level_2_forms([node.predicate], node.input.columns()):
        cls = N.TableFilterV4 if node.input.is_table else N.StreamFilterV3
    elif _NATIVE.get():
        cls = N.TableFilterV2 if node.input.is_table else N.StreamFilterV2
    else:
        cls = S.TableFilter if node.input.is_table else S.StreamFilter
    return cls(ctx="WhereFilter", source=to_steps(node.input), predicate=node.predicate)


@rule(L.FlatMapNode)
def _flat_map(node: L.FlatMapNode) -> S.Step:
    return S.StreamFlatMap(
        ctx="FlatMap",
        source=to_steps(node.input),
        table_functions=tuple(S.SelectExpression(alias=a, expression=f) for a, f in node.functions),
    )


@rule(L.RepartitionNode)
def _repartition(node: L.RepartitionNode) -> S.Step:
    return S.StreamSelectKey(
        ctx="PartitionBy",
        source=to_steps(node.input),
        key_expressions=tuple(S.SelectExpression(alias=a, expression=e) for a, e in node.keys),
    )


@rule(L.ProjectNode)
def _project(node: L.ProjectNode) -> S.Step:
    selects = tuple(S.SelectExpression(alias=a, expression=e) for a, e in node.values)
    cls: type[S.Step]
    if _NATIVE.get() and level_2_forms([e for _, e in node.values], node.input.columns()):
        # Level 2 of the native compiler runs some of these expressions in Spark.
        cls = N.TableSelectV3 if node.input.is_table else N.StreamSelectV3
    elif _NATIVE.get():
        cls = N.TableSelectV2 if node.input.is_table else N.StreamSelectV2
    else:
        cls = S.TableSelect if node.input.is_table else S.StreamSelect
    return cls(
        ctx=node.ctx or "Project",
        source=to_steps(node.input),
        key_column_names=node.key_names,
        select_expressions=selects,
    )


@rule(L.SinkNode)
def _sink(node: L.SinkNode) -> S.Step:
    cls: type[S.Step]
    if _NATIVE.get() and node.input.window is not None:
        # A windowed record goes to the partition of its key without the window, as ksqlDB's.
        cls = N.TableSinkV5 if node.input.is_table else N.StreamSinkV5
    elif _NATIVE.get() and writes_registered_schema(node.formats):
        cls = N.TableSinkV4 if node.input.is_table else N.StreamSinkV4
    elif _NATIVE.get():
        cls = N.TableSinkV3 if node.input.is_table else N.StreamSinkV3
    else:
        cls = S.TableSink if node.input.is_table else S.StreamSink
    source = to_steps(node.input)
    if cls is N.StreamSinkV3 or cls is N.StreamSinkV4:
        source = _in_partition_order(source)
    return cls(
        ctx="KsqlTopic/Sink",
        source=source,
        topic=node.topic,
        formats=node.formats,
        timestamp_column=node.timestamp_column,
    )


def writes_registered_schema(formats: S.Formats) -> bool:
    """Whether a sink with ``formats`` writes with a registered schema (KEY/VALUE_SCHEMA_ID, or
    the latest schema of a saved plan's PROTOBUF ``subjectName``): only ``streamSinkV4``/
    ``tableSinkV4`` write that schema's fields the sink has no column for."""
    return any(key in (SCHEMA_ID, SUBJECT_NAME) for key, _ in formats.key_properties + formats.value_properties)


def _in_partition_order(step: S.Step) -> S.Step:
    """``step`` with its ``streamSourceV3`` read as ``streamSourceV4`` (``V5`` as ``V6``) when
    only filters and projections lie between them: such a query compares no records of two
    partitions, so it needs no merge order across them (cheaper on Kafka). Anything else stays
    as it is."""
    if isinstance(step, N.StreamSourceV3 | N.StreamSourceV5):
        cls = N.StreamSourceV4 if isinstance(step, N.StreamSourceV3) else N.StreamSourceV6
        return cls(**{f.name: getattr(step, f.name) for f in dataclasses.fields(step)})
    if isinstance(step, N.StreamFilterV2 | N.StreamSelectV2 | N.StreamFilterV3 | N.StreamSelectV3):
        source = _in_partition_order(step.source)
        return step if source is step.source else dataclasses.replace(step, source=source)
    return step


def _load_rules() -> None:
    """Import the planner modules that add rules for their own logical nodes."""
    import importlib
    import pkgutil

    import engine.planner as package

    for module in pkgutil.iter_modules(package.__path__):
        if module.name.startswith("physical_"):
            importlib.import_module(f"{package.__name__}.{module.name}")


_load_rules()
