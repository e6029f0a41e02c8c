"""``qtt native-report``: what of a corpus's queries still runs in Python, and why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qtt import cli
from qtt.native_report import normalise_reason


@pytest.mark.parametrize(
    ("reason", "normalised"),
    [
        ("fallback: converting INTEGER to DOUBLE in (A + B)", "converting INTEGER to DOUBLE"),
        ("fallback: Lambda has no Spark form yet (X => X + 1)", "Lambda has no Spark form yet"),
        ("fallback: function LEN runs in Python", "function LEN runs in Python"),
        ("fallback: value type DECIMAL(4, 2) has no native JSON form yet", "value type DECIMAL has no native JSON form yet"),
        ("fallback: value type STRUCT<`A` INTEGER> has no native JSON form yet", "value type STRUCT has no native JSON form yet"),
        ("fallback: integer / (Java truncation; a zero divisor is logged)", "integer / (Java truncation; a zero divisor is logged)"),
    ],
)
def test_reasons_lose_the_expression_text_and_type_parameters(reason, normalised):
    assert normalise_reason(reason) == normalised


CASES = {
    "tests": [
        {
            "name": "half in python",
            "statements": [
                "CREATE STREAM S (ID INT KEY, V INT, N STRING) WITH (kafka_topic='s', value_format='JSON');",
                "CREATE STREAM OUT AS SELECT ID, V / ID AS HALF, UCASE(N) AS U FROM S WHERE V > 1;",
            ],
            "inputs": [{"topic": "s", "key": 1, "value": {"V": 4, "N": "a"}}],
            "outputs": [{"topic": "OUT", "key": 1, "value": {"HALF": 4, "U": "A"}}],
        },
        {
            "name": "a windowed count",
            "statements": [
                "CREATE STREAM S (ID INT KEY, V INT) WITH (kafka_topic='s', value_format='JSON');",
                "CREATE TABLE C AS SELECT ID, COUNT(*) AS N FROM S WINDOW TUMBLING (SIZE 1 SECOND) GROUP BY ID;",
            ],
            # ksqlDB's model refuses a case with neither records nor an expected error
            "inputs": [{"topic": "s", "key": 1, "value": {"V": 1}, "timestamp": 0}],
            "outputs": [{"topic": "C", "key": 1, "value": {"N": 1}, "timestamp": 0,
                         "window": {"start": 0, "end": 1000, "type": "time"}}],
        },
        {
            "name": "an error",
            "statements": ["CREATE STREAM S (ID INT KEY) WITH (kafka_topic='s', value_format='JSON');", "SELECT nonsense;"],
            "expectedException": {"type": "io.confluent.ksql.util.KsqlStatementException"},
        },
    ]
}


def test_the_report_counts_steps_expressions_and_reasons(spark, tmp_path: Path, capsys):
    path = tmp_path / "cases.json"
    path.write_text(json.dumps(CASES))
    report = tmp_path / "report.json"
    assert cli.main(["native-report", str(path), "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "3 cases: 2 explained, 1 stopped before their queries existed" in out
    data = json.loads(report.read_text())
    assert data["steps"]["streamSelectV2"] == {"partly native": 1}
    assert data["steps"]["streamWindowedAggregateV2"] == {"python": 1}
    reasons = {r["reason"]: r for r in data["reasons"]}
    assert reasons["integer / (Java truncation; a zero divisor is logged)"]["example"] == (
        "cases - half in python: HALF = (V / ID)"
    )
    assert reasons["streamWindowedAggregateV2: no native step version yet"]["count"] == 1


def test_no_cases_is_exit_1(tmp_path: Path, capsys):
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"tests": []}))
    assert cli.main(["native-report", str(path)]) == 1
    assert "no QTT cases found" in capsys.readouterr().err
