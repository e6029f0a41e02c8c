"""State migration: a query's older stateful step versions rebuilt with the current ones.

``kspark query migrate QUERY_ID --state-dir DIR --bootstrap-servers HOST:PORT`` takes a
stopped application's query whose plan holds a stateful step of an older version and
rewrites its saved plan with the version the engine plans today, carrying the query's
offsets and state across. Each pair (older version, current version) of a stateful step is
either a migration (``MIGRATIONS``) or a refusal naming the pair (``REFUSALS``).

How the state crosses. The migrations built so far are between versions whose Spark state
is the same: the same stateful operators in the same order, the same processor and the same
state variables, and values that both versions read and write alike (the newer version only
forwards headers, which no state holds). For those the exact way is to keep the query's
checkpoint as it is: the new plan starts from the offsets the old one committed, with the
batch ids the exactly-once sink's marks know (a batch in flight is redone once, its tasks
already written skipped) and with the state files themselves. The other ways Spark 4.1
offers, a new checkpoint seeded with ``transformWithStateInPandas``'s ``initialState`` and
started at the old offsets, or a new checkpoint written by hand, restart the batch ids (the
sink would take batch 0 for one it wrote) and redo the batch in flight under a new id: not
exact. Before the plan is rewritten, the old checkpoint's state is read with Spark's state
data source (``spark.read.format("statestore")``) and checked against the state variables the
new plan declares, operator by operator, so a migration that would not read the state back
is refused before anything changes.

A pair whose state differs (another processor, other state variables) is refused; its
migration would convert the state read from the checkpoint into the new variables and seed a
new checkpoint with it, which is not built.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ExecutionError
from engine.plan.plan import QueryPlan
from engine.plan.steps import STEP_TYPES, Step

# ------------------------------------------------------------------ the pairs

# The stateful steps' versions the planner plans today, per family (two where the native
# compiler's level decides: level 1 first).
CURRENT: dict[str, tuple[str, ...]] = {
    "streamAggregate": ("streamAggregateV6", "streamAggregateV7"),
    "tableAggregate": ("tableAggregateV4", "tableAggregateV5"),
    "streamWindowedAggregate": ("streamWindowedAggregateV2",),
    "tableSuppress": ("tableSuppressV2",),
    # The joins have one version each, as has the ksqlDB import's tableAggregateTwoUpdatesV1
    # (a family of its own): nothing to migrate.
    "streamStreamJoin": ("streamStreamJoinV1",),
    "streamTableJoin": ("streamTableJoinV1",),
    "tableTableJoin": ("tableTableJoinV1",),
    "foreignKeyTableTableJoin": ("foreignKeyTableTableJoinV1",),
}

_SAME_STATE = (
    "the same Spark state operator, processor and state variables, whose values both versions read and "
    "write alike: the checkpoint is kept as it is"
)

# (older, current) -> how its state crosses. Each one has a test on Kafka
# (tests/engine/runtime/test_state_migration_on_kafka.py).
MIGRATIONS: dict[tuple[str, str], str] = {
    ("streamAggregateV4", "streamAggregateV6"): _SAME_STATE,
    ("streamWindowedAggregateV1", "streamWindowedAggregateV2"): _SAME_STATE,
    ("tableAggregateV2", "tableAggregateV4"): _SAME_STATE,
    ("streamAggregateV5", "streamAggregateV7"): _SAME_STATE,
    ("tableAggregateV3", "tableAggregateV5"): _SAME_STATE,
}

_BY_KEY = "its running aggregates are grouped by key in Spark's state store, the current version's by task"
_HANDLER = ("it keeps each group's state in V1's per-record handlers (a keyed task's pickled state), the current "
            "version running aggregates in a MapState of their own")
_LEVEL = "the current version compiles its arguments with the native compiler's other level"

# (older, current) -> why it is refused. With ``MIGRATIONS`` this covers every older version
# of every family in ``CURRENT`` against each current version (a test checks it).
REFUSALS: dict[tuple[str, str], str] = {
    ("streamAggregateV1", "streamAggregateV6"): _HANDLER,
    ("streamAggregateV1", "streamAggregateV7"): _HANDLER,
    ("streamAggregateV2", "streamAggregateV6"): _HANDLER,
    ("streamAggregateV2", "streamAggregateV7"): _HANDLER,
    ("streamAggregateV3", "streamAggregateV6"): _BY_KEY,
    ("streamAggregateV3", "streamAggregateV7"): _BY_KEY,
    ("streamAggregateV4", "streamAggregateV7"): _LEVEL,
    ("streamAggregateV5", "streamAggregateV6"): _LEVEL,
    ("tableAggregateV1", "tableAggregateV4"): (
        "it runs without the native compiler, the current version natively where it can, and a fallback of the "
        "current version keeps other handler state"
    ),
    ("tableAggregateV1", "tableAggregateV5"): _LEVEL,
    ("tableAggregateV2", "tableAggregateV5"): _LEVEL,
    ("tableAggregateV3", "tableAggregateV4"): _LEVEL,
    ("tableSuppressV1", "tableSuppressV2"): (
        "the current version drops windows past their retention, which V1's buffer keeps: a migrated query "
        "would stop emitting windows V1 would still emit"
    ),
}


def family_of(step_type: str) -> str:
    """``streamAggregateV4`` -> ``streamAggregate``."""
    return re.sub(r"V\d+$", "", step_type)


def older_versions(family: str) -> list[str]:
    """The registered versions of ``family`` that the planner no longer plans."""
    current = CURRENT[family]
    return sorted(
        (t for t in STEP_TYPES if family_of(t) == family and t not in current),
        key=lambda t: int(t.rsplit("V", 1)[1]),
    )


def every_pair() -> list[tuple[str, str, str | None]]:
    """Each (older, current, refusal reason or None for a migration), family by family."""
    pairs = []
    for family, current in CURRENT.items():
        for old in older_versions(family):
            for new in current:
                pairs.append((old, new, REFUSALS.get((old, new))))
    return pairs


# The current version each migration goes to (the planner's choice for the same level).
TARGET: dict[str, str] = {old: new for old, new in MIGRATIONS}


def refusal(old: str, new: str) -> str:
    reason = REFUSALS.get((old, new), "no migration between these versions is known")
    return f"Cannot migrate {old} -> {new}: {reason}."


def _current_for(old: str) -> str:
    """The current version an older one would migrate to: its migration's, else the current
    version of the same place in the family (level 2 for the level-2 versions)."""
    if old in TARGET:
        return TARGET[old]
    current = CURRENT[family_of(old)]
    level_2 = old in ("streamAggregateV5", "tableAggregateV3")
    return current[1] if level_2 and len(current) > 1 else current[0]


# ------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class Migration:
    """A query's plan rewritten with the current versions of its stateful steps."""

    query: QueryPlan
    migrated: QueryPlan
    changes: tuple[tuple[str, str], ...]  # (older, current) per rewritten step


