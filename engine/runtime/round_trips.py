"""Fewer Py4J round trips while a query's DataFrames are built.

Every call PySpark makes into the JVM is a Py4J round trip, and the JVM keeps every object
Py4J hands out until Python's finalizer thread sends one more command to release it. A QTT
case's build made about 420 round trips (half a millisecond each on 2 cores), and these
kinds of them carry no work:

- **Lists.** Py4J converts a Python list argument (``PythonUtils.toSeq([...])``, which every
  ``select``, ``struct``, ``coalesce`` or UDF call makes) into a ``java.util.ArrayList`` with
  one ``add`` per element. Here it is built from ``java.util.List.of`` chunks of up to 10
  elements: 2 round trips for up to 10 elements instead of one per element plus one. A list
  of up to 10 elements for ``PythonUtils.toSeq`` or ``toList``, which copy it into a Scala
  collection, is a ``java.util.List.of`` without the ``ArrayList`` around it: the call and
  its list are 2 round trips.
- **Data types.** ``Column.cast(DataType)`` asks the JVM for the active session, whether it
  is defined, and to parse the type's JSON before it casts: 4 round trips. The JVM data
  type of each JSON text is kept, so a cast is one round trip; a type not seen before is
  parsed by ``DataType.fromJson`` (what the session's ``parseDataType`` calls): 2.
- **Names and literals.** ``functions.col(name)`` and ``functions.lit(value)`` of a string,
  integer, float or boolean return an immutable Column that depends on nothing but the
  argument; the Column of the last 4,096 such calls is kept and handed out again. A float
  is kept by its ``repr`` (``-0.0`` is not ``0.0``), and an ``int`` and a ``bool`` are told
  apart by type.
- **Python UDFs.** Creating one (every Python step, every source's fallback reader) asked
  the JVM for the active session, the broadcast threshold, a new map of the worker's
  environment, two new lists and the return type, and each call of it read two profiler
  settings: 16 round trips for a one-column UDF. Those answers do not change while the
  SparkContext lives, so they are asked once: 5 round trips. A UDF whose pickled function
  holds broadcast variables or passes the broadcast threshold, or that is called with
  keyword arguments or with a Python profiler on, goes PySpark's own way.
- **Releases.** Py4J's finalizer thread tells the JVM that Python dropped an object with a
  round trip of its own, one at a time: nearly half the round trips of a planned-case replay,
  each costing CPU in both processes. Here it sends what has
  queued up (up to ``RELEASE_BATCH``) in one write and then reads the answers: the JVM reads
  its commands line by line and answers each in turn, so they need not wait for each other.
- **Plain arguments.** Py4J offers every argument that is not a JVM object to each input
  converter (sets, lists, maps, PySpark's dates, intervals and NumPy values); the list and
  map converters ask ``inspect.getattr_static`` whether it iterates or has keys, about 10 µs
  each. A call whose arguments are all JVM objects, strings, numbers, booleans, bytes or None
  (by exact type) goes to the JVM as it is: no converter takes those.
- **Column calls** that a ``select`` or another operation will use are queued and sent in
  one round trip when it needs them: ``engine.runtime.deferred_calls``.
- **``mapInArrow``'s inputs.** PySpark resolves each of the frame's columns with a round
  trip of its own (``df[name]``) to pass them to the function; here they are
  ``functions.col(name)`` (kept, as above), resolved by the analyser to the same attributes.

The JVM builds the same expressions and plans either way (``tests/engine/runtime/
test_round_trips.py`` compares them and counts the round trips); PySpark internals used here
are those of the pinned PySpark 4.1.
"""

from __future__ import annotations

import decimal
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

from py4j import clientserver, protocol
from py4j.java_collections import ListConverter, MapConverter
from py4j.java_gateway import JavaClass, JavaMember, JavaObject
from pyspark import SparkContext
from pyspark.serializers import CloudPickleSerializer
from pyspark.sql.classic.column import Column, _to_java_column, _to_seq
from pyspark.sql.pandas.map_ops import PandasMapOpsMixin
from pyspark.sql.types import DataType
from pyspark.sql.udf import UserDefinedFunction

from engine.runtime import deferred_calls

