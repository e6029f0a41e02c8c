"""DataFrames of rows held by the driver, without a Python job to read them.

``SparkSession.createDataFrame(rows, schema)`` parallelises the pickled rows in batches of a
fixed size, then, to hand them to the JVM, re-pickles them with another batching: a
``map(lambda x: x)`` that runs in a Python worker every time the DataFrame is computed. In
a QTT case that is one more Python evaluation per topic read, as costly as a step's. Both
batchings frame the rows the same way (a pickled list per batch), which is what the JVM's
``SerDeUtil.pythonToJava(batched=True)`` reads, so ``local_dataframe`` hands the
parallelised batches over directly. The DataFrame is the same: same rows, same schema
checks, same plan (``Scan ExistingRDD``), so recorded physical plans do not change.

It uses PySpark internals that ``createDataFrame`` itself calls (pinned PySpark 4.1);
``tests/engine/runtime/test_local_frames.py`` checks the result against ``createDataFrame``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType, _make_type_verifier


def local_dataframe(spark: SparkSession, rows: Sequence[Any], schema: StructType) -> DataFrame:
    """``spark.createDataFrame(rows, schema)``, computed without a Python worker."""
    verify = _make_type_verifier(schema)

    def prepare(row: Any) -> Any:
        verify(row)
        return row

    rdd, struct = spark._createFromLocal(map(prepare, rows), schema)  # type: ignore[attr-defined]
    jvm = spark._jvm
    assert jvm is not None
    java_rows = jvm.SerDeUtil.toJavaArray(jvm.SerDeUtil.pythonToJava(rdd._jrdd, True))
    jdf = spark._jsparkSession.applySchemaToPythonRDD(java_rows.rdd(), struct.json())
    df = DataFrame(jdf, spark)
    df._schema = struct
    return df
