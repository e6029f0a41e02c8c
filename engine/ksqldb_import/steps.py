"""ksqlDB physical-plan steps -> kspark steps, one translator per ksqlDB step type+version.

Every ksqlDB step version maps to the kspark step version with the same behaviour. Two
ksqlDB shapes are fused because kspark's steps fold them in:

- ``PrependAliasLeft/Right`` projections under a join (``ID AS L_ID``, ``ROWTIME AS
  L_ROWTIME``, ...) are the join's column prefixing: they become the kspark join's
  ``left_alias`` / ``right_alias`` over the projection's input.
- A ``tableFilterV1`` directly over an aggregation is HAVING: it becomes the kspark
  aggregate's ``having``.

A ``tableFilterV1`` directly over a table-table join becomes ``tableFilterV3``: the join
sends its old rows to the filter, so a miss deletes only a row that matched before.

ksqlDB step versions whose behaviour no kspark step version has are reported as
unsupported with the reason (``UNSUPPORTED_STEPS``); they need new kspark step versions.

Translation keeps track of each step's output column *names* (``Shape``), which is what
ksqlDB derives its generated key names from (``KSQL_COL_n``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from engine.analysis.query import is_null_literal
from engine.analysis.scope import rewrite
from engine.errors import PlanError, UnsupportedFeatureError
from engine.functions.lib_aggregate import NON_AGGREGATE_VALUE
from engine.ksqldb_import import values as V
from engine.ksqldb_import.expressions import alias_of, aliased, column_name, expression
from engine.plan import expr as E
from engine.plan import steps as S
from engine.plan import steps_aggregate as A
from engine.plan import steps_join as J
from engine.plan import steps_ksqldb as K
from engine.plan import steps_native as N
from engine.plan import types as T
from engine.plan.schema import LogicalSchema, Namespace
from engine.plan.types import SqlType
from engine.planner.physical import writes_registered_schema

PSEUDO = ("ROWTIME", "ROWPARTITION", "ROWOFFSET", "WINDOWSTART", "WINDOWEND")
_ROW_POSITION = ("ROWPARTITION", "ROWOFFSET")
_WINDOW_BOUNDS = ("WINDOWSTART", "WINDOWEND")

UNSUPPORTED_STEPS: dict[str, str] = {}
"""ksqlDB step versions known to behave unlike every kspark step version, with the reason."""


@dataclass(frozen=True, slots=True)
class Shape:
    """Names of a step's output columns."""

    keys: tuple[str, ...]
    values: tuple[str, ...]
    table: bool = False
    window: A.WindowSpec | S.WindowInfo | None = None
    # (name, column): a step reading the values reads ``column`` for ``name``. ksqlDB's value
    # copy of ROWKEY where the key changed under it (after a streamSelectKeyV1), and that copy
    # through a join's alias.
    value_reads: tuple[tuple[str, str], ...] = ()

    def names(self) -> set[str]:
        return set(self.keys) | set(self.values)


@dataclass(frozen=True, slots=True)
class Imported:
    """A translated step with the names of its output columns."""

    step: S.Step
    shape: Shape


@dataclass
class StepImporter:
    """Translates one query's physical plan; ``types`` are the custom types in scope."""

    query_id: str
    types: Mapping[str, SqlType] = field(default_factory=dict)
    # Every alias the query's projections give (``... AS X``): ksqlDB 5.5/6.0 generated a
    # grouping key name (``KSQL_COL_n``) no projection of the query used.
    reserved: frozenset[str] = frozenset()
    # Plans run by ksqlDB before KIP-904: a table aggregate emits a change within its group
    # as two updates (``tableAggregateTwoUpdatesV1``).
    table_aggregate_two_updates: bool = False
    # The key columns of the source the query creates (its DDL), when known: before
    # ``keyColumnNames`` (ksqlDB 6.0 and earlier) a DDL key ROWKEY names the last projection's
    # key, and a grouping column selected under its own name was a value column.
    sink_keys: tuple[str, ...] | None = None

    # The projection a sink step reads (set by the sink's translator).
    last_projection: Any = None

    def visit(self, node: Any) -> Imported:
        if not isinstance(node, Mapping) or "@type" not in node:
            raise PlanError(f"Query {self.query_id}: a step must be an object with '@type', got {node!r}.")
        wire = str(node["@type"])
        translator = TRANSLATORS.get(wire)
        if translator is None:
            reason = UNSUPPORTED_STEPS.get(wire)
            if reason is None:
                raise UnsupportedFeatureError(
                    f"step {wire}",
                    f"kspark cannot import the ksqlDB step '{wire}' (known: {', '.join(sorted(TRANSLATORS))}).",
                )
            raise UnsupportedFeatureError(f"step {wire}", f"ksqlDB step {wire} {reason}.")
        return translator(self, node)

    def ctx(self, node: Mapping[str, Any]) -> str:
        context = (node.get("properties") or {}).get("queryContext")
        if not context:
            raise PlanError(f"Query {self.query_id}: step {node.get('@type')} has no properties.queryContext.")
        return str(context)

    def expr(self, text: Any, node: Mapping[str, Any]) -> E.Expr:
        return expression(text, f"{node.get('@type')} {self.ctx(node)}", self.types)

    def select(self, text: Any, node: Mapping[str, Any]) -> S.SelectExpression:
        return aliased(text, f"{node.get('@type')} {self.ctx(node)}", self.types)


