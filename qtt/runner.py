"""Run one expanded QTT case against a fresh engine and judge it.

The engine is imported lazily (``make_engine``) so that loading and verifying work without
it; tests and the pytest plugin swap the factory with ``set_engine_factory``.
"""

from __future__ import annotations

import enum
import inspect
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import errors
from engine.data.records import TopicInfo, TopicRecord
from qtt.loader import LoadProblem
from qtt.model import ExpectedException, QttCase, QttFormatError
from qtt.schemas import inputs_through_topic_schemas, use_case_registry
from qtt.verify import Verification, avro_decimals_as_numbers, check_post, verify_outputs

EngineFactory = Callable[[Mapping[str, Any]], Any]


class Status(enum.StrEnum):
    """The verdict on one case."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    UNSUPPORTED = "unsupported"


# ksqlDB exception classes (by Java name) and the engine errors that stand for them.
# KsqlException and KsqlStatementException wrap every planning error in ksqlDB, so any
# engine error satisfies them, except "not implemented", which is a separate verdict.
_ANY_KSQL_ERROR: tuple[type[errors.KsqlError], ...] = (errors.KsqlError,)
_RUNTIME_ERRORS: tuple[type[errors.KsqlError], ...] = (
    errors.ExecutionError,
    errors.RecordSerdeError,
)
EXPECTED_EXCEPTION_CLASSES: dict[str, tuple[type[errors.KsqlError], ...]] = {
    "io.confluent.ksql.util.KsqlStatementException": _ANY_KSQL_ERROR,
    "io.confluent.ksql.util.KsqlException": _ANY_KSQL_ERROR,
    "io.confluent.ksql.parser.exception.ParseFailedException": (errors.ParseError,),
    "org.apache.kafka.streams.errors.StreamsException": _RUNTIME_ERRORS,
    "org.apache.kafka.common.errors.SerializationException": _RUNTIME_ERRORS,
    "io.confluent.ksql.serde.KsqlSerializationException": _RUNTIME_ERRORS,
    "org.apache.kafka.connect.errors.DataException": _RUNTIME_ERRORS,
}


# ksqlDB exception classes a case may name as the direct cause of its error
# (expectedException.cause), and the engine failures that stand for them: what stops a
# persistent query is the cause of the query's ExecutionError, as the exception that stops a
# Kafka Streams thread is the cause of ksqlDB's StreamsException "Exception caught in
# process". No other kspark error has a cause: a case naming another class fails, saying so.
EXPECTED_CAUSE_CLASSES: dict[str, tuple[type[BaseException], ...]] = {
    "io.confluent.ksql.function.KsqlFunctionException": (errors.FunctionFailure,),
    "org.apache.kafka.streams.errors.StreamsException": (errors.SinkSerializationFailure,),
}


def cause_mismatch(expected: ExpectedException, exc: BaseException) -> str | None:
    """Why ``exc``'s direct cause is not the one the case expects (None: it is, or the case
    names none). As ksqlDB's matcher: the cause is an instance of the class, and its own
    message holds causeMessage; the causes of the cause do not count."""
    if expected.cause is None:
        return None
    java = expected.cause.strip()
    cause = exc.__cause__
    wanted = EXPECTED_CAUSE_CLASSES.get(java)
    name = _java_name(java)
    if wanted is None:
        known = ", ".join(sorted(EXPECTED_CAUSE_CLASSES))
        return f"Expected a cause {java}, which kspark maps to none of its errors (it maps {known})."
    if cause is None:
        return f"Expected an error caused by {name}, but {type(exc).__name__} has no cause."
    if not isinstance(cause, wanted):
        return (
            f"Expected an error caused by {name} ({' or '.join(c.__name__ for c in wanted)}), "
            f"but its cause is {type(cause).__name__}: {cause}"
        )
    return None


def cause_message_matches(expected: ExpectedException, exc: BaseException) -> bool | None:
    """Whether causeMessage occurs in the message of ``exc``'s direct cause (None: not given)."""
    if expected.cause_message is None:
        return None
    cause = exc.__cause__
    return cause is not None and expected.cause_message in str(cause)


