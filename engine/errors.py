"""The engine's exception tree.

One root, ``KsqlError``, and a small tree under it. Messages are full sentences that
quote the offending item and say what was expected.
"""

from __future__ import annotations

import re


class KsqlError(Exception):
    """Root of every error the engine raises on purpose."""


class ParseError(KsqlError):
    """The SQL text does not follow the grammar.

    Carries the 1-based line and column of the offending token and a snippet of the line;
    ``syntax`` is True when the text does not follow the grammar at all (ksqlDB's "Syntax
    Error"), False when the parsed text is refused while it is built (ksqlDB's "Failed to
    prepare statement"); ``reason`` is the message without the position and snippet.
    """

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        snippet: str | None = None,
        syntax: bool = False,
    ) -> None:
        self.reason = message
        self.syntax = syntax
        self.line = line
        self.column = column
        self.snippet = snippet
        # ksqlDB's shapes: the grammar's errors "line L:C: ...", a parsed statement refused
        # while it is built (its ParsingException) "Line: L, Col: C: ...".
        if line is None:
            where = ""
        elif syntax:
            where = f"line {line}:{column}: "
        else:
            where = f"Line: {line}, Col: {column}: "
        text = f"{where}{message}"
        if snippet:
            pointer = " " * max((column or 1) - 1, 0) + "^"
            text = f"{text}\n{snippet}\n{pointer}"
        super().__init__(text)


class AnalysisError(KsqlError):
    """A statement parses but is not valid: unknown source, bad types, bad clause.

    ``node`` is the parsed node the error is about (a column reference, a source name), when
    there is one: whoever holds the parsed statement places the error at the node's line and
    column (``at``), in ksqlDB's shape "Line: L, Col: C: ...". ``reason`` is the message
    without the position; ``preparing`` marks an error ksqlDB finds while it prepares the
    statement, whose message starts "Exception while preparing statement: ".
    ``logged`` is ksqlDB's shorter message where ksqlDB keeps two (a ``KsqlStatementException``
    logs one without the statement's values and shows the other, which is this error's text).
    """

    def __init__(
        self, message: str, *, node: object = None, preparing: bool = False, logged: str | None = None
    ) -> None:
        self.reason = message
        self.node = node
        self.preparing = preparing
        self.logged = logged
        self.line: int | None = None
        self.column: int | None = None
        super().__init__(self._text())

    def at(self, line: int, column: int) -> None:
        """Place the error at ``line`` and ``column`` of the statement's script."""
        self.line, self.column = line, column
        self.args = (self._text(),)

    def _text(self) -> str:
        # ksqlDB finds some errors while it prepares the statement (an ambiguous column):
        # those say so first.
        where = "" if self.line is None else f"Line: {self.line}, Col: {self.column}: "
        before = "Exception while preparing statement: " if self.preparing else ""
        return f"{before}{where}{self.reason}"


class UnsupportedSchemaError(AnalysisError):
    """A key or value format cannot carry the columns given to it (ksqlDB's "Key format
    does not support schema."): the message names the format, the columns and why."""


class StatementPrepareError(AnalysisError):
    """A statement refused while it is prepared, before anything runs (ksqlDB's "Failed to prepare statement")."""


class TypeCheckError(AnalysisError):
    """An expression's operand types do not fit its operator or function."""


def newer_behaviour_error(what: str, version: int, known: int) -> TypeCheckError:
    """A plan's function call or CAST records a version of its behaviour this engine does not
    know: it is refused, never run with the current behaviour."""
    return TypeCheckError(
        f"{what} was planned with version {version} of its behaviour; this engine knows "
        f"versions up to {known}. Run the plan on the kspark release that wrote it, or a later one."
    )


class UnknownFunctionError(AnalysisError):
    """A function call names a function the registry does not know."""


class MetastoreError(AnalysisError):
    """A statement conflicts with the sources in the metastore."""


class UpgradeError(AnalysisError):
    """``CREATE OR REPLACE`` may not replace a running query's plan in place (``engine.plan.upgrade``)."""


class PlanError(KsqlError):
    """An execution plan is malformed or violates a step invariant."""


class SerdeError(KsqlError):
    """Plan (de)serialisation failed: unknown step type, unknown or missing field."""


class RecordSerdeError(KsqlError):
    """A record's key or value cannot be (de)serialised in its format."""


class ExecutionError(KsqlError):
    """A query failed while it ran."""


class StartTimeout(ExecutionError):
    """A query that did not reach its topics in the time its start was given."""


class SchemaRegistryUnavailableError(ExecutionError):
    """The schema registry did not answer (refused, reset, timed out, or a 5xx): no record's
    fault, so the query fails and is restarted from its checkpoint instead of skipping records."""


class EvaluationError(ExecutionError):
    """An expression raised while evaluated against one record."""


class QueryFailure(Exception):
    """A record whose processing stops its query: where ksqlDB's stream thread stops with
    "Exception caught in process" (a DECIMAL aggregate that overflows its type).

    Deliberately not a ``KsqlError``: the handlers that log a record's error to the
    processing log and go on catch ``KsqlError``, and must let this one through. A runtime
    reports it as its query's failure (``query_failure_in``), caused by the failure itself
    (``query_failure_cause``), as ksqlDB's "Exception caught in process" is caused by the
    exception that stopped the stream thread.
    """


