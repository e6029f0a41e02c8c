"""Proof that the planned-case replay catches a changed builder.

Each test changes one lower-layer behaviour in process (a filter, a projection, an
aggregate, a serde, a join, a window) and replays a committed planned case that uses that
step, from its saved plan, exactly as ``qtt plans verify`` does. The unchanged engine must
replay the case cleanly; the changed one must fail with a diff naming the query and the
step whose output differs.

The changes live in this module and reach the Spark workers inside the objects the
builders ship (closures, handlers, serdes), so the module is pickled by value.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle

import engine.builders.aggregate as aggregate
import engine.builders.joins as joins
import engine.builders.sinks as sinks
import engine.builders.stateless as stateless
from engine.builders.walker import BUILDERS
from engine.runtime import rows as R
from engine.serde.json_format import JsonSerde
from qtt.plans.diff import OUTPUT
from qtt.plans.layout import DEFAULT_ROOT, SavedVersion, saved_versions
from qtt.plans.replay import ReplayResult, replay
from qtt.plans.verify import verify

cloudpickle.register_pickle_by_value(sys.modules[__name__])

REPO = Path(__file__).resolve().parents[3]
ROOT = REPO / DEFAULT_ROOT
CASES = REPO / "tests" / "qtt_cases"


def _first_version(slug: str) -> SavedVersion:
    """The oldest saved version of a committed planned case (released first, if any)."""
    versions = saved_versions(ROOT / slug)
    assert versions, f"planned case {slug} has no saved version"
    return versions[0]


def _replay_fails_naming(
    slug: str, mutate: Callable[[], None], *, query_id: str, step: str
) -> ReplayResult:
    """Replay ``slug`` unchanged (must pass), then with ``mutate`` applied (must fail)."""
    version = _first_version(slug)
    clean = replay(version)
    assert clean.ok, clean.render()
    mutate()
    changed = replay(version)
    assert not changed.ok, f"the changed builder was not caught by replaying {slug}"
    text = changed.render()
    outputs = [c for c in changed.changes if c.area == OUTPUT and c.query_id == query_id]
    assert outputs, text
    assert any(c.ctx and c.ctx.startswith(step) for c in outputs), text
    assert f"[{OUTPUT}] {query_id} / {step}" in text
    return changed


# ------------------------------------------------------------------ a filter keeps one more


def _filter_passing_null(step: Any, *, source: Any, ctx: Any) -> Any:
    """``streamFilterV1`` with a classic bug: a NULL predicate keeps the record."""
    fn = stateless.compile_expression(step.predicate, source.expression_columns())

    def keep(row: dict[str, Any]) -> list[dict[str, Any]]:
        return [row] if not row[R.DELETED] and fn(row) is not False else []

    df = R.map_rows(
        source.df, input_schema=source.schema, output_schema=source.schema, fn=keep, name=step.ctx
    )
    return source.with_df(df)


def test_a_filter_that_keeps_a_null_predicate_record_fails_replay(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = _replay_fails_naming(
        "filter_null_in_or_and_not",
        lambda: monkeypatch.setitem(BUILDERS, "streamFilterV1", _filter_passing_null),
        query_id="CSAS_EITHER_0",
        step="KsqlTopic/Sink",
    )
    assert "EITHER" in changed.rendered_outputs


def test_qtt_plans_verify_reports_the_changed_filter(
    spark: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The same change seen through ``verify`` (what ``qtt plans verify`` and CI run)."""
    slug = "filter_null_in_or_and_not"
    root = tmp_path / "planned_cases"
    shutil.copytree(_first_version(slug).path, root / slug / _first_version(slug).name)
    monkeypatch.setitem(BUILDERS, "streamFilterV1", _filter_passing_null)
    report = verify(root, [CASES / "filter.json"], schema_path=None, steps_complete=False)
    assert not report.ok
    (failed,) = report.failed_replays
    assert failed.version.slug == slug
    text = report.render()
    assert "[output records] CSAS_EITHER_0 / KsqlTopic/Sink (topic EITHER)" in text
    assert "1 versions replayed (1 failed" in text


# ------------------------------------------------------------------ a projection rounds


