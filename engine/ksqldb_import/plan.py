"""A ksqlDB ``plan.json`` (entries ``ksqlPlanV1``) -> kspark statement plans.

Each entry's ``ddlCommand`` becomes a kspark command and its ``queryPlan.physicalPlan`` a
kspark query plan, translated step by step (``engine.ksqldb_import.steps``); nothing is
re-planned from the statement text. The ``configs`` saved with the plan go to the engine;
those that change semantics in a way kspark does not implement are reported as unsupported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import PlanError, UnsupportedFeatureError
from engine.ksqldb_import import values as V
from engine.ksqldb_import.steps import StepImporter, projection_aliases
from engine.plan.plan import (
    AlterSourceCommand,
    Command,
    CreateStreamCommand,
    CreateTableCommand,
    DropSourceCommand,
    QueryPlan,
    StatementPlan,
)
from engine.plan.query_configs import with_query_configs
from engine.plan.schema import Namespace
from engine.plan.types import SqlType, parse_type

# Configs whose saved value changes what a query computes, and the values kspark implements.
# An absent config means the release's default, which for these is what kspark does.
SEMANTIC_CONFIGS: dict[str, tuple[frozenset[str], str]] = {
    "ksql.nested.error.set.null": (
        frozenset({"true", "false"}),
        "true: an error in a nested expression sets only that expression to null; false: it "
        "sets the whole expression to null",
    ),
    "ksql.timestamp.throw.on.invalid": (
        frozenset({"false", "true"}),
        "false: a record with an invalid timestamp is logged and skipped; true: it stops the query",
    ),
    "ksql.streams.cache.max.bytes.buffering": (
        frozenset({"0"}),
        "every update is emitted (no record cache)",
    ),
    "ksql.query.persistent.max.bytes.buffering.total": (
        frozenset({"-1", "0"}),
        "every update is emitted (no record cache)",
    ),
    "ksql.cast.strings.preserve.nulls": (
        frozenset({"true", "false"}),
        "true: CAST of a null to STRING stays null; false: it is the text 'null'",
    ),
}


@dataclass(frozen=True, slots=True)
class ImportedPlan:
    """The kspark statement plans of a ksqlDB plan, in order, and the configs to run them with."""

    statements: tuple[StatementPlan, ...]
    configs: Mapping[str, str]


KIP_904_RELEASE = (7, 5)
"""The first ksqlDB release on a Kafka Streams with KIP-904 (a table row's change within its
group reaches the aggregate as one record): earlier releases emitted two updates for it."""


def import_plan(data: Any, *, release: str | None = None) -> ImportedPlan:
    """Translate a parsed ksqlDB ``plan.json`` (``{"plan": [...], "configs": {...}}``).

    ``release`` is the ksqlDB release that ran the plan (``spec.json``'s ``version``) where
    it is known: its runtime's behaviour, not the plan's steps, decides some step versions
    (table aggregates before ``KIP_904_RELEASE``). Without it kspark's behaviour is kept.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("plan"), list):
        raise PlanError("A ksqlDB plan must be an object with a 'plan' list of ksqlPlanV1 entries.")
    configs = {str(k): str(v) for k, v in (data.get("configs") or {}).items() if v is not None}
    check_configs(configs)
    check_suppress_buffer(configs, data["plan"])
    types: dict[str, SqlType] = {}
    statements: list[StatementPlan] = []
    for index, entry in enumerate(data["plan"]):
        plan = import_entry(entry, index, types, release=release, configs=configs)
        if plan is not None:
            statements.append(plan)
    return ImportedPlan(tuple(statements), configs)


def check_configs(configs: Mapping[str, str]) -> None:
    """Raise UnsupportedFeatureError for a saved config value kspark does not implement."""
    for key, (supported, meaning) in SEMANTIC_CONFIGS.items():
        value = configs.get(key)
        if value is not None and value.lower() not in supported:
            raise UnsupportedFeatureError(
                f"config {key}={value}",
                f"The plan was saved with {key}={value}; kspark implements only "
                f"{'/'.join(sorted(supported))} ({meaning}).",
            )


SUPPRESS_BUFFER_SIZE_BYTES = "ksql.suppress.buffer.size.bytes"


def check_suppress_buffer(configs: Mapping[str, str], entries: Any) -> None:
    """Raise UnsupportedFeatureError for a plan that suppresses (EMIT FINAL) with a bounded
    buffer: ksqlDB's query stops once its Kafka Streams buffer holds more than the bound's
    bytes, by that buffer's own estimate of each record's size, which kspark's state does not
    keep. Unbounded (``-1``, the default) is what kspark does."""
    value = configs.get(SUPPRESS_BUFFER_SIZE_BYTES)
    if value is None or value.strip().startswith("-") or not _suppresses(entries):
        return
    raise UnsupportedFeatureError(
        f"config {SUPPRESS_BUFFER_SIZE_BYTES}={value}",
        f"The plan was saved with {SUPPRESS_BUFFER_SIZE_BYTES}={value} and suppresses "
        "(tableSuppressV1); kspark's EMIT FINAL buffers without bound, as -1 does.",
    )


def _suppresses(node: Any) -> bool:
    """Whether a plan's JSON holds a ``tableSuppressV1`` step, the only EMIT FINAL that has a
    suppression buffer (from 7.3 a windowed aggregate emits final results from its window
    store, KIP-825, which the config does not bound)."""
    if isinstance(node, Mapping):
        return node.get("@type") == "tableSuppressV1" or any(_suppresses(v) for v in node.values())
    if isinstance(node, list):
        return any(_suppresses(v) for v in node)
    return False


def import_entry(
    entry: Any,
    index: int,
    types: dict[str, SqlType],
    *,
    release: str | None = None,
    configs: Mapping[str, str] | None = None,
) -> StatementPlan | None:
    """One ``ksqlPlanV1`` entry; a type registration only updates ``types`` (None returned)."""
    if not isinstance(entry, Mapping) or entry.get("@type") != "ksqlPlanV1":
        found = entry.get("@type") if isinstance(entry, Mapping) else entry
        raise UnsupportedFeatureError(
            f"plan entry {found}", f"Plan entry {index + 1} is {found!r}; kspark imports ksqlPlanV1 entries."
        )
    text = str(entry.get("statementText") or "")
    ddl = entry.get("ddlCommand")
    command: Command | None = None
    if ddl is not None:
        wire = ddl.get("@type") if isinstance(ddl, Mapping) else None
        if wire == "registerTypeV1":
            types[str(V.require(ddl, "typeName", "registerTypeV1")).upper()] = parse_type(
                str(V.require(ddl, "type", "registerTypeV1"))
            )
        elif wire == "dropTypeV1":
            types.pop(str(V.require(ddl, "typeName", "dropTypeV1")).upper(), None)
        else:
            command = import_command(ddl)
    query = None
    if entry.get("queryPlan") is not None:
        sink_keys = None
        if isinstance(command, CreateStreamCommand | CreateTableCommand):
            sink_keys = tuple(c.name for c in command.schema.key)
        query = import_query(entry["queryPlan"], types, release=release, sink_keys=sink_keys, configs=configs)
    if command is None and query is None:
        return None
    return StatementPlan(statement_text=text, command=command, query=query)


def import_command(ddl: Any) -> Command:
    """``createStreamV1`` / ``createTableV1`` / ``dropSourceV1`` / ``alterSourceV1`` -> the kspark command."""
    wire = ddl.get("@type") if isinstance(ddl, Mapping) else None
    if wire in ("createStreamV1", "createTableV1"):
        name = str(V.require(ddl, "sourceName", str(wire)))
        cls = CreateStreamCommand if wire == "createStreamV1" else CreateTableCommand
        return cls(
            name=name,
            schema=V.schema(str(V.require(ddl, "schema", f"{wire} {name}"))),
            topic=str(V.require(ddl, "topicName", f"{wire} {name}")),
            formats=V.formats(V.require(ddl, "formats", f"{wire} {name}"), f"{wire} {name}"),
            timestamp_column=V.timestamp_column(ddl.get("timestampColumn")),
            window_info=V.window_info(ddl.get("windowInfo")),
            or_replace=bool(ddl.get("orReplace")),
            is_source=bool(ddl.get("isSource")),
        )
    if wire == "dropSourceV1":
        name = str(V.require(ddl, "sourceName", "dropSourceV1"))
        return DropSourceCommand(name=name, kind=str(ddl.get("sourceType") or "STREAM").upper())
    if wire == "alterSourceV1":
        # ALTER STREAM|TABLE ... ADD COLUMN: the new value columns, each as ksqlDB's Column
        # prints itself (``"`C` INTEGER"``).
        name = str(V.require(ddl, "sourceName", "alterSourceV1"))
        columns = V.require(ddl, "newColumns", f"alterSourceV1 {name}")
        if not isinstance(columns, list) or not columns:
            raise PlanError(f"The alterSourceV1 command of {name} must list its new columns, got {columns!r}.")
        new_columns = V.schema(", ".join(str(c) for c in columns))
        if any(c.namespace is not Namespace.VALUE for c in new_columns.columns):
            raise PlanError(f"The alterSourceV1 command of {name} adds a column that is not a value column: {columns}.")
        return AlterSourceCommand(
            name=name, kind=str(V.require(ddl, "ksqlType", f"alterSourceV1 {name}")).upper(), new_columns=new_columns
        )
    raise UnsupportedFeatureError(
        f"command {wire}",
        f"kspark cannot import the ksqlDB command '{wire}' "
        "(known: createStreamV1, createTableV1, dropSourceV1, alterSourceV1, registerTypeV1, dropTypeV1).",
    )


def import_query(
    node: Any,
    types: Mapping[str, SqlType],
    *,
    release: str | None = None,
    sink_keys: tuple[str, ...] | None = None,
    configs: Mapping[str, str] | None = None,
) -> QueryPlan:
    """A ``queryPlan``: sources, sink, query id and the translated step tree.

    ``sink_keys`` are the key columns of the source the query creates (its DDL's schema):
    the names of the last projection's keys where the plan predates ``keyColumnNames``.
    ``configs`` are the plan's saved configs: those that change how expressions evaluate
    are recorded on the expressions (``engine.plan.query_configs``).
    """
    if not isinstance(node, Mapping):
        raise PlanError(f"A queryPlan must be an object, got {node!r}.")
    query_id = str(V.require(node, "queryId", "queryPlan"))
    importer = StepImporter(
        query_id,
        dict(types),
        reserved=frozenset(projection_aliases(node.get("physicalPlan"))),
        table_aggregate_two_updates=release is not None and _before(release, KIP_904_RELEASE),
        sink_keys=sink_keys,
    )
    root = importer.visit(V.require(node, "physicalPlan", f"queryPlan {query_id}"))
    return QueryPlan(
        query_id=query_id,
        sources=tuple(str(s) for s in node.get("sources") or ()),
        sink=str(V.require(node, "sink", f"queryPlan {query_id}")),
        root=with_query_configs(root.step, configs or {}),
    )


def _before(release: str, first: tuple[int, ...]) -> bool:
    """Whether ``release`` (``7.4.0``) is older than ``first``; an unreadable one is not."""
    parts = []
    for part in release.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return bool(parts) and tuple(parts) < first
