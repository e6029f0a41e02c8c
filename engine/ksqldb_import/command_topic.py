"""Import a ksqlDB deployment: its command topic -> a kspark service's command log.

    kspark import-command-topic --from-bootstrap-servers B --ksqldb-service-id ID \\
        --bootstrap-servers B2 --service-id ID2

ksqlDB keeps every statement that changed its metastore in ``_confluent-ksql-<id>_command_topic``
(one partition, written in transactions). A record's key is the command id
(``stream/`S`/create``, as a JSON string or plain text) and its value ksqlDB's command:

    {"statement": "CREATE STREAM ...", "plan": {"@type": "ksqlPlanV1", "statementText": ..,
     "ddlCommand": {..} | null, "queryPlan": {..} | null},
     "streamsProperties": {..}, "originalProperties": {..}, "version": N}

The import reads the topic to its end (read_committed), translates every command's plan with
``engine.ksqldb_import`` (never re-planned from the statement text), and only when every
command translates writes the kspark commands, in order, to ``_confluent-ksql-<ID2>_command_topic``
with the command log's transactional protocol. A kspark server started on ``ID2`` applies
them and starts the same streams, tables and queries. Nothing is written when one command
cannot be imported, nor into a command log that already holds commands.

- ``TERMINATE <query id>`` (no plan) becomes kspark's terminate command.
- ``CREATE TYPE`` / ``DROP TYPE`` are resolved into the plans that use the type (kspark
  plans carry resolved types): no command is written for them.
- The ksqlDB server's and the request's properties are checked like a saved plan's configs
  (``SEMANTIC_CONFIGS``): a semantic config kspark does not implement stops the import,
  except the record-cache sizes, which only change how many intermediate updates ksqlDB
  emitted (kspark emits every update): they are reported as notes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.commandlog import Command, CommandLog, command_topic
from engine.errors import CommandLogError, KsqlError, UnsupportedFeatureError
from engine.ksqldb_import.plan import check_configs, check_suppress_buffer, import_entry
from engine.plan import serde
from engine.plan.types import SqlType

CACHE_CONFIGS = (
    "ksql.streams.cache.max.bytes.buffering",
    "ksql.query.persistent.max.bytes.buffering.total",
    "cache.max.bytes.buffering",
    "statestore.cache.max.bytes",
)
"""Configs that only change how many intermediate updates ksqlDB emitted: notes, not errors."""

_TERMINATE = re.compile(r"^\s*TERMINATE\s+(?:QUERY\s+)?`?([A-Za-z0-9_\-]+)`?\s*;?\s*$", re.IGNORECASE)


class CommandTopicImportError(CommandLogError):
    """A ksqlDB command topic that cannot be imported: the message names the record."""


@dataclass(frozen=True, slots=True)
class KsqldbRecord:
    """One record of a ksqlDB command topic."""

    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class Translation:
    """The kspark commands of a ksqlDB command topic, with what was not written and why."""

    commands: list[Command] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def command_id_of(key: bytes | None, offset: int) -> str:
    """ksqlDB's command id: the key as a JSON string, or as plain text."""
    text = (key or b"").decode("utf-8", errors="replace").strip()
    if text.startswith('"'):
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        if isinstance(decoded, str):
            return decoded
    return text or f"ksqldb/offset-{offset}/import"


def translate(records: Iterable[KsqldbRecord]) -> Translation:
    """Translate every record, in order; errors name the offset and the statement."""
    out = Translation()
    types: dict[str, SqlType] = {}
    for record in records:
        try:
            _translate_one(record, types, out)
        except KsqlError as exc:
            out.errors.append(str(exc))
    out.notes = list(dict.fromkeys(out.notes))  # a server config is saved with every command
    return out