def _rounding(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def rounded(row: Any) -> Any:
        value = fn(row)
        if isinstance(value, Decimal) and value.as_tuple().exponent < -2:  # type: ignore[operator]
            return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
        return value

    return rounded


def test_a_projection_that_rounds_decimals_differently_fails_replay(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = stateless._compile_all

    def compile_rounding(selects: Any, columns: Any) -> list[tuple[str, Any, str]]:
        return [(alias, _rounding(fn), sql) for alias, fn, sql in original(selects, columns)]

    _replay_fails_naming(
        "expressions_decimal_arithmetic_keeps_exact_scale",
        lambda: monkeypatch.setattr(stateless, "_compile_all", compile_rounding),
        query_id="CSAS_SUMS_0",
        step="KsqlTopic/Sink",
    )


# ------------------------------------------------------------------ an aggregate skips a retraction


class _NoRetraction(aggregate.TableAggregateHandler):
    """A table aggregate that forgets to undo the old row of a changed input row."""

    def undo(self, accs: list[Any], row: Any) -> list[Any]:
        return accs


def test_a_table_aggregate_that_skips_a_retraction_fails_replay(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _replay_fails_naming(
        "aggregates_aggregating_a_table_retracts_the_old_row_before_adding_the_new_one",
        lambda: monkeypatch.setattr(aggregate, "TableAggregateHandler", _NoRetraction),
        query_id="CTAS_PER_OWNER_0",
        step="KsqlTopic/Sink",
    )


# ------------------------------------------------------------------ a serde renames a field


class _RenamingJsonSerde(JsonSerde):
    """A JSON value serde that writes its first column under a lower-case name."""

    def serialize(self, row: Any) -> Any:
        out = super().serialize(row)
        if isinstance(out, dict) and self.names and self.names[0] in out:
            out[self.names[0].lower() + "_"] = out.pop(self.names[0])
        return out


def test_a_sink_serde_that_renames_a_field_fails_replay(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = sinks.serdes_for

    def renaming_serdes(formats: Any, columns: Any) -> tuple[Any, Any]:
        key, value = original(formats, columns)
        if isinstance(value, JsonSerde):
            value = _RenamingJsonSerde(value.format, value.columns, value.wrapped, value.is_key)
        return key, value

    _replay_fails_naming(
        "filter_comparison_and_boolean_logic",
        lambda: monkeypatch.setattr(sinks, "serdes_for", renaming_serdes),
        query_id="CSAS_BIG_BUYS_0",
        step="KsqlTopic/Sink",
    )


# ------------------------------------------------------------------ a join drops a null-key row


class _DropNullForeignKey(joins.ForeignKeySubscriptionHandler):
    """A foreign-key join whose left side drops rows without a foreign key."""

    def process(self, state: dict[str, Any], record: Any) -> list[Any]:
        events = super().process(state, record)
        return [e for e in events if e[joins.FK_VALUE] is not None]


def test_a_foreign_key_join_that_drops_a_null_key_row_fails_replay(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _replay_fails_naming(
        "fk_joins_foreign_key_left_join_keeps_left_rows_without_a_match_including_a_null_foreign_key",
        lambda: monkeypatch.setattr(joins, "ForeignKeySubscriptionHandler", _DropNullForeignKey),
        query_id="CTAS_ENRICHED_0",
        step="KsqlTopic/Sink",
    )


# ------------------------------------------------------------------ a window shifts its bounds


class _ShiftedWindows(aggregate.TimeWindowedAggregateHandler):
    """Hopping and tumbling windows whose bounds come out one second late."""

    def process(self, state: dict[str, Any], record: Any) -> list[Any]:
        out = []
        for row in super().process(state, record):
            shifted = dict(row)
            for bound in (R.WINDOWSTART, R.WINDOWEND):
                if shifted.get(bound) is not None:
                    shifted[bound] += 1000
            out.append(shifted)
        return out


def test_a_windowed_aggregate_that_shifts_its_bounds_fails_replay(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _replay_fails_naming(
        "windows_hopping_windows_update_every_window_holding_the_record",
        lambda: monkeypatch.setattr(aggregate, "TimeWindowedAggregateHandler", _ShiftedWindows),
        query_id="CTAS_VISITS_0",
        step="KsqlTopic/Sink",
    )


def test_every_guard_case_is_committed() -> None:
    """The cases these tests replay exist, so a rename of a case fails here, not silently."""
    slugs = [
        "filter_null_in_or_and_not",
        "expressions_decimal_arithmetic_keeps_exact_scale",
        "aggregates_aggregating_a_table_retracts_the_old_row_before_adding_the_new_one",
        "filter_comparison_and_boolean_logic",
        "fk_joins_foreign_key_left_join_keeps_left_rows_without_a_match_including_a_null_foreign_key",
        "windows_hopping_windows_update_every_window_holding_the_record",
    ]
    missing = [s for s in slugs if not saved_versions(ROOT / s)]
    assert not missing, missing

