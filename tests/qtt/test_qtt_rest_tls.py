"""``qtt rest`` over HTTPS: the runner's client verifies the server and presents its certificate.

The quick tests use a stand-in HTTPS server in this process (certificates made by the test);
the long one starts a real ``kspark server`` with ``--tls-cert``/``--tls-client-ca`` through
``RestHarness.open(tls=True)`` and runs some of the project's own REST cases (push queries
over the streamed /query, INSERT VALUES, a persistent query and a pull query) over it.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.components.certificates import Pki, make_pki
from qtt.cli import main
from qtt.rest.client import ClientTls, RestClient, RestClientError
from qtt.rest.loader import load_rest_file
from qtt.rest.runner import RestHarness, run_rest_case
from qtt.rest.server import ServerProcess, ServerTls
from qtt.runner import Status
from tests.stand_in import QuietHandler, standing_in

CASES = Path(__file__).parents[1] / "rest_cases"
OVER_HTTPS = {
    "push-queries.json": ("filtered projection of a stream", "inputs after the push query started"),
    "insert-values.json": ("all columns with rowtime", "a persistent query reads inserted rows"),
    "pull-queries.json": ("key lookup on an aggregate",),
}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def https_stand_in(pki: Pki) -> Iterator[str]:
    """An HTTPS server that asks for a client certificate signed by the PKI's CA and answers
    GET /healthcheck and POST /ksql."""

    class Handler(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            self.send_json(200, {"isHealthy": True})

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.request_body())
            self.send_json(200, [{"@type": "currentStatus", "statementText": body["ksql"]}])

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    context.load_cert_chain(str(pki.server_pem))
    context.verify_mode = ssl.CERT_REQUIRED
    with standing_in(Handler, tls=context) as url:
        yield url


def test_the_client_talks_https_with_the_ca_and_its_certificate(https_stand_in: str, pki: Pki) -> None:
    client = RestClient(https_stand_in, tls=ClientTls(ca=str(pki.ca), cert=str(pki.client_pem)))
    assert client.url == https_stand_in
    assert client.healthy()
    answer = client.ksql("SHOW STREAMS;", {})
    assert (answer.status, answer.body[0]["statementText"]) == (200, "SHOW STREAMS;")


@pytest.mark.parametrize(("tls", "why"), [
    (ClientTls(cert="CLIENT"), "CERTIFICATE_VERIFY_FAILED"),  # the system's CAs do not know the test's
    (ClientTls(ca="CA"), ""),  # the server wants a certificate: the handshake or the answer fails
])
def test_a_client_the_server_refuses_or_distrusts_fails_in_one_line(
    https_stand_in: str, pki: Pki, tls: ClientTls, why: str
) -> None:
    files = {"CA": str(pki.ca), "CLIENT": str(pki.client_pem), None: None}
    client = RestClient(https_stand_in, tls=ClientTls(ca=files[tls.ca], cert=files[tls.cert]), timeout=10)
    with pytest.raises(RestClientError) as raised:
        client.request("GET", "/healthcheck")
    assert str(raised.value).startswith(f"GET {https_stand_in}/healthcheck failed: ")
    assert why in str(raised.value) and "\n" not in str(raised.value)
    assert not client.healthy()


def test_a_started_server_gets_the_tls_options_and_an_https_url(tmp_path: Path) -> None:
    tls = ServerTls.make(tmp_path / "pki")
    server = ServerProcess("127.0.0.1:9092", tmp_path, tls=tls)
    command = server.command(8443, tmp_path / "state")
    assert command[command.index("--tls-cert") + 1] == tls.cert
    assert command[command.index("--tls-key") + 1] == tls.key
    assert command[command.index("--tls-client-ca") + 1] == tls.client_ca
    assert tls.client.cert is not None and Path(tls.client.cert).is_file()
    assert "--tls-cert" not in ServerProcess("127.0.0.1:9092", tmp_path).command(8443, tmp_path / "state")


@pytest.mark.parametrize(("args", "message"), [
    (["--tls", "--server", "https://127.0.0.1:1", "--bootstrap-servers", "127.0.0.1:1"],
     "qtt: --tls is for the server started for the run; for --server give its https:// URL and --ca, --client-cert."),
    (["--ca", "ca.pem"], "qtt: --ca needs an https:// --server."),
    (["--client-cert", "c.pem", "--server", "http://127.0.0.1:1", "--bootstrap-servers", "127.0.0.1:1"],
     "qtt: --client-cert needs an https:// --server."),
])
def test_tls_options_that_do_not_fit_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    (tmp_path / "one.json").write_text('{"tests": [{"name": "x", "statements": ["SELECT 1 FROM S;"]}]}')
    assert main(["rest", str(tmp_path), *args]) == 2
    assert capsys.readouterr().err.splitlines() == [message]


@pytest.mark.long
@pytest.mark.system
def test_project_rest_cases_pass_against_a_server_over_mutual_tls(
    kafka_broker: Any, schema_registry: Any, tmp_path: Path
) -> None:
    # wait: on a busy machine a first push query's rows come late
    with RestHarness.open(bootstrap_servers=kafka_broker.bootstrap_servers, registry_url=schema_registry.url,
                          work_dir=tmp_path, wait=90.0, tls=True) as harness:
        assert harness.client.url.startswith("https://127.0.0.1:")
        # The server speaks only TLS, and only to a client with a certificate.
        assert not RestClient(harness.client.url.replace("https://", "http://"), timeout=5).healthy()
        tls = harness.client.tls
        assert tls is not None
        assert not RestClient(harness.client.url, tls=ClientTls(ca=tls.ca), timeout=5).healthy()
        results = []
        for file, names in OVER_HTTPS.items():
            cases = [c for c in load_rest_file(CASES / file).cases if c.name in names]
            assert len(cases) == len(names), file
            results += [run_rest_case(case, harness) for case in cases]
    assert [(r.case_id, r.status, r.reason) for r in results if r.status is not Status.PASSED] == []
    assert len(results) == 5
