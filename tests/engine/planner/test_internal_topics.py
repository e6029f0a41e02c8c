"""ksqlDB's internal topics of a join, derived from the query plan (no Spark needed)."""

from __future__ import annotations

from typing import Any

from engine.data.records import TopicInfo
from engine.facade.engine import KsqlEngine
from engine.planner.internal_topics import application_id, internal_topics


def _topics(ddl: str, query: str, **config: Any) -> dict[str, tuple[str, str, dict[str, str], tuple[str, ...]]]:
    """Suffix -> (key format, value format, key properties, key features) of the query's topics."""
    engine = KsqlEngine(config)
    for name in ("a", "b"):
        engine.create_topic(TopicInfo(name))
    engine.execute_sql(ddl)
    (result,) = engine.execute_sql(query)
    assert result.plan is not None and result.plan.query is not None
    return {
        t.suffix: (t.formats.key_format, t.formats.value_format, dict(t.formats.key_properties), t.formats.key_features)
        for t in internal_topics(result.plan.query, engine.config)
    }


def test_stream_stream_join_on_both_keys_in_one_format_repartitions_nothing() -> None:
    topics = _topics(
        "CREATE STREAM L (K STRING KEY, X INT) WITH (kafka_topic='a', value_format='JSON');"
        "CREATE STREAM R (K STRING KEY, Y INT) WITH (kafka_topic='b', value_format='JSON');",
        "CREATE STREAM J AS SELECT L.K, X, Y FROM L JOIN R WITHIN 5 SECONDS ON L.K = R.K;",
    )
    assert list(topics) == [
        "KSTREAM-JOINTHIS-0000000008-store-changelog",
        "KSTREAM-JOINOTHER-0000000009-store-changelog",
    ]
    assert topics["KSTREAM-JOINTHIS-0000000008-store-changelog"][:2] == ("KAFKA", "JSON")


def test_a_stream_joined_on_a_value_column_is_repartitioned_into_the_other_sides_key_format() -> None:
    topics = _topics(
        "CREATE STREAM L (K STRING KEY, RK INT) WITH (kafka_topic='a', key_format='JSON', value_format='JSON');"
        "CREATE STREAM R (ID INT KEY, Y INT) WITH (kafka_topic='b', key_format='DELIMITED', value_format='AVRO');",
        "CREATE STREAM J AS SELECT L.RK, Y FROM L LEFT JOIN R WITHIN 5 SECONDS ON L.RK = R.ID;",
    )
    assert topics["Join-left-repartition"][:2] == ("DELIMITED", "JSON")
    assert "Join-right-repartition" not in topics
    # One re-keyed side: its key selection and repartition come before the join's windows.
    assert topics["KSTREAM-JOINTHIS-0000000012-store-changelog"][:2] == ("DELIMITED", "JSON")
    assert topics["KSTREAM-OUTEROTHER-0000000013-store-changelog"][:2] == ("DELIMITED", "AVRO")


def test_keyless_sides_take_the_default_key_format_and_a_full_join_keeps_both_sides_outer() -> None:
    topics = _topics(
        "CREATE STREAM L (A INT, X INT) WITH (kafka_topic='a', key_format='NONE', value_format='JSON');"
        "CREATE STREAM R (B INT, Y INT) WITH (kafka_topic='b', key_format='NONE', value_format='JSON');",
        "CREATE STREAM J AS SELECT ROWKEY, X, Y FROM L FULL OUTER JOIN R WITHIN 5 SECONDS ON L.A = R.B;",
        **{"ksql.persistence.default.format.key": "json"},
    )
    assert {k: v[0] for k, v in topics.items()} == {
        "Join-left-repartition": "JSON",
        "Join-right-repartition": "JSON",
        "KSTREAM-OUTERTHIS-0000000016-store-changelog": "JSON",
        "KSTREAM-OUTEROTHER-0000000017-store-changelog": "JSON",
    }


def test_a_table_in_another_key_format_is_rekeyed_and_materialised_again() -> None:
    topics = _topics(
        "CREATE STREAM S (ID BIGINT KEY, X INT) WITH (kafka_topic='a', key_format='JSON', value_format='JSON');"
        "CREATE TABLE T (ID BIGINT PRIMARY KEY, Y INT) WITH (kafka_topic='b', value_format='JSON');",
        "CREATE STREAM J AS SELECT S.ID, X, Y FROM S JOIN T ON S.ID = T.ID;",
    )
    assert set(topics) == {"RightSourceKeyed-SelectKey-repartition", "RightSourceKeyed-Materialize-changelog"}
    assert {v[0] for v in topics.values()} == {"JSON"}


def test_a_stream_rekeyed_for_a_table_goes_through_the_joins_repartition_topic() -> None:
    topics = _topics(
        "CREATE STREAM S (ID BIGINT KEY, TID INT) WITH (kafka_topic='a', key_format='JSON', value_format='JSON');"
        "CREATE TABLE T (ID INT PRIMARY KEY, Y INT) WITH (kafka_topic='b', value_format='JSON');",
        "CREATE STREAM J AS SELECT S.TID, Y FROM S LEFT JOIN T ON S.TID = T.ID;",
    )
    assert topics == {
        "Join-repartition": ("KAFKA", "JSON", {}, ()),
        "KafkaTopic_Right-Reduce-changelog": ("KAFKA", "JSON", {}, ()),
    }


