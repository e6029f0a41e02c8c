"""The server's own settings in a ksqlDB server properties file (``KsqlRestConfig``'s names).

    rest = RestConfig.from_properties(read_config("ksql-server.properties"))
    rest.listeners              # (Listener("https", "0.0.0.0", 8088),) from listeners=
    rest.tls()                  # TlsSettings from ssl.keystore.* / ssl.truststore.* (JKS, PKCS12)
    rest.cors                   # access.control.allow.*  (engine.server.cors)
    rest.max_push_queries       # ksql.max.push.queries (100)

A property in the file does what it does in ksqlDB: the listeners (``http`` and ``https``, the
internal listener and the advertised one), the HTTPS listener's key store and trust store
(JKS through ``engine.kafka.keystores``, PKCS12 through ``cryptography``), client
authentication, TLS protocols and cipher suites, HTTP basic authentication (its realm, roles
and open paths), CORS and the push-query limit. ``kspark
server``'s options win where both are given (``--listen``, ``--tls-*``, ``--auth-file``,
``--internal-url``). Values ksqlDB refuses are refused with its message, which names the
property (Kafka's ``ConfigException`` text: ``Invalid value V for configuration NAME: ...``).
No password appears in a message or a ``repr``.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import KsqlError

LISTENERS_DOC = ("List of listeners. http and https are supported. Each listener must include the protocol, "
                 "hostname, and port. For example: http://myhost:8080, https://0.0.0.0:8081")
STORE_TYPES = ("JKS", "PKCS12", "BCFKS")
CLIENT_AUTHENTICATIONS = ("NONE", "REQUESTED", "REQUIRED")
AUTHENTICATION_METHODS = ("NONE", "BASIC")
TLS_PROTOCOLS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                 "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
DEFAULT_PROTOCOLS = ("TLSv1.2", "TLSv1.3")  # Kafka's SslConfigs.DEFAULT_SSL_ENABLED_PROTOCOLS
DEFAULT_MAX_PUSH_QUERIES = 100
STREAMS_PREFIX = "ksql.streams."
COMMAND_RESPONSE_TIMEOUT = "ksql.server.command.response.timeout.ms"
PULL_CANCEL_ON_DISCONNECT = "ksql.query.pull.cancel.on.disconnect.enabled"
DEFAULT_REALM = ""
# Paths ksqlDB serves without authentication whatever authentication.skip.paths says.
ALWAYS_OPEN_PATHS = ("/v1/metadata", "/v1/metadata/id", "/healthcheck")
# The names of the HTTPS listener's settings that are Kafka client settings as well: they reach
# kspark's Kafka clients too when security.protocol is SSL or SASL_SSL, as in ksqlDB.
LISTENER_TLS_SHARED = frozenset({
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type", "ssl.key.password",
    "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
    "ssl.enabled.protocols", "ssl.cipher.suites",
})
# The listener's own: no Kafka client reads them.
LISTENER_TLS_ONLY = frozenset({"ssl.client.auth", "ssl.client.authentication", "ssl.keystore.reload",
                               "ssl.keystore.watch.location"})
NAMES = frozenset({
    "listeners", "ksql.advertised.listener", "ksql.internal.listener",
    *LISTENER_TLS_SHARED, *LISTENER_TLS_ONLY,
    "ksql.ssl.keystore.alias.external", "ksql.ssl.keystore.alias.internal",
    "ksql.internal.ssl.client.authentication",
    "authentication.method", "authentication.realm", "authentication.roles", "authentication.skip.paths",
    "access.control.allow.origin", "access.control.allow.methods", "access.control.allow.headers",
    "ksql.max.push.queries", COMMAND_RESPONSE_TIMEOUT, PULL_CANCEL_ON_DISCONNECT,
})
SECRETS = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password"})


class RestConfigError(KsqlError):
    """A server property set to a value ksqlDB's server refuses (its message, naming the property)."""


def invalid(name: str, value: object, message: str) -> RestConfigError:
    """Kafka's ``ConfigException(name, value, message)``."""
    return RestConfigError(f"Invalid value {value} for configuration {name}: {message}")


