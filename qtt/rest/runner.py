"""Run REST QTT cases against a real kspark server on a real Kafka broker.

    with RestHarness.open() as harness:                 # starts a broker and a server
        result = run_rest_case(case, harness, file="push-queries.json")

A case runs as ksqlDB's own REST test runner runs it:

1. **Topics.** The case's ``topics`` (with their partitions), the topics its CREATE
   STREAM/TABLE statements name (their PARTITIONS, else 4, as ksqlDB's runner makes them), its
   input topics and its output topics that no query writes are created on the broker (1
   partition unless said otherwise).
2. **Statements**, in order, each as its own request with the case's ``properties`` (and
   ``auto.offset.reset=earliest`` unless the case sets it): queries (``SELECT``, ``PRINT``)
   to ``/query``, everything else to ``/ksql`` with the last ``commandSequenceNumber`` seen,
   so each statement sees the ones before it, and the variables the case's ``DEFINE``
   statements set so far (``sessionVariables``); with ``testPullWithProtoFormat`` pull
   queries ask for ksqlDB's protobuf form (``application/vnd.ksql.v1+protobuf``).
3. **Inputs** are produced before the first query (or after the last statement when there
   is none), encoded with the key and value formats of the source reading their topic, by
   Kafka's Java client (timestamps as given, 0 when none). With ``inputConditions.
   waitForActivePushQuery`` they are produced once the first push query has answered its
   header. A local engine (``engine.facade.engine.KsqlEngine``, no Spark) executes the non-query
   statements too, only to know each source's formats and columns.
4. **Responses** are compared as they come (``qtt.rest.responses``). A pull query is asked
   again until its answer matches or ``wait`` seconds pass, since persistent queries need
   time to process the inputs; a push query is read until it ends, until it has sent the
   expected rows (plus a short grace for extra ones), or for at most ``wait`` seconds.
5. **Errors.** The first error answer ends the case: it passes only when the case expects
   an error and the answer matches its type, message and status. An error saying kspark
   does not support a feature makes the case ``unsupported``.
6. **Outputs** are read back from their topics with a read_committed consumer (records the
   runner produced left out) and compared as the QTT harness compares records.
7. **Clean-up.** The queries the case started are terminated, its streams and tables
   dropped and its topics deleted, so the next case starts from the same empty server.
   When that fails, a server the harness started is restarted with a fresh service id.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.records import TopicInfo, TopicRecord
from engine.errors import KafkaClientError, UnsupportedFeatureError
from engine.hosting.application import SCHEMA_REGISTRY_URL
from qtt.kafka_runtime import SourceSerdes, encode_windowed_key, plain_bytes
from qtt.rest.client import (
    JSON_CONTENT,
    ClientTls,
    QueryStream,
    RestClient,
    RestClientError,
    parse_json,
)
from qtt.rest.model import ExpectedResponse, RestCase
from qtt.rest.producer import JavaInputProducer, ProducerError
from qtt.rest.responses import (
    admin_difference,
    clip,
    error_difference,
    error_message,
    query_difference,
    split_messages,
    unsupported_feature,
)
from qtt.rest.server import ServerProcess, ServerStartError, ServerTls
from qtt.runner import STATEMENT_TOPIC_PARTITIONS, CaseResult, Status, describe_exception, one_line
from qtt.verify import Verification, verify_outputs

OFFSET_RESET = "auto.offset.reset"
PROTOBUF_CONTENT = "application/vnd.ksql.v1+protobuf"
PUSH_GRACE_SECONDS = 1.0
_EMIT = re.compile(r"\bEMIT\s+(CHANGES|FINAL)\b", re.IGNORECASE)
_LEADING_COMMENTS = re.compile(r"^(\s+|--[^\n]*\n?|/\*.*?\*/)*", re.DOTALL)


class HarnessError(Exception):
    """The run itself cannot go on (no broker, no server); the message says why."""


# ---------------------------------------------------------------------------- statements


def statement_kind(statement: str) -> str:
    """``pull`` or ``push`` for queries (sent to /query), ``admin`` for the rest (/ksql)."""
    text = _LEADING_COMMENTS.sub("", statement, count=1)
    word = text.split(None, 1)[0].upper() if text.strip() else ""
    if word == "PRINT":
        return "push"
    if word == "SELECT":
        return "push" if _EMIT.search(text) else "pull"
    return "admin"


def request_properties(case: RestCase) -> dict[str, Any]:
    """What every request of ``case`` carries: earliest offsets, then the case's own."""
    return {OFFSET_RESET: "earliest", **case.properties}


