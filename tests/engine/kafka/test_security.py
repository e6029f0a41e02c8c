"""Kafka client security properties: ksqlDB's (Java client) names checked and mapped once."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.components.certificates import make_pki
from engine.errors import KafkaClientError
from engine.kafka.client import client_config
from engine.kafka.security import (
    KafkaSecurity,
    configure,
    security_for,
    split_security,
    use_registry_security,
    use_security,
)

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _sasl(pki, **extra: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="alice" password="s3cr;et \\"x\\"";',
        "ssl.truststore.location": str(pki.ca),
        **extra,
    }


def test_sasl_ssl_with_a_pem_truststore_maps_to_librdkafka_names(pki) -> None:
    security = KafkaSecurity.from_properties(_sasl(pki))
    assert security.librdkafka() == {
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": 's3cr;et "x"',
        "ssl.ca.location": str(pki.ca),
    }
    # The Java clients get the names as given, the store type made explicit (the file is PEM).
    assert security.java()["ssl.truststore.type"] == "PEM"
    assert security.spark_options()["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert set(security.spark_options()) == {f"kafka.{k}" for k in security.java()}


def test_the_ksql_streams_prefixed_property_wins_and_the_rest_stays(pki, tmp_path: Path) -> None:
    other = tmp_path / "other.pem"
    other.write_bytes(pki.ca.read_bytes())
    rest, security = split_security({
        "ksql.service.id": "svc",
        "ssl.truststore.location": str(other),
        "ksql.streams.ssl.truststore.location": str(pki.ca),
        "security.protocol": "SSL",
        "ksql.streams.auto.offset.reset": "earliest",
    })
    assert rest == {"ksql.service.id": "svc", "ksql.streams.auto.offset.reset": "earliest"}
    assert security == {"ssl.truststore.location": str(pki.ca), "security.protocol": "SSL"}


def test_a_pkcs12_client_keystore_and_a_pkcs12_truststore(pki) -> None:
    security = KafkaSecurity.from_properties({
        "security.protocol": "SSL",
        "ssl.truststore.location": str(pki.client_keystore),  # its CA certificate is in it
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.password": pki.password,
        "ssl.keystore.location": str(pki.client_keystore),
        "ssl.keystore.password": pki.password,
        "ssl.endpoint.identification.algorithm": "",
    })
    mapped = security.librdkafka()
    assert mapped["ssl.keystore.location"] == str(pki.client_keystore)
    assert mapped["ssl.keystore.password"] == pki.password
    assert mapped["ssl.ca.pem"].count("BEGIN CERTIFICATE") == 2  # the client's and the CA's
    assert mapped["ssl.endpoint.identification.algorithm"] == "none"
    assert security.java()["ssl.keystore.type"] == "PKCS12"  # found from the file


def test_a_pem_keystore_gives_librdkafka_the_key_and_the_certificate(pki) -> None:
    mapped = KafkaSecurity.from_properties({
        "security.protocol": "SSL", "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.client_pem),
        "ssl.truststore.location": str(pki.ca),
    }).librdkafka()
    assert mapped["ssl.key.location"] == mapped["ssl.certificate.location"] == str(pki.client_pem)


@pytest.mark.parametrize(("properties", "message"), [
    ({"security.protocol": "SASL_TLS"},
     "Invalid value for 'security.protocol': 'SASL_TLS'; expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."),
    ({"ssl.truststore.location": "/x"}, "'ssl.truststore.location' is set but 'security.protocol' is not"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": "x required;"},
     "Unsupported value for 'sasl.mechanism': 'GSSAPI'"),
    ({"security.protocol": "SASL_SSL", "sasl.jaas.config": f'{SCRAM} required username="a" password="b";'},
     "Unsupported value for 'sasl.mechanism': 'GSSAPI' (the Java client default)"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
     "'security.protocol' is SASL_SSL but 'sasl.jaas.config' is not set"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{SCRAM} required username="a" password="b";'},
     f"'sasl.jaas.config' names the login module {SCRAM}, but 'sasl.mechanism' PLAIN needs {PLAIN}."),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": f'{PLAIN} required username="a";'}, "'sasl.jaas.config' has no password=\"...\" option."),
    ({"security.protocol": "SSL", "sasl.mechanism": "PLAIN"},
     "'sasl.mechanism' is set but 'security.protocol' is SSL: SASL settings need SASL_SSL or SASL_PLAINTEXT."),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "ssl.truststore.location": "/x",
      "sasl.jaas.config": f'{PLAIN} required username="a" password="b";'},
     "'ssl.truststore.location' is set but 'security.protocol' is SASL_PLAINTEXT"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nowhere/ca.pem"},
     "'ssl.truststore.location' names /nowhere/ca.pem, which is not a readable file."),
    ({"security.protocol": "SSL", "ssl.trustmanager.algorithms": "PKIX"},
     "Unknown Kafka security property 'ssl.trustmanager.algorithms'"),
    ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "http"},
     "Invalid value for 'ssl.endpoint.identification.algorithm': 'http'"),
])
def test_bad_or_contradictory_settings_name_the_property(properties: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaClientError) as raised:
        KafkaSecurity.from_properties(properties)
    assert str(raised.value).startswith(message)
    assert "\n" not in str(raised.value)


def test_a_jks_store_is_refused_with_the_conversion_to_make(pki, tmp_path: Path) -> None:
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))  # a JKS file's magic number
    with pytest.raises(KafkaClientError, match="is a JKS store, which kspark's librdkafka clients cannot read: "
                                               "convert it with keytool -importkeystore"):
        KafkaSecurity.from_properties({"security.protocol": "SSL", "ssl.truststore.location": str(jks)})


def test_a_wrong_truststore_password_is_one_line_without_the_password(pki) -> None:
    with pytest.raises(KafkaClientError) as raised:
        KafkaSecurity.from_properties({
            "security.protocol": "SSL", "ssl.truststore.location": str(pki.client_keystore),
            "ssl.truststore.type": "PKCS12", "ssl.truststore.password": "not-it",
        })
    assert "does not open as a PKCS12 store" in str(raised.value) and "not-it" not in str(raised.value)


def test_secrets_stay_out_of_repr_and_errors(pki) -> None:
    security = KafkaSecurity.from_properties(_sasl(pki))
    assert "s3cr" not in repr(security) and "sasl.jaas.config=[hidden]" in repr(security)
    with pytest.raises(KafkaClientError) as raised:
        KafkaSecurity.from_properties(_sasl(pki, **{"sasl.jaas.config": "password=hunter2 nonsense"}))
    assert "hunter2" not in str(raised.value)


def test_configure_uses_the_settings_for_that_cluster_only(pki) -> None:
    try:
        rest = configure("secured:9093", {"ksql.service.id": "x", **_sasl(pki)},
                         ["sasl.mechanism=SCRAM-SHA-512", f"ssl.truststore.location={pki.ca}"])
        assert rest == {"ksql.service.id": "x"}
        assert client_config("secured:9093")["sasl.username"] == "alice"
        assert "sasl.username" not in client_config("plain:9092")
    finally:
        use_security("secured:9093", None)
    assert not security_for("secured:9093")


@pytest.mark.parametrize(("pair", "message"), [
    ("client.id=x", "--kafka-conf takes Kafka security properties (security.protocol, sasl.*, ssl.*); "
                    "'client.id' is not one."),
    ("security.protocol", "--kafka-conf takes KEY=VALUE, got 'security.protocol'."),
])
def test_kafka_conf_takes_security_properties_only(pair: str, message: str) -> None:
    with pytest.raises(KafkaClientError, match="^" + message.replace("*", r"\*").replace("(", r"\(")
                       .replace(")", r"\)").replace(".", r"\.") + "$"):
        configure("x:1", {}, [pair])


def test_a_properties_file_with_the_jaas_config_over_several_lines(pki, tmp_path: Path) -> None:
    from engine.server.cli import read_config

    path = tmp_path / "ksql-server.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=PLAIN\n"
        "sasl.jaas.config=\\\n"
        f"    {PLAIN} required \\\n"
        '    username="ksql" \\\n'
        '    password="pw";\n'
        f"ssl.truststore.location={pki.ca}\n"
        "ksql.service.id=svc\n"
    )
    properties = read_config(str(path))
    assert properties["sasl.jaas.config"] == f'{PLAIN} required username="ksql" password="pw";'
    assert properties["ksql.service.id"] == "svc"
    mapped = KafkaSecurity.from_properties(properties).librdkafka()
    assert (mapped["sasl.username"], mapped["sasl.password"]) == ("ksql", "pw")


def test_the_registry_client_takes_its_own_basic_auth_and_truststore(pki) -> None:
    from engine.kafka.security import RegistrySecurity, registry_security_for

    url = "https://registry.example:8081"
    try:
        rest = configure("x:1", {
            "ksql.schema.registry.url": url,
            "ksql.schema.registry.basic.auth.credentials.source": "USER_INFO",
            "ksql.schema.registry.basic.auth.user.info": "bob:pw",
            "ksql.schema.registry.ssl.truststore.location": str(pki.client_keystore),
            "ksql.schema.registry.ssl.truststore.password": pki.password,
        })
        assert rest == {"ksql.schema.registry.url": url}
        conf = registry_security_for(url).client_config()
        assert conf["basic.auth.user.info"] == "bob:pw"
        assert Path(conf["ssl.ca.location"]).read_text().count("BEGIN CERTIFICATE") == 2  # from the PKCS12 store
        assert "bob:pw" not in repr(registry_security_for(url))
    finally:
        use_registry_security(url, None)
    with pytest.raises(KafkaClientError, match="^'ksql.schema.registry.basic.auth.user.info' must be USER:PASSWORD.$"):
        RegistrySecurity.from_properties({"ksql.schema.registry.basic.auth.user.info": "nocolon"})
    with pytest.raises(KafkaClientError, match="^Unknown schema registry property 'ksql.schema.registry.ssl.keystore.pw'"):
        RegistrySecurity.from_properties({"ksql.schema.registry.ssl.keystore.pw": "x"})
    with pytest.raises(KafkaClientError, match="^'ksql.schema.registry.ssl.truststore.location' names /no.pem, "):
        RegistrySecurity.from_properties({"ksql.schema.registry.ssl.truststore.location": "/no.pem"})
    with pytest.raises(KafkaClientError, match="^'ksql.schema.registry.basic.auth.user.info' is set but "
                                               "'ksql.schema.registry.url' is not.$"):
        configure("x:1", {"ksql.schema.registry.basic.auth.user.info": "a:b"})
