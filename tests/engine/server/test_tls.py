"""``kspark server`` over HTTPS: its certificate, client certificates, forwarding between servers."""

from __future__ import annotations

import ssl
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from engine.components.kspark_server import ServerProcess, stop_all
from engine.errors import KsqlError
from engine.server.tls import TlsSettings
from tests.engine.server.pki import certificates


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA."""
    return certificates(tmp_path_factory.mktemp("pki"))


def _start(bootstrap: str, service_id: str, state: Path, log: Path, pki: dict[str, Path],
           *extra: str) -> tuple[ServerProcess, str, ssl.SSLContext]:
    context = ssl.create_default_context(cafile=str(pki["ca"]))
    context.load_cert_chain(str(pki["client"]), str(pki["client.key"]))
    server = ServerProcess(bootstrap, service_id, state, log=log, scheme="https", verify=context, args=(
        "--spark-master", "local[1]", "--tls-cert", str(pki["server"]), "--tls-key", str(pki["server.key"]), *extra))
    return server, server.start(), context


@pytest.mark.long
def test_https_with_client_certificates_and_forwarding_between_servers(kafka_broker, tmp_path, pki) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    service_id = f"tls_{uuid.uuid4().hex[:8]}"
    mutual = ("--tls-client-ca", str(pki["ca"]))
    one, url_one, context = _start(bootstrap, service_id, tmp_path / "s1", tmp_path / "one.log", pki, *mutual)
    two, url_two, _ = _start(bootstrap, service_id, tmp_path / "s2", tmp_path / "two.log", pki, *mutual)
    try:
        assert httpx.get(f"{url_one}/info", verify=context, timeout=30).json()["KsqlServerInfo"]["kafkaClusterId"]
        with pytest.raises(httpx.HTTPError):  # plain HTTP is not served
            httpx.get(url_one.replace("https", "http") + "/info", timeout=10)
        no_client_cert = ssl.create_default_context(cafile=str(pki["ca"]))
        with pytest.raises(httpx.HTTPError):  # mutual TLS: a client without a certificate is refused
            httpx.get(f"{url_one}/info", verify=no_client_cert, timeout=10)
        # Each server takes statements; the one that does not own the metastore forwards them over HTTPS.
        for n, url in enumerate((url_one, url_two, url_one, url_two)):
            statement = (f"CREATE STREAM S{n} (ID STRING KEY, V INT) WITH (KAFKA_TOPIC='{service_id}', "
                         "VALUE_FORMAT='JSON', PARTITIONS=1);")
            answer = httpx.post(f"{url}/ksql", json={"ksql": statement}, verify=context, timeout=180)
            assert answer.status_code == 200, answer.text
        sequence = answer.json()[0]["commandSequenceNumber"]
        for url in (url_one, url_two):
            shown = httpx.post(f"{url}/ksql", json={"ksql": "SHOW STREAMS;", "commandSequenceNumber": sequence},
                               verify=context, timeout=120).json()
            assert sorted(s["name"] for s in shown[0]["streams"]) == ["S0", "S1", "S2", "S3"]
        # ksqlDB's CLI over HTTPS with a client certificate; without one, a one-line refusal.
        cli = [sys.executable, "-m", "engine.cli", "cli", url_two, "--tls-ca", str(pki["ca"])]
        shown_cli = subprocess.run([*cli, "--tls-cert", str(pki["client"]), "--tls-key", str(pki["client.key"]),
                                    "--execute", "SHOW STREAMS;"], capture_output=True, text=True, timeout=120)
        assert shown_cli.returncode == 0, shown_cli.stderr
        assert all(f"S{n} " in shown_cli.stdout for n in range(4)), shown_cli.stdout
        refused = subprocess.run([*cli, "--execute", "SHOW STREAMS;"], capture_output=True, text=True, timeout=120)
        assert refused.returncode != 0 and "Traceback" not in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    finally:
        stop_all([one, two])
    assert "listening on https://127.0.0.1:" in (tmp_path / "one.log").read_text()


def test_tls_material_that_does_not_load_is_one_line(tmp_path, pki) -> None:
    with pytest.raises(KsqlError, match=r"^--tls-key .*missing.key: no such file\.$"):
        TlsSettings(certfile=str(pki["server"]), keyfile=str(tmp_path / "missing.key"))
    with pytest.raises(KsqlError, match="do not load"):
        TlsSettings(certfile=str(pki["server"]), keyfile=str(pki["client.key"]))  # another certificate's key


def test_a_certificate_without_its_key_is_refused_at_the_command_line(tmp_path, pki) -> None:
    done = subprocess.run([sys.executable, "-m", "engine.cli", "server", "--bootstrap-servers", "127.0.0.1:1",
                           "--service-id", "x", "--state-dir", str(tmp_path), "--tls-cert", str(pki["server"])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "kspark: HTTPS needs both --tls-cert and --tls-key."
