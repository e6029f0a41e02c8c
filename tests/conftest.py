"""Shared fixtures: one SparkSession, one real Kafka broker and one schema registry for the whole run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from engine.components.broker import Broker, BrokerSecurity
from engine.components.oidc import OidcProvider
from engine.components.registry import SchemaRegistry
from engine.runtime.session import get_spark, load_kafka_connector_by_default, stop_spark

# No per-example deadline: the suite runs on two shared cores, where one example may wait for the
# CPU many times longer than usual. Speed is measured by the benchmarks, not by the tests.
# (nox -s docs runs its tests with the docs extra alone, which has no hypothesis.)
try:
    from hypothesis import settings
except ImportError:
    pass
else:
    settings.register_profile("kspark", deadline=None)
    settings.load_profile("kspark")


def pytest_configure(config: pytest.Config) -> None:
    # Bounded and Kafka tests share one SparkSession: it must load the Kafka connector.
    load_kafka_connector_by_default()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The test files holding a test marked ``long`` run right after the QTT cases and the
    tests the qtt plugin puts with them, before every other file.

    pytest-xdist (``--dist loadfile``) hands out test files in this order. A file of a
    minute or two handed out last keeps one worker busy while the other has nothing left:
    started early, it runs alongside the short tests instead.
    """
    from qtt.plugin import CASE_RUNS_FIXTURE, QttFileCollector

    def rank(item: pytest.Item) -> int:
        if isinstance(item.parent, QttFileCollector) or CASE_RUNS_FIXTURE in getattr(item, "fixturenames", ()):
            return 0
        return 1 if item.path in long_files else 2

    long_files = {item.path for item in items if item.get_closest_marker("long") is not None}
    items.sort(key=rank)  # stable: each rank keeps the collection order


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The engine's shared local SparkSession (local[2], AQE off, UTC)."""
    yield get_spark()
    stop_spark()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One real Kafka broker (KRaft, one node) on a free port for the whole run.

    Started on first use, stopped at the end of the session whatever the outcome; killed
    with the test process if that dies. Use ``kafka_broker.bootstrap_servers``.
    """
    with Broker(tmp_path_factory.mktemp("kafka-broker"), stop_with_parent=True) as broker:
        yield broker


OIDC_CLIENTS = {"kspark-oidc": "kspark-oidc-secret"}  # the client and secret of the oidc_provider fixture
OIDC_AUDIENCE = "kspark-kafka"


@pytest.fixture(scope="session")
def oidc_provider() -> Iterator[OidcProvider]:
    """A client-credentials token endpoint and its JWKS (``OIDC_CLIENTS``, audience ``OIDC_AUDIENCE``)
    in a thread of the test process, for the secured broker's OIDC listener."""
    with OidcProvider(OIDC_CLIENTS, audience=OIDC_AUDIENCE) as provider:
        yield provider


@pytest.fixture(scope="session")
def secured_kafka_broker(tmp_path_factory: pytest.TempPathFactory, oidc_provider: OidcProvider) -> Iterator[Broker]:
    """A second real broker with secured listeners: SASL_SSL (SCRAM-SHA-512, PLAIN and unsecured
    OAUTHBEARER, user ``kspark``), SSL with client certificates, and OIDC (SASL_SSL, OAUTHBEARER
    tokens of ``oidc_provider``), certificates made at its start.

    Started on first use, stopped at the end of the session. Clients take
    ``secured_kafka_broker.secured_bootstrap_servers("SASL_SSL")`` and
    ``secured_kafka_broker.client_properties("SASL_SSL")`` (Java client names).
    """
    directory = tmp_path_factory.mktemp("secured-kafka-broker")
    security = BrokerSecurity(oidc_jwks_url=oidc_provider.jwks_url, oidc_issuer=oidc_provider.issuer,
                              oidc_audience=OIDC_AUDIENCE)
    with Broker(directory, stop_with_parent=True, security=security) as broker:
        yield broker


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchemaRegistry]:
    """One real schema registry (Apicurio, Confluent API) on a free port for the whole run.

    Started on first use (about 30 s), stopped at the end of the session; killed with the
    test process if that dies. Use ``schema_registry.url``.
    """
    with SchemaRegistry(tmp_path_factory.mktemp("schema-registry"), stop_with_parent=True) as registry:
        yield registry
