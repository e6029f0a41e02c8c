"""Replay a saved version of a planned case: build from the saved plan (never the SQL), run it
on the saved inputs, and compare outputs, schemas and the physical plan with the saved copies."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.errors import KsqlError
from engine.records import TopicRecord
from qtt.model import QttCase
from qtt.plans import codec
from qtt.plans.built import BuiltSchemas, saved_source_columns, step_schema
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
    """Read ``plan.json`` and ``spec.json`` of a saved version (raises OSError/ValueError)."""
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
    start = time.perf_counter()
    try:
        saved = load_saved(version)
        changes, rendered = _replay(saved)
    except (OSError, ValueError, KsqlError, KeyError, TypeError) as exc:
        changes, rendered = [Change(LOAD, detail=error_text(exc))], ""
    except Exception as exc:  # noqa: BLE001 - one version's failure, never the whole run's
        changes, rendered = [Change(ERROR, detail=error_text(exc) + "\n(raised while replaying)")], ""
    return ReplayResult(version, tuple(changes), time.perf_counter() - start, rendered)


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


def _replay(saved: SavedCase) -> tuple[list[Change], str]:
    from engine.engine import KsqlEngine
    from engine.plan.serde import statement_plan_from_json

    spec = saved.spec
    case = codec.case_from_json(
        spec["testCase"], case_id=saved.case_id, file=saved.version.path / SPEC_FILE
    )
    plans = [statement_plan_from_json(p) for p in saved.plan.get("plans", [])]
    statement_records = codec.records_from_json(
        spec.get("statementRecords", []), "statementRecords"
    )
    engine = KsqlEngine(dict(saved.plan.get("configs", {})))
    try:
        create_topics(engine, case)
        for plan in plans:
            engine.execute_plan(plan)
        engine.produce(list(statement_records))
        engine.produce(list(case.inputs))
        with BuiltSchemas().collect() as built:
            produced = engine.run() or {}
        return compare_run(saved, case, engine, built, produced)
    finally:
        engine.close()


def compare_run(
    saved: SavedCase,
    case: QttCase,
    engine: Any,
    built: BuiltSchemas,
    produced: Mapping[str, Sequence[TopicRecord]],
) -> tuple[list[Change], str]:
    """Everything a replay compares, for an engine that has run the saved plans on the saved
    inputs (``case`` is the saved test case): outputs and post-conditions, internal, source,
    sink and per-step schemas, physical and streaming plans. The changes and the record table.
    """
    spec = saved.spec
    produced = avro_decimals_as_numbers(produced, engine.sources())
    changes: list[Change] = []
    rendered = ""
    verification = verify_outputs(
        case.outputs, produced, headers_at=case.outputs_with_headers, strict=True
    )
    post = check_post(case.post, engine) if not case.post.is_empty() else []
    if not verification.ok:
        rendered = verification.render()
        writers = topic_writers(engine)
        for comparison in verification.comparisons:
            if comparison.reason is not None:
                index = comparison.first_difference
                query_id, sink_ctx = writers.get(comparison.topic, (None, None))
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
    changes += [Change(OUTPUT, field="post", detail=reason) for reason in post]
    saved_internal = spec.get("schemas", {}).get("internal", {})
    reports = engine.query_reports
    for qid in sorted(set(saved_internal) | set(reports)):
        now = dict(reports[qid].internal_schemas) if qid in reports else {}
        changes += mapping_changes(INTERNAL_SCHEMA, saved_internal.get(qid, {}), now, qid)
    saved_sources = spec.get("schemas", {}).get("sources", {})
    # The saved commands as the engine loads them now against the sources saved at
    # recording: catches a change in how a saved command's schema or formats are read.
    changes += mapping_changes(SOURCE_SCHEMA, saved_sources, source_schemas(engine))
    changes += sink_schema_changes(engine, built, saved_sources)
    saved_steps = spec.get("schemas", {}).get(STEPS_KEY)
    if saved_steps is not None:  # versions recorded before per-step schemas have none
        now_steps = built.to_json()
        for qid in sorted(set(saved_steps) | set(now_steps)):
            changes += built_schema_changes(
                qid, saved_steps.get(qid, []), now_steps.get(qid, [])
            )
    changes += _physical_changes(saved.version.path / PHYSICAL_DIR, reports)
    streaming = saved.version.path / STREAMING_DIR
    if streaming.is_dir():  # versions recorded before streaming plans were kept have none
        changes += _plan_text_changes(streaming, streaming_plans(engine), STREAMING_PLAN)
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
    engine: Any, built: BuiltSchemas, saved_sources: Mapping[str, Any]
) -> list[Change]:
    """Each query's output as built now against the schema its sink was saved with.

    The saved schema of the sink stream or table was recorded from the metastore when the
    case was recorded, independently of today's builders: a builder that changes a type,
    a column or the windowing of what reaches the sink fails here, in every saved version.
    """
    changes: list[Change] = []
    for query in engine.queries.values():
        saved = saved_sources.get(query.sink)
        sink = built.sinks.get(query.query_id)
        if saved is None or sink is None:
            continue
        now = step_schema(query.root, sink, set())
        detail = f"built now against the saved schema of sink {query.sink}"
        changes += [
            replace(c, detail=f"{c.detail}: {detail}" if c.detail else detail)
            for c in step_schema_changes(
                SINK_SCHEMA, query.query_id, query.root.ctx, saved_source_columns(saved), now,
                fields=("kind", "window"), internal=False,
            )
        ]
    return changes


def _physical_changes(folder: Path, reports: dict[str, Any]) -> list[Change]:
    now = {qid: normalise_physical_plan(r.physical_plan) for qid, r in reports.items()}
    return _plan_text_changes(folder, now, PHYSICAL_PLAN)


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
    ``workers`` defaults to $KSPARK_REPLAY_WORKERS or 3.
    """
    import os
    from concurrent.futures import ThreadPoolExecutor

    count = workers or int(os.environ.get(REPLAY_WORKERS_ENV, "3"))
    if count <= 1 or len(versions) <= 1:
        yield from (replay(v) for v in versions)
        return
    from engine.runtime.session import get_spark

    get_spark(kafka=True)  # start the session once (streaming plans need the connector)
    with ThreadPoolExecutor(max_workers=count, thread_name_prefix="replay") as pool:
        yield from pool.map(replay, versions)
