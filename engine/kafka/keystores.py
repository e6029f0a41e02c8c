"""Java KeyStores (JKS) for librdkafka, which reads only PEM and PKCS12: read once with keytool.

    jks_certificates("/etc/kafka/truststore.jks", "changeit")    # the trusted certificates, PEM
    store = jks_to_pkcs12("/etc/kafka/keystore.jks", "pw", None)  # a private PKCS12 copy
    store.location, store.password                                  # for ssl.keystore.*

JKS is the Java clients' default store type and what ksqlDB server configs name; the Java
clients (Spark's Kafka source, the transactional writer) take the file as it is. For the
confluent-kafka clients the trusted certificates are listed as PEM (``keytool -list -rfc``)
and a key store is copied into a PKCS12 file in a private temporary directory (mode 0700)
with a password of its own, made once per file, content and password and kept for the
process. keytool comes with the Java that runs Spark (``$JAVA_HOME/bin`` or beside
``java``). Errors are ``KafkaClientError``s of one line naming the property and the file;
no password appears in them.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.errors import KafkaClientError

JKS_MAGIC = b"\xfe\xed\xfe\xed"
# keytool is a short-lived JVM: the quick-start flags halve its time.
_KEYTOOL_JVM = ("-J-XX:+UseSerialGC", "-J-XX:TieredStopAtLevel=1", "-J-Xshare:auto")
_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)
_ENTRY = re.compile(r"^(?P<alias>.+?), [^,]+(?:, [^,]+)?, (?P<kind>PrivateKeyEntry|trustedCertEntry|SecretKeyEntry),\s*$",
                    re.MULTILINE)


def is_jks(head: bytes) -> bool:
    """Whether a file starting with ``head`` is a Java KeyStore."""
    return head.startswith(JKS_MAGIC)


@dataclass(frozen=True, slots=True)
class Pkcs12Copy:
    """A PKCS12 copy of a JKS key store, readable by the current user only."""

    location: str
    password: str

    def __repr__(self) -> str:
        return f"Pkcs12Copy(location={self.location!r}, password=[hidden])"


_CERTIFICATES: dict[str, str] = {}
_COPIES: dict[str, Pkcs12Copy] = {}
_DIRECTORY: list[Path] = []


def jks_certificates(location: str, password: str | None, *, prefix: str = "ssl.truststore") -> str:
    """The certificates of the JKS truststore at ``location`` as PEM text; ``password``
    (None: the store's integrity is not checked, as the Java client does without one)."""
    key = _cache_key(location, password)
    if key not in _CERTIFICATES:
        args = ["-list", "-rfc", "-storetype", "JKS", "-keystore", location]
        output = _keytool(args, password, location=location, prefix=prefix)
        certificates = _PEM_CERTIFICATE.findall(output)
        if not certificates:
            raise KafkaClientError(f"'{prefix}.location' names {location}, which holds no certificate.")
        _CERTIFICATES[key] = "\n".join(certificates) + "\n"
    return _CERTIFICATES[key]


def jks_to_pkcs12(location: str, store_password: str, key_password: str | None, *,
                  prefix: str = "ssl.keystore", alias: str | None = None) -> Pkcs12Copy:
    """A PKCS12 copy of the first private key (or the one of ``alias``), with its chain, of the
    JKS key store at ``location``; ``key_password`` is the key's own (None: the store's)."""
    key = _cache_key(location, store_password, key_password, alias)
    copy = _COPIES.get(key)
    if copy is not None and Path(copy.location).is_file():
        return copy
    listing = _keytool(["-list", "-storetype", "JKS", "-keystore", location], store_password,
                       location=location, prefix=prefix)
    aliases = [m["alias"] for m in _ENTRY.finditer(listing) if m["kind"] == "PrivateKeyEntry"]
    if not aliases:
        raise KafkaClientError(
            f"'{prefix}.location' names {location}, which holds no private key: a key store needs the "
            "client's key and certificate (a store of certificates only is a truststore)."
        )
    if alias is not None:
        if alias.lower() not in (a.lower() for a in aliases):  # keytool's aliases are case-insensitive
            raise KafkaClientError(f"'{prefix}.location' names {location}, which holds no private key "
                                   f"under the alias '{alias}'.")
        aliases = [alias]
    directory = _private_directory()
    descriptor, target = tempfile.mkstemp(prefix="keystore-", suffix=".p12", dir=directory)
    os.close(descriptor)
    os.unlink(target)  # keytool refuses to write into an existing empty file
    copy = Pkcs12Copy(target, secrets.token_urlsafe(18))
    args = ["-importkeystore", "-noprompt", "-srcstoretype", "JKS", "-srckeystore", location,
            "-srcalias", aliases[0], "-destkeystore", target, "-deststoretype", "PKCS12"]
    secrets_in = {"-srcstorepass": store_password, "-srckeypass": key_password or store_password,
                  "-deststorepass": copy.password}
    _keytool(args, None, location=location, prefix=prefix, passwords=secrets_in)
    os.chmod(target, 0o600)
    _COPIES[key] = copy
    return copy


def _cache_key(location: str, *passwords: str | None) -> str:
    path = Path(location).expanduser()
    stat = path.stat()
    digest = hashlib.sha256()
    digest.update(f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
    for password in passwords:
        digest.update(b"\0" + (b"-" if password is None else b"+" + password.encode()))
    return digest.hexdigest()


def private_file(prefix: str, suffix: str, content: bytes) -> str:
    """A new file holding ``content`` in the private directory, readable by the current user only."""
    descriptor, target = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=_private_directory())
    with os.fdopen(descriptor, "wb") as out:
        out.write(content)
    os.chmod(target, 0o600)
    return target


def _private_directory() -> Path:
    if not _DIRECTORY or not _DIRECTORY[0].is_dir():
        _DIRECTORY[:] = [Path(tempfile.mkdtemp(prefix="kspark-keystores-"))]  # mode 0700
        atexit.register(shutil.rmtree, _DIRECTORY[0], True)
    return _DIRECTORY[0]


def keytool_executable() -> str:
    """keytool of the Java that runs Spark: ``$JAVA_HOME/bin``, else beside ``java`` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    candidates = [Path(java_home) / "bin" / "keytool"] if java_home else []
    java = shutil.which("java")
    if java:
        candidates.append(Path(java).resolve().parent / "keytool")
    found = shutil.which("keytool")
    for candidate in [*candidates, *([Path(found)] if found else [])]:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    raise KafkaClientError(
        "A JKS store needs keytool (from Java 17 or newer, beside java) to be read for kspark's "
        "librdkafka clients, and none was found: install Java or convert the store to PKCS12."
    )


def _keytool(args: list[str], store_password: str | None, *, location: str, prefix: str,
             passwords: dict[str, str] | None = None) -> str:
    """keytool's output; passwords go through the environment (``:env``), not the command line,
    which other users of the machine can read."""
    env = dict(os.environ)
    command = [keytool_executable(), *_KEYTOOL_JVM, *args]
    given = dict(passwords or {})
    if store_password is not None:
        given["-storepass"] = store_password
    for number, (option, value) in enumerate(given.items()):
        variable = f"KSPARK_KEYTOOL_SECRET_{number}"
        env[variable] = value
        command += [option + ":env", variable]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KafkaClientError(f"'{prefix}.location' names {location}, which keytool could not read: {exc}.") from None
    if done.returncode == 0:
        return done.stdout
    message = " ".join((done.stdout + done.stderr).split())
    for secret in given.values():
        if secret:
            message = message.replace(secret, "[hidden]")
    if "password was incorrect" in message or "tampered" in message:
        raise KafkaClientError(
            f"'{prefix}.location' names {location}, which does not open as a JKS store with "
            f"'{prefix}.password'."
        )
    if "Cannot recover key" in message or "Get Key failed" in message:
        raise KafkaClientError(f"'ssl.key.password' does not open the private key in {location}.")
    if "Invalid keystore format" in message or "Unrecognized keystore format" in message:
        raise KafkaClientError(f"'{prefix}.location' names {location}, which is not a JKS store.")
    detail = message.split("keytool error: ", 1)[-1]
    with contextlib.suppress(ValueError):
        detail = detail[: detail.index(" Warning:")]
    raise KafkaClientError(f"'{prefix}.location' names {location}, which keytool could not read: {detail}.")
