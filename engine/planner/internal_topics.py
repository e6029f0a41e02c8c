"""The internal topics ksqlDB's Kafka Streams topology of a query creates, by ksqlDB's names.

kspark keeps a query's state in Spark, not in Kafka topics, but ksqlDB's test cases and
tools name the repartition and changelog topics of a join (``<application id>-Join-left-
repartition``...). This module derives them from a query plan alone, following ksqlDB's
planner (``JoinNode``, ``PreJoinRepartitionNode``, ``SchemaKStream.selectKey``):

- The join key format is the left source's key format when the left side is keyed by its
  join expression (and has a key format), else the right's when it is, else the first
  key format of the two sources that is not ``NONE``, else ``ksql.persistence.default.
  format.key``.
- A side is re-keyed when its join expression is not its single key column (or it has no
  key), when its key format is not the join key format, and always when the join key
  format is a schema-registry format (AVRO, JSON_SR, PROTOBUF: the key schema is
  registered anew).
- A re-keyed stream of a stream-stream join goes through ``<Join>-left-repartition`` /
  ``<Join>-right-repartition``, of a stream-table join through ``<Join>-repartition``; a
  re-keyed table through ``<Side>SourceKeyed-SelectKey-repartition`` and its store
  ``<Side>SourceKeyed-Materialize-changelog``. A table side that is not re-keyed is
  materialised as ``KafkaTopic_<Side>-Reduce-changelog``.
- A stream-stream join keeps each side in a window store named by Kafka Streams' node
  counter: ``KSTREAM-JOINTHIS-<n>-store-changelog`` and ``KSTREAM-JOINOTHER-<n+1>-...``
  (``OUTER`` for a side whose rows are kept unmatched: the right side of a LEFT join, both
  of a FULL join).

Nested (n-way) joins name their inner joins ``L_Join``, ``L_L_Join``... and their sides
``L_Left``/``L_Right``, as ksqlDB's logical planner does. Foreign-key joins create topics
this module does not name yet. The module imports no pyspark.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.plan import expr as E
from engine.plan.plan import QueryPlan
from engine.plan.schema import LogicalSchema
from engine.plan.steps import Formats, Step, WindowInfo
from engine.plan.steps_join import StreamStreamJoin, StreamTableJoin, TableTableJoin

DEFAULT_KEY_FORMAT = "ksql.persistence.default.format.key"
SERVICE_ID = "ksql.service.id"
PERSISTENT_PREFIX = "ksql.persistent.prefix"
DEFAULT_PERSISTENT_PREFIX = "query_"
# Formats whose key schema ksqlDB registers in the schema registry: a join always re-keys
# into them, so the key schema is registered under the internal topic's subject.
SCHEMA_REGISTRY_FORMATS = frozenset({"AVRO", "JSON_SR", "PROTOBUF"})
# Key formats that wrap a single key column unless told not to (ksqlDB adds UNWRAP_SINGLES to
# those that support both wrapping and unwrapping: not PROTOBUF, which only wraps).
_WRAPPING_FORMATS = frozenset({"AVRO", "JSON", "JSON_SR", "PROTOBUF_NOSR"})
# Kafka Streams processor nodes a ksqlDB source adds (source, and two value transformers),
# a stream's key selection, a repartition (filter, sink, source) and a join's windows.
_SOURCE_NODES, _SELECT_KEY_NODES, _REPARTITION_NODES = 3, 1, 3


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """One internal topic of a query: its name after the application id and its formats."""

    suffix: str
    formats: Formats
    # The source topic whose partition count the internal topic takes.
    partitions_of: str
    # The window of its keys: a join's key format is one of its inputs', window included.
    window: WindowInfo | None = None


@dataclass(frozen=True, slots=True)
class _Side:
    """A join input as the key rules see it."""

    name: str  # "Left", "Right", "L_Left"...
    is_table: bool
    key_names: tuple[str, ...]
    formats: Formats  # the leftmost source's formats (a nested join's: its own key format)
    topic: str  # the leftmost source's topic
    nodes: int  # Kafka Streams nodes built for this input before the join
    is_source: bool = True  # False: a nested join
    window: WindowInfo | None = None  # a windowed source's (a nested join's: its key format's)


def application_id(service_id: str, query_id: str, persistent_prefix: str = DEFAULT_PERSISTENT_PREFIX) -> str:
    """ksqlDB's Kafka Streams application id of a persistent query (internal topics' prefix):
    ``_confluent-ksql-<ksql.service.id><ksql.persistent.prefix><query id>``."""
    return f"_confluent-ksql-{service_id}{persistent_prefix}{query_id}"


def internal_topics(query: QueryPlan, config: dict[str, object] | None = None) -> list[InternalTopic]:
    """The internal topics ksqlDB creates for ``query``'s joins, outermost join first."""
    join = _first_join(query.root)
    if join is None:
        return []  # the config is read only when it counts (replay-ksqldb shares runs by what they read)
    default_key = str((config or {}).get(DEFAULT_KEY_FORMAT, "KAFKA")).upper()
    out: list[InternalTopic] = []
    _join_topics(join, "", default_key, out)
    return out


