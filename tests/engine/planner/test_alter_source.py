"""ALTER STREAM|TABLE ... ADD COLUMN: new value columns for later queries, ksqlDB's refusals."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import AnalysisError
from engine.facade.engine import KsqlEngine
from engine.plan import serde
from engine.plan.plan import AlterSourceCommand

STREAM = "CREATE STREAM S (ID STRING KEY, A INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');"
TABLE = "CREATE TABLE T (ID STRING PRIMARY KEY, A INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON');"


def _engine() -> KsqlEngine:
    engine = KsqlEngine()
    for topic in ("s", "t"):
        engine.create_topic(TopicInfo(topic))
    engine.execute_sql(STREAM + TABLE)
    return engine


def test_added_columns_follow_the_old_ones_and_later_queries_see_them() -> None:
    engine = _engine()
    engine.execute_sql("CREATE STREAM BEFORE_ALTER AS SELECT * FROM S;")
    (result,) = engine.execute_sql("ALTER STREAM S ADD COLUMN B STRING, ADD C ARRAY<INT>;")
    assert result.kind == "ALTER_STREAM"
    assert str(engine.metastore.get("S").schema) == "`ID` STRING KEY, `A` INTEGER, `B` STRING, `C` ARRAY<INTEGER>"
    (after,) = engine.execute_sql("CREATE STREAM AFTER_ALTER AS SELECT ID, B FROM S;")
    assert str(after.plan.command.schema) == "`ID` STRING KEY, `B` STRING"
    # the query planned before keeps the schema it was planned with
    assert str(engine.metastore.get("BEFORE_ALTER").schema) == "`ID` STRING KEY, `A` INTEGER"
    engine.execute_sql("ALTER TABLE T ADD COLUMN N BIGINT;")
    assert str(engine.metastore.get("T").schema) == "`ID` STRING KEY, `A` INTEGER, `N` BIGINT"


def test_the_alter_plan_saves_and_applies_without_sql() -> None:
    (result,) = _engine().execute_sql("ALTER STREAM S ADD COLUMN B DECIMAL(4, 2);")
    saved = serde.to_json_value(result.plan)
    assert saved["command"] == {"@type": "alterSourceV1", "name": "S", "kind": "STREAM", "newColumns": "`B` DECIMAL(4, 2)"}
    replay = _engine()
    plan = serde.loads_statement_plan(serde.dumps(result.plan))
    assert isinstance(plan.command, AlterSourceCommand)
    replay.execute_plan(plan)
    assert str(replay.metastore.get("S").schema) == "`ID` STRING KEY, `A` INTEGER, `B` DECIMAL(4, 2)"


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("ALTER STREAM S ADD COLUMN A STRING;", "Cannot add column `A` to schema. A column with the same name already exists."),
        ("ALTER STREAM S ADD COLUMN ID STRING;", "Cannot add column `ID` to schema. A column with the same name already exists."),
        ("ALTER STREAM S ADD X INT, ADD X STRING;", "Cannot add column `X` to schema. A column with the same name already exists."),
        ("ALTER TABLE S ADD COLUMN X INT;", "Incompatible data source type is STREAM, but statement was ALTER TABLE"),
        ("ALTER STREAM NOPE ADD COLUMN X INT;", "Source NOPE does not exist."),
        ("ALTER STREAM S ADD COLUMN ROWTIME BIGINT;", "'ROWTIME' is a reserved column name."),
        ("ALTER STREAM COPY ADD COLUMN X INT;", "ALTER command is not supported for CREATE ... AS statements."),
        ("ALTER STREAM RO ADD COLUMN X INT;", "Cannot alter stream 'RO': ALTER operations are not supported on source streams."),
    ],
)
def test_refusals_name_the_problem_and_change_nothing(statement: str, message: str) -> None:
    engine = _engine()
    engine.execute_sql("CREATE STREAM COPY AS SELECT * FROM S;")
    engine.execute_sql("CREATE SOURCE STREAM RO (ID STRING KEY, A INT) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON');")
    before = {s.name: str(s.schema) for s in engine.metastore.all()}
    with pytest.raises(AnalysisError) as raised:
        engine.execute_sql(statement)
    assert str(raised.value).startswith(message)
    assert {s.name: str(s.schema) for s in engine.metastore.all()} == before


def test_a_create_as_select_stays_refused_after_its_query_is_gone() -> None:
    engine = _engine()
    engine.execute_sql("CREATE STREAM COPY AS SELECT * FROM S;")
    engine.terminate("CSAS_COPY_0")
    with pytest.raises(AnalysisError, match=r"not supported for CREATE \.\.\. AS statements"):
        engine.execute_sql("ALTER STREAM COPY ADD COLUMN X INT;")
