"""Certificates for a development broker's TLS listeners: a CA, a server and a client.

    pki = make_pki(directory)        # files in ``directory``, valid for two days
    pki.ca                           # ca.pem: the CA certificate (a PEM truststore)
    pki.server_keystore              # server.p12: key and chain (PKCS12, pki.password)
    pki.client_keystore              # client.p12: the client's key and chain (PKCS12)
    pki.client_pem                   # client.pem: the client's key and certificate (PEM)
    pki.server_pem                   # server.pem: the server's key and certificate (PEM)

The server certificate names ``127.0.0.1`` and ``localhost``, so clients verify the host
name as they do by default. Made with the ``cryptography`` package: no ``keytool`` or
``openssl`` needed. For development and tests only: the keys are fresh on every call and the
password is the same for every store.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

STORE_PASSWORD = "kspark-store"
VALIDITY = datetime.timedelta(days=2)


@dataclass(frozen=True, slots=True)
class Pki:
    """The files ``make_pki`` wrote."""

    directory: Path
    ca: Path
    server_keystore: Path
    client_keystore: Path
    client_pem: Path
    server_pem: Path
    password: str = STORE_PASSWORD


def make_pki(directory: Path, *, hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> Pki:
    """Write a CA, a server key store for ``hosts`` and a client key store into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kspark development CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca = directory / "ca.pem"
    ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    def issue(common_name: str, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName]) -> tuple[
            ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    server_key, server_cert = issue("kspark broker", ExtendedKeyUsageOID.SERVER_AUTH, [_name(h) for h in hosts])
    client_key, client_cert = issue("kspark client", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    server_keystore = directory / "server.p12"
    server_keystore.write_bytes(_pkcs12("server", server_key, server_cert, ca_cert))
    client_keystore = directory / "client.p12"
    client_keystore.write_bytes(_pkcs12("client", client_key, client_cert, ca_cert))
    client_pem, server_pem = directory / "client.pem", directory / "server.pem"
    client_pem.write_bytes(_pem(client_key, client_cert))
    server_pem.write_bytes(_pem(server_key, server_cert))
    for path in (server_keystore, client_keystore, client_pem, server_pem):
        path.chmod(0o600)
    return Pki(directory, ca, server_keystore, client_keystore, client_pem, server_pem)


def _pem(key: ec.EllipticCurvePrivateKey, cert: x509.Certificate) -> bytes:
    return (key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption())
            + cert.public_bytes(serialization.Encoding.PEM))


def _name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _pkcs12(name: str, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate, ca: x509.Certificate) -> bytes:
    # SHA-1/3DES PKCS12 encryption: every Java and OpenSSL reads it (AES-based PKCS12 needs newer ones).
    encryption = (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(2048)
        .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC)
        .hmac_hash(hashes.SHA1())
        .build(STORE_PASSWORD.encode())
    )
    return pkcs12.serialize_key_and_certificates(name.encode(), key, cert, [ca], encryption)
