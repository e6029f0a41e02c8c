"""The latest planned-case version of a case, checked by the QTT run of that case.

In one pytest session the QTT plugin runs every case of ``tests/qtt_cases`` on Spark, and
``qtt plans verify`` then replays the latest saved version of each of these cases: when the
case's plan is up to date, that replay runs the same plan on the same inputs a second time.
:class:`CaseRunCapture` instead keeps what the case's own run built (outputs, per-step
schemas, the engine's internal, source and sink schemas, physical and streaming plans) and
compares it with the latest saved version exactly as a replay does (``replay.compare_run``).

The run stands for the replay only when nothing differs between the two: the engine is the
default ``KsqlEngine``, the saved test case (statements, topics, inputs, expected outputs,
post-conditions) is the current case, the saved configs are the engine's, no INSERT VALUES
records were saved, the inputs read back from their topics' bytes unchanged (as a replay
feeds them), and (checked by the caller) the plan built now equals the saved plan.
Otherwise :meth:`CaseRunCapture.result` is None and verify replays the version itself.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.records import TopicRecord
from qtt.model import QttCase
from qtt.plans import codec
from qtt.plans.built import BuiltSchemas
from qtt.plans.layout import SPEC_FILE, SavedVersion, case_slug, latest_version
from qtt.plans.record import create_topics
from qtt.plans.replay import ReplayResult, compare_run, load_saved
from qtt.plans.uptodate import UpToDateResult
from qtt.plans.wire import inputs_through_bytes


@dataclass
class CaseRuns:
    """What the QTT runs of one session proved, for ``verify(known_replays=, known_up_to_date=)``.

    ``replays``: latest saved versions (by resolved path) compared with their case's run;
    ``up_to_date``: cases (by id) whose latest saved plan equals the plan built now.
    """

    replays: dict[Path, ReplayResult] = field(default_factory=dict)
    up_to_date: dict[str, UpToDateResult] = field(default_factory=dict)

    def add(self, up_to_date: UpToDateResult, replay: ReplayResult | None) -> None:
        """Keep an up-to-date case, and its run's comparison when it is of the same version."""
        if not up_to_date.ok or up_to_date.latest is None:
            return
        self.up_to_date[up_to_date.case_id] = up_to_date
        if replay is not None and replay.version.path == up_to_date.latest.path:
            self.replays[replay.version.path.resolve()] = replay


def _same_topics(engine: Any, case: QttCase) -> bool:
    """Whether the run's topics have the partitions a replay of the case creates them with
    (a statement's PARTITIONS, for one, a replay does not apply)."""
    layout: dict[str, int] = {}

    class _Layout:
        def create_topic(self, info: Any) -> None:
            layout.setdefault(info.name, info.partitions)

    create_topics(_Layout(), case)
    made = engine.topics()
    return all(name in made and made[name].partitions == count for name, count in layout.items())


def _json(value: Any) -> str:
    return codec.dumps(json.loads(json.dumps(value, default=str)))


class CaseRunCapture:
    """An engine factory for ``run_case`` that compares the run with the case's latest version.

    ``engine_factory`` makes the engine as ``run_case`` would and watches its ``run`` (the
    produced records and every built step's schema) and its ``close`` (before which the
    comparison runs, while the engine still holds its queries).
    """

    def __init__(self, case: QttCase, root: Path) -> None:
        self.case = case
        self.latest: SavedVersion | None = latest_version(root / case_slug(case.id))
        self._result: ReplayResult | None = None
        self._start = 0.0

    def engine_factory(self, properties: Mapping[str, Any]) -> Any:
        """A new engine as ``run_case`` makes it, watched when it is the default engine."""
        from engine.facade.engine import KsqlEngine
        from qtt.runner import make_engine

        self._start = time.perf_counter()
        engine = make_engine(properties)
        if self.latest is None or type(engine) is not KsqlEngine:
            return engine
        # Planned cases are recorded and replayed with one partition for every topic the case
        # does not declare (``record.create_topics``); the run that stands for the replay makes
        # the topics its CREATE statements name the same way (ksqlDB's runner would make 4).
        engine.statement_topic_partitions = 1  # type: ignore[attr-defined]
        run, close = engine.run, engine.close
        ran: dict[str, Any] = {}

        def watched_run(*args: Any, **kwargs: Any) -> Any:
            with BuiltSchemas().collect() as built:
                produced = run(*args, **kwargs)
            ran["built"], ran["produced"] = built, produced or {}
            return produced

        def watched_close(*args: Any, **kwargs: Any) -> Any:
            if ran:  # the comparison never raises: run_case's verdict stays its own
                self._compare(engine, ran["built"], ran["produced"])
            return close(*args, **kwargs)

        engine.run, engine.close = watched_run, watched_close  # type: ignore[method-assign]
        return engine

    def _compare(
        self, engine: Any, built: BuiltSchemas, produced: Mapping[str, Sequence[TopicRecord]]
    ) -> None:
        try:
            assert self.latest is not None
            saved = load_saved(self.latest)
            if saved.spec.get("statementRecords") or _json(saved.spec.get("testCase")) != _json(
                codec.case_to_json(self.case)
            ):
                return
            if _json(saved.plan.get("configs", {})) != _json(dict(engine.config)):
                return
            if not _same_topics(engine, self.case):
                return
            # A replay feeds the inputs as read back from their topics' bytes: the run stands
            # for it only when that trip changes none of them.
            if inputs_through_bytes(engine, self.case.inputs) != list(self.case.inputs):
                return
            saved_case = codec.case_from_json(
                saved.spec["testCase"], case_id=saved.case_id, file=self.latest.path / SPEC_FILE
            )
            changes, rendered = compare_run(saved, saved_case, engine, built, produced)
        except Exception:  # noqa: BLE001 - no comparison: verify replays this version itself
            return
        seconds = time.perf_counter() - self._start
        self._result = ReplayResult(
            self.latest, tuple(changes), seconds, rendered, by_case_run=True
        )

    def result(self) -> ReplayResult | None:
        """The comparison with the latest saved version, or None when the run cannot stand
        for its replay (see the module's docstring)."""
        return self._result