def migrate_plan(query: QueryPlan) -> Migration:
    """``query`` with each stateful step of an older version rebuilt as the current one;
    ``ExecutionError`` naming the pair where a step cannot be migrated."""
    changes: list[tuple[str, str]] = []
    cache: dict[int, Step] = {}

    def rewrite(step: Step) -> Step:
        if id(step) in cache:
            return cache[id(step)]
        inputs = {name: rewrite(child) for name, child in step.inputs().items()}
        family = family_of(step.TYPE)
        if family in CURRENT and step.TYPE not in CURRENT[family]:
            new = _current_for(step.TYPE)
            if (step.TYPE, new) not in MIGRATIONS:
                raise ExecutionError(refusal(step.TYPE, new))
            cls = STEP_TYPES[new]
            fields = {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}  # type: ignore[arg-type]
            if set(fields) != {f.name for f in dataclasses.fields(cls)}:  # type: ignore[arg-type]
                raise ExecutionError(f"Cannot migrate {step.TYPE} -> {new}: the two versions have other fields.")
            changes.append((step.TYPE, new))
            out: Step = cls(**{**fields, **inputs})
        else:
            out = dataclasses.replace(step, **inputs) if inputs else step  # type: ignore[arg-type]
        cache[id(step)] = out
        return out

    root = rewrite(query.root)
    return Migration(query, dataclasses.replace(query, root=root), tuple(changes))


