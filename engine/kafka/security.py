"""Kafka client security: one set of properties, written as ksqlDB users write them, for every client.

    security = KafkaSecurity.from_properties({
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="...";',
        "ssl.truststore.location": "/etc/kafka/ca.pem",
    })
    use_security("broker:9093", security)   # every client kspark makes for broker:9093 gets it

The names are the Java Kafka client's, as a ksqlDB server config has them: plain
(``ssl.truststore.location``) or prefixed ``ksql.streams.`` (which wins, as ksqlDB uses the
prefixed truststore for Kafka and the plain one for its own HTTPS listener). They are
checked once and then given, translated, to every client:

- confluent-kafka (librdkafka) clients (``librdkafka()``): ``sasl.jaas.config`` becomes
  ``sasl.username``/``sasl.password``, for OAUTHBEARER librdkafka's ``oidc`` method (client
  credentials at ``sasl.oauthbearer.token.endpoint.url``) or its unsecured JWT
  (``sasl.oauthbearer.config``); a PEM truststore ``ssl.ca.location`` (a PKCS12 or JKS one
  its certificates as ``ssl.ca.pem``); a PKCS12 keystore ``ssl.keystore.location`` (a JKS one
  a private PKCS12 copy, ``engine.kafka.keystores``), a PEM one ``ssl.key.location`` and
  ``ssl.certificate.location``; an empty ``ssl.endpoint.identification.algorithm`` ``none``.
- Java clients (``java()``): the transactional writer in Spark's executors, as given (with
  the store types made explicit).
- Spark's Kafka source (``spark_options()``): the same, prefixed ``kafka.``.

The schema registry's client takes its own settings, as ksqlDB's do
(``ksql.schema.registry.basic.auth.user.info``, ``ksql.schema.registry.ssl.truststore.*``, a
PEM ``ksql.schema.registry.ssl.keystore.*``): ``RegistrySecurity``, set per registry URL.

``configure`` takes these properties out of a config, so that they reach neither the
engine's properties nor its plans, statements or command log. An unknown name under
``ssl.``/``sasl.``, a missing file, or settings that contradict each other raise
``KafkaClientError`` naming the property; no message, ``repr`` or log line holds a secret.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import KafkaClientError
from engine.kafka.keystores import is_jks, jks_certificates, jks_to_pkcs12

STREAMS_PREFIX = "ksql.streams."
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
# The Java client's OIDC login (client credentials at a token endpoint), under its current
# name and the one it had before Kafka 3.4.
OIDC_LOGIN_HANDLERS = frozenset({
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
})
# The unsecured-JWT login options librdkafka can reproduce (``sasl.oauthbearer.config``).
UNSECURED_OPTIONS = ("unsecuredLoginPrincipalClaimName", "unsecuredLoginScopeClaimName",
                     "unsecuredLoginLifetimeSeconds")
STORE_TYPES = ("PEM", "PKCS12", "JKS")

# Translated for librdkafka as well as given to the Java clients.
MAPPED = frozenset({
    "security.protocol", "sasl.mechanism", "sasl.jaas.config",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.endpoint.identification.algorithm",
    "sasl.login.callback.handler.class", "sasl.oauthbearer.token.endpoint.url",
})
# Java-only tuning: given to the Java clients; librdkafka has no equivalent (it takes
# OpenSSL's defaults, which accept what a Java client would negotiate).
JAVA_ONLY = frozenset({
    "ssl.protocol", "ssl.enabled.protocols", "ssl.cipher.suites", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.secure.random.implementation", "ssl.provider",
    # OAUTHBEARER login tuning (librdkafka refreshes its token by itself).
    "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms", "sasl.login.retry.backoff.ms",
    "sasl.login.retry.backoff.max.ms", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
})
KNOWN = MAPPED | JAVA_ONLY
SECRETS = frozenset({"sasl.jaas.config", "ssl.truststore.password", "ssl.keystore.password",
                     "ssl.key.password", "ssl.keystore.key"})
HIDDEN = "[hidden]"

_JAAS = re.compile(r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>.*?);?\s*$",
                   re.DOTALL)
_JAAS_OPTION = re.compile(r'\s*(?P<key>[\w.-]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s";]+))')


def is_security_name(name: str) -> bool:
    """Whether ``name`` (with or without ``ksql.streams.``) is a Kafka client security property."""
    key = name.removeprefix(STREAMS_PREFIX)
    return key == "security.protocol" or key.startswith(("ssl.", "sasl."))


def split_security(properties: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """``properties`` without the Kafka security ones, and those (prefix removed; a
    ``ksql.streams.`` one wins over the plain one)."""
    rest: dict[str, Any] = {}
    plain: dict[str, str] = {}
    prefixed: dict[str, str] = {}
    for name, value in properties.items():
        if not is_security_name(name):
            rest[name] = value
        elif name.startswith(STREAMS_PREFIX):
            prefixed[name.removeprefix(STREAMS_PREFIX)] = str(value)
        else:
            plain[name] = str(value)
    return rest, {**plain, **prefixed}


@dataclass(frozen=True, slots=True)
class KafkaSecurity:
    """Checked Kafka client security properties under the Java client's names."""

    items: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def from_properties(properties: Mapping[str, Any]) -> KafkaSecurity:
        """Check ``properties`` (Java client names, or ``ksql.streams.``-prefixed) and keep the
        security ones; raise ``KafkaClientError`` naming the first bad property."""
        _, given = split_security(properties)
        resolved = _check(given)
        return KafkaSecurity(tuple(sorted(resolved.items())))

    @property
    def properties(self) -> dict[str, str]:
        return dict(self.items)

    @property
    def protocol(self) -> str:
        return self.properties.get("security.protocol", "PLAINTEXT")

    def __bool__(self) -> bool:
        return bool(self.items)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={HIDDEN if k in SECRETS else v}" for k, v in self.items)
        return f"KafkaSecurity({shown})"

    __str__ = __repr__

    def java(self) -> dict[str, str]:
        """For the Java Kafka clients (``Properties``)."""
        return self.properties

    def spark_options(self) -> dict[str, str]:
        """For Spark's Kafka source and sink: the Java properties prefixed ``kafka.``."""
        return {f"kafka.{k}": v for k, v in self.items}

    def librdkafka(self) -> dict[str, str]:
        """For confluent-kafka's clients (librdkafka's names); worked out once per set (a
        client is made per command-log statement, and a PKCS12 store is slow to open)."""
        return dict(_librdkafka(self)) if self.items else {}

    def _librdkafka(self) -> tuple[tuple[str, str], ...]:
        p = self.properties
        out = {"security.protocol": self.protocol.lower()}
        if "sasl.mechanism" in p:
            out["sasl.mechanism"] = p["sasl.mechanism"]
        if "sasl.jaas.config" in p:
            options = _jaas(p["sasl.jaas.config"])[1]
            if p["sasl.mechanism"] == "OAUTHBEARER":
                out |= _oauthbearer(p, options)
            else:
                out["sasl.username"] = options["username"]
                out["sasl.password"] = options["password"]
        if "ssl.truststore.location" in p:
            location = p["ssl.truststore.location"]
            if p["ssl.truststore.type"] == "PEM":
                out["ssl.ca.location"] = location
            elif p["ssl.truststore.type"] == "JKS":
                out["ssl.ca.pem"] = jks_certificates(location, p.get("ssl.truststore.password"))
            else:
                out["ssl.ca.pem"] = _pkcs12_certificates(location, p.get("ssl.truststore.password"))
        if "ssl.truststore.certificates" in p:
            out["ssl.ca.pem"] = p["ssl.truststore.certificates"]
        if "ssl.keystore.location" in p:
            location = p["ssl.keystore.location"]
            if p["ssl.keystore.type"] == "PEM":
                out["ssl.key.location"] = location
                out["ssl.certificate.location"] = location
                if "ssl.key.password" in p:
                    out["ssl.key.password"] = p["ssl.key.password"]
            elif p["ssl.keystore.type"] == "JKS":
                copy = jks_to_pkcs12(location, p["ssl.keystore.password"], p.get("ssl.key.password"))
                out["ssl.keystore.location"] = copy.location
                out["ssl.keystore.password"] = copy.password
            else:
                out["ssl.keystore.location"] = location
                if "ssl.keystore.password" in p:
                    out["ssl.keystore.password"] = p["ssl.keystore.password"]
        if "ssl.keystore.key" in p:
            out["ssl.key.pem"] = p["ssl.keystore.key"]
            out["ssl.certificate.pem"] = p["ssl.keystore.certificate.chain"]
            if "ssl.key.password" in p:
                out["ssl.key.password"] = p["ssl.key.password"]
        algorithm = p.get("ssl.endpoint.identification.algorithm")
        if algorithm is not None:
            out["ssl.endpoint.identification.algorithm"] = algorithm.lower() or "none"
        return tuple(out.items())


