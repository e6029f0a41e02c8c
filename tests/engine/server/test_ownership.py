"""Query ownership through group membership, without HTTP or Spark: servers as QueryOwnership objects."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable

import pytest

from engine.server.ownership import Backoff, QueryOwnership, partition_of


class _Server:
    """A server's side of ownership: the partitions it holds, and when each moved."""

    def __init__(self, bootstrap: str, service_id: str, name: str, events: list[tuple[float, str, str, int]]) -> None:
        self.name = name
        self.events = events
        self.held: set[int] = set()
        self.lock = threading.Lock()
        self.ownership = QueryOwnership(bootstrap, service_id, name, on_assigned=self.assigned,
                                        on_revoked=self.revoked, partitions=6)

    def assigned(self, partitions: set[int]) -> None:
        with self.lock:
            self.held |= partitions
            self.events.extend((time.monotonic(), self.name, "assigned", p) for p in partitions)

    def revoked(self, partitions: set[int]) -> None:
        time.sleep(0.5)  # a query takes a while to stop: the partition must not move meanwhile
        with self.lock:
            self.held -= partitions
            self.events.extend((time.monotonic(), self.name, "revoked", p) for p in partitions)


def _until(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _split(servers: list[_Server]) -> bool:
    held = [s.held for s in servers]
    everything = set().union(*held)
    return everything == set(range(6)) and sum(len(h) for h in held) == 6 and all(held)


def test_each_partition_has_one_owner_and_a_leaving_server_stops_before_another_starts(kafka_broker) -> None:
    service_id = f"own_{uuid.uuid4().hex[:8]}"
    events: list[tuple[float, str, str, int]] = []
    a, b = (_Server(kafka_broker.bootstrap_servers, service_id, name, events) for name in ("a:1", "b:2"))
    a.ownership.start()
    _until(lambda: a.held == set(range(6)))
    b.ownership.start()
    _until(lambda: _split([a, b]))
    assert a.ownership.owned_partitions() == a.held and b.ownership.owned_partitions() == b.held
    _until(lambda: set(a.ownership.members()) == {"a:1", "b:2"})
    query = next(f"CSAS_Q_{n}" for n in range(100) if partition_of(f"CSAS_Q_{n}", 6) in b.held)
    assert b.ownership.owns(query) and not a.ownership.owns(query)
    assert a.ownership.owner_of(query) == "b:2" and b.ownership.owner_of(query) == "b:2"

    moved = set(b.held)
    b.ownership.close()  # SIGTERM: b stops its queries, then a gets them
    _until(lambda: a.held == set(range(6)))
    for partition in moved:
        revoked = [t for t, who, what, p in events if (who, what, p) == ("b:2", "revoked", partition)]
        assigned = [t for t, who, what, p in events if (who, what, p) == ("a:1", "assigned", partition)]
        assert revoked and assigned and revoked[-1] <= assigned[-1], (partition, events)
    a.ownership.close()


_MEMBER = """
import sys, time
from engine.server.ownership import QueryOwnership
ownership = QueryOwnership(sys.argv[1], sys.argv[2], "b:2", on_assigned=lambda p: print("assigned", flush=True),
                           on_revoked=lambda p: None, partitions=6)
ownership.start()
time.sleep(600)
"""


def test_a_killed_server_loses_its_queries_after_the_session_timeout(kafka_broker) -> None:
    service_id = f"own_{uuid.uuid4().hex[:8]}"
    events: list[tuple[float, str, str, int]] = []
    a = _Server(kafka_broker.bootstrap_servers, service_id, "a:1", events)
    a.ownership.start()
    _until(lambda: a.held == set(range(6)))
    member = subprocess.Popen([sys.executable, "-c", _MEMBER, kafka_broker.bootstrap_servers, service_id],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert member.stdout is not None and member.stdout.readline().strip() == "assigned"
        _until(lambda: len(a.held) < 6)
        assert set(a.ownership.members()) == {"a:1", "b:2"}
    finally:
        member.kill()  # SIGKILL: no leave-group request, only silence
        member.wait()
    killed = time.monotonic()
    _until(lambda: a.held == set(range(6)), timeout=60)
    assert time.monotonic() - killed < 6 + 10  # the session timeout (6 s) and a rebalance
    a.ownership._members = (0.0, {})
    assert set(a.ownership.members()) == {"a:1"}
    a.ownership.close()


def test_published_states_reach_every_server_and_a_tombstone_forgets(kafka_broker) -> None:
    service_id = f"own_{uuid.uuid4().hex[:8]}"
    events: list[tuple[float, str, str, int]] = []
    a, b = (_Server(kafka_broker.bootstrap_servers, service_id, name, events) for name in ("a:1", "b:2"))
    a.ownership.start()
    b.ownership.start()
    a.ownership.publish("CSAS_X_0", "ERROR", "boom")
    status = b.ownership.wait_published("CSAS_X_0", 30)
    assert status is not None and (status.owner, status.state, status.error) == ("a:1", "ERROR", "boom")
    a.ownership.publish("CSAS_X_0", None)
    _until(lambda: b.ownership.status_of("CSAS_X_0") is None, timeout=30)
    a.ownership.close()
    b.ownership.close()


def test_backoff_doubles_up_to_its_limit_and_hands_each_restart_out_once() -> None:
    backoff = Backoff(first=1.0, limit=5.0)
    assert [backoff.failed("Q", now=0.0) for _ in range(4)] == [1.0, 2.0, 4.0, 5.0]
    assert backoff.due(now=4.9) == [] and backoff.due(now=5.0) == ["Q"] and backoff.due(now=99) == []
    backoff.forget("Q")
    assert backoff.failed("Q", now=0.0) == 1.0 and backoff.failures("Q") == 1


def test_backoff_comes_from_ksqldb_s_retry_properties_in_milliseconds() -> None:
    backoff = Backoff.from_properties({"ksql.query.retry.backoff.initial.ms": "250",
                                       "ksql.query.retry.backoff.max.ms": 1000})
    assert [backoff.failed("Q", now=0.0) for _ in range(4)] == [0.25, 0.5, 1.0, 1.0]
    default = Backoff.from_properties({})
    assert (default.first, default.limit) == (1.0, 60.0)


@pytest.mark.parametrize(("properties", "message"), [
    ({"ksql.query.retry.backoff.initial.ms": "soon"},
     "Invalid value 'soon' for configuration ksql.query.retry.backoff.initial.ms: expected a whole number of "
     "milliseconds, 0 or more."),
    ({"ksql.query.retry.backoff.max.ms": "-1"},
     "Invalid value '-1' for configuration ksql.query.retry.backoff.max.ms: expected a whole number of "
     "milliseconds, 0 or more."),
    ({"ksql.query.retry.backoff.initial.ms": "5000", "ksql.query.retry.backoff.max.ms": "1000"},
     "ksql.query.retry.backoff.max.ms (1000) is less than ksql.query.retry.backoff.initial.ms (5000): "
     "the longest wait before a failed query restarts cannot be shorter than the first."),
])
def test_a_bad_retry_backoff_is_refused_naming_the_property(properties: dict, message: str) -> None:
    from engine.errors import KsqlError

    with pytest.raises(KsqlError) as caught:
        Backoff.from_properties(properties)
    assert str(caught.value) == message


def test_a_query_maps_to_one_stable_partition() -> None:
    assert partition_of("CSAS_S_0") == partition_of("CSAS_S_0")
    assert {partition_of(f"CSAS_S_{n}") for n in range(200)} == set(range(12))


class _DeadStream:
    """A Spark query handle whose stream died."""

    isActive = False

    def exception(self) -> str:
        return "org.apache.spark.SparkException: Job aborted\nCaused by: java.lang.IllegalStateException: boom"


class _Failure(Exception):
    """PySpark's StreamingQueryException as it comes: the JVM's stack kept apart from the message."""

    _stackTrace = "org.apache.spark.sql.execution.streaming.StreamExecution.runStream(StreamExecution.scala:382)"
    _desc = "Cannot invoke map because the return value of get() is null"
    _cause = type("Cause", (), {"_desc": "java.lang.NullPointerException: no offsets", "_cause": None,
                                "_stackTrace": "\tat org.apache.spark.sql.Example.run(Example.scala:1)"})()


class _DeadStreamWithJvmStack(_DeadStream):
    def exception(self) -> Exception:  # type: ignore[override]
        return _Failure("Cannot invoke map because the return value of get() is null")


def test_a_failed_query_shows_error_and_is_restarted_with_backoff(kafka_broker, tmp_path) -> None:
    from engine.plan.plan import QueryPlan
    from engine.server.service import KsqlService, _QueryEntry

    service = KsqlService(kafka_broker.bootstrap_servers, f"own_{uuid.uuid4().hex[:8]}", tmp_path)  # not started
    started: list[str] = []
    service._start_owned = lambda query_id, entry: started.append(query_id)  # type: ignore[method-assign]
    service.ownership.owns = lambda query_id: True  # type: ignore[method-assign, union-attr]
    service.ownership.publish = lambda *args: None  # type: ignore[method-assign, union-attr]
    entry = _QueryEntry(QueryPlan.__new__(QueryPlan), "CREATE STREAM ...", {}, handle=_DeadStream())
    service._queries["CSAS_F_0"] = entry
    service._backoff.first = 0.5

    service._supervise()
    assert entry.handle is None and entry.error == "java.lang.IllegalStateException: boom"
    from engine.server.service import _state
    assert _state(entry, True) == "ERROR" and started == []
    time.sleep(0.6)
    service._supervise()
    assert started == ["CSAS_F_0"] and service._backoff.failures("CSAS_F_0") == 1
    [error] = entry.errors  # what EXPLAIN and SHOW QUERIES EXTENDED list as the query's queryErrors
    assert error["errorMessage"] == "java.lang.IllegalStateException: boom" and error["type"] == "UNKNOWN"
    assert abs(error["timestamp"] - time.time() * 1000) < 60_000
    assert service._error_queue_size() == 10  # ksqlDB's default
    service.engine.config["ksql.query.error.max.queue.size"] = "2"
    assert service._error_queue_size() == 2  # the length of a new query entry's errors
    service.log.close()


def test_a_querys_description_lists_its_latest_errors_as_ksqldb_does() -> None:
    """ksqlDB's QueryError: timestamp, errorMessage and type (USER for a missing topic, an
    authorization refusal, ...); ksql.query.error.max.queue.size of them, the latest."""
    import collections

    from engine.server import entities as E

    assert E.query_error("Topic 'orders' does not exist.", 5) == {
        "timestamp": 5, "errorMessage": "Topic 'orders' does not exist.", "type": "USER"}
    assert E.query_error("java.lang.IllegalStateException: boom", 6)["type"] == "UNKNOWN"
    kept: collections.deque = collections.deque(maxlen=2)  # ksql.query.error.max.queue.size=2
    for n in range(3):
        kept.append(E.query_error(f"failure {n}", n))
    described = E.query_description_value(E.QueryDescription(
        query_id="CSAS_F_0", statement_text="", fields=(), sources=(), sinks=(), sink_topics=(), execution_plan="",
        query_type="PERSISTENT", state="ERROR", errors=tuple(kept)))
    assert [e["errorMessage"] for e in described["queryErrors"]] == ["failure 1", "failure 2"]


class _RerunMetricsFailure(Exception):
    """Spark 4.1's failure reporting the metrics of a batch re-run from the offset log."""

    _stackTrace = "org.apache.spark.sql.execution.streaming.StreamExecution.runStream(StreamExecution.scala:382)"
    _cause = type("Cause", (), {"_desc": "java.lang.NullPointerException", "_cause": None, "_stackTrace": (
        "java.lang.NullPointerException: Cannot invoke \"scala.collection.IterableOps.map(scala.Function1)\"\n"
        "\tat org.apache.spark.sql.kafka010.KafkaMicroBatchStream$.metrics(KafkaMicroBatchStream.scala:520)\n"
        "\tat org.apache.spark.sql.execution.streaming.runtime.ProgressContext.finishTrigger(ProgressReporter.scala:1)")})()


class _DeadStreamAfterRerun(_DeadStream):
    def exception(self) -> Exception:  # type: ignore[override]
        return _RerunMetricsFailure("Cannot invoke map because the return value of get() is null")


def test_spark_s_metrics_failure_after_a_re_run_batch_restarts_the_query_at_once_without_error(
    kafka_broker, tmp_path,
) -> None:
    from engine.plan.plan import QueryPlan
    from engine.server.service import KsqlService, _QueryEntry, _state

    service = KsqlService(kafka_broker.bootstrap_servers, f"own_{uuid.uuid4().hex[:8]}", tmp_path)  # not started
    started: list[str] = []
    published: list[tuple] = []
    service._start_owned = lambda query_id, entry: started.append(query_id)  # type: ignore[method-assign]
    service.ownership.owns = lambda query_id: True  # type: ignore[method-assign, union-attr]
    service.ownership.publish = lambda *args: published.append(args)  # type: ignore[method-assign, union-attr]
    entry = _QueryEntry(QueryPlan.__new__(QueryPlan), "CREATE STREAM ...", {}, handle=_DeadStreamAfterRerun())
    service._queries["CSAS_F_0"] = entry

    service._supervise()
    assert started == ["CSAS_F_0"] and entry.error is None and _state(entry, True) == "RUNNING"
    assert published == [] and service._backoff.failures("CSAS_F_0") == 0
    service.log.close()


def test_a_failed_query_s_whole_stack_goes_to_the_log_once_per_distinct_failure(kafka_broker, tmp_path, caplog) -> None:
    from engine.plan.plan import QueryPlan
    from engine.server.service import KsqlService, _QueryEntry

    service = KsqlService(kafka_broker.bootstrap_servers, f"own_{uuid.uuid4().hex[:8]}", tmp_path)  # not started
    service.ownership.publish = lambda *args: None  # type: ignore[method-assign, union-attr]
    entry = _QueryEntry(QueryPlan.__new__(QueryPlan), "CREATE STREAM ...", {}, handle=_DeadStream())
    service._queries["CSAS_F_0"] = entry
    caplog.set_level("ERROR", logger="engine.server")

    for _ in range(2):  # the same failure twice: its stack is logged the first time only
        entry.handle = _DeadStream()
        service._supervise()
    stacks = [r.getMessage() for r in caplog.records if "whole stack" in r.getMessage()]
    assert len(stacks) == 1 and "Caused by: java.lang.IllegalStateException: boom" in stacks[0]
    assert sum("failed (restart in" in r.getMessage() for r in caplog.records) == 2
    entry.handle = _DeadStreamWithJvmStack()  # another failure: its stack, the JVM's included, goes too
    service._supervise()
    stacks = [r.getMessage() for r in caplog.records if "whole stack" in r.getMessage()]
    assert len(stacks) == 2 and "StreamExecution.runStream(StreamExecution.scala:382)" in stacks[1]
    assert "Caused by: java.lang.NullPointerException: no offsets:\n\tat org.apache.spark.sql.Example.run" in stacks[1]
    service.log.close()