# ------------------------------------------------------------------ the state


@dataclass(frozen=True)
class OperatorState:
    """One state variable of a stateful operator as the checkpoint holds it."""

    operator: int
    variable: str
    declared: str  # as the new plan declares it: ``groups MapState<g binary, b binary>``
    schema: str  # the rows' schema as Spark's state data source reads them
    rows: int

    def matches(self) -> bool:
        """Whether every field the new plan declares reads back with its type."""
        fields = re.findall(r"(\w+) (\w+)", self.declared.split("<", 1)[1])
        return all(f"{name}:{kind}" in self.schema for name, kind in fields)


_VARIABLE = re.compile(r"(\w+) ((?:Map|Value|List)State<[^>]*>)")


def declared_state(operator_lines: Sequence[str]) -> list[list[str]]:
    """Per stateful operator (``KafkaRuntime.stateful_operators`` lines), its state
    variables as declared: ``['groups MapState<g binary, b binary>']``."""
    return [[f"{m[1]} {m[2]}" for m in _VARIABLE.finditer(line.rsplit("; state: ", 1)[-1])]
            for line in operator_lines]


def read_state(spark: Any, checkpoint: str, operator_lines: Sequence[str]) -> list[OperatorState]:
    """Each declared state variable of each operator read from ``checkpoint`` with Spark's
    state data source (``statestore``, one variable of a ``transformWithState`` at a time)."""
    out = []
    for number, variables in enumerate(declared_state(operator_lines)):
        for declared in variables:
            name = declared.split(" ", 1)[0]
            frame = (spark.read.format("statestore").option("path", checkpoint)
                     .option("operatorId", number).option("stateVarName", name).load())
            out.append(OperatorState(number, name, declared, frame.schema.simpleString(), frame.count()))
    return out


# ------------------------------------------------------------------ the command


def migrate_query(app: Any, query_id: str, *, spark: Callable[[], Any]) -> str:
    """Migrate ``query_id`` of the loaded ``StreamingApplication`` ``app`` (not running): its
    saved plan rewritten in ``statements.json``; what was done, as one line. ``spark`` gives
    the SparkSession, asked for only once the plan can be migrated."""
    from engine.hosting.application import (
        CHECKPOINT_DIR,
        STATEMENTS_FILE,
        build_streaming_query,
        state_carry_problem,
    )
    from engine.plan import serde

    query = app.engine.queries.get(query_id.upper()) or app.engine.queries.get(query_id)
    if query is None:
        known = ", ".join(sorted(app.engine.queries)) or "none"
        raise ExecutionError(f"Query {query_id} does not exist in the state dir {app.state_dir} (queries: {known}).")
    migration = migrate_plan(query)
    if not migration.changes:
        return f"Query {query.query_id} runs on the current versions of its stateful steps: nothing to migrate."
    pairs = ", ".join(f"{old} -> {new}" for old, new in migration.changes)
    tasks = app.tasks_of(query)
    session = spark()
    problem = state_carry_problem(app.engine, query, migration.migrated, session, app.bootstrap_servers, tasks=tasks)
    if problem is not None:
        raise ExecutionError(f"Cannot migrate {pairs}: {problem}")
    checkpoint = app.state_dir / query.query_id / CHECKPOINT_DIR
    carried = ""
    if (checkpoint / "commits").is_dir() and any((checkpoint / "commits").iterdir()):
        built = build_streaming_query(app.engine, migration.migrated, session, app.bootstrap_servers, tasks=tasks)
        states = read_state(session, str(checkpoint), built.runtime.stateful_operators)
        for state in states:
            if not state.matches():
                raise ExecutionError(
                    f"Cannot migrate {pairs}: the checkpoint's state of operator {state.operator} reads as "
                    f"{state.schema}, the new plan declares {state.declared}."
                )
        carried = "; state kept: " + ", ".join(
            f"operator {s.operator} {s.variable} ({s.rows} entries)" for s in states
        )
    _rewrite_saved_plan(app, app.state_dir / STATEMENTS_FILE, migration.migrated, serde)
    app.engine.queries[query.query_id] = migration.migrated
    return f"Migrated {query.query_id}: {pairs}{carried}."