@functools.lru_cache(maxsize=64)
def _librdkafka(security: KafkaSecurity) -> tuple[tuple[str, str], ...]:
    return security._librdkafka()


# ---------------------------------------------------------------------- which clusters use what

_IN_USE: dict[str, KafkaSecurity] = {}


def use_security(bootstrap_servers: str, security: KafkaSecurity | None) -> None:
    """Every Kafka client this process makes for ``bootstrap_servers`` uses ``security``
    from now on (None or an empty one: none)."""
    if security:
        _IN_USE[bootstrap_servers] = security
    else:
        _IN_USE.pop(bootstrap_servers, None)


def security_for(bootstrap_servers: str) -> KafkaSecurity:
    """The security set for ``bootstrap_servers`` (empty when none was)."""
    return _IN_USE.get(bootstrap_servers, KafkaSecurity())


# ---------------------------------------------------------------------- checks


def _check(given: Mapping[str, str]) -> dict[str, str]:
    for name in sorted(given):
        if name not in KNOWN:
            hint = ("kspark's Kafka clients support SASL PLAIN, SCRAM and OAUTHBEARER and SSL key and trust stores"
                    if name.startswith("sasl.") else "see the secured Kafka guide for the supported ones")
            raise KafkaClientError(f"Unknown Kafka security property '{name}': {hint}.")
    p = {k: v.strip() if k not in SECRETS else v for k, v in given.items()}
    protocol = p.get("security.protocol", "").upper()
    if "security.protocol" in p:
        if protocol not in PROTOCOLS:
            raise KafkaClientError(
                f"Invalid value for 'security.protocol': '{p['security.protocol']}'; expected one of "
                f"{', '.join(PROTOCOLS)}."
            )
        p["security.protocol"] = protocol
    elif p:
        first = sorted(p)[0]
        raise KafkaClientError(
            f"'{first}' is set but 'security.protocol' is not (PLAINTEXT): set security.protocol "
            "to SSL, SASL_SSL or SASL_PLAINTEXT."
        )
    sasl = protocol.startswith("SASL_")
    if sasl:
        _check_sasl(p, protocol)
    else:
        for name in sorted(p):
            if name.startswith("sasl."):
                raise KafkaClientError(
                    f"'{name}' is set but 'security.protocol' is {protocol}: SASL settings need "
                    "SASL_SSL or SASL_PLAINTEXT."
                )
    if not protocol.endswith("SSL"):
        for name in sorted(p):
            if name.startswith("ssl."):
                raise KafkaClientError(
                    f"'{name}' is set but 'security.protocol' is {protocol}: TLS settings need SSL or SASL_SSL."
                )
        return p
    _check_store(p, "truststore", certificates="ssl.truststore.certificates")
    _check_store(p, "keystore", certificates="ssl.keystore.key")
    if "ssl.keystore.key" in p and "ssl.keystore.certificate.chain" not in p:
        raise KafkaClientError("'ssl.keystore.key' is set without 'ssl.keystore.certificate.chain'.")
    if "ssl.keystore.certificate.chain" in p and "ssl.keystore.key" not in p:
        raise KafkaClientError("'ssl.keystore.certificate.chain' is set without 'ssl.keystore.key'.")
    algorithm = p.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and algorithm.lower() not in ("", "https"):
        raise KafkaClientError(
            f"Invalid value for 'ssl.endpoint.identification.algorithm': '{algorithm}'; expected "
            "https (verify the broker's host name) or an empty value (do not)."
        )
    return p