def _first_join(step: Step) -> Step | None:
    if isinstance(step, StreamStreamJoin | StreamTableJoin | TableTableJoin):
        return step
    for child in step.inputs().values():
        found = _first_join(child)
        if found is not None:
            return found
    return None


def _side(step: Step, name: str, prefix: str, default_key: str, out: list[InternalTopic]) -> _Side | None:
    """The input ``step`` of a join as a side; a nested join adds its own topics to ``out``."""
    if isinstance(step, StreamStreamJoin | StreamTableJoin | TableTableJoin):
        inner = _join_topics(step, prefix + "L_", default_key, out)
        if inner is None:
            return None
        formats, topic, nodes, window = inner
        return _Side(name, isinstance(step, TableTableJoin), (step.key_column,), formats, topic, nodes, False, window)
    source_formats = getattr(step, "formats", None)
    schema = getattr(step, "source_schema", None)
    source_topic = getattr(step, "topic", None)
    if not (
        isinstance(source_formats, Formats) and isinstance(schema, LogicalSchema) and isinstance(source_topic, str)
    ):
        return None  # not a source step: ksqlDB's rules for it are not modelled
    is_table = "table" in step.TYPE.lower()
    window = getattr(step, "window_info", None)
    return _Side(name, is_table, tuple(c.name for c in schema.key), source_formats, source_topic, _SOURCE_NODES,
                 window=window if isinstance(window, WindowInfo) else None)


def _keyed_by(side: _Side, key: E.Expr) -> bool:
    return len(side.key_names) == 1 and isinstance(key, E.ColumnRef) and key.name == side.key_names[0]


def _join_key_side(left: _Side, right: _Side, left_ok: bool, right_ok: bool) -> _Side | None:
    """The input whose key format ksqlDB's JoinNode.resolveKeyFormats gives the join (its
    window included); None: neither has a key format."""
    for side, keyed in ((left, left_ok), (right, right_ok)):
        if keyed and side.formats.key_format != "NONE":
            return side
    for side in (left, right):
        if side.formats.key_format != "NONE":
            return side
    return None


def _join_key_formats(left: _Side, right: _Side, left_ok: bool, right_ok: bool, default_key: str) -> Formats:
    """ksqlDB's JoinNode.resolveKeyFormats: the key formats of the join's inputs and output."""
    side = _join_key_side(left, right, left_ok, right_ok)
    if side is not None:
        return side.formats
    return Formats(key_format=default_key, value_format=left.formats.value_format)


