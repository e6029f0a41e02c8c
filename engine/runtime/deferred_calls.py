"""Column expressions sent to the JVM in one Py4J round trip per DataFrame operation.

A step builder makes a few hundred PySpark Column calls (``functions.col``, ``cast``,
``alias``, ``when``, ``coalesce``, the lists a ``select`` takes...), and PySpark sends each to
the JVM on its own: a round trip that builds one small immutable object. In Spark 4 a Column
is a tree of ``ColumnNode`` values that depends on nothing but its arguments (no session, no
settings: those are read when a DataFrame operation analyses it), so these calls need not run
when they are made, only before a call that uses their results.

Here such a call is queued instead (``DeferredObject``: a Py4J ``JavaObject`` whose id is not
known yet), and the queue of the thread runs in one round trip, in call order, when anything
needs a queued object's id: a ``select``, a ``filter``, a ``toString``, a constructor that
takes it. The JVM runs the queued commands with Py4J's own ``CallCommand``
(``java/CallPipeline.java``, compiled by Spark's Janino once per JVM), so each method is
resolved and each result registered as if the call had been sent alone; a result that Python
dropped before the queue ran is released in the same round trip.

What is queued: the static methods of ``org.apache.spark.sql.functions`` (but ``expr``, which
parses with the active session, and ``broadcast``, ``udf``, ``udaf``), the Column methods in
``COLUMN_METHODS`` called on a queued Column, ``java.util.List.of`` and PySpark's
``PythonUtils.toSeq``/``toList``. Anything else is sent as Py4J sends it, after the queue it
needs has run. A queued call that fails in the JVM raises its exception (the same PySpark
exception) where its result is first used rather than where it was made.
"""

from __future__ import annotations

import importlib.resources
import logging
import os
import threading
import weakref
from collections.abc import Callable
from functools import partial
from typing import Any

from py4j import java_gateway, protocol
from py4j.finalizer import ThreadSafeFinalizer
from py4j.java_gateway import JavaClass, JavaMember, JavaObject

from engine.errors import InternalError

# Py4J's targets of static calls: the Column functions and PySpark's collection helpers.
FUNCTIONS = "z:org.apache.spark.sql.functions"
PYTHON_UTILS = "z:org.apache.spark.api.python.PythonUtils"
# functions' static methods that read session state or do not make a Column.
FUNCTIONS_NOT_QUEUED = frozenset({"expr", "broadcast", "udf", "udaf"})
COLUMN_METHODS = frozenset({
    "alias", "and", "apply", "as", "asc", "asc_nulls_first", "asc_nulls_last", "between",
    "bitwiseAND", "bitwiseOR", "bitwiseXOR", "cast", "contains", "desc", "desc_nulls_first",
    "desc_nulls_last", "divide", "dropFields", "endsWith", "eqNullSafe", "equalTo", "geq",
    "getField", "getItem", "gt", "ilike", "isin", "isInCollection", "isNaN", "isNotNull",
    "isNull", "leq", "like", "lt", "minus", "mod", "multiply", "name", "notEqual", "or",
    "otherwise", "over", "plus", "rlike", "startsWith", "substr", "try_cast", "when",
    "withField",
})
_SEQUENCES = ((PYTHON_UTILS, "toSeq"), (PYTHON_UTILS, "toList"), ("z:java.util.List", "of"))
COLUMN, OTHER = "column", "other"
MAX_QUEUED = 2000  # a longer queue runs at once
QUEUE_ENV = "KSPARK_QUEUE_COLUMN_CALLS"
# "0" sends every call on its own, as Py4J does (to compare, or to rule the queue out).
ENABLED = os.environ.get(QUEUE_ENV, "1") != "0"
_GATEWAY_SERVER = "GATEWAY_SERVER"
# Py4J answers that return a JVM object: a reference, array, set, list, map or iterator.
_OBJECT_TYPES = frozenset("rthlag")

_LOG = logging.getLogger(__name__)
_lock = threading.RLock()  # queues take calls and close under it (they run outside it)
_local = threading.local()  # .queue: this thread's queue; .placeholders: the queue being written