def _check_sasl(p: dict[str, str], protocol: str) -> None:
    mechanism = p.get("sasl.mechanism", "GSSAPI").strip().upper()
    if mechanism not in MECHANISMS:
        raise KafkaClientError(
            f"Unsupported value for 'sasl.mechanism': '{mechanism}'"
            f"{' (the Java client default)' if 'sasl.mechanism' not in p else ''}; kspark's Kafka "
            f"clients support {', '.join(MECHANISMS)}."
        )
    p["sasl.mechanism"] = mechanism
    if "sasl.jaas.config" not in p:
        raise KafkaClientError(
            f"'security.protocol' is {protocol} but 'sasl.jaas.config' is not set: give the user "
            f'as {MECHANISMS[mechanism]} required username="..." password="...";'
        )
    module, options = _jaas(p["sasl.jaas.config"])
    if module != MECHANISMS[mechanism]:
        raise KafkaClientError(
            f"'sasl.jaas.config' names the login module {module}, but 'sasl.mechanism' {mechanism} "
            f"needs {MECHANISMS[mechanism]}."
        )
    if mechanism == "OAUTHBEARER":
        _oauthbearer(p, options)  # says what is missing or cannot be mapped
        return
    for name in ("sasl.login.callback.handler.class", "sasl.oauthbearer.token.endpoint.url"):
        if name in p:
            raise KafkaClientError(f"'{name}' is set but 'sasl.mechanism' is {mechanism}: it is for OAUTHBEARER.")
    for option in ("username", "password"):
        if not options.get(option):
            raise KafkaClientError(f"'sasl.jaas.config' has no {option}=\"...\" option.")


