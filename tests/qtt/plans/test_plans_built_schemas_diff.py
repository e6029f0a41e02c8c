"""Diffs of built step schemas, by query, step ctx and column (no Spark)."""

from __future__ import annotations

from typing import Any

from qtt.plans.built import saved_source_columns
from qtt.plans.diff import BUILT_SCHEMA, built_schema_changes, column_changes
from qtt.plans.replay import error_text


def step(ctx: str = "Project", **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ctx": ctx,
        "step": "streamSelectV1",
        "kind": "STREAM",
        "key": ["`ID` INTEGER"],
        "value": ["`ITEM` STRING", "`TWICE` INTEGER"],
        "window": None,
        "internal": {},
    }
    return base | overrides


def test_identical_step_schemas_have_no_changes() -> None:
    assert built_schema_changes("Q", [step("Source"), step()], [step("Source"), step()]) == []


def test_a_changed_column_type_names_query_step_and_column() -> None:
    now = step(value=["`ITEM` STRING", "`TWICE` BIGINT"])
    (change,) = built_schema_changes("CSAS_BIG_0", [step()], [now])
    assert (change.area, change.query_id, change.ctx, change.field) == (
        BUILT_SCHEMA,
        "CSAS_BIG_0",
        "Project",
        "value column `TWICE`",
    )
    assert (change.old, change.new) == ("INTEGER", "BIGINT")
    assert change.render().startswith(
        "[built schema] CSAS_BIG_0 / Project / value column `TWICE`: 'INTEGER' -> 'BIGINT'"
    )


def test_removed_added_and_reordered_columns_are_each_named() -> None:
    removed = column_changes(BUILT_SCHEMA, "Q", "P", "value", ["`A` INT", "`B` INT"], ["`A` INT"])
    assert [(c.field, c.detail) for c in removed] == [("value column `B`", "column removed")]
    added = column_changes(BUILT_SCHEMA, "Q", "P", "key", [], ["`K` STRING"])
    assert [(c.field, c.new) for c in added] == [("key column `K`", "STRING")]
    moved = column_changes(BUILT_SCHEMA, "Q", "P", "value", ["`A` INT", "`B` INT"], ["`B` INT", "`A` INT"])
    assert [(c.field, c.old, c.new) for c in moved] == [
        ("value column order", ["A", "B"], ["B", "A"])
    ]


def test_quoted_names_with_backticks_and_spaces_split_correctly() -> None:
    (change,) = column_changes(
        BUILT_SCHEMA, "Q", "P", "value", ["`a ``b`` c` STRUCT<`X` INTEGER>"],
        ["`a ``b`` c` STRUCT<`X` BIGINT>"],
    )
    assert change.field == "value column `a `b` c`"
    assert (change.old, change.new) == ("STRUCT<`X` INTEGER>", "STRUCT<`X` BIGINT>")


def test_kind_window_internal_schemas_and_missing_steps_are_reported() -> None:
    saved = [step("Source"), step("Aggregate", kind="TABLE", internal={"Agg-Materialize": "A"})]
    now = [
        step("Aggregate", window={"type": "TUMBLING", "sizeMs": 1000}, internal={}),
        step("Extra"),
    ]
    changes = {(c.ctx, c.field, c.detail) for c in built_schema_changes("Q", saved, now)}
    assert changes == {
        ("Source", None, "step saved but not built now"),
        ("Extra", None, "step built now but not saved"),
        ("Aggregate", "kind", ""),
        ("Aggregate", "window", ""),
        ("Aggregate", "internal Agg-Materialize", ""),
    }


def test_a_repeated_ctx_is_compared_by_occurrence() -> None:
    saved = [step("Join"), step("Join", value=["`X` INTEGER"])]
    now = [step("Join"), step("Join", value=["`X` DOUBLE"])]
    (change,) = built_schema_changes("Q", saved, now)
    assert (change.ctx, change.field) == ("Join#2", "value column `X`")


def test_a_saved_source_reads_as_a_step_schema() -> None:
    source = {
        "kind": "TABLE",
        "schema": "`ITEM` STRING KEY, `N` BIGINT",
        "keyFormat": {"format": "KAFKA", "windowType": "HOPPING", "windowSizeMs": 10},
    }
    assert saved_source_columns(source) == {
        "kind": "TABLE",
        "key": ["`ITEM` STRING"],
        "value": ["`N` BIGINT"],
        "window": {"type": "HOPPING", "sizeMs": 10},
    }


def test_error_text_keeps_the_head_and_the_root_cause_of_a_java_error_without_its_frames() -> None:
    frames = "\n".join(f"\tat org.example.C.m{i}(C.java:{i})" for i in range(50))
    message = (
        "An error occurred while calling o60.get.\n: java.lang.IllegalStateException: outer\n"
        + frames
        + "\nline two\nline three\nline four\n"
        + 'Caused by: java.lang.NumberFormatException: For input string: "x"\n\tat a.B.c(B.java:1)\n'
        + "\t... 22 more"
    )
    assert error_text(RuntimeError(message)).splitlines() == [
        "RuntimeError: An error occurred while calling o60.get.",
        ": java.lang.IllegalStateException: outer",
        "line two",
        'Caused by: java.lang.NumberFormatException: For input string: "x"',
        "... (2 more lines)",
    ]
    assert error_text(ValueError("short")) == "ValueError: short"
    assert error_text(ValueError("")) == "ValueError: (no message)"
