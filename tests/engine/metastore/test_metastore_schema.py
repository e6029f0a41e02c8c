"""The metastore row schema only changes compatibly: rows written by released versions stay readable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.metastore.database.rows import (
    SCHEMA_FILE,
    SOURCES,
    TYPES,
    SourceRow,
    TypeRow,
    decode_row,
    validate_row,
)
from engine.plan import serde
from qtt.plans.schema import compare_schemas

RELEASED = Path(__file__).parent / "released"


@pytest.mark.parametrize("name", ["source_v1.json", "ctas_v1.json", "type_v1.json"])
def test_a_released_row_is_valid_and_loads(name: str) -> None:
    value = json.loads((RELEASED / name).read_text(encoding="utf-8"))
    table = TYPES if name.startswith("type") else SOURCES
    validate_row(table, value, name)
    row = decode_row(table, value["name"].encode(), json.dumps(value).encode(), name)
    if isinstance(row, SourceRow):
        assert row.to_json() == value  # read and written back unchanged
        serde.statement_plan_from_json(row.statement_plan())  # its plan loads without re-planning
    else:
        assert isinstance(row, TypeRow) and row.to_json() == value


def test_the_schema_has_no_breaking_change_since_the_released_one() -> None:
    released = json.loads((RELEASED / "metastore.schema.v1.json").read_text(encoding="utf-8"))
    current = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    breaking = [c.render() for c in compare_schemas(released, current) if c.verdict == "breaking"]
    assert breaking == []


def test_the_guard_sees_a_narrowed_field() -> None:
    released = json.loads((RELEASED / "metastore.schema.v1.json").read_text(encoding="utf-8"))
    narrowed = json.loads(json.dumps(released))
    narrowed["$defs"]["UserDataSources"]["properties"]["type"]["enum"] = ["STREAM"]
    verdicts = {c.verdict for c in compare_schemas(released, narrowed)}
    assert "breaking" in verdicts


def test_a_query_row_and_a_terminated_source_row_round_trip() -> None:
    from dataclasses import replace

    from engine.errors import MetastoreError
    from engine.metastore.database.rows import QUERIES, QueryRow, encode_row

    ctas = json.loads((RELEASED / "ctas_v1.json").read_text(encoding="utf-8"))
    source = SourceRow.from_json(ctas)
    plan = {"statementText": "INSERT INTO X SELECT * FROM Y;", "command": None,
            "query": {**source.statement_plan()["query"], "queryId": "INSERTQUERY_7"}, "config": {}}
    query = QueryRow.from_statement_plan(plan, {"auto.offset.reset": "earliest"}, "r1")
    encoded = encode_row(QUERIES, query)
    assert encoded is not None and decode_row(QUERIES, b"INSERTQUERY_7", encoded, "here") == query
    serde.statement_plan_from_json(query.statement_plan())  # an INSERT plan: no command, one query
    with pytest.raises(MetastoreError, match="UserQueries row .* is not valid: at queryPlan"):
        validate_row(QUERIES, {**query.to_json(), "queryPlan": {}}, "here")

    stopped = replace(source, query_plan=None, terminated_query=str(source.query_id))
    encoded = encode_row(SOURCES, stopped)
    assert encoded is not None and decode_row(SOURCES, source.name.encode(), encoded, "here") == stopped
    with pytest.raises(MetastoreError, match="terminatedQueryId 5; expected a query id"):
        SourceRow.from_json({**stopped.to_json(), "terminatedQueryId": 5})
