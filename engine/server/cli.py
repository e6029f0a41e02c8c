"""``kspark server``: start one server of a service and answer ksqlDB's REST API until SIGTERM.

    kspark server --bootstrap-servers HOST:PORT --service-id ID --listen HOST:PORT \\
                  --state-dir DIR [--config FILE] [--auth-file FILE]

The server applies its service's command topic to the end and starts the persistent
queries it holds before it listens: once ``GET /healthcheck`` answers, it is ready.
SIGTERM (or Ctrl-C) stops it cleanly: open push queries end, persistent queries stop
(they resume from their checkpoints on the next start), the process exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    from engine.cli import add_kafka_conf_argument

    server = sub.add_parser("server", help="run a server answering ksqlDB's REST API (a command topic on Kafka)")
    server.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT", help="the Kafka cluster")
    server.add_argument("--service-id", required=True, metavar="ID",
                        help="servers with the same id share one command topic and metastore")
    server.add_argument("--listen", default=None, metavar="HOST:PORT",
                        help="where to answer HTTP (default: the config's listeners, else 127.0.0.1:8088); "
                             "wins over listeners in --config")
    server.add_argument("--state-dir", required=True, metavar="DIR",
                        help="checkpoints of persistent queries: a path or a file: URI")
    server.add_argument("--config", metavar="FILE",
                        help="a ksqlDB server properties file (name=value lines): ksqlDB's listeners, TLS, "
                             "authentication, CORS and push-query settings, Kafka security, engine properties")
    add_kafka_conf_argument(server)
    server.add_argument("--spark-master", default="local[2]", metavar="URL", help="Spark master (default local[2])")
    server.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark conf (repeatable), e.g. spark.pyspark.python=PATH for a cluster's executors")
    server.add_argument("--auth-file", metavar="FILE",
                        help="HTTP basic authentication: users and passwords (Jetty realm or htpasswd lines)")
    server.add_argument("--metastore", choices=("command-topic", "tables"), default="tables",
                        help="where the metastore lives: the KLIP-18 tables (default) or the command topic")
    server.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this PEM certificate (with --tls-key)")
    server.add_argument("--tls-key", metavar="FILE", help="the PEM private key of --tls-cert")
    server.add_argument("--tls-client-ca", metavar="FILE",
                        help="require client certificates signed by this PEM CA (mutual TLS)")
    server.add_argument("--tls-ca", metavar="FILE",
                        help="the PEM CA the service's servers' certificates are signed by, for forwarding between them")
    server.add_argument("--internal-url", metavar="URL",
                        help="with --metastore tables: where the other servers reach this one (default http://LISTEN)")
    server.add_argument("--queries-file", metavar="FILE.sql",
                        help="headless mode: apply FILE.sql as a delta over the metastore at start (--metastore tables)")


def check_config(properties: dict[str, str]) -> None:
    """Raise ``ServiceError`` for a semantic config of the file set to a value kspark does not
    implement (``engine.server.properties.STATEMENT_SEMANTICS``), as a request's would be."""
    from engine.server.properties import STATEMENT_SEMANTICS, canonical_name, check_semantics

    for name, value in properties.items():
        canonical = canonical_name(name)[0]
        if canonical in STATEMENT_SEMANTICS:
            check_semantics(canonical, value)


