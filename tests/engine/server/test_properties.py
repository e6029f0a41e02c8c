"""ksqlDB's property rules for request properties (engine.server.properties), without a server."""

from __future__ import annotations

import pytest

from engine.server.errors import ServiceError
from engine.server.properties import canonical_name, request_properties


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("auto.offset.reset", "auto.offset.reset"),
        ("ksql.streams.auto.offset.reset", "auto.offset.reset"),
        ("ksql.streams.consumer.auto.offset.reset", "auto.offset.reset"),
        ("consumer.auto.offset.reset", "auto.offset.reset"),
        ("ksql.streams.producer.linger.ms", "linger.ms"),
        ("ksql.streams.cache.max.bytes.buffering", "cache.max.bytes.buffering"),
        ("ksql.query.pull.table.scan.enabled", "ksql.query.pull.table.scan.enabled"),
        ("request.ksql.query.pull.partition", "request.ksql.query.pull.partition"),
    ],
)
def test_a_property_is_read_under_the_name_kafka_streams_gives_it(name, canonical) -> None:
    assert canonical_name(name)[0] == canonical
    assert request_properties({name: "earliest" if "offset" in name else "1"}) == {
        canonical: "earliest" if "offset" in name else "1"}


def test_a_prefixed_client_config_wins_over_the_plain_one_whatever_the_order() -> None:
    both = {"ksql.streams.consumer.auto.offset.reset": "earliest", "auto.offset.reset": "latest"}
    assert request_properties(both) == {"auto.offset.reset": "earliest"}
    assert request_properties(dict(reversed(both.items()))) == {"auto.offset.reset": "earliest"}
    assert request_properties({"auto.offset.reset": "latest", "ksql.streams.auto.offset.reset": "earliest"}) == {
        "auto.offset.reset": "earliest"}


def test_a_later_layer_overrides_an_earlier_one() -> None:
    assert request_properties({"ksql.streams.auto.offset.reset": "earliest"}, {"auto.offset.reset": "latest"}) == {
        "auto.offset.reset": "latest"}


@pytest.mark.parametrize(
    ("properties", "message"),
    [
        ({"ksql.streams.auto.offset.reset": "none"}, "'none' is not valid for this property within KSQL"),
        ({"auto.offset.reset": "soon"},
         "Invalid value soon for configuration auto.offset.reset: String must be one of: latest, earliest, none"),
        ({"ksql.streams.bootstrap.servers": "elsewhere:9092"}, "Cannot override property 'bootstrap.servers'"),
        ({"ksql.headers.columns.enabled": "false"}, "Cannot override property 'ksql.headers.columns.enabled'"),
        ({"request.ksql.bogus": "1"},
         "Not recognizable as ksql, streams, consumer, or producer property: 'request.ksql.bogus'"),
        ({"ksql.bogus.setting": "1"},
         "Not recognizable as ksql, streams, consumer, or producer property: 'ksql.bogus.setting'"),
        ({"ksql.fail.on.deserialization.error": "true"},  # read by ksqlDB, not defined in KsqlConfig
         "Not recognizable as ksql, streams, consumer, or producer property: "
         "'ksql.fail.on.deserialization.error'"),
    ],
)
def test_properties_ksqldb_refuses_are_refused_with_its_words(properties, message) -> None:
    with pytest.raises(ServiceError) as refused:
        request_properties(properties)
    assert refused.value.message == message and refused.value.http_status == 400


@pytest.mark.parametrize(
    "name", ["ksql.cast.strings.preserve.nulls", "ksql.nested.error.set.null", "ksql.timestamp.throw.on.invalid"]
)
def test_a_semantic_config_takes_either_boolean_and_any_other_value_is_refused(name) -> None:
    """kspark implements both values of these (engine.plan.query_configs records them in the plan)."""
    for value in ("true", "false", "FALSE"):
        assert request_properties({name: value}) == {name: value}
    with pytest.raises(ServiceError) as error:
        request_properties({name: "sometimes"})
    assert error.value.http_status == 400
    assert error.value.message.startswith(f"kspark implements {name} only as false/true (")
    assert error.value.message.endswith("it cannot be set to 'sometimes'.")


def test_a_requests_properties_are_checked_against_the_servers_override_lists() -> None:
    """ksqlDB's endpoints (/ksql, /query, /query-stream, /ws/query) run a request's properties
    through the server's ksql.properties.overrides.* validator, as a SET statement is."""
    denying = {"ksql.properties.overrides.denylist": "ksql.streams.num.stream.threads"}
    with pytest.raises(ServiceError) as denied:
        request_properties({"ksql.streams.num.stream.threads": "4"}, server_config=denying)
    assert denied.value.message == ("One or more properties overrides set locally are prohibited by the KSQL server "
                                    "denylist (use UNSET to reset their default value): "
                                    "[ksql.streams.num.stream.threads]")
    assert denied.value.code == 40000
    assert request_properties({"auto.offset.reset": "earliest"}, server_config=denying) == {
        "auto.offset.reset": "earliest"}
    allowing = {"ksql.properties.overrides.validation.mode": "allowlist",
                "ksql.properties.overrides.allowlist": "auto.offset.reset"}
    assert request_properties({"auto.offset.reset": "earliest"}, server_config=allowing) == {
        "auto.offset.reset": "earliest"}
    with pytest.raises(ServiceError, match="not permitted by the KSQL server allowlist"):
        request_properties({"ksql.streams.cache.max.bytes.buffering": "0"}, server_config=allowing)
