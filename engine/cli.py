"""The ``kspark`` command: plan or run ksqlDB statements on the embedded local Spark.

    kspark plan statements.sql                 # print the statements' execution plans (a JSON list)
    kspark run statements.sql --input in.json  # run the queries over input records, print outputs
    kspark run statements.sql --bootstrap-servers HOST:PORT --state-dir DIR [--until-caught-up]
                                               # persistent queries on Kafka (Structured Streaming)
    kspark version
    kspark broker start --dir DIR [--port N]   # a local Kafka broker in the background
    kspark broker stop|status --dir DIR
    kspark registry start --dir DIR [--port N] # a local schema registry (Confluent API) in the background
    kspark registry stop|status --dir DIR
    kspark query --bootstrap-servers HOST:PORT --state-dir DIR "SELECT ... EMIT CHANGES;"
                                               # a push query, PRINT or INSERT VALUES
    kspark query migrate QUERY_ID --state-dir DIR --bootstrap-servers HOST:PORT
                                               # older stateful step versions -> current ones
    kspark server --bootstrap-servers HOST:PORT --service-id ID --listen HOST:PORT --state-dir DIR
    kspark metastore migrate --bootstrap-servers HOST:PORT --service-id ID [--once]
                                               # ksqlDB's REST API over a command topic

Input records use the QTT record form: a JSON list of
``{"topic": ..., "key": ..., "value": ..., "timestamp": ...}``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from engine.data.records import Header, TopicRecord
from engine.errors import KsqlError


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise SystemExit(f"kspark: cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SystemExit(f"kspark: cannot read {path}: byte {exc.start} is not UTF-8 text.") from None


def _statements_text(sql_or_path: str) -> str:
    """``kspark explain``'s argument: a file of statements when one exists there, else the statements."""
    path = Path(sql_or_path)
    if ";" not in sql_or_path and path.is_file():
        return _read(sql_or_path)
    return sql_or_path


RECORD_FIELDS = ("topic", "key", "value", "timestamp", "headers")


def _records(path: str) -> list[TopicRecord]:
    """The input records of ``--input``: a JSON list (or ``{"inputs": [...]}``) of QTT-style
    records, each checked field by field; a bad one exits naming its number and field."""
    try:
        data = json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise SystemExit(f"kspark: {path} is not valid JSON: line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    if isinstance(data, dict):
        data = data.get("inputs", data.get("records"))
    if not isinstance(data, list):
        raise SystemExit(f"kspark: {path} must hold a JSON list of records (or an object with 'inputs').")
    return [_record(r, f"record {number} of {path}") for number, r in enumerate(data, start=1)]


def _record(raw: Any, where: str) -> TopicRecord:
    import base64
    import binascii

    if not isinstance(raw, dict) or "topic" not in raw:
        raise SystemExit(f"kspark: {where} needs at least a 'topic' and a 'value'.")
    unknown = sorted(set(raw) - set(RECORD_FIELDS))
    if unknown:
        raise SystemExit(f"kspark: {where} has an unknown field '{unknown[0]}'; a record has "
                         f"{', '.join(RECORD_FIELDS)}.")
    topic = raw["topic"]
    if not isinstance(topic, str) or not topic:
        raise SystemExit(f"kspark: {where}: 'topic' must be a topic name (a non-empty string), got {json.dumps(topic)}.")
    timestamp = raw.get("timestamp")
    if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int)
                                  or not 0 <= timestamp < 2**63):
        raise SystemExit(f"kspark: {where}: 'timestamp' must be a non-negative integer (milliseconds since "
                         f"the epoch), got {json.dumps(timestamp)}.")
    headers = raw.get("headers") or []
    if not isinstance(headers, list):
        raise SystemExit(f"kspark: {where}: 'headers' must be a list of {{\"KEY\": ..., \"VALUE\": base64}} objects.")
    parsed = []
    for index, header in enumerate(headers, start=1):
        if not isinstance(header, dict) or not isinstance(header.get("KEY"), str):
            raise SystemExit(f"kspark: {where}: header {index} must be an object with a string 'KEY'.")
        value = header.get("VALUE")
        try:
            data = None if value is None else base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError, ValueError):
            raise SystemExit(f"kspark: {where}: header {index} ('{header['KEY']}'): 'VALUE' must be base64 "
                             f"text or null, got {json.dumps(value)}.") from None
        parsed.append(Header(header["KEY"], data))
    return TopicRecord(topic, raw.get("key"), raw.get("value"), timestamp, headers=tuple(parsed))


