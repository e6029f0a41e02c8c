"""The command log on a real broker: ordered replay, fencing, racing writers."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException, Producer

from engine.commandlog import Command, CommandLog, QueuedCommand
from engine.errors import CommandLogError
from engine.kafka.admin import TopicAdmin
from engine.kafka.client import client_config
from engine.kafka.consume import read_topic


def _log(bootstrap: str, service_id: str) -> CommandLog:
    log = CommandLog(bootstrap, service_id, timeout=20.0)
    log.create_topic()
    return log


def _command(name: str) -> Command:
    return Command(command_id=f"stream/`{name}`/create", statement=f"CREATE STREAM {name} ...;")


def _applier(seen: list[QueuedCommand]) -> Callable[[QueuedCommand], None]:
    return seen.append


def test_the_command_topic_has_one_partition_and_infinite_retention(kafka_broker) -> None:
    log = _log(kafka_broker.bootstrap_servers, f"svc_{uuid.uuid4().hex[:8]}")
    admin = TopicAdmin(kafka_broker.bootstrap_servers)
    assert log.topic.startswith("_confluent-ksql-svc_") and log.topic.endswith("_command_topic")
    assert admin.partition_count(log.topic) == 1
    assert admin.topic_config(log.topic)["retention.ms"] == "-1"
    log.close()


def test_the_command_topic_takes_ksql_internal_topic_replicas_and_min_insync_replicas(kafka_broker) -> None:
    """ksql.internal.topic.replicas and ksql.internal.topic.min.insync.replicas, as ksqlDB's
    internal topics take them; the test broker is one broker, so two replicas cannot be had."""
    bootstrap = kafka_broker.bootstrap_servers
    log = CommandLog(bootstrap, f"svc_{uuid.uuid4().hex[:8]}", timeout=20.0)
    with pytest.raises(CommandLogError, match=r"ksql\.internal\.topic\.replicas=2"):
        log.create_topic(replicas=2)
    log.create_topic(replicas=1, min_insync_replicas=1)
    config = TopicAdmin(bootstrap).topic_config(log.topic)
    assert config["min.insync.replicas"] == "1" and config["unclean.leader.election.enable"] == "false"
    with pytest.raises(CommandLogError) as short:  # an existing topic with fewer replicas
        log.create_topic(replicas=2)
    assert str(short.value) == f"Invalid replication factor on topic '{log.topic}'. Expected: 2, but was: 1"
    log.close()


def test_submitted_commands_are_applied_in_order_and_replayed_after_a_restart(kafka_broker) -> None:
    service = f"svc_{uuid.uuid4().hex[:8]}"
    log = _log(kafka_broker.bootstrap_servers, service)
    seen: list[QueuedCommand] = []
    log.replay(_applier(seen))
    sequences = []
    for name in ("A", "B", "C"):
        queued = log.submit(lambda name=name: _command(name))
        log.wait_for(queued.sequence)
        sequences.append(queued.sequence)
    assert [q.command.statement for q in seen] == [f"CREATE STREAM {n} ...;" for n in "ABC"]
    assert [q.sequence for q in seen] == sequences
    # Commit markers take offsets: sequences are offsets, not counts.
    assert sequences == sorted(sequences) and sequences[-1] > 2
    log.close()

    again: list[QueuedCommand] = []
    restarted = _log(kafka_broker.bootstrap_servers, service)
    restarted.replay(_applier(again))
    assert again == seen
    restarted.close()


def test_an_invalid_statement_writes_nothing_and_raises_its_own_error(kafka_broker) -> None:
    log = _log(kafka_broker.bootstrap_servers, f"svc_{uuid.uuid4().hex[:8]}")
    seen: list[QueuedCommand] = []
    log.replay(_applier(seen))

    def invalid() -> Command:
        raise ValueError("Stream X already exists")

    with pytest.raises(ValueError, match="already exists"):
        log.submit(invalid)
    queued = log.submit(lambda: _command("Y"))
    log.wait_for(queued.sequence)
    assert [q.command.command_id for q in seen] == ["stream/`Y`/create"]
    assert read_topic(kafka_broker.bootstrap_servers, log.topic)[0].key == b"stream/`Y`/create"
    log.close()


def test_a_zombie_producer_with_the_service_id_is_fenced_and_its_command_never_seen(kafka_broker) -> None:
    service = f"svc_{uuid.uuid4().hex[:8]}"
    log = _log(kafka_broker.bootstrap_servers, service)
    seen: list[QueuedCommand] = []
    log.replay(_applier(seen))
    # Its log goes to Python logging: the raised error's traceback keeps it alive to the end
    # of the run, where it would print connection errors once the broker stops.
    zombie = Producer(client_config(kafka_broker.bootstrap_servers, **{"transactional.id": service}))
    zombie.init_transactions(20)
    zombie.begin_transaction()
    zombie.produce(log.topic, key=b"zombie", value=_command("Z").value_bytes(), partition=0)
    zombie.flush(20)

    queued = log.submit(lambda: _command("REAL"))  # init_transactions aborts the zombie's
    log.wait_for(queued.sequence)
    with pytest.raises(KafkaException):
        zombie.commit_transaction(20)
    log.wait_until_caught_up()
    assert [q.command.command_id for q in seen] == ["stream/`REAL`/create"]
    log.close()


def test_two_servers_racing_for_the_same_names_write_each_name_once(kafka_broker) -> None:
    service = f"svc_{uuid.uuid4().hex[:8]}"
    servers = [_log(kafka_broker.bootstrap_servers, service) for _ in range(2)]
    metastores: list[list[str]] = [[], []]
    for log, names in zip(servers, metastores, strict=True):
        log.replay(lambda q, names=names: names.append(q.command.command_id))
    outcomes: dict[str, list[str]] = {}
    lock = threading.Lock()

    def create(server: int, name: str) -> None:
        names = metastores[server]

        def execute() -> Command:
            command = _command(name)
            if command.command_id in names:
                raise ValueError(f"{name} already exists")
            return command

        try:
            servers[server].submit(execute)
            result = "created"
        except ValueError as exc:
            result = str(exc)
        with lock:
            outcomes.setdefault(name, []).append(result)

    names = [f"S{i}" for i in range(6)]
    threads = [threading.Thread(target=create, args=(s, n)) for n in names for s in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    for log in servers:
        log.wait_until_caught_up()
    for name in names:
        assert sorted(outcomes[name]) == sorted(["created", f"{name} already exists"]), name
    assert metastores[0] == metastores[1]
    assert sorted(metastores[0]) == sorted(f"stream/`{n}`/create" for n in names)
    for log in servers:
        log.close()


def test_submitting_before_the_log_is_applied_is_refused(kafka_broker) -> None:
    log = _log(kafka_broker.bootstrap_servers, f"svc_{uuid.uuid4().hex[:8]}")
    try:
        with pytest.raises(CommandLogError, match="once the command log is applied"):
            log.submit(lambda: _command("A"))
    finally:
        log.close()