def _sequence_number(entities: Any) -> int | None:
    numbers = [
        e["commandSequenceNumber"]
        for e in (entities if isinstance(entities, list) else [])
        if isinstance(e, Mapping) and isinstance(e.get("commandSequenceNumber"), int)
    ]
    return max(numbers) if numbers else None


def track_variables(statement: str, variables: dict[str, str]) -> str:
    """``statement`` with ``variables`` substituted; its DEFINE / UNDEFINE applied to them (as a
    ksqlDB client session keeps them). A statement that does not parse is left as it is."""
    from engine.errors import KsqlError
    from engine.parser import ast, parse

    if "${" not in statement and "DEFINE" not in statement.upper():
        return statement
    try:
        parsed = parse(statement, variables=variables)
    except KsqlError:
        return statement
    for item in parsed:
        if isinstance(item.statement, ast.DefineVariable):
            variables[item.statement.name] = item.statement.value
        elif isinstance(item.statement, ast.UndefineVariable):
            variables.pop(item.statement.name, None)
    return " ".join(item.text for item in parsed) or statement


# ---------------------------------------------------------------------------- the harness


@dataclass
class RestHarness:
    """What every case shares: the broker, the Java producer, the server and a work dir."""

    bootstrap_servers: str
    client: RestClient
    producer: JavaInputProducer
    work_dir: Path
    server: ServerProcess | None = None  # None: a server the harness did not start
    wait: float = 30.0
    server_timeout: float = 180.0
    baseline: frozenset[str] = frozenset()  # sources and queries there before the run
    restarts: int = 0
    owns_broker: bool = False  # True: every topic a case leaves may be deleted
    # The schema registry the server uses (its ``ksql.schema.registry.url``): AVRO and
    # JSON_SR inputs are written and outputs read in its wire format. None: no registry.
    registry_url: str | None = None
    warnings: list[str] = field(default_factory=list)

    @classmethod
    @contextlib.contextmanager
    def open(
        cls,
        *,
        server_url: str | None = None,
        bootstrap_servers: str | None = None,
        work_dir: Path | None = None,
        wait: float = 30.0,
        server_timeout: float = 180.0,
        registry_url: str | None = None,
        tls: bool = False,
        client_tls: ClientTls | None = None,
    ) -> Iterator[RestHarness]:
        """A harness on the given server and broker, or on ones started for it.

        With ``tls`` a started server serves HTTPS and asks for the runner's client
        certificate (certificates made in the work dir); ``client_tls`` is the runner's side
        of a given ``https://`` server (its CA, a client certificate).

        A server the harness starts gets a schema registry: ``registry_url``, or one started
        for the run (``engine.components.registry``). A given server uses ``registry_url``
        only when it is given (it must be that server's ``ksql.schema.registry.url``).
        What it starts it stops at the end, whatever happens (Ctrl-C included); a temporary
        work dir goes too (a given ``work_dir`` is kept, with the server's log).
        """
        from engine.components.broker import Broker
        from engine.components.registry import SchemaRegistry
        from engine.errors import ComponentError
        from engine.kafka import check_connection

        if server_url is not None and bootstrap_servers is None:
            raise HarnessError(
                "--server needs --bootstrap-servers: the broker that server uses, where the "
                "runner produces inputs and reads outputs."
            )
        keep = work_dir is not None
        root = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="qtt-rest-"))
        root.mkdir(parents=True, exist_ok=True)
        broker: Broker | None = None
        registry: SchemaRegistry | None = None
        server: ServerProcess | None = None
        try:
            try:
                if server_url is None and registry_url is None:  # starts while the broker starts
                    registry = SchemaRegistry(root / "registry", stop_with_parent=True)
                    registry.start()
                if bootstrap_servers is None:
                    broker = Broker(root / "broker", stop_with_parent=True)
                    broker.start()
                    broker.wait_ready()
                    bootstrap_servers = broker.bootstrap_servers
                    lib = broker.lib
                else:
                    check_connection(bootstrap_servers)
                    lib = Broker(root / "jars").fetch()
                if registry is not None:
                    registry.wait_ready()
                    registry_url = registry.url
            except (ComponentError, KafkaClientError) as exc:
                raise HarnessError(str(exc)) from None
            try:
                producer_cm = JavaInputProducer.open(bootstrap_servers, lib, root / "producer.log")
                producer = producer_cm.__enter__()
            except ProducerError as exc:
                raise HarnessError(str(exc)) from None
            try:
                if server_url is None:
                    server = ServerProcess(
                        bootstrap_servers,
                        root / "server-1",
                        properties={} if registry_url is None else {SCHEMA_REGISTRY_URL: registry_url},
                        tls=ServerTls.make(root / "pki") if tls else None,
                    )
                    try:
                        server_url = server.start(timeout=server_timeout)
                    except ServerStartError as exc:
                        message = str(exc)
                        if not keep:  # the temp dir goes: say how to keep the log
                            message = re.sub(
                                r"\(log: [^)]*\)", "(--work-dir DIR keeps its log)", message
                            )
                        raise HarnessError(message) from None
                try:
                    client = server.client() if server is not None else RestClient(server_url, tls=client_tls)
                except (ValueError, RestClientError) as exc:
                    raise HarnessError(str(exc)) from None
                if not client.healthy():
                    raise HarnessError(f"The server at {server_url} does not answer GET /healthcheck.")
                harness = cls(
                    bootstrap_servers,
                    client,
                    producer,
                    root,
                    server,
                    wait=wait,
                    server_timeout=server_timeout,
                )
                harness.owns_broker = broker is not None
                harness.registry_url = registry_url
                try:
                    harness.baseline = frozenset(harness.server_objects())
                except (HarnessError, RestClientError) as exc:
                    harness.warnings.append(f"Cannot list what the server holds: {exc}")
                yield harness
            finally:
                producer_cm.__exit__(None, None, None)
        finally:
            if server is not None:
                server.stop()
            if broker is not None:
                broker.stop()
            if registry is not None:
                registry.stop()
            if not keep:
                shutil.rmtree(root, ignore_errors=True)

    @property
    def admin(self) -> Any:
        from engine.kafka import TopicAdmin

        return TopicAdmin(self.bootstrap_servers)

    def server_objects(self) -> list[str]:
        """``QUERY:id``, ``STREAM:name`` and ``TABLE:name`` of what the server holds."""
        found: list[str] = []
        for statement, list_key, kind, name_key in (
            ("SHOW QUERIES;", "queries", "QUERY", "id"),
            ("SHOW STREAMS;", "streams", "STREAM", "name"),
            ("SHOW TABLES;", "tables", "TABLE", "name"),
        ):
            answer = self.client.ksql(statement, {})
            if answer.status != 200 or not isinstance(answer.body, list) or not answer.body:
                raise HarnessError(
                    f"The server answered {statement} with HTTP {answer.status}: "
                    f"{clip(error_message(answer.body))}"
                )
            for item in answer.body[0].get(list_key) or []:
                if isinstance(item, Mapping) and isinstance(item.get(name_key), str):
                    found.append(f"{kind}:{item[name_key]}")
        return found

    def clean_up(
        self,
        topics_before: set[str] | None,
        sources: Sequence[tuple[str, str]] = (),
        known_topics: set[str] | frozenset[str] = frozenset(),
    ) -> str | None:
        """Terminate, drop and delete what the last case made; None, or why it could not.

        New topics are deleted: all of them on a broker the harness started, else only the
        ``known_topics`` (the case's and its sources'), never one that was there before.
        ``sources`` are the case's ``(STREAM|TABLE, name)`` in creation order: when the
        server cannot list what it holds, a server the harness started (nothing of anyone
        else's on it) gets ``TERMINATE ALL`` and a DROP of each, newest first.
        """
        problem: str | None = None
        try:
            for attempt in range(5):
                objects = [o for o in self.server_objects() if o not in self.baseline]
                if not objects:
                    break
                if attempt == 4:
                    problem = (
                        f"the server still holds {', '.join(objects[:5])} after TERMINATE and DROP"
                    )
                    break
                for item in objects:
                    kind, name = item.split(":", 1)
                    statement = f"TERMINATE {name};" if kind == "QUERY" else f"DROP {kind} `{name}`;"
                    self.client.ksql(statement, {})
        except (HarnessError, RestClientError) as exc:
            problem = str(exc)
            if self.server is not None and isinstance(exc, HarnessError):
                problem = self._drop_blindly(sources, problem)
        try:
            admin = self.admin
            made = [
                t
                for t in admin.list_topics()
                if topics_before is not None
                and t not in topics_before
                and not t.startswith("_")
                and (self.owns_broker or t in known_topics)
            ]
            for topic in made:
                with contextlib.suppress(KafkaClientError):
                    admin.delete_topic(topic, missing_ok=True)
            if made:  # the producer would keep their partitions for a topic of the same name
                self.producer.reset()
            deadline = time.monotonic() + 30
            while made and time.monotonic() < deadline:
                present = set(admin.list_topics())
                made = [t for t in made if t in present]
                if made:
                    time.sleep(0.2)
            if made and problem is None:
                problem = f"topics {', '.join(made[:5])} were not deleted within 30 s"
        except (KafkaClientError, ProducerError) as exc:
            problem = problem or str(exc)
        if problem is not None:
            self.reset_server(f"clean-up failed: {problem}")
        return problem

    def _drop_blindly(self, sources: Sequence[tuple[str, str]], why: str) -> str | None:
        try:
            answers = [self.client.ksql("TERMINATE ALL;", {})]
            for kind, name in reversed(sources):
                answers.append(self.client.ksql(f"DROP {kind} IF EXISTS `{name}`;", {}))
        except RestClientError as exc:
            return f"{why}; {exc}"
        failed = [a for a in answers if a.status != 200]
        if failed:
            return f"{why}; TERMINATE ALL / DROP answered HTTP {failed[0].status}: " + clip(
                error_message(failed[0].body)
            )
        return None

    def reset_server(self, why: str) -> None:
        """Restart a server the harness started (fresh service id); warn about a given one."""
        if self.server is None:
            self.warnings.append(f"The server at {self.client.url} may hold leftovers ({why}).")
            return
        self.server.stop()
        try:
            self.server.start(timeout=self.server_timeout)
            self.client = self.server.client()
        except ServerStartError as exc:
            raise HarnessError(f"Restarting the server after {why}: {exc}") from None
        self.restarts += 1
        self.baseline = frozenset()

    def ensure_server(self) -> None:
        """Restart a server the harness started when it died or stopped answering."""
        if self.server is not None and (not self.server.alive() or not self.client.healthy()):
            self.reset_server("the server stopped answering")


