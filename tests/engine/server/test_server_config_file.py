"""``kspark server --config ksql-server.properties``: a ksqlDB server's own settings work as in
ksqlDB (listeners, HTTPS from JKS stores, client certificates, basic authentication with roles,
CORS, the push-query limit), refused values are one line naming the property."""

from __future__ import annotations

import ssl
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from engine.components.kspark_server import ServerProcess
from engine.components.process import HOST, free_port
from tests.engine.server.pki import key_stores


def _server(tmp_path: Path, config: str, *extra: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "ksql-server.properties"
    path.write_text(config)
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "server", "--bootstrap-servers", "127.0.0.1:1", "--service-id", "x",
         "--state-dir", str(tmp_path / "state"), "--config", str(path), *extra],
        capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize(("config", "extra", "message"), [
    ("authentication.method=DIGEST\n", (),
     "kspark: {path}: Invalid value DIGEST for configuration authentication.method: String must be one of: "
     "NONE, BASIC"),
    ("listeners=tcp://0.0.0.0:8088\n", (), "kspark: {path}: Invalid URI scheme should be http or https: "
     "tcp://0.0.0.0:8088"),
    ("ksql.max.push.queries=-5\n", (),
     "kspark: {path}: Invalid value -5 for configuration ksql.max.push.queries: Not >= 0"),
    ("listeners=https://127.0.0.1:8443\n", (), "kspark: https listener specified but no keystore provided"),
    ("authentication.method=BASIC\n", (), "kspark: authentication.method is BASIC: kspark server reads its "
     "users and passwords from --auth-file FILE (the realm file ksqlDB's JAAS PropertyFileLoginModule reads)."),
])
def test_a_server_setting_ksqldb_refuses_stops_the_server_with_one_line(tmp_path, config, extra, message) -> None:
    done = _server(tmp_path, config, *extra)
    assert done.returncode == 2
    assert done.stderr.strip() == message.format(path=tmp_path / "ksql-server.properties")


def test_the_listeners_tls_settings_do_not_reach_kafka_over_plaintext(tmp_path) -> None:
    """A ksqlDB config with an HTTPS listener and a PLAINTEXT Kafka: the key store is the listener's,
    not refused as a Kafka TLS setting without security.protocol; the server goes on to Kafka."""
    done = _server(tmp_path, "ssl.keystore.location=/nowhere.jks\nssl.keystore.password=pw\n"
                             "ssl.client.authentication=NONE\n")
    assert done.returncode == 1
    assert "security.protocol" not in done.stderr and "ssl." not in done.stderr
    assert done.stderr.startswith("kspark: ")


def test_the_command_line_wins_over_the_file(tmp_path) -> None:
    import argparse

    from engine.server.auth import BasicAuth
    from engine.server.cli import _listeners, _with_config
    from engine.server.rest_config import Listener, RestConfig

    rest = RestConfig.from_properties({"listeners": "https://0.0.0.0:8443,http://0.0.0.0:8088",
                                       "authentication.method": "NONE", "authentication.roles": "admin"})
    given = argparse.Namespace(listen="127.0.0.1:9000")
    assert _listeners(given, rest, flags_tls=False) == (Listener("https", "127.0.0.1", 9000),)  # the file's scheme
    assert _listeners(argparse.Namespace(listen=None), rest, flags_tls=False) == rest.listeners
    empty = RestConfig.from_properties({})
    assert _listeners(argparse.Namespace(listen=None), empty, flags_tls=False) == (Listener("http", "127.0.0.1", 8088),)
    assert _listeners(given, empty, flags_tls=True) == (Listener("https", "127.0.0.1", 9000),)
    users = tmp_path / "users"
    users.write_text("fred: letmein, admin\n")
    auth = _with_config(BasicAuth.from_file(users), rest)  # --auth-file turns authentication on
    assert auth is not None and auth.allowed_roles == frozenset({"admin"})


def test_tls_options_win_over_the_files_key_store(tmp_path, jks) -> None:
    """--tls-cert/--tls-key serve the file's https listener: no key store is asked for, and the
    start goes on to Kafka (here: none, so it stops there)."""
    done = _server(tmp_path, f"listeners=https://{HOST}:{free_port()}\n", "--tls-cert", str(jks["server.pem"]),
                   "--tls-key", str(jks["server.key"]))
    assert done.returncode == 1
    assert "keystore" not in done.stderr and done.stderr.startswith("kspark: ")


# ---------------------------------------------------------------- a real server


@pytest.fixture(scope="module")
def jks(tmp_path_factory) -> dict[str, Path]:
    """A CA; the server's key and certificate for 127.0.0.1 in JKS and PKCS12 key stores (alias 'ksql');
    the CA in a JKS truststore; a client certificate signed by the CA."""
    return key_stores(tmp_path_factory.mktemp("jks"), alias="ksql")