def _translate_one(record: KsqldbRecord, types: dict[str, SqlType], out: Translation) -> None:
    where = f"The command at offset {record.offset}"
    try:
        data = json.loads(record.value or b"")
    except (ValueError, UnicodeDecodeError) as exc:
        raise CommandTopicImportError(f"{where} is not a ksqlDB command (JSON expected): {exc}.") from None
    if not isinstance(data, Mapping) or not isinstance(data.get("statement"), str):
        raise CommandTopicImportError(f"{where} is not a ksqlDB command: it has no 'statement' text.")
    statement = str(data["statement"])
    command_id = command_id_of(record.key, record.offset)
    request = {str(k): v for k, v in (data.get("streamsProperties") or {}).items() if v is not None}
    server = {str(k): v for k, v in (data.get("originalProperties") or {}).items() if v is not None}
    _check(where, statement, {**server, **request}, out)
    plan = data.get("plan")
    if plan is None:
        found = _TERMINATE.match(statement)
        if found is None:
            raise CommandTopicImportError(
                f"{where} ('{_short(statement)}') has no execution plan (ksqlDB before 5.5 saved "
                "none); kspark imports ksqlDB's plans, it does not re-plan statements."
            )
        query_id = found.group(1).upper() if found.group(1).upper() == "ALL" else found.group(1)
        out.commands.append(Command(
            command_id=command_id, statement=statement, terminate=query_id, properties=request,
        ))
        return
    configs = {k: str(v) for k, v in {**server, **request}.items()}
    try:
        check_suppress_buffer(configs, plan)
        imported = import_entry(plan, record.offset, types, configs=configs)
    except UnsupportedFeatureError as exc:
        raise CommandTopicImportError(f"{where} ('{_short(statement)}') cannot run on kspark: {exc}") from None
    except KsqlError as exc:
        raise CommandTopicImportError(f"{where} ('{_short(statement)}') has a plan kspark cannot read: {exc}") from None
    if imported is None:
        out.notes.append(
            f"offset {record.offset}: '{_short(statement)}' registers a type; kspark resolves it "
            "into the plans that use it (no command written)."
        )
        return
    out.commands.append(Command(
        command_id=command_id, statement=statement, plan=serde.to_json_value(imported), properties=request,
    ))


def _check(where: str, statement: str, configs: Mapping[str, Any], out: Translation) -> None:
    text = {k: str(v) for k, v in configs.items()}
    for key in CACHE_CONFIGS:
        value = text.pop(key, None)
        if value is not None and value not in ("0", "-1"):
            out.notes.append(
                f"{key}={value}: ksqlDB may have emitted fewer intermediate updates than kspark, "
                "which emits every update."
            )
    try:
        check_configs(text)
    except UnsupportedFeatureError as exc:
        raise CommandTopicImportError(f"{where} ('{_short(statement)}'): {exc}") from None


