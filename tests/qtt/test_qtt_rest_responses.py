"""Judging server answers: admin entities as subsets, streamed queries, expected errors."""

from __future__ import annotations

from decimal import Decimal

import pytest

from qtt.rest.model import ExpectedError
from qtt.rest.responses import (
    admin_difference,
    error_difference,
    query_difference,
    subset_difference,
    unsupported_feature,
)

STATUS = {
    "@type": "currentStatus",
    "statementText": "CREATE STREAM S ...",
    "commandId": "stream/`S`/create",
    "commandStatus": {"status": "SUCCESS", "message": "Stream created"},
    "commandSequenceNumber": 2,
}


def test_an_admin_entity_matches_when_the_expected_fields_are_a_subset() -> None:
    assert admin_difference({"@type": "currentStatus"}, [STATUS]) is None
    assert admin_difference({"commandStatus": {"status": "SUCCESS"}}, [STATUS]) is None


def test_an_admin_entity_of_another_type_or_value_differs() -> None:
    assert admin_difference({"@type": "streams"}, [STATUS]) == (
        "expected a streams entity but got \"currentStatus\""
    )
    reason = admin_difference({"commandStatus": {"status": "QUEUED"}}, [STATUS])
    assert reason == 'entity commandStatus.status expected "QUEUED" but was "SUCCESS"'
    assert "answer was []" in str(admin_difference({"@type": "currentStatus"}, []))


def test_subset_lists_compare_element_by_element() -> None:
    assert subset_difference({"a": [{"n": 1}]}, {"a": [{"n": 1, "m": 2}], "b": 0}) is None
    assert subset_difference({"a": [{"n": 1}]}, {"a": [{"n": 1}, {"n": 2}]}) == "a"


HEADER = {"header": {"queryId": "q1", "schema": "`K` STRING, `V` INTEGER"}}


def _rows(*rows: list[object], final: str | None = "Limit Reached") -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [HEADER, *({"row": {"columns": r}} for r in rows)]
    if final is not None:
        messages.append({"finalMessage": final})
    return messages


def test_a_push_query_matches_in_order_with_numbers_by_value() -> None:
    expected = [
        {"header": {"schema": "`K` STRING, `V` INTEGER"}},
        {"row": {"columns": ["a", 1]}},
        {"row": {"columns": ["b", Decimal("2.0")]}},
        {"finalMessage": "Limit Reached"},
    ]
    assert query_difference(expected, _rows(["a", 1], ["b", Decimal("2")]), pull=False) is None
    reason = query_difference(expected, _rows(["b", 2], ["a", 1]), pull=False)
    assert reason == 'row 1 of 2: columns[0] expected "a" but was "b"'


def test_a_pull_query_compares_rows_in_key_order() -> None:
    expected = [{"header": {"schema": "`K` STRING, `V` INTEGER"}}, *(_rows(["a", 1], ["b", 2])[1:])]
    assert query_difference(expected, _rows(["b", 2], ["a", 1]), pull=True) is None
    reason = query_difference(expected, _rows(["b", 2], ["a", 3]), pull=True)
    assert reason == "row 1 of 2 in key order: columns[1] expected 1 but was 3"


def test_the_header_schema_compares_exactly() -> None:
    expected = [{"header": {"schema": "`K` STRING KEY, `V` INTEGER"}}]
    reason = query_difference(expected, _rows(final=None), pull=True)
    assert reason == (
        "header schema expected '`K` STRING KEY, `V` INTEGER' but was '`K` STRING, `V` INTEGER'"
    )
    assert query_difference(expected, [], pull=True) == "expected a header but the answer had none"


def test_row_counts_tombstones_and_final_messages_are_checked() -> None:
    expected = _rows(["a", 1])
    assert query_difference(expected, _rows(["a", 1], ["b", 2]), pull=False) == (
        'expected 1 rows but got 2; the first extra row is {"columns":["b",2]}'
    )
    tomb = [HEADER, {"row": {"columns": ["a", None], "tombstone": True}}]
    assert query_difference(tomb, [HEADER, {"row": {"columns": ["a", None]}}], pull=False) == (
        'row 1 of 1: tombstone expected True but was False for ["a",null]'
    )
    assert query_difference(expected, _rows(["a", 1], final="Query Completed"), pull=False) == (
        "finalMessage expected 'Limit Reached' but was \"Query Completed\""
    )


def test_an_error_inside_the_stream_is_reported() -> None:
    actual = [HEADER, {"errorMessage": {"message": "boom", "error_code": 50000}}]
    assert query_difference(_rows(["a", 1]), actual, pull=False) == "the query failed: boom"


STATEMENT_ERROR = ExpectedError(
    type="io.confluent.ksql.rest.entity.KsqlStatementErrorMessage",
    message="does not exist",
    status=400,
)
GENERIC_ERROR = ExpectedError(type="io.confluent.ksql.rest.entity.KsqlErrorMessage")


def test_an_expected_error_needs_type_message_and_status() -> None:
    body = {"@type": "statement_error", "error_code": 40001, "message": "X does not exist."}
    assert error_difference(STATEMENT_ERROR, 400, body) is None
    assert error_difference(GENERIC_ERROR, 400, body) is None  # a subclass matches
    assert error_difference(STATEMENT_ERROR, 500, body) == "HTTP status expected 400 but was 500"
    other = {"@type": "statement_error", "message": "Syntax error"}
    assert error_difference(STATEMENT_ERROR, 400, other) == (
        "error message expected to contain 'does not exist' but was 'Syntax error'"
    )
    untyped = ExpectedError(message="does not exist")
    assert error_difference(untyped, 500, {"@type": "generic_error", "message": "X does not exist"}) is None
    generic = {"@type": "generic_error", "message": "X does not exist."}
    assert "error type expected KsqlStatementErrorMessage" in str(
        error_difference(STATEMENT_ERROR, 400, generic)
    )


@pytest.mark.parametrize(
    ("message", "feature"),
    [
        ("kspark does not support pull queries on windowed tables yet.", "pull queries on windowed tables"),
        ("Unsupported feature: binary AVRO records.", "binary AVRO records"),
        ("The server answers push queries only; pull queries are not supported yet.", "pull queries"),
        (
            "kspark cannot encode or decode AVRO records as Kafka bytes yet: that needs a registry.",
            "encode or decode AVRO records as Kafka bytes",
        ),
        ("Line 1:1: mismatched input", None),
        ("Pull queries don't support GROUP BY clauses.", None),
    ],
)
def test_unsupported_features_are_recognised(message: str, feature: str | None) -> None:
    assert unsupported_feature(message) == feature