class DeferredObject(JavaObject):
    """The result of a queued call: a ``JavaObject`` once its queue has run.

    Its id (``_target_id``, ``_get_object_id()``) is ``$k`` while a call of its own queue is
    being written, and otherwise runs the queue first. A failed call raises its exception.
    """

    def __init__(self, queue: _Queue, index: int, kind: str) -> None:  # noqa: D107
        # JavaObject.__init__ would register a finalizer for an id that does not exist yet.
        self._gateway_client = queue.client
        self._auto_field = False
        self._methods: dict[str, JavaMember] = {}
        self._field_names: set[str] = set()
        self._fully_populated = False
        self._gateway_doc = None
        self._queue: _Queue | None = queue
        self._index = index
        self._kind = kind
        self._id: str | None = None
        self._failure: str | None = None  # the JVM's answer to a call that failed
        self._error: BaseException | None = None  # why its queue did not run

    @property  # type: ignore[override]
    def _target_id(self) -> str:
        return self._get_object_id()

    def _get_object_id(self) -> str:
        if self._id is not None:
            return self._id
        queue = self._queue
        if queue is not None and getattr(_local, "placeholders", None) is queue:
            return f"${self._index}"
        if queue is not None:
            queue.run()
        if self._id is None:
            if self._error is not None:
                raise self._error
            _raise(self._failure, self._gateway_client)
        return self._id  # type: ignore[return-value]

    def _queued_here(self) -> bool:
        """Whether this thread may name it in a queued call: known, or in this thread's queue."""
        return self._id is not None or (self._queue is not None and self._queue is _open_queue_of_thread())

    def __getattr__(self, name: str) -> Any:
        if self._id is not None:
            return super().__getattr__(name)
        if java_gateway.is_magic_member(name):
            raise AttributeError(name)
        # Not kept: its command header would hold the placeholder (``call`` writes its own).
        return JavaMember(name, self, "$", self._gateway_client)

    def _answered(self, answer: str) -> None:
        self._queue = None
        if not (answer.startswith("!y") and answer[2:3] in _OBJECT_TYPES and len(answer) > 3):
            self._failure = answer[1:]  # as Py4J's send_command hands answers on
            return
        target_id = answer[3:]
        self._id = target_id
        client = self._gateway_client
        key = protocol.smart_decode(client.address) + protocol.smart_decode(client.port) + target_id
        if client.gateway_property.enable_memory_management:
            ThreadSafeFinalizer.add_finalizer(key, weakref.ref(self, partial(_release, client, target_id)))


def _release(client: Any, target_id: str, _: object) -> None:
    """As ``JavaObject``'s finalizer: Python dropped the object that ``target_id`` names."""
    java_gateway._garbage_collect_object(client, target_id)


def _raise(answer: str | None, client: Any) -> None:
    if answer is None:
        raise InternalError("A queued Py4J call has neither a result nor a failure.")
    # Through the module: PySpark replaces get_return_value to raise its own exceptions.
    java_gateway.get_return_value(answer, client, None, None)
    raise InternalError(f"A queued Py4J call answered {answer!r}, not an object.")


class _Queue:
    """One thread's queued calls, until they run (``run``)."""

    def __init__(self, client: Any, pipeline: JavaObject) -> None:
        self.client = client
        self.pipeline = pipeline
        self.commands: list[str] = []
        self.results: list[weakref.ref[DeferredObject]] = []
        self.keep: list[Any] = []  # JVM objects the queued calls name, held until they run
        self.temporary: list[Any] = []  # converted arguments, released once they ran
        self.open = True
        self.done = threading.Event()

    def add(self, command: str, kind: str, keep: list[Any], temporary: list[Any]) -> DeferredObject:
        result = DeferredObject(self, len(self.commands), kind)
        self.commands.append(command)
        self.results.append(weakref.ref(result))
        self.keep += keep
        self.temporary += temporary
        return result

    def run(self) -> None:
        """Run the queued calls in one round trip; each live result learns its id or failure.
        Another thread that needs a result meanwhile waits for the answers."""
        with _lock:
            starter = self.open
            self.open = False
        if not starter:
            self.done.wait()
            return
        results = [ref() for ref in self.results]
        try:
            dropped = ",".join(str(i) for i, r in enumerate(results) if r is None)
            answers = self.pipeline.run("".join(self.commands), dropped).split("\n")[:-1]
            if len(answers) != len(results):
                raise InternalError(
                    f"Py4J's call pipeline answered {len(answers)} of {len(results)} queued calls."
                )
            for result, answer in zip(results, answers, strict=True):
                if result is not None:
                    result._answered(answer)
            for argument in self.temporary:
                if hasattr(argument, "_detach"):
                    argument._detach()
        except BaseException as exc:
            for result in results:
                if result is not None and result._id is None:
                    result._error = exc
            raise
        finally:
            self.commands.clear()
            self.results.clear()
            self.keep.clear()
            self.temporary.clear()
            self.done.set()


def _open_queue_of_thread() -> _Queue | None:
    queue: _Queue | None = getattr(_local, "queue", None)
    return queue if queue is not None and queue.open else None