def add_kafka_conf_argument(parser: Any) -> None:
    """``--kafka-conf KEY=VALUE`` for a command that talks to Kafka (``engine.kafka.security.configure``)."""
    parser.add_argument(
        "--kafka-conf", action="append", default=[], metavar="KEY=VALUE",
        help="a Kafka client security property, as in ksqlDB's server config (security.protocol, "
             "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ...); repeatable; wins over "
             "the same property in --config or --property",
    )


def _config_file(args: argparse.Namespace) -> dict[str, str]:
    """The ``--config`` properties file's entries ({} without one)."""
    from engine.server.cli import read_config

    return read_config(args.config) if getattr(args, "config", None) else {}


def _properties(pairs: Sequence[str]) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for pair in pairs:
        if "=" not in pair:
            raise SystemExit(f"kspark: --property takes NAME=VALUE, got '{pair}'.")
        name, value = pair.split("=", 1)
        props[name] = value
    return props


def _json_default(value: Any) -> Any:
    import decimal

    if isinstance(value, decimal.Decimal):
        return float(value) if value != value.to_integral_value() else int(value)
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode("ascii")
    return str(value)


def _add_broker_parser(sub: Any) -> None:
    broker = sub.add_parser("broker", help="start, stop or inspect a local Kafka broker")
    actions = broker.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start a broker in the background, print bootstrap.servers")
    start.add_argument("--dir", required=True, help="the broker's directory (data, logs, pid file)")
    start.add_argument("--port", type=int, default=None, help="listener port (default: a free one)")
    start.add_argument("--timeout", type=float, default=90.0, help="seconds to wait for it to answer")
    start.add_argument("--secured", action="store_true",
                       help="also listen on SASL_SSL (user kspark, SCRAM-SHA-512 and PLAIN) and SSL (client "
                            "certificates); write each listener's client properties into DIR")
    for action, text in (("stop", "stop the broker running in DIR"), ("status", "is a broker running in DIR")):
        actions.add_parser(action, help=text).add_argument("--dir", required=True)


def _broker_command(args: argparse.Namespace) -> int:
    """``kspark broker start|stop|status``: exit 0, 1 on an error, 3 for status of a stopped one."""
    from engine.components.broker import Broker, BrokerSecurity
    from engine.errors import ComponentError

    secured = getattr(args, "secured", False)
    broker = Broker(args.dir, getattr(args, "port", None), security=BrokerSecurity() if secured else None)
    try:
        if args.action == "status":
            status = broker.status()
            print(status)
            return 0 if status.running else 3
        if args.action == "stop":
            if not broker.stop():
                print(f"kspark: no Kafka broker runs in {broker.directory}.", file=sys.stderr)
            return 0
        running = broker.status()
        if running.running:
            if args.port and args.port != running.port:
                raise ComponentError(
                    f"A Kafka broker already runs in {broker.directory} on port {running.port}, "
                    f"not {args.port}: stop it first."
                )
            print(f"kspark: a Kafka broker is already running in {broker.directory} (pid {running.pid}).",
                  file=sys.stderr)
        else:
            broker.start()
            try:
                broker.wait_ready(args.timeout)
            except BaseException:
                broker.stop()
                raise
            print(f"kspark: Kafka broker started in {broker.directory} (pid {broker.running_pid()}).",
                  file=sys.stderr)
        print(f"bootstrap.servers={broker.bootstrap_servers}")
        if secured:
            for listener in ("SASL_SSL", "SSL"):
                conf = broker.directory / f"client-{listener.lower()}.properties"
                conf.write_text("".join(f"{k}={v}\n" for k, v in broker.client_properties(listener).items()),
                                encoding="utf-8")
                conf.chmod(0o600)
                print(f"{listener.lower()}.bootstrap.servers={broker.secured_bootstrap_servers(listener)} "
                      f"(client properties: {conf})")
        return 0
    except ComponentError as exc:
        print(f"kspark: {exc}", file=sys.stderr)
        return 1


