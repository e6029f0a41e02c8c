"""The physical planner: logical nodes -> versioned execution steps.

Query-context ids follow ksqlDB's names (``KsqlTopic/Source``, ``WhereFilter``,
``PartitionBy``, ``FlatMap``, ``Project``, ``KsqlTopic/Sink``) so that they stay stable
across releases and name steps in plan diffs.
"""

from __future__ import annotations

from engine.errors import InternalError
from engine.planner import logical as L
from engine.plan import steps as S


def to_steps(node: L.LogicalNode) -> S.Step:
    """The step DAG that executes ``node`` (and its inputs)."""
    match node:
        case L.SourceNode(source=src):
            common = dict(
                ctx="KsqlTopic/Source",
                topic=src.topic,
                formats=src.formats,
                source_schema=src.schema,
                timestamp_column=src.timestamp_column,
            )
            if src.window_info is not None:
                if src.is_table:
                    return S.WindowedTableSource(window_info=src.window_info, **common)
                return S.WindowedStreamSource(window_info=src.window_info, **common)
            if src.is_table:
                return S.TableSource(**common)
            return S.StreamSource(**common)
        case L.FilterNode(input=inp, predicate=pred):
            if inp.is_table:
                return S.TableFilter(ctx="WhereFilter", source=to_steps(inp), predicate=pred)
            return S.StreamFilter(ctx="WhereFilter", source=to_steps(inp), predicate=pred)
        case L.FlatMapNode(input=inp, functions=fns):
            return S.StreamFlatMap(
                ctx="FlatMap",
                source=to_steps(inp),
                table_functions=tuple(S.SelectExpression(alias=a, expression=f) for a, f in fns),
            )
        case L.RepartitionNode(input=inp, keys=keys):
            return S.StreamSelectKey(
                ctx="PartitionBy",
                source=to_steps(inp),
                key_expressions=tuple(S.SelectExpression(alias=a, expression=e) for a, e in keys),
            )
        case L.ProjectNode(input=inp, key_names=keys, values=values):
            selects = tuple(S.SelectExpression(alias=a, expression=e) for a, e in values)
            if inp.is_table:
                return S.TableSelect(
                    ctx="Project", source=to_steps(inp), key_column_names=keys, select_expressions=selects
                )
            return S.StreamSelect(
                ctx="Project", source=to_steps(inp), key_column_names=keys, select_expressions=selects
            )
        case L.SinkNode(input=inp, topic=topic, formats=formats, timestamp_column=ts):
            cls = S.TableSink if inp.is_table else S.StreamSink
            return cls(
                ctx="KsqlTopic/Sink", source=to_steps(inp), topic=topic, formats=formats, timestamp_column=ts
            )
    raise InternalError(f"The physical planner has no rule for {type(node).__name__} (a bug).")
