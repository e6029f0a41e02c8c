"""Which plan may replace a running query's plan in place (``CREATE OR REPLACE``).

ksqlDB's rule for query upgrades, applied to kspark's steps: a step is *passive* (filters and
projections: they can be added, removed or changed freely) or *enforcing* (sources, sinks,
re-keying, grouping, aggregating: the new plan must have a matching step at the same place,
with the same query context and the same parameters that shape the topics and the state).
Every other step (joins, windowed and table aggregates, table functions, EMIT FINAL) refuses
upgrades. The walk follows ksqlDB's: from the sinks down, the two plans advance past their
passive steps and meet at enforcing steps, which compare the properties ksqlDB compares and
report the first difference in ksqlDB's words.

A step's ksqlDB class is its family: the class name without a version suffix
(``StreamSinkV5`` is a ``StreamSink``). Stateless enforcing steps may change version (a
replaced plan is planned with the current step versions); an aggregate keeps its version,
since its state in Spark's checkpoint is the one that version built.

Past ksqlDB, behind the query property ``kspark.query.upgrades.beyond.ksqldb=true``: an
aggregate's filters may read columns the query did not read before (kspark's aggregate
state holds the key and the aggregates' results, not ksqlDB's "columns not part of
aggregate"), and windowed aggregates and their EMIT FINAL take part as enforcing steps (the
same window, grace and functions), so their filters and projections may change too. The
hosts check besides that Spark's state operators stay the same
(``engine.hosting.application.state_carry_problem``).

This module imports no pyspark.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import UpgradeError
from engine.plan import expr as E
from engine.plan.schema import WINDOW_BOUNDS
from engine.plan.steps import Formats, SelectExpression, Step, TimestampColumn

_VERSION = re.compile(r"V[0-9]+$")
_JAVA_PACKAGE = "io.confluent.ksql.execution.plan"

BEYOND_KSQLDB = "kspark.query.upgrades.beyond.ksqldb"

PASSIVE_FAMILIES = frozenset({"StreamFilter", "TableFilter", "StreamSelect", "TableSelect"})
SOURCE_FAMILIES = frozenset({"StreamSource", "TableSource"})
STATEFUL_FAMILIES = frozenset({"StreamAggregate", "StreamWindowedAggregate", "TableSuppress"})


def family(step: Step) -> str:
    """The ksqlDB execution-step class a kspark step version stands for."""
    return _VERSION.sub("", type(step).__name__)


def validate_upgrade(old: Step, new: Step, *, beyond_ksqldb: bool = False) -> None:
    """Raise ``engine.errors.UpgradeError`` unless the plan rooted at ``new`` may take over the
    state and offsets of the running plan rooted at ``old`` (by ksqlDB's rules, or with
    ``beyond_ksqldb`` by the wider ones this module's docstring gives)."""
    context = _Context(old, new, beyond_ksqldb=beyond_ksqldb)
    context.validate(old, new)


def beyond_ksqldb_enabled(config: Mapping[str, Any]) -> bool:
    """Whether ``config`` opts in to the upgrades past ksqlDB's rules (``BEYOND_KSQLDB``)."""
    return str(config.get(BEYOND_KSQLDB, "false")).strip().lower() == "true"


@dataclass(frozen=True)
class _Property:
    name: str
    value: Callable[[Step, _Context], object]


def _java_class(step: Step) -> str:
    return f"class {_JAVA_PACKAGE}.{family(step)}"


def _properties(step: Step, _: _Context) -> str:
    return f"ExecutionStepProperties{{queryContext='{step.ctx}'}}"


def _field(name: str, render: Callable[[object], str] = str) -> Callable[[Step, _Context], object]:
    return lambda step, _: render(_value(step, name))


def _formats_text(value: object) -> str:
    assert isinstance(value, Formats)
    return (
        f"Formats{{keyFormat={_format_info(value.key_format, value.key_properties)}, "
        f"valueFormat={_format_info(value.value_format, value.value_properties)}, "
        f"keyFeatures={_features(value.key_features)}, valueFeatures={_features(value.value_features)}}}"
    )


def _format_info(name: str, properties: tuple[tuple[str, str], ...]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in properties)
    return f"FormatInfo{{format={name}, properties={{{shown}}}}}"


def _features(features: tuple[str, ...]) -> str:
    return f"SerdeFeatures{{features=[{', '.join(features)}]}}"


def _timestamp_text(value: object) -> str:
    if value is None:
        return "Optional.empty"
    assert isinstance(value, TimestampColumn)
    pattern = "Optional.empty" if value.format is None else f"Optional[{value.format}]"
    return f"Optional[TimestampColumn{{column={value.column}, format={pattern}}}]"


def _expressions_text(value: object) -> str:
    assert isinstance(value, tuple)
    return "[" + ", ".join(E.format_sql(s.expression if isinstance(s, SelectExpression) else s) for s in value) + "]"


def _aggregate_calls(step: Step, _: _Context) -> str:
    return _expressions_text(_value(step, "aggregation_functions"))


def _non_aggregate_columns(step: Step, context: _Context) -> str:
    return "[" + ", ".join(context.required_columns(step)) + "]"


_SINK = (
    _Property("class", lambda s, _: _java_class(s)),
    _Property("properties", _properties),
    _Property("formats", _field("formats", _formats_text)),
    _Property("topicName", _field("topic")),
    _Property("timestampColumn", _field("timestamp_column", _timestamp_text)),
)
_SOURCE = (
    _Property("class", lambda s, _: _java_class(s)),
    _Property("properties", _properties),
    _Property("topicName", _field("topic")),
    _Property("formats", _field("formats", _formats_text)),
    _Property("timestampColumn", _field("timestamp_column", _timestamp_text)),
)
# The properties each enforcing family compares, in ksqlDB's order (the first that differs is reported).
_MUST_MATCH: dict[str, tuple[_Property, ...]] = {
    "StreamSink": _SINK,
    "TableSink": _SINK,
    "StreamSource": _SOURCE,
    "TableSource": _SOURCE,
    "StreamSelectKey": (
        _Property("class", lambda s, _: _java_class(s)),
        _Property("properties", _properties),
        _Property("keyExpressions", _field("key_expressions", _expressions_text)),
    ),
    "StreamGroupBy": (
        _Property("class", lambda s, _: _java_class(s)),
        _Property("properties", _properties),
        _Property("group by clause", _field("group_by_expressions", _expressions_text)),
        _Property("internal formats", _field("internal_formats", _formats_text)),
    ),
    "StreamGroupByKey": (
        _Property("class", lambda s, _: _java_class(s)),
        _Property("properties", _properties),
        _Property("internal formats", _field("internal_formats", _formats_text)),
    ),
    "StreamAggregate": (
        _Property("class", lambda s, _: _java_class(s)),
        _Property("properties", _properties),
        _Property("internal format", _field("internal_formats", _formats_text)),
        _Property("columns not part of aggregate", _non_aggregate_columns),
        _Property("aggregate functions", _aggregate_calls),
    ),
}
_NON_AGGREGATE = "columns not part of aggregate"
# The enforcing families the opt-in past ksqlDB adds.
_BEYOND_MUST_MATCH: dict[str, tuple[_Property, ...]] = {
    "StreamWindowedAggregate": (
        _Property("class", lambda s, _: _java_class(s)),
        _Property("properties", _properties),
        _Property("internal format", _field("internal_formats", _formats_text)),
        _Property("window", _field("window")),
        _Property("aggregate functions", _aggregate_calls),
    ),
    "TableSuppress": (
        _Property("class", lambda s, _: _java_class(s)),
        _Property("properties", _properties),
        _Property("grace", _field("grace_ms")),
        _Property("retention", lambda s, _: str(getattr(s, "retention_ms", None))),
    ),
}


class _Context:
    """The two plans being compared (an aggregate's columns are read from its whole plan)."""

    def __init__(self, old: Step, new: Step, *, beyond_ksqldb: bool) -> None:
        self._required: dict[int, list[str]] = {}
        self.must_match = dict(_MUST_MATCH)
        if beyond_ksqldb:
            self.must_match.update(_BEYOND_MUST_MATCH)
            self.must_match["StreamAggregate"] = tuple(
                p for p in _MUST_MATCH["StreamAggregate"] if p.name != _NON_AGGREGATE)
        for root in (old, new):
            self._collect_aggregates(root, [])

    def validate(self, this: Step, to: Step) -> None:
        """ksqlDB's walk: a passive step hands the comparison to ``to`` against its own
        input; an enforcing step compares itself with ``to`` and goes on below both."""
        name = family(this)
        if name in PASSIVE_FAMILIES:
            self.validate(to, _only_input(this))
            return
        if name in SOURCE_FAMILIES:
            self._validate_source(this, to)
            return
        properties = self.must_match.get(name)
        if properties is None:
            raise UpgradeError(f"Upgrades not yet supported for {name}")
        self._must_match(this, to, properties)
        if name in STATEFUL_FAMILIES and this.TYPE != to.TYPE:
            raise UpgradeError(
                f"Query is not upgradeable. Plan step of type {name} must keep its step version: its state in "
                f"the query's checkpoint is the one {this.TYPE} keeps, and the new plan has {to.TYPE}."
            )
        self.validate(_only_input(this), _only_input(to))

    def _validate_source(self, this: Step, to: Step) -> None:
        name = family(this)
        source = to
        while family(source) != name:
            inputs = list(source.inputs().values())
            if not inputs:
                raise UpgradeError(
                    f"Query is not upgradeable. The root source node of the upgrade tree must be {name}, "
                    f"but was {_java_class(source)}"
                )
            if len(inputs) > 1:
                raise UpgradeError("Query is not upgradeable. Cannot change a non-join source into a join source.")
            if family(source) not in PASSIVE_FAMILIES:
                if family(source) not in self.must_match and family(source) not in SOURCE_FAMILIES:
                    raise UpgradeError(f"Upgrades not yet supported for {family(source)}")
                raise UpgradeError(
                    f"Query is not upgradeable. Cannot add a {_java_class(source)} step that is not in the "
                    "original query plan."
                )
            source = inputs[0]
        self._must_match(this, source, _MUST_MATCH[name])

    def _must_match(self, this: Step, that: Step, properties: Sequence[_Property]) -> None:
        for prop in properties:
            a, b = prop.value(this, self), prop.value(that, self)
            if a != b:
                raise UpgradeError(
                    f"Query is not upgradeable. Plan step of type {family(this)} must have matching {prop.name}. "
                    f"Values differ: {a} vs. {b}"
                )

    # ------------------------------------------------------------ an aggregate's input columns

    def required_columns(self, step: Step) -> list[str]:
        return self._required.get(id(step), [])

    def _collect_aggregates(self, step: Step, above: list[Step]) -> None:
        if family(step) == "StreamAggregate":
            self._required[id(step)] = _required_columns(step, above)
        for child in step.inputs().values():
            self._collect_aggregates(child, [*above, step])


def _value(step: Step, name: str) -> Any:
    """A field of a step whose family (not whose class) says it has it."""
    return getattr(step, name)


def _only_input(step: Step) -> Step:
    inputs = list(step.inputs().values())
    if len(inputs) != 1:
        raise UpgradeError(f"Upgrades not yet supported for {family(step)}")
    return inputs[0]


def _required_columns(aggregate: Step, above: list[Step]) -> list[str]:
    """The columns of the aggregate's input the statement refers to, as ksqlDB lists them
    (its "columns not part of aggregate"): those of the projection (aggregate arguments
    included), the WHERE, the GROUP BY and the HAVING."""
    calls = {a.alias: a.expression for a in _value(aggregate, "aggregation_functions")}
    keys = tuple(_value(aggregate, "key_column_names"))
    found: list[str] = []

    def add(expression: E.Expr) -> None:
        for node in E.walk(expression):
            if not isinstance(node, E.ColumnRef) or node.name in WINDOW_BOUNDS:
                continue
            if node.name in calls:
                add(calls[node.name])
            elif node.name not in found:
                found.append(node.name)

    projection = next((s for s in reversed(above) if family(s) == "TableSelect"), None)
    if projection is not None:
        for name in _value(projection, "key_column_names"):
            if name in keys and name not in found:
                found.append(name)
        for select in _value(projection, "select_expressions"):
            add(select.expression)
    for call in calls.values():
        add(call)
    below: list[Step] = []
    step = _only_input(aggregate)
    while True:
        below.append(step)
        inputs = list(step.inputs().values())
        if len(inputs) != 1:
            break
        step = inputs[0]
    for step in reversed(below):
        if family(step) in ("StreamFilter", "TableFilter"):
            add(_value(step, "predicate"))
    for step in below:
        for grouping in getattr(step, "group_by_expressions", ()):
            add(grouping.expression if isinstance(grouping, SelectExpression) else grouping)
    having = getattr(aggregate, "having", None)
    if having is not None:
        add(having)
    for step in above:
        if family(step) == "TableFilter":
            add(_value(step, "predicate"))
    return found