# ksqlDB's settings written as a map ("k1:v1,k2:v2"), with what each entry's key and value must be.
METRICS_TAGS = "ksql.metrics.tags.custom"
RATE_LIMITED_CODES = "ksql.logging.server.rate.limited.response.codes"
RATE_LIMITED_PATHS = "ksql.logging.server.rate.limited.request.paths"
MAP_SETTINGS = {METRICS_TAGS: (None, None), RATE_LIMITED_CODES: ("Not an int", "Not a double"),
                RATE_LIMITED_PATHS: (None, "Not a double")}


def parse_string_as_map(name: str, value: str) -> dict[str, str]:
    """ksqlDB's ``KsqlConfig.parseStringAsMap``: comma-separated ``key:value`` entries (Guava's
    map splitter, whose refusal ksqlDB quotes as the reason)."""
    if not value:
        return {}
    parsed: dict[str, str] = {}
    for entry in (e.strip() for e in value.split(",")):
        fields = entry.split(":")
        reason = f"Chunk [{entry}] is not a valid entry"
        if fields[0] in parsed:
            reason = f"Duplicate key [{fields[0]}] found."
        elif len(fields) == 2:
            parsed[fields[0]] = fields[1]
            continue
        raise RestConfigError(f"Invalid config value for '{name}'. value: {value}. reason: {reason}")
    return parsed


def _check_map_settings(properties: Mapping[str, Any]) -> None:
    for name, (key_problem, value_problem) in MAP_SETTINGS.items():
        if name not in properties:
            continue
        text = str(properties[name])
        for key, value in parse_string_as_map(name, text.strip() if name == METRICS_TAGS else text).items():
            if key_problem is not None and not _java_int(key):
                raise invalid(name, key, key_problem)
            if value_problem is not None and not _java_double(value):
                raise invalid(name, value, value_problem)


def _java_int(text: str) -> bool:
    return re.fullmatch(r"[+-]?[0-9]+", text) is not None and -(2**31) <= int(text) < 2**31


