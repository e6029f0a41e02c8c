"""``kspark cli``'s options: --config-file's ssl.* stores, --define, --user/--password (no server)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, pkcs12
from cryptography.x509.oid import NameOID

from engine.cli import build_parser
from engine.cli_shell import command
from engine.cli_shell.client import ShellError, Tls


def _args(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["cli", *argv])


def _pkcs12_store(path: Path, password: str) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kspark cli test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    path.write_bytes(pkcs12.serialize_key_and_certificates(b"client", key, cert, None,
                                                           BestAvailableEncryption(password.encode())))


def test_a_config_file_gives_pkcs12_stores_as_pem_and_its_other_properties_to_the_session(tmp_path) -> None:
    store = tmp_path / "client.p12"
    _pkcs12_store(store, "secret")
    config = tmp_path / "cli.properties"
    config.write_text(f"ssl.truststore.location={store}\nssl.truststore.password=secret\n"
                      f"ssl.keystore.location={store}\nssl.keystore.password=secret\n"
                      "auto.offset.reset=earliest\n")
    with contextlib.ExitStack() as stack:
        properties, tls = command._config(_args("--config-file", str(config)), stack)
        assert properties == {"auto.offset.reset": "earliest"}
        assert tls.ca is not None and Path(tls.ca).read_text().startswith("-----BEGIN CERTIFICATE-----")
        assert isinstance(tls.context(), ssl.SSLContext)  # the CA and the client certificate load
        folder = Path(tls.ca).parent
    assert not folder.exists()  # the PEM copies go with the session


def test_a_wrong_store_password_and_missing_files_are_one_line_errors(tmp_path) -> None:
    store = tmp_path / "client.p12"
    _pkcs12_store(store, "secret")
    config = tmp_path / "cli.properties"
    config.write_text(f"ssl.truststore.location={store}\nssl.truststore.password=wrong\n")
    with contextlib.ExitStack() as stack, pytest.raises(ShellError, match="is not a PKCS12 store its password opens"):
        command._config(_args("--config-file", str(config)), stack)
    with pytest.raises(ShellError, match="--tls-ca /nowhere.pem: no such file"):
        Tls(ca="/nowhere.pem").context()
    with contextlib.ExitStack() as stack, pytest.raises(ShellError, match="--tls-cert and --tls-key go together"):
        command._config(_args("--tls-cert", str(store)), stack)


def test_defines_and_credentials_are_checked_before_connecting() -> None:
    assert command._defines(["a=1", "b = x=y"]) == {"a": "1", "b": " x=y"}
    with pytest.raises(ShellError, match="expected NAME=VALUE"):
        command._defines(["novalue"])
    with pytest.raises(ShellError, match="--password needs --user"):
        command._password(_args("-p", "x"), non_interactive=True)
    with pytest.raises(ShellError, match="--user needs --password"):
        command._password(_args("-u", "fred", "-e", "SHOW STREAMS;"), non_interactive=True)
    assert command.run(_args("http://127.0.0.1:9", "-e", "SHOW STREAMS;", "--define", "oops")) == 1
