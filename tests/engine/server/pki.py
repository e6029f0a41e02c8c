"""Certificates and Java key stores for the HTTPS tests, made with openssl and keytool."""

from __future__ import annotations

import subprocess
from pathlib import Path

from engine.kafka.keystores import keytool_executable

STORE_PASSWORD = "store-pw"
TRUST_PASSWORD = "trust-pw"


def _run(*args: str) -> None:
    subprocess.run(list(args), check=True, capture_output=True, timeout=120)


def certificates(d: Path) -> dict[str, Path]:
    """A CA (ca.pem, ca.key), and a server certificate for 127.0.0.1 (server.pem, server.key) and
    a client certificate (client.pem, client.key) signed by it, in ``d``; by file name and stem."""
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=kspark test CA",
         "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"))
    (d / "san.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name, subject in (("server", "/CN=127.0.0.1"), ("client", "/CN=a client")):
        _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", subject, "-keyout", str(d / f"{name}.key"),
             "-out", str(d / f"{name}.csr"))
        _run("openssl", "x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.pem"), "-CAkey",
             str(d / "ca.key"), "-CAcreateserial", "-days", "2", "-out", str(d / f"{name}.pem"),
             "-extfile", str(d / "san.cnf"))
    return _files(d)


def key_stores(d: Path, *, alias: str) -> dict[str, Path]:
    """:func:`certificates`, then the server's key and certificate (with the CA) under ``alias``
    in server.p12 (PKCS12) and server.jks (JKS), password STORE_PASSWORD, and the CA in
    trust.jks, password TRUST_PASSWORD."""
    certificates(d)
    _run("openssl", "pkcs12", "-export", "-in", str(d / "server.pem"), "-inkey", str(d / "server.key"),
         "-certfile", str(d / "ca.pem"), "-name", alias, "-passout", f"pass:{STORE_PASSWORD}",
         "-out", str(d / "server.p12"))
    keytool = keytool_executable()
    _run(keytool, "-importkeystore", "-noprompt", "-srckeystore", str(d / "server.p12"), "-srcstoretype", "PKCS12",
         "-srcstorepass", STORE_PASSWORD, "-destkeystore", str(d / "server.jks"), "-deststoretype", "JKS",
         "-deststorepass", STORE_PASSWORD)
    _run(keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(d / "ca.pem"), "-keystore",
         str(d / "trust.jks"), "-storetype", "JKS", "-storepass", TRUST_PASSWORD)
    return _files(d)


def _files(d: Path) -> dict[str, Path]:
    files = {p.name: p for p in d.iterdir()}
    files.update({p.stem: p for p in d.glob("*.pem")})
    return files