def _oauthbearer(p: Mapping[str, str], options: Mapping[str, str]) -> dict[str, str]:
    """librdkafka's OAUTHBEARER settings for the Java client's: OIDC client credentials at a
    token endpoint (``sasl.login.callback.handler.class``), else the unsecured JWT login."""
    handler = p.get("sasl.login.callback.handler.class")
    endpoint = p.get("sasl.oauthbearer.token.endpoint.url")
    extensions = {k: v for k, v in options.items() if k.startswith(("extension_", "unsecuredLoginExtension_"))}
    if handler is not None or endpoint is not None:
        if handler not in OIDC_LOGIN_HANDLERS:
            raise KafkaClientError(
                f"'sasl.login.callback.handler.class' is '{handler or ''}'; for OAUTHBEARER with a token endpoint "
                f"kspark's clients take {sorted(OIDC_LOGIN_HANDLERS)[0]}."
            )
        if not endpoint:
            raise KafkaClientError(
                "'sasl.login.callback.handler.class' is set but 'sasl.oauthbearer.token.endpoint.url' is not: "
                "give the OIDC provider's token endpoint."
            )
        if not re.match(r"^https?://[^/\s]+", endpoint):
            raise KafkaClientError(
                f"'sasl.oauthbearer.token.endpoint.url' is '{endpoint}'; expected an http:// or https:// URL "
                "(kspark's librdkafka clients fetch the token themselves)."
            )
        unknown = sorted(set(options) - {"clientId", "clientSecret", "scope"} - set(extensions))
        if unknown:
            raise KafkaClientError(
                f"'sasl.jaas.config' has the option {unknown[0]}, which the OIDC login does not take "
                "(clientId, clientSecret, scope, extension_NAME)."
            )
        for option in ("clientId", "clientSecret"):
            if not options.get(option):
                raise KafkaClientError(f"'sasl.jaas.config' has no {option}=\"...\" option (OIDC client credentials).")
        out = {
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.token.endpoint.url": endpoint,
            "sasl.oauthbearer.client.id": options["clientId"],
            "sasl.oauthbearer.client.secret": options["clientSecret"],
        }
        if options.get("scope"):
            out["sasl.oauthbearer.scope"] = options["scope"]
        if extensions:
            out["sasl.oauthbearer.extensions"] = ",".join(
                f"{k.split('_', 1)[1]}={v}" for k, v in sorted(extensions.items()))
        return out
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    scope_claim = options.get("unsecuredLoginScopeClaimName", "scope")
    principal = options.get(f"unsecuredLoginStringClaim_{principal_claim}")
    if not principal:
        raise KafkaClientError(
            f"'sasl.jaas.config' has no unsecuredLoginStringClaim_{principal_claim}=\"...\" option: the unsecured "
            "OAUTHBEARER login needs the principal (or give a token endpoint with "
            "sasl.login.callback.handler.class and sasl.oauthbearer.token.endpoint.url)."
        )
    known = {*UNSECURED_OPTIONS, f"unsecuredLoginStringClaim_{principal_claim}",
             f"unsecuredLoginListClaim_{scope_claim}"}
    unknown = sorted(set(options) - known - {k for k in extensions if k.startswith("unsecuredLoginExtension_")})
    if unknown:
        raise KafkaClientError(
            f"'sasl.jaas.config' has the option {unknown[0]}, which kspark's librdkafka clients cannot send "
            "in an unsecured token (they take the principal, the scope list, the lifetime and extensions)."
        )
    config = [f"principalClaimName={principal_claim}", f"principal={principal}"]
    if scope_claim != "scope" or f"unsecuredLoginListClaim_{scope_claim}" in options:
        config.append(f"scopeClaimName={scope_claim}")
    scopes = options.get(f"unsecuredLoginListClaim_{scope_claim}")
    if scopes:  # Java's list claim starts with its separator: ",a,b"
        config.append("scope=" + ",".join(part for part in scopes[1:].split(scopes[0]) if part))
    if "unsecuredLoginLifetimeSeconds" in options:
        config.append(f"lifeSeconds={options['unsecuredLoginLifetimeSeconds']}")
    for key, value in sorted(extensions.items()):
        if key.startswith("unsecuredLoginExtension_"):
            config.append(f"extension_{key.split('_', 1)[1]}={value}")
    if any(" " in part for part in config):
        raise KafkaClientError("'sasl.jaas.config' has an unsecured login value with a space, which librdkafka "
                               "cannot take.")
    return {"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": " ".join(config)}