def _java_double(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return not text.strip().lower().lstrip("+-").startswith(("inf", "nan")) or text.strip().lstrip("+-") in (
        "Infinity", "NaN")


# ---------------------------------------------------------------------- Kafka's ConfigDef types


def _string(p: Mapping[str, str], name: str, default: str | None = None, *,
            one_of: tuple[str, ...] = ()) -> str | None:
    value = p.get(name)
    if value is None:
        return default
    value = value.strip()
    if one_of and value not in one_of:
        raise invalid(name, value, f"String must be one of: {', '.join(one_of)}")
    return value


def _list(p: Mapping[str, str], name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
    value = p.get(name)
    if value is None:
        return default
    value = value.strip()
    return tuple(re.split(r"\s*,\s*", value)) if value else ()


def _boolean(p: Mapping[str, str], name: str, default: bool) -> bool:
    value = p.get(name)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise invalid(name, value, "Expected value to be either true or false")
    return value.strip().lower() == "true"


def _int(p: Mapping[str, str], name: str, default: int, *, minimum: int | None = None, bits: int = 32) -> int:
    value = p.get(name)
    if value is None:
        return default
    kind = "INT" if bits == 32 else "LONG"
    try:
        number = int(value.strip(), 10)
    except ValueError:
        raise invalid(name, value, f"Not a number of type {kind}") from None
    if not -(2 ** (bits - 1)) <= number < 2 ** (bits - 1):
        raise invalid(name, value, f"Not a number of type {kind}")
    if minimum is None:
        return number
    if number < minimum:
        raise invalid(name, number, f"Not >= {minimum}")
    return number


# ---------------------------------------------------------------------- listeners


@dataclass(frozen=True, slots=True)
class Listener:
    """One address the server answers on: ``http://HOST:PORT`` or ``https://HOST:PORT``."""

    scheme: str
    host: str
    port: int

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def bind(self) -> str:
        """Hypercorn's bind form."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


_URL = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<host>\[[0-9A-Fa-f:.]+\]|[^:/\[\]]*)"
                  r"(?::(?P<port>\d*))?/?$")


def parse_listener(name: str, text: str) -> Listener:
    """A listener URL of the property ``name``, refused as ksqlDB's listener parsing refuses it."""
    if "://" not in text:
        raise invalid(name, text, f"Not valid URL: no protocol: {text}")
    scheme = text.split("://", 1)[0]
    if scheme.lower() not in ("http", "https"):
        raise RestConfigError(f"Invalid URI scheme should be http or https: {text}")
    match = _URL.match(text)
    if match is None or not match["host"]:
        raise invalid(name, text, "Not valid URL: the listener needs HOST:PORT after the protocol")
    if not match["port"] or not 0 <= int(match["port"]) < 65536:
        raise invalid(name, text, "Must have valid port")
    return Listener(scheme.lower(), match["host"].strip("[]"), int(match["port"]))


# ---------------------------------------------------------------------- the whole configuration


@dataclass(frozen=True, slots=True)
class Cors:
    """``access.control.allow.*``: the origins (a regular expression), methods and headers."""

    origins: str
    methods: tuple[str, ...]
    headers: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RestConfig:
    """The checked server settings of a properties file (ksqlDB's defaults where one is not set)."""

    listeners: tuple[Listener, ...] = ()
    internal_listener: Listener | None = None
    advertised_listener: str | None = None
    keystore: dict[str, str] = field(default_factory=dict, repr=False)
    truststore: dict[str, str] = field(default_factory=dict, repr=False)
    client_authentication: str = "NONE"
    protocols: tuple[str, ...] = DEFAULT_PROTOCOLS
    cipher_suites: tuple[str, ...] = ()
    authentication_method: str = "NONE"
    realm: str = DEFAULT_REALM
    roles: tuple[str, ...] = ("*",)
    skip_paths: tuple[str, ...] = ()
    cors: Cors | None = None
    max_push_queries: int = DEFAULT_MAX_PUSH_QUERIES

    @staticmethod
    def from_properties(properties: Mapping[str, Any]) -> RestConfig:
        """Check the server settings among ``properties``; ``RestConfigError`` names the first bad one."""
        _check_map_settings(properties)
        p = {name: str(value) for name, value in properties.items() if name in NAMES}
        listeners = tuple(parse_listener("listeners", text) for text in _list(p, "listeners"))
        if "listeners" in p and not listeners:
            raise RestConfigError(f"listeners must be supplied.  {LISTENERS_DOC}")
        internal = _string(p, "ksql.internal.listener")
        advertised = _string(p, "ksql.advertised.listener")
        if advertised is not None:
            parsed = parse_listener("ksql.advertised.listener", advertised)
            if parsed.host in ("0.0.0.0", "::"):
                raise invalid("ksql.advertised.listener", advertised, "Can not be wildcard")
            advertised = parsed.url
        # ksqlDB checks the store types whatever the listeners; kspark only where a listener
        # serves https and reads the stores: otherwise the ssl.* settings are the Kafka clients'
        # alone, whose trust store may be PEM (engine.kafka.security checks them there).
        https = any(listener.scheme == "https" for listener in listeners) or (
            internal is not None and internal.strip().lower().startswith("https:"))
        store_types = STORE_TYPES if https else ()
        keystore_type = _string(p, "ssl.keystore.type", one_of=store_types)
        truststore_type = _string(p, "ssl.truststore.type", one_of=store_types)
        client_auth = _string(p, "ssl.client.authentication", "NONE", one_of=CLIENT_AUTHENTICATIONS) or "NONE"
        deprecated_auth = _boolean(p, "ssl.client.auth", False)
        if "ssl.client.auth" in p and "ssl.client.authentication" not in p:
            client_auth = "REQUIRED" if deprecated_auth else "NONE"
        _string(p, "ksql.internal.ssl.client.authentication", "NONE", one_of=CLIENT_AUTHENTICATIONS)
        if _boolean(p, "ssl.keystore.reload", False):
            raise RestConfigError("ssl.keystore.reload is true, but kspark reads the server's key store once, "
                                  "at start: restart the server to take a new one (leave it false).")
        protocols = _list(p, "ssl.enabled.protocols", DEFAULT_PROTOCOLS)
        for protocol in protocols:
            if protocol not in TLS_PROTOCOLS:
                raise invalid("ssl.enabled.protocols", ",".join(protocols),
                              f"'{protocol}' is not a TLS protocol version; expected {', '.join(TLS_PROTOCOLS)}")
        ciphers = _list(p, "ssl.cipher.suites")
        openssl_ciphers(ciphers)  # refused now when the TLS library offers none of a name
        keystore = {k: v for k, v in p.items() if k.startswith("ssl.key")
                    and k not in ("ssl.keystore.reload", "ssl.keystore.watch.location")}
        if keystore_type is not None:
            keystore["ssl.keystore.type"] = keystore_type
        if "ksql.ssl.keystore.alias.external" in p and p["ksql.ssl.keystore.alias.external"].strip():
            keystore["alias"] = p["ksql.ssl.keystore.alias.external"].strip()
        truststore = {k: v for k, v in p.items() if k.startswith("ssl.truststore.")}
        if truststore_type is not None:
            truststore["ssl.truststore.type"] = truststore_type
        internal_listener = parse_listener("ksql.internal.listener", internal) if internal is not None else None
        _int(p, COMMAND_RESPONSE_TIMEOUT, 5000, bits=64)  # read by the service (KsqlService)
        if _boolean(p, PULL_CANCEL_ON_DISCONNECT, False):
            raise RestConfigError(f"kspark implements {PULL_CANCEL_ON_DISCONNECT} only as false (a pull query "
                                  "runs to its end when its client goes away); it cannot be set to 'true'.")
        origin = _string(p, "access.control.allow.origin", "") or ""
        cors = None
        if origin.strip():
            cors = Cors(origins_pattern(origin),
                        tuple(m.upper() for m in _list(p, "access.control.allow.methods")) or ("GET", "POST", "HEAD"),
                        _list(p, "access.control.allow.headers") or ("X-Requested-With", "Content-Type",
                                                                     "Accept", "Origin"))
        return RestConfig(
            listeners=listeners,
            internal_listener=internal_listener,
            advertised_listener=advertised,
            keystore=keystore,
            truststore=truststore,
            client_authentication=client_auth,
            protocols=protocols,
            cipher_suites=ciphers,
            authentication_method=_string(p, "authentication.method", "NONE", one_of=AUTHENTICATION_METHODS) or "NONE",
            realm=_string(p, "authentication.realm", DEFAULT_REALM) or DEFAULT_REALM,
            roles=_list(p, "authentication.roles", ("*",)),
            skip_paths=_list(p, "authentication.skip.paths"),
            cors=cors,
            max_push_queries=_int(p, "ksql.max.push.queries", DEFAULT_MAX_PUSH_QUERIES, minimum=0),
        )

    @property
    def has_keystore(self) -> bool:
        return bool((self.keystore.get("ssl.keystore.location") or "").strip())

    def tls(self) -> Any:
        """The HTTPS listeners' ``TlsSettings`` from the key and trust stores."""
        from engine.server.tls import TlsSettings

        if not self.has_keystore:
            raise RestConfigError("https listener specified but no keystore provided")
        certfile, keyfile, key_password = server_key_files(self.keystore)
        trusted = trusted_certificates_file(self.truststore) if self.truststore.get("ssl.truststore.location") else None
        verify = {"NONE": None, "REQUESTED": "requested", "REQUIRED": "required"}[self.client_authentication]
        if verify is not None and trusted is None:
            raise RestConfigError(f"ssl.client.authentication is {self.client_authentication}, but no "
                                  "ssl.truststore.location names the certificates clients are checked against.")
        return TlsSettings(certfile=certfile, keyfile=keyfile, key_password=key_password,
                           client_ca=trusted if verify else None, ca=trusted,
                           verify=verify or "required", protocols=self.protocols,
                           ciphers=openssl_ciphers(self.cipher_suites))

    def extra_listeners(self, listeners: tuple[Listener, ...]) -> tuple[Listener, ...]:
        """``ksql.internal.listener`` where it is not one of ``listeners``: bound as well."""
        internal = self.internal_listener
        return () if internal is None or internal in listeners else (internal,)

    def internal_url(self, first: Listener) -> str:
        """Where the service's other servers reach this one: ``ksql.advertised.listener``, else
        ``ksql.internal.listener``, else the first listener (a wildcard host: this machine's name)."""
        if self.advertised_listener is not None:
            return self.advertised_listener
        listener = self.internal_listener or first
        if listener.host in ("0.0.0.0", "::"):
            import socket

            listener = Listener(listener.scheme, socket.getfqdn(), listener.port)
        return listener.url

    def open_paths(self) -> str:
        """The regular expression of the paths served without authentication (ksqlDB's rule)."""
        return origins_pattern(",".join((*ALWAYS_OPEN_PATHS, *self.skip_paths)))

    def allowed_roles(self) -> frozenset[str] | None:
        """The roles a user needs one of; None for any user (ksqlDB drops ``*`` from the list, and
        ``**`` or an empty list lets every authenticated user in)."""
        roles = [role for role in self.roles if role != "*"]
        return None if not roles or "**" in roles else frozenset(roles)


def too_many_push_queries(count: int, limit: int) -> str:
    """ksqlDB's refusal of a push query beyond ``ksql.max.push.queries``."""
    return ("Not executing statement(s) as it would cause the number of active, push queries to exceed the "
            "configured limit. Terminate existing PUSH queries, or increase the 'ksql.max.push.queries' "
            "setting via the 'ksql-server.properties' file. "
            f"Current push query count: {count}. Configured limit: {limit}.")


def origins_pattern(csv: str) -> str:
    """ksqlDB's comma-separated wildcards as one regular expression (``*`` any text)."""
    parts = []
    for part in csv.split(","):
        part = part.strip()
        for char, escaped in ((".", r"\."), ("+", r"\+"), ("?", r"\?"), ("-", r"\-"), ("*", ".*")):
            part = part.replace(char, escaped)
        parts.append(part)
    return "|".join(parts)


# ---------------------------------------------------------------------- TLS material


def openssl_ciphers(suites: tuple[str, ...]) -> str | None:
    """OpenSSL's cipher list for Java's cipher-suite names (the IANA names; OpenSSL's own are taken
    too). TLS 1.3's suites cannot be narrowed through Python's ``ssl`` and stay enabled."""
    if not suites:
        return None
    names = []
    for suite in suites:
        if suite.startswith(("TLS_AES_", "TLS_CHACHA20_")):
            continue
        name = _iana_to_openssl(suite)
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).set_ciphers(name)
        except ssl.SSLError:
            raise invalid("ssl.cipher.suites", ",".join(suites),
                          f"'{suite}' is not a cipher suite this server's TLS library offers") from None
        names.append(name)
    return ":".join(names) if names else None


def _iana_to_openssl(suite: str) -> str:
    match = re.fullmatch(r"(?:TLS|SSL)_(?P<kx>\w+?)_WITH_(?P<cipher>\w+?)_(?P<mac>SHA|SHA256|SHA384|POLY1305_SHA256)",
                         suite)
    if match is None:
        return suite
    kx = {"RSA": ""}.get(match["kx"], match["kx"].replace("_", "-"))
    cipher = re.sub(r"^AES_(\d+)", r"AES\1", match["cipher"]).replace("_CBC", "").replace("_", "-")
    mac = match["mac"]
    if cipher == "CHACHA20":  # OpenSSL names the AEAD alone
        cipher, mac = "CHACHA20-POLY1305", ""
    return "-".join(part for part in (kx, cipher, mac) if part)


def _load_pkcs12(location: str, password: str | None, prefix: str) -> Any:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(Path(location).expanduser().read_bytes(), password.encode() if password else None)
    except (OSError, ValueError):
        raise RestConfigError(f"'{prefix}.location' names {location}, which does not open as a PKCS12 store "
                              f"with '{prefix}.password'.") from None


def _store_kind(location: str, given: str | None, prefix: str) -> str:
    path = Path(location).expanduser()
    if not path.is_file():
        raise RestConfigError(f"'{prefix}.location' names {location}, which is not a readable file.")
    if given == "BCFKS":
        raise RestConfigError(f"'{prefix}.type' is BCFKS, a Bouncy Castle store kspark cannot read: "
                              "convert it to PKCS12 or JKS with keytool.")
    from engine.kafka.keystores import is_jks

    head = path.read_bytes()[:4]
    # Java 9+ reads a PKCS12 file as a JKS-typed store (and the reverse): take the file's own form.
    return "JKS" if is_jks(head) else "PKCS12"


def server_key_files(keystore: Mapping[str, str]) -> tuple[str, str, str]:
    """The certificate chain and the (encrypted) private key of the key store as PEM files in a
    private directory, with the key's new password."""
    import secrets

    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        PrivateFormat,
    )

    from engine.errors import KafkaClientError
    from engine.kafka.keystores import jks_to_pkcs12, private_file

    location = keystore["ssl.keystore.location"].strip()
    password = keystore.get("ssl.keystore.password")
    alias = keystore.get("alias")
    kind = _store_kind(location, keystore.get("ssl.keystore.type"), "ssl.keystore")
    if kind == "JKS":
        if not password:
            raise RestConfigError("'ssl.keystore.location' is a JKS store but 'ssl.keystore.password' is not set.")
        try:
            copy = jks_to_pkcs12(location, password, keystore.get("ssl.key.password") or None, alias=alias)
        except KafkaClientError as exc:
            raise RestConfigError(str(exc)) from None
        store = _load_pkcs12(copy.location, copy.password, "ssl.keystore")
    else:
        store = _load_pkcs12(location, password, "ssl.keystore")
        name = store.cert.friendly_name.decode() if store.cert is not None and store.cert.friendly_name else None
        if alias is not None and name is not None and name != alias:
            raise RestConfigError(f"'ksql.ssl.keystore.alias.external' is '{alias}', but the key of {location} "
                                  f"is '{name}'.")
    if store.key is None or store.cert is None:
        raise RestConfigError(f"'ssl.keystore.location' names {location}, which holds no private key with "
                              "its certificate.")
    chain = [store.cert.certificate, *(c.certificate for c in store.additional_certs)]
    key_password = secrets.token_urlsafe(18)
    certfile = private_file("server-", ".pem", b"".join(c.public_bytes(Encoding.PEM) for c in chain))
    keyfile = private_file("server-", ".key", store.key.private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(key_password.encode())))
    return certfile, keyfile, key_password