Translator = Callable[[StepImporter, Mapping[str, Any]], Imported]
TRANSLATORS: dict[str, Translator] = {}


def translates(*wires: str) -> Callable[[Translator], Translator]:
    """Register a translator for ksqlDB step wire names."""

    def wrap(fn: Translator) -> Translator:
        for wire in wires:
            if wire in TRANSLATORS:
                raise TypeError(f"ksqlDB step {wire} has two translators.")
            TRANSLATORS[wire] = fn
        return fn

    return wrap


# --------------------------------------------------------------------------- sources


def _source_schema(node: Mapping[str, Any], importer: StepImporter) -> LogicalSchema:
    ctx = importer.ctx(node)
    schema = V.schema(str(V.require(node, "sourceSchema", f"step {ctx}")))
    # Before pseudo-column version 1 (ksqlDB 7.1) ROWPARTITION and ROWOFFSET were ordinary
    # names a source could give its value columns; kspark's rows carry the record's partition
    # and offset under those names, so reading the source would give those instead.
    shadowed = [c.name for c in schema.columns if c.namespace is not Namespace.KEY and c.name in _ROW_POSITION]
    if shadowed:
        raise UnsupportedFeatureError(
            "a value column named like a pseudo column",
            f"Step {ctx} reads a value column `{shadowed[0]}` (pseudoColumnVersion "
            f"{node.get('pseudoColumnVersion', 0)}), the name of a pseudo column kspark's rows carry.",
        )
    return schema


def _schema_shape(schema: LogicalSchema, *, table: bool, window: S.WindowInfo | None = None) -> Shape:
    return Shape(
        keys=tuple(c.name for c in schema.key),
        values=tuple(c.name for c in schema.columns if c.namespace is not Namespace.KEY),
        table=table,
        window=window,
    )


