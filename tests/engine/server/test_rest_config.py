"""A ksqlDB server properties file's server settings (``engine.server.rest_config``): checked as
ksqlDB checks them, its key and trust stores loaded, its limits and authentication applied."""

from __future__ import annotations

import dataclasses
import ssl
import time
from pathlib import Path
from types import SimpleNamespace
from unittest.mock import MagicMock

import httpx
import pytest
from starlette.testclient import TestClient

from engine.errors import KsqlError
from engine.server.app import create_app
from engine.server.auth import BasicAuth, BasicAuthMiddleware
from engine.server.limits import ServerLimits
from engine.server.rest_config import (
    Listener,
    RestConfig,
    RestConfigError,
    bind,
    kafka_properties,
    openssl_ciphers,
)
from engine.server.tls import TlsSettings
from tests.engine.server.pki import key_stores
from tests.engine.server.serving import serving_app


def _config(properties: dict[str, str]) -> RestConfig:
    return RestConfig.from_properties(properties)


# ---------------------------------------------------------------- values ksqlDB refuses


@pytest.mark.parametrize(("properties", "message"), [
    ({"listeners": "ftp://0.0.0.0:8088"}, "Invalid URI scheme should be http or https: ftp://0.0.0.0:8088"),
    ({"listeners": "localhost:8088"},
     "Invalid value localhost:8088 for configuration listeners: Not valid URL: no protocol: localhost:8088"),
    ({"listeners": ""}, "listeners must be supplied.  List of listeners. http and https are supported."),
    ({"listeners": "https://0.0.0.0:8443", "ssl.keystore.type": "PEM"},
     "Invalid value PEM for configuration ssl.keystore.type: String must be one of: JKS, PKCS12, BCFKS"),
    ({"ksql.internal.listener": "https://node-1:8089", "ssl.truststore.type": "jks"},
     "Invalid value jks for configuration ssl.truststore.type: String must be one of: JKS, PKCS12, BCFKS"),
    ({"ssl.client.authentication": "MAYBE"},
     "Invalid value MAYBE for configuration ssl.client.authentication: String must be one of: NONE, "
     "REQUESTED, REQUIRED"),
    ({"ssl.client.auth": "yes"},
     "Invalid value yes for configuration ssl.client.auth: Expected value to be either true or false"),
    ({"ksql.internal.ssl.client.authentication": "ALL"},
     "Invalid value ALL for configuration ksql.internal.ssl.client.authentication: String must be one of"),
    ({"authentication.method": "DIGEST"},
     "Invalid value DIGEST for configuration authentication.method: String must be one of: NONE, BASIC"),
    ({"ksql.max.push.queries": "-1"}, "Invalid value -1 for configuration ksql.max.push.queries: Not >= 0"),
    ({"ksql.max.push.queries": "many"},
     "Invalid value many for configuration ksql.max.push.queries: Not a number of type INT"),
    ({"ksql.advertised.listener": "http://0.0.0.0:8088"},
     "Invalid value http://0.0.0.0:8088 for configuration ksql.advertised.listener: Can not be wildcard"),
    ({"ksql.advertised.listener": "http://node-1"},
     "Invalid value http://node-1 for configuration ksql.advertised.listener: Must have valid port"),
    ({"ksql.internal.listener": "gopher://node-1:8089"}, "Invalid URI scheme should be http or https"),
    ({"ssl.enabled.protocols": "TLSv1.2,SSLv3"},
     "Invalid value TLSv1.2,SSLv3 for configuration ssl.enabled.protocols: 'SSLv3' is not a TLS protocol version"),
    ({"ssl.cipher.suites": "TLS_NO_SUCH_SUITE"},
     "Invalid value TLS_NO_SUCH_SUITE for configuration ssl.cipher.suites: 'TLS_NO_SUCH_SUITE' is not a cipher"),
    ({"ksql.server.command.response.timeout.ms": "soon"},
     "Invalid value soon for configuration ksql.server.command.response.timeout.ms: Not a number of type LONG"),
    ({"ksql.query.pull.cancel.on.disconnect.enabled": "true"},
     "kspark implements ksql.query.pull.cancel.on.disconnect.enabled only as false"),
    ({"ssl.keystore.reload": "true"}, "ssl.keystore.reload is true, but kspark reads the server's key store once"),
    # ksqlDB's map settings, in KsqlConfig.parseStringAsMap's words (Guava's reason)
    ({"ksql.metrics.tags.custom": "env:prod,team"},
     "Invalid config value for 'ksql.metrics.tags.custom'. value: env:prod,team. reason: Chunk [team] is not a "
     "valid entry"),
    ({"ksql.metrics.tags.custom": "env:prod,env:test"},
     "Invalid config value for 'ksql.metrics.tags.custom'. value: env:prod,env:test. reason: Duplicate key [env] "
     "found."),
    ({"ksql.logging.server.rate.limited.response.codes": "404:1:2"},
     "Invalid config value for 'ksql.logging.server.rate.limited.response.codes'. value: 404:1:2. reason: Chunk "
     "[404:1:2] is not a valid entry"),
    ({"ksql.logging.server.rate.limited.response.codes": "4xx:1"},
     "Invalid value 4xx for configuration ksql.logging.server.rate.limited.response.codes: Not an int"),
    ({"ksql.logging.server.rate.limited.request.paths": "/query:fast"},
     "Invalid value fast for configuration ksql.logging.server.rate.limited.request.paths: Not a double"),
])
def test_a_server_setting_ksqldb_refuses_is_refused_naming_it(properties, message) -> None:
    with pytest.raises(RestConfigError) as refused:
        RestConfig.from_properties(properties)
    assert str(refused.value).startswith(message)