def _rewrite_saved_plan(app: Any, path: Path, migrated: QueryPlan, serde: Any) -> None:
    """The last saved statement that holds the query's plan, with the migrated plan."""
    for index in range(len(app.saved) - 1, -1, -1):
        saved = app.saved[index]
        if saved.plan is None:
            continue
        plan = serde.statement_plan_from_json(saved.plan)
        if plan.query is not None and plan.query.query_id == migrated.query_id:
            saved.plan = serde.to_json_value(dataclasses.replace(plan, query=migrated))
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps([s.to_json() for s in app.saved], indent=2, sort_keys=True) + "\n",
                           encoding="utf-8")
            tmp.replace(path)
            return
    raise ExecutionError(f"No saved statement in {path} holds the plan of query {migrated.query_id}.")


def cli_main(argv: Sequence[str]) -> int:
    """``kspark query migrate QUERY_ID --state-dir DIR --bootstrap-servers HOST:PORT``."""
    import argparse
    import sys

    from engine.errors import KsqlError

    parser = argparse.ArgumentParser(
        prog="kspark query migrate",
        description="Rebuild a stopped query's older stateful step versions with the current ones, keeping "
                    "its offsets and state (the application must not be running).",
    )
    parser.add_argument("query_id", metavar="QUERY_ID", help="the query, e.g. CTAS_PER_ITEM_0")
    parser.add_argument("--state-dir", required=True, metavar="DIR", help="the state dir of kspark run")
    parser.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT", help="the Kafka cluster")
    parser.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                        help="the properties the application runs with")
    parser.add_argument("--spark-master", default="local[2]", metavar="URL", help="Spark master (default local[2])")
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    args = parser.parse_args(list(argv))
    try:
        print(migrate_state_dir(args.bootstrap_servers, Path(args.state_dir), args.query_id,
                                properties=_pairs(args.property, "--property"),
                                spark_master=args.spark_master, spark_conf=_pairs(args.spark_conf, "--spark-conf")))
    except KsqlError as exc:
        print(f"kspark: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


def _pairs(items: Sequence[str], option: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise SystemExit(f"kspark: {option} takes NAME=VALUE, got '{item}'.")
        out[name.strip()] = value.strip()
    return out


def migrate_state_dir(
    bootstrap_servers: str, state_dir: Path, query_id: str, *, properties: dict[str, str] | None = None,
    spark_master: str = "local[2]", spark_conf: dict[str, str] | None = None,
) -> str:
    """Load the application of ``state_dir`` (nothing runs) and migrate ``query_id``."""
    from engine.hosting.application import STATEMENTS_FILE, StreamingApplication
    from engine.runtime.session import get_spark

    if not (state_dir / STATEMENTS_FILE).is_file():
        raise ExecutionError(f"{state_dir} is not the state dir of an application: it has no {STATEMENTS_FILE}.")
    app = StreamingApplication(bootstrap_servers, state_dir, dict(properties or {}), spark_master=spark_master,
                               spark_conf=dict(spark_conf or {}), read_only=True, collect_metrics=False)
    try:
        app.load()
        return migrate_query(
            app, query_id, spark=lambda: get_spark(spark_master, dict(spark_conf or {}), kafka=True, long_running=True)
        )
    finally:
        app.stop()