def _jaas(text: str) -> tuple[str, dict[str, str]]:
    """A JAAS configuration's login module and options (values never appear in errors)."""
    match = _JAAS.match(text)
    if match is None:
        raise KafkaClientError(
            "'sasl.jaas.config' is not '<LoginModule class> required username=\"...\" password=\"...\";'."
        )
    options: dict[str, str] = {}
    rest = match["options"]
    while rest.strip():
        option = _JAAS_OPTION.match(rest)
        if option is None:
            raise KafkaClientError(
                "'sasl.jaas.config' has an option that is not name=\"value\" (values with spaces "
                "or semicolons are quoted)."
            )
        quoted = option["quoted"]
        options[option["key"]] = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else option["bare"]
        rest = rest[option.end():]
    return match["module"], options


def _check_store(p: dict[str, str], store: str, *, certificates: str) -> None:
    location_key, type_key = f"ssl.{store}.location", f"ssl.{store}.type"
    location = p.get(location_key)
    if location is None:
        if type_key in p and certificates not in p:
            raise KafkaClientError(f"'{type_key}' is set without '{location_key}'.")
        if certificates in p:
            if p.get(type_key, "PEM").upper() != "PEM":
                raise KafkaClientError(f"'{certificates}' needs '{type_key}' PEM, got '{p[type_key]}'.")
            p[type_key] = "PEM"
        return
    if certificates in p:
        raise KafkaClientError(f"Both '{location_key}' and '{certificates}' are set: give one of them.")
    path = Path(location).expanduser()
    if not path.is_file():
        raise KafkaClientError(f"'{location_key}' names {location}, which is not a readable file.")
    try:
        head = path.read_bytes()[:4096]
    except OSError as exc:
        raise KafkaClientError(f"'{location_key}' names {location}, which cannot be read: {exc.strerror}.") from None
    pem = b"-----BEGIN " in head
    given = p.get(type_key, "").upper()
    # Java's default store type is JKS: the file's own form is taken when none is given.
    kind = given or ("PEM" if pem else "PKCS12" if head[:1] == b"\x30" else "JKS")
    if kind not in STORE_TYPES:
        raise KafkaClientError(f"Invalid value for '{type_key}': '{p[type_key]}'; expected PEM, PKCS12 or JKS.")
    if kind == "PEM" and not pem:
        raise KafkaClientError(f"'{location_key}' names {location}, which holds no PEM block ('{type_key}' is PEM).")
    if kind == "JKS":
        if not is_jks(head):
            raise KafkaClientError(f"'{location_key}' names {location}, which is not a JKS store ('{type_key}' is JKS).")
        if store == "truststore":  # read once here (keytool), so that a wrong password is said now
            jks_certificates(location, p.get("ssl.truststore.password"))
        elif "ssl.keystore.password" not in p:
            raise KafkaClientError("'ssl.keystore.location' is a JKS store but 'ssl.keystore.password' is not set.")
        else:
            jks_to_pkcs12(location, p["ssl.keystore.password"], p.get("ssl.key.password"))
    if kind == "PEM" and store == "keystore" and "ssl.keystore.password" in p:
        raise KafkaClientError("'ssl.keystore.password' cannot be used with a PEM key store: use 'ssl.key.password'.")
    if kind == "PKCS12" and store == "keystore" and "ssl.keystore.password" not in p:
        raise KafkaClientError("'ssl.keystore.location' is a PKCS12 store but 'ssl.keystore.password' is not set.")
    if kind == "PKCS12" and store == "truststore":
        _pkcs12_certificates(location, p.get("ssl.truststore.password"))  # loads, or says why not
    p[type_key] = kind


