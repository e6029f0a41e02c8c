"""CREATE TYPE and DROP TYPE on the engine: names later statements resolve (no Spark)."""

from __future__ import annotations

import pytest

from engine.data.records import TopicInfo
from engine.errors import KsqlError
from engine.facade.engine import KsqlEngine
from engine.metastore.model import DataSource, alternatives_hint
from engine.plan.schema import LogicalSchema
from engine.plan.steps import Formats


def _engine() -> KsqlEngine:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("pets"))
    return engine


def test_a_registered_type_resolves_in_later_statements_and_nests() -> None:
    engine = _engine()
    engine.execute_sql("CREATE TYPE COLLAR AS STRUCT<COLOUR STRING, LEN INT>;")
    engine.execute_sql("CREATE TYPE TAGS AS ARRAY<COLLAR>;")
    engine.execute_sql(
        "CREATE STREAM PETS (ID STRING KEY, C COLLAR, T tags) WITH (kafka_topic='pets', value_format='JSON');"
    )
    source = engine.source("PETS")
    assert source is not None
    types = {c.name: str(c.type) for c in source.schema.columns}
    assert types["C"] == "STRUCT<`COLOUR` STRING, `LEN` INTEGER>"
    assert types["T"] == "ARRAY<STRUCT<`COLOUR` STRING, `LEN` INTEGER>>"


def test_registering_a_name_twice_is_refused_with_the_registered_type() -> None:
    engine = _engine()
    engine.execute_sql("CREATE TYPE AGE AS INT;")
    with pytest.raises(KsqlError) as caught:
        engine.execute_sql("CREATE TYPE age AS STRING;")
    assert str(caught.value) == "Cannot register custom type 'AGE' since it is already registered with type: INTEGER"


def test_if_not_exists_keeps_the_registered_type_in_the_same_text_too() -> None:
    engine = _engine()
    engine.execute_sql(
        "CREATE TYPE AGE AS INT; CREATE TYPE IF NOT EXISTS AGE AS STRING;"
        "CREATE STREAM PETS (ID STRING KEY, A AGE) WITH (kafka_topic='pets', value_format='JSON');"
    )
    assert engine.types["AGE"] == engine.source("PETS").schema.find("A").type  # type: ignore[union-attr]
    assert str(engine.types["AGE"]) == "INTEGER"


def test_a_dropped_type_no_longer_resolves_but_its_sources_keep_it() -> None:
    engine = _engine()
    engine.execute_sql("CREATE TYPE AGE AS BIGINT;")
    engine.execute_sql("CREATE STREAM PETS (ID STRING KEY, A AGE) WITH (kafka_topic='pets', value_format='JSON');")
    engine.execute_sql("DROP TYPE AGE;")
    assert str(engine.source("PETS").schema.find("A").type) == "BIGINT"  # type: ignore[union-attr]
    with pytest.raises(KsqlError, match="Cannot resolve unknown type: AGE"):
        engine.execute_sql("CREATE STREAM P2 AS SELECT ID, CAST(A AS AGE) AS B FROM PETS;")
    engine.execute_sql("DROP TYPE IF EXISTS AGE;")
    with pytest.raises(KsqlError) as caught:
        engine.execute_sql("DROP TYPE AGE;")
    assert str(caught.value) == "Type AGE does not exist."


def test_a_snapshot_keeps_the_types_apart() -> None:
    engine = _engine()
    engine.execute_sql("CREATE TYPE AGE AS INT;")
    copy = engine.snapshot()
    copy.execute_sql("DROP TYPE AGE;")
    assert "AGE" in engine.types and "AGE" not in copy.types


def _source(name: str, kind: str) -> DataSource:
    return DataSource(name=name, kind=kind, schema=LogicalSchema(()), topic="t",
                      formats=Formats(key_format="KAFKA", value_format="JSON"))


@pytest.mark.parametrize(("known", "kind", "hint"), [
    ([], None, ""),
    ([("Pets", "STREAM")], None,
     '\nDid you mean "Pets"? Hint: wrap the source name in double quotes to make it case-sensitive.'),
    ([("PETS", "TABLE")], "STREAM", ""),
    ([("PETS", "TABLE")], None, "\nDid you mean PETS? Hint: try removing double quotes from the source name."),
    ([("Pets", "TABLE"), ("PETS", "STREAM")], None,
     '\nDid you mean "PETS" (STREAM) or "Pets" (TABLE)? Hint: wrap the source name in double quotes to make it '
     "case-sensitive."),
    ([("pEts", "STREAM"), ("Pets", "TABLE"), ("PETS", "STREAM")], None,
     '\nDid you mean "PETS" (STREAM), "Pets" (TABLE), or "pEts" (STREAM)? Hint: wrap the source name in double '
     "quotes to make it case-sensitive."),
])
def test_the_alternatives_hint_lists_names_differing_in_case_as_ksqldb_does(
    known: list[tuple[str, str]], kind: str | None, hint: str
) -> None:
    assert alternatives_hint([_source(n, k) for n, k in known], "pets", kind) == hint
