"""Analysis errors of single-source queries, worded as ksqlDB words them (REST clients match on them)."""

from __future__ import annotations

import pytest

from engine.errors import AnalysisError
from engine.facade.engine import KsqlEngine
from engine.parser import parse


@pytest.fixture
def engine() -> KsqlEngine:
    e = KsqlEngine()
    e.execute_sql(
        "CREATE STREAM GAUGES (ID STRING KEY, LEVEL BIGINT, RATE DECIMAL(3, 1), TAGS ARRAY<STRING>) "
        "WITH (KAFKA_TOPIC='gauges', VALUE_FORMAT='JSON', PARTITIONS=1);"
    )
    return e


def _plan(engine: KsqlEngine, sql: str) -> None:
    parsed = parse(sql)[0]
    engine.plan_transient_query(parsed.statement, parsed.text)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT LEVEL + NULL FROM GAUGES EMIT CHANGES;",
         "Error processing expression: (LEVEL + null). Arithmetic on types BIGINT and null are not supported."),
        ("SELECT NULL / RATE FROM GAUGES EMIT CHANGES;",
         "Error processing expression: (null / RATE). Arithmetic on types null and DECIMAL(3, 1) are not supported."),
        ("SELECT ID FROM GAUGES WHERE TAGS + NULL IS NULL EMIT CHANGES;",
         "Error processing expression: (TAGS + null). Arithmetic on types ARRAY<STRING> and null are not supported."),
        ("SELECT NOPE FROM GAUGES EMIT CHANGES;", "SELECT column 'NOPE' cannot be resolved."),
        ("SELECT ID FROM GAUGES WHERE NOPE > 1 EMIT CHANGES;", "WHERE column 'NOPE' cannot be resolved."),
        ("SELECT G.NOPE FROM GAUGES G EMIT CHANGES;", "SELECT column 'G.NOPE' cannot be resolved."),
        ("SELECT X.LEVEL FROM GAUGES G EMIT CHANGES;", "'X' is not a valid stream/table name or alias."),
        ("SELECT COUNT(*) FROM GAUGES WINDOW TUMBLING (SIZE 1 SECOND) WHERE WINDOWSTART > 0 GROUP BY ID EMIT CHANGES;",
         "Error in WHERE expression: Unknown column WINDOWSTART."),
    ],
)
def test_query_errors_use_ksqldb_messages(engine, sql, message) -> None:
    with pytest.raises(AnalysisError) as refused:
        _plan(engine, sql)
    assert message in str(refused.value)


def test_arithmetic_without_null_literals_still_plans(engine) -> None:
    _plan(engine, "SELECT LEVEL + 1, RATE * 2, CAST(NULL AS BIGINT) + LEVEL FROM GAUGES EMIT CHANGES;")


def test_a_sink_key_format_that_cannot_carry_the_key_quotes_the_statement_as_ksqldb_planned_it(
    engine: KsqlEngine,
) -> None:
    from engine.errors import UnsupportedSchemaError

    with pytest.raises(UnsupportedSchemaError) as caught:
        engine.execute_sql(
            "CREATE TABLE PER_RATE AS SELECT rate, level + 1, COUNT(*) FROM gauges GROUP BY rate, level + 1;"
        )
    message = str(caught.value)
    assert message.startswith("Key format does not support schema.\nformat: KAFKA\n")
    assert message.endswith(
        "\nStatement: CREATE TABLE PER_RATE AS SELECT\n"
        "  GAUGES.RATE RATE,\n"
        "  (GAUGES.LEVEL + 1) KSQL_COL_0,\n"
        "  COUNT(*) KSQL_COL_1\n"
        "FROM GAUGES GAUGES\n"
        "GROUP BY GAUGES.RATE, (GAUGES.LEVEL + 1)\n"
        "EMIT CHANGES"
    )