_CHUNK = 10  # java.util.List.of has fixed-arity overloads for up to 10 elements
_KEPT_FUNCTIONS = frozenset({"col", "lit"})
_SEQUENCES = frozenset({"toSeq", "toList"})  # PythonUtils' copies of a java.util.List into Scala
_KEYABLE = (str, int, float, bool)
MEMO_SIZE = 4096
RELEASE_BATCH = 1000  # object releases sent in one write

_installed = False
_lock = threading.Lock()


def install() -> None:
    """Patch Py4J's list conversion, ``Column.cast``/``try_cast`` and ``functions.col``/``lit``
    calls as the module docstring says (idempotent)."""
    global _installed
    if _installed:
        return
    _installed = True
    ListConverter.convert = _convert_list  # type: ignore[method-assign]
    JavaMember.__call__ = _memo_call(deferred_calls.install(JavaMember.__call__))  # type: ignore[method-assign]
    JavaMember._get_args = _plain_args(JavaMember._get_args)  # type: ignore[method-assign]
    Column.cast = _typed(Column.cast, "cast")  # type: ignore[method-assign]
    Column.try_cast = _typed(Column.try_cast, "try_cast")  # type: ignore[method-assign]
    UserDefinedFunction._create_judf = _create_judf(UserDefinedFunction._create_judf)  # type: ignore[method-assign]
    UserDefinedFunction.__call__ = _udf_call(UserDefinedFunction.__call__)  # type: ignore[method-assign]
    PandasMapOpsMixin.mapInArrow = _map_in_arrow(PandasMapOpsMixin.mapInArrow)  # type: ignore[method-assign]
    # Before the gateway starts: its finalizer thread runs the method the class has then.
    clientserver.FinalizerWorker.run = _release_in_batches  # type: ignore[method-assign]


_LOG = logging.getLogger(__name__)
_RELEASE = protocol.MEMORY_COMMAND_NAME + protocol.MEMORY_DEL_SUBCOMMAND_NAME
_UNRELEASABLE = frozenset({protocol.ENTRY_POINT_OBJECT_ID, protocol.GATEWAY_SERVER_OBJECT_ID})


def _release_in_batches(worker: Any) -> None:
    """``FinalizerWorker.run``: take what the finalizers queued (oldest first, up to
    ``RELEASE_BATCH``), release each client's objects in one write, and sleep as Py4J's
    worker does when nothing is queued. Stops at Py4J's shutdown marker."""
    queued = worker.deque
    while True:
        batch: list[Any] = []
        try:
            while len(batch) < RELEASE_BATCH:
                batch.append(queued.pop())
        except IndexError:
            pass
        if not batch:
            time.sleep(clientserver.DEFAULT_WORKER_SLEEP_TIME)
            continue
        stop = clientserver.SHUTDOWN_FINALIZER_WORKER in (t for t in batch if isinstance(t, str))
        by_client: dict[int, tuple[Any, list[str]]] = {}
        for task in batch:
            if not isinstance(task, str):
                client, target_id = task
                by_client.setdefault(id(client), (client, []))[1].append(target_id)
        for client, target_ids in by_client.values():
            release_objects(client, target_ids)
        if stop:
            return


def release_objects(client: Any, target_ids: list[str]) -> None:
    """Tell the JVM behind Py4J ``client`` that Python no longer holds ``target_ids``: the
    release commands in one write on the thread's connection, then one answer per command.
    A failure closes that connection and drops the batch, logged, as Py4J drops a release
    that fails (the JVM then keeps those objects)."""
    ids = [i for i in target_ids if i not in _UNRELEASABLE]
    if not ids or not client.is_connected:
        return
    try:
        connection = client._get_connection()
    except Exception:  # noqa: BLE001 - the JVM is gone or going: nothing left to release
        _LOG.debug("No connection to release %d JVM objects", len(ids), exc_info=True)
        return
    try:
        connection.socket.sendall("".join(f"{_RELEASE}{i}\ne\n" for i in ids).encode("utf-8"))
        for _ in ids:
            answer = protocol.smart_decode(connection.stream.readline()[:-1])
            if not answer.startswith(protocol.RETURN_MESSAGE):
                raise protocol.Py4JNetworkError(f"Unexpected answer to a release: {answer!r}")
    except Exception:  # noqa: BLE001 - as Py4J: a failed release is logged, never raised
        _LOG.debug("Releasing %d JVM objects failed", len(ids), exc_info=True)
        connection.close(True)
        return
    client._give_back_connection(connection)


