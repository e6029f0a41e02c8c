"""Record a planned case: run a positive QTT case on the real engine and keep what it did."""

from __future__ import annotations

import datetime
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.records import TopicInfo, TopicRecord
from qtt.model import QttCase
from qtt.plans import codec
from qtt.plans.built import BuiltSchemas, StepSchema
from qtt.plans.layout import (
    PHYSICAL_DIR,
    PLAN_FILE,
    PROVENANCE_FILE,
    SPEC_FILE,
    STREAMING_DIR,
    case_slug,
    now_millis,
    version_dir_name,
)
from qtt.plans.normalise import normalise_physical_plan
from qtt.schemas import use_case_registry
from qtt.verify import Verification, avro_decimals_as_numbers, check_post, verify_outputs

# ``spec.json`` ``schemas.steps``: per query, every step's built schema (versions from 0.2.0 on).
STEPS_KEY = "steps"


class RecordingError(Exception):
    """A case cannot be recorded (it does not pass, or it expects an error)."""


@dataclass(frozen=True, slots=True)
class PlannedCase:
    """Everything a planned case saves, in memory."""

    case: QttCase
    plans: tuple[dict[str, Any], ...]
    configs: Mapping[str, Any]
    statement_records: tuple[TopicRecord, ...]
    physical_plans: Mapping[str, str]
    internal_schemas: Mapping[str, Mapping[str, str]]
    sources: Mapping[str, Mapping[str, Any]]
    provenance: Mapping[str, Any] = field(default_factory=dict)
    streaming_plans: Mapping[str, str] = field(default_factory=dict)
    step_schemas: Mapping[str, Sequence[StepSchema]] = field(default_factory=dict)

    @property
    def slug(self) -> str:
        return case_slug(self.case.id)

    def plan_json(self) -> dict[str, Any]:
        """The content of ``plan.json``."""
        return {"configs": dict(self.configs), "plans": list(self.plans)}

    def spec_json(self) -> dict[str, Any]:
        """The content of ``spec.json``."""
        return {
            "caseId": self.case.id,
            "file": self.case.file.name,
            "testCase": codec.case_to_json(self.case),
            "statementRecords": [codec.record_to_json(r) for r in self.statement_records],
            "schemas": {
                "internal": {q: dict(s) for q, s in self.internal_schemas.items()},
                "sources": {n: dict(s) for n, s in self.sources.items()},
                STEPS_KEY: {q: list(s) for q, s in self.step_schemas.items()},
            },
        }


def create_topics(engine: Any, case: QttCase) -> None:
    """Create the case's declared topics, then every other topic it names (as the runner does)."""
    declared = {t.name for t in case.topics}
    for topic in case.topics:
        engine.create_topic(topic.to_topic_info())
    for name in case.topic_names():
        if name not in declared:
            engine.create_topic(TopicInfo(name=name))


def plan_case(case: QttCase) -> tuple[Any, list[dict[str, Any]], list[TopicRecord]]:
    """Plan (but do not run) a case on a new engine: the engine, the plans, INSERT VALUES records.

    Needs no Spark: planning is the upper layer only.
    """
    from engine.facade.engine import KsqlEngine
    from engine.plan import serde

    engine = KsqlEngine(dict(case.properties))
    use_case_registry(engine, case)
    create_topics(engine, case)
    plans: list[dict[str, Any]] = []
    written: list[TopicRecord] = []
    for statement in case.statements:
        before = _seqs(engine)
        for result in engine.execute_sql(statement):
            if result.plan is not None:
                plans.append(serde.to_json_value(result.plan))
        after = [(s.seq, s.record) for stored in _stored(engine) for s in stored]
        written += [r for seq, r in sorted(after, key=lambda p: p[0]) if seq not in before]
    return engine, plans, written


def _stored(engine: Any) -> list[Any]:
    """The in-memory topics' records of a bounded engine, per topic."""
    return list(engine.store.records.values())


def _seqs(engine: Any) -> set[tuple[int, ...]]:
    return {s.seq for stored in _stored(engine) for s in stored}


