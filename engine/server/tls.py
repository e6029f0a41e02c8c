"""HTTPS for ``kspark server``: the server's certificate, optional client certificates, and
the trust the servers of one service use when they forward writes to each other.

    kspark server ... --tls-cert server.pem --tls-key server.key [--tls-client-ca clients.pem] [--tls-ca ca.pem]

Files are PEM. With ``--tls-client-ca`` every client must present a certificate signed by it
(mutual TLS); the server then presents its own certificate when it forwards to another server
of its service. ``--tls-ca`` is the CA the servers' certificates are signed by (default: the
client CA where one is given, else the system's trust store). A ksqlDB server properties file's
key and trust stores come here through ``engine.server.rest_config`` (PEM copies, the key
encrypted with a password of its own), with its client authentication (``verify``: required or
requested), TLS protocol versions and cipher suites.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
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
    key_password: str | None = field(default=None, repr=False)
    verify: str = "required"  # with client_ca: "required" or "requested" (a certificate is asked for)
    protocols: tuple[str, ...] = ()  # TLS versions ("TLSv1.2", ...); () is Hypercorn's own (1.2 and up)
    ciphers: str | None = None  # an OpenSSL cipher list for TLS 1.2 and below

    def __post_init__(self) -> None:
        if self.verify not in ("required", "requested"):
            raise KsqlError(f"TLS client verification is 'required' or 'requested', got '{self.verify}'.")
        for option, path in (("--tls-cert", self.certfile), ("--tls-key", self.keyfile),
                             ("--tls-client-ca", self.client_ca), ("--tls-ca", self.ca)):
            if path is not None and not Path(path).is_file():
                raise KsqlError(f"{option} {path}: no such file.")
        try:  # a certificate and key that do not load fail here, not at the first connection
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(self.certfile, self.keyfile,
                                                                                self.key_password)
        except (ssl.SSLError, OSError) as exc:
            raise KsqlError(f"The server certificate {self.certfile} and key {self.keyfile} do not load: "
                            f"{exc.reason if isinstance(exc, ssl.SSLError) else exc}.") from None

    def configure(self, config: Any) -> None:
        """Set a Hypercorn ``Config``'s certificate, key and client verification."""
        config.certfile = self.certfile
        config.keyfile = self.keyfile
        config.keyfile_password = self.key_password
        if self.client_ca is not None:
            config.ca_certs = self.client_ca
            config.verify_mode = ssl.CERT_REQUIRED if self.verify == "required" else ssl.CERT_OPTIONAL
        if self.ciphers is not None:
            config.ciphers = self.ciphers
        if self.protocols:
            from engine.server.rest_config import TLS_PROTOCOLS

            versions = sorted(TLS_PROTOCOLS[p] for p in self.protocols)
            create = config.create_ssl_context

            def with_protocols() -> ssl.SSLContext | None:
                context = create()
                if context is not None:
                    context.minimum_version, context.maximum_version = versions[0], versions[-1]
                return context

            config.create_ssl_context = with_protocols

    def forwarding_context(self) -> ssl.SSLContext:
        """The context a server forwards to another server of its service with."""
        trusted = self.ca or self.client_ca
        context = ssl.create_default_context(cafile=trusted) if trusted else ssl.create_default_context()
        if self.client_ca is not None:
            context.load_cert_chain(self.certfile, self.keyfile, self.key_password)
        return context