def read_config(path: str) -> dict[str, str]:
    """The properties of a Java ``.properties`` file (``engine.data.java_properties``)."""
    from engine.data.java_properties import parse_properties

    try:
        return parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SystemExit(f"kspark: cannot read the config file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SystemExit(f"kspark: cannot read the config file {path}: byte {exc.start} is not UTF-8 text.") from None


def _listen(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SystemExit(f"kspark: --listen takes HOST:PORT, got '{text}'.")
    return host, int(port)


def run(args: argparse.Namespace) -> int:
    """Start the service, then serve HTTP/1.1 and HTTP/2 (h2c too) until SIGTERM/SIGINT."""
    from engine.errors import KsqlError
    from engine.hosting.application import state_dir_path
    from engine.kafka.admin import check_connection
    from engine.kafka.security import configure
    from engine.server.app import OpenPushQueries, create_app
    from engine.server.auth import BasicAuth
    from engine.server.errors import ServiceError
    from engine.server.limits import ServerLimits
    from engine.server.ownership import Backoff
    from engine.server.rest_config import RestConfig, kafka_properties
    from engine.server.service import KsqlService

    properties = read_config(args.config) if args.config else {}
    try:
        check_config(properties)
        limits = ServerLimits.from_properties(properties)
        Backoff.from_properties(properties)  # a bad retry backoff said at start, not at a query's failure
    except ServiceError as exc:
        print(f"kspark: {args.config}: {exc.message}", file=sys.stderr)
        return 2
    except KsqlError as exc:
        print(f"kspark: {args.config}: {exc}", file=sys.stderr)
        return 2
    try:
        rest = RestConfig.from_properties(properties)
    except KsqlError as exc:
        print(f"kspark: {args.config}: {exc}", file=sys.stderr)
        return 2
    # The server's own files first: a bad one is said at once, without waiting for Kafka.
    try:
        auth = BasicAuth.from_file(args.auth_file) if args.auth_file else None
    except KsqlError as exc:
        print(f"kspark: {exc}", file=sys.stderr)
        return 1
    try:
        tls = _tls(args)
        listeners = _listeners(args, rest, flags_tls=tls is not None)
        every = (*listeners, *rest.extra_listeners(listeners))
        if tls is None and any(listener.scheme == "https" for listener in every):
            tls = rest.tls()  # the config's key store, for its https listeners
        auth = _with_config(auth, rest)
    except KsqlError as exc:
        print(f"kspark: {exc}", file=sys.stderr)
        return 2
    host, port = listeners[0].host, listeners[0].port
    try:
        properties = configure(args.bootstrap_servers, kafka_properties(properties, args.kafka_conf), args.kafka_conf)
        check_connection(args.bootstrap_servers, timeout=30.0)
    except KsqlError as exc:
        print(f"kspark: {exc}", file=sys.stderr)
        return 1
    service_class: Any = KsqlService
    extra: dict[str, Any] = {}
    if getattr(args, "metastore", "tables") == "tables":
        from engine.server.tables_service import (
            TablesService,
            apply_queries_file,
            with_internal_route,
        )

        service_class = TablesService
        extra = {"internal_url": args.internal_url or rest.internal_url(listeners[0]), "internal_tls": tls}
    elif getattr(args, "queries_file", None):
        print("kspark: --queries-file needs --metastore tables.", file=sys.stderr)
        return 1
    try:
        state_dir = state_dir_path(args.state_dir)
    except KsqlError as exc:
        print(f"kspark: {exc}", file=sys.stderr)
        return 1
    spark_conf: dict[str, str] = {}
    for pair in args.spark_conf:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            print(f"kspark: --spark-conf takes KEY=VALUE, got '{pair}'.", file=sys.stderr)
            return 2
        spark_conf[key] = value
    service = service_class(
        args.bootstrap_servers, args.service_id, state_dir, **extra,
        properties=properties, spark_master=args.spark_master, spark_conf=spark_conf, server_id=f"{host}:{port}",
    )
    try:
        service.start()
        if getattr(args, "queries_file", None):
            for line in apply_queries_file(service, args.queries_file):
                print(f"kspark server: {line}", flush=True)
    except KsqlError as exc:
        service.close()
        print(f"kspark: the server did not start: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    service.host = f"{host}:{port}"
    code = 0
    try:
        push_queries = OpenPushQueries()
        app = create_app(service, auth, push_queries, limits, max_push_queries=rest.max_push_queries)
        if extra:
            app = with_internal_route(app, service)
        if rest.cors is not None:
            from engine.server.cors import CorsMiddleware

            app = CorsMiddleware(app, rest.cors)
        asyncio.run(_serve(app, host, port,
                           f"kspark server: service '{args.service_id}' listening on "
                           + ", ".join(listener.url for listener in every),
                           on_stop=push_queries.end_all, tls=tls, limits=limits,
                           listeners=every))
    except OSError as exc:
        print(f"kspark: the server cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        code = 1
    finally:
        service.close()
        print("kspark server: stopped.", flush=True)
    return code


def _listeners(args: argparse.Namespace, rest: Any, *, flags_tls: bool) -> tuple[Any, ...]:
    """Where the server listens: ``--listen`` (https with ``--tls-*``, else the scheme of the
    config's first listener), else the config's ``listeners``, else 127.0.0.1:8088."""
    from engine.server.rest_config import Listener

    if args.listen:
        host, port = _listen(args.listen)
        scheme = "https" if flags_tls else rest.listeners[0].scheme if rest.listeners else "http"
        return (Listener(scheme, host, port),)
    if rest.listeners:
        return rest.listeners
    return (Listener("https" if flags_tls else "http", "127.0.0.1", 8088),)


def _with_config(auth: Any, rest: Any) -> Any:
    """The ``--auth-file`` users with the config's authentication settings; the config's
    ``authentication.method=BASIC`` needs the users' file."""
    import dataclasses

    from engine.errors import KsqlError

    if auth is None:
        if rest.authentication_method == "BASIC":
            raise KsqlError("authentication.method is BASIC: kspark server reads its users and passwords "
                            "from --auth-file FILE (the realm file ksqlDB's JAAS PropertyFileLoginModule reads).")
        return None
    return dataclasses.replace(auth, open_paths=rest.open_paths(), allowed_roles=rest.allowed_roles(),
                               realm=rest.realm or auth.realm)


def _tls(args: argparse.Namespace) -> Any:
    """The server's TLS settings from its options, or None for plain HTTP."""
    from engine.errors import KsqlError
    from engine.server.tls import TlsSettings

    given = [o for o in ("tls_cert", "tls_key", "tls_client_ca", "tls_ca") if getattr(args, o, None)]
    if not given:
        return None
    if not (args.tls_cert and args.tls_key):
        raise KsqlError("HTTPS needs both --tls-cert and --tls-key.")
    return TlsSettings(certfile=args.tls_cert, keyfile=args.tls_key, client_ca=args.tls_client_ca, ca=args.tls_ca)


def hypercorn_config(host: str, port: int, limits: Any = None, tls: Any = None) -> Any:
    """The Hypercorn ``Config`` a server listens with: its address, its connection limits
    (``engine.server.limits.ServerLimits``, the defaults when None) and TLS."""
    from hypercorn.config import Config

    from engine.server.limits import ServerLimits

    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.graceful_timeout = 5.0
    config.loglevel = "WARNING"
    config.accesslog = None
    (limits if limits is not None else ServerLimits()).configure(config)
    if tls is not None:
        tls.configure(config)
    return config


async def _serve(app: Any, host: str, port: int, banner: str, on_stop: Any = None, tls: Any = None,
                 limits: Any = None, listeners: tuple[Any, ...] = ()) -> None:
    """Hypercorn: HTTP/1.1, and HTTP/2 over cleartext (prior knowledge or upgrade), until a signal.

    On SIGTERM or SIGINT ``on_stop`` runs first (it ends the open push queries' streams), then
    Hypercorn stops accepting and gives the requests in flight ``graceful_timeout`` seconds.
    """
    from hypercorn.asyncio import serve

    from engine.server import http11

    http11.install()  # "HTTP/1.1 200 OK": Hypercorn writes no reason phrase of its own
    config = hypercorn_config(host, port, limits, tls)
    if listeners:  # the config's listeners: https ones over TLS, http ones plain
        from engine.server.rest_config import bind

        bind(config, listeners, tls_on=tls is not None)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async def stopping() -> None:
        await stop.wait()
        if on_stop is not None:
            on_stop()

    print(banner, flush=True)
    await serve(app, config, shutdown_trigger=stopping)