def _short(statement: str, width: int = 80) -> str:
    flat = " ".join(statement.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."


# --------------------------------------------------------------------------- Kafka


def read_command_topic(bootstrap_servers: str, service_id: str, *, timeout: float = 30.0) -> list[KsqldbRecord]:
    """Every committed record of a ksqlDB service's command topic, in offset order."""
    import time

    from confluent_kafka import (
        OFFSET_BEGINNING,
        Consumer,
        KafkaError,
        KafkaException,
        TopicPartition,
    )

    from engine.kafka.admin import TopicAdmin
    from engine.kafka.client import client_config, error_text

    topic = command_topic(service_id)
    admin = TopicAdmin(bootstrap_servers, timeout=timeout)
    admin.check_connection()
    if not admin.topic_exists(topic):
        raise CommandTopicImportError(
            f"There is no ksqlDB command topic '{topic}' on {bootstrap_servers}: check "
            "--ksqldb-service-id (ksqlDB's ksql.service.id) and --from-bootstrap-servers."
        )
    consumer = Consumer(client_config(
        bootstrap_servers,
        **{
            "group.id": f"kspark-import-{service_id}-{time.time_ns()}",  # never joined or committed
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        },
    ))
    partition = TopicPartition(topic, 0)
    records: list[KsqldbRecord] = []
    try:
        _, end = consumer.get_watermark_offsets(partition, timeout=timeout, cached=False)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while end > 0:
            message = consumer.poll(0.5)
            if message is None:
                if time.monotonic() > deadline:
                    raise CommandTopicImportError(
                        f"Reading the command topic '{topic}' timed out after {timeout:g} s "
                        f"at {len(records)} record(s) of about {end}."
                    )
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:  # the end of what is committed
                    break
                raise CommandTopicImportError(f"Reading the command topic '{topic}' failed: {error_text(error)}.")
            offset = int(message.offset() or 0)
            records.append(KsqldbRecord(offset, message.key(), message.value()))
            if offset + 1 >= end:
                break
    except KafkaException as exc:
        raise CommandTopicImportError(f"Reading the command topic '{topic}' failed: {error_text(exc)}.") from None
    finally:
        consumer.close()
    return records


def write_commands(bootstrap_servers: str, service_id: str, commands: Sequence[Command], *, timeout: float = 30.0) -> list[int]:
    """Write ``commands`` to a new kspark service's command log, in order; their sequence numbers."""
    log = CommandLog(bootstrap_servers, service_id, timeout=timeout)
    try:
        log.create_topic()
        if log.end_offset() > 0:
            raise CommandTopicImportError(
                f"The kspark command topic '{log.topic}' already holds commands; import into a "
                "new --service-id (nothing was written)."
            )
        log.start(lambda queued: None)  # the protocol waits for this view of the log
        return [log.submit(_returning(c)).sequence for c in commands]
    finally:
        log.close()


def _returning(command: Command) -> Callable[[], Command]:
    """The ``execute`` of an imported command: nothing to validate, ksqlDB did."""
    return lambda: command


# --------------------------------------------------------------------------- command line


def add_parser(sub: Any, help: str) -> None:
    """``kspark import-command-topic``."""
    cmd = sub.add_parser(
        "import-command-topic",
        help=help,
        description=(
            "Read ksqlDB's command topic (_confluent-ksql-<ksqldb service id>_command_topic), translate "
            "each command's saved plan into kspark's, and write the commands to a new kspark service's "
            "command log; a kspark server started on that service id runs the same streams, tables and "
            "queries. Nothing is written when one command cannot be imported."
        ),
    )
    cmd.add_argument("--from-bootstrap-servers", required=True, metavar="HOST:PORT",
                     help="the Kafka cluster of the ksqlDB deployment")
    cmd.add_argument("--ksqldb-service-id", required=True, metavar="ID", help="ksqlDB's ksql.service.id")
    cmd.add_argument("--bootstrap-servers", metavar="HOST:PORT",
                     help="the Kafka cluster of the kspark service (default: the ksqlDB one)")
    cmd.add_argument("--service-id", required=True, metavar="ID", help="the new kspark service id")
    cmd.add_argument("--dry-run", action="store_true", help="translate and report, write nothing")
    cmd.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="Kafka timeouts (30)")
    from engine.cli import add_kafka_conf_argument

    add_kafka_conf_argument(cmd)  # for both clusters


def run(args: Any) -> int:
    """0: imported (or translated with --dry-run); 1: a command cannot be imported; 2: bad input or Kafka."""
    import sys

    from engine.kafka.security import configure

    target = args.bootstrap_servers or args.from_bootstrap_servers
    try:
        for cluster in dict.fromkeys((args.from_bootstrap_servers, target)):
            configure(cluster, {}, args.kafka_conf)
        records = read_command_topic(args.from_bootstrap_servers, args.ksqldb_service_id, timeout=args.timeout)
    except KsqlError as exc:
        print(f"kspark: {exc}", file=sys.stderr)
        return 2
    translation = translate(records)
    for note in translation.notes:
        print(f"note: {note}", file=sys.stderr)
    if translation.errors:
        for error in translation.errors:
            print(f"kspark: {error}", file=sys.stderr)
        print(
            f"kspark: {len(translation.errors)} of {len(records)} command(s) cannot be imported; "
            "nothing was written.", file=sys.stderr,
        )
        return 1
    if args.dry_run:
        for c in translation.commands:
            print(f"{c.command_id}\t{_short(c.statement)}")
        print(f"{len(translation.commands)} command(s) would be written (dry run).", file=sys.stderr)
        return 0
    try:
        sequences = write_commands(target, args.service_id, translation.commands, timeout=args.timeout)
    except KsqlError as exc:
        print(f"kspark: {exc}", file=sys.stderr)
        return 2
    for sequence, c in zip(sequences, translation.commands, strict=True):
        print(f"{sequence}\t{c.command_id}\t{_short(c.statement)}")
    print(
        f"imported {len(sequences)} command(s) from {len(records)} ksqlDB record(s) into "
        f"{command_topic(args.service_id)}; start `kspark server --service-id {args.service_id}` to run them.",
        file=sys.stderr,
    )
    return 0