def test_without_an_https_listener_the_ssl_store_settings_are_the_kafka_clients() -> None:
    # A PEM trust store is the Kafka clients' (librdkafka and Java take it); the server reads no
    # store of its own, so the REST stores' types are not checked.
    config = _config({"listeners": "http://0.0.0.0:8088", "security.protocol": "SASL_SSL",
                      "ssl.truststore.location": "/etc/kafka/ca.pem", "ssl.truststore.type": "PEM"})
    assert [listener.scheme for listener in config.listeners] == ["http"]



def test_the_defaults_are_ksqldbs() -> None:
    config = RestConfig.from_properties({"ksql.service.id": "x"})
    assert config.listeners == () and config.cors is None and config.max_push_queries == 100
    assert config.authentication_method == "NONE" and config.allowed_roles() is None
    assert config.client_authentication == "NONE" and config.protocols == ("TLSv1.2", "TLSv1.3")


def test_listeners_internal_and_advertised_listeners() -> None:
    config = _config({"listeners": "http://0.0.0.0:8088, https://[::1]:8443",
                      "ksql.internal.listener": "http://127.0.0.1:8099"})
    assert config.listeners == (Listener("http", "0.0.0.0", 8088), Listener("https", "::1", 8443))
    assert config.extra_listeners(config.listeners) == (Listener("http", "127.0.0.1", 8099),)
    assert config.internal_url(config.listeners[0]) == "http://127.0.0.1:8099"
    advertised = _config({"listeners": "http://0.0.0.0:8088",
                          "ksql.advertised.listener": "http://node-1.example:8088"})
    assert advertised.internal_url(advertised.listeners[0]) == "http://node-1.example:8088"
    plain = _config({"listeners": "http://0.0.0.0:8088"})
    assert not plain.internal_url(plain.listeners[0]).startswith("http://0.0.0.0")  # this machine's name
    hypercorn = SimpleNamespace(bind=[], insecure_bind=[])
    bind(hypercorn, config.listeners, tls_on=True)
    assert hypercorn.bind == ["[::1]:8443"] and hypercorn.insecure_bind == ["0.0.0.0:8088"]


def test_the_deprecated_client_auth_gives_way_to_the_new_name() -> None:
    assert _config({"ssl.client.auth": "true"}).client_authentication == "REQUIRED"
    assert _config({"ssl.client.auth": "false"}).client_authentication == "NONE"
    both = RestConfig.from_properties({"ssl.client.auth": "true", "ssl.client.authentication": "REQUESTED"})
    assert both.client_authentication == "REQUESTED"


def test_java_cipher_suite_names_become_openssls() -> None:
    assert openssl_ciphers(("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
                            "TLS_AES_128_GCM_SHA256")) == "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305"
    assert openssl_ciphers(()) is None
    chosen = _config({"ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, ECDHE-RSA-AES128-SHA"})
    assert openssl_ciphers(chosen.cipher_suites) == "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-SHA"


def test_the_listeners_tls_settings_reach_kafka_only_over_tls() -> None:
    given = {"ssl.keystore.location": "/k.jks", "ssl.keystore.password": "pw", "ssl.client.authentication": "REQUIRED",
             "ksql.service.id": "x"}
    assert kafka_properties(given) == {"ksql.service.id": "x"}
    over_tls = kafka_properties({**given, "security.protocol": "SSL"})
    assert over_tls == {"ssl.keystore.location": "/k.jks", "ssl.keystore.password": "pw", "ksql.service.id": "x",
                        "security.protocol": "SSL"}
    assert "ssl.keystore.location" in kafka_properties(given, ["security.protocol=SASL_SSL"])


def test_no_password_is_in_the_configs_repr() -> None:
    config = _config({"ssl.keystore.location": "/k.jks",
                      "ssl.keystore.password": "hunter2",
                      "ssl.key.password": "hunter3"})
    assert "hunter" not in repr(config)