@pytest.mark.long
@pytest.mark.system
def test_a_ksqldb_server_properties_file_runs_the_server(kafka_broker, tmp_path, jks) -> None:
    """listeners (https and http), ssl.keystore.* / ssl.truststore.* as JKS, ssl.client.authentication
    REQUESTED, authentication.method BASIC with roles and skip paths, access.control.allow.*, and
    ksql.max.push.queries, all from the file."""
    service_id = f"conf_{uuid.uuid4().hex[:8]}"
    users = tmp_path / "users"
    users.write_text("fred: letmein, admin\nann: secret, viewer\n")
    plain_port = free_port()
    trusted = ssl.create_default_context(cafile=str(jks["ca.pem"]))
    server = ServerProcess(kafka_broker.bootstrap_servers, service_id, tmp_path / "state", log=tmp_path / "s.log",
                           scheme="https", verify=trusted, listen=False,
                           args=("--spark-master", "local[1]", "--config", str(tmp_path / "ksql-server.properties"),
                                 "--auth-file", str(users)))
    (tmp_path / "ksql-server.properties").write_text(
        f"listeners=https://{HOST}:{server.port},http://{HOST}:{plain_port}\n"
        f"ssl.keystore.location={jks['server.jks']}\nssl.keystore.password=store-pw\nssl.key.password=store-pw\n"
        "ssl.keystore.type=JKS\n"
        f"ssl.truststore.location={jks['trust.jks']}\nssl.truststore.password=trust-pw\n"
        "ssl.client.authentication=REQUESTED\nssl.enabled.protocols=TLSv1.2,TLSv1.3\n"
        "authentication.method=BASIC\nauthentication.realm=KsqlServer-Props\nauthentication.roles=admin\n"
        "authentication.skip.paths=/info\n"
        "access.control.allow.origin=https://*.example.com\naccess.control.allow.methods=GET,POST\n"
        "ksql.max.push.queries=1\n"
    )
    url = server.start()
    admin = ("fred", "letmein")
    try:
        with httpx.Client(base_url=url, verify=trusted, timeout=300) as client:
            assert client.get("/info").json()["KsqlServerInfo"]["kafkaClusterId"]  # a skipped path: no credentials
            assert client.post("/ksql", json={"ksql": "LIST STREAMS;"}).status_code == 401
            viewer = client.post("/ksql", json={"ksql": "LIST STREAMS;"}, auth=("ann", "secret"))
            assert viewer.status_code == 403  # a known user without one of authentication.roles
            created = client.post("/ksql", auth=admin, json={
                "ksql": f"CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{service_id}', "
                        "VALUE_FORMAT='JSON', PARTITIONS=1);"})
            assert created.status_code == 200, created.text
            preflight = client.options("/query-stream", headers={"Origin": "https://app.example.com",
                                                                 "Access-Control-Request-Method": "POST"})
            assert preflight.status_code == 204  # before authentication, as ksqlDB's CORS filter
            assert preflight.headers["access-control-allow-methods"] == "GET,POST"
            statement = "SELECT * FROM S EMIT CHANGES;"
            with client.stream("POST", "/query-stream", json={"sql": statement}, auth=admin,
                               headers={"Origin": "https://app.example.com"}) as first:
                assert first.status_code == 200
                assert first.headers["access-control-allow-origin"] == "https://app.example.com"
                refused = client.post("/query-stream", json={"sql": statement}, auth=admin)
                assert refused.status_code == 400
                assert "increase the 'ksql.max.push.queries' setting" in refused.json()["message"]
        with_certificate = ssl.create_default_context(cafile=str(jks["ca.pem"]))
        with_certificate.load_cert_chain(str(jks["client.pem"]), str(jks["client.key"]))
        assert httpx.get(f"{url}/info", verify=with_certificate, timeout=30).status_code == 200
        plain = httpx.get(f"http://{HOST}:{plain_port}/info", timeout=30)  # the http listener: no TLS
        assert plain.status_code == 200
    finally:
        server.stop()
    log = (tmp_path / "s.log").read_text()
    assert f"listening on https://{HOST}:{server.port}, http://{HOST}:{plain_port}" in log
    assert "store-pw" not in log and "trust-pw" not in log


@pytest.mark.long
def test_ksql_server_command_response_timeout_ms_bounds_the_wait_for_a_statements_command(
        kafka_broker, tmp_path) -> None:
    """ksqlDB's DistributingExecutor: a statement whose command this server has not applied within
    ksql.server.command.response.timeout.ms is answered QUEUED; it is applied all the same."""
    from engine.server.service import KsqlService

    service_id = f"crt_{uuid.uuid4().hex[:8]}"
    service = KsqlService(kafka_broker.bootstrap_servers, service_id, tmp_path,
                          properties={"ksql.server.command.response.timeout.ms": "0"}, run_queries=False)
    service.start()
    try:
        answer = service.execute(f"CREATE STREAM S (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{service_id}', "
                                 "VALUE_FORMAT='JSON', PARTITIONS=1);")
        assert answer[0]["commandStatus"] == {"status": "QUEUED", "message": "Statement written to command topic",
                                              "queryId": None}
        service.wait_for_sequence(answer[0]["commandSequenceNumber"], 60)
        assert [s["name"] for s in service.execute("SHOW STREAMS;")[0]["streams"]] == ["S"]
    finally:
        service.close()
