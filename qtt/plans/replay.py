"""Replay a saved version of a planned case: build from the saved plan (never the SQL), run it
on the saved inputs, and compare outputs, schemas and the physical plan with the saved copies.

Inputs and outputs pass through their topics' Kafka bytes and the saved sources through
today's format checks (``qtt.plans.wire``), so the serdes a query meets on Kafka are replayed
too."""

from __future__ import annotations

import hashlib
import re
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from engine.data.records import TopicRecord
from engine.errors import InternalError, KsqlError
from qtt.model import QttCase, QttFormatError
from qtt.plans import codec
from qtt.plans.built import BuiltSchemas, StepSchema, saved_source_columns, step_schema
from qtt.plans.diff import (
    ERROR,
    INTERNAL_SCHEMA,
    LOAD,
    OUTPUT,
    PHYSICAL_PLAN,
    SINK_SCHEMA,
    SOURCE_SCHEMA,
    STREAMING_PLAN,
    Change,
    built_schema_changes,
    mapping_changes,
    physical_plan_changes,
    render_changes,
    step_schema_changes,
)
from qtt.plans.layout import PHYSICAL_DIR, PLAN_FILE, SPEC_FILE, STREAMING_DIR, SavedVersion
from qtt.plans.normalise import normalise_physical_plan
from qtt.plans.record import STEPS_KEY, create_topics, source_schemas, streaming_plans
from qtt.plans.wire import inputs_through_bytes, outputs_through_bytes, source_format_refusals
from qtt.runner import interpreted_engine_factory
from qtt.schemas import close_engine, use_case_registry
from qtt.verify import avro_decimals_as_numbers, check_post, verify_outputs


@dataclass(frozen=True, slots=True)
class SavedCase:
    """A saved version read from disk: its plan and spec JSON."""

    version: SavedVersion
    plan: dict[str, Any]
    spec: dict[str, Any]

    @property
    def case_id(self) -> str:
        return str(self.spec.get("caseId", self.version.slug))


