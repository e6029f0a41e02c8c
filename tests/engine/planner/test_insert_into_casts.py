"""INSERT INTO ... SELECT casts result columns to the sink's wider numeric types, as ksqlDB does."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import AnalysisError
from engine.facade.engine import KsqlEngine
from engine.plan import expr as E
from engine.plan.steps import SelectExpression, Step


def _engine() -> KsqlEngine:
    engine = KsqlEngine()
    for name in ("s", "t"):
        engine.create_topic(TopicInfo(name))
    engine.execute_sql(
        "CREATE STREAM S (K STRING KEY, I INT, B BIGINT, V STRING) WITH (kafka_topic='s', value_format='JSON');"
        "CREATE STREAM T (K STRING KEY, X DECIMAL(6, 2), Y DOUBLE) WITH (kafka_topic='t', value_format='JSON');"
    )
    return engine


def _selects(step: Step) -> tuple[SelectExpression, ...]:
    found = getattr(step, "select_expressions", None)
    if found is not None:
        return tuple(found)
    return next(_selects(child) for child in step.inputs().values())


def test_numeric_result_columns_are_cast_to_the_sinks_wider_types() -> None:
    (result,) = _engine().execute_sql("INSERT INTO T SELECT K, I AS X, B AS Y FROM S;")
    assert result.plan is not None and result.plan.query is not None
    casts = {s.alias: s.expression for s in _selects(result.plan.query.root)}
    x, y = casts["X"], casts["Y"]
    assert isinstance(x, E.Cast) and isinstance(y, E.Cast)
    assert (x.operand, str(x.type)) == (E.ColumnRef("I"), "DECIMAL(6, 2)")
    assert (y.operand, str(y.type)) == (E.ColumnRef("B"), "DOUBLE")


@pytest.mark.parametrize("select", ["K, V AS X, B AS Y", "K, I AS Y, B AS X", "K, I AS X"])
def test_other_mismatches_stay_incompatible(select: str) -> None:
    with pytest.raises(AnalysisError, match="Incompatible schema between results and sink"):
        _engine().execute_sql(f"INSERT INTO T SELECT {select} FROM S;")
