"""Replay ksqlDB's own saved execution plans (``historical_plans/<case>/<version>/``).

For every version folder holding ``plan.json`` and ``spec.json``: import the plan with
``engine.ksqldb_import`` (never re-planned from the SQL), build it on the bounded runtime,
feed ``testCase.inputs``, compare the outputs in order with ``testCase.outputs`` (the QTT
verifier), check the ``post`` conditions, and compare the step and internal-topic schemas
of ``spec.json`` with the ones kspark builds. Each version is ``passed``, ``failed`` (with a
readable diff) or ``unsupported`` (naming the step, function, format or config); any
exception is that version's failure, never the run's.

Schema differences are reported per version and counted, but do not decide the verdict:
kspark's internal stores need not hold ksqlDB's exact columns to produce ksqlDB's records.

Identical work is done once: versions of one case whose imported plans, inputs, topics and
the saved configs the run reads are equal share one run (``run_key``, ``ConfigReads``), and
each version is verified against that run with its own expected outputs, post-conditions
and schemas.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.data.records import TopicInfo
from engine.errors import KsqlError, UnsupportedFeatureError
from engine.facade.api import FormatDescription
from engine.plan.steps import Formats
from qtt.loader import parse_qtt_json
from qtt.model import PostConditions, QttCase, version_tuple
from qtt.schemas import close_engine, use_case_registry

PLAN_FILE = "plan.json"
SPEC_FILE = "spec.json"
PASSED, FAILED, UNSUPPORTED = "passed", "failed", "unsupported"
STATUSES = (PASSED, FAILED, UNSUPPORTED)
INTERNAL_TOPIC_PREFIX = "_confluent-ksql-"


@dataclass(frozen=True, slots=True)
class SavedPlan:
    """One saved version: ``<root>/<case>/<version>_<epoch ms>/``."""

    path: Path

    @property
    def case(self) -> str:
        return self.path.parent.name

    @property
    def version(self) -> str:
        return self.path.name

    @property
    def label(self) -> str:
        return f"{self.case}/{self.version}"


@dataclass(frozen=True, slots=True)
class VersionResult:
    """The verdict on one saved version."""

    case: str
    version: str
    release: str
    status: str
    reason: str = ""
    category: str = ""
    details: str = ""
    steps: tuple[str, ...] = ()
    schemas_compared: int = 0
    schema_differences: tuple[str, ...] = ()
    seconds: float = 0.0
    shared_run: str = ""
    """The version whose run this version was verified against, when not its own."""

    @property
    def label(self) -> str:
        return f"{self.case}/{self.version}"


# --------------------------------------------------------------------------- discovery


def discover(root: Path, pattern: str | None = None) -> list[SavedPlan]:
    """Version folders under ``root`` with both files, sorted; ``pattern`` filters labels."""
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder of saved ksqlDB plans.")
    found = [
        SavedPlan(plan.parent)
        for plan in sorted(root.glob(f"*/*/{PLAN_FILE}"))
        if (plan.parent / SPEC_FILE).is_file()
    ]
    if pattern:
        found = [p for p in found if pattern in p.label]
    return found


def sample(plans: Sequence[SavedPlan], size: int) -> list[SavedPlan]:
    """About ``size`` versions stratified by ksqlDB release, deterministic (same corpus, same size, same ones).

    Each release (the folder's prefix, ``<release>_<epoch ms>``) gets a share of ``size``
    proportional to its number of versions, at least one (largest remainders first, ties in
    release order); within a release the versions are taken evenly spread over its list sorted
    by ``<case>/<version>``, so every release and, as far as the share goes, every QTT file
    (cases sort by file stem) is represented. The result keeps the corpus order.
    """
    if size <= 0 or size >= len(plans):
        return list(plans)
    groups: dict[str, list[SavedPlan]] = {}
    for saved in plans:
        groups.setdefault(release_of(saved.version), []).append(saved)
    releases = sorted(groups, key=_release_order)
    exact = {r: size * len(groups[r]) / len(plans) for r in releases}
    shares = {r: max(1, int(exact[r])) for r in releases}
    leftovers = sorted(releases, key=lambda r: (-(exact[r] - int(exact[r])), _release_order(r)))
    for release in leftovers[: max(0, size - sum(shares.values()))]:
        shares[release] += 1
    chosen: set[Path] = set()
    for release in releases:
        members, share = groups[release], min(shares[release], len(groups[release]))
        step = len(members) / share
        chosen.update(members[int(i * step)].path for i in range(share))
    return [saved for saved in plans if saved.path in chosen]


def release_of(version_folder: str, spec: Mapping[str, Any] | None = None) -> str:
    """The ksqlDB release that saved a version: ``spec.version`` or the folder's prefix."""
    if spec is not None and isinstance(spec.get("version"), str):
        return str(spec["version"])
    return version_folder.split("_", 1)[0]


# --------------------------------------------------------------------------- one version


def step_types(plan: Mapping[str, Any]) -> tuple[str, ...]:
    """The ksqlDB step types (and versions) a plan uses, sorted."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            if isinstance(node.get("@type"), str) and "properties" in node:
                found.add(node["@type"])
            for key in ("source", "leftSource", "rightSource"):
                walk(node.get(key))

    for entry in plan.get("plan") or ():
        if isinstance(entry, Mapping) and isinstance(entry.get("queryPlan"), Mapping):
            walk(entry["queryPlan"].get("physicalPlan"))
    return tuple(sorted(found))


def replay_version(saved: SavedPlan) -> VersionResult:
    """Import, run and verify one saved version; never raises."""
    return replay_case([saved])[0]


@dataclass(slots=True)
class _Loaded:
    """A version read and imported, ready to run or to be verified against an equal run."""

    saved: SavedPlan
    spec: Mapping[str, Any]
    release: str
    steps: tuple[str, ...]
    imported: Any
    case: QttCase
    key: str


@dataclass(slots=True)
class _Run:
    """What one run of an imported plan left: the engine (open until its case is done), the
    produced records, the schemas built, the configs it read, and whose run it was."""

    engine: Any
    produced: Mapping[str, Sequence[Any]]
    built: Mapping[str, str]
    configs: Mapping[str, str]
    reads: ConfigReads
    label: str
    registry: str | None  # the run's own registry, forgotten when its engine closes
    # The key and value formats of each step that reads or writes a topic, by schema name.
    formats: Mapping[str, tuple[FormatDescription, FormatDescription]] = field(default_factory=dict)


def replay_case(plans: Sequence[SavedPlan]) -> list[VersionResult]:
    """Replay versions (of one case, in order); never raises.

    A version whose ``run_key`` equals an earlier one's and whose configs agree with that
    run's on every config it read is verified against that run instead of running again:
    its own expected outputs, post-conditions and schemas decide its verdict. A run that
    raised is never shared (its error may name version-specific text).
    """
    results: list[VersionResult] = []
    runs: dict[str, list[_Run]] = {}
    try:
        for saved in plans:
            start = time.perf_counter()
            release, steps, shared = release_of(saved.version), tuple[str, ...](), ""
            try:
                loaded = _load(saved)
                release, steps = loaded.release, loaded.steps
                configs = _configs(loaded)
                ran = next((r for r in runs.get(loaded.key, ()) if r.reads.agree(r.configs, configs)), None)
                if ran is None:
                    ran = _run(loaded, configs)
                    runs.setdefault(loaded.key, []).append(ran)
                else:
                    shared = ran.label
                outcome = _verdict(loaded, ran)
            except Exception as exc:  # noqa: BLE001 - one version's failure, never the run's
                outcome = _failure(exc)
            outcome["reason"] = " ".join(str(outcome.get("reason", "")).split())[:400]
            results.append(
                VersionResult(
                    case=saved.case,
                    version=saved.version,
                    release=release,
                    steps=steps,
                    seconds=round(time.perf_counter() - start, 3),
                    shared_run=shared,
                    **outcome,
                )
            )
    finally:
        for group in runs.values():
            for ran in group:
                close_engine(ran.engine, ran.registry)
    return results


def _failure(exc: Exception) -> dict[str, Any]:
    """The verdict on a version whose loading, import, build or run raised."""
    if isinstance(exc, UnsupportedFeatureError):
        return dict(status=UNSUPPORTED, reason=str(exc), category=exc.feature)
    if isinstance(exc, OSError | ValueError):
        return dict(status=FAILED, reason=f"Cannot load: {exc}", category="cannot load")
    if isinstance(exc, KsqlError):
        return dict(status=FAILED, reason=f"{type(exc).__name__}: {exc}", category=f"error: {type(exc).__name__}")
    from qtt.plans.replay import error_text

    return dict(
        status=FAILED,
        reason=error_text(exc, max_lines=2) + _python_cause(str(exc)),
        category=f"error: {type(exc).__name__}",
    )


def _python_cause(text: str) -> str:
    """The last ``SomeError: message`` line of a Python worker's traceback, if any."""
    found = re.findall(r"^(\w+(?:Error|Exception): .*)$", text, re.MULTILINE)
    return f" Cause: {found[-1].strip()}" if found else ""


def case_of(spec: Mapping[str, Any], path: Path) -> QttCase:
    """The QTT case a spec's ``testCase`` describes (``numPartitions`` read as ``partitions``)."""
    from qtt.loader import expand_case

    raw = dict(spec.get("testCase") or {})
    raw["statements"] = raw.get("statements") or ["-- statements are not replayed"]
    raw["topics"] = [
        {**t, "partitions": t.get("partitions", t.get("numPartitions"))}
        if isinstance(t, Mapping) and "partitions" not in t and t.get("numPartitions")
        else t
        for t in raw.get("topics") or ()
    ]
    # ksqlDB's test driver pipes an input record without a timestamp at time 0.
    raw["inputs"] = [
        {**r, "timestamp": 0} if isinstance(r, Mapping) and r.get("timestamp") is None else r
        for r in raw.get("inputs") or ()
    ]
    # ksqlDB 5.5/6.0 specs also list the records of Kafka Streams' internal topics
    # (repartition, changelog); kspark keeps that state in Spark, so only the records of the
    # query's own topics are compared, as for the post-conditions.
    raw["outputs"] = [
        r for r in raw.get("outputs") or ()
        if not (isinstance(r, Mapping) and str(r.get("topic", "")).startswith(INTERNAL_TOPIC_PREFIX))
    ]
    raw.pop("expectedException", None)
    return expand_case(raw, path / SPEC_FILE, 0)[0]


def _load(saved: SavedPlan) -> _Loaded:
    """Read and import a version, and the key of the run it needs."""
    from engine.ksqldb_import import import_plan

    plan = json.loads((saved.path / PLAN_FILE).read_text(encoding="utf-8"))
    # Numbers with a fraction are read as Decimal, as ksqlDB's test driver reads them: a
    # DECIMAL(33, 16) input keeps all of its digits.
    spec = parse_qtt_json((saved.path / SPEC_FILE).read_text(encoding="utf-8"))
    release = release_of(saved.version, spec)
    steps = step_types(plan)
    imported = import_plan(plan, release=release)
    case = case_of(spec, saved.path)
    return _Loaded(saved, spec, release, steps, imported, case, run_key(imported.statements, spec, case))


def run_key(statements: Sequence[Any], spec: Mapping[str, Any], case: QttCase | None = None) -> str:
    """What a run computes from, apart from its configs (``ConfigReads`` checks those).

    Every field of every imported statement plan (commands, query ids, every step and its
    expressions, formats, windows), the case's topics (schemas, partitions), inputs and
    properties, the topics its outputs name (the run creates them), and the schemas the
    run's registry holds for ``case`` (``qtt.schemas.runner_topics``, in registration
    order: a sink naming a schema id reads one). A statement's text counts only through its
    ``PARTITIONS`` (the sink topic's partitions): a restored plan is built from its steps,
    never from its text, which ksqlDB re-formatted between releases.
    """
    from engine.plan.serde import to_json_value
    from qtt.schemas import runner_topics

    test = spec.get("testCase") or {}
    plans = []
    for statement in statements:
        data = to_json_value(statement)
        data["statementText"] = _declared_partitions(statement.statement_text)
        plans.append(data)
    key = {
        "plans": plans,
        "topics": test.get("topics"),
        "inputs": test.get("inputs"),
        "properties": test.get("properties"),
        "outputTopics": sorted({str(r.get("topic")) for r in test.get("outputs") or () if isinstance(r, Mapping)}),
        "registered": [] if case is None else [repr(t) for t in runner_topics(case)],
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()


class ConfigReads(dict[str, Any]):
    """An engine's config that notes which keys were read (all of them once it is iterated or copied).

    A run depends on the saved configs only through what it read: another version with the
    same ``run_key`` whose configs agree on those keys (present with the same value, or
    absent in both) would compute the same thing.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        super().__init__(data)
        self.read: set[str] = set()
        self.read_all = False
        self.sized = False

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add(str(key))
        return super().__contains__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)

    def _all(self) -> None:
        self.read_all = True

    def __iter__(self) -> Iterator[str]:
        self._all()
        return super().__iter__()

    def keys(self) -> Any:
        self._all()
        return super().keys()

    def items(self) -> Any:
        self._all()
        return super().items()

    def values(self) -> Any:
        self._all()
        return super().values()

    def copy(self) -> dict[str, Any]:
        self._all()
        return dict(super().items())

    def __reduce_ex__(self, protocol: Any) -> Any:
        self._all()
        return (dict, (dict(super().items()),))

    def __eq__(self, other: object) -> bool:
        self._all()
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        self._all()
        return super().__ne__(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        self._all()
        return super().__repr__()

    def __or__(self, other: Any) -> Any:
        self._all()
        return dict(super().items()) | other

    def __ror__(self, other: Any) -> Any:
        self._all()
        return other | dict(super().items())

    def __reversed__(self) -> Iterator[str]:
        self._all()
        return super().__reversed__()

    def setdefault(self, key: str, default: Any = None) -> Any:
        self._all()
        return super().setdefault(key, default)

    def pop(self, key: str, *default: Any) -> Any:
        self._all()
        return super().pop(key, *default)

    def popitem(self) -> tuple[str, Any]:
        self._all()
        return super().popitem()

    def __len__(self) -> int:
        # The engine takes no config's length, only whether it is empty (``if not config``).
        self.sized = True
        return super().__len__()

    def agree(self, ran_with: Mapping[str, Any], other: Mapping[str, Any]) -> bool:
        """Whether configs ``other`` read like ``ran_with`` on everything this run read."""
        if self.read_all:
            return dict(ran_with) == dict(other)
        if self.sized and bool(ran_with) != bool(other):
            return False
        missing = object()
        return all(ran_with.get(k, missing) == other.get(k, missing) for k in self.read)


def _run(loaded: _Loaded, configs: dict[str, Any]) -> _Run:
    """Build and run an imported plan on its case's topics and inputs; the engine stays open."""
    from engine.builders.walker import observing_builds
    from qtt.runner import interpreted_engine_factory
    from qtt.verify import avro_decimals_as_numbers

    imported, case = loaded.imported, loaded.case
    # No physical plan is compared here, so the small jobs run interpreted.
    engine = interpreted_engine_factory(configs)
    reads = ConfigReads(engine.config)
    engine.config = reads
    built: dict[str, str] = {}
    formats: dict[str, tuple[FormatDescription, FormatDescription]] = {}
    # The case's schemas in a registry of the run's own, registered in ksqlDB's runner's order
    # so that their ids match (a sink naming VALUE_SCHEMA_ID reads its schema). It replaces the
    # registry the saved configs name: ksqlDB's test driver's, which no run here reaches.
    registry = use_case_registry(engine, case, run=uuid.uuid4().hex)

    def observe(step: Any, ctx: Any, result: Any) -> None:
        name = f"{ctx.query_id}.{step.ctx.replace('/', '.')}"
        built[name] = _schema_text(result.schema)
        described = step_formats(step)
        if described is not None:
            formats[name] = described
        for name, described in result.internal_schemas:
            built.setdefault(f"{ctx.query_id}.internal.{name}", described)

    try:
        inputs = {r.topic for r in case.inputs}
        sinks = {t: n for t, n in _sink_topics(imported.statements).items() if t not in inputs}
        for topic in case.topics:
            info = topic.to_topic_info()
            engine.create_topic(replace(info, partitions=sinks[info.name]) if info.name in sinks else info)
        for name in [*case.topic_names(), *sinks]:
            if name not in engine.topics():
                engine.create_topic(TopicInfo(name=name, partitions=sinks.get(name, 1)))
        for statement in imported.statements:
            engine.restore(statement)
        engine.produce(list(case.inputs))
        with observing_builds(observe):
            # ksqlDB's runner read AVRO decimals with the Avro deserializer: numbers with a scale.
            produced = avro_decimals_as_numbers(engine.run() or {}, engine.sources())
    except BaseException:
        close_engine(engine, registry)
        raise
    return _Run(engine, produced, built, configs, reads, loaded.saved.label, registry, formats)


def _configs(loaded: _Loaded) -> dict[str, Any]:
    """The configs a version runs with: the saved ones, and the case's properties that they
    do not set (ksqlDB's runner applied a case's properties, such as
    ``ksql.functions.collect_list.limit``, which a plan's saved configs may lack)."""
    return {**{str(k): v for k, v in loaded.case.properties.items()}, **loaded.imported.configs}


def _verdict(loaded: _Loaded, ran: _Run) -> dict[str, Any]:
    """A version's verdict on a run: its own expected outputs, post-conditions and schemas."""
    from qtt.verify import check_post, verify_outputs

    case = loaded.case
    verification = verify_outputs(case.outputs, ran.produced, headers_at=case.outputs_with_headers, strict=False)
    view = _TopicFormats(ran.engine)
    post = check_post(_external_post(case.post), view, case.topics) if not case.post.is_empty() else []
    compared, differences = compare_schemas(loaded.spec.get("schemas") or {}, ran.built, ran.formats)
    common = dict(schemas_compared=compared, schema_differences=tuple(differences))
    if not verification.ok:
        return dict(
            status=FAILED,
            reason=verification.reason,
            category="output records differ",
            details=verification.render(width=160) + "".join(f"\npost: {r}" for r in post),
            **common,
        )
    if post:
        return dict(
            status=FAILED, reason=post[0], category="post-condition", details="\n".join(post), **common
        )
    return dict(status=PASSED, **common)


SINK_PARTITIONS = 4
"""Partitions of a query's sink topic in ksqlDB's test runner when the query's statement names
none: every post-condition of the corpus on such a topic says 4, whatever its sources had, and
so do those on the sink of an INSERT INTO, even where the statement that created the stream
declared ``PARTITIONS=1``."""


def _sink_topics(statements: Sequence[Any]) -> dict[str, int]:
    """Topic -> partitions of each query's sink topic, as ksqlDB's test runner created it.

    Topic creation is no part of a saved plan: a ``PARTITIONS`` in the query's statement
    counts, else ``SINK_PARTITIONS``.
    """
    found: dict[str, int] = {}
    for statement in statements:
        topic = getattr(statement.query.root, "topic", None) if statement.query is not None else None
        if isinstance(topic, str):
            found.setdefault(topic, _declared_partitions(statement.statement_text) or SINK_PARTITIONS)
    return found


def _declared_partitions(text: str) -> int | None:
    """The ``PARTITIONS`` of a statement's WITH clause, if it parses and names a number."""
    if "PARTITIONS" not in text.upper():
        return None
    from engine.parser import parse

    try:
        parsed = parse(text)
    except KsqlError:
        return None
    for p in parsed:
        value = str((getattr(p.statement, "properties", None) or {}).get("PARTITIONS", ""))
        if value.isdigit():
            return int(value)
    return None


def _external_post(post: PostConditions) -> PostConditions:
    """Post-conditions without ksqlDB's internal topics (kspark keeps its state in Spark)."""
    topics = tuple(t for t in post.topics if not t.name.startswith(INTERNAL_TOPIC_PREFIX))
    return PostConditions(sources=post.sources, topics=topics, blacklist=post.blacklist)


class _TopicFormats:
    """The engine as post-conditions see it, a topic's formats being those of its sources.

    ksqlDB's saved post-conditions name the formats of every topic as its sources read it;
    a case's declared topic format is that of the schema it registers (JSON for a JSON_SR
    source, AVRO on a topic a JSON source reads), so it counts only for a topic no source is on.

    It shows no schema registry: a saved post topic's keySchema/valueSchema is not compared.
    ksqlDB's saved post-conditions list the schema of every topic its registry held, sources
    included, as ksqlDB's own JSON_SR translator wrote them (no "$schema"), and kspark's
    registry holds kspark's (with "$schema") and none for a join's internal topics.
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def source(self, name: str) -> Any:
        return self.engine.source(name)

    def topics(self) -> dict[str, TopicInfo]:
        formats = {s.topic: s for s in self.engine.sources()}
        out = {}
        for name, info in self.engine.topics().items():
            source = formats.get(name)
            if source is not None:
                info = replace(
                    info,
                    key_format=source.key_format.format or info.key_format,
                    value_format=source.value_format.format or info.value_format,
                )
            out[name] = info
        return out


_HIDDEN = ("__paired",)


def _schema_text(schema: Any) -> str:
    return ", ".join(str(c) for c in schema.columns if c.name not in _HIDDEN)


def step_formats(step: Any) -> tuple[FormatDescription, FormatDescription] | None:
    """The key and value formats a step reads or writes its topic with (a source's or a
    sink's), its window with them for a windowed source; None for a step without a topic."""
    f = getattr(step, "formats", None)
    if not isinstance(f, Formats) or not isinstance(getattr(step, "topic", None), str):
        return None
    window = getattr(step, "window_info", None)
    key = FormatDescription(
        f.key_format, dict(f.key_properties), tuple(f.key_features),
        window_type=None if window is None else window.type,
        window_size_ms=None if window is None or window.type == "SESSION" else window.size_ms,
    )
    return key, FormatDescription(f.value_format, dict(f.value_properties), tuple(f.value_features))


def compare_schemas(
    saved: Mapping[str, Any],
    built: Mapping[str, str],
    formats: Mapping[str, tuple[FormatDescription, FormatDescription]] | None = None,
) -> tuple[int, list[str]]:
    """(how many saved schemas had a kspark counterpart, one line per difference).

    ``<query>.<ctx>`` names a step's output; ``<query>.<ctx>.Materialize`` an aggregate's
    store, compared with the aggregate step's output. A saved ``keyFormat`` and
    ``valueFormat`` are compared whole (``qtt.loader.read_format_node``: absent properties
    and features mean none) with the formats of the step that reads or writes a topic; the
    window of a key only where the step knows its window (a windowed source).
    """
    from qtt.loader import read_format_node
    from qtt.model import QttFormatError
    from qtt.verify import format_differences

    compared, differences = 0, []
    for name, entry in sorted(saved.items()):
        text = entry.get("schema") if isinstance(entry, Mapping) else None
        if not isinstance(text, str):
            continue
        ours_formats = (formats or {}).get(name)
        if ours_formats is not None:
            for i, side in enumerate(("keyFormat", "valueFormat")):
                node = entry.get(side)
                if node is None:
                    continue
                try:
                    expected = read_format_node(node, f"schemas.{name}.{side}", key=i == 0)
                except QttFormatError as exc:
                    differences.append(f"{name}: {exc}")
                    continue
                if i == 0 and ours_formats[0].window_type is None:
                    expected = replace(expected, exact_window=False)  # the step knows no window
                differences.extend(f"{name}: {d}" for d in format_differences(side, expected, ours_formats[i]))
        ours = built.get(name)
        if ours is None and name.endswith(".Materialize"):
            ours = built.get(name[: -len(".Materialize")])
        if ours is None:
            continue
        compared += 1
        if _normalise(ours) != _normalise(text):
            differences.append(f"{name}: ksqlDB {text} | kspark {ours}")
    return compared, differences


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip())


# --------------------------------------------------------------------------- the run


@dataclass
class ReplayRun:
    """The results of a run, in version order, with what the run was."""

    corpus: str
    results: list[VersionResult] = field(default_factory=list)
    seconds: float = 0.0
    sample: dict[str, int] | None = None
    workers: int = 1
    load_average: tuple[float, ...] = ()

    def counts(self, results: Sequence[VersionResult] | None = None) -> dict[str, int]:
        found = Counter(r.status for r in (self.results if results is None else results))
        return {s: found.get(s, 0) for s in STATUSES}

    def by_release(self) -> dict[str, dict[str, int]]:
        groups: dict[str, list[VersionResult]] = {}
        for r in self.results:
            groups.setdefault(r.release, []).append(r)
        return {k: self.counts(groups[k]) for k in sorted(groups, key=_release_order)}

    def by_step(self) -> dict[str, dict[str, int]]:
        groups: dict[str, list[VersionResult]] = {}
        for r in self.results:
            for step in r.steps:
                groups.setdefault(step, []).append(r)
        return {k: self.counts(groups[k]) for k in sorted(groups)}

    def shared_runs(self) -> int:
        """Versions verified against the run of an equal earlier version (no run of their own)."""
        return sum(bool(r.shared_run) for r in self.results)

    def categories(self, status: str) -> Counter[str]:
        return Counter(r.category or "(none)" for r in self.results if r.status == status)

    def to_json(self) -> dict[str, Any]:
        return {
            "corpus": self.corpus,
            "runtime": "bounded",
            "sample": self.sample,
            "workers": self.workers,
            "seconds": round(self.seconds, 1),
            "loadAverage": list(self.load_average),
            "counts": self.counts(),
            "sharedRuns": self.shared_runs(),
            "releases": self.by_release(),
            "steps": self.by_step(),
            "unsupported": dict(self.categories(UNSUPPORTED).most_common()),
            "failures": dict(self.categories(FAILED).most_common()),
            "schemas": {
                "compared": sum(r.schemas_compared for r in self.results),
                "differing": sum(len(r.schema_differences) for r in self.results),
                "versionsWithDifferences": sum(bool(r.schema_differences) for r in self.results),
            },
            "versions": [_result_json(r) for r in self.results],
        }


def _release_order(release: str) -> tuple[int, ...]:
    try:
        return version_tuple(release)
    except Exception:  # noqa: BLE001 - an odd release name sorts first
        return (0,)


def _result_json(result: VersionResult) -> dict[str, Any]:
    out = asdict(result)
    out["steps"] = list(result.steps)
    out["schema_differences"] = list(result.schema_differences)
    return {_camel(k): v for k, v in out.items() if v not in ("", (), [])}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


DEFAULT_WORKERS = 3
"""Cases replayed at once: on 2 cores a third keeps both busy while the others wait on the JVM
(a 300-version sample: 45.7 s with 2, 40.7 s with 3)."""


def replay_all(
    plans: Sequence[SavedPlan], *, workers: int = DEFAULT_WORKERS, on_result: Callable[[VersionResult], None] | None = None
) -> Iterator[VersionResult]:
    """Replay ``plans`` on the shared SparkSession, a case's versions together (``replay_case``),
    ``workers`` cases at a time, results in order."""
    cases: list[list[SavedPlan]] = []
    for saved in plans:
        if cases and cases[-1][0].case == saved.case:
            cases[-1].append(saved)
        else:
            cases.append([saved])
    from engine.runtime.session import get_spark

    get_spark()  # one session for the run, started before the workers share it
    with ThreadPoolExecutor(
        max_workers=max(1, workers), thread_name_prefix="ksqldb-replay"
    ) as pool:
        done = map(replay_case, cases) if workers <= 1 else pool.map(replay_case, cases)
        for results in done:
            for result in results:
                if on_result:
                    on_result(result)
                yield result


def run(
    root: Path,
    *,
    pattern: str | None = None,
    sample_size: int | None = None,
    workers: int = DEFAULT_WORKERS,
    on_result: Callable[[VersionResult], None] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> ReplayRun:
    """Discover, optionally sample, and replay every saved version under ``root``."""
    plans = discover(root, pattern)
    replay = ReplayRun(corpus=str(root), workers=workers)
    if sample_size is not None:
        chosen = sample(plans, sample_size)
        replay.sample = {"size": len(chosen), "of": len(plans)}
        plans = chosen
    if on_start:
        on_start(len(plans))
    start = time.perf_counter()
    replay.results = list(replay_all(plans, workers=workers, on_result=on_result))
    replay.seconds = time.perf_counter() - start
    replay.load_average = tuple(round(x, 2) for x in os.getloadavg())
    return replay


def write_report(replay: ReplayRun, path: str | Path) -> None:
    """The JSON report (sorted keys, 2-space indent)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(replay.to_json(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def print_summary(replay: ReplayRun, console: Any, *, top: int = 10) -> None:
    """Per-release and per-step tables, then the most frequent unsupported and failure reasons."""
    from rich.table import Table

    def table(title: str, rows: Mapping[str, Mapping[str, int]], label: str) -> Table:
        t = Table(title=title)
        t.add_column(label)
        for name in ("versions", "passed", "failed", "unsupported", "pass rate"):
            t.add_column(name, justify="right")
        for name, counts in rows.items():
            total = sum(counts.values())
            rate = f"{100 * counts[PASSED] / total:.1f}%" if total else "-"
            t.add_row(name, str(total), str(counts[PASSED]), str(counts[FAILED]), str(counts[UNSUPPORTED]), rate)
        return t

    console.print(table("ksqlDB saved plans per release", {**replay.by_release(), "all": replay.counts()}, "release"))
    console.print(table("per ksqlDB step type (versions using it)", replay.by_step(), "step"))
    for status, title in ((UNSUPPORTED, "unsupported"), (FAILED, "failed")):
        common = replay.categories(status).most_common(top)
        if common:
            console.print(f"most frequent {title}:")
            for name, count in common:
                console.print(f"  {count:5d}  {name}")
    counts = replay.counts()
    total = sum(counts.values())
    schemas = replay.to_json()["schemas"]
    sampled = f" (a sample of {replay.sample['of']})" if replay.sample else ""
    console.print(
        f"{total} versions{sampled}: {counts[PASSED]} passed, {counts[FAILED]} failed, "
        f"{counts[UNSUPPORTED]} unsupported in {replay.seconds:.0f}s with {replay.workers} "
        f"worker(s), {replay.shared_runs()} verified against an equal version's run; schemas compared {schemas['compared']}, differing {schemas['differing']}; "
        f"load average {' '.join(str(x) for x in replay.load_average)}"
    )


# --------------------------------------------------------------------------- command line


def add_command(plans_sub: Any) -> None:
    """``qtt plans replay-ksqldb DIR [--report FILE] [-k PATTERN] [--sample N]``."""
    cmd = plans_sub.add_parser(
        "replay-ksqldb",
        help="Import ksqlDB's saved plans (historical_plans) and replay them on their inputs.",
        description=(
            "For every <case>/<version>/ of DIR with plan.json and spec.json: import the ksqlDB "
            "plan, build it on the bounded runtime, feed testCase.inputs and compare the outputs, "
            "post-conditions and schemas. Verdicts per version: passed, failed, unsupported."
        ),
    )
    cmd.add_argument("dir", metavar="DIR", help="Folder of <case>/<version>/{plan,spec}.json.")
    cmd.add_argument("--report", metavar="FILE", help="Write a JSON report to FILE.")
    cmd.add_argument("-k", "--filter", metavar="PATTERN", help="Only versions whose <case>/<version> contains PATTERN.")
    cmd.add_argument("--sample", type=int, metavar="N", help="Replay about N versions, stratified by ksqlDB release (see README).")
    cmd.add_argument(
        "--workers", type=int, default=DEFAULT_WORKERS, metavar="N",
        help=f"Cases replayed at once on the one SparkSession ({DEFAULT_WORKERS}).",
    )
    cmd.add_argument("--diff", action="store_true", help="Print the diff of each failed version.")
    cmd.add_argument("--no-progress", action="store_true", help="No progress bar (a line per 100 versions instead).")
    cmd.add_argument("--top", type=int, default=15, metavar="N", help="Most frequent reasons shown (15).")
    cmd.set_defaults(handler=command)


def command(args: Any) -> int:
    """Run the subcommand; exit 0 when the run completed (whatever the verdicts), 2 on bad input."""
    import sys

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if args.sample is not None and args.sample <= 0:
        print(f"qtt: --sample must be a positive number, got {args.sample}.", file=sys.stderr)
        return 2
    if args.workers <= 0:
        print(f"qtt: --workers must be a positive number, got {args.workers}.", file=sys.stderr)
        return 2
    interactive = sys.stderr.isatty() and not args.no_progress
    progress = Progress(
        TextColumn("replaying ksqlDB plans"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"), TimeElapsedColumn(),
        console=Console(file=sys.stderr), disable=not interactive, transient=True,
    )
    task = progress.add_task("replay", total=0, counts="")
    seen: Counter[str] = Counter()

    def started(total: int) -> None:
        progress.update(task, total=total)
        print(f"replaying {total} saved ksqlDB plan version(s) from {args.dir}", file=sys.stderr, flush=True)

    def on_result(result: VersionResult) -> None:
        seen[result.status] += 1
        done = sum(seen.values())
        counts = f"{seen[PASSED]} passed, {seen[FAILED]} failed, {seen[UNSUPPORTED]} unsupported"
        progress.update(task, advance=1, counts=counts)
        if not interactive and done % 100 == 0:
            print(f"  {done} done: {counts}", file=sys.stderr, flush=True)
        if args.diff and result.status == FAILED:
            progress.console.print(f"FAIL {result.label}: {result.reason}\n{result.details}", markup=False)

    try:
        with progress:
            replay = run(
                Path(args.dir), pattern=args.filter, sample_size=args.sample,
                workers=args.workers, on_result=on_result, on_start=started,
            )
    except FileNotFoundError as exc:
        print(f"qtt: {exc}", file=sys.stderr)
        return 2
    if not replay.results:
        print(f"qtt: no saved ksqlDB plan versions found under {args.dir}.", file=sys.stderr)
        return 1
    status = 0
    if args.report:
        try:
            write_report(replay, args.report)
        except OSError as exc:
            print(f"qtt: cannot write the report '{args.report}': {exc}", file=sys.stderr)
            status = 2
    print_summary(replay, Console(file=sys.stdout, width=None if sys.stdout.isatty() else 140), top=args.top)
    return status
