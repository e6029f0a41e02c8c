"""The HTML plan report shows each changed step's fields saved beside now, readably."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from qtt.plans import codec
from qtt.plans.html import case_section, render_value, write_report
from qtt.plans.layout import PLAN_FILE, case_slug

FORMATS = {
    "keyFeatures": [], "keyFormat": "KAFKA", "keyProperties": {},
    "valueFeatures": [], "valueFormat": "JSON", "valueProperties": {},
}


def _column(name: str) -> dict[str, Any]:
    return {"kind": "column", "name": name, "source": None}


def _plan(op: str, source_schema: str) -> list[dict[str, Any]]:
    """A one-query plan: source -> filter ``QTY <op> 100`` -> project -> sink."""
    return [
        {
            "config": {},
            "statementText": "(not compared)",
            "query": {
                "queryId": "CSAS_BIG_0",
                "sink": "BIG",
                "sources": ["TRADES"],
                "root": {
                    "@type": "streamSinkV1",
                    "ctx": "KsqlTopic/Sink",
                    "formats": FORMATS,
                    "timestampColumn": None,
                    "topic": "BIG",
                    "source": {
                        "@type": "streamSelectV1",
                        "ctx": "Project",
                        "keyColumnNames": ["SYMBOL"],
                        "selectExpressions": [{"alias": "QTY", "expression": _column("QTY")}],
                        "source": {
                            "@type": "streamFilterV1",
                            "ctx": "WhereFilter",
                            "predicate": {
                                "kind": "comparison",
                                "op": op,
                                "left": _column("QTY"),
                                "right": {"kind": "literal", "type": "INTEGER", "value": 100},
                            },
                            "source": {
                                "@type": "streamSourceV1",
                                "ctx": "KsqlTopic/Source",
                                "formats": FORMATS,
                                "sourceSchema": source_schema,
                                "timestampColumn": None,
                                "topic": "trades",
                            },
                        },
                    },
                },
            },
        }
    ]


OLD_SCHEMA = "`SYMBOL` STRING KEY, `QTY` INTEGER"
NEW_SCHEMA = "`SYMBOL` STRING KEY, `QTY` INTEGER, `PRICE` DECIMAL(6, 2)"


def _changed_rows(page: str) -> list[str]:
    return [row for row in page.split("<tr") if row.startswith(" class='changed'")]


def test_a_changed_predicate_is_shown_as_sql_old_beside_new() -> None:
    page, changed = case_section("trades - big", "0.1.0_1", _plan(">=", OLD_SCHEMA), _plan(">", OLD_SCHEMA))
    assert changed
    assert "CSAS_BIG_0 / WhereFilter" in page
    (row,) = _changed_rows(page)
    assert "<th>predicate</th>" in row
    assert "<code>(QTY &gt;= 100)</code>" in row and "<code>(QTY &gt; 100)</code>" in row
    assert row.index("&gt;=") < row.index("(QTY &gt; 100)")  # saved first, now second
    assert '"kind"' not in page  # no expression JSON for the reviewer to read
    assert "CSAS_BIG_0 / Project" not in page  # unchanged steps get no table


def test_a_changed_source_schema_is_shown_as_column_lists() -> None:
    page, _ = case_section("trades - big", "0.1.0_1", _plan(">", OLD_SCHEMA), _plan(">", NEW_SCHEMA))
    (row,) = _changed_rows(page)
    assert "<th>sourceSchema</th>" in row
    assert row.count("<li><code>`QTY` INTEGER</code></li>") == 2
    assert row.count("<li><code>`PRICE` DECIMAL(6, 2)</code></li>") == 1
    assert "input <code>" not in row


def test_an_unchanged_plan_has_no_step_tables() -> None:
    page, changed = case_section("trades - big", "0.1.0_1", _plan(">", OLD_SCHEMA), _plan(">", OLD_SCHEMA))
    assert not changed
    assert "<table class='step'>" not in page


def test_fields_render_inputs_selects_and_plain_values_readably() -> None:
    assert render_value("source", {"@input": "WhereFilter"}) == "input <code>WhereFilter</code>"
    select = render_value("selectExpressions", [{"alias": "Q2", "expression": {
        "kind": "arithmetic", "op": "*", "left": _column("QTY"),
        "right": {"kind": "literal", "type": "INTEGER", "value": 2},
    }}])
    assert select == "<ol><li><code>(QTY * 2) AS Q2</code></li></ol>"
    assert render_value("topic", "a<b") == "<code>a&lt;b</code>"
    assert render_value("timestampColumn", None) == "<code>null</code>"
    assert render_value("schema", "not a schema ((") == "<code>not a schema ((</code>"


def test_the_report_for_a_stale_planned_case_shows_the_changed_expression(tmp_path: Path) -> None:
    cases = tmp_path / "trades.json"
    cases.write_text(json.dumps({"tests": [{
        "name": "big trades",
        "statements": [
            "CREATE STREAM TRADES (SYMBOL STRING KEY, QTY INT) WITH (kafka_topic='trades', value_format='JSON');",
            "CREATE STREAM BIG AS SELECT SYMBOL, QTY FROM TRADES WHERE QTY > 100;",
        ],
        "inputs": [{"topic": "trades", "key": "a", "value": {"QTY": 101}}],
        "outputs": [{"topic": "BIG", "key": "a", "value": {"QTY": 101}}],
    }]}), encoding="utf-8")
    from qtt.loader import load_file
    from qtt.plans.record import plan_case

    (case,) = load_file(cases).cases
    engine, plans, _ = plan_case(case)
    engine.close()
    saved = copy.deepcopy(plans)
    text = json.dumps(saved).replace('"op": ">"', '"op": ">="')
    assert text != json.dumps(saved)
    root = tmp_path / "planned_cases"
    version = root / case_slug(case.id) / "0.1.0_1795000000000"
    version.mkdir(parents=True)
    codec.write_json(version / PLAN_FILE, {"plans": json.loads(text)})
    out = tmp_path / "report.html"

    assert write_report(root, cases, out) == 1
    page = out.read_text(encoding="utf-8")
    assert "(QTY &gt;= 100)" in page and "(QTY &gt; 100)" in page
    assert "/ WhereFilter" in page
