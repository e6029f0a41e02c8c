"""local_dataframe: createDataFrame's DataFrame, computed without a Python worker."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql import SparkSession

from engine.facade.engine import physical_plan_text
from engine.runtime.local_frames import local_dataframe
from engine.runtime.rows import RAW_SCHEMA


def _raw(i: int, *, window: bool = False) -> tuple[object, ...]:
    return (
        [i, 0],
        pickle.dumps({"ID": i}),
        None if i % 3 == 0 else pickle.dumps({"V": f"v{i}"}),
        1000 + i,
        i % 2,
        i,
        [("h", b"x"), ("h2", None)] if i % 2 else [],
        1000 if window else None,
        2000 if window else None,
    )


@pytest.mark.parametrize("count", [0, 1, 7, 2500])
def test_rows_and_schema_are_those_of_create_dataframe(spark: SparkSession, count: int) -> None:
    rows = [_raw(i, window=i % 5 == 0) for i in range(count)]
    expected = spark.createDataFrame(rows, RAW_SCHEMA)
    df = local_dataframe(spark, rows, RAW_SCHEMA)
    assert df.schema == expected.schema
    assert df.collect() == expected.collect()


def test_the_plan_is_unchanged_and_has_no_python_step(spark: SparkSession) -> None:
    rows = [_raw(i) for i in range(3)]
    expected = spark.createDataFrame(rows, RAW_SCHEMA)
    df = local_dataframe(spark, rows, RAW_SCHEMA)
    # Recorded physical plans name the scan: it must read the same.
    assert physical_plan_text(df).split("[")[0] == physical_plan_text(expected).split("[")[0]
    assert "Scan ExistingRDD" in physical_plan_text(df)
    lineage = str(df._jdf.queryExecution().toRdd().toDebugString())
    assert "PythonRDD[" in str(expected._jdf.queryExecution().toRdd().toDebugString())
    assert "PythonRDD[" not in lineage


def test_a_row_that_does_not_fit_the_schema_is_refused_like_create_dataframe(
    spark: SparkSession,
) -> None:
    bad: list[tuple[object, ...]] = [("not a seq", b"k", b"v", 0, 0, 0, [], None, None)]
    with pytest.raises(Exception) as expected:
        spark.createDataFrame(bad, RAW_SCHEMA)
    with pytest.raises(type(expected.value)):
        local_dataframe(spark, bad, RAW_SCHEMA)