# ---------------------------------------------------------------- key and trust stores


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    """A CA, a server key in PKCS12 and JKS stores (alias 'server'), a truststore of the CA."""
    return key_stores(tmp_path_factory.mktemp("stores"), alias="server")


@pytest.mark.parametrize("store", ["server.jks", "server.p12"])
def test_a_jks_or_pkcs12_key_store_serves_https(stores, store) -> None:
    config = _config({"listeners": "https://127.0.0.1:1",
                      "ssl.keystore.location": str(stores[store]),
                      "ssl.keystore.password": "store-pw",
                      "ssl.truststore.location": str(stores["trust.jks"]),
                      "ssl.truststore.password": "trust-pw",
                      "ssl.client.authentication": "REQUESTED",
                      "ksql.ssl.keystore.alias.external": "server",
                      "ssl.enabled.protocols": "TLSv1.3"})
    tls = config.tls()
    assert isinstance(tls, TlsSettings) and tls.verify == "requested" and tls.protocols == ("TLSv1.3",)
    assert "store-pw" not in repr(tls)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.certfile, tls.keyfile, tls.key_password)  # the key opens with its new password
    assert "-----BEGIN ENCRYPTED PRIVATE KEY-----" in Path(tls.keyfile).read_text()
    assert Path(tls.keyfile).stat().st_mode & 0o077 == 0
    assert "BEGIN CERTIFICATE" in Path(tls.client_ca or "").read_text()


def test_a_bad_store_is_one_line_naming_the_property(stores, tmp_path) -> None:
    wrong = _config({"ssl.keystore.location": str(stores["server.jks"]), "ssl.keystore.password": "nope"})
    with pytest.raises(RestConfigError, match=r"^'ssl.keystore.location' names .*server.jks, which does not open"):
        wrong.tls()
    with pytest.raises(RestConfigError, match="which is not a readable file"):
        _config({"ssl.keystore.location": str(tmp_path / "none.jks"), "ssl.keystore.password": "x"}).tls()
    with pytest.raises(RestConfigError, match="no private key under the alias 'other'"):
        _config({"ssl.keystore.location": str(stores["server.jks"]),
                 "ssl.keystore.password": "store-pw",
                 "ksql.ssl.keystore.alias.external": "other"}).tls()
    with pytest.raises(RestConfigError, match="^https listener specified but no keystore provided$"):
        _config({"listeners": "https://127.0.0.1:8443"}).tls()
    with pytest.raises(RestConfigError, match="ssl.client.authentication is REQUIRED, but no ssl.truststore"):
        _config({"ssl.keystore.location": str(stores["server.p12"]),
                 "ssl.keystore.password": "store-pw",
                 "ssl.client.authentication": "REQUIRED"}).tls()


# ---------------------------------------------------------------- authentication and the push-query limit


def _service(push: type[_FakePush] | None = None) -> SimpleNamespace:
    return SimpleNamespace(metrics=MagicMock(), print_query=lambda text, variables: None,
                           pull_query=lambda text, properties, variables: None, close_push_query=lambda q: q.close(),
                           push_query=lambda text, properties, variables, old_api=False: (push or _FakePush)(), ready=True)


class _FakePush:
    """A push query with no rows that runs until it is stopped."""

    query_id = "transient_1"
    schema = SimpleNamespace(columns=[])
    closed = 0

    def start(self, timeout: float = 60.0) -> None:
        pass

    def close(self) -> None:
        type(self).closed += 1

    def rows(self, *, stop, idle):
        while not stop():
            time.sleep(0.05)
            yield None


def test_ksql_max_push_queries_refuses_the_next_push_query_with_ksqldbs_message() -> None:
    statement = "SELECT * FROM S EMIT CHANGES;"
    with serving_app(create_app(_service(), max_push_queries=1)) as url, httpx.Client(base_url=url, timeout=10) as client:
        with client.stream("POST", "/query-stream", json={"sql": statement}) as first:
            assert first.status_code == 200
            next(first.iter_lines())  # the metadata line: the query is open
            refused = client.post("/query-stream", json={"sql": statement})
            assert refused.status_code == 400
            assert refused.json()["message"] == (
                "Not executing statement(s) as it would cause the number of active, push queries to exceed the "
                "configured limit. Terminate existing PUSH queries, or increase the 'ksql.max.push.queries' "
                "setting via the 'ksql-server.properties' file. Current push query count: 1. Configured limit: 1.")
            assert refused.json()["error_code"] == 40001 and refused.json()["statementText"] == statement
        deadline = time.monotonic() + 10  # the first one's client went away: the next one is taken
        while (status := _open_push(client, statement)) == 400 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert status == 200


class _SlowStart(_FakePush):
    """A push query whose start takes 2 s, as on a busy machine."""

    closed = 0

    def start(self, timeout: float = 60.0) -> None:
        time.sleep(2)