# ---------------------------------------------------------------------------- one case


class CaseFailure(Exception):
    """Ends a case with a verdict (raised inside ``_CaseRun``)."""

    def __init__(self, status: Status, reason: str, **extra: Any) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.extra = extra


@dataclass
class _CaseRun:
    case: RestCase
    harness: RestHarness
    properties: dict[str, Any] = field(default_factory=dict)
    sequence: int | None = None
    produced: set[tuple[str, int, int]] = field(default_factory=set)
    inputs_done: bool = False
    stage: str = "starting"
    schema_ids: dict[int, int] = field(default_factory=dict)  # the case's schema id -> the registry's
    variables: dict[str, str] = field(default_factory=dict)  # DEFINEd so far: later requests' sessionVariables

    def __post_init__(self) -> None:
        from engine.facade.engine import KsqlEngine

        self.properties = request_properties(self.case)
        self.shadow = KsqlEngine(dict(self.case.properties))

    # -- set-up --------------------------------------------------------------------------

    def register_schemas(self) -> None:
        """Register the topics' declared schemas on the server's registry before any
        statement (as ksqlDB's runner does); the registry gives its own ids, so the schema
        ids the statements name become the ones it gave."""
        from qtt.schemas import (
            RegistrationError,
            declared_schemas,
            ksqldb_runner_ids,
            register_topic_schemas,
        )

        if not any(True for _ in declared_schemas(self.case.topics)):
            return
        url = self.harness.registry_url
        if url is None:
            feature = "topic schemas declared by the case, without a schema registry"
            raise CaseFailure(Status.UNSUPPORTED, f"Unsupported feature: {feature}.", feature=feature)
        try:
            given = register_topic_schemas(self.case.topics, url)
        except RegistrationError as exc:
            feature = "a declared topic schema the schema registry refuses"
            raise CaseFailure(Status.UNSUPPORTED, f"Unsupported feature: {feature} ({exc}).", feature=feature) from None
        for subject, case_id in ksqldb_runner_ids(self.case.topics).items():
            if given[subject] != case_id:
                self.schema_ids[case_id] = given[subject]
        self.shadow.schema_registry_url = url

    def statement(self, index: int) -> str:
        """The case's statement as sent: its schema ids are the registry's."""
        from qtt.schemas import with_registry_ids

        return with_registry_ids(self.case.statements[index], self.schema_ids)

    def create_topics(self) -> None:
        from engine.facade.engine import topics_declared_by

        case = self.case
        wanted: dict[str, int] = {t.name: t.partitions for t in case.topics}
        for statement in self._substituted():
            # As ksqlDB's runner: PARTITIONS, else 4 (a record's ROWPARTITION and a pull
            # query's scan order, partition by partition, follow from it).
            for name, partitions in topics_declared_by(statement, STATEMENT_TOPIC_PARTITIONS):
                wanted.setdefault(name, partitions)
        for record in case.inputs:
            wanted.setdefault(record.topic, 1)
        for name, partitions in wanted.items():
            declared = next((t for t in case.topics if t.name == name), None)
            self.shadow.create_topic(
                declared.to_topic_info() if declared else TopicInfo(name=name, partitions=partitions)
            )
        outputs = {r.topic for r in case.outputs} - set(wanted)
        for name in outputs:
            self.shadow.create_topic(TopicInfo(name=name))
        for statement in self._substituted():
            if statement_kind(statement) == "admin":
                with contextlib.suppress(Exception):  # the server judges statements
                    self.shadow.execute_sql(statement)
        sinks = {self._topic_of(q.sink) for q in self.shadow.query_order()}
        for name in outputs - sinks:
            wanted[name] = 1
        admin = self.harness.admin
        for name, partitions in wanted.items():
            admin.create_topic(name, partitions, exist_ok=True)

    def _substituted(self) -> list[str]:
        """The statements as sent, with the variables the case's DEFINEs set before each
        substituted (for the topics they name and the local engine)."""
        variables: dict[str, str] = {}
        return [track_variables(self.statement(i), variables) for i in range(len(self.case.statements))]

    def _topic_of(self, source: str) -> str:
        info = self.shadow.source(source)
        return info.topic if info is not None else source

    # -- inputs --------------------------------------------------------------------------

    def produce_inputs(self) -> None:
        if self.inputs_done:
            return
        self.inputs_done = True
        self.stage = "producing the inputs"
        serdes: dict[str, SourceSerdes | None] = {}
        for record in self.case.inputs:
            if record.topic not in serdes:
                serdes[record.topic] = self._serdes(record.topic, writer=False)
            key, value = self._encode(record, serdes[record.topic])
            if record.timestamp is not None and record.timestamp < 0:
                raise CaseFailure(
                    Status.ERROR,
                    f"A Kafka record cannot have the negative timestamp {record.timestamp} "
                    f"(input to topic '{record.topic}').",
                )
            try:
                partition, offset = self.harness.producer.send(
                    record.topic,
                    partition=record.partition,
                    timestamp=record.timestamp or 0,
                    key=key,
                    value=value,
                    headers=record.headers,
                )
            except ProducerError as exc:
                raise CaseFailure(Status.ERROR, str(exc)) from None
            self.produced.add((record.topic, partition, offset))

    def _serdes(self, topic: str, *, writer: bool) -> SourceSerdes | None:
        """The serdes of the source on ``topic``: a query's sink first when ``writer``."""
        sources = [s for s in self.shadow.sources() if s.topic == topic]
        if writer:
            sinks = {q.sink for q in self.shadow.query_order()}
            sources.sort(key=lambda s: s.name not in sinks)
        return SourceSerdes.of(sources[0], self.harness.registry_url) if sources else None

    @staticmethod
    def _encode(record: TopicRecord, codec: SourceSerdes | None) -> tuple[bytes | None, bytes | None]:
        if codec is not None:
            try:
                return codec.encode(record)
            except UnsupportedFeatureError as exc:
                raise CaseFailure(
                    Status.UNSUPPORTED, f"Unsupported feature: {exc.feature}.", feature=exc.feature
                ) from None
        key = plain_bytes(record.key) if record.key is not None else None
        if record.window is not None:
            key = encode_windowed_key(key, record.window)
        return key, None if record.value is None else plain_bytes(record.value)

    # -- statements ----------------------------------------------------------------------

    def run_statements(self) -> None:
        case = self.case
        for i in range(len(case.statements)):
            statement = self.statement(i)
            kind = statement_kind(statement)
            expected = case.responses[i] if i < len(case.responses) else None
            self.stage = f"statement {i + 1} ({one_line(statement, 60)})"
            if kind != "admin" and not case.wait_for_active_push_query:
                self.produce_inputs()
                self.stage = f"statement {i + 1} ({one_line(statement, 60)})"
            if kind == "admin":
                self._admin(i, statement, expected)
            elif kind == "pull":
                self._pull(i, statement, expected)
            else:
                self._push(i, statement, expected)
        self.produce_inputs()
        error = case.expected_error
        if error is not None:
            parts = [
                error.type.rsplit(".", 1)[-1] if error.type else "",
                f"containing {error.message!r}" if error.message else "",
                f"status {error.status}" if error.status is not None else "",
            ]
            described = ", ".join(p for p in parts if p)
            raise CaseFailure(
                Status.FAILED,
                f"Expected an error{f' ({described})' if described else ''} "
                "but every statement succeeded.",
            )

    def _label(self, index: int) -> str:
        # In backticks, which conformance summaries mask, so alike failures count together.
        text = one_line(self.case.statements[index], 60).replace("`", "")
        return f"Statement {index + 1} `{text}`"

    def _error(self, index: int, status: int, body: Any) -> None:
        """An error answer ends the case: passed, failed or unsupported."""
        message = error_message(body)
        feature = unsupported_feature(message)
        expected = self.case.expected_error
        if expected is not None:
            problem = error_difference(expected, status, body)
            if problem is None:
                raise CaseFailure(Status.PASSED, "", message_matched=True)
            if feature is None:
                raise CaseFailure(
                    Status.FAILED,
                    f"{self._label(index)}: {problem}.",
                    message_matched=expected.message is None or expected.message in message,
                )
        if feature is not None:
            raise CaseFailure(Status.UNSUPPORTED, f"Unsupported feature: {feature}.", feature=feature)
        server_side = " (a server error)" if status >= 500 else ""
        raise CaseFailure(
            Status.FAILED,
            f"{self._label(index)} answered HTTP {status}{server_side}: {clip(message, 300)}",
        )

    def _admin(self, index: int, statement: str, expected: ExpectedResponse | None) -> None:
        answer = self.harness.client.ksql(
            statement, self.properties, command_sequence_number=self.sequence, variables=self.variables
        )
        if answer.status != 200:
            self._error(index, answer.status, answer.body)
        self.sequence = _sequence_number(answer.body) or self.sequence
        track_variables(statement, self.variables)  # the session's, sent with later requests
        if expected is None:
            return
        if expected.admin is None:
            raise CaseFailure(
                Status.FAILED,
                f"{self._label(index)}: the case expects a query answer for a statement sent to /ksql.",
            )
        problem = admin_difference(expected.admin, answer.body)
        if problem is not None:
            raise CaseFailure(Status.FAILED, f"{self._label(index)}: {problem}.")

    def _open(self, index: int, statement: str, *, pull: bool = False) -> QueryStream:
        accept = PROTOBUF_CONTENT if pull and self.case.pull_protobuf else JSON_CONTENT
        stream = self.harness.client.query(
            statement, self.properties, accept=accept, variables=self.variables
        )
        if stream.status != 200:
            self._error(index, stream.status, stream.error_body)
        return stream

    def _judge_query(
        self, index: int, expected: ExpectedResponse | None, messages: list[Any], *, pull: bool
    ) -> str | None:
        parts = split_messages(messages)
        if parts["errors"] and (expected is None or expected.query is None
                                or not split_messages(expected.query)["errors"]):
            first = parts["errors"][0]
            self._error(index, 200, first if isinstance(first, Mapping) else {"message": str(first)})
        if expected is None:
            return None
        if expected.query is None:
            return "the case expects an admin entity for a query"
        return query_difference(expected.query, messages, pull=pull)

    def _pull(self, index: int, statement: str, expected: ExpectedResponse | None) -> None:
        deadline = time.monotonic() + self.harness.wait
        while True:
            with self._open(index, statement, pull=True) as stream:
                stream.wait(lambda _m: False, timeout=max(1.0, deadline - time.monotonic()))
                ended, failure, messages = stream.done, stream.failure, stream.messages()
            problem = self._judge_query(index, expected, messages, pull=True)
            if not ended:
                problem = f"the pull query did not end within {self.harness.wait:.0f} s" + (
                    f"; {problem}" if problem else ""
                )
            elif failure is not None and problem is None:
                problem = failure
            if problem is None:
                return
            if time.monotonic() >= deadline or not ended:
                raise CaseFailure(
                    Status.FAILED,
                    f"{self._label(index)}: {problem} (after {self.harness.wait:.0f} s of retries).",
                )
            time.sleep(0.5)

    def _push(self, index: int, statement: str, expected: ExpectedResponse | None) -> None:
        wait = self.harness.wait
        with self._open(index, statement) as stream:
            if self.case.wait_for_active_push_query and not self.inputs_done:
                if not stream.wait(lambda m: _header(m) or _failed(m), wait):
                    raise CaseFailure(
                        Status.FAILED, f"{self._label(index)}: no header within {wait:.0f} s."
                    )
                self.produce_inputs()
            wanted = split_messages(expected.query) if expected and expected.query else None
            if wanted is not None and wanted["final"] is None:
                rows = len(wanted["rows"])
                reached = stream.wait(
                    lambda m: (_header(m) and _rows(m) >= rows) or _failed(m), wait
                )
                if reached and not stream.done:
                    stream.wait(lambda m: _rows(m) > rows or _failed(m), PUSH_GRACE_SECONDS)
            else:
                reached = stream.wait(lambda m: _failed(m) or _final(m), wait)
            messages, failure = stream.messages(), stream.failure
        problem = self._judge_query(index, expected, messages, pull=False)
        if problem is not None:
            waited = "" if reached else f" (after waiting {wait:.0f} s)"
            raise CaseFailure(Status.FAILED, f"{self._label(index)}: {problem}{waited}.")
        if failure is not None and wanted is not None and wanted["final"] is not None:
            raise CaseFailure(Status.FAILED, f"{self._label(index)}: {failure}.")

    # -- outputs -------------------------------------------------------------------------

    def verify_outputs(self) -> Verification:
        from engine.kafka import read_topic

        self.stage = "reading the outputs"
        expected: dict[str, int] = {}
        for record in self.case.outputs:
            expected[record.topic] = expected.get(record.topic, 0) + 1
        actual: dict[str, list[TopicRecord]] = {}
        deadline = time.monotonic() + self.harness.wait
        for topic, count in expected.items():
            codec = self._serdes(topic, writer=True)
            settled = False
            while True:
                try:
                    consumed = read_topic(self.harness.bootstrap_servers, topic, timeout=10)
                except KafkaClientError as exc:
                    raise CaseFailure(Status.FAILED, f"Cannot read output topic '{topic}': {exc}") from None
                records = [
                    codec.decode(topic, r) if codec is not None else _plain_record(topic, r)
                    for r in consumed
                    if (topic, r.partition, r.offset) not in self.produced
                ]
                if len(records) >= count and settled:
                    break
                if time.monotonic() >= deadline:
                    break
                settled = len(records) >= count
                time.sleep(0.5 if settled else 0.3)
            actual[topic] = records
        return verify_outputs(
            self.case.outputs, actual, headers_at=self.case.outputs_with_headers, strict=False
        )


