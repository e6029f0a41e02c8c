from __future__ import annotations

from engine import errors


def test_a_query_failure_is_rebuilt_with_its_class_from_the_text_of_a_jvm_error() -> None:
    text = (
        "org.apache.spark.SparkException: Job aborted due to stage failure: ...\n"
        "  File \"/x/lib_aggregate.py\", line 188, in _fit\n"
        "engine.errors.FunctionFailure: SUM over DECIMAL(4, 1): Numeric field overflow: A field\n"
        "\tat org.apache.spark.api.python.BasePythonRunner...\n"
    )
    cause = errors.query_failure_cause(RuntimeError(text))
    assert type(cause) is errors.FunctionFailure
    assert str(cause) == "SUM over DECIMAL(4, 1): Numeric field overflow: A field"
    assert errors.query_failure_in(RuntimeError(text)) == (
        "Exception caught in process: SUM over DECIMAL(4, 1): Numeric field overflow: A field"
    )
    serialize = errors.query_failure_cause(RuntimeError("engine.errors.SinkSerializationFailure: Unable to x"))
    assert type(serialize) is errors.SinkSerializationFailure
    assert errors.query_failure_cause(RuntimeError("java.lang.OutOfMemoryError: heap")) is None


def test_a_query_failure_raised_in_the_driver_is_its_own_cause() -> None:
    failure = errors.SinkSerializationFailure("Unable to serialize record")
    assert errors.query_failure_cause(failure) is failure