def load_saved(version: SavedVersion) -> SavedCase:
    """Read ``plan.json`` and ``spec.json`` of a saved version (raises OSError, ValueError or
    QttFormatError, naming the file)."""
    plan = codec.read_json(version.path / PLAN_FILE)
    spec = codec.read_json(version.path / SPEC_FILE)
    if not isinstance(plan, dict) or not isinstance(spec, dict):
        raise ValueError(f"{version.path}: plan.json and spec.json must hold JSON objects.")
    return SavedCase(version, plan, spec)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The outcome of replaying one saved version."""

    version: SavedVersion
    changes: tuple[Change, ...] = ()
    seconds: float = 0.0
    rendered_outputs: str = field(default="")
    covered_by: SavedVersion | None = None  # not run: this newer version's replay proves it
    # Not replayed: the QTT run of its case ran this plan on these inputs in the same
    # session and was compared with this version (``qtt.plans.case_runs``).
    by_case_run: bool = False

    @property
    def ok(self) -> bool:
        return not self.changes

    @property
    def label(self) -> str:
        return f"{self.version.slug}/{self.version.name}"

    def render(self) -> str:
        """What changed, keyed by query and step, then the record table for output changes."""
        text = f"Replay of {self.label} differs from the saved copy:\n" + render_changes(
            self.changes
        )
        if self.rendered_outputs:
            text += "\n" + self.rendered_outputs
        return text


def replay(version: SavedVersion) -> ReplayResult:
    """Replay one saved version on a new engine; never raises.

    A saved version that does not load or that the engine refuses is a ``load`` failure; any
    other exception (a builder's bug, a Spark or py4j error) is a ``replay error`` failure
    of this version with the exception's message, so the other versions still run.
    """
    (result,) = replay_alike([version])
    return result


def replay_alike(versions: Sequence[SavedVersion]) -> list[ReplayResult]:
    """Replay versions of one case that share a ``replay_key``: one engine builds and runs
    the plan on the inputs, and each version compares what it observed with its own saved
    copies (outputs, schemas, physical and streaming plans). Never raises.

    The build and the run are the same for all of them (same plans, configs, statements
    and inputs), so doing them once checks each version exactly as a replay of its own
    would. A failure to load, build or run is every version's failure; a failure while
    comparing is the failure of the version being compared.
    """
    start = time.perf_counter()
    seen: list[tuple[SavedCase, QttCase, Observation]] = []

    def run() -> tuple[list[Change], str]:
        first = load_saved(versions[0])
        streaming = any(v.path.joinpath(STREAMING_DIR).is_dir() for v in versions)
        seen.append((first, *_observe(first, streaming=streaming)))
        return [], ""

    failed, _ = _guarded(run)
    results = []
    for version in versions:
        changes, rendered = (
            (failed, "") if failed else _guarded(partial(_compare_saved, version, *seen[0]))
        )
        results.append(ReplayResult(version, tuple(changes), 0.0, rendered))
    seconds = (time.perf_counter() - start) / len(versions)
    return [replace(r, seconds=seconds) for r in results]


def _compare_saved(
    version: SavedVersion, first: SavedCase, case: QttCase, seen: Observation
) -> tuple[list[Change], str]:
    """``compare`` for ``version``: the first version of the run was read to run it, the
    others are read now."""
    saved = first if version == first.version else load_saved(version)
    return compare(saved, case, seen)


def _guarded(work: Callable[[], tuple[list[Change], str]]) -> tuple[list[Change], str]:
    """``work()``, with an exception as a ``load`` failure (a saved version that does not
    load or that the engine refuses) or a ``replay error`` (a builder's bug, a Spark or py4j
    error) with the exception's message."""
    try:
        return work()
    except (OSError, ValueError, KsqlError, KeyError, TypeError, QttFormatError) as exc:
        return [Change(LOAD, detail=error_text(exc))], ""
    except Exception as exc:  # noqa: BLE001 - one version's failure, never the whole run's
        return [Change(ERROR, detail=error_text(exc) + "\n(raised while replaying)")], ""


def replay_key(version: SavedVersion) -> str:
    """Versions of one case with the same key build and run the same way: the saved plan
    file as it is (plans, configs) and the saved statements' records and test case (topics,
    inputs, expected outputs). Raises OSError/ValueError when the files do not read."""
    spec = codec.read_json(version.path / SPEC_FILE)
    if not isinstance(spec, dict):
        raise ValueError(f"{version.path / SPEC_FILE}: must hold a JSON object.")
    run = {k: spec.get(k) for k in ("caseId", "testCase", "statementRecords")}
    digest = hashlib.sha256((version.path / PLAN_FILE).read_bytes())
    # repr keeps what JSON text would merge (Decimal('1') and Decimal('1.0'), 1.0 and '1.0').
    digest.update(repr(run).encode("utf-8"))
    return f"{version.path.parent.name}/{digest.hexdigest()}"


def error_text(exc: BaseException, *, max_lines: int = 3) -> str:
    """``Type: message``: its first lines without stack frames, plus the root cause (Java)."""
    lines = [
        line.strip()
        for line in str(exc).strip().splitlines()
        if line.strip() and not _STACK_FRAME.match(line.strip())
    ]
    head = lines[:max_lines]
    causes = [line for line in lines[max_lines:] if line.startswith("Caused by:")]
    if causes:
        head.append(causes[-1])
    if len(lines) > len(head):
        head.append(f"... ({len(lines) - len(head)} more lines)")
    return f"{type(exc).__name__}: " + ("\n".join(head) or "(no message)")


# ``at pkg.Class.method(File.java:12)`` and ``... 22 more``: Java stack trace lines.
_STACK_FRAME = re.compile(r"^(at \S+\(.*\)|\.\.\. \d+ more)$")


def _observe(saved: SavedCase, *, streaming: bool) -> tuple[QttCase, Observation]:
    """Build and run ``saved``'s plans on its inputs on a new engine; what it observed."""
    from engine.plan.serde import statement_plan_from_json

    spec = saved.spec
    case = codec.case_from_json(
        spec["testCase"], case_id=saved.case_id, file=saved.version.path / SPEC_FILE
    )
    case = with_post_topic_formats_as_recorded(case, spec["testCase"], saved.version.engine_version)
    plans = [statement_plan_from_json(p) for p in saved.plan.get("plans", [])]
    statement_records = codec.records_from_json(
        spec.get("statementRecords", []), "statementRecords"
    )
    # Its jobs run interpreted (a replay's few records cost less than the code Spark would
    # generate and compile for them). Its physical plans are still the ones with whole-stage
    # code generation that planned cases save, and its outputs are compared with outputs
    # recorded with generated code.
    engine = interpreted_engine_factory(dict(saved.plan.get("configs", {})))
    fresh_registry: str | None = None
    try:
        # The case's schemas in a fresh in-process registry, as when it was recorded: a sink
        # that writes a registered schema (streamSinkV4) reads it when it is built. Its own
        # registry: versions of one case replay at the same time.
        fresh_registry = use_case_registry(engine, case, run=uuid.uuid4().hex)
        create_topics(engine, case)
        for plan in plans:
            engine.execute_plan(plan)
        # Through the bytes of the topics' serdes, as a query on Kafka meets them.
        engine.produce(inputs_through_bytes(engine, statement_records))
        engine.produce(inputs_through_bytes(engine, case.inputs))
        with BuiltSchemas().collect() as built:
            produced = engine.run() or {}
        return case, observe(case, engine, built, produced, streaming=streaming)
    finally:
        close_engine(engine, fresh_registry)


# The first engine version whose planned cases record post topics' formats whole, as ksqlDB
# compares them (absent properties and features mean none); older versions recorded only the
# parts they list, and keep being checked that way: a saved version is never rewritten.
WHOLE_POST_TOPIC_FORMATS_SINCE = (0, 12, 0)


def with_post_topic_formats_as_recorded(case: QttCase, raw: Mapping[str, Any], engine_version: str) -> QttCase:
    """``case`` with the post topics' formats compared as the version's engine recorded them:
    before ``WHOLE_POST_TOPIC_FORMATS_SINCE``, only the format name and the properties and
    features the case lists (``raw``: the saved testCase)."""
    from qtt.model import FormatSpec, version_tuple

    if version_tuple(engine_version) >= WHOLE_POST_TOPIC_FORMATS_SINCE or not case.post.topics:
        return case
    listed = ((raw.get("post") or {}).get("topics") or {}).get("topics") or []

    def partial_spec(spec: FormatSpec | None, node: Any) -> FormatSpec | None:
        if spec is None:
            return None
        features = node.get("features") if isinstance(node, dict) else None
        return FormatSpec(format=spec.format, properties=spec.properties,
                          features=tuple(features) if isinstance(features, list) else None)

    topics = tuple(
        replace(t, key_format=partial_spec(t.key_format, node.get("keyFormat")),
                value_format=partial_spec(t.value_format, node.get("valueFormat")))
        for t, node in zip(case.post.topics, listed, strict=False)
        if isinstance(node, dict)
    )
    return replace(case, post=replace(case.post, topics=topics))


@dataclass(frozen=True, slots=True)
class Observation:
    """What an engine built and produced for a run of saved plans, taken before it closes:
    everything a replay compares with a saved version's copies."""

    produced: Mapping[str, Sequence[TopicRecord]]
    post: tuple[str, ...]  # the test case's post-conditions that failed
    writers: dict[str, tuple[str, str]]  # topic -> (query id, sink step ctx)
    internal: dict[str, dict[str, Any]]  # query id -> internal topic schemas
    sources: dict[str, dict[str, Any]]  # the metastore's streams and tables
    sinks: dict[str, tuple[str, str, StepSchema]]  # query id -> (sink, sink ctx, its schema)
    steps: dict[str, list[StepSchema]]  # query id -> every built step's schema
    physical: dict[str, str]  # query id -> normalised physical plan
    streaming: dict[str, str] | None  # query id -> normalised streaming plan, when asked for
    refusals: tuple[tuple[str, str], ...] = ()  # (source, message) today's format checks refuse


def observe(
    case: QttCase,
    engine: Any,
    built: BuiltSchemas,
    produced: Mapping[str, Sequence[TopicRecord]],
    *,
    streaming: bool,
) -> Observation:
    """What ``compare`` needs from an engine that ran ``case``'s plans (``streaming``: also
    build each query on the Kafka runtime for its streaming plan). ``produced`` is read as
    a consumer reads it back from the bytes its sinks' serdes write."""
    sinks = {}
    for query in engine.queries.values():
        sink = built.sinks.get(query.query_id)
        if sink is not None:
            sinks[query.query_id] = (query.sink, query.root.ctx, step_schema(query.root, sink, set()))
    reports = engine.query_reports
    return Observation(
        produced=avro_decimals_as_numbers(outputs_through_bytes(engine, produced), engine.sources()),
        post=() if case.post.is_empty() else tuple(check_post(case.post, engine, case.topics)),
        writers=topic_writers(engine),
        internal={qid: dict(r.internal_schemas) for qid, r in reports.items()},
        sources=source_schemas(engine),
        sinks=sinks,
        steps=built.to_json(),
        physical={qid: normalise_physical_plan(r.physical_plan) for qid, r in reports.items()},
        streaming=streaming_plans(engine) if streaming else None,
        refusals=tuple(source_format_refusals(engine)),
    )


def compare_run(
    saved: SavedCase,
    case: QttCase,
    engine: Any,
    built: BuiltSchemas,
    produced: Mapping[str, Sequence[TopicRecord]],
) -> tuple[list[Change], str]:
    """``compare`` for an engine that has run the saved plans on the saved inputs (``case``
    is the saved test case)."""
    streaming = _has_streaming(saved)
    return compare(saved, case, observe(case, engine, built, produced, streaming=streaming))


def _has_streaming(saved: SavedCase) -> bool:
    # Versions recorded before streaming plans were kept have none.
    return (saved.version.path / STREAMING_DIR).is_dir()


def compare(saved: SavedCase, case: QttCase, seen: Observation) -> tuple[list[Change], str]:
    """Everything a replay compares, what was ``seen`` against ``saved``'s copies: outputs
    and post-conditions, internal, source, sink and per-step schemas, physical and streaming
    plans. The changes and the record table."""
    spec = saved.spec
    changes: list[Change] = []
    rendered = ""
    verification = verify_outputs(
        case.outputs, seen.produced, headers_at=case.outputs_with_headers, strict=True
    )
    if not verification.ok:
        rendered = verification.render()
        for comparison in verification.comparisons:
            if comparison.reason is not None:
                index = comparison.first_difference
                query_id, sink_ctx = seen.writers.get(comparison.topic, (None, None))
                where = f"topic {comparison.topic}"
                changes.append(
                    Change(
                        OUTPUT,
                        query_id=query_id,
                        ctx=where if sink_ctx is None else f"{sink_ctx} ({where})",
                        field=None if index is None else f"record[{index}].{comparison.field}",
                        detail=comparison.reason,
                    )
                )
    changes += [Change(OUTPUT, field="post", detail=reason) for reason in seen.post]
    saved_internal = spec.get("schemas", {}).get("internal", {})
    for qid in sorted(set(saved_internal) | set(seen.internal)):
        now = seen.internal.get(qid, {})
        changes += mapping_changes(INTERNAL_SCHEMA, saved_internal.get(qid, {}), now, qid)
    saved_sources = spec.get("schemas", {}).get("sources", {})
    # The saved commands as the engine loads them now against the sources saved at
    # recording: catches a change in how a saved command's schema or formats are read.
    changes += mapping_changes(SOURCE_SCHEMA, saved_sources, seen.sources)
    changes += [
        Change(SOURCE_SCHEMA, ctx=name, detail=f"today's format checks refuse the saved source: {message}")
        for name, message in seen.refusals
    ]
    changes += sink_schema_changes(seen.sinks, saved_sources)
    saved_steps = spec.get("schemas", {}).get(STEPS_KEY)
    if saved_steps is not None:  # versions recorded before per-step schemas have none
        for qid in sorted(set(saved_steps) | set(seen.steps)):
            changes += built_schema_changes(
                qid, saved_steps.get(qid, []), seen.steps.get(qid, [])
            )
    changes += _plan_text_changes(saved.version.path / PHYSICAL_DIR, seen.physical, PHYSICAL_PLAN)
    if _has_streaming(saved):
        if seen.streaming is None:
            raise InternalError(f"{saved.version.path}: the run was observed without its streaming plans.")
        changes += _plan_text_changes(
            saved.version.path / STREAMING_DIR, seen.streaming, STREAMING_PLAN
        )
    return changes, rendered


def topic_writers(engine: Any) -> dict[str, tuple[str, str]]:
    """Topic -> (query id, sink step ctx) of the query writing it, so that a differing
    output record names the query and step that produced it."""
    out: dict[str, tuple[str, str]] = {}
    for query in engine.queries.values():
        topic = getattr(query.root, "topic", None)
        if isinstance(topic, str):
            out.setdefault(topic, (query.query_id, query.root.ctx))
    return out


def sink_schema_changes(
    sinks: Mapping[str, tuple[str, str, StepSchema]], saved_sources: Mapping[str, Any]
) -> list[Change]:
    """Each query's output as built now (``sinks``: query id -> sink, sink step ctx, schema)
    against the schema its sink was saved with.

    The saved schema of the sink stream or table was recorded from the metastore when the
    case was recorded, independently of today's builders: a builder that changes a type,
    a column or the windowing of what reaches the sink fails here, in every saved version.
    """
    changes: list[Change] = []
    for query_id, (sink_name, ctx, now) in sinks.items():
        saved = saved_sources.get(sink_name)
        if saved is None:
            continue
        detail = f"built now against the saved schema of sink {sink_name}"
        changes += [
            replace(c, detail=f"{c.detail}: {detail}" if c.detail else detail)
            for c in step_schema_changes(
                SINK_SCHEMA, query_id, ctx, saved_source_columns(saved), now,
                fields=("kind", "window"), internal=False,
            )
        ]
    return changes


def _plan_text_changes(folder: Path, now: dict[str, str], kind: str) -> list[Change]:
    """Saved ``<query id>.txt`` plans of ``folder`` against the plans built ``now``."""
    saved = (
        {p.stem: p.read_text(encoding="utf-8") for p in folder.glob("*.txt")}
        if folder.is_dir()
        else {}
    )
    changes: list[Change] = []
    for qid in sorted(set(saved) | set(now)):
        changes += physical_plan_changes(qid, saved.get(qid, ""), now.get(qid, ""), kind)
    return changes


REPLAY_WORKERS_ENV = "KSPARK_REPLAY_WORKERS"


def replay_all(versions: Sequence[Any], workers: int | None = None) -> Iterator[ReplayResult]:
    """Replay ``versions`` on the shared SparkSession, several at a time, results in order.

    Each replay has its own engine and in-memory topics; Spark runs jobs submitted from
    several threads concurrently, which hides the per-job latency of small replays.
    Versions of a case that share a ``replay_key`` are built and run once and each is
    compared with its own saved copies (``replay_alike``). ``workers`` defaults to
    $KSPARK_REPLAY_WORKERS or 3.
    """
    from concurrent.futures import ThreadPoolExecutor

    groups = alike_groups(versions)
    count = workers or default_workers()
    if count <= 1 or len(groups) <= 1:
        group_of = {id(v): group for group in groups for v in group}
        done: dict[int, ReplayResult] = {}
        for version in versions:  # each group when its first version comes, for progress
            if id(version) not in done:
                group = group_of[id(version)]
                done.update(zip(map(id, group), replay_alike(group), strict=True))
            yield done[id(version)]
        return
    from engine.runtime.session import get_spark

    get_spark(kafka=True)  # start the session once (streaming plans need the connector)
    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="replay") as pool:
        submitted = [(pool.submit(replay_alike, group), group) for group in groups]
        where = {id(v): (future, i) for future, group in submitted for i, v in enumerate(group)}
        for version in versions:
            future, index = where[id(version)]
            yield future.result()[index]


def default_workers() -> int:
    """Replays at a time: $KSPARK_REPLAY_WORKERS, or 3."""
    import os

    return int(os.environ.get(REPLAY_WORKERS_ENV, "3"))


def alike_groups(versions: Sequence[SavedVersion]) -> list[list[SavedVersion]]:
    """``versions`` grouped by ``replay_key``, in the order of each group's first version; a
    version whose key cannot be read is a group of its own (its replay reports why)."""
    groups: dict[str, list[SavedVersion]] = {}
    for i, version in enumerate(versions):
        try:
            key = replay_key(version)
        except Exception:  # noqa: BLE001 - grouping only: its replay says what is wrong
            key = f"unreadable {i}"
        groups.setdefault(key, []).append(version)
    return list(groups.values())
