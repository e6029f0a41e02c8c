"""Planned-case JSON: deterministic text, exact decimals, QTT cases that load back."""

from __future__ import annotations

import decimal
import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from engine.data.records import Header, TopicRecord, Window
from qtt.loader import load_file
from qtt.plans import codec

CASE = {
    "tests": [
        {
            "name": "a case",
            "statements": ["CREATE STREAM A (ID INT KEY, V DECIMAL(4, 2)) WITH (kafka_topic='a');"],
            "properties": {"ksql.x": "1"},
            "topics": [{"name": "a", "partitions": 2, "valueFormat": "JSON"}],
            "inputs": [{"topic": "a", "key": 1, "value": {"V": 1.50}, "timestamp": 5}],
            "outputs": [
                {
                    "topic": "B",
                    "key": 1,
                    "value": {"V": 1.50},
                    "window": {"start": 0, "end": 10, "type": "time"},
                    "headers": [{"KEY": "h", "VALUE": "AQI="}],
                },
                {"topic": "B", "key": 2, "value": None},
            ],
            "post": {
                "sources": [{"name": "B", "type": "stream", "keyFormat": {"format": "KAFKA"}}],
                "topics": {
                    "blacklist": ".*repartition",
                    "topics": [{"name": "B", "keyFormat": {"format": "KAFKA"}, "valueFormat": {"format": "JSON"},
                                "partitions": 1, "valueSchemaId": 3}],
                },
            },
        }
    ]
}


def test_a_case_written_as_json_loads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps(CASE))
    (case,) = load_file(path).cases
    text = codec.dumps(codec.case_to_json(case))
    back = codec.case_from_json(codec.parse_qtt_json(text), case_id=case.id, file=path)
    assert back == case
    assert back.outputs[0].headers == (Header("h", b"\x01\x02"),)
    assert back.outputs_with_headers == frozenset({0})


def test_decimals_keep_their_digits() -> None:
    text = codec.dumps({"v": decimal.Decimal("1.50"), "w": decimal.Decimal("-3E+2")})
    assert '"v": 1.50' in text and '"w": -3E+2' in text
    assert codec.parse_qtt_json(text)["v"] == decimal.Decimal("1.50")


def test_dumps_sorts_keys_with_two_space_indent_and_a_trailing_newline() -> None:
    assert codec.dumps({"b": [1], "a": {}}) == '{\n  "a": {},\n  "b": [\n    1\n  ]\n}\n'


def test_records_round_trip_with_window_and_headers() -> None:
    record = TopicRecord("t", "k", {"X": 1}, 7, None, Window(0, 5, "SESSION"), (Header("h", None),))
    (back,) = codec.records_from_json([codec.record_to_json(record)], "records")
    assert back == record


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text()
    | st.decimals(allow_nan=False, allow_infinity=False, places=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(json_values)
def test_dumps_then_parse_gives_the_same_value(value: object) -> None:
    assert codec.parse_qtt_json(codec.dumps(value)) == value