def _add_registry_parser(sub: Any) -> None:
    registry = sub.add_parser("registry", help="start, stop or inspect a local schema registry")
    actions = registry.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start a registry in the background, print its URL")
    start.add_argument("--dir", required=True, help="the registry's directory (log, pid file)")
    start.add_argument("--port", type=int, default=None, help="HTTP port (default: a free one)")
    start.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for it to answer")
    for action, text in (("stop", "stop the registry running in DIR"), ("status", "is a registry running in DIR")):
        actions.add_parser(action, help=text).add_argument("--dir", required=True)


def _registry_command(args: argparse.Namespace) -> int:
    """``kspark registry start|stop|status``: exit 0, 1 on an error, 3 for status of a stopped one."""
    from engine.components.registry import SchemaRegistry
    from engine.errors import ComponentError

    registry = SchemaRegistry(args.dir, getattr(args, "port", None))
    try:
        if args.action == "status":
            status = registry.status()
            print(status)
            return 0 if status.running else 3
        if args.action == "stop":
            if not registry.stop():
                print(f"kspark: no schema registry runs in {registry.directory}.", file=sys.stderr)
            return 0
        running = registry.status()
        if running.running:
            if args.port and args.port != running.port:
                raise ComponentError(
                    f"A schema registry already runs in {registry.directory} on port {running.port}, "
                    f"not {args.port}: stop it first."
                )
            print(f"kspark: a schema registry is already running in {registry.directory} "
                  f"(pid {running.pid}).", file=sys.stderr)
        else:
            registry.start()
            try:
                registry.wait_ready(args.timeout)
            except BaseException:
                registry.stop()
                raise
            print(f"kspark: schema registry started in {registry.directory} "
                  f"(pid {registry.running_pid()}).", file=sys.stderr)
        print(f"ksql.schema.registry.url={registry.url}")
        return 0
    except ComponentError as exc:
        print(f"kspark: {exc}", file=sys.stderr)
        return 1