def expected_error_classes(java_type: str | None) -> tuple[type[errors.KsqlError], ...]:
    """The engine error classes that satisfy a ksqlDB exception class; unknown or none given
    (a case expecting only a message) -> KsqlError."""
    if java_type is None:
        return _ANY_KSQL_ERROR
    return EXPECTED_EXCEPTION_CLASSES.get(java_type.strip(), _ANY_KSQL_ERROR)


def error_matches(expected: ExpectedException, exc: BaseException) -> bool:
    """True when ``exc`` stands for the ksqlDB exception the case expects."""
    if isinstance(exc, errors.UnsupportedFeatureError):
        return False
    return isinstance(exc, expected_error_classes(expected.type))


def message_matches(expected: ExpectedException, exc: BaseException) -> bool | None:
    """Whether the expected message occurs in the error chain and the expected cause
    message in the direct cause's message (None: neither given)."""
    checks: list[bool] = []
    if expected.message:
        # As ksqlDB's matcher: an error's message or, for a KsqlStatementException, its other
        # message (kspark's text is the one with the values, ``logged`` the one without).
        chain = _chain(exc)
        text = "\n".join([str(e) for e in chain] + [str(logged) for e in chain if (logged := getattr(e, "logged", None))])
        checks.append(expected.message in text)
    cause = cause_message_matches(expected, exc)
    if cause is not None:
        checks.append(cause)
    return all(checks) if checks else None


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


# ---------------------------------------------------------------------------- engine factory

_engine_factory: EngineFactory | None = None


def default_engine_factory(properties: Mapping[str, Any]) -> Any:
    """A new ``engine.facade.engine.KsqlEngine`` with the case's properties."""
    from engine.facade.engine import KsqlEngine

    return KsqlEngine(properties)


def interpreted_engine_factory(properties: Mapping[str, Any]) -> Any:
    """A new bounded ``KsqlEngine`` whose jobs run on ``interpreted_session()``: for runs of
    many small cases, whose few records cost less than the code Spark would generate and
    compile for them. The shared session's settings stay as they are."""
    from engine.facade.engine import KsqlEngine
    from engine.runtime.adapter import BoundedRuntime
    from engine.runtime.session import interpreted_session

    runtime = BoundedRuntime(interpreted_session())
    return KsqlEngine(properties, runtime=runtime, topics=runtime.store)


def installed_engine_factory() -> EngineFactory | None:
    """The factory ``set_engine_factory`` installed, or None (the default's)."""
    return _engine_factory


def set_engine_factory(factory: EngineFactory | None) -> EngineFactory | None:
    """Install the factory new engines come from (None: the default); returns the old one."""
    global _engine_factory
    previous = _engine_factory
    _engine_factory = factory
    return previous


def make_engine(properties: Mapping[str, Any]) -> Any:
    """A new engine from the installed factory."""
    return (_engine_factory or default_engine_factory)(properties)


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """The verdict on one case, with a one-line reason and, for output mismatches, the diff."""

    case_id: str
    file: str
    name: str
    status: Status
    reason: str = ""
    seconds: float = 0.0
    message_matched: bool | None = None
    feature: str | None = None
    verification: Verification | None = None
    details: str = ""

    @property
    def passed(self) -> bool:
        return self.status is Status.PASSED

    def render(self, *, color: bool = False) -> str:
        """A readable account of a failure: reason, details and the record diff."""
        parts = [f"{self.status.value.upper()}: {self.reason}"]
        if self.details:
            parts.append(self.details)
        if self.verification is not None and not self.verification.ok:
            parts.append(self.verification.render(color=color))
        return "\n".join(parts).rstrip() + "\n"


def problem_result(problem: LoadProblem, file: str) -> CaseResult:
    """The ``error`` result for a file or case that could not be loaded."""
    return CaseResult(
        case_id=problem.id,
        file=file,
        name=problem.case_name
        or (f"case #{problem.index + 1}" if problem.index is not None else "<file>"),
        status=Status.ERROR,
        reason=one_line(f"Cannot load: {problem.message}"),
    )


def one_line(text: str, limit: int = 240) -> str:
    """Collapse whitespace to one line and cut it at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def describe_exception(exc: BaseException) -> str:
    """Type, message and the last frame of an unexpected exception, on one line."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" (at {_short_path(last.filename)}:{last.lineno} in {last.name})"
    return one_line(f"{type(exc).__name__}: {exc}{where}")


