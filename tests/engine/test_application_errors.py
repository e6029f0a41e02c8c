"""A failed query's one-line error names the exception that explains it, not a wrapper."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.errors import ExecutionError
from engine.hosting.application import _await, root_cause_line

FOREACH_BATCH_FAILURE = """\
An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/x/pyspark/sql/utils.py", line 120, in call
    raise e
  File "/x/engine/runtime/kafka_sink.py", line 80, in __call__
    batch._jdf.foreachPartition(writer)
  File "/x/py4j/protocol.py", line 327, in get_return_value
    raise Py4JJavaError(
py4j.protocol.Py4JJavaError: An error occurred while calling o812.foreachPartition.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 9.0 failed 1 times, \
most recent failure: Lost task 1.0 in stage 9.0 (TID 17): org.apache.kafka.common.errors.TimeoutException: \
Timeout expired after 60000ms while awaiting InitProducerId
\tat org.apache.kafka.clients.producer.internals.TransactionManager.x(TransactionManager.java:1)
"""

PYTHON_WORKER_FAILURE = """\
org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/x/engine/runtime/kafka.py", line 250, in decode
    value = codec.value.from_bytes(r["value"])
ValueError: a bug in a decoder
"""

CAUSED_BY = """\
org.apache.spark.sql.streaming.StreamingQueryException: Query q terminated with exception: boom
Caused by: java.lang.IllegalStateException: State store schema changed for operator 1
\tat org.apache.spark.x(Y.java:1)
\t... 23 more
"""


def test_the_innermost_non_wrapper_exception_explains_a_foreach_batch_failure() -> None:
    line = root_cause_line(FOREACH_BATCH_FAILURE)
    assert line.startswith("org.apache.kafka.common.errors.TimeoutException: Timeout expired after 60000ms")


def test_a_python_worker_error_is_its_last_traceback_line() -> None:
    assert root_cause_line(PYTHON_WORKER_FAILURE) == "ValueError: a bug in a decoder"


def test_a_java_caused_by_chain_gives_the_cause() -> None:
    assert root_cause_line(CAUSED_BY) == "java.lang.IllegalStateException: State store schema changed for operator 1"


def test_text_without_an_exception_gives_its_first_line() -> None:
    assert root_cause_line("the query stopped\nsecond line") == "the query stopped"
    assert root_cause_line("", "RuntimeError") == "RuntimeError"


class _FailedQuery:
    """A streaming query handle whose awaitTermination raises what Spark raises."""

    class _NoJavaFailure:
        def exception(self) -> Any:
            return self

        def isEmpty(self) -> bool:  # noqa: N802 - Scala's Option
            return True

    _jsq = _NoJavaFailure()

    def awaitTermination(self) -> None:  # noqa: N802 - PySpark's name
        from pyspark.errors.exceptions.captured import StreamingQueryException

        raise StreamingQueryException(desc=FOREACH_BATCH_FAILURE, stackTrace="")


@pytest.mark.usefixtures("spark")  # PySpark's captured exceptions need a JVM
def test_a_failed_query_is_one_line_and_its_whole_error_is_kept(tmp_path: Path) -> None:
    error_file = tmp_path / "CSAS_X_0" / "error.txt"
    with pytest.raises(ExecutionError) as failure:
        _await(_FailedQuery(), "CSAS_X_0", error_file)
    message = str(failure.value)
    assert message.startswith("Query CSAS_X_0 failed: org.apache.kafka.common.errors.TimeoutException")
    assert message.endswith(f"(whole error in {error_file})")
    assert "\n" not in message
    assert "Py4JJavaError: An error occurred while calling o812.foreachPartition." in error_file.read_text()