def _rows(messages: Sequence[Any]) -> int:
    return sum(1 for m in messages if isinstance(m, Mapping) and "row" in m)


def _header(messages: Sequence[Any]) -> bool:
    return any(isinstance(m, Mapping) and "header" in m for m in messages)


def _failed(messages: Sequence[Any]) -> bool:
    return any(isinstance(m, Mapping) and "errorMessage" in m for m in messages)


def _final(messages: Sequence[Any]) -> bool:
    return any(isinstance(m, Mapping) and "finalMessage" in m for m in messages)


def _plain_record(topic: str, record: Any) -> TopicRecord:
    """A consumed record of a topic no source describes: text or JSON."""

    def plain(data: bytes | None) -> Any:
        if data is None:
            return None
        text = data.decode("utf-8", errors="replace")
        parsed = parse_json(text)
        return parsed if not isinstance(parsed, str) or parsed != text else text

    return TopicRecord(
        topic=topic,
        key=plain(record.key),
        value=plain(record.value),
        timestamp=record.timestamp,
        partition=record.partition,
        headers=tuple(record.headers),
    )


def run_rest_case(case: RestCase, harness: RestHarness, *, file: str | None = None) -> CaseResult:
    """Run one case on the harness's server; never raises for what the server does."""
    start = time.perf_counter()
    outcome: dict[str, Any] = {"status": Status.PASSED}
    topics_before: set[str] | None = None
    run: _CaseRun | None = None
    try:
        harness.ensure_server()
        topics_before = set(harness.admin.list_topics())
        run = _CaseRun(case, harness)
        run.stage = "registering the topics' schemas"
        run.register_schemas()
        run.stage = "creating the topics"
        run.create_topics()
        run.run_statements()
        verification = run.verify_outputs()
        if not verification.ok:
            outcome = {
                "status": Status.FAILED,
                "reason": verification.reason,
                "verification": verification,
            }
    except CaseFailure as failure:
        outcome = {"status": failure.status, "reason": failure.reason, **failure.extra}
    except RestClientError as exc:
        outcome = {"status": Status.ERROR, "reason": f"{exc} (while {run.stage if run else 'starting'})."}
    except (KafkaClientError, ProducerError) as exc:
        outcome = {"status": Status.ERROR, "reason": f"{exc} (while {run.stage if run else 'starting'})."}
    except HarnessError:
        raise
    except Exception as exc:
        outcome = {
            "status": Status.ERROR,
            "reason": f"Unexpected {describe_exception(exc)} while {run.stage if run else 'starting'}.",
        }
    sources: list[tuple[str, str]] = []
    known = {t.name for t in case.topics} | {r.topic for r in (*case.inputs, *case.outputs)}
    if run is not None:
        with contextlib.suppress(Exception):
            sources = [(s.kind, s.name) for s in run.shadow.sources()]
            known |= {s.topic for s in run.shadow.sources()}
            run.shadow.close()
    problem = harness.clean_up(topics_before, sources, known)
    if problem is not None and outcome["status"] is Status.PASSED:
        outcome["details"] = f"Clean-up after the case failed: {problem}"
    outcome["reason"] = one_line(outcome.get("reason", ""))
    return CaseResult(
        case_id=case.id,
        file=file or case.file.name,
        name=case.name,
        seconds=time.perf_counter() - start,
        **outcome,
    )