# Arguments no input converter takes, by exact type (a subclass goes Py4J's way).
_PLAIN = frozenset({str, int, float, bool, bytes, type(None), decimal.Decimal})


def _plain_args(original: Any) -> Any:
    def get_args(self: JavaMember, args: tuple[Any, ...]) -> tuple[list[Any], list[Any]]:
        if all(type(a) in _PLAIN or isinstance(a, JavaObject) for a in args):
            return list(args), []
        return original(self, args)  # type: ignore[no-any-return]

    get_args.__wrapped__ = original  # type: ignore[attr-defined]
    return get_args


def _client_state(gateway_client: Any) -> dict[str, Any]:
    """What is kept for one Py4J client (so one JVM): dies with the client."""
    state = getattr(gateway_client, "_kspark_round_trips", None)
    if state is None:
        state = {
            "ArrayList": JavaClass("java.util.ArrayList", gateway_client),
            "List": JavaClass("java.util.List", gateway_client),
            "DataType": JavaClass("org.apache.spark.sql.types.DataType", gateway_client),
            "types": {},
            "memo": OrderedDict(),
        }
        gateway_client._kspark_round_trips = state
    return state


def _convert_list(self: ListConverter, items: Iterable[Any], gateway_client: Any) -> Any:
    """A ``java.util.ArrayList`` of ``items``, built from ``List.of`` chunks (which refuse
    NULL elements: a list holding ``None`` is built one ``add`` at a time, as Py4J does)."""
    values = list(items)
    state = _client_state(gateway_client)
    array_list = state["ArrayList"]
    if len(values) < 3 or any(v is None for v in values):
        java_list = array_list()
        for value in values:
            java_list.add(value)
        return java_list
    list_of = state["List"].of
    if len(values) <= _CHUNK:
        return array_list(list_of(*values))
    java_list = array_list(len(values))
    for start in range(0, len(values), _CHUNK):
        java_list.addAll(list_of(*values[start : start + _CHUNK]))
    return java_list


def _memo_call(call: Any) -> Any:
    def memo_call(self: JavaMember, *args: Any) -> Any:
        if self.name in _SEQUENCES and self.target_id == deferred_calls.PYTHON_UTILS and len(args) == 1:
            (values,) = args
            if type(values) is list and 0 < len(values) <= _CHUNK and not any(v is None for v in values):
                # toSeq/toList copy their argument: an immutable List.of does, one round trip.
                return call(self, _client_state(self.gateway_client)["List"].of(*values))
            return call(self, *args)
        if self.name not in _KEPT_FUNCTIONS or self.target_id != deferred_calls.FUNCTIONS or len(args) != 1:
            return call(self, *args)
        (arg,) = args
        kind = type(arg)
        if kind not in _KEYABLE:
            return call(self, *args)
        key = (self.name, kind, repr(arg) if kind is float else arg)
        memo = _client_state(self.gateway_client)["memo"]
        with _lock:
            found = memo.get(key)
            # A result still queued by another thread is not named here before that queue runs.
            if found is not None and (
                not isinstance(found, deferred_calls.DeferredObject) or found._queued_here()
            ):
                memo.move_to_end(key)
                return found
        found = call(self, *args)
        with _lock:
            memo[key] = found
            while len(memo) > MEMO_SIZE:
                memo.popitem(last=False)
        return found

    memo_call.__doc__ = call.__doc__
    return memo_call


def _typed(method: Any, name: str) -> Any:
    def typed(self: Column, dataType: Any) -> Any:  # noqa: N803 - PySpark's parameter name
        if not isinstance(dataType, DataType):
            return method(self, dataType)
        return Column(getattr(self._jc, name)(_jvm_type(self._jc._gateway_client, dataType)))

    typed.__doc__ = method.__doc__
    return typed


def _jvm_type(gateway_client: Any, data_type: DataType) -> Any:
    """The JVM's ``DataType`` for ``data_type``, parsed once per JSON text."""
    types = _client_state(gateway_client)["types"]
    text = data_type.json()
    found = types.get(text)
    if found is None:
        # What ``SparkSession.parseDataType`` does (Spark 4.1), without asking for the session.
        found = _client_state(gateway_client)["DataType"].fromJson(text)
        if len(types) >= MEMO_SIZE:
            types.clear()
        types[text] = found
    return found