@translates("streamSourceV1", "tableSourceV1", "tableSourceV2")
def _source(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    schema = _source_schema(node, importer)
    table = node["@type"] != "streamSourceV1"
    cls = S.TableSource if table else S.StreamSource
    step = cls(
        ctx=ctx,
        topic=str(V.require(node, "topicName", f"step {ctx}")),
        formats=V.formats(V.require(node, "formats", f"step {ctx}"), f"step {ctx}"),
        source_schema=schema,
        timestamp_column=V.timestamp_column(node.get("timestampColumn")),
    )
    return Imported(step, _schema_shape(schema, table=table))


@translates("windowedStreamSourceV1", "windowedTableSourceV1")
def _windowed_source(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    schema = _source_schema(node, importer)
    table = node["@type"] == "windowedTableSourceV1"
    window = V.window_info(V.require(node, "windowInfo", f"step {ctx}"))
    assert window is not None
    cls = S.WindowedTableSource if table else S.WindowedStreamSource
    step = cls(
        ctx=ctx,
        topic=str(V.require(node, "topicName", f"step {ctx}")),
        formats=V.formats(V.require(node, "formats", f"step {ctx}"), f"step {ctx}"),
        source_schema=schema,
        window_info=window,
        timestamp_column=V.timestamp_column(node.get("timestampColumn")),
    )
    return Imported(step, _schema_shape(schema, table=table, window=window))


# --------------------------------------------------------------------------- stateless


@translates("streamFilterV1", "tableFilterV1")
def _filter(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    predicate = _reading_values(
        importer.expr(V.require(node, "filterExpression", f"step {ctx}"), node), source.shape
    )
    inner = source.step
    if node["@type"] == "tableFilterV1" and isinstance(inner, _AGGREGATES) and inner.having is None:
        # HAVING: ksqlDB filters the aggregate's output table; kspark's aggregate does it.
        return Imported(replace(inner, having=predicate), source.shape)
    cls: type[S.StreamFilter | S.TableFilter | S.TableFilterV3] = S.StreamFilter
    if node["@type"] == "tableFilterV1":
        # Kafka Streams' filter over a table-table join gets the join's old rows: a miss
        # deletes only a row that matched before (tableFilterV3).
        cls = S.TableFilterV3 if isinstance(inner, J.TableTableJoin) else S.TableFilter
    return Imported(cls(ctx=ctx, source=inner, predicate=predicate), source.shape)


@translates("streamSelectV1", "tableSelectV1")
def _select(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    return _project(importer, node, source)


def _project(importer: StepImporter, node: Mapping[str, Any], source: Imported) -> Imported:
    ctx = importer.ctx(node)
    rekeyed = _rekeyed_to_selected_keys(node, source, ctx)
    selects = tuple(
        replace(item, expression=_reading_values(item.expression, rekeyed.shape))
        for item in (importer.select(t, node) for t in V.require(node, "selectExpressions", f"step {ctx}"))
    )
    if rekeyed is not source:
        source, keys = rekeyed, rekeyed.shape.keys
    else:
        keys = tuple(str(k) for k in node.get("keyColumnNames") or source.shape.keys)
    if (
        not node.get("keyColumnNames")
        and importer.sink_keys == ("ROWKEY",)
        and len(keys) == 1
        and _feeds_sink(importer, node)
    ):
        keys = importer.sink_keys
    # ``ID AS ID`` over the key column ID copies the key into a value column of the same
    # name (ksqlDB's Aggregate/Prepare does): kspark rows hold one column per name, and its
    # later steps read the key column under that name, so the copy adds nothing.
    # ``ROWTIME AS ROWTIME`` likewise copies a pseudo column kspark's rows already carry.
    renamed = dict(zip(source.shape.keys, keys, strict=False))
    renamed.update((p, p) for p in PSEUDO)
    if _feeds_sink(importer, node):
        # The projection a sink writes: ``WINDOWSTART AS WINDOWSTART`` there is a value column
        # the sink writes (ksqlDB 6.0 wrote a windowed source's bounds so), no pseudo copy.
        written = [s.alias for s in selects if s.alias in _WINDOW_BOUNDS and column_name(s.expression) == s.alias]
        if written:
            raise UnsupportedFeatureError(
                "a value column named like a pseudo column",
                f"Step {ctx} writes a value column `{written[0]}`, the name of a pseudo column "
                "kspark's rows carry.",
            )
    selects = tuple(
        s for s in selects
        if not (column_name(s.expression) in renamed and renamed[str(column_name(s.expression))] == s.alias)
    )
    shadowing = [s.alias for s in selects if s.alias in PSEUDO]
    if shadowing:
        raise UnsupportedFeatureError(
            "a value column named like a pseudo column",
            f"Step {ctx} outputs a value column `{shadowing[0]}`, the name of a pseudo column "
            "kspark's rows carry.",
        )
    clash = sorted(set(keys) & {s.alias for s in selects})
    if clash:
        raise UnsupportedFeatureError(
            "a key and a value column of the same name",
            f"Step {ctx} outputs `{clash[0]}` both as a key and as a value column; kspark's "
            "rows hold one column per name.",
        )
    table = node["@type"] == "tableSelectV1"
    cls = S.TableSelect if table else S.StreamSelect
    step = cls(ctx=ctx, source=source.step, key_column_names=keys, select_expressions=selects)
    shape = Shape(keys, tuple(s.alias for s in selects), source.shape.table, source.shape.window)
    return Imported(step, shape)


def _rekeyed_to_selected_keys(node: Mapping[str, Any], source: Imported, ctx: str) -> Imported:
    """``source`` re-keyed as ksqlDB 7.2 and later project a stream whose projection leaves out
    key columns: its ``selectedKeys`` become the key, in their order, and a projection that
    selects none writes a null key (``StreamSelectBuilder``). That is kspark's StreamSelectKey
    before the projection, as its planner plans it; ``source`` itself when nothing changes."""
    selected = node.get("selectedKeys")
    if (
        node["@type"] != "streamSelectV1"
        or not isinstance(selected, list)
        or source.shape.window is not None  # ksqlDB's builder re-keys unwindowed keys only
        or set(source.shape.keys) <= {str(k) for k in selected}
    ):
        return source
    names = tuple(str(k) for k in selected)
    keys = tuple(S.SelectExpression(alias=n, expression=E.ColumnRef(n)) for n in names)
    step = S.StreamSelectKey(ctx=f"{ctx}/SelectedKeys", source=source.step, key_expressions=keys)
    return Imported(step, Shape(names, _rekeyed_values(source.shape, names), False, None))


def _rekeyed_values(shape: Shape, new_keys: Collection[str]) -> tuple[str, ...]:
    """The value columns after re-keying ``shape`` by ``new_keys``: its values, then its old
    key columns, but for the names a new key takes."""
    return tuple(n for n in (*shape.values, *shape.keys) if n not in new_keys)


def _feeds_sink(importer: StepImporter, node: Mapping[str, Any]) -> bool:
    """Whether ``node`` is the projection whose output the query's sink writes."""
    return node is importer.last_projection


def _key_expressions(node: Mapping[str, Any], field_name: str) -> list[Any]:
    found = V.require(node, field_name, f"step {node.get('@type')}")
    return list(found) if isinstance(found, list) else [found]


class _Aliases:
    """ksqlDB's ColumnAliasGenerator: ``KSQL_COL_n`` names not used by the source's columns."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)
        self.next = 0
        for name in taken:
            if name.startswith("KSQL_COL_") and name[9:].isdigit():
                self.next = max(self.next, int(name[9:]) + 1)

    def for_expression(self, node: E.Expr) -> str:
        if isinstance(node, E.ColumnRef):
            return node.name
        if isinstance(node, E.Dereference) and node.field not in self.taken:
            self.taken.add(node.field)
            return node.field
        return self.generated()

    def lowest_free(self) -> str:
        """The first ``KSQL_COL_n`` not taken (ksqlDB 5.5/6.0's one joined grouping key)."""
        n = 0
        while f"KSQL_COL_{n}" in self.taken:
            n += 1
        self.taken.add(f"KSQL_COL_{n}")
        return f"KSQL_COL_{n}"

    def generated(self) -> str:
        name = f"KSQL_COL_{self.next}"
        self.next += 1
        self.taken.add(name)
        return name


@translates("streamSelectKeyV1", "streamSelectKeyV2")
def _select_key(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    texts = _key_expressions(node, "keyExpression")
    # PARTITION BY NULL: the re-keyed stream has no key columns, as kspark's planner makes it.
    exprs = [e for t in texts if not is_null_literal(e := importer.expr(t, node))]
    value_reads: tuple[tuple[str, str], ...] = ()
    if node["@type"] == "streamSelectKeyV1":
        # Before multi-column keys the new key was always named ROWKEY.
        if len(exprs) != 1:
            raise PlanError(f"Step {ctx}: streamSelectKeyV1 takes one key expression, got {len(exprs)}.")
        names = ["ROWKEY"]
        if "ROWKEY" in source.shape.keys:
            source = _with_rowkey_value(ctx, source)
            value_reads = (("ROWKEY", source.shape.values[-1]),)
    else:
        aliases = _Aliases(source.shape.names())
        names = [aliases.for_expression(e) for e in exprs]
    keys = tuple(S.SelectExpression(alias=n, expression=e) for n, e in zip(names, exprs, strict=True))
    step = S.StreamSelectKey(ctx=ctx, source=source.step, key_expressions=keys)
    values = _rekeyed_values(source.shape, set(names))
    return Imported(step, Shape(tuple(names), values, False, source.shape.window, value_reads=value_reads))


def _with_rowkey_value(ctx: str, source: Imported) -> Imported:
    """``source`` with its ROWKEY copied into a value column of its own (the last value).

    ksqlDB before 0.10 (5.5, and 6.0 builds until the spring of 2020) kept a copy of ROWKEY in
    every record's value, and ``streamSelectKeyV1`` changed the record's key only: the steps
    after it read the old key as ROWKEY (a join's ``ROWKEY AS L_ROWKEY``). The copy, made by a
    projection before the re-keying (``<ctx>/RowKeyValue``), is what they read here.
    """
    taken = source.shape.names()
    hidden = next(n for i in range(len(taken) + 1) if (n := f"KSQL_ROWKEY_VALUE_{i}") not in taken)
    selects = (
        *(S.SelectExpression(alias=n, expression=E.ColumnRef(n)) for n in source.shape.values),
        S.SelectExpression(alias=hidden, expression=E.ColumnRef("ROWKEY")),
    )
    step = S.StreamSelect(
        ctx=f"{ctx}/RowKeyValue", source=source.step, key_column_names=source.shape.keys,
        select_expressions=selects,
    )
    shape = Shape(source.shape.keys, (*source.shape.values, hidden), False, source.shape.window)
    return Imported(step, shape)


def _reading_values(expr: E.Expr, shape: Shape) -> E.Expr:
    """``expr`` as a step reading ``shape``'s values evaluates it (``Shape.value_reads``)."""
    if not shape.value_reads:
        return expr
    reads = {name: E.ColumnRef(column) for name, column in shape.value_reads}
    return rewrite(expr, lambda e: reads.get(e.name) if isinstance(e, E.ColumnRef) and e.source is None else None)


@translates("tableSelectKeyV1")
def _table_select_key(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    """A table re-keyed by its own key columns, in order: ksqlDB writes it through a repartition
    topic only to change the key's format (a join whose sides' key formats differ). kspark's
    steps hand rows over as Spark columns, never as key bytes, so the step changes nothing
    here and the table's own step stands for it. Re-keying by anything else (PARTITION BY on a
    table) has no kspark step version yet and is unsupported, named."""
    ctx = importer.ctx(node)
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    exprs = [importer.expr(t, node) for t in _key_expressions(node, "keyExpression")]
    names = tuple(e.name if isinstance(e, E.ColumnRef) else None for e in exprs)
    if source.shape.table and names == source.shape.keys:
        return source
    raise UnsupportedFeatureError(
        "step tableSelectKeyV1",
        f"ksqlDB step tableSelectKeyV1 ({ctx}) re-keys a table by {', '.join(map(str, _key_expressions(node, 'keyExpression')))}"
        f" rather than its key columns ({', '.join(source.shape.keys) or 'none'}); kspark has no table re-keying step.",
    )


@translates("streamFlatMapV1")
def _flat_map(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    functions = tuple(
        S.SelectExpression(alias=f"KSQL_SYNTH_{i}", expression=importer.expr(t, node))
        for i, t in enumerate(V.require(node, "tableFunctions", f"step {ctx}"))
    )
    step = S.StreamFlatMap(ctx=ctx, source=source.step, table_functions=functions)
    shape = Shape(
        source.shape.keys,
        source.shape.values + tuple(f.alias for f in functions),
        False,
        source.shape.window,
    )
    return Imported(step, shape)


# --------------------------------------------------------------------------- sinks


@translates("streamSinkV1", "tableSinkV1")
def _sink(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    importer.last_projection = node.get("source")
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    formats = V.formats(V.require(node, "formats", f"step {ctx}"), f"step {ctx}")
    table = node["@type"] == "tableSinkV1"
    cls: type[S.Step]
    if source.shape.window is not None:
        # Kafka Streams puts a windowed record in the partition of its key without the
        # window (WindowedStreamPartitioner): kspark's V5 sinks.
        cls = N.TableSinkV5 if table else N.StreamSinkV5
    elif writes_registered_schema(formats):
        # ksqlDB (7.2 and later) writes a KEY/VALUE_SCHEMA_ID sink with the registered schema,
        # filling the fields the query has no column for: kspark's V4 sinks.
        cls = N.TableSinkV4 if table else N.StreamSinkV4
    else:
        cls = S.TableSink if table else S.StreamSink
    step = cls(
        ctx=ctx,
        source=source.step,
        topic=str(V.require(node, "topicName", f"step {ctx}")),
        formats=formats,
        timestamp_column=V.timestamp_column(node.get("timestampColumn")),
    )
    return Imported(step, source.shape)


# --------------------------------------------------------------------------- aggregation

_AGGREGATES = (A.StreamAggregate, A.StreamWindowedAggregate, A.TableAggregate, K.TableAggregateTwoUpdates)


def _internal_formats(node: Mapping[str, Any], importer: StepImporter) -> S.Formats:
    ctx = importer.ctx(node)
    return V.formats(V.require(node, "internalFormats", f"step {ctx}"), f"step {ctx}")


@translates("streamGroupByV1", "streamGroupByV2", "tableGroupByV1", "tableGroupByV2")
def _group_by(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    wire = str(node["@type"])
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    exprs = [importer.expr(t, node) for t in _key_expressions(node, "groupByExpressions")]
    table = wire.startswith("table")
    old_naming = wire.endswith("V1")
    aliases = _Aliases(source.shape.names() | (importer.reserved if old_naming else frozenset()))
    if old_naming and len(exprs) > 1:
        # Before multi-column keys: one STRING key, the values' texts joined with '|+|'.
        name = aliases.lowest_free()
        joined_cls = K.TableGroupByJoinedKey if table else K.StreamGroupByJoinedKey
        joined = joined_cls(
            ctx=ctx, source=source.step, key_name=name, group_by_expressions=tuple(exprs),
            internal_formats=_internal_formats(node, importer),
        )
        values = _rekeyed_values(source.shape, (name,))
        return Imported(joined, Shape((name,), values, table, source.shape.window))
    # GROUP BY ROWPARTITION or ROWOFFSET (ksqlDB 7.1 and later) names the key like the pseudo
    # column, which kspark's V1 aggregates carry in each row under that name (and reset): the
    # key gets a generated name instead, and the projection above names it (positionally).
    names = [
        aliases.generated() if n in _ROW_POSITION else n for n in (aliases.for_expression(e) for e in exprs)
    ]
    keys = tuple(S.SelectExpression(alias=n, expression=e) for n, e in zip(names, exprs, strict=True))
    formats = _internal_formats(node, importer)
    cls = A.TableGroupBy if table else A.StreamGroupBy
    step = cls(ctx=ctx, source=source.step, group_by_expressions=keys, internal_formats=formats)
    values = _rekeyed_values(source.shape, set(names))
    return Imported(step, Shape(tuple(names), values, table, source.shape.window))


@translates("streamGroupByKeyV1")
def _group_by_key(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    step = A.StreamGroupByKey(ctx=ctx, source=source.step, internal_formats=_internal_formats(node, importer))
    return Imported(step, source.shape)


def _aggregations(importer: StepImporter, node: Mapping[str, Any]) -> tuple[S.SelectExpression, ...]:
    out = []
    for i, text in enumerate(V.require(node, "aggregationFunctions", f"step {importer.ctx(node)}")):
        call = importer.expr(text, node)
        out.append(S.SelectExpression(alias=f"KSQL_AGG_VARIABLE_{i}", expression=call))
    return tuple(out)


@translates("streamAggregateV1", "tableAggregateV1", "streamWindowedAggregateV1")
def _aggregate(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    wire = str(node["@type"])
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    aggregations = _aggregations(importer, node)
    keys = source.shape.keys
    # Pseudo columns (ROWTIME) stay the aggregate's own: kspark's rows carry them.
    non_aggregate = [
        str(c) for c in node.get("nonAggregateColumns") or () if str(c) not in keys and str(c) not in PSEUDO
    ]
    # ksqlDB stores the non-aggregate columns before the aggregates. A stream aggregate's
    # hold the latest record's value (nulls included), which is LATEST_BY_OFFSET(col, false);
    # a table aggregate's, the value of the row it last added or retracted (its undo
    # aggregator copies the retracted row), kspark's internal KSQL_NON_AGGREGATE_VALUE.
    table_aggregate = wire == "tableAggregateV1"
    latest = tuple(
        S.SelectExpression(
            alias=name,
            expression=(
                E.FunctionCall(NON_AGGREGATE_VALUE, (E.ColumnRef(name),))
                if table_aggregate
                else E.FunctionCall("LATEST_BY_OFFSET", (E.ColumnRef(name), E.Literal(False, T.BOOLEAN)))
            ),
        )
        for name in dict.fromkeys(non_aggregate)
    )
    aggregations = latest + aggregations
    common: dict[str, Any] = dict(
        ctx=ctx,
        source=source.step,
        key_column_names=keys,
        aggregation_functions=aggregations,
        internal_formats=_internal_formats(node, importer),
    )
    window: A.WindowSpec | S.WindowInfo | None = source.shape.window
    step: S.Step
    if wire == "streamWindowedAggregateV1":
        window_node = V.require(node, "windowExpression", f"step {ctx}")
        spec = V.window_spec(window_node)
        step = A.StreamWindowedAggregate(window=spec, **common)
        window = spec
        if V.emit_final(window_node):
            # ksqlDB 7.3 and later plan EMIT FINAL as the aggregate's emit strategy (KIP-825:
            # a window is emitted from the window store once stream time passes its end plus
            # grace), where earlier releases added a tableSuppressV1 step: kspark's step for
            # that is tableSuppressV2, as its own planner chooses for EMIT FINAL.
            step = A.TableSuppressV2(
                ctx=f"{ctx}/EmitFinal", source=step, grace_ms=spec.grace_ms or 0,
                retention_ms=spec.store_retention_ms,
            )
    elif wire == "tableAggregateV1" and importer.table_aggregate_two_updates:
        step = K.TableAggregateTwoUpdates(**common)
    elif wire == "tableAggregateV1":
        step = A.TableAggregate(**common)
    else:
        step = A.StreamAggregate(**common)
    return Imported(step, Shape(keys, tuple(a.alias for a in aggregations), True, window))


@translates("tableSuppressV1")
def _suppress(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    ctx = importer.ctx(node)
    source = importer.visit(V.require(node, "source", f"step {ctx}"))
    refinement = (node.get("refinementInfo") or {}).get("outputRefinement", "FINAL")
    if str(refinement).upper() != "FINAL":
        raise UnsupportedFeatureError(
            f"suppression with output refinement {refinement}",
            f"Step {ctx}: kspark suppresses only with EMIT FINAL, got {refinement}.",
        )
    window = source.shape.window
    if not isinstance(window, A.WindowSpec):
        raise PlanError(f"Step {ctx}: tableSuppressV1 needs a windowed aggregation below it.")
    # ksqlDB closes a window at its end when no GRACE PERIOD was given.
    step = A.TableSuppress(ctx=ctx, source=source.step, grace_ms=window.grace_ms or 0)
    return Imported(step, source.shape)


# --------------------------------------------------------------------------- joins


@dataclass(frozen=True, slots=True)
class _Side:
    imported: Imported
    alias: str
    key: E.Expr
    names: tuple[str, ...]  # the side's columns as the join outputs them
    value_reads: tuple[tuple[str, str], ...] = ()  # Shape.value_reads through the alias


def _join_side(importer: StepImporter, node: Mapping[str, Any], which: str) -> _Side:
    """A join input: a PrependAlias projection becomes the join's alias over its input."""
    ctx = importer.ctx(node)
    wire = node.get("@type")
    if wire in ("streamSelectV1", "tableSelectV1") and ctx.endswith(f"PrependAlias{which}"):
        inner = importer.visit(V.require(node, "source", f"step {ctx}"))
        selects = [importer.select(t, node) for t in V.require(node, "selectExpressions", f"step {ctx}")]
        alias = _prefix_alias(selects, inner.shape, ctx)
        if len(inner.shape.keys) != 1:
            raise UnsupportedFeatureError(
                "a join input with several key columns",
                f"Step {ctx}: the join input has key columns {', '.join(inner.shape.keys)}; kspark joins on one.",
            )
        names = tuple(s.alias for s in selects) + tuple(str(k) for k in node.get("keyColumnNames") or ())
        reads = tuple((f"{alias}_{name}", f"{alias}_{column}") for name, column in inner.shape.value_reads)
        return _Side(inner, alias, E.ColumnRef(inner.shape.keys[0]), names, reads)
    imported = importer.visit(node)
    if len(imported.shape.keys) != 1:
        raise UnsupportedFeatureError(
            "a join input with several key columns",
            f"Step {ctx}: the join input has key columns {', '.join(imported.shape.keys)}; kspark joins on one.",
        )
    return _Side(imported, "", E.ColumnRef(imported.shape.keys[0]), imported.shape.values)


def _prefix_alias(selects: Sequence[S.SelectExpression], shape: Shape, ctx: str) -> str:
    alias: str | None = None
    allowed = shape.names() | set(PSEUDO)
    for item in selects:
        name = column_name(item.expression)
        if name is None or name not in allowed or not item.alias.endswith("_" + name):
            raise UnsupportedFeatureError(
                "a join input projection that is not an alias prefix",
                f"Step {ctx}: '{item.expression} AS {item.alias}' is not '<column> AS <alias>_<column>'.",
            )
        found = item.alias[: -len(name) - 1]
        if alias is not None and found != alias:
            raise UnsupportedFeatureError(
                "a join input projection that is not an alias prefix",
                f"Step {ctx} prefixes columns with both '{alias}' and '{found}'.",
            )
        alias = found
    if not alias:
        raise PlanError(f"Step {ctx}: a PrependAlias projection without columns.")
    return alias


def _join_common(importer: StepImporter, node: Mapping[str, Any]) -> tuple[dict[str, Any], _Side, _Side]:
    ctx = importer.ctx(node)
    left = _join_side(importer, V.require(node, "leftSource", f"step {ctx}"), "Left")
    right = _join_side(importer, V.require(node, "rightSource", f"step {ctx}"), "Right")
    join_type = str(V.require(node, "joinType", f"step {ctx}")).upper()
    join_type = {"OUTER": "FULL", "FULL_OUTER": "FULL", "LEFT_OUTER": "LEFT"}.get(join_type, join_type)
    common = dict(
        ctx=ctx,
        left=left.imported.step,
        right=right.imported.step,
        join_type=join_type,
        left_alias=left.alias,
        right_alias=right.alias,
        # ksqlDB writes the key's name as ``keyColName`` (its getter) and reads ``keyName`` (its
        # creator's property); plans before 0.10 have neither and key the join by ROWKEY.
        key_column=str(node.get("keyColName") or node.get("keyName") or "ROWKEY"),
        left_key=left.key,
        right_key=right.key,
    )
    return common, left, right


def _join_shape(key: str, left: _Side, right: _Side, *, table: bool, window: Any) -> Shape:
    values = tuple(n for n in (*left.names, *right.names) if n != key)
    return Shape((key,), tuple(dict.fromkeys(values)), table, window, value_reads=left.value_reads + right.value_reads)


@translates("streamStreamJoinV1")
def _stream_stream_join(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    common, left, right = _join_common(importer, node)
    grace = node.get("graceMillis")
    step = J.StreamStreamJoin(
        before_ms=V.duration_ms(V.require(node, "beforeMillis", f"step {common['ctx']}"), "beforeMillis"),
        after_ms=V.duration_ms(V.require(node, "afterMillis", f"step {common['ctx']}"), "afterMillis"),
        grace_ms=None if grace is None else V.duration_ms(grace, "graceMillis"),
        **common,
    )
    return Imported(step, _join_shape(step.key_column, left, right, table=False, window=None))


@translates("streamTableJoinV1")
def _stream_table_join(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    common, left, right = _join_common(importer, node)
    step = J.StreamTableJoin(**common)
    return Imported(
        step, _join_shape(step.key_column, left, right, table=False, window=left.imported.shape.window)
    )


@translates("tableTableJoinV1")
def _table_table_join(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    common, left, right = _join_common(importer, node)
    step = J.TableTableJoin(**common)
    return Imported(
        step, _join_shape(step.key_column, left, right, table=True, window=left.imported.shape.window)
    )


@translates("fkTableTableJoinV1")
def _foreign_key_join(importer: StepImporter, node: Mapping[str, Any]) -> Imported:
    """ksqlDB's foreign-key table-table join (``ForeignKeyTableTableJoinBuilder``): Kafka
    Streams' KIP-213 join of each left row to the right row whose primary key the left row's
    foreign key names, keyed by the left key. ksqlDB evaluates the foreign key, a column name
    (``leftJoinColumnName``, before 0.24) or an expression (``leftJoinExpression``), over the
    left input as the join sees it, aliased (``L_FK``); kspark's step evaluates it over the
    left input's own columns (``FK``), under the join's ``left_alias``."""
    ctx = importer.ctx(node)
    left = _join_side(importer, V.require(node, "leftSource", f"step {ctx}"), "Left")
    right = _join_side(importer, V.require(node, "rightSource", f"step {ctx}"), "Right")
    join_type = str(V.require(node, "joinType", f"step {ctx}")).upper()
    join_type = {"LEFT_OUTER": "LEFT"}.get(join_type, join_type)
    column, text = node.get("leftJoinColumnName"), node.get("leftJoinExpression")
    if (column is None) == (text is None):
        raise PlanError(
            f"Step {ctx}: fkTableTableJoinV1 needs exactly one of leftJoinColumnName and "
            f"leftJoinExpression, got {column!r} and {text!r}."
        )
    foreign_key = E.ColumnRef(str(column)) if column is not None else importer.expr(text, node)
    if left.alias:
        unaliased = {f"{left.alias}_{name}": name for name in (*left.imported.shape.names(), *PSEUDO)}
        missing = sorted(
            ref.name for ref in _column_refs(foreign_key) if ref.source is None and ref.name not in unaliased
        )
        if missing:
            raise PlanError(
                f"Step {ctx}: the foreign key reads `{missing[0]}`, which is no column of the left input "
                f"({', '.join(sorted(unaliased))})."
            )
        foreign_key = rewrite(
            foreign_key,
            lambda e: E.ColumnRef(unaliased[e.name])
            if isinstance(e, E.ColumnRef) and e.source is None and e.name in unaliased
            else None,
        )
    key = f"{left.alias}_{left.imported.shape.keys[0]}" if left.alias else left.imported.shape.keys[0]
    step = J.ForeignKeyTableTableJoin(
        ctx=ctx,
        left=left.imported.step,
        right=right.imported.step,
        join_type=join_type,
        left_alias=left.alias,
        right_alias=right.alias,
        key_column=key,
        foreign_key=_reading_values(foreign_key, left.imported.shape),
    )
    return Imported(step, _join_shape(key, left, right, table=True, window=None))


def _column_refs(node: E.Expr) -> list[E.ColumnRef]:
    found = [node] if isinstance(node, E.ColumnRef) else []
    for child in node.children():
        found.extend(_column_refs(child))
    return found


def projection_aliases(node: Any) -> set[str]:
    """The alias of every ``selectExpressions`` item in a ksqlDB step tree (unparsed, upper case)."""
    found: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if not isinstance(current, Mapping):
            continue
        for text in current.get("selectExpressions") or ():
            alias = alias_of(str(text))
            if alias is not None:
                found.add(alias)
        stack.extend(current.get(k) for k in ("source", "leftSource", "rightSource"))
    return found