def _pkcs12_certificates(location: str, password: str | None) -> str:
    """The certificates of a PKCS12 truststore as PEM text."""
    from cryptography.hazmat.primitives.serialization import Encoding, pkcs12

    try:
        store = pkcs12.load_pkcs12(Path(location).expanduser().read_bytes(), password.encode() if password else None)
    except (OSError, ValueError):
        raise KafkaClientError(
            f"'ssl.truststore.location' names {location}, which does not open as a PKCS12 store with "
            "'ssl.truststore.password'."
        ) from None
    certificates = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certificates.append(store.cert.certificate)
    if not certificates:
        raise KafkaClientError(f"'ssl.truststore.location' names {location}, which holds no certificate.")
    return "".join(c.public_bytes(Encoding.PEM).decode("ascii") for c in certificates)


# ---------------------------------------------------------------------- the commands' options


def configure(bootstrap_servers: str, properties: Mapping[str, Any], kafka_conf: list[str] | tuple[str, ...] = ()
              ) -> dict[str, Any]:
    """Check the security properties among ``properties`` and the ``--kafka-conf`` pairs (which
    win), use them for ``bootstrap_servers`` (and the ``ksql.schema.registry.`` basic-auth and TLS
    ones for ``ksql.schema.registry.url``), and return the other properties."""
    rest, from_properties = split_security(properties)
    pairs: dict[str, str] = {}
    for pair in kafka_conf:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep or not name:
            raise KafkaClientError(f"--kafka-conf takes KEY=VALUE, got '{name if not sep else pair}'.")
        if not is_security_name(name):
            raise KafkaClientError(
                f"--kafka-conf takes Kafka security properties (security.protocol, sasl.*, ssl.*); "
                f"'{name}' is not one."
            )
        pairs[name] = value
    _, from_flags = split_security(pairs)
    use_security(bootstrap_servers, KafkaSecurity.from_properties({**from_properties, **from_flags}))
    registry = RegistrySecurity.from_properties(rest)
    url = str(rest.get(f"{REGISTRY_PREFIX}url", "") or "")
    if registry and not url:
        first = sorted(name for name in rest if is_registry_security_name(name))[0]
        raise KafkaClientError(f"'{first}' is set but '{REGISTRY_PREFIX}url' is not.")
    if url:
        use_registry_security(url, registry)
    return {name: value for name, value in rest.items() if not is_registry_security_name(name)}


# ---------------------------------------------------------------------- the schema registry's client

REGISTRY_PREFIX = "ksql.schema.registry."
REGISTRY_SETTINGS = frozenset({
    "basic.auth.credentials.source", "basic.auth.user.info",
    "ssl.truststore.location", "ssl.truststore.type", "ssl.truststore.password",
    "ssl.keystore.location", "ssl.keystore.type", "ssl.key.password",
})
REGISTRY_SECRETS = frozenset({"basic.auth.user.info", "ssl.truststore.password", "ssl.key.password"})


def is_registry_security_name(name: str) -> bool:
    """Whether ``name`` is a ``ksql.schema.registry.`` basic-auth or TLS setting."""
    key = name.removeprefix(REGISTRY_PREFIX)
    return name.startswith(REGISTRY_PREFIX) and key.startswith(("basic.auth.", "ssl."))