def _client_of(sc: SparkContext) -> Any:
    gateway = sc._gateway
    assert gateway is not None
    return gateway._gateway_client


def _context_state(sc: SparkContext) -> dict[str, Any]:
    """What a running SparkContext answers the same way every time, asked once per client:
    its broadcast threshold, whether a Python profiler is on, and the (read-only) JVM map of
    the worker environment, list of includes and empty list of broadcast variables a
    ``SimplePythonFunction`` takes, by the environment and includes they hold."""
    state = _client_state(_client_of(sc))
    context = state.get("context")
    if context is None or context["sc"] is not sc:
        jvm = sc._jvm
        assert jvm is not None
        context = {
            "sc": sc,
            "threshold": int(jvm.PythonUtils.getBroadcastThreshold(sc._jsc)),
            "profiling": any(
                sc._conf.get(key, "false") == "true"
                for key in ("spark.python.profile", "spark.python.profile.memory")
            ),
            "no_broadcasts": ListConverter().convert([], _client_of(sc)),
            "environments": {},
        }
        state["context"] = context
    return context


def _worker_environment(sc: SparkContext, context: dict[str, Any]) -> tuple[Any, Any]:
    key = (tuple(sorted(sc.environment.items())), tuple(sc._python_includes or ()))
    found = context["environments"].get(key)
    if found is None:
        client = _client_of(sc)
        found = (MapConverter().convert(dict(key[0]), client), ListConverter().convert(list(key[1]), client))
        context["environments"][key] = found
    return found


def _create_judf(original: Any) -> Any:
    def create_judf(self: UserDefinedFunction, func: Any) -> Any:
        """PySpark's ``_create_judf`` (``pyspark.sql.udf``) with the context's answers kept."""
        sc = SparkContext._active_spark_context
        if sc is None or sc._jvm is None:
            return original(self, func)
        context = _context_state(sc)
        pickled = CloudPickleSerializer().dumps((func, self.returnType))
        broadcasts = next(iter(sc._pickled_broadcast_vars), None) is not None  # a registry, never empty to bool()
        if broadcasts or len(pickled) > context["threshold"]:
            sc._pickled_broadcast_vars.clear()
            return original(self, func)  # broadcasts: PySpark's own way, pickled again
        environment, includes = _worker_environment(sc, context)
        jvm = sc._jvm
        wrapped = jvm.SimplePythonFunction(
            bytearray(pickled), environment, includes, sc.pythonExec, sc.pythonVer,
            context["no_broadcasts"], sc._javaAccumulator,
        )
        return getattr(jvm, "org.apache.spark.sql.execution.python.UserDefinedPythonFunction")(
            self._name, wrapped, _jvm_type(_client_of(sc), self.returnType), self.evalType,
            self.deterministic,
        )

    create_judf.__doc__ = original.__doc__
    create_judf.__wrapped__ = original  # type: ignore[attr-defined]
    return create_judf


def _udf_call(original: Any) -> Any:
    def call(self: UserDefinedFunction, *args: Any, **kwargs: Any) -> Column:
        sc = SparkContext._active_spark_context
        if kwargs or sc is None or sc._jvm is None or _context_state(sc)["profiling"]:
            return original(self, *args, **kwargs)
        return Column(self._judf.apply(_to_seq(sc, [_to_java_column(arg) for arg in args])))

    call.__doc__ = original.__doc__
    call.__wrapped__ = original  # type: ignore[attr-defined]
    return call


def _map_in_arrow(original: Any) -> Any:
    def map_in_arrow(self: Any, func: Any, schema: Any, barrier: bool = False, profile: Any = None) -> Any:
        from pyspark.sql import functions as F
        from pyspark.sql.classic.dataframe import DataFrame
        from pyspark.sql.pandas.functions import pandas_udf
        from pyspark.util import PythonEvalType

        if profile is not None:
            return original(self, func, schema, barrier, profile)
        udf = pandas_udf(func, returnType=schema, functionType=PythonEvalType.SQL_MAP_ARROW_ITER_UDF)  # type: ignore[call-overload]
        udf_column = udf(*[F.col(name) for name in self.columns])
        return DataFrame(self._jdf.mapInArrow(udf_column._jc, barrier, None), self.sparkSession)

    map_in_arrow.__doc__ = original.__doc__
    map_in_arrow.__wrapped__ = original  # type: ignore[attr-defined]
    return map_in_arrow
