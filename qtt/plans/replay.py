"""Replay a saved version of a planned case: build from the saved plan (never the SQL), run it
on the saved inputs, and compare outputs, schemas and the physical plan with the saved copies."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import KsqlError
from qtt.plans import codec
from qtt.plans.diff import (
    INTERNAL_SCHEMA,
    LOAD,
    OUTPUT,
    PHYSICAL_PLAN,
    SOURCE_SCHEMA,
    STREAMING_PLAN,
    Change,
    mapping_changes,
    physical_plan_changes,
    render_changes,
)
from qtt.plans.layout import PHYSICAL_DIR, PLAN_FILE, SPEC_FILE, STREAMING_DIR, SavedVersion
from qtt.plans.normalise import normalise_physical_plan
from qtt.plans.record import create_topics, source_schemas, streaming_plans
from qtt.verify import check_post, verify_outputs


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
    """Replay one saved version on a new engine; never raises for what the engine does."""
    start = time.perf_counter()
    try:
        saved = load_saved(version)
        changes, rendered = _replay(saved)
    except (OSError, ValueError, KsqlError, KeyError, TypeError) as exc:
        changes, rendered = [Change(LOAD, detail=f"{type(exc).__name__}: {exc}")], ""
    return ReplayResult(version, tuple(changes), time.perf_counter() - start, rendered)


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
        produced = engine.run() or {}
        changes: list[Change] = []
        rendered = ""
        verification = verify_outputs(
            case.outputs, produced, headers_at=case.outputs_with_headers, strict=True
        )
        post = check_post(case.post, engine) if not case.post.is_empty() else []
        if not verification.ok:
            rendered = verification.render()
            for comparison in verification.comparisons:
                if comparison.reason is not None:
                    index = comparison.first_difference
                    changes.append(
                        Change(
                            OUTPUT,
                            ctx=f"topic {comparison.topic}",
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
        changes += mapping_changes(
            SOURCE_SCHEMA, spec.get("schemas", {}).get("sources", {}), source_schemas(engine)
        )
        changes += _physical_changes(saved.version.path / PHYSICAL_DIR, reports)
        streaming = saved.version.path / STREAMING_DIR
        if streaming.is_dir():  # versions recorded before streaming plans were kept have none
            changes += _plan_text_changes(streaming, streaming_plans(engine), STREAMING_PLAN)
        return changes, rendered
    finally:
        engine.close()


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
