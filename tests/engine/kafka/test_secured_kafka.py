"""kspark against a secured broker: SASL_SSL (SCRAM-SHA-512, PLAIN, OAUTHBEARER with unsecured tokens
and with OIDC tokens from a token endpoint) and SSL with client certificates (PKCS12 and JKS stores).

The broker's secured listeners accept no client without the right properties, so every client
kspark makes (admin, producers, consumers, PRINT, INSERT VALUES, Spark's Kafka source, the
transactional writer in the executors, the command log and the metastore) shows here whether
it got them. The persistent-query and server tests take minutes on a loaded machine: they run
in ``nox -s secured_kafka``; the client and error tests run in the suite.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.cli import main
from engine.components.broker import Broker
from engine.components.kspark_server import ServerProcess
from engine.components.oidc import OidcProvider
from engine.kafka import ProducerRecord, TopicAdmin, produce, read_topic
from engine.kafka.security import configure, use_security

PASSWORD = "kspark-secret"  # BrokerSecurity's default: never printed
OIDC_SECRET = "kspark-oidc-secret"  # the oidc_provider fixture's client's: never printed
JKS_PASSWORDS = ("jks-trust-pw", "jks-store-pw", "jks-key-pw")
SECRETS = (PASSWORD, OIDC_SECRET, *JKS_PASSWORDS)
OAUTH_LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
# Each way in to the secured broker: (listener, how the client authenticates).
KINDS = ("SCRAM-SHA-512", "PLAIN", "OAUTHBEARER", "OIDC", "SSL", "SSL-JKS")


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def _conf(properties: dict[str, str]) -> list[str]:
    return [arg for key, value in properties.items() for arg in ("--kafka-conf", f"{key}={value}")]


def _properties_file(path: Path, properties: dict[str, str]) -> Path:
    """A ksqlDB-style properties file, ``sasl.jaas.config`` split over lines as ksqlDB's docs write it."""
    lines = []
    for key, value in properties.items():
        if key == "sasl.jaas.config":
            module, rest = value.split(" required ", 1)
            lines.append(f"{key}=\\\n    {module} required \\\n    {rest}")
        else:
            lines.append(f"{key}={value}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _keytool(*args: str) -> None:
    subprocess.run(["keytool", "-noprompt", *args], check=True, capture_output=True, stdin=subprocess.DEVNULL)


def _jks_stores(broker: Broker) -> tuple[Path, Path]:
    """A JKS truststore of the broker's CA and a JKS key store of its client certificate, as a
    Java user has them (the key's password differs from the store's); made once per broker."""
    trust, key = broker.directory / "pki" / "truststore.jks", broker.directory / "pki" / "client.jks"
    if not key.exists():
        pki = broker.pki
        _keytool("-importcert", "-alias", "ca", "-file", str(pki.ca), "-keystore", str(trust),
                 "-storetype", "JKS", "-storepass", JKS_PASSWORDS[0])
        _keytool("-importkeystore", "-srckeystore", str(pki.client_keystore), "-srcstoretype", "PKCS12",
                 "-srcstorepass", pki.password, "-destkeystore", str(key), "-deststoretype", "JKS",
                 "-deststorepass", JKS_PASSWORDS[1], "-destkeypass", JKS_PASSWORDS[2])
    return trust, key


def _client(broker: Broker, kind: str, oidc: OidcProvider | None = None) -> tuple[str, dict[str, str]]:
    """The bootstrap servers and the Kafka client properties (Java names) of a client of ``kind``."""
    if kind in ("SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"):  # OAUTHBEARER: an unsecured token
        return broker.secured_bootstrap_servers("SASL_SSL"), broker.client_properties("SASL_SSL", mechanism=kind)
    if kind == "SSL":
        return broker.secured_bootstrap_servers("SSL"), broker.client_properties("SSL")
    if kind == "SSL-JKS":
        trust, key = _jks_stores(broker)
        return broker.secured_bootstrap_servers("SSL"), {
            "security.protocol": "SSL",
            "ssl.truststore.location": str(trust), "ssl.truststore.password": JKS_PASSWORDS[0],
            "ssl.keystore.location": str(key), "ssl.keystore.type": "JKS",
            "ssl.keystore.password": JKS_PASSWORDS[1], "ssl.key.password": JKS_PASSWORDS[2],
        }
    assert kind == "OIDC" and oidc is not None
    client = next(name for name, secret in oidc.clients.items() if secret == OIDC_SECRET)
    return broker.secured_bootstrap_servers("OIDC"), {
        "security.protocol": "SASL_SSL",
        "ssl.truststore.location": str(broker.pki.ca),
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": OIDC_HANDLER,
        "sasl.oauthbearer.token.endpoint.url": oidc.token_endpoint_url,
        "sasl.jaas.config": f'{OAUTH_LOGIN} required clientId="{client}" clientSecret="{OIDC_SECRET}" '
                            'scope="kafka";',
    }


@pytest.mark.parametrize("kind", KINDS)
def test_admin_produce_consume_insert_values_and_print_on_each_secured_listener(
    secured_kafka_broker: Broker, oidc_provider: OidcProvider, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    bootstrap, properties = _client(secured_kafka_broker, kind, oidc_provider)
    topic = _unique("people")
    try:
        configure(bootstrap, properties)
        TopicAdmin(bootstrap).create_topic(topic, 1)
        produce(bootstrap, topic, [ProducerRecord(key=b"1", value=b'{"NAME": "ann"}', timestamp=1_000)])
        assert [r.value for r in read_topic(bootstrap, topic)] == [b'{"NAME": "ann"}']
    finally:
        use_security(bootstrap, None)  # the commands below take the properties themselves

    sql = Path(secured_kafka_broker.directory / f"{topic}.sql")
    sql.write_text(f"CREATE STREAM P (ID STRING KEY, NAME STRING) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON');")
    args = ["query", "--bootstrap-servers", bootstrap, *_conf(properties), "--sql", str(sql)]
    assert main([*args, "INSERT INTO P (ID, NAME) VALUES ('2', 'bob');"]) == 0
    assert main([*args, f"PRINT '{topic}' FROM BEGINNING LIMIT 2;"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert 'key: 1, value: {"NAME": "ann"}, partition: 0' in out  # produced by the test
    assert 'key: 2, value: {"NAME":"bob"}, partition: 0' in out  # by INSERT VALUES
    for secret in SECRETS:
        assert secret not in captured.out + captured.err


@pytest.mark.parametrize("case", ["wrong password", "wrong OIDC client secret", "no security",
                                  "no client certificate"])
def test_a_refused_client_fails_within_seconds_in_one_line_without_the_secret(
    secured_kafka_broker: Broker, oidc_provider: OidcProvider, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    if case == "wrong password":
        bootstrap = secured_kafka_broker.secured_bootstrap_servers("SASL_SSL")
        conf = _conf(secured_kafka_broker.client_properties("SASL_SSL", password="not-the-password"))
        expected = "the broker refused the credentials"
    elif case == "wrong OIDC client secret":  # the token endpoint refuses: said before any broker is asked
        bootstrap, properties = _client(secured_kafka_broker, "OIDC", oidc_provider)
        properties["sasl.jaas.config"] = properties["sasl.jaas.config"].replace(OIDC_SECRET, "not-the-password")
        conf = _conf(properties)
        expected = "no OAUTHBEARER token could be had"
    elif case == "no security":
        bootstrap, conf = secured_kafka_broker.secured_bootstrap_servers("SASL_SSL"), []
        expected = ""
    else:
        bootstrap = secured_kafka_broker.secured_bootstrap_servers("SSL")
        conf = _conf({k: v for k, v in secured_kafka_broker.client_properties("SSL").items()
                      if not k.startswith("ssl.keystore.")})
        expected = "the TLS handshake failed"
    started = time.monotonic()
    code = main(["query", "--bootstrap-servers", bootstrap, *conf, "--timeout", "5" if not expected else "30",
                 "PRINT 'x';"])
    elapsed = time.monotonic() - started
    err = capsys.readouterr().err.splitlines()
    assert code == 1 and len(err) == 1, err
    if expected:  # refused: at once
        assert err[0].startswith(f"kspark: KafkaClientError: Cannot connect to the Kafka broker at {bootstrap}: {expected}")
    else:  # a proxy whose broker is away looks the same: said when the time is up
        assert err[0].startswith(f"kspark: KafkaClientError: Cannot reach the Kafka broker at {bootstrap} within 5 s")
        assert err[0].endswith("(the broker closed every connection before its first answer: does its listener "
                               "speak another protocol than security.protocol says?).")
    assert "not-the-password" not in err[0] and PASSWORD not in err[0]
    assert elapsed < 10, f"{case}: {elapsed:.1f} s"


def test_a_bad_property_is_one_line_before_any_connection(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["query", "--bootstrap-servers", "127.0.0.1:1", "--kafka-conf", "security.protocol=SASL_SSL",
                 "--kafka-conf", "sasl.mechanism=SCRAM-SHA-512", "PRINT 'x';"])
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [
        "kspark: KafkaClientError: 'security.protocol' is SASL_SSL but 'sasl.jaas.config' is not set: give the "
        'user as org.apache.kafka.common.security.scram.ScramLoginModule required username="..." password="...";'
    ]


@pytest.mark.secured_kafka
@pytest.mark.parametrize("kind", ["SCRAM-SHA-512", "OAUTHBEARER", "OIDC", "SSL-JKS"])
def test_kspark_run_of_a_stateful_query_over_a_secured_listener_is_exact(
    secured_kafka_broker: Broker, oidc_provider: OidcProvider, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    kind: str
) -> None:
    """Spark's Kafka source and the transactional writer in the executors (the Java client) and
    the librdkafka clients, over SCRAM-SHA-512, unsecured and OIDC OAUTHBEARER, and SSL with
    JKS stores: the counts read back read_committed are exact; no secret is in a file of the
    state dir or in the output."""
    bootstrap, properties = _client(secured_kafka_broker, kind, oidc_provider)
    tokens = oidc_provider.issued.total()
    source, sink = _unique("clicks"), _unique("counts")
    config = _properties_file(tmp_path / "kafka.properties", properties)
    total = 300
    try:
        configure(bootstrap, properties)
        TopicAdmin(bootstrap).create_topic(source, 2)
        produce(bootstrap, source, [
            ProducerRecord(key=f"u{i % 7}".encode(), value=json.dumps({"N": i}).encode(), timestamp=1_000 + i)
            for i in range(total)
        ])
    finally:
        use_security(bootstrap, None)
    sql = tmp_path / "q.sql"
    sql.write_text(f"""
        SET 'auto.offset.reset'='earliest';
        CREATE STREAM CLICKS (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='{source}', VALUE_FORMAT='JSON');
        CREATE TABLE COUNTS WITH (KAFKA_TOPIC='{sink}', PARTITIONS=2) AS
            SELECT ID, COUNT(*) AS C, SUM(N) AS S FROM CLICKS GROUP BY ID EMIT CHANGES;
    """)
    state = tmp_path / "state"
    code = main(["run", str(sql), "--bootstrap-servers", bootstrap, "--state-dir", str(state),
                 "--config", str(config), "--until-caught-up"])
    assert code == 0, capsys.readouterr().err
    try:
        configure(bootstrap, properties)
        latest: dict[bytes, Any] = {}
        for record in read_topic(bootstrap, sink):  # read_committed
            latest[record.key] = json.loads(record.value)
    finally:
        use_security(bootstrap, None)
    expected = {f"u{k}".encode(): {"C": len(range(k, total, 7)), "S": sum(range(k, total, 7))} for k in range(7)}
    assert latest == expected
    if kind == "OIDC":  # librdkafka's clients and the Java ones fetched their tokens
        assert oidc_provider.issued.total() > tokens
    captured = capsys.readouterr()
    for secret in SECRETS:
        assert secret not in captured.out + captured.err
        for path in state.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


@pytest.mark.secured_kafka
@pytest.mark.parametrize("kind", ["SCRAM-SHA-512", "OIDC", "SSL-JKS"])
def test_a_server_with_its_metastore_push_query_and_insert_values_over_a_secured_listener(
    secured_kafka_broker: Broker, oidc_provider: OidcProvider, tmp_path: Path, kind: str
) -> None:
    """``kspark server --config FILE`` with the security properties: the command log and the
    metastore tables, a persistent query, INSERT VALUES and a push query all on SASL_SSL
    (SCRAM-SHA-512, or OAUTHBEARER with OIDC tokens) or on SSL with the client certificate
    in JKS stores."""
    bootstrap, properties = _client(secured_kafka_broker, kind, oidc_provider)
    config = _properties_file(tmp_path / "server.properties", {
        "ksql.streams.auto.offset.reset": "earliest", **properties,
    })
    service_id = _unique("sec")
    log = tmp_path / "server.log"
    server = ServerProcess(bootstrap, service_id, tmp_path / "state", log=log,
                           args=("--spark-master", "local[1]", "--config", str(config)))
    url = server.start()
    try:
        def ksql(statement: str) -> Any:
            answer = httpx.post(f"{url}/ksql", json={"ksql": statement,
                                                     "streamsProperties": {"auto.offset.reset": "earliest"}},
                                timeout=180)
            assert answer.status_code == 200, answer.text
            return answer.json()

        ksql(f"CREATE STREAM SRC (ID STRING KEY, N INT) WITH (KAFKA_TOPIC='src_{service_id}', "
             "VALUE_FORMAT='JSON', PARTITIONS=1);")
        ksql(f"CREATE STREAM BIG WITH (KAFKA_TOPIC='big_{service_id}') AS SELECT ID, N FROM SRC WHERE N > 1;")
        for n in range(5):
            ksql(f"INSERT INTO SRC (ID, N) VALUES ('k{n}', {n});")
        body = {"sql": "SELECT ID, N FROM BIG EMIT CHANGES LIMIT 3;", "properties": {"auto.offset.reset": "earliest"}}
        with httpx.stream("POST", f"{url}/query-stream", json=body, timeout=300,
                          headers={"Accept": "application/vnd.ksqlapi.delimited.v1"}) as response:
            assert response.status_code == 200
            lines = [json.loads(line) for line in response.iter_lines() if line.strip()]
        assert sorted(row[1] for row in lines[1:]) == [2, 3, 4]
        shown = ksql("SHOW STREAMS;")
        assert {"SRC", "BIG"} <= {s["name"] for s in shown[0]["streams"]}
    finally:
        assert server.stop() == 0
    for secret in SECRETS:
        assert secret not in log.read_text(errors="replace")
        for path in (tmp_path / "state").rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("command", ["run", "query", "server", "metastore migrate", "import-command-topic"])
def test_every_command_that_talks_to_kafka_takes_kafka_conf(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sql = tmp_path / "q.sql"
    sql.write_text("PRINT 'x';")
    args = {
        "run": ["run", str(sql), "--bootstrap-servers", "127.0.0.1:1", "--state-dir", str(tmp_path / "s")],
        "query": ["query", "--bootstrap-servers", "127.0.0.1:1", "PRINT 'x';"],
        "server": ["server", "--bootstrap-servers", "127.0.0.1:1", "--service-id", "x", "--state-dir", str(tmp_path)],
        "metastore migrate": ["metastore", "migrate", "--bootstrap-servers", "127.0.0.1:1", "--service-id", "x"],
        "import-command-topic": ["import-command-topic", "--from-bootstrap-servers", "127.0.0.1:1",
                                 "--ksqldb-service-id", "k", "--service-id", "x"],
    }[command]
    code = main([*args, "--kafka-conf", "ssl.truststore.location=/nowhere.pem"])
    err = capsys.readouterr().err.splitlines()
    assert code != 0 and len(err) == 1, err
    assert err[0].endswith("'ssl.truststore.location' is set but 'security.protocol' is not (PLAINTEXT): set "
                           "security.protocol to SSL, SASL_SSL or SASL_PLAINTEXT.")


@pytest.mark.long
def test_kspark_broker_start_secured_writes_client_properties_that_connect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = tmp_path / "broker"
    try:
        assert main(["broker", "start", "--dir", str(directory), "--secured"]) == 0
        out = capsys.readouterr().out.splitlines()
        listeners = {line.split(".", 1)[0]: line.split("=", 1)[1].split(" ")[0]
                     for line in out if ".bootstrap.servers=" in line}
        assert set(listeners) == {"sasl_ssl", "ssl"}
        for listener, bootstrap in listeners.items():
            conf = directory / f"client-{listener}.properties"
            assert conf.stat().st_mode & 0o077 == 0  # the password is for the service's user only
            code = main(["query", "--bootstrap-servers", bootstrap, "--config", str(conf), "PRINT 'nope';"])
            assert code == 1  # connected and asked: the topic is not there
            assert capsys.readouterr().err.splitlines() == ["kspark: KafkaClientError: Topic 'nope' does not exist."]
    finally:
        main(["broker", "stop", "--dir", str(directory)])