def _short_path(filename: str) -> str:
    try:
        return Path(filename).resolve().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return filename


# ---------------------------------------------------------------------------- running


class _Stage:
    """Where in the case the engine is, for messages."""

    def __init__(self) -> None:
        self.text = "starting the engine"


def run_case(
    case: QttCase,
    *,
    strict: bool = False,
    file: str | None = None,
    engine_factory: EngineFactory | None = None,
) -> CaseResult:
    """Run one case on a new engine; never raises for what the engine does."""
    start = time.perf_counter()
    stage = _Stage()
    engine: Any = None
    close_error: str | None = None
    outcome: dict[str, Any]
    try:
        engine = (engine_factory or make_engine)(dict(case.properties))
        outcome = _drive(case, engine, stage, strict=strict)
    except errors.KsqlError as exc:
        outcome = _judge_error(case, exc, stage.text, strict=strict)
    except QttFormatError as exc:  # the case's records do not fit its topics' schemas
        outcome = {"status": Status.ERROR, "reason": f"Cannot use the case while {stage.text}: {exc}"}
    except Exception as exc:
        outcome = {
            "status": Status.ERROR,
            "reason": f"Unexpected {describe_exception(exc)} while {stage.text}.",
            "details": "".join(traceback.format_exception(exc)),
        }
    finally:
        if engine is not None:
            try:
                engine.close()
            except Exception as exc:  # a failing close must not hide the verdict
                close_error = describe_exception(exc)
    if close_error and outcome["status"] is Status.PASSED:
        outcome = {"status": Status.ERROR, "reason": f"Closing the engine failed: {close_error}"}
    outcome["reason"] = one_line(outcome.get("reason", ""))
    return CaseResult(
        case_id=case.id,
        file=file or case.file.name,
        name=case.name,
        seconds=time.perf_counter() - start,
        **outcome,
    )


# ksqlDB's test runner: the service id its queries' internal topics are named after, and
# the partitions of a topic a CREATE statement names without PARTITIONS (Topic.DEFAULT_PARTITIONS).
QTT_SERVICE_ID = "some.ksql.service.id"
STATEMENT_TOPIC_PARTITIONS = 4


def statement_topics(statements: Sequence[str], default_partitions: int = 1) -> list[tuple[str, int]]:
    """Topics named by CREATE STREAM/TABLE statements, which ksqlDB's QTT creates up front,
    with the statement's PARTITIONS or ``default_partitions``."""
    from engine.facade.engine import topics_declared_by

    return [t for statement in statements for t in topics_declared_by(statement, default_partitions)]


def _drive(case: QttCase, engine: Any, stage: _Stage, *, strict: bool) -> dict[str, Any]:
    stage.text = "registering the topics' schemas"
    use_case_registry(engine, case)
    if hasattr(engine, "service_id") and "ksql.service.id" not in case.properties:
        engine.service_id = QTT_SERVICE_ID
    stage.text = "creating topics"
    # As ksqlDB's runner: the case's topics, then those CREATE statements name, then those
    # its input records name; the first description of a topic wins. A topic only output
    # records name is left to the statements (a sink takes its sources' partitions).
    created = {t.name for t in case.topics}
    for topic in case.topics:
        engine.create_topic(topic.to_topic_info())
    default_partitions = int(getattr(engine, "statement_topic_partitions", STATEMENT_TOPIC_PARTITIONS))
    for name, partitions in statement_topics(case.statements, default_partitions):
        if name not in created:
            engine.create_topic(TopicInfo(name=name, partitions=partitions))
            created.add(name)
    inputs = {r.topic for r in case.inputs}
    for name in case.topic_names():
        if name not in created and name in inputs:
            engine.create_topic(TopicInfo(name=name))
            created.add(name)
    line = 1  # ksqlDB joins a case's statements with newlines: errors give the script's lines
    for i, statement in enumerate(case.statements):
        stage.text = f"executing statement {i + 1} ({one_line(statement, 80)})"
        execute_sql_at(engine, statement, line)
        line += statement.count("\n") + 1
    existing = getattr(engine, "topics", None)
    made = set(existing()) if existing is not None else set()
    for name in case.topic_names():
        if name not in created and name not in made:
            engine.create_topic(TopicInfo(name=name))
    stage.text = "producing the input records"
    engine.produce(inputs_through_topic_schemas(case))
    stage.text = "running the queries"
    produced: Mapping[str, Sequence[TopicRecord]] = engine.run() or {}
    sources = getattr(engine, "sources", None)
    if sources is not None:
        produced = avro_decimals_as_numbers(produced, sources())
    if case.expected_exception is not None:
        exp = case.expected_exception
        message = f" with a message containing '{exp.message}'" if exp.message else ""
        return {
            "status": Status.FAILED,
            "reason": f"Expected {_java_name(exp.type)}{message}, but no error was raised.",
        }
    stage.text = "verifying the outputs"
    verification = verify_outputs(
        case.outputs, produced, headers_at=case.outputs_with_headers, strict=strict
    )
    stage.text = "checking the post-conditions"
    post_reasons = check_post(case.post, engine, case.topics) if not case.post.is_empty() else []
    if post_reasons:
        verification = Verification(
            verification.reasons + tuple(post_reasons), verification.comparisons
        )
    if verification.ok:
        return {"status": Status.PASSED}
    return {"status": Status.FAILED, "reason": verification.reason, "verification": verification}