def _queue_for(client: Any) -> _Queue | None:
    """This thread's open queue for ``client`` (a new one if it has none), or None where the
    JVM has no call pipeline."""
    queue = _open_queue_of_thread()
    if queue is not None and queue.client is client and ENABLED:
        return queue
    if queue is not None:
        queue.run()
    if not ENABLED:
        return None
    pipeline = _pipeline(client)
    if pipeline is None:
        return None
    _local.queue = _Queue(client, pipeline)
    return _local.queue  # type: ignore[no-any-return]


def _pipeline(client: Any) -> JavaObject | None:
    """The JVM's ``CallPipeline`` behind ``client``, compiled on first use; None if that fails."""
    found = getattr(client, "_kspark_call_pipeline", False)
    if found is not False:
        return found  # type: ignore[no-any-return]
    with _lock:
        found = getattr(client, "_kspark_call_pipeline", False)
        if found is False:
            found = _compile_pipeline(client)
            client._kspark_call_pipeline = found
    return found  # type: ignore[no-any-return]


def _compile_pipeline(client: Any, source: str | None = None) -> JavaObject | None:
    """``CallPipeline`` compiled from ``source`` (the shipped ``java/CallPipeline.java``); None,
    logged, if it does not compile."""
    if source is None:
        source = importlib.resources.files("engine.runtime").joinpath("java/CallPipeline.java").read_text()
    try:
        gateway = JavaObject(_GATEWAY_SERVER, client).getGateway()
        compiler = JavaClass("org.codehaus.janino.SimpleCompiler", client)()
        compiler.setParentClassLoader(gateway.getClass().getClassLoader())
        compiler.cook(source)
        pipeline = compiler.getClassLoader().loadClass("CallPipeline").newInstance()
        pipeline.setGateway(gateway)
    except protocol.Py4JError as exc:
        lines = str(exc).strip().splitlines() or [type(exc).__name__]
        reason = next((line for line in lines if "Exception" in line), lines[0])
        _LOG.warning("Column calls go to the JVM one at a time: CallPipeline.java did not compile: %s", reason)
        return None
    return pipeline  # type: ignore[no-any-return]


def queued_kind(member: JavaMember) -> str | None:
    """What a call of ``member`` makes if it may be queued (``COLUMN`` or ``OTHER``), else None."""
    container = member.container
    if isinstance(container, DeferredObject):
        return COLUMN if container._kind == COLUMN and member.name in COLUMN_METHODS else None
    target = member.target_id
    if target == FUNCTIONS:
        return None if member.name in FUNCTIONS_NOT_QUEUED else COLUMN
    return OTHER if (target, member.name) in _SEQUENCES else None


def install(call: Callable[..., Any]) -> Callable[..., Any]:
    """``JavaMember.__call__`` that queues what may be queued and sends the rest, after the
    queue whose results it names has run."""

    def deferred_call(self: JavaMember, *args: Any) -> Any:
        kind = queued_kind(self)
        if kind is not None:
            queue = _queue_for(self.gateway_client)
            if queue is not None:
                return _enqueue(self, args, kind)
        container = self.container
        if isinstance(container, DeferredObject):
            target = container._get_object_id()  # runs its queue
            self.target_id = target
            self.command_header = f"{target}\n{self.name}\n"
        return call(self, *args)

    deferred_call.__doc__ = call.__doc__
    deferred_call.__wrapped__ = call  # type: ignore[attr-defined]
    return deferred_call


def _enqueue(member: JavaMember, args: tuple[Any, ...], kind: str) -> DeferredObject:
    converted, temporary = member._get_args(args)  # may itself queue or send calls
    with _lock:
        queue = _queue_for(member.gateway_client)
        assert queue is not None
        container = member.container
        _local.placeholders = queue
        try:
            target = container._get_object_id() if isinstance(container, JavaObject) else member.target_id
            arguments = "".join(protocol.get_command_part(a, member.pool) for a in converted)
        finally:
            _local.placeholders = None
        keep = [a for a in converted if isinstance(a, JavaObject) and not _pending_in(a, queue)]
        if isinstance(container, JavaObject) and not _pending_in(container, queue):
            keep.append(container)
        result = queue.add(f"{target}\n{member.name}\n{arguments}e\n", kind, keep, temporary)
        full = len(queue.commands) >= MAX_QUEUED
    if full:
        queue.run()
    return result


def _pending_in(obj: Any, queue: _Queue) -> bool:
    return isinstance(obj, DeferredObject) and obj._id is None and obj._queue is queue
