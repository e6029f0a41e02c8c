"""Every form of ksqlDB's grammar that ``parity/grammar.json`` maps parses as mapped.

The mapping (``qtt/parity/grammar_statements.json``) holds kspark's own statement for each
parser rule and alternative of ksqlDB's grammar, and the AST it must parse to (or the error
it must be refused with). The parity generator runs the same check; this test keeps it true
without ksqlDB's sources.
"""

from __future__ import annotations

import pytest

from engine.errors import UnsupportedFeatureError
from engine.facade.engine import KsqlEngine
from qtt.parity.grammar import check, load_map

MAPPING = load_map()
REASONED = sorted(item for item, entry in MAPPING.items() if entry.get("reason"))


@pytest.mark.parametrize("item", sorted(MAPPING))
def test_grammar_form_parses_as_mapped(item: str) -> None:
    problem = check(MAPPING[item])
    assert problem is None, f"{item}: {MAPPING[item].get('sql', MAPPING[item].get('expression'))} {problem}"


@pytest.mark.parametrize("item", REASONED)
def test_a_statement_kspark_does_not_run_on_purpose_is_refused_naming_it(item: str) -> None:
    sql = MAPPING[item]["sql"]
    with pytest.raises(UnsupportedFeatureError) as refused:
        KsqlEngine().execute_sql(sql)
    assert sql.rstrip(";") in str(refused.value)


def test_a_wrong_expectation_is_reported() -> None:
    assert check({"expression": "A + 1", "node": "Arithmetic", "text": "(A + 1)"}) is None
    assert "expected Comparison" in (check({"expression": "A + 1", "node": "Comparison"}) or "")
    assert "does not parse" in (check({"sql": "SELEKT 1;", "node": "Query"}) or "")
    assert "another message" in (check({"sql": "SELEKT 1;", "error": "no such text"}) or "")
    assert "field emit" in (
        check({"sql": "SELECT * FROM S EMIT CHANGES;", "node": "Query", "fields": {"emit": "FINAL"}}) or ""
    )


def test_at_stays_a_column_name_though_ksqldb_reserves_it() -> None:
    from engine.parser import parse

    (parsed,) = parse("CREATE STREAM OUT AS SELECT ID, AT FROM EVENTS WHERE AT > 'a';")
    assert "AT" in repr(parsed.statement)