def execute_sql_at(engine: Any, statement: str, first_line: int) -> Any:
    """``engine.execute_sql(statement, first_line=...)``, or without the line for an engine
    whose ``execute_sql`` takes only the text (its errors then count lines per statement)."""
    execute = engine.execute_sql
    try:
        takes_line = "first_line" in inspect.signature(execute).parameters
    except (TypeError, ValueError):
        takes_line = False
    return execute(statement, first_line=first_line) if takes_line else execute(statement)


def _judge_error(case: QttCase, exc: errors.KsqlError, stage: str, *, strict: bool = False) -> dict[str, Any]:
    """The verdict on an engine error. The expected error class with another message passes
    leniently (``message_matched`` False, and the reason shows both messages) and fails
    strictly: ksqlDB's QTT checks the message too."""
    error = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, errors.UnsupportedFeatureError):
        return {
            "status": Status.UNSUPPORTED,
            "reason": f"Unsupported feature: {exc.feature}.",
            "feature": exc.feature,
            "details": f"Raised while {stage}: {error}",
        }
    expected = case.expected_exception
    if expected is None:
        return {
            "status": Status.FAILED,
            "reason": f"{error} (while {stage})",
            "details": f"Raised while {stage}:\n{error}",
        }
    matched = message_matches(expected, exc)
    wrong_cause = cause_mismatch(expected, exc) if error_matches(expected, exc) else None
    if wrong_cause is not None:
        return {
            "status": Status.FAILED,
            "reason": wrong_cause,
            "message_matched": matched,
            "details": f"Raised while {stage}:\n{error}",
        }
    if error_matches(expected, exc):
        if matched is not False:
            return {"status": Status.PASSED, "message_matched": matched}
        wanted_text = "' and '".join(m for m in (expected.message, expected.cause_message) if m)
        got = str(exc) if exc.__cause__ is None or expected.cause_message is None else (
            f"{exc}' caused by '{exc.__cause__}")
        reason = (  # each message cut on its own, so that both show
            f"{_java_name(expected.type)} raised with another message: expected one containing "
            f"'{one_line(wanted_text, 200)}', got '{one_line(got, 200)}'"
        )
        return {
            "status": Status.FAILED if strict else Status.PASSED,
            "message_matched": False,
            "reason": reason,
            "details": f"Raised while {stage}:\n{error}",
        }
    wanted = " or ".join(c.__name__ for c in expected_error_classes(expected.type))
    return {
        "status": Status.FAILED,
        "reason": f"Expected {_java_name(expected.type)} ({wanted}) but got {error}",
        "message_matched": matched,
        "details": f"Raised while {stage}:\n{error}",
    }


def _java_name(java_type: str | None) -> str:
    return "an error" if java_type is None else java_type.strip().rsplit(".", 1)[-1]