class _NeverStarts(_FakePush):
    """A push query that does not reach its topics in the time given."""

    closed = 0

    def start(self, timeout: float = 60.0) -> None:
        from engine.errors import StartTimeout

        time.sleep(timeout)
        raise StartTimeout(f"Push query transient_1 did not reach its topics within {timeout:g} s.")


def test_a_push_query_waiting_past_its_start_time_for_a_start_slot_is_answered_429() -> None:
    import concurrent.futures

    limits = ServerLimits(max_concurrent_push_starts=1, push_start_timeout=0.5)
    statement = "SELECT * FROM S EMIT CHANGES;"
    with serving_app(create_app(_service(_SlowStart), limits=limits)) as url, \
            concurrent.futures.ThreadPoolExecutor(2) as pool:
        def post() -> httpx.Response:
            with httpx.Client(base_url=url, timeout=10) as client:
                with client.stream("POST", "/query-stream", json={"sql": statement}) as answer:
                    answer.read() if answer.status_code != 200 else next(answer.iter_lines())
                    return answer
        first = pool.submit(post)
        time.sleep(0.3)  # the first one holds the only start slot for 2 s
        refused = pool.submit(post).result()
        assert first.result().status_code == 200
    assert refused.status_code == 429 and refused.headers["retry-after"] == str(limits.retry_after)
    assert refused.json() == {"@type": "generic_error", "error_code": 42900, "message": (
        "The server is busy: 1 push queries are starting and none ended its start within 0.5 s "
        "(kspark.server.push.start.timeout.seconds). Retry after 5 s.")}


def test_a_push_query_that_does_not_start_in_its_time_is_answered_429_and_stopped() -> None:
    limits = ServerLimits(push_start_timeout=1.5)
    with serving_app(create_app(_service(_NeverStarts), limits=limits)) as url, \
            httpx.Client(base_url=url, timeout=10) as client:
        started = time.monotonic()
        refused = client.post("/query-stream", json={"sql": "SELECT * FROM S EMIT CHANGES;"})
        assert time.monotonic() - started < 5
    assert refused.status_code == 429 and refused.headers["retry-after"] == "5"
    assert refused.json()["message"] == (
        "The server is busy: the push query did not reach its topics within 1.5 s "
        "(kspark.server.push.start.timeout.seconds). Retry after 5 s.")
    assert _NeverStarts.closed == 1


def test_the_push_start_limits_are_server_settings() -> None:
    limits = ServerLimits.from_properties({"kspark.server.max.concurrent.push.starts": "3",
                                           "kspark.server.push.start.timeout.seconds": "20"})
    assert (limits.max_concurrent_push_starts, limits.push_start_timeout) == (3, 20.0)
    with pytest.raises(KsqlError, match="kspark.server.max.concurrent.push.starts: expected an integer at least 1"):
        ServerLimits.from_properties({"kspark.server.max.concurrent.push.starts": "0"})


def _open_push(client: httpx.Client, statement: str) -> int:
    with client.stream("POST", "/query-stream", json={"sql": statement}) as answer:
        return answer.status_code


def _answering_ok():
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    async def answer(request):
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST", "OPTIONS"])])


def test_authentication_roles_skip_paths_and_realm_from_the_config(tmp_path) -> None:
    users = tmp_path / "users"
    users.write_text("fred: letmein, admin\nann: secret, viewer\nbob: pw\n")
    config = _config({"authentication.method": "BASIC",
                      "authentication.roles": "admin,ops",
                      "authentication.skip.paths": "/info,/status/*",
                      "authentication.realm": "KsqlServer-Props"})
    auth = BasicAuth.from_file(users)
    auth = dataclasses.replace(auth, open_paths=config.open_paths(), allowed_roles=config.allowed_roles(),
                               realm=config.realm)

    ok = _answering_ok()

    with TestClient(BasicAuthMiddleware(ok, auth)) as client:
        assert client.get("/info").status_code == 200 and client.get("/status/abc").status_code == 200
        assert client.get("/v1/metadata").status_code == 200  # ksqlDB's own open paths
        assert client.post("/ksql", auth=("fred", "letmein")).status_code == 200
        forbidden = client.post("/ksql", auth=("ann", "secret"))
        assert forbidden.status_code == 403 and forbidden.json()["error_code"] == 40300
        unknown = client.post("/ksql")
        assert unknown.status_code == 401 and unknown.headers["www-authenticate"] == 'Basic realm="KsqlServer-Props"'
    assert _config({"authentication.roles": "**"}).allowed_roles() is None
    assert _config({"authentication.roles": "admin,*"}).allowed_roles() == frozenset({"admin"})
    with TestClient(BasicAuthMiddleware(ok, dataclasses.replace(auth, allowed_roles=None))) as client:
        assert client.post("/ksql", auth=("bob", "pw")).status_code == 200  # no role needed