def trusted_certificates_file(truststore: Mapping[str, str]) -> str:
    """The trust store's certificates as a PEM file in a private directory."""
    from engine.errors import KafkaClientError
    from engine.kafka.keystores import jks_certificates, private_file
    from engine.kafka.security import _pkcs12_certificates

    location = truststore["ssl.truststore.location"].strip()
    password = truststore.get("ssl.truststore.password") or None
    kind = _store_kind(location, truststore.get("ssl.truststore.type"), "ssl.truststore")
    try:
        pem = jks_certificates(location, password) if kind == "JKS" else _pkcs12_certificates(location, password)
    except KafkaClientError as exc:
        raise RestConfigError(str(exc)) from None
    return private_file("trusted-", ".pem", pem.encode("ascii"))


def kafka_properties(properties: Mapping[str, Any], kafka_conf: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    """``properties`` as kspark's Kafka clients take them: the listener's own TLS settings out,
    and the TLS settings it shares with Kafka's clients out too unless Kafka is reached over TLS
    (``security.protocol`` SSL or SASL_SSL, plain, ``ksql.streams.``-prefixed or ``--kafka-conf``)."""
    protocol = ""
    for name in ("security.protocol", STREAMS_PREFIX + "security.protocol"):  # the prefixed one wins
        protocol = str(properties.get(name, protocol))
    for pair in kafka_conf:
        key, _, value = pair.partition("=")
        if key.strip().removeprefix(STREAMS_PREFIX) == "security.protocol":
            protocol = value
    over_tls = protocol.strip().upper().endswith("SSL")
    return {name: value for name, value in properties.items()
            if name not in LISTENER_TLS_ONLY and (over_tls or name not in LISTENER_TLS_SHARED)}


def bind(config: Any, listeners: tuple[Listener, ...], *, tls_on: bool) -> None:
    """Set a Hypercorn ``Config``'s addresses: with TLS, the https listeners over it and the http
    ones plain (Hypercorn's ``insecure_bind``); without, every one plain."""
    config.bind = [listener.bind for listener in listeners if listener.scheme == "https" or not tls_on]
    config.insecure_bind = [listener.bind for listener in listeners if tls_on and listener.scheme == "http"]
