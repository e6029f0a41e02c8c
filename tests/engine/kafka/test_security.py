"""Kafka client security properties: ksqlDB's (Java client) names checked and mapped once."""

from __future__ import annotations

import shutil
import subprocess
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


def _keytool(*args: str) -> None:
    subprocess.run(["keytool", *args], check=True, capture_output=True, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def jks(pki, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """JKS stores made with keytool from the PKI: a truststore of the CA, a key store of the
    client's key whose key password differs from the store's, and one of certificates only."""
    directory = tmp_path_factory.mktemp("jks")
    stores = {"trust": directory / "truststore.jks", "key": directory / "keystore.jks",
              "nokey": directory / "certificates.jks"}
    _keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(pki.ca), "-keystore", str(stores["trust"]),
             "-storetype", "JKS", "-storepass", "trust-pw")
    _keytool("-importkeystore", "-noprompt", "-srckeystore", str(pki.client_keystore), "-srcstoretype", "PKCS12",
             "-srcstorepass", pki.password, "-destkeystore", str(stores["key"]), "-deststoretype", "JKS",
             "-deststorepass", "store-pw", "-destkeypass", "key-pw")
    shutil.copy(stores["trust"], stores["nokey"])
    return stores


def _jks_ssl(jks: dict[str, Path], **extra: str) -> dict[str, str]:
    return {
        "security.protocol": "SSL",
        "ssl.truststore.location": str(jks["trust"]), "ssl.truststore.password": "trust-pw",
        "ssl.keystore.location": str(jks["key"]), "ssl.keystore.password": "store-pw", "ssl.key.password": "key-pw",
        **extra,
    }


def test_jks_stores_go_to_the_java_clients_as_they_are_and_to_librdkafka_converted(jks, pki) -> None:
    from cryptography.hazmat.primitives.serialization import pkcs12

    security = KafkaSecurity.from_properties(_jks_ssl(jks))  # no types: found from the files
    java = security.java()
    assert (java["ssl.truststore.type"], java["ssl.keystore.type"]) == ("JKS", "JKS")
    assert java["ssl.keystore.location"] == str(jks["key"])
    mapped = security.librdkafka()
    assert mapped["ssl.ca.pem"].strip() == pki.ca.read_text().strip()
    copy = Path(mapped["ssl.keystore.location"])
    assert copy != jks["key"] and copy.suffix == ".p12"
    assert copy.stat().st_mode & 0o077 == 0 and copy.parent.stat().st_mode & 0o077 == 0
    assert mapped["ssl.keystore.password"] not in ("store-pw", "key-pw")
    store = pkcs12.load_pkcs12(copy.read_bytes(), mapped["ssl.keystore.password"].encode())
    assert store.key is not None and store.cert is not None
    assert "ssl.key.password" not in mapped  # the copy's key has the copy's password
    assert "store-pw" not in repr(security) and "key-pw" not in repr(security)


def test_an_explicit_jks_type_and_the_ksql_streams_prefix(jks) -> None:
    security = KafkaSecurity.from_properties({
        "ksql.streams.security.protocol": "SSL", "ksql.streams.ssl.truststore.type": "JKS",
        "ksql.streams.ssl.truststore.location": str(jks["trust"]),
        "ksql.streams.ssl.truststore.password": "trust-pw",
    })
    assert "BEGIN CERTIFICATE" in security.librdkafka()["ssl.ca.pem"]


@pytest.mark.parametrize(("change", "message"), [
    ({"ssl.truststore.password": "wrong-trust"},
     "'ssl.truststore.location' names {trust}, which does not open as a JKS store with 'ssl.truststore.password'."),
    ({"ssl.keystore.password": "wrong-store"},
     "'ssl.keystore.location' names {key}, which does not open as a JKS store with 'ssl.keystore.password'."),
    ({"ssl.key.password": "wrong-key"}, "'ssl.key.password' does not open the private key in {key}."),
    ({"ssl.keystore.location": "{nokey}", "ssl.keystore.password": "trust-pw"},
     "'ssl.keystore.location' names {nokey}, which holds no private key: a key store needs the client's key "
     "and certificate (a store of certificates only is a truststore)."),
    ({"ssl.keystore.location": "/nowhere/keystore.jks"},
     "'ssl.keystore.location' names /nowhere/keystore.jks, which is not a readable file."),
    ({"ssl.keystore.password": None},
     "'ssl.keystore.location' is a JKS store but 'ssl.keystore.password' is not set."),
    ({"ssl.truststore.type": "JKS", "ssl.truststore.location": "{pem}"},
     "'ssl.truststore.location' names {pem}, which is not a JKS store ('ssl.truststore.type' is JKS)."),
])
def test_a_bad_jks_store_is_one_line_without_a_password(jks, pki, change: dict[str, str | None],
                                                        message: str) -> None:
    names = {"trust": jks["trust"], "key": jks["key"], "nokey": jks["nokey"], "pem": pki.ca}
    properties = _jks_ssl(jks)
    for key, value in change.items():
        if value is None:
            properties.pop(key)
        else:
            properties[key] = value.format(**names)
    with pytest.raises(KafkaClientError) as raised:
        KafkaSecurity.from_properties(properties)
    text = str(raised.value)
    assert text == message.format(**names)
    for secret in ("trust-pw", "store-pw", "key-pw", "wrong-trust", "wrong-store", "wrong-key"):
        assert secret not in text


def test_the_registry_client_takes_a_jks_truststore(jks) -> None:
    from engine.kafka.security import RegistrySecurity

    conf = RegistrySecurity.from_properties({
        "ksql.schema.registry.ssl.truststore.location": str(jks["trust"]),
        "ksql.schema.registry.ssl.truststore.password": "trust-pw",
    }).client_config()
    assert Path(conf["ssl.ca.location"]).read_text().count("BEGIN CERTIFICATE") == 1
    with pytest.raises(KafkaClientError, match="^'ksql.schema.registry.ssl.truststore.location' names .*, which does "
                                               "not open as a JKS store with 'ksql.schema.registry.ssl.truststore"
                                               ".password'.$"):
        RegistrySecurity.from_properties({
            "ksql.schema.registry.ssl.truststore.location": str(jks["trust"]),
            "ksql.schema.registry.ssl.truststore.password": "nope",
        })


OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def _oauth(pki, jaas_options: str, **extra: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": f"{OAUTH} required {jaas_options};", "ssl.truststore.location": str(pki.ca), **extra,
    }


def test_oauthbearer_with_an_unsecured_token_maps_to_librdkafkas_unsecured_jwt(pki) -> None:
    security = KafkaSecurity.from_properties(_oauth(
        pki, 'unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope=",read,write" '
             'unsecuredLoginLifetimeSeconds="600" unsecuredLoginExtension_tenant="t1"'))
    mapped = security.librdkafka()
    assert mapped["sasl.mechanism"] == "OAUTHBEARER"
    assert mapped["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert mapped["sasl.oauthbearer.config"] == ("principalClaimName=sub principal=alice scopeClaimName=scope "
                                                 "scope=read,write lifeSeconds=600 extension_tenant=t1")
    assert "sasl.username" not in mapped
    assert security.java()["sasl.jaas.config"].startswith(OAUTH)  # the Java clients log in themselves


def test_oauthbearer_with_a_token_endpoint_maps_to_librdkafkas_oidc(pki) -> None:
    security = KafkaSecurity.from_properties(_oauth(
        pki, 'clientId="kspark" clientSecret="oidc-s3cret" scope="kafka" extension_logicalCluster="lkc-1"',
        **{"sasl.login.callback.handler.class": OIDC_HANDLER,
           "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
           "sasl.login.connect.timeout.ms": "5000"}))
    mapped = security.librdkafka()
    assert {k: v for k, v in mapped.items() if k.startswith("sasl.oauthbearer.")} == {
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
        "sasl.oauthbearer.client.id": "kspark",
        "sasl.oauthbearer.client.secret": "oidc-s3cret",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "logicalCluster=lkc-1",
    }
    assert "sasl.login.connect.timeout.ms" not in mapped  # Java only
    java = security.java()
    assert java["sasl.login.callback.handler.class"] == OIDC_HANDLER
    assert java["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/oauth2/token"
    assert "oidc-s3cret" not in repr(security)


@pytest.mark.parametrize(("jaas_options", "extra", "message"), [
    ("", {}, "'sasl.jaas.config' has no unsecuredLoginStringClaim_sub=\"...\" option: the unsecured OAUTHBEARER "
             "login needs the principal"),
    ('unsecuredLoginStringClaim_sub="a" unsecuredLoginStringClaim_team="x"', {},
     "'sasl.jaas.config' has the option unsecuredLoginStringClaim_team, which kspark's librdkafka clients cannot "
     "send in an unsecured token"),
    ('clientId="kspark"', {"sasl.login.callback.handler.class": OIDC_HANDLER,
                           "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"},
     "'sasl.jaas.config' has no clientSecret=\"...\" option (OIDC client credentials)."),
    ('clientId="kspark" clientSecret="oidc-s3cret"', {"sasl.login.callback.handler.class": OIDC_HANDLER},
     "'sasl.login.callback.handler.class' is set but 'sasl.oauthbearer.token.endpoint.url' is not"),
    ('clientId="kspark" clientSecret="oidc-s3cret"', {"sasl.login.callback.handler.class": "com.example.MyHandler",
                                                      "sasl.oauthbearer.token.endpoint.url": "https://idp/t"},
     f"'sasl.login.callback.handler.class' is 'com.example.MyHandler'; for OAUTHBEARER with a token endpoint "
     f"kspark's clients take {OIDC_HANDLER}."),
    ('clientId="kspark" clientSecret="oidc-s3cret"', {"sasl.login.callback.handler.class": OIDC_HANDLER,
                                                      "sasl.oauthbearer.token.endpoint.url": "file:///token"},
     "'sasl.oauthbearer.token.endpoint.url' is 'file:///token'; expected an http:// or https:// URL"),
    ('clientId="kspark" clientSecret="oidc-s3cret" audience="x"',
     {"sasl.login.callback.handler.class": OIDC_HANDLER, "sasl.oauthbearer.token.endpoint.url": "https://idp/t"},
     "'sasl.jaas.config' has the option audience, which the OIDC login does not take"),
])
def test_a_bad_oauthbearer_setting_is_one_line_without_the_secret(
    pki, jaas_options: str, extra: dict[str, str], message: str
) -> None:
    with pytest.raises(KafkaClientError) as raised:
        KafkaSecurity.from_properties(_oauth(pki, jaas_options, **extra))
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)
    assert "oidc-s3cret" not in str(raised.value)


def test_oauthbearer_settings_with_another_mechanism_are_refused(pki) -> None:
    with pytest.raises(KafkaClientError, match="^'sasl.oauthbearer.token.endpoint.url' is set but 'sasl.mechanism' "
                                               "is SCRAM-SHA-512: it is for OAUTHBEARER.$"):
        KafkaSecurity.from_properties(_sasl(pki, **{"sasl.oauthbearer.token.endpoint.url": "https://idp/t"}))


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
