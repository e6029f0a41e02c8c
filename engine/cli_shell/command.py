"""``kspark cli [URL]``: ksqlDB's CLI, for a kspark server.

    kspark cli http://localhost:8088
    kspark cli URL --execute "SHOW STREAMS;"        # run, print, exit (1 if a statement failed)
    kspark cli URL --file statements.sql --define topic=orders
    kspark cli https://host:8088 --user fred --password letmein --tls-ca ca.pem

TLS: ``--tls-ca`` (the PEM CA the server's certificate is signed by), ``--tls-cert`` and
``--tls-key`` (a PEM client certificate, for a server started with ``--tls-client-ca``), or
ksqlDB's CLI way, a ``--config-file`` of ``ssl.*`` properties (PKCS12 or PEM stores); its
other properties are the session's, as SET makes them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from engine.cli_shell.client import KsqlClient, ShellError, Tls
from engine.cli_shell.shell import HISTORY_FILE, Shell, banner, interactive

DEFAULT_URL = "http://localhost:8088"


def add_parser(sub: Any, help: str) -> None:
    cli = sub.add_parser("cli", help=help)
    cli.add_argument("url", nargs="?", default=DEFAULT_URL, metavar="URL",
                     help=f"the server to connect to (default {DEFAULT_URL})")
    run = cli.add_mutually_exclusive_group()
    run.add_argument("-e", "--execute", metavar="STATEMENTS", help="run these statements, then exit")
    run.add_argument("-f", "--file", metavar="FILE", help="run the statements of FILE, then exit")
    cli.add_argument("-d", "--define", action="append", default=[], metavar="NAME=VALUE",
                     help="a session variable, as DEFINE makes it (repeatable)")
    cli.add_argument("--output", type=str.upper, choices=("TABULAR", "JSON"), default="TABULAR",
                     help="how results print (default TABULAR)")
    cli.add_argument("-u", "--user", metavar="USER", help="HTTP basic authentication: the user")
    cli.add_argument("-p", "--password", metavar="PASSWORD",
                     help="its password (asked for when --user comes without it, interactively)")
    cli.add_argument("--config-file", metavar="FILE",
                     help="properties file: ssl.* for the connection, the others as session properties")
    cli.add_argument("--tls-ca", metavar="FILE", help="the PEM CA the server's certificate is signed by")
    cli.add_argument("--tls-cert", metavar="FILE", help="a PEM client certificate (mutual TLS, with --tls-key)")
    cli.add_argument("--tls-key", metavar="FILE", help="the PEM private key of --tls-cert")
    cli.add_argument("--history-file", metavar="FILE", default=str(HISTORY_FILE),
                     help=f"where the interactive history is kept (default {HISTORY_FILE})")


def run(args: argparse.Namespace) -> int:
    """Run ``kspark cli``: one error line and exit 1 for what goes wrong before or while running
    non-interactively; the interactive shell prints errors and goes on."""
    non_interactive = args.execute is not None or args.file is not None
    try:
        with contextlib.ExitStack() as stack:
            properties, tls = _config(args, stack)
            client = KsqlClient(args.url, user=args.user, password=_password(args, non_interactive), tls=tls)
            stack.callback(client.close)
            variables = _defines(args.define)
            shell = Shell(client, output=args.output, variables=variables, properties=properties,
                          stop_on_error=non_interactive)
            info = client.info()
            if not non_interactive:
                shell.write(banner(shell, info))
                history = None if args.history_file == "" else Path(args.history_file).expanduser()
                return interactive(shell, history)
            if args.execute is not None:
                shell.run_text(args.execute, lenient_end=True)
            else:
                text = _read(args.file)
                shell.run_lines(text.splitlines(keepends=True))
            return 1 if shell.failed else 0
    except ShellError as exc:
        print(f"kspark cli: {exc.line()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ShellError(f"Cannot read {path}: {exc.strerror or exc}.") from None


def _password(args: argparse.Namespace, non_interactive: bool) -> str | None:
    if args.user is None:
        if args.password is not None:
            raise ShellError("--password needs --user.")
        return None
    if args.password is not None:
        return args.password
    if non_interactive or not sys.stdin.isatty():
        raise ShellError("--user needs --password when the CLI does not run interactively.")
    import getpass

    return getpass.getpass("Enter password: ")


def _defines(pairs: list[str]) -> dict[str, str]:
    variables: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ShellError(f"--define {pair}: expected NAME=VALUE.")
        variables[name.strip()] = value
    return variables


def _config(args: argparse.Namespace, stack: contextlib.ExitStack) -> tuple[dict[str, str], Tls]:
    """The session properties and the TLS settings of ``--config-file`` and the ``--tls-*`` flags."""
    properties: dict[str, str] = {}
    ca, cert, key = args.tls_ca, args.tls_cert, args.tls_key
    if args.config_file:
        from engine.server.cli import read_config

        if not Path(args.config_file).is_file():
            raise ShellError(f"--config-file {args.config_file}: no such file.")
        config = read_config(args.config_file)
        ssl_props = {k: v for k, v in config.items() if k.startswith("ssl.")}
        properties = {k: v for k, v in config.items() if not k.startswith("ssl.")}
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kspark-cli-")))
        if "ssl.truststore.location" in ssl_props and ca is None:
            ca = _truststore(ssl_props, folder)
        if "ssl.keystore.location" in ssl_props and cert is None:
            cert, key = _keystore(ssl_props, folder)
    if (cert is None) != (key is None):
        raise ShellError("--tls-cert and --tls-key go together.")
    return properties, Tls(ca=ca, cert=cert, key=key)


def _is_pem(path: str, kind: str | None) -> bool:
    if kind is not None:
        return kind.upper() == "PEM"
    with contextlib.suppress(OSError):
        return Path(path).read_bytes().lstrip().startswith(b"-----BEGIN")
    return False


def _load_pkcs12(path: str, password: str | None, what: str) -> Any:
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as exc:
        raise ShellError(f"{what} {path}: {exc.strerror or exc}.") from None
    try:
        return pkcs12.load_pkcs12(data, password.encode() if password else None)
    except ValueError:
        raise ShellError(f"{what} {path} is not a PKCS12 store its password opens (JKS stores: convert "
                         "them with keytool -importkeystore -deststoretype PKCS12).") from None


def _truststore(p: dict[str, str], folder: Path) -> str:
    location = p["ssl.truststore.location"]
    if _is_pem(location, p.get("ssl.truststore.type")):
        return location
    from cryptography.hazmat.primitives.serialization import Encoding

    store = _load_pkcs12(location, p.get("ssl.truststore.password"), "ssl.truststore.location")
    certificates = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certificates.append(store.cert.certificate)
    if not certificates:
        raise ShellError(f"ssl.truststore.location {location} holds no certificate.")
    out = folder / "truststore.pem"
    out.write_bytes(b"".join(c.public_bytes(Encoding.PEM) for c in certificates))
    return str(out)


def _keystore(p: dict[str, str], folder: Path) -> tuple[str, str]:
    location = p["ssl.keystore.location"]
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    store = _load_pkcs12(location, p.get("ssl.keystore.password"), "ssl.keystore.location")
    if store.cert is None or store.key is None:
        raise ShellError(f"ssl.keystore.location {location} holds no certificate with its key.")
    cert, key = folder / "client.pem", folder / "client.key"
    chain = [store.cert.certificate] + [c.certificate for c in store.additional_certs]
    cert.write_bytes(b"".join(c.public_bytes(Encoding.PEM) for c in chain))
    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(store.key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
    return str(cert), str(key)
