"""``kspark explain``: per step, which expressions run natively in Spark and which fall back, and why."""

from __future__ import annotations

from engine.cli import main

SQL = (
    "CREATE STREAM S (ID BIGINT KEY, NAME STRING, V INT) WITH (kafka_topic='s', value_format='JSON'); "
    "CREATE STREAM OUT AS SELECT ID, UCASE(NAME) AS N, V / 2 AS HALF, V / ID AS Q FROM S WHERE V > 10;"
)


def test_explain_lists_native_and_fallback_expressions_per_step(capsys, spark) -> None:
    assert main(["explain", "--property", "kspark.native.steps=true", SQL]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "Query CSAS_OUT_0",
        "  KsqlTopic/Source (streamSourceV4): 3 of 3 columns native",
        "    ID: KEY BIGINT -> native",
        "    NAME: VALUE STRING -> native",
        "    V: VALUE INTEGER -> native",
        "  WhereFilter (streamFilterV2): 1 of 1 expressions native",
        "    WHERE: (V > 10) -> native",
        "  Project (streamSelectV3): 2 of 3 expressions native",
        "    N: UCASE(NAME) -> native",
        "    HALF: (V / 2) -> native",
        "    Q: (V / ID) -> fallback: integer / (Java truncation; a zero divisor is logged)",
        "  KsqlTopic/Sink (streamSinkV3): 4 of 4 columns native",
        "    ID: KEY BIGINT -> native",
        "    N: VALUE STRING -> native",
        "    HALF: VALUE INTEGER -> native",
        "    Q: VALUE BIGINT -> native",
    ]


def test_explain_names_why_a_source_or_sink_falls_back(capsys, spark) -> None:
    sql = (
        "CREATE STREAM S (ID BIGINT KEY, AMOUNT DECIMAL(4, 2)) WITH (kafka_topic='s', value_format='JSON'); "
        "CREATE STREAM OUT WITH (value_format='DELIMITED') AS SELECT ID, AMOUNT FROM S;"
    )
    assert main(["explain", "--property", "kspark.native.steps=true", sql]) == 0
    out = capsys.readouterr().out
    assert "    AMOUNT: VALUE DECIMAL(4, 2) -> fallback: value type DECIMAL(4, 2) has no native JSON form yet" in out
    assert "    AMOUNT: VALUE DECIMAL(4, 2) -> fallback: value format DELIMITED has no native form yet" in out


def test_explain_reads_a_file_and_shows_the_physical_plan(tmp_path, capsys, spark) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text(SQL)
    assert main(["explain", "--property", "kspark.native.steps=true", "--physical", str(sql)]) == 0
    out = capsys.readouterr().out
    assert "  Physical plan:" in out
    assert "upper(NAME" in out  # the projection is a Spark expression, not a Python function


def test_explain_without_native_steps_says_every_step_runs_in_python(capsys, spark) -> None:
    assert main(["explain", "--property", "kspark.native.steps=false", SQL]) == 0
    out = capsys.readouterr().out
    assert "  WhereFilter (streamFilterV1): runs in Python" in out
    assert "native" not in out


def test_explain_of_a_bad_statement_names_the_problem_without_a_traceback(capsys) -> None:
    assert main(["explain", "CREATE STREAM OUT AS SELECT NOPE FROM MISSING;"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("kspark: ") and "MISSING" in err and "Traceback" not in err


def test_explain_of_statements_without_a_query_says_so(capsys) -> None:
    assert main(["explain", "CREATE STREAM S (ID BIGINT KEY, V INT) WITH (kafka_topic='s', value_format='JSON');"]) == 0
    assert capsys.readouterr().out.startswith("No persistent query")