class FunctionFailure(QueryFailure):
    """A function that fails on a record and so stops its query (ksqlDB's
    ``KsqlFunctionException`` out of a UDAF, such as a DECIMAL sum that overflows its type)."""


class SinkSerializationFailure(QueryFailure):
    """A record its sink cannot serialize, which stops the query (where Kafka Streams' record
    collector stops the stream thread with "Unable to serialize record")."""


_QUERY_FAILURES: dict[str, type[QueryFailure]] = {
    c.__name__: c for c in (QueryFailure, FunctionFailure, SinkSerializationFailure)
}
_QUERY_FAILURE = re.compile(
    rf"{re.escape(QueryFailure.__module__)}\.({'|'.join(_QUERY_FAILURES)}): ([^\n]*)"
)


def query_failure_cause(error: BaseException) -> QueryFailure | None:
    """The ``QueryFailure`` a Spark job failed with (as it crossed from a Python worker, in
    the text of the JVM's error), rebuilt with its class and the first line of its message;
    None when ``error`` is another failure."""
    if isinstance(error, QueryFailure):
        return error
    found = list(_QUERY_FAILURE.finditer(str(error)))
    if not found:
        return None
    last = found[-1]  # the innermost report of the failure
    return _QUERY_FAILURES[last.group(1)](last.group(2).strip())


def query_failure_in(error: BaseException) -> str | None:
    """Why a query stopped, when a Spark job failed with a ``QueryFailure``: its message after
    Kafka Streams' words for a stopped stream thread, "Exception caught in process". None when
    ``error`` is another failure."""
    cause = query_failure_cause(error)
    return None if cause is None else f"Exception caught in process: {cause}"


class CommandLogError(KsqlError):
    """The command log could not be written, read or replayed."""


class InternalError(KsqlError):
    """An internal invariant does not hold: this is a bug in kspark."""


class UnsupportedFeatureError(KsqlError):
    """The statement is valid ksqlDB but uses a feature kspark does not implement yet.

    ``feature`` names the missing feature in a few words (for conformance reports).
    """

    def __init__(self, feature: str, message: str | None = None) -> None:
        self.feature = feature
        super().__init__(message or f"kspark does not support {feature} yet.")


class ComponentError(KsqlError):
    """An external component (Maven fetch, Kafka broker) could not be fetched, started or stopped."""


class KafkaClientError(KsqlError):
    """A Kafka operation (admin, produce, consume) failed, or the broker cannot be reached."""


_WRAPPERS = ("Py4JJavaError", "SparkException", "StreamingQueryException", "PythonException",
             "ExecutionException", "InvocationTargetException", "Job aborted")
_ERROR_LINE = re.compile(r"(?:^|: )((?:[A-Za-z_$][\w$]*\.)*[A-Za-z_$][\w$]*(?:Error|Exception|Failure)\b(?::.*)?)$")


_MISSING_MODULE = re.compile(
    r"(?:ModuleNotFoundError|ImportError): (?:No module named '([\w.]+)'|cannot import name '(\w+)' from '([\w.]+)')"
)
_EXECUTOR = re.compile(r"\(TID \d+\) \(([^ )]+) executor ([^)]+)\)")


def missing_module(text: str) -> str | None:
    """One line for a failure whose cause is a module a Python worker lacks (on a cluster, the
    executors' Python is the cluster's), naming the module and the executor; else None."""
    match = _MISSING_MODULE.search(text)
    if match is None:
        return None
    module = match.group(1) or f"{match.group(3)}.{match.group(2)}"
    where = _EXECUTOR.search(text)
    node = f"executor {where.group(2)} on {where.group(1)}" if where else "a Spark Python worker"
    return (f"The Python of {node} has no module '{module}': install it there, or choose an "
            f"interpreter that has it with --spark-conf spark.pyspark.python=PATH.")


def root_cause_line(text: str, default: str = "unknown error") -> str:
    """The explaining error line of ``text`` (a Java or Python stack, possibly nested)."""
    missing = missing_module(text)  # a cluster's executor without a module: say which, and where
    if missing is not None:
        return missing
    if "Python worker failed to connect back" in text:  # Spark's PythonWorkerFactory, a fixed 10 s wait
        return ("Python worker failed to connect back: Spark waits 10 s for a Python process it starts to "
                "connect, and this one did not, which happens on a machine too busy to start Python in time "
                "(a persistent query is restarted with its backoff).")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors: list[str] = []
    for line in lines:
        if line.startswith(("at ", "raise ", "File ", "Traceback", "^", "~")):
            continue
        for part in re.split(r"(?<=\S): (?=(?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*(?:Error|Exception)\b)", line):
            match = _ERROR_LINE.search(part)
            if match:
                errors.append(match.group(1))
    explaining = [e for e in errors if not any(w in e.split(":", 1)[0] or e.startswith(w) for w in _WRAPPERS)]
    chosen = (explaining or errors or lines or [default])[-1 if explaining else 0]
    return chosen[:500]