@dataclass(frozen=True, slots=True)
class RegistrySecurity:
    """The schema registry client's basic authentication and TLS, from ksqlDB's
    ``ksql.schema.registry.*`` properties, as confluent-kafka's ``SchemaRegistryClient`` takes them."""

    items: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def from_properties(properties: Mapping[str, Any]) -> RegistrySecurity:
        """Check the ``ksql.schema.registry.`` basic-auth and TLS properties among ``properties``."""
        given = {name.removeprefix(REGISTRY_PREFIX): str(value) for name, value in properties.items()
                 if is_registry_security_name(name)}
        for key in sorted(given):
            if key not in REGISTRY_SETTINGS:
                raise KafkaClientError(
                    f"Unknown schema registry property '{REGISTRY_PREFIX}{key}': kspark's registry client takes "
                    "basic.auth.credentials.source, basic.auth.user.info and PEM or PKCS12 ssl.truststore.* "
                    "and a PEM ssl.keystore.*."
                )
        conf: dict[str, str] = {}
        source = given.get("basic.auth.credentials.source", "USER_INFO" if "basic.auth.user.info" in given else "")
        if source:
            if source.upper() not in ("USER_INFO", "URL"):
                raise KafkaClientError(
                    f"Unsupported value for '{REGISTRY_PREFIX}basic.auth.credentials.source': '{source}'; "
                    "expected USER_INFO or URL."
                )
            conf["basic.auth.credentials.source"] = source.upper()
            if source.upper() == "USER_INFO":
                info = given.get("basic.auth.user.info", "")
                if ":" not in info:
                    raise KafkaClientError(
                        f"'{REGISTRY_PREFIX}basic.auth.user.info' must be USER:PASSWORD."
                    )
                conf["basic.auth.user.info"] = info
        store = {k: v for k, v in given.items() if k.startswith("ssl.")}
        if store:
            checked = {"security.protocol": "SSL", **store}
            try:
                resolved = _check(checked)
            except KafkaClientError as exc:
                raise KafkaClientError(str(exc).replace("'ssl.", f"'{REGISTRY_PREFIX}ssl.")) from None
            if "ssl.truststore.location" in resolved:
                conf["ssl.ca.location"] = resolved["ssl.truststore.location"]
                conf["truststore.type"] = resolved["ssl.truststore.type"]
                if "ssl.truststore.password" in resolved:
                    conf["truststore.password"] = resolved["ssl.truststore.password"]
            if "ssl.keystore.location" in resolved:
                if resolved["ssl.keystore.type"] != "PEM":
                    raise KafkaClientError(
                        f"'{REGISTRY_PREFIX}ssl.keystore.location' must be a PEM file with the key and the "
                        "certificate for kspark's registry client."
                    )
                conf["ssl.certificate.location"] = resolved["ssl.keystore.location"]
                conf["ssl.key.location"] = resolved["ssl.keystore.location"]
                if "ssl.key.password" in resolved:
                    conf["ssl.key.password"] = resolved["ssl.key.password"]
        return RegistrySecurity(tuple(sorted(conf.items())))

    def __bool__(self) -> bool:
        return bool(self.items)

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={HIDDEN if k in REGISTRY_SECRETS or 'password' in k else v}" for k, v in self.items)
        return f"RegistrySecurity({shown})"

    __str__ = __repr__

    def client_config(self) -> dict[str, Any]:
        """For confluent-kafka's ``SchemaRegistryClient`` (besides ``url``); a PKCS12 truststore's
        certificates are written once to a private PEM file, which is what that client reads."""
        conf = dict(self.items)
        conf.pop("basic.auth.credentials.source", None)  # the client reads a URL's user by itself
        kind = conf.pop("truststore.type", "PEM")
        password = conf.pop("truststore.password", None)
        if kind == "PKCS12":
            conf["ssl.ca.location"] = _pem_file(_pkcs12_certificates(conf["ssl.ca.location"], password))
        elif kind == "JKS":
            conf["ssl.ca.location"] = _pem_file(jks_certificates(conf["ssl.ca.location"], password,
                                                                 prefix=f"{REGISTRY_PREFIX}ssl.truststore"))
        return conf


_REGISTRIES: dict[str, RegistrySecurity] = {}
_PEM_FILES: dict[str, str] = {}


def use_registry_security(url: str, security: RegistrySecurity | None) -> None:
    """Every schema registry client this process makes for ``url`` uses ``security`` from now on."""
    if security:
        _REGISTRIES[url] = security
    else:
        _REGISTRIES.pop(url, None)


def registry_security_for(url: str) -> RegistrySecurity:
    """The registry security set for ``url`` (empty when none was)."""
    return _REGISTRIES.get(url, RegistrySecurity())


def _pem_file(text: str) -> str:
    import hashlib
    import os
    import tempfile

    key = hashlib.sha256(text.encode()).hexdigest()
    if key not in _PEM_FILES or not Path(_PEM_FILES[key]).is_file():
        descriptor, path = tempfile.mkstemp(prefix="kspark-registry-ca-", suffix=".pem")
        with os.fdopen(descriptor, "w", encoding="ascii") as out:
            out.write(text)
        _PEM_FILES[key] = path
    return _PEM_FILES[key]