def test_a_schema_registry_key_format_rekeys_both_tables_under_the_left_key_schema_name() -> None:
    topics = _topics(
        "CREATE TABLE LEFT_T (ID INT PRIMARY KEY, X INT) WITH (kafka_topic='a', format='AVRO');"
        "CREATE TABLE RIGHT_T (ID INT PRIMARY KEY, Y INT) WITH (kafka_topic='b', format='AVRO');",
        "CREATE TABLE J AS SELECT LEFT_T.ID, X, Y FROM LEFT_T JOIN RIGHT_T ON LEFT_T.ID = RIGHT_T.ID;",
    )
    assert set(topics) == {
        f"{side}SourceKeyed-{what}" for side in ("Left", "Right")
        for what in ("SelectKey-repartition", "Materialize-changelog")
    }
    for key_format, value_format, properties, features in topics.values():
        assert (key_format, value_format, features) == ("AVRO", "AVRO", ("UNWRAP_SINGLES",))
        assert properties == {"schema_full_name": "io.confluent.ksql.avro_schemas.LeftTKey"}


def test_queries_without_joins_have_no_join_topics_and_names_carry_the_application_id() -> None:
    engine = KsqlEngine()
    engine.create_topic(TopicInfo("a"))
    engine.execute_sql("CREATE STREAM S (K STRING KEY, X INT) WITH (kafka_topic='a', value_format='JSON');")
    (result,) = engine.execute_sql("CREATE STREAM O AS SELECT * FROM S WHERE X > 1;")
    assert result.plan is not None and result.plan.query is not None
    assert internal_topics(result.plan.query) == []
    assert application_id("svc.", "CSAS_O_0") == "_confluent-ksql-svc.query_CSAS_O_0"



def test_the_application_id_takes_the_service_id_and_the_persistent_prefix() -> None:
    """``_confluent-ksql-<ksql.service.id><ksql.persistent.prefix><query id>``, ksqlDB's default
    prefix ``query_``; a running query's identity (tests/engine/runtime/test_kafka_runtime.py)."""
    assert application_id("default_", "CSAS_J_0") == "_confluent-ksql-default_query_CSAS_J_0"
    assert application_id("svc_", "CSAS_J_0", "pq_") == "_confluent-ksql-svc_pq_CSAS_J_0"


def test_a_protobuf_key_is_never_unwrapped_as_protobuf_only_wraps_a_single_column() -> None:
    # ksqlDB unwraps a single key column only in a format that supports both wrapping and
    # unwrapping: PROTOBUF_NOSR does, PROTOBUF does not.
    engine = KsqlEngine({})
    engine.schema_registry_url = "mock://test-internal-topics-protobuf-key"
    for name in ("a", "b"):
        engine.create_topic(TopicInfo(name))
    engine.execute_sql(
        "CREATE STREAM L (ID INT KEY, X INT) WITH (kafka_topic='a', key_format='PROTOBUF', value_format='JSON');"
        "CREATE STREAM R (ID INT KEY, Y INT) WITH (kafka_topic='b', key_format='PROTOBUF_NOSR', value_format='JSON');"
    )
    assert engine.source("L").key_format.features == ()
    assert engine.source("R").key_format.features == ("UNWRAP_SINGLES",)
    (result,) = engine.execute_sql("CREATE STREAM J AS SELECT L.ID, X, Y FROM L JOIN R WITHIN 5 SECONDS ON L.ID = R.ID;")
    assert result.plan is not None and result.plan.query is not None
    features = {t.suffix: t.formats.key_features for t in internal_topics(result.plan.query, engine.config)}
    assert features["Join-right-repartition"] == ()
    assert set(features.values()) == {()}


def test_a_join_of_windowed_streams_keeps_the_key_formats_window_in_every_internal_topic() -> None:
    engine = KsqlEngine({})
    engine.schema_registry_url = "mock://test-internal-topics-windowed-join"
    for name in ("a", "b"):
        engine.create_topic(TopicInfo(name))
    engine.execute_sql(
        "CREATE STREAM L (ID INT KEY, X INT) WITH (kafka_topic='a', key_format='JSON_SR', value_format='JSON', "
        "WINDOW_TYPE='Hopping', WINDOW_SIZE='5 SECONDS');"
        "CREATE STREAM R (ID INT KEY, Y INT) WITH (kafka_topic='b', key_format='JSON_SR', value_format='JSON', "
        "WINDOW_TYPE='Tumbling', WINDOW_SIZE='2 SECONDS');"
    )
    (result,) = engine.execute_sql("CREATE STREAM J AS SELECT L.ID, X, Y FROM L JOIN R WITHIN 1 MINUTE ON L.ID = R.ID;")
    assert result.plan is not None and result.plan.query is not None
    windows = {t.suffix: t.window for t in internal_topics(result.plan.query, engine.config)}
    assert "Join-right-repartition" in windows  # re-keyed into the left's key format, window included
    assert {(w.type, w.size_ms) for w in windows.values() if w is not None} == {("HOPPING", 5000)}
    assert None not in windows.values()
    engine._create_internal_topics(result.plan.query)  # what a run creates first, without Spark
    described = engine.internal_topic_formats()
    [right] = [key for name, (key, _) in described.items() if name.endswith("Join-right-repartition")]
    assert (right.window_type, right.window_size_ms) == ("HOPPING", 5000)
