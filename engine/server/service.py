"""The service behind a kspark server: command log, metastore and query registry; no HTTP.

    service = KsqlService(bootstrap_servers, "my_service", Path("state"))
    service.start()                                    # replay the command topic, start queries
    service.execute("CREATE STREAM S (...) WITH (...);", properties={})   # ksqlDB entities
    query = service.push_query("SELECT * FROM S EMIT CHANGES;", {})       # a PushQuery
    service.close()

Statements that change the metastore (CREATE, CREATE ... AS SELECT, INSERT INTO ...
SELECT, DROP, TERMINATE) go through the command log (``engine.commandlog``): validated and
executed against a snapshot of the metastore inside the log's transaction, written as a
command holding the statement's plan, and applied from the log by every server of the
service, this one included, in log order. The answer waits until this server has applied
the command. Informational statements (LIST, SHOW, DESCRIBE) read the metastore; INSERT
VALUES writes its record directly; SET and UNSET change the request's properties.

Persistent queries run on this server's Spark session through the streaming runtime of
``engine.hosting.application`` (``build_streaming_query``, the transactional sink), their
checkpoints under ``STATE_DIR/<service id>/queries/<query id>/`` (shared by the service's
servers). Each query runs on exactly one server of the service at a time, the one its
Kafka group membership assigns it to (``engine.server.ownership``): a server starts the
queries it is assigned, stops those revoked before giving them up, and restarts a query
whose Spark stream failed with backoff (its state shows ERROR meanwhile).

Errors are ``ServiceError``s carrying ksqlDB's error code and the statement's text.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import queue
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.commandlog import Command, CommandLog, QueuedCommand
from engine.commandlog.log import command_topic
from engine.errors import (
    CommandLogError,
    KafkaClientError,
    KsqlError,
    StatementPrepareError,
    UpgradeError,
)
from engine.facade.compatibility import replay_values, service_values, settle_after_replay
from engine.facade.engine import is_hidden_topic
from engine.facade.properties import check_override, check_statement_property
from engine.hosting.application import (
    CHECKPOINT_DIR,
    SCHEMA_REGISTRY_URL,
    StreamingApplication,
    state_carry_problem,
)
from engine.kafka.admin import TopicAdmin
from engine.parser import ast, parse
from engine.plan import expr as X
from engine.plan import serde
from engine.plan.plan import (
    AlterSourceCommand,
    CreateStreamCommand,
    CreateTableCommand,
    DropSourceCommand,
    QueryPlan,
    StatementPlan,
)
from engine.server import entities as E
from engine.server.cluster_terminator import (
    COMMAND_ID as TERMINATE_COMMAND_ID,
)
from engine.server.cluster_terminator import (
    DELETE_TOPIC_LIST,
    TERMINATE_CLUSTER,
    TerminationPlan,
    delete_patterns,
    is_terminate_cluster,
)
from engine.server.errors import ServiceError, statement_failure
from engine.server.ownership import Backoff, QueryOwnership, assignment_topic, status_topic
from engine.server.properties import canonical_name, request_properties
from engine.server.pull import PullQueries, PullResult, is_pull_query
from engine.server.rest_config import COMMAND_RESPONSE_TIMEOUT

LOG = logging.getLogger("engine.server")
AUTO_OFFSET_RESET = "auto.offset.reset"
PUSH_V2_ENABLED = "ksql.query.push.v2.enabled"
ERROR_QUEUE_SIZE = "ksql.query.error.max.queue.size"
NOT_A_QUERY_RESOURCE = (  # ksqlDB's words, written out whole (the errors reference reads them)
    "Statement type `io.confluent.ksql.parser.KsqlParser$PreparedStatement' not supported for this resource"
)
INTERNAL_TOPIC_REPLICAS = "ksql.internal.topic.replicas"
INTERNAL_TOPIC_MIN_INSYNC_REPLICAS = "ksql.internal.topic.min.insync.replicas"
QUERY_ENDPOINT_MESSAGE = (
    "The following statement types should be issued to the websocket endpoint '/query':\n"
    "\t* PRINT\n\t* SELECT"
)


@dataclass
class _QueryEntry:
    """A persistent query this server knows from the log, and its Spark handle if it runs here."""

    query: QueryPlan
    statement_text: str
    properties: dict[str, Any]
    handle: Any = None
    error: str | None = None
    traced: str = ""  # the last failure whose whole stack went to the log (each distinct one goes once)
    # Its latest failures, as ksqlDB's query descriptions list them (queryErrors), oldest first.
    errors: collections.deque[dict[str, Any]] = field(default_factory=lambda: collections.deque(maxlen=10))
    # Set once the query has fixed its starting offsets (or failed): records written after
    # that are read even with auto.offset.reset=latest.
    started: threading.Event = field(default_factory=threading.Event)


@dataclass
class KsqlService:
    """One server of a service: its view of the command topic, its metastore and its queries."""

    bootstrap_servers: str
    service_id: str
    state_dir: Path
    properties: Mapping[str, Any] = field(default_factory=dict)
    run_queries: bool = True  # False: metastore only (tests of the log, read-only tools)
    spark_master: str = "local[2]"
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    command_timeout: float = 30.0
    server_id: str = ""  # this server among its service's (HOST:PORT it answers on); default host-pid
    session_timeout_ms: int = 6000  # a server silent this long is dead: its queries move

    def __post_init__(self) -> None:
        self.state_dir = Path(self.state_dir)
        self.server_id = self.server_id or f"{socket.gethostname()}-{os.getpid()}"
        self.app = StreamingApplication(
            self.bootstrap_servers,
            self.state_dir / self.service_id / "queries",
            properties={**self.properties, "ksql.service.id": self.service_id},
            spark_master=self.spark_master,
            spark_conf=self.spark_conf,
        )
        self.log = CommandLog(self.bootstrap_servers, self.service_id, timeout=self.command_timeout)
        self._engine_lock = threading.RLock()  # the metastore: applied under it, read under it
        self._queries_lock = threading.RLock()  # the query registry
        # Queries start and stop in log order on one worker, so applying the log never
        # waits for Spark (a start takes seconds): ("start" | "replace" | "stop", query id), None ends it.
        self._operations: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._worker = threading.Thread(target=self._run_operations, name="query-starter", daemon=True)
        self._running_lock = threading.RLock()  # a query starts or stops under it (worker vs revocation)
        self._backoff = Backoff.from_properties(self.properties)
        self.ownership: QueryOwnership | None = None
        if self.run_queries:
            self.ownership = QueryOwnership(
                self.bootstrap_servers, self.service_id, self.server_id, on_assigned=self._assigned,
                on_revoked=self._revoked, session_timeout_ms=self.session_timeout_ms, timeout=self.command_timeout,
            )
        self._statuses: dict[str, E.CommandStatus] = {}
        self._queries: dict[str, _QueryEntry] = {}
        self.host: str | None = None  # HOST:PORT this server answers on, once the HTTP layer knows it
        self.pulls = PullQueries(  # pull queries' table materializations
            self.bootstrap_servers, registry_url=self.app.topics.registry_url)
        self._push_queries: set[Any] = set()
        self._replayed = False
        self._replay_done = threading.Event()
        self.ready = False
        # RUNNING, then TERMINATING and TERMINATED once the log held TERMINATE CLUSTER
        # (engine.server.cluster_terminator); a terminated server refuses every statement.
        self.state = "RUNNING"
        self._terminated = threading.Event()
        self.cluster_id = ""
        from engine.server.metrics import ServerMetrics

        self.metrics = ServerMetrics(self)  # GET /metrics (engine.server.metrics)

    @property
    def engine(self) -> Any:
        return self.app.engine

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 120.0) -> None:
        """Create the command topic, apply it to the end, then start the queries it holds."""
        from confluent_kafka.admin import AdminClient

        from engine.kafka.client import client_config

        admin = TopicAdmin(self.bootstrap_servers, timeout=min(timeout, 30.0))
        admin.check_connection()
        self.cluster_id = str(
            AdminClient(client_config(self.bootstrap_servers)).list_topics(timeout=10).cluster_id or ""
        )
        parse("LIST STREAMS;")  # builds the SQL parser now (seconds) rather than in a first request
        self.log.create_topic(int(self.properties.get(INTERNAL_TOPIC_REPLICAS, 1)),
                              int(self.properties.get(INTERNAL_TOPIC_MIN_INSYNC_REPLICAS, 1)))
        try:
            self.log.replay(self._apply, timeout)
        finally:
            self._replay_done.set()
        if self.state != "RUNNING":
            return  # the log held TERMINATE CLUSTER: this server cleans up and serves nothing
        with self._engine_lock:
            self._replayed = True
            settle_after_replay(self.engine.config, commands_replayed=len(self._statuses))
            for query in self.engine.query_order():
                self._operations.put(("start", query.query_id))
        if self.run_queries and self._operations.empty():
            # Nothing to run yet: start Spark meanwhile, so the first query need not wait as long.
            threading.Thread(target=self._warm_up_spark, name="spark-warm-up", daemon=True).start()
        self._worker.start()
        if self.ownership is not None:
            self.ownership.start()  # the queries assigned to this server start on the worker
        self.ready = True

    def _warm_up_spark(self) -> None:
        from engine.runtime.session import get_spark

        try:
            get_spark(self.spark_master, dict(self.spark_conf), kafka=True, long_running=True)
        except Exception as exc:  # noqa: BLE001 - the first query start reports it again
            LOG.warning("Spark did not start: %s", exc)

    def close(self) -> None:
        """Stop push queries, persistent queries and the log consumer."""
        self.ready = False
        if self.state != "RUNNING":  # TERMINATE CLUSTER stopped them already
            self._terminated.wait(timeout=120)
            self.pulls.close()
            self.app.topics.close()
            return
        for query in list(self._push_queries):
            query.close()
        self.pulls.close()
        self.log.close()
        self._operations.put(None)
        if self._worker.is_alive():
            self._worker.join(timeout=120)
        if self.ownership is not None:
            self.ownership.close()  # stops this server's queries, then the others take them
        with self._queries_lock:
            for query_id in list(self._queries):
                self._stop_query(query_id)
        self.app.topics.close()  # the producer of INSERT VALUES and /inserts-stream

    def _run_operations(self) -> None:
        while True:
            try:
                operation = self._operations.get(timeout=0.5)
            except queue.Empty:
                self._supervise()
                continue
            if operation is None:
                return
            action, query_id = operation
            if action == "start":
                self._start_query(query_id)
            elif action == "replace":
                # The new plan starts from the old one's checkpoint (offsets and state): the
                # old version stops first, a batch it had in flight is the new version's.
                with self._running_lock:
                    self._stop_query(query_id)
                    self._start_query(query_id)
            else:
                with self._running_lock:
                    self._stop_query(query_id)
                    if self.ownership is not None and self.ownership.owns(query_id):
                        self.ownership.publish(query_id, None)  # terminated: its state is gone
                with self._queries_lock:
                    self._queries.pop(query_id, None)
                self._backoff.forget(query_id)
                self.app.metrics.forget(query_id)

    # ------------------------------------------------------------------ ownership (engine.server.ownership)

    def _assigned(self, partitions: set[int]) -> None:
        """Group membership gave this server ``partitions``: start their queries (on the worker)."""
        assert self.ownership is not None
        with self._queries_lock:
            known = list(self._queries)
        for query_id in self.ownership.queries_of(partitions, known):
            self._operations.put(("start", query_id))

    def _revoked(self, partitions: set[int]) -> None:
        """``partitions`` go to another server: stop their queries before this returns."""
        assert self.ownership is not None
        with self._queries_lock:
            known = list(self._queries)
        with self._running_lock:
            for query_id in self.ownership.queries_of(partitions, known):
                self._stop_query(query_id)
                entry = self._queries.get(query_id)
                if entry is not None:
                    entry.error = None
                self._backoff.forget(query_id)

    def _supervise(self) -> None:
        """A query whose Spark stream died shows ERROR and is restarted with backoff."""
        if not self.run_queries:
            return
        with self._queries_lock:
            entries = list(self._queries.items())
        for query_id, entry in entries:
            handle = entry.handle
            if handle is None:
                continue
            try:
                alive = handle.isActive
            except Exception:  # noqa: BLE001 - a JVM call that fails means the query is gone
                alive = False
            if alive:
                continue
            with self._running_lock:
                if entry.handle is not handle:
                    continue
                entry.handle = None
                entry.error, trace = _failure_of(handle)
                if _SPARK_RERUN_METRICS_DEFECT in trace:
                    # Spark 4.1's Kafka source reports its metrics with offsets it has not read yet when
                    # the first batch after a start is one the checkpoint's offset log already held (a
                    # batch a stop interrupted): the batch has run and committed, then the progress
                    # report fails, and the next start runs normally (the soak's restarts show it). So it
                    # starts again at once and shows no ERROR; its sink's transactions keep the output exact.
                    entry.error = None
                    self._backoff.retry_now(query_id)
                    LOG.warning("query %s: restarted at once: Spark's Kafka source failed to report the metrics "
                                "of the batch it re-ran from the checkpoint (a Spark 4.1 defect; no record is "
                                "lost or repeated)", query_id)
                    continue
                self._failed(query_id, entry.error)
                if trace and entry.error != entry.traced:  # each distinct failure's stack once, for the log's reader
                    entry.traced = entry.error
                    LOG.error("query %s: the failure's whole stack:\n%s", query_id, trace)
        for query_id in self._backoff.due():
            self._start_query(query_id)

    def _error_queue_size(self) -> int:
        """``ksql.query.error.max.queue.size``: how many of a query's latest failures its
        description lists (ksqlDB's default 10)."""
        text = str(self.engine.config.get(ERROR_QUEUE_SIZE, 10)).strip()
        return max(int(text), 0) if text.lstrip("-").isdigit() else 10

    def _failed(self, query_id: str, error: str) -> None:
        entry = self._queries.get(query_id)
        if entry is not None:
            entry.errors.append(E.query_error(error, int(time.time() * 1000)))
        delay = self._backoff.failed(query_id)
        LOG.error("query %s failed (restart in %g s): %s", query_id, delay, error)
        if self.ownership is not None:
            self.ownership.publish(query_id, "ERROR", error)

    # ------------------------------------------------------------------ applying the log

    def _apply(self, queued: QueuedCommand) -> None:
        """Execute one command from the log: never validated again, never skipped."""
        command = queued.command
        if is_terminate_cluster(command.statement):
            with self._engine_lock:
                self._statuses[command.command_id] = E.CommandStatus("QUEUED", "Statement written to command topic")
                self._begin_termination(command.properties.get(DELETE_TOPIC_LIST))
            return
        started: str | None = None
        replaced = False
        stopped: list[str] = []
        with self._engine_lock:
            engine = self.engine
            replay_values(engine.config, {**command.properties, **command.original_properties})
            try:
                if command.terminate is not None:
                    ids = list(engine.queries) if command.terminate == "ALL" else [command.terminate]
                    for query_id in ids:
                        engine.terminate(query_id)
                    stopped = ids
                    status = E.CommandStatus("SUCCESS", "Query terminated." if len(ids) == 1 else "All queries terminated.")
                else:
                    plan = serde.statement_plan_from_json(command.plan)
                    message = self._success_message(plan)
                    before = set(engine.queries)
                    engine.restore(plan)
                    stopped = sorted(before - set(engine.queries))
                    query_id = plan.query.query_id if plan.query is not None else None
                    if plan.query is not None:
                        with self._queries_lock:
                            previous = self._queries.get(plan.query.query_id)
                            entry = _QueryEntry(plan.query, command.statement, dict(command.properties),
                                                errors=collections.deque(maxlen=self._error_queue_size()))
                            if previous is not None:  # CREATE OR REPLACE: the old version runs until
                                entry.handle = previous.handle  # the worker stops it and starts this one
                                replaced = True
                            self._queries[plan.query.query_id] = entry
                        started = plan.query.query_id
                    status = E.CommandStatus("SUCCESS", message, query_id)
            except KsqlError as exc:
                LOG.error("command %d (%s) failed: %s", queued.sequence, command.command_id, exc)
                status = E.CommandStatus("ERROR", f"Executing the command at sequence {queued.sequence} failed: {exc}")
            self._statuses[command.command_id] = status
            for query_id in stopped:
                self._operations.put(("stop", query_id))
            if started is not None and self._replayed:
                self._operations.put(("replace" if replaced else "start", started))

    # ------------------------------------------------------------------ TERMINATE CLUSTER

    def refuse_if_terminated(self) -> None:
        """ksqlDB's answer (503) to a request once the cluster is terminating or terminated."""
        if self.state == "TERMINATING":
            raise ServiceError("The server is shutting down", code=50303)
        if self.state == "TERMINATED":
            raise ServiceError("The server is shut down", code=50304)

    def terminate_cluster(self, delete_topic_list: Any = None) -> dict[str, Any]:
        """``POST /ksql/terminate``: write TERMINATE CLUSTER to the command log with the request's
        ``deleteTopicList``; answer once this server has terminated (or its wait timed out)."""
        self.refuse_if_terminated()
        if not isinstance(self.log, CommandLog):
            raise ServiceError("TERMINATE CLUSTER is served with --metastore command-topic only.", code=40000)
        if not self.ready:
            raise ServiceError("The server is not ready yet: it is still applying the command topic.", code=50300)
        patterns = delete_patterns(delete_topic_list)
        command = Command(command_id=TERMINATE_COMMAND_ID, statement=TERMINATE_CLUSTER,
                          properties={DELETE_TOPIC_LIST: [p.pattern for p in patterns]})
        try:
            queued = self.log.submit(lambda: command)
        except (CommandLogError, KafkaClientError) as exc:
            raise ServiceError(str(exc), code=50000) from None
        self._terminated.wait(self.command_timeout)
        status = E.CommandStatus("QUEUED", "Statement written to command topic")
        return E.current_status(TERMINATE_CLUSTER, TERMINATE_COMMAND_ID, status, queued.sequence)

    def _managed_topics(self) -> list[str]:
        """The service's own topics, which TERMINATE CLUSTER deletes."""
        topics = [command_topic(self.service_id), assignment_topic(self.service_id), status_topic(self.service_id)]
        if self.app.processing_log is not None:  # created by this server (auto.create)
            topics.append(self.app.processing_log.topic)
        return topics

    def _begin_termination(self, delete_topic_list: Any) -> None:
        """Stop accepting statements and clean up on a thread of its own (the log's consumer
        calls this, and the log is closed on the way)."""
        if self.state != "RUNNING":
            return
        self.state = "TERMINATING"
        self.ready = False
        try:
            patterns = delete_patterns(delete_topic_list)
        except ServiceError as exc:  # checked when written: only a foreign writer gets here
            LOG.error("TERMINATE CLUSTER: %s; no sink topic is deleted.", exc.message)
            patterns = []
        plan = TerminationPlan.of(self.engine.metastore, patterns, self._managed_topics())
        threading.Thread(target=self._terminate, args=(plan,), name="terminate-cluster", daemon=True).start()

    def _terminate(self, plan: TerminationPlan) -> None:
        try:
            self._replay_done.wait(timeout=300)
            for query in list(self._push_queries):
                query.close()
            self._operations.put(None)
            if self._worker.is_alive():
                self._worker.join(timeout=120)
            if self.ownership is not None and self._replayed:
                self.ownership.close()
            with self._queries_lock:
                for query_id in list(self._queries):
                    self._stop_query(query_id)
                self._queries.clear()
            self.log.close()
            plan.delete(self.bootstrap_servers, self.app.topics.registry_url)
            shutil.rmtree(self.state_dir / self.service_id, ignore_errors=True)
            LOG.info("The cluster was terminated: deleted topics %s and subjects %s.",
                     ", ".join((*plan.sink_topics, *plan.managed_topics)) or "none", ", ".join(plan.subjects) or "none")
        except Exception:  # noqa: BLE001 - the server ends terminated either way; the log says why
            LOG.exception("TERMINATE CLUSTER did not clean up completely")
        finally:
            self.state = "TERMINATED"
            self._terminated.set()

    def _success_message(self, plan: StatementPlan) -> str:
        command = plan.command
        if plan.query is not None:
            return f"Created query with ID {plan.query.query_id}"
        if isinstance(command, DropSourceCommand):
            source = self.engine.metastore.get(command.name)
            topic = source.topic if source is not None else command.name
            return f"Source `{command.name}` (topic: {topic}) was dropped."
        if isinstance(command, AlterSourceCommand):
            return f"{command.kind.capitalize()} {command.name} altered."
        return "Table created" if isinstance(command, CreateTableCommand) else "Stream created"

    # ------------------------------------------------------------------ persistent queries

    def _start_query(self, query_id: str) -> None:
        """Start a persistent query this server owns on its Spark session (failures: restarted later)."""
        with self._running_lock:
            entry = self._queries.get(query_id)
            if not self.run_queries or entry is None or entry.handle is not None:
                return
            if self.ownership is not None and not self.ownership.owns(query_id):
                return
            self._start_owned(query_id, entry)

    def _start_owned(self, query_id: str, entry: _QueryEntry) -> None:
        app = self.app
        try:
            offsets = entry.properties.get(AUTO_OFFSET_RESET, self.engine.config.get(AUTO_OFFSET_RESET, "latest"))
            entry.handle = app.launch(entry.query, available_now=False, starting_offsets=str(offsets))
            _await_first_offsets(entry.handle, app.state_dir / query_id / CHECKPOINT_DIR, self.command_timeout)
            entry.error = None
            if self.ownership is not None:
                self.ownership.publish(query_id, "RUNNING")
        except Exception as exc:  # noqa: BLE001 - a query that cannot start is shown in ERROR
            entry.error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            LOG.error("query %s did not start: %s", query_id, entry.error)
            self._failed(query_id, entry.error)
        finally:
            entry.started.set()

    def _stop_query(self, query_id: str) -> None:
        entry = self._queries.get(query_id)
        if entry is None or entry.handle is None:
            return
        handle, entry.handle = entry.handle, None
        try:
            handle.stop()
        except Exception:  # noqa: BLE001 - a failed query is stopped already
            pass

    def running_query_ids(self) -> set[str]:
        """The persistent queries running on this server now."""
        with self._queries_lock:
            return {query_id for query_id, entry in self._queries.items() if entry.handle is not None}

    def query_infos(self) -> list[E.RunningQueryInfo]:
        """The persistent queries in creation order, with their state and owner."""
        members = self._live_members()  # asks Kafka: before taking the locks
        with self._engine_lock, self._queries_lock:
            infos = []
            for query in self.engine.query_order():
                entry = self._queries.get(query.query_id)
                sink = self.engine.metastore.get(query.sink)
                state, owner = _state(entry, self.run_queries), None
                if self.ownership is not None:
                    state, owner = self._cluster_state(query.query_id, state, members)
                infos.append(E.RunningQueryInfo(
                    query_id=query.query_id,
                    statement_text=entry.statement_text if entry else "",
                    sink=query.sink,
                    sink_topic=sink.topic if sink is not None else query.sink,
                    state=state,
                    owner=owner,
                    errors=tuple(entry.errors) if entry else (),
                ))
            return infos

    def _live_members(self) -> dict[str, set[int]]:
        if self.ownership is None:
            return {}
        try:
            return self.ownership.members()
        except KafkaClientError as exc:
            LOG.warning("the owners of queries are unknown: %s", exc)
            return {}

    def _cluster_state(self, query_id: str, local: str, members: dict[str, set[int]]) -> tuple[str, str | None]:
        """The query's state and owner: this server's view if it runs it, else what its owner published."""
        assert self.ownership is not None
        owner = self.ownership.owner_of(query_id, members)
        if owner == self.server_id:
            return local, owner
        published = self.ownership.status_of(query_id)
        if owner is None:
            return "UNRESPONSIVE", None  # no live server holds it (a rebalance moves it)
        if published is not None and published.owner == owner:
            return published.state, owner
        return "RUNNING", owner  # being started by its new owner

    def cluster_members(self) -> list[str]:
        """The live servers of the service (their server ids), sorted."""
        if self.ownership is None:
            return [self.server_id]
        try:
            return sorted(self.ownership.members())
        except KafkaClientError as exc:
            raise ServiceError(str(exc), code=50000) from None

    # ------------------------------------------------------------------ statements

    def status(self, command_id: str) -> E.CommandStatus | None:
        """The status of the last command with this id this server applied (None: unknown)."""
        with self._engine_lock:
            return self._statuses.get(command_id)

    def statuses(self) -> dict[str, str]:
        """Every command this server applied, by id, with its last status (``GET /status``)."""
        with self._engine_lock:
            return {command_id: status.status for command_id, status in self._statuses.items()}

    def metadata(self) -> dict[str, Any]:
        """ksqlDB's ``ServerMetadata`` (``GET /v1/metadata``): the version and the cluster ids."""
        from engine import __version__

        return {"version": __version__, "clusterId": self.cluster_ids()}

    def cluster_ids(self) -> dict[str, Any]:
        """ksqlDB's ``ServerClusterId`` (``GET /v1/metadata/id``)."""
        return {"id": "", "scope": {"path": [], "clusters": {
            "kafka-cluster": self.cluster_id, "ksql-cluster": self.service_id}}}

    def wait_for_sequence(self, sequence: int, timeout: float | None = None) -> None:
        """Read your writes: wait until this server has applied the command at ``sequence``."""
        try:
            self.log.wait_for(sequence, timeout if timeout is not None else self.command_timeout)
        except CommandLogError as exc:
            raise ServiceError(
                f"Timed out while waiting for a previous command to execute. command sequence number: "
                f"{sequence} ({exc})",
                code=50301,
            ) from None

    def execute(
        self,
        text: str,
        properties: Mapping[str, Any] | None = None,
        variables: Mapping[str, str] | None = None,
    ) -> list[dict[str, Any]]:
        """Run the statements of ``text`` in order; their entities (SET, INSERT VALUES give none).

        Raises ``ServiceError`` naming the failing statement, with the entities of the
        statements before it; with a code ksqlDB answers as a ``generic_error`` (40000, 41700,
        ...) it names none.
        """
        self.refuse_if_terminated()
        if not self.ready:
            raise ServiceError("The server is not ready yet: it is still applying the command topic.", code=50300)
        if not text.strip():
            return []  # as ksqlDB's /ksql: no statement, no entity
        local_properties = dict(properties or {})
        local_variables = {**self.engine.variables, **dict(variables or {})}
        try:
            statements = parse(text, variables=local_variables)
        except KsqlError as exc:
            raise ServiceError(statement_failure(exc, text), statement_text=text) from None
        results: list[dict[str, Any]] = []
        for parsed in statements:
            try:
                entity = self._execute_one(parsed.statement, parsed.text, local_properties, local_variables)
            except ServiceError as exc:
                if exc.code not in E.STATEMENT_ERROR_CODES:  # a generic_error, as ksqlDB's Errors answer it
                    raise
                raise ServiceError(
                    exc.message, code=exc.code, statement_text=parsed.text, entities_so_far=results
                ) from None
            except KsqlError as exc:
                parsed.relocate(exc)  # the statement ran alone: its position in the request
                raise ServiceError(str(exc), statement_text=parsed.text, entities_so_far=results) from None
            if entity is not None:
                results.append(entity)
        return results

    def _execute_one(
        self, stmt: Any, text: str, properties: dict[str, Any], variables: dict[str, str]
    ) -> dict[str, Any] | None:
        if isinstance(stmt, ast.Query | ast.PrintTopic):
            raise ServiceError(QUERY_ENDPOINT_MESSAGE, code=E.ERROR_QUERY_ENDPOINT)
        if isinstance(stmt, ast.SetProperty):
            check_statement_property(stmt.name)
            check_override(stmt.name, self.engine.config)
            properties.update(request_properties(properties, {stmt.name: stmt.value}))
            return None
        if isinstance(stmt, ast.UnsetProperty):
            check_statement_property(stmt.name)
            properties.pop(canonical_name(stmt.name)[0], None)
            return None
        if isinstance(stmt, ast.DefineVariable):
            variables[stmt.name] = stmt.value
            return None
        if isinstance(stmt, ast.UndefineVariable):
            if stmt.name not in variables:  # ksqlDB's VariableExecutor warns and goes on
                return E.warning_entity(text, f"Cannot undefine variable '{stmt.name}' which was never defined")
            variables.pop(stmt.name, None)
            return None
        if isinstance(stmt, ast.Informational) and stmt.kind == "LIST VARIABLES":
            return E.variables_list(text, variables)
        if isinstance(stmt, ast.Informational):
            return self._informational(stmt, text, properties)
        if isinstance(stmt, ast.InsertValues):
            with self._engine_lock:
                snapshot = self.engine.snapshot()
            snapshot.config = {**snapshot.config, **properties}
            target = snapshot.metastore.get(stmt.target)
            if target is not None:
                _refuse_internal(target.topic, f"INSERT INTO {stmt.target}")
            try:
                snapshot.execute_sql(text)
            except KafkaClientError as exc:
                raise ServiceError(str(exc), code=50000) from None
            except StatementPrepareError as exc:  # ksqlDB's two prefixes: before and while inserting
                raise ServiceError(f"Failed to prepare statement: {exc}") from None
            except KsqlError as exc:
                raise ServiceError(f"Failed to insert values into '{stmt.target}'. {exc}") from None
            return None
        if isinstance(stmt, ast.AssertStatement) and stmt.kind in ("TOPIC", "SCHEMA"):
            return self._assert(stmt, text, properties)
        if isinstance(stmt, ast.TerminateQuery) and stmt.query_id != "ALL":
            terminated = self.terminate_push_query(text, stmt.query_id)
            if terminated is not None:
                return terminated
            if "transient" in stmt.query_id.lower() and stmt.query_id not in self.engine.queries:
                # ksqlDB's TerminateQueryExecutor: a push query's id no server streams
                raise ServiceError(f"Failed to terminate query with query ID: '{stmt.query_id}'",
                                   code=E.ERROR_BAD_REQUEST)
        if isinstance(stmt, ast.CreateSource | ast.CreateAsSelect | ast.InsertInto | ast.DropSource | ast.AlterSource
                      | ast.TerminateQuery):
            return self._distribute(stmt, text, properties)
        raise ServiceError(f"kspark's server does not support this statement yet: {text}")

    def _assert(self, stmt: ast.AssertStatement, text: str, properties: Mapping[str, Any]) -> dict[str, Any]:
        """ASSERT [NOT EXISTS] TOPIC / SCHEMA (``engine.server.asserts``): checked, never logged."""
        from engine.server import asserts

        with self._engine_lock:
            config = {**self.engine.config, **properties}
        if stmt.kind == "TOPIC":
            return asserts.assert_topic(stmt, text, TopicAdmin(self.bootstrap_servers), config)
        registry = config.get(SCHEMA_REGISTRY_URL) or self.app.topics.registry_url
        return asserts.assert_schema(stmt, text, asserts.RegistryLookup(registry), config)

    def _distribute(self, stmt: Any, text: str, properties: dict[str, Any]) -> dict[str, Any]:
        """Write the statement to the command log and answer once this server applied it."""
        skipped: list[str] = []
        dropped = self.engine.metastore.get(stmt.name) if isinstance(stmt, ast.DropSource) else None

        def execute() -> Command:
            with self._engine_lock:
                original = service_values(properties, self.engine.config)  # compatibility configs
                snapshot = self.engine.snapshot()
            snapshot.config = {**snapshot.config, **properties, **original}
            if isinstance(stmt, ast.TerminateQuery):
                query_id = stmt.query_id
                if query_id != "ALL" and query_id not in snapshot.queries:
                    raise ServiceError(f"Unknown queryId: {query_id}")
                return Command(command_id=f"terminate/{query_id}/execute", statement=text,
                               terminate=query_id, properties=properties)
            if isinstance(stmt, ast.CreateSource):
                _require_topic_or_partitions(stmt, snapshot.topics(), snapshot.config)
                _check_existing_topic(stmt, lambda topic: _topic_facts(self.bootstrap_servers, topic))
            if isinstance(stmt, ast.InsertInto) and (target := snapshot.metastore.get(stmt.target)) is not None:
                _refuse_internal(target.topic, f"INSERT INTO {stmt.target}")
            results = snapshot.execute_sql(text)
            plan = results[0].plan if results else None
            if plan is not None and plan.query is not None and isinstance(plan.command, CreateStreamCommand | CreateTableCommand):
                _refuse_internal(plan.command.topic, f"The sink of {plan.command.name}")
            if plan is not None and plan.query is not None and isinstance(stmt, ast.CreateAsSelect) and stmt.or_replace:
                self._check_state_carry(plan.query)
            if plan is None:  # IF [NOT] EXISTS found nothing to do: nothing is written
                skipped.append(_noop_message(stmt))
                raise _NothingToDo()
            return Command(command_id=_command_id(stmt), statement=text, plan=serde.to_json_value(plan),
                           properties=properties, original_properties=original)

        try:
            queued = self.log.submit(execute)
        except _NothingToDo:
            if not isinstance(stmt, ast.DropSource):  # ksqlDB's DistributingExecutor: a warning, nothing logged
                return E.warning_entity(text, skipped[0])
            return E.current_status(text, _command_id(stmt), E.CommandStatus("SUCCESS", skipped[0]),
                                    max(self.log.position - 1, 0))
        except CommandLogError as exc:
            raise ServiceError(str(exc), code=50000) from None
        except KafkaClientError as exc:
            raise ServiceError(str(exc), code=50000) from None
        try:
            self.log.wait_for(queued.sequence, self._command_response_timeout())
            status = self._statuses.get(queued.command.command_id) or E.CommandStatus("EXECUTING", "Executing statement")
        except CommandLogError:
            status = E.CommandStatus("QUEUED", "Statement written to command topic")
        entry = self._queries.get(status.query_id) if status.query_id else None
        if entry is not None and self.ownership is not None and status.query_id is not None:
            # rows written after the answer are read: wait until its owner (maybe this server) started it
            self.ownership.wait_published(status.query_id, self.command_timeout)
            if self.ownership.owns(status.query_id):  # a replaced query: its new version started here
                entry.started.wait(self.command_timeout)
        if isinstance(stmt, ast.DropSource) and stmt.delete_topic and status.status == "SUCCESS":
            self._delete_topic(status.message, dropped, {**self.engine.config, **properties})
        return E.current_status(text, queued.command.command_id, status, queued.sequence)

    def _command_response_timeout(self) -> float:
        """How long a statement's answer waits for this server to apply its command before it
        says QUEUED: ``ksql.server.command.response.timeout.ms`` of the server's config, else
        ``command_timeout``."""
        given = self.properties.get(COMMAND_RESPONSE_TIMEOUT)
        return int(str(given).strip()) / 1000 if given is not None else self.command_timeout

    def _check_state_carry(self, query: QueryPlan) -> None:
        """A CREATE OR REPLACE of a running query: refused when Spark could not run the new
        plan on the query's checkpoint (``state_carry_problem``)."""
        with self._engine_lock:
            old = self.engine.queries.get(query.query_id)
        if old is None or not self.run_queries:
            return
        from engine.runtime.session import get_spark

        app = self.app
        spark = get_spark(app.spark_master, dict(app.spark_conf), kafka=True, long_running=True)
        with self._engine_lock:
            problem = state_carry_problem(self.engine, old, query, spark, self.bootstrap_servers,
                                          tasks=app.tasks_of(old))
        if problem is not None:
            raise UpgradeError(problem)

    def _delete_topic(self, drop_message: str, source: Any, config: Mapping[str, Any]) -> None:
        """DROP ... DELETE TOPIC: the topic, then (as ksqlDB's ``TopicDeleteInjector``) the
        registry subjects of its key and value when their formats keep schemas there; a subject
        already gone is no failure."""
        from engine.server.cluster_terminator import SCHEMA_FORMATS

        topic = drop_message.split("(topic: ", 1)[-1].rsplit(")", 1)[0]
        try:
            TopicAdmin(self.bootstrap_servers).delete_topic(topic, missing_ok=True)
        except KafkaClientError:
            raise ServiceError(f"Could not delete the corresponding kafka topic: {topic}", code=50000) from None
        if source is None:
            return
        subjects = [f"{topic}-{part}" for part, fmt in (("key", source.formats.key_format),
                                                        ("value", source.formats.value_format))
                    if str(fmt).upper() in SCHEMA_FORMATS]
        registry = config.get(SCHEMA_REGISTRY_URL) or self.app.topics.registry_url
        if not subjects or not registry:
            return
        from engine.serde.registry import registry_client

        client = registry_client(registry)
        for subject in subjects:
            try:
                client.delete_subject(subject)
            except Exception as exc:  # the client raises SchemaRegistryError for a 404 and the rest
                if getattr(exc, "http_status_code", None) != 404:
                    raise ServiceError(f"Could not clean up the schema registry for topic: {topic}", code=50000) from None

    # ------------------------------------------------------------------ informational statements

    def _informational(self, stmt: ast.Informational, text: str, properties: Mapping[str, Any]) -> dict[str, Any]:
        kind = stmt.kind
        with self._engine_lock:
            sources = self.engine.metastore.all()
            if kind in ("LIST STREAMS", "LIST TABLES"):
                return E.source_list(text, "STREAM" if kind == "LIST STREAMS" else "TABLE", sources)
            if kind in ("LIST STREAMS EXTENDED", "LIST TABLES EXTENDED", "DESCRIBE STREAMS", "DESCRIBE TABLES",
                        "DESCRIBE STREAMS EXTENDED", "DESCRIBE TABLES EXTENDED"):
                wanted = "STREAM" if "STREAMS" in kind else "TABLE"
                described = [self._describe(s, extended=True) for s in sorted(sources, key=lambda s: s.name)
                             if s.kind == wanted]
                return E.source_descriptions_entity(text, described)
            if kind in ("DESCRIBE", "DESCRIBE EXTENDED"):
                source = self.engine.metastore.get(str(stmt.target))
                if source is None:
                    raise ServiceError(f"Could not find STREAM/TABLE '{stmt.target}' in the Metastore")
                return E.source_description_entity(text, self._describe(source, extended=kind.endswith("EXTENDED")))
            config = dict(self.engine.config)
        if kind == "LIST QUERIES":
            return E.queries_list(text, self.query_infos() + self.transient_infos())
        if kind == "LIST QUERIES EXTENDED":
            return self._describe_queries(text)
        if kind in ("LIST TOPICS", "LIST ALL TOPICS", "LIST TOPICS EXTENDED", "LIST ALL TOPICS EXTENDED"):
            listed = {name: t for name, t in self.app.topics.topics.items()
                      if " ALL " in kind or not is_hidden_topic(name, config)}  # as ksqlDB's ListTopicsExecutor
            if not kind.endswith("EXTENDED"):
                return E.topics_list(text, {name: t.partitions for name, t in listed.items()})
            try:
                consumers = TopicAdmin(self.bootstrap_servers).topic_consumers()
            except KafkaClientError as exc:
                raise ServiceError(str(exc), code=50000) from None
            return E.topics_list_extended(text, {
                name: E.TopicConsumers(t.partitions, *consumers.get(name, (0, 0))) for name, t in listed.items()
            })
        if kind == "LIST PROPERTIES":
            return E.properties_list(text, config, properties)
        if kind in ("LIST FUNCTIONS", "DESCRIBE FUNCTION", "LIST TYPES", "EXPLAIN"):
            return self._catalog(stmt, text, properties)
        raise ServiceError(f"kspark's server does not support {kind} yet: {text}")

    def _describe_queries(self, text: str) -> dict[str, Any]:
        """``query_descriptions``: SHOW QUERIES EXTENDED, persistent queries then push queries."""
        from engine.server import catalog

        infos = self.query_infos()
        with self._engine_lock:
            described = [
                catalog.persistent_description(self.engine, query, infos,
                                               self._queries[query.query_id].properties
                                               if query.query_id in self._queries else {}, self.host)
                for query in self.engine.query_order()
            ]
        described += [catalog.transient_description(push, self.host) for push in self._open_push_queries()]
        return E.query_descriptions(text, described)

    def transient_infos(self) -> list[E.RunningQueryInfo]:
        """The push queries being streamed by this server, as SHOW QUERIES lists them (type PUSH)."""
        return [
            E.RunningQueryInfo(query_id=push.query_id, statement_text=push.plan.statement_text, sink="",
                               sink_topic="", state="RUNNING", owner=self.host, query_type="PUSH")
            for push in self._open_push_queries()
        ]

    def _open_push_queries(self) -> list[Any]:
        return sorted(self._push_queries.copy(), key=lambda q: q.query_id)

    def terminate_push_query(self, text: str, query_id: str) -> dict[str, Any] | None:
        """TERMINATE of a push query this server streams: close it (its stream ends);
        ksqlDB's ``terminate_query`` entity. None when no push query has that id."""
        push = next((q for q in self._open_push_queries() if q.query_id.upper() == query_id.upper()), None)
        if push is None:
            return None
        self.close_push_query(push)
        return E.terminate_query(text, push.query_id)

    def _catalog(self, stmt: ast.Informational, text: str, properties: Mapping[str, Any]) -> dict[str, Any]:
        """LIST FUNCTIONS, DESCRIBE FUNCTION, LIST TYPES, EXPLAIN (``engine.server.catalog``)."""
        from engine.server import catalog

        if stmt.kind == "LIST FUNCTIONS":
            return catalog.list_functions(text)
        if stmt.kind == "DESCRIBE FUNCTION":
            return catalog.describe_function(text, str(stmt.target))
        if stmt.kind == "LIST TYPES":
            return catalog.list_types(text, {})
        if stmt.statement is not None:
            with self._engine_lock:
                snapshot = self.engine.snapshot()
            snapshot.config = {**snapshot.config, **properties}
            return catalog.explain_statement(text, snapshot, stmt)
        infos = self.query_infos()
        with self._engine_lock:
            return catalog.explain_query(text, self.engine, str(stmt.target), infos, properties, self.host)

    def _describe(self, source: Any, *, extended: bool) -> dict[str, Any]:
        infos = {q.query_id: q for q in self.query_infos()}
        readers = [infos[q] for q in self.engine.metastore.readers(source.name) if q in infos]
        writers = [infos[q] for q in self.engine.metastore.writers(source.name) if q in infos]
        partitions = 0
        if extended:
            topic = self.app.topics.topics.get(source.topic)
            partitions = topic.partitions if topic is not None else 0
        statistics: dict[str, Any] = {}
        if extended:  # ksqlDB's figures of the source's topic (engine.hosting.query_metrics)
            metrics = self.app.metrics
            statistics = {"statistics": metrics.topic_statistics(source.topic),
                          "error_stats": metrics.topic_error_statistics(source.topic), "host": self.host or ""}
        return E.source_description(
            source, read_queries=readers, write_queries=writers, extended=extended, partitions=partitions,
            **statistics,
        )

    # ------------------------------------------------------------------ push queries

    def push_query(self, text: str, properties: Mapping[str, Any] | None = None,
                   variables: Mapping[str, str] | None = None, *, old_api: bool = False) -> Any:
        """A push query (not started) over the metastore, ``variables`` substituted (the request's
        session variables over the server's); ``close_push_query`` forgets it.

        A request that is not one query is refused in ksqlDB's words: those of its
        ``StreamedQueryResource`` with ``old_api`` (``/query`` answered in JSON), else those of
        its ``QueryEndpoint`` (``/query-stream``, and ``/query`` answered delimited)."""
        from engine.hosting.push_query import PushQuery

        if not self.ready:
            raise ServiceError("The server is not ready yet: it is still applying the command topic.", code=50300)
        variables = {**self.engine.variables, **dict(variables or {})}
        try:
            statements = parse(text, variables=variables)
        except KsqlError as exc:
            raise ServiceError(statement_failure(exc, text), statement_text=text) from None
        if len(statements) != 1:
            raise ServiceError(f"Expected exactly one KSQL statement; found {len(statements)} instead",
                               statement_text=text)
        if not isinstance(statements[0].statement, ast.Query):
            if old_api:  # ksqlDB names the class of its parsed statement's holder, whatever the statement
                raise ServiceError(NOT_A_QUERY_RESOURCE, code=40000)
            raise ServiceError("Neither a query nor a print statement", statement_text=text)
        if statements[0].statement.emit is None:
            raise ServiceError(
                "kspark's server answers push queries (SELECT ... EMIT CHANGES) only; "
                "pull queries are not supported yet.",
                statement_text=text,
            )
        try:
            with self._engine_lock:
                query = PushQuery.on_application(self.app, text, dict(properties or {}), variables=variables)
                config = {**self.engine.config, **dict(properties or {})}
                if is_scalable_push_query(statements[0].statement, self.engine.metastore, config):
                    _check_scalable_push(statements[0].statement, self.engine.metastore)
                    query.plan = dataclasses.replace(query.plan, query_id=f"SCALABLE_PUSH_QUERY_{uuid.uuid4()}")
                    query.skip_tombstones = True  # ksqlDB's scalable push consumer skips null values
        except KsqlError as exc:
            raise ServiceError(str(exc), statement_text=text) from None
        self._push_queries.add(query)
        return query

    def print_query(self, text: str, variables: Mapping[str, str] | None = None) -> Any:
        """A started ``PrintedTopic`` when ``text`` is a PRINT, else None (``engine.server.prints``).

        Refuses a topic that does not exist (under its name, or another case of it) with
        ksqlDB's words."""
        from engine.server.prints import PrintedTopic

        if not self.ready:
            raise ServiceError("The server is not ready yet: it is still applying the command topic.", code=50300)
        try:
            statements = parse(text, variables={**self.engine.variables, **dict(variables or {})})
        except KsqlError:
            return None  # the query paths answer the parse error
        if len(statements) != 1 or not isinstance(statements[0].statement, ast.PrintTopic):
            return None
        stmt = statements[0].statement
        try:
            names = TopicAdmin(self.bootstrap_servers).list_topics()
        except KafkaClientError as exc:
            raise ServiceError(str(exc), code=50000) from None
        matches = [name for name in names if name.lower() == stmt.topic.lower()]
        if stmt.topic not in names and len(matches) != 1:
            suggestion = "".join(f"\n\tprint {name};" for name in matches)
            raise ServiceError(
                f"Could not find topic '{stmt.topic}', or the KSQL user does not have permissions to list the "
                f"topic. Topic names are case-sensitive.{chr(10) + 'Did you mean:' + suggestion if matches else ''}",
                code=E.ERROR_BAD_REQUEST,
            )
        return PrintedTopic(self.bootstrap_servers, stmt.topic, from_beginning=stmt.from_beginning,
                            interval=stmt.interval, limit=stmt.limit).start()

    def close_push_query(self, query: Any) -> None:
        query.close()
        self._push_queries.discard(query)

    def pull_query(self, text: str, properties: Mapping[str, Any] | None = None,
                   variables: Mapping[str, str] | None = None) -> PullResult | None:
        """The answer of a pull query (``engine.server.pull``), or None when ``text`` is a push query.

        ``variables`` (the request's session variables) are substituted over the server's."""
        if not self.ready:
            raise ServiceError("The server is not ready yet: it is still applying the command topic.", code=50300)
        started = time.perf_counter()
        try:
            statements = parse(text, variables={**self.engine.variables, **dict(variables or {})})
            if len(statements) != 1 or not is_pull_query(statements[0].statement):
                return None
            with self._engine_lock:
                config = {**self.engine.config, **(properties or {})}
                plan = self.pulls.plan(self.engine.metastore, statements[0].statement, text, config)
            result = self.pulls.run(plan)
            self.metrics.pull_answered(time.perf_counter() - started, ok=True)
            return result
        except KsqlError as exc:
            self.metrics.pull_answered(time.perf_counter() - started, ok=False)
            raise ServiceError(statement_failure(exc, text), statement_text=text) from None

    def inserts_stream(self, target: str) -> Any:
        """``/inserts-stream``: an ``InsertsStream`` writing rows to the stream ``target``."""
        from engine.server.inserts import open_inserts

        if not self.ready:
            raise ServiceError("The server is not ready yet: it is still applying the command topic.", code=50300)
        with self._engine_lock:
            snapshot = self.engine.snapshot()
        return open_inserts(snapshot, target, _refuse_internal)

    # ------------------------------------------------------------------ server info

    def info(self) -> dict[str, Any]:
        """ksqlDB's ``KsqlServerInfo``."""
        from engine import __version__

        return {
            "KsqlServerInfo": {
                "version": __version__,
                "kafkaClusterId": self.cluster_id,
                "ksqlServiceId": self.service_id,
                "serverStatus": "RUNNING" if self.ready else "STARTING",
            }
        }

    def metastore_summary(self) -> list[str]:
        """``KIND NAME`` of every source and ``QUERY id`` of every query, sorted (for comparing servers)."""
        with self._engine_lock:
            found = [f"{s.kind} {s.name}" for s in self.engine.metastore.all()]
            found += [f"QUERY {q}" for q in self.engine.queries]
        return sorted(found)


class _NothingToDo(Exception):
    """IF [NOT] EXISTS made the statement a no-op: nothing is written to the log."""


def is_scalable_push_query(stmt: Any, metastore: Any, config: Mapping[str, Any]) -> bool:
    """Whether ksqlDB answers ``stmt`` as a scalable push query (``ScalablePushUtil``): with
    ``ksql.query.push.v2.enabled``, an EMIT CHANGES query of one source written by exactly one
    persistent query, read from the latest offsets, without GROUP BY, WINDOW, HAVING, PARTITION BY
    or ROWPARTITION/ROWOFFSET. Its id is ``SCALABLE_PUSH_QUERY_<uuid>``; it reads what that
    persistent query writes from now on, as any push query from the latest offsets does, but
    without a table's row deletions (ksqlDB's consumer skips records with a null value)."""
    from engine.server.pull import DISALLOWED_PSEUDO_COLUMNS

    if str(config.get(PUSH_V2_ENABLED, "false")).strip().lower() != "true":
        return False
    if not isinstance(stmt, ast.Query) or stmt.emit != "CHANGES" or isinstance(stmt.from_, ast.Join):
        return False
    if stmt.group_by or stmt.window is not None or stmt.having is not None or stmt.partition_by:
        return False
    if str(config.get(AUTO_OFFSET_RESET, "latest")).lower() != "latest":
        return False
    name = getattr(stmt.from_, "name", None)
    if not isinstance(name, str) or len(metastore.writers(name)) != 1:
        return False
    expressions = [e for e in (getattr(item, "expr", None) or getattr(item, "base", None) for item in stmt.select)
                   if e is not None]
    if stmt.where is not None:
        expressions.append(stmt.where)
    return not any(isinstance(node, X.ColumnRef) and node.name in DISALLOWED_PSEUDO_COLUMNS
                   for expression in expressions for node in X.walk(expression))


def _check_scalable_push(stmt: ast.Query, metastore: Any) -> None:
    """Refuse what ksqlDB refuses in a scalable push query (``engine.server.pull_where``)."""
    from engine.analysis.query import Scope
    from engine.server.pull_where import check_scalable_push

    assert isinstance(stmt.from_, ast.AliasedSource)  # is_scalable_push_query refuses a join
    source = metastore.get(stmt.from_.name)
    scope = Scope.of_source(source, getattr(stmt.from_, "alias", None) or source.name)
    where = scope.resolve(stmt.where, clause="WHERE") if stmt.where is not None else None
    check_scalable_push(stmt, source, where)


def _command_id(stmt: Any) -> str:
    if isinstance(stmt, ast.CreateSource | ast.CreateAsSelect):
        return f"{stmt.kind.lower()}/`{stmt.name}`/create"
    if isinstance(stmt, ast.DropSource):
        return f"{stmt.kind.lower()}/`{stmt.name}`/drop"
    if isinstance(stmt, ast.AlterSource):
        return f"{stmt.kind.lower()}/`{stmt.name}`/alter"
    if isinstance(stmt, ast.InsertInto):
        return f"stream/`{stmt.target}`/create"
    return f"terminate/{stmt.query_id}/execute"


def _noop_message(stmt: Any) -> str:
    if isinstance(stmt, ast.DropSource):
        return f"Source `{stmt.name}` does not exist."
    kind = str(getattr(stmt, "kind", "source")).lower()
    return f"Cannot add {kind} `{getattr(stmt, 'name', '')}`: A {kind} with the same name already exists."


def _require_topic_or_partitions(stmt: ast.CreateSource, topics: Any, config: Mapping[str, Any]) -> None:
    """ksqlDB's ``TopicCreateInjector``: a CREATE of a source whose topic does not exist must say
    how many PARTITIONS to create it with; its example is the statement as ksqlDB's injectors
    left it (formats filled in from the defaults) with ``PARTITIONS=2``."""
    from engine.analysis.statement_text import format_create_source

    props = {str(k).upper(): v for k, v in stmt.properties.items()}
    topic = props.get("KAFKA_TOPIC")
    if not isinstance(topic, str) or topic in topics or "PARTITIONS" in props:
        return
    key = props.get("KEY_FORMAT", props.get("FORMAT"))
    value = props.get("VALUE_FORMAT", props.get("FORMAT"))
    if key is None or value is None:  # ksqlDB's DefaultFormatInjector fills both in (or refuses first)
        value = value if value is not None else config.get("ksql.persistence.default.format.value")
        if value is None:
            return
        key = key if key is not None else config.get("ksql.persistence.default.format.key", "KAFKA")
        props["KEY_FORMAT"], props["VALUE_FORMAT"] = str(key).upper(), str(value).upper()
    example = format_create_source(stmt, {**props, "PARTITIONS": 2})
    raise ServiceError(
        f"Topic '{topic}' does not exist. If you want to create a new topic for the stream/table please re-run the "
        "statement providing the required 'PARTITIONS' configuration in the WITH clause (and optionally 'REPLICAS'). "
        f"For example: {example}",
        code=E.ERROR_BAD_REQUEST,
    )


def _topic_facts(bootstrap_servers: str, topic: str) -> tuple[int, int, int | None] | None:
    """The topic's partitions, replicas and ``retention.ms`` (None: no such topic)."""
    admin = TopicAdmin(bootstrap_servers)
    found = admin.describe_topic(topic)
    if found is None:
        return None
    retention = admin.topic_config(topic).get("retention.ms")
    return found[0], found[1], int(retention) if retention is not None and str(retention).lstrip("-").isdigit() else None


def _check_existing_topic(stmt: ast.CreateSource, facts: Any) -> None:
    """ksqlDB's check of an existing topic a CREATE names with PARTITIONS, REPLICAS or
    RETENTION_MS (its ``TopicValidationUtil``): the topic must have as many partitions, at least as
    many replicas and, for a stream, the same retention. What the statement does not give is the
    topic's own. ``facts(topic)`` gives (partitions, replicas, retention.ms) or None."""
    props = {str(k).upper(): v for k, v in stmt.properties.items()}
    topic = props.get("KAFKA_TOPIC")
    if not isinstance(topic, str) or not {"PARTITIONS", "REPLICAS", "RETENTION_MS"} & set(props):
        return
    found = facts(topic)
    if found is None:
        return
    partitions, replicas, retention = found
    want_partitions = int(props.get("PARTITIONS", partitions))
    want_replicas = int(props.get("REPLICAS", replicas))
    # a table's topic is compacted: ksqlDB asks for no retention there
    want_retention = None if stmt.kind == "TABLE" else int(props["RETENTION_MS"]) if "RETENTION_MS" in props else retention
    wrong_retention = want_retention is not None and retention is not None and want_retention != retention
    if want_partitions == partitions and not (want_replicas != -1 and replicas < want_replicas) and not wrong_retention:
        return
    message = (
        f"A Kafka topic with the name '{topic}' already exists, with different partition/replica configuration than "
        f"required. KSQL expects {want_partitions} partitions (topic has {partitions}), {want_replicas} replication "
        f"factor (topic has {replicas})"
    )
    if want_retention is not None and retention is not None:
        message = message.replace("partition/replica", "partition/replica/retention")
        message += f", and {want_retention} retention (topic has {retention})."
    else:
        message += "."
    raise ServiceError(message, code=E.ERROR_SERVER_ERROR)  # ksqlDB's KafkaTopicExistsException: a server error


def _refuse_internal(topic: str, what: str) -> None:
    """Internal topics (command topics, changelogs, ``__`` topics) are never written by statements."""
    if topic.startswith(("_confluent-ksql-", "__")):
        raise ServiceError(
            f"{what} cannot write to '{topic}': it is an internal topic (command topic, changelog or "
            "Kafka's own); statements may only read it."
        )


def _await_first_offsets(handle: Any, checkpoint: Path, timeout: float) -> None:
    """Wait until the query has written its first offsets (or stopped, or ``timeout`` passed)."""
    deadline = time.monotonic() + timeout
    offsets = checkpoint / "offsets"
    while time.monotonic() < deadline:
        if offsets.is_dir() and any(offsets.iterdir()):
            return
        if not handle.isActive:
            return
        time.sleep(0.1)


# The frame of Spark 4.1's failure when a restarted query's first batch came from its offset log.
_SPARK_RERUN_METRICS_DEFECT = "at org.apache.spark.sql.kafka010.KafkaMicroBatchStream$.metrics("


def _failure_of(handle: Any) -> tuple[str, str]:
    """The explaining line of a stopped Spark query's exception, and the exception's whole text
    (empty when there is none)."""
    try:
        failure = handle.exception()
    except Exception as exc:  # noqa: BLE001 - the JVM may be gone too
        return (str(exc).splitlines()[0] if str(exc) else type(exc).__name__), ""
    if failure is None:
        return "The query's Spark stream stopped.", ""
    from engine.hosting.application import root_cause_line

    text = str(failure)
    return root_cause_line(text, "The query's Spark stream failed."), _with_jvm_stacks(failure, text)


def _with_jvm_stacks(failure: Any, text: str) -> str:
    """``text`` and the JVM stack of ``failure`` and of each of its causes: PySpark keeps them
    beside the messages (``_stackTrace``, ``_cause``) and prints them only where
    spark.sql.pyspark.jvmStacktrace.enabled is set."""
    parts, seen, current = [text], 0, failure
    while current is not None and seen < 10:  # a cause chain is short; a cycle is not followed
        stack = getattr(current, "_stackTrace", None)
        if stack and str(stack) not in text:
            heading = "JVM stacktrace" if current is failure else f"Caused by: {getattr(current, '_desc', '')}"
            parts.append(f"{heading}:\n{stack}")
        current, seen = getattr(current, "_cause", None), seen + 1
    return "\n\n".join(parts)


def _state(entry: _QueryEntry | None, run_queries: bool) -> str:
    if entry is None or not run_queries:
        return "PENDING"
    if entry.error is not None:
        return "ERROR"
    handle = entry.handle
    if handle is None:
        return "RUNNING"  # being started, as ksqlDB shows a query whose streams start
    try:
        return "RUNNING" if handle.isActive else "ERROR"
    except Exception:  # noqa: BLE001 - a JVM call that fails means the query is gone
        return "ERROR"