def record_case(case: QttCase) -> PlannedCase:
    """Run ``case`` and capture its plans, schemas and physical plans; it must pass."""
    if case.expected_exception is not None:
        raise RecordingError(f"Case '{case.id}' expects an error; only positive cases are planned.")
    engine, plans, written = plan_case(case)
    try:
        engine.produce(list(case.inputs))
        with BuiltSchemas().collect() as built:
            produced = engine.run() or {}
        produced = avro_decimals_as_numbers(produced, engine.sources())
        verification = verify_outputs(
            case.outputs, produced, headers_at=case.outputs_with_headers, strict=True
        )
        post = check_post(case.post, engine, case.topics) if not case.post.is_empty() else []
        if not verification.ok or post:
            reasons = verification.reasons + tuple(post)
            raise RecordingError(
                f"Case '{case.id}' does not pass, so it cannot be recorded: "
                + Verification(reasons, verification.comparisons).reason
            )
        return PlannedCase(
            case=case,
            plans=tuple(plans),
            configs=dict(engine.config),
            statement_records=tuple(written),
            physical_plans={
                q: normalise_physical_plan(r.physical_plan) for q, r in engine.query_reports.items()
            },
            internal_schemas={q: dict(r.internal_schemas) for q, r in engine.query_reports.items()},
            sources=source_schemas(engine),
            provenance=provenance(),
            streaming_plans=streaming_plans(engine),
            step_schemas=built.to_json(),
        )
    finally:
        engine.close()


# The Kafka address stands for whatever cluster a query runs on: it is not part of the plan.
BOOTSTRAP_PLACEHOLDER = "bootstrap.servers:9092"


def streaming_plans(engine: Any) -> dict[str, str]:
    """Per query, what its streaming checkpoint depends on, normalised.

    The query is built from its plan on the Kafka runtime (nothing runs, no broker is
    needed): its stateful operators in order, with their task count and state variables,
    and its analysed logical plan. A change here would keep a running query from
    restoring its state from its checkpoint.
    """
    from engine.hosting.application import build_streaming_query, task_count
    from engine.runtime.session import get_spark

    spark = get_spark(kafka=True)
    return {
        query.query_id: normalise_physical_plan(
            build_streaming_query(
                engine, query, spark, BOOTSTRAP_PLACEHOLDER, tasks=task_count(engine, query),
                starting_offsets="earliest",
            ).describe()
        )
        for query in engine.query_order()
    }


def source_schemas(engine: Any) -> dict[str, dict[str, Any]]:
    """Every stream and table of the engine: kind, schema, topic and formats."""
    out: dict[str, dict[str, Any]] = {}
    for info in engine.sources():
        out[info.name] = {
            "kind": info.kind,
            "schema": str(info.schema),
            "topic": info.topic,
            "keyFormat": _format(info.key_format),
            "valueFormat": _format(info.value_format),
        }
    return out


def _format(f: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"format": f.format}
    if f.properties:
        out["properties"] = dict(f.properties)
    if f.features:
        out["features"] = list(f.features)
    if f.window_type:
        out["windowType"] = f.window_type
    if f.window_size_ms is not None:
        out["windowSizeMs"] = f.window_size_ms
    return out


def provenance() -> dict[str, Any]:
    """Engine version, Spark version, git revision and time of a recording."""
    import pyspark

    import engine

    return {
        "engineVersion": engine.__version__,
        "sparkVersion": pyspark.__version__,
        "gitRevision": git_revision(),
        "recordedAt": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def git_revision(cwd: Path | None = None) -> str:
    """The checked-out commit, or ``unknown`` outside a git work tree."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 else "unknown"


def write_planned_case(root: Path, planned: PlannedCase, *, millis: int | None = None) -> Path:
    """Write a new version folder for ``planned``; never overwrites an existing one."""
    version = str(planned.provenance.get("engineVersion") or _engine_version())
    when = now_millis() if millis is None else millis
    case_dir = root / planned.slug
    target = case_dir / version_dir_name(version, when)
    while target.exists():  # two writes in the same millisecond
        when += 1
        target = case_dir / version_dir_name(version, when)
    target.mkdir(parents=True)
    codec.write_json(target / PLAN_FILE, planned.plan_json())
    codec.write_json(target / SPEC_FILE, planned.spec_json())
    codec.write_json(target / PROVENANCE_FILE, dict(planned.provenance))
    for folder, texts in ((PHYSICAL_DIR, planned.physical_plans), (STREAMING_DIR, planned.streaming_plans)):
        for query_id, text in sorted(texts.items()):
            path = target / folder / f"{query_id}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return target


def _engine_version() -> str:
    import engine

    return engine.__version__


def positive_cases(cases: Sequence[QttCase]) -> list[QttCase]:
    """The cases that get planned cases: those that expect no error."""
    return [c for c in cases if c.expected_exception is None]