def _key_formats(chosen: Formats, side: _Side) -> Formats:
    """The internal topics' formats: the join key format, the side's value format."""
    key_props = tuple(p for p in chosen.key_properties if p[0] != "schema_id")
    features = chosen.key_features
    if not features and chosen.key_format in _WRAPPING_FORMATS and len(side.key_names) <= 1:
        features = ("UNWRAP_SINGLES",)
    return Formats(
        key_format=chosen.key_format,
        value_format=side.formats.value_format,
        key_properties=key_props,
        value_properties=tuple(p for p in side.formats.value_properties if p[0] != "schema_id"),
        key_features=features,
        value_features=side.formats.value_features,
    )


def _join_topics(
    join: Step, prefix: str, default_key: str, out: list[InternalTopic]
) -> tuple[Formats, str, int, WindowInfo | None] | None:
    """Add ``join``'s topics (an inner join's first); its key formats, leftmost topic and node count."""
    assert isinstance(join, StreamStreamJoin | StreamTableJoin | TableTableJoin)
    left = _side(join.left, prefix + "Left", prefix, default_key, out)
    right = _side(join.right, prefix + "Right", prefix, default_key, out)
    if left is None or right is None:
        return None
    left_ok, right_ok = _keyed_by(left, join.left_key), _keyed_by(right, join.right_key)
    chosen = _join_key_formats(left, right, left_ok, right_ok, default_key)
    key_side = _join_key_side(left, right, left_ok, right_ok)
    window = key_side.window if key_side is not None else None
    forced = chosen.key_format in SCHEMA_REGISTRY_FORMATS

    def rekeyed(side: _Side, keyed: bool) -> bool:
        return forced or not keyed or side.formats.key_format != chosen.key_format

    ctx = prefix + "Join"
    own: list[InternalTopic] = []
    nodes = left.nodes + right.nodes
    repartitioned = [s for s, ok in ((left, left_ok), (right, right_ok)) if rekeyed(s, ok)]
    for side in (left, right):
        formats = _key_formats(chosen, side)
        if side.is_table and side in repartitioned:
            own.append(InternalTopic(f"{side.name}SourceKeyed-SelectKey-repartition", formats, side.topic))
            own.append(InternalTopic(f"{side.name}SourceKeyed-Materialize-changelog", formats, side.topic))
        elif side.is_table and side.is_source:
            own.append(InternalTopic(f"KafkaTopic_{side.name}-Reduce-changelog", _key_formats(side.formats, side), side.topic))
    if isinstance(join, StreamStreamJoin):
        this, other = (right, left) if join.join_type == "RIGHT" else (left, right)
        for label, side in (("left", this), ("right", other)):
            if side in repartitioned:
                own.append(InternalTopic(f"{ctx}-{label}-repartition", _key_formats(chosen, side), side.topic))
        nodes += (_SELECT_KEY_NODES + _REPARTITION_NODES) * len(repartitioned)
        first = nodes + 2  # the two windowing nodes come before the join's
        this_kind = "OUTERTHIS" if join.join_type == "FULL" else "JOINTHIS"
        other_kind = "JOINOTHER" if join.join_type == "INNER" else "OUTEROTHER"
        own.append(InternalTopic(f"KSTREAM-{this_kind}-{first:010d}-store-changelog", _key_formats(chosen, this), this.topic))
        own.append(InternalTopic(f"KSTREAM-{other_kind}-{first + 1:010d}-store-changelog", _key_formats(chosen, other), other.topic))
        nodes = first + 3  # JOINTHIS, JOINOTHER and the merge of their results
    elif isinstance(join, StreamTableJoin):
        if left in repartitioned:
            own.append(InternalTopic(f"{ctx}-repartition", _key_formats(chosen, left), left.topic))
            nodes += _SELECT_KEY_NODES + _REPARTITION_NODES
        nodes += 1
    else:
        nodes += 1
    # The table sources' own changelogs keep their own windows; the other topics the join's.
    own = [replace(t, window=window) if not t.suffix.startswith("KafkaTopic_") else t for t in own]
    for side in (left, right):
        own = [replace(t, window=side.window) if t.suffix == f"KafkaTopic_{side.name}-Reduce-changelog" else t
               for t in own]
    out.extend(own)
    return chosen, left.topic, nodes, window