def _run_on_kafka(args: argparse.Namespace) -> int:
    """``kspark run FILE --bootstrap-servers ... --state-dir DIR``: persistent queries on Kafka."""
    import signal
    import threading

    from engine.hosting.application import StreamingApplication, state_dir_path
    from engine.kafka import security as kafka_security
    from engine.kafka.admin import check_connection

    if not args.state_dir:
        print("kspark: --bootstrap-servers needs --state-dir DIR (where plans and checkpoints live).", file=sys.stderr)
        return 2
    if args.input:
        print("kspark: --input is for the embedded mode; produce records to the topics instead.", file=sys.stderr)
        return 2
    text = _read(args.sql)
    stop = threading.Event()
    try:
        properties = kafka_security.configure(
            args.bootstrap_servers, {**_config_file(args), **_properties(args.property)}, args.kafka_conf
        )
        check_connection(args.bootstrap_servers, timeout=30.0)
        app = StreamingApplication(
            args.bootstrap_servers,
            state_dir_path(args.state_dir),
            properties=properties,
            spark_master=args.spark_master,
            spark_conf=_properties(args.spark_conf),
        )
        restored = app.load()
        applied = app.submit(text)
        print(
            f"kspark: {restored} statements restored from {args.state_dir}, {len(applied)} applied, "
            f"{len(app.queries())} persistent queries.",
            file=sys.stderr,
        )
        with _metrics_reports(args, app):
            if args.until_caught_up:
                app.run_until_caught_up()
                return 0
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            try:
                app.run_forever(stop)
            except KeyboardInterrupt:
                print("kspark: interrupted; stopping the queries.", file=sys.stderr)
                app.stop()
        return 0
    except KsqlError as exc:
        print(f"kspark: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


def positive_seconds(text: str) -> float:
    """An argparse type: a time in seconds above 0 (``--metrics-interval``, the migrations'
    ``--state-timeout``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, not {text}")
    return value


@contextlib.contextmanager
def _metrics_reports(args: argparse.Namespace, app: Any) -> Iterator[None]:
    """``--metrics-interval``: each query's figures as JSON lines (``engine.hosting.query_metrics``)
    on stderr or ``--metrics-file``, every interval and once at the end."""
    if not args.metrics_interval:
        yield
        return
    from engine.hosting.query_metrics import MetricsReporter

    with contextlib.ExitStack() as files:
        out = files.enter_context(open(args.metrics_file, "a", encoding="utf-8")) if args.metrics_file else sys.stderr
        reporter = MetricsReporter(app.metrics, args.bootstrap_servers, args.metrics_interval, out).start()
        try:
            yield
        finally:
            reporter.stop()


def _add_query_parser(sub: Any) -> None:
    query = sub.add_parser(
        "query",
        help="run a push query (SELECT ... EMIT CHANGES), PRINT or INSERT VALUES on a Kafka cluster "
             "(kspark query migrate QUERY_ID --help: a stopped query to the current step versions)",
    )
    query.add_argument("statement", help="the statement, e.g. \"SELECT * FROM S EMIT CHANGES LIMIT 5;\"")
    query.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT", help="the Kafka cluster")
    sources = query.add_mutually_exclusive_group()
    sources.add_argument("--state-dir", metavar="DIR", help="a kspark run application's state dir (read only)")
    sources.add_argument("--sql", metavar="FILE", help="CREATE statements defining the sources instead")
    query.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                       help="query property, e.g. auto.offset.reset=earliest (default latest)")
    query.add_argument("--output", choices=("table", "json"), default="table", help="row format (default table)")
    query.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                       help="how long to wait for the broker (default 30)")
    query.add_argument("--spark-master", default="local[2]", metavar="URL", help="Spark master (default local[2])")
    query.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    query.add_argument("--spark-log", default=os.devnull, metavar="FILE",
                       help="where Spark's own console output goes (default: discarded)")
    query.add_argument("--config", metavar="FILE", help="ksqlDB-style properties file (name=value lines)")
    add_kafka_conf_argument(query)


def _query_command(args: argparse.Namespace) -> int:
    """``kspark query``: push queries, PRINT and INSERT VALUES; SET/UNSET change the properties.

    Ctrl-C (or SIGTERM) asks the running statement to stop, which it does within half a
    second; a second Ctrl-C interrupts whatever runs.
    """
    import signal

    from engine.kafka import security as kafka_security
    from engine.kafka.admin import check_connection
    from engine.parser import parse

    stop = threading.Event()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    _stop_on_signals(stop)
    try:
        properties = kafka_security.configure(
            args.bootstrap_servers, {**_config_file(args), **_properties(args.property)}, args.kafka_conf
        )
        statements = parse(args.statement)  # a typo needs no broker
        check_connection(args.bootstrap_servers, timeout=args.timeout)
        engine = _query_engine(args)
        for parsed in statements:
            if stop.is_set():
                break
            _query_statement(args, engine, parsed, properties, stop)
        if stop.is_set():
            print("kspark: interrupted; stopped.", file=sys.stderr)
        return 0
    except KeyboardInterrupt:
        print("kspark: interrupted; stopped.", file=sys.stderr)
        return 0
    except KsqlError as exc:
        print(f"kspark: {type(exc).__name__}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_on_signals(stop: threading.Event) -> None:
    """SIGINT and SIGTERM set ``stop``; a second one raises KeyboardInterrupt.

    Installed again once Spark has started: its SparkContext replaces the SIGINT handler
    with one that calls into the JVM, which breaks a py4j call the signal interrupts.
    """
    import signal

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, handler)


def _query_engine(args: argparse.Namespace) -> Any:
    """The engine whose metastore holds the sources: a state dir's (read only), or a SQL file's."""
    from engine.errors import ExecutionError
    from engine.facade.engine import KsqlEngine
    from engine.hosting.application import (
        STATEMENTS_FILE,
        KafkaTopics,
        StreamingApplication,
        state_dir_path,
    )

    if args.state_dir:
        state_dir = state_dir_path(args.state_dir)
        if not (state_dir / STATEMENTS_FILE).is_file():
            raise ExecutionError(
                f"{state_dir} is not the state dir of a kspark run application: it has no {STATEMENTS_FILE}."
            )
        app = StreamingApplication(args.bootstrap_servers, state_dir, read_only=True)
        app.load()
        return app.engine
    engine = KsqlEngine(topics=KafkaTopics(args.bootstrap_servers))
    if args.sql:
        engine.execute_sql(_read(args.sql))
    return engine


def _query_statement(
    args: argparse.Namespace, engine: Any, parsed: Any, properties: dict[str, Any], stop: threading.Event
) -> None:
    from engine.errors import AnalysisError
    from engine.kafka.printing import print_topic
    from engine.parser import ast

    stmt = parsed.statement
    if isinstance(stmt, ast.SetProperty):
        properties[stmt.name] = stmt.value
    elif isinstance(stmt, ast.UnsetProperty):
        properties.pop(stmt.name, None)
    elif isinstance(stmt, ast.InsertValues):
        engine.execute_sql(parsed.text)
    elif isinstance(stmt, ast.PrintTopic):
        lines = print_topic(args.bootstrap_servers, stmt.topic, from_beginning=stmt.from_beginning,
                            interval=stmt.interval, limit=stmt.limit, stop=stop.is_set)
        for line in lines:
            print(line, flush=True)
    elif isinstance(stmt, ast.Query):
        _push_query(args, engine, parsed.text, properties, stop)
    else:
        raise AnalysisError(
            "kspark query runs SELECT ... EMIT CHANGES, PRINT, INSERT INTO ... VALUES and SET; "
            f"use kspark run for: {parsed.text}"
        )


def _push_query(
    args: argparse.Namespace, engine: Any, text: str, properties: dict[str, Any], stop: threading.Event
) -> None:
    """Print the push query's rows as they arrive: an aligned table, or ksqlDB's JSON messages."""
    from engine.hosting.push_query import PushQuery, json_value
    from engine.runtime.session import get_spark

    spark_conf = _properties(args.spark_conf)
    query = PushQuery(engine, args.bootstrap_servers, text, properties=properties,
                      spark_master=args.spark_master, spark_conf=spark_conf)
    with _console_to(args.spark_log):  # the JVM and its Python workers inherit this stderr
        get_spark(args.spark_master, spark_conf, kafka=True, long_running=True)
    _stop_on_signals(stop)
    columns = query.schema.columns
    output = _JsonRows(query) if args.output == "json" else _TableRows([c.name for c in columns])
    with query:
        output.header()  # once the query listens: rows produced from now on show
        for row in query.rows(stop=stop.is_set):
            output.row([json_value(v, c.type) for v, c in zip(row.columns, columns, strict=True)], row.tombstone)
    output.end(query.limit_reached)


class _JsonRows:
    """ksqlDB's streamed query messages, one JSON object a line: header, rows, final message."""

    def __init__(self, query: Any) -> None:
        self.query = query

    def _print(self, message: dict[str, Any]) -> None:
        from engine.serde.coerce import json_text

        print(json_text(message), flush=True)

    def header(self) -> None:
        self._print({"header": {"queryId": self.query.query_id, "schema": str(self.query.schema)}})

    def row(self, values: list[Any], tombstone: bool) -> None:
        self._print({"row": {"columns": values}, **({"tombstone": True} if tombstone else {})})

    def end(self, limit_reached: bool) -> None:
        if limit_reached:
            self._print({"finalMessage": "Limit Reached"})


class _TableRows:
    """An aligned table printed row by row; the columns share the terminal's width."""

    def __init__(self, names: Sequence[str]) -> None:
        import shutil

        from rich.console import Console

        width = shutil.get_terminal_size((120, 24)).columns
        self.names = list(names)
        share = max((width - 3 * (len(self.names) - 1)) // max(len(self.names), 1), 1)
        self.widths = [max(len(name), share) for name in self.names]
        self.console = Console(file=sys.stdout, width=sum(self.widths) + 3 * len(self.names),
                               highlight=False, markup=False, emoji=False)

    def _table(self, header: bool) -> Any:
        from rich import box
        from rich.table import Column, Table

        columns = [Column(name if header else "", width=w, overflow="fold")
                   for name, w in zip(self.names, self.widths, strict=True)]
        return Table(*columns, box=box.ASCII, show_edge=False, show_header=header, pad_edge=False)

    def _print(self, renderable: Any) -> None:
        self.console.print(renderable)
        self.console.file.flush()

    def header(self) -> None:
        self._print(self._table(header=True))

    def row(self, values: list[Any], tombstone: bool) -> None:
        from engine.serde.coerce import json_text

        table = self._table(header=False)
        table.add_row(*(v if isinstance(v, str) else json_text(v) for v in values))
        self._print(table)
        if tombstone:
            self._print("(tombstone: the row above was deleted)")

    def end(self, limit_reached: bool) -> None:
        if limit_reached:
            self._print("Limit Reached")


@contextlib.contextmanager
def _console_to(path: str) -> Iterator[None]:
    """Point this process's stderr (fd 2) at ``path`` for the block; what starts now keeps it."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kspark`` console script.

    What a user gets wrong ends in a one-line error and a non-zero exit. A failure no check
    foresaw is a bug: one line says so and names the file that holds its traceback (exit 70).
    """
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the last resort: never a traceback on the console
        return internal_error(exc)


def internal_error(exc: BaseException, program: str = "kspark") -> int:
    """Report a failure no check foresaw: one line on stderr naming the file that holds its
    traceback; returns the exit code (70)."""
    import tempfile
    import traceback

    with tempfile.NamedTemporaryFile("w", prefix=f"{program}-error-", suffix=".txt", delete=False,
                                     encoding="utf-8") as out:
        traceback.print_exception(exc, file=out)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    print(f"{program}: internal error (a bug in kspark): {type(exc).__name__}: {first}; "
          f"the traceback is in {out.name}", file=sys.stderr)
    return 70


# Subcommands whose parsers live with their implementations, which take a while to import:
# module and help line. Only the named one is imported; ``kspark --help`` lists them all.
LAZY_COMMANDS = {
    "metastore": ("engine.metastore.database.migrate", "the metastore tables of a service (KLIP-18)"),
    "import-command-topic": (
        "engine.ksqldb_import.command_topic",
        "import a ksqlDB deployment: its command topic's plans into a kspark service's command log",
    ),
    "cli": ("engine.cli_shell.command", "ksqlDB's interactive CLI, for a kspark server"),
    "migrations": (
        "engine.migrations.cli",
        "ksqlDB's migrations tool: versioned statement files applied to a server",
    ),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``kspark`` command's parser (nothing runs). Of the ``LAZY_COMMANDS``, all are
    complete by default; given ``only``, that one is and the others carry their help line alone."""
    parser = argparse.ArgumentParser(prog="kspark", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="print the execution plan of each statement")
    plan.add_argument("sql", help="file with ';'-separated statements")
    plan.add_argument("--property", action="append", default=[], metavar="NAME=VALUE")
    run = sub.add_parser(
        "run",
        help="run statements: over input records on local Spark, or as persistent queries on Kafka",
    )
    run.add_argument("sql", help="file with ';'-separated statements")
    run.add_argument("--input", help="JSON file with input records (embedded mode)")
    run.add_argument("--property", action="append", default=[], metavar="NAME=VALUE")
    run.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="run on this Kafka cluster")
    run.add_argument("--state-dir", metavar="DIR", help="statements, plans and checkpoints (Kafka mode)")
    run.add_argument(
        "--until-caught-up",
        action="store_true",
        help="stop once every query has processed what its input topics hold, then exit 0",
    )
    run.add_argument("--spark-master", default="local[2]", metavar="URL", help="Spark master (default local[2])")
    run.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark conf")
    run.add_argument("--config", metavar="FILE",
                     help="ksqlDB-style properties file (name=value lines); --property wins (Kafka mode)")
    run.add_argument("--metrics-interval", type=positive_seconds, default=None, metavar="SECONDS",
                     help="write each query's figures (records, lag, saturation...) as a JSON line every "
                          "SECONDS, and at the end (Kafka mode)")
    run.add_argument("--metrics-file", metavar="FILE",
                     help="append the --metrics-interval lines to FILE instead of stderr")
    add_kafka_conf_argument(run)
    explain = sub.add_parser(
        "explain", help="per step of each query: which expressions run natively in Spark and which in Python"
    )
    explain.add_argument("sql", help="';'-separated statements, or a file with them")
    explain.add_argument("--property", action="append", default=[], metavar="NAME=VALUE")
    explain.add_argument("--physical", action="store_true", help="also print Spark's physical plan")
    sub.add_parser("version", help="print the engine version")
    _add_broker_parser(sub)
    _add_registry_parser(sub)
    _add_query_parser(sub)
    from engine.server import cli as server_cli

    server_cli.add_parser(sub)
    for name, (module, help_line) in LAZY_COMMANDS.items():
        if only is None or only == name:
            importlib.import_module(module).add_parser(sub, help_line)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def _command_named(argv: Sequence[str]) -> str:
    """The subcommand ``argv`` names ('' for none): the top-level parser has no options but -h."""
    return next((arg for arg in argv if not arg.startswith("-")), "")


def _main(argv: Sequence[str] | None) -> int:
    from engine.server import cli as server_cli

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:2] == ["query", "migrate"]:  # its own parser: ``kspark query`` takes a statement
        from engine.hosting.migrate import cli_main

        return cli_main(argv[2:])
    args = build_parser(only=_command_named(argv)).parse_args(argv)
    if args.command in LAZY_COMMANDS:
        run: Any = importlib.import_module(LAZY_COMMANDS[args.command][0]).run
        return int(run(args))
    if args.command == "server":
        return server_cli.run(args)
    if args.command == "broker":
        return _broker_command(args)
    if args.command == "registry":
        return _registry_command(args)
    if args.command == "query":
        return _query_command(args)

    if args.command == "run" and args.bootstrap_servers:
        return _run_on_kafka(args)
    if args.command == "run" and args.state_dir:
        print("kspark: --state-dir needs --bootstrap-servers (the embedded mode keeps no state).", file=sys.stderr)
        return 2

    if args.command == "version":
        from engine import __version__

        print(f"kspark {__version__}")
        return 0

    from engine.facade.engine import KsqlEngine, topics_declared_by
    from engine.plan import serde

    engine = KsqlEngine(_properties(args.property))
    inputs = _records(args.input) if getattr(args, "input", None) else []
    from engine.data.records import TopicInfo

    text = _statements_text(args.sql) if args.command == "explain" else _read(args.sql)
    for topic in dict.fromkeys(r.topic for r in inputs):
        engine.create_topic(TopicInfo(topic))
    for topic, partitions in topics_declared_by(text):  # the embedded default has every topic
        engine.create_topic(TopicInfo(topic, partitions=partitions))
    try:
        results = engine.execute_sql(text)
    except KsqlError as exc:
        print(f"kspark: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.command == "explain":
        from engine.facade.explain import explain_queries, format_explanations

        try:
            explained = explain_queries(engine)
        except KsqlError as exc:
            print(f"kspark: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        sys.stdout.write(format_explanations(explained, physical=args.physical))
        return 0
    if args.command == "plan":
        plans = [serde.to_json_value(r.plan) for r in results if r.plan is not None]
        sys.stdout.write(json.dumps(plans, indent=2, sort_keys=True) + "\n")
        return 0
    engine.produce(inputs)
    try:
        outputs = engine.run()
    except KsqlError as exc:
        print(f"kspark: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    for topic, records in outputs.items():
        for r in records:
            line = {"topic": topic, "key": r.key, "value": r.value, "timestamp": r.timestamp}
            if r.window is not None:
                line["window"] = {"start": r.window.start, "end": r.window.end, "type": r.window.type}
            print(json.dumps(line, default=_json_default, sort_keys=True))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
