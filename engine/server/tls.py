"""HTTPS for ``kspark server``: the server's certificate, optional client certificates, and
the trust the servers of one service use when they forward writes to each other.

    kspark server ... --tls-cert server.pem --tls-key server.key [--tls-client-ca clients.pem] [--tls-ca ca.pem]

Files are PEM. With ``--tls-client-ca`` every client must present a certificate signed by it
(mutual TLS); the server then presents its own certificate when it forwards to another server
of its service. ``--tls-ca`` is the CA the servers' certificates are signed by (default: the
client CA where one is given, else the system's trust store).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import KsqlError


@dataclass(frozen=True, slots=True, kw_only=True)
class TlsSettings:
    """Where the server's TLS material is."""

    certfile: str
    keyfile: str
    client_ca: str | None = None
    ca: str | None = None

    def __post_init__(self) -> None:
        for option, path in (("--tls-cert", self.certfile), ("--tls-key", self.keyfile),
                             ("--tls-client-ca", self.client_ca), ("--tls-ca", self.ca)):
            if path is not None and not Path(path).is_file():
                raise KsqlError(f"{option} {path}: no such file.")
        try:  # a certificate and key that do not load fail here, not at the first connection
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(self.certfile, self.keyfile)
        except (ssl.SSLError, OSError) as exc:
            raise KsqlError(f"The server certificate {self.certfile} and key {self.keyfile} do not load: "
                            f"{exc.reason if isinstance(exc, ssl.SSLError) else exc}.") from None

    def configure(self, config: Any) -> None:
        """Set a Hypercorn ``Config``'s certificate, key and client verification."""
        config.certfile = self.certfile
        config.keyfile = self.keyfile
        if self.client_ca is not None:
            config.ca_certs = self.client_ca
            config.verify_mode = ssl.CERT_REQUIRED

    def forwarding_context(self) -> ssl.SSLContext:
        """The context a server forwards to another server of its service with."""
        trusted = self.ca or self.client_ca
        context = ssl.create_default_context(cafile=trusted) if trusted else ssl.create_default_context()
        if self.client_ca is not None:
            context.load_cert_chain(self.certfile, self.keyfile)
        return context
