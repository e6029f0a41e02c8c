"""Push queries: the rows of ``SELECT ... EMIT CHANGES`` handed to a caller as they arrive.

    app = StreamingApplication(bootstrap, state_dir, read_only=True)
    app.load()                                             # the application's sources
    query = PushQuery(app.engine, bootstrap, "SELECT ID, N FROM COUNTS EMIT CHANGES LIMIT 5;")
    query.schema                                           # `ID` STRING, `N` BIGINT
    with query:                                            # start() ... close()
        for row in query.rows():                           # PushRow(columns=('a', 1), tombstone=False)
            ...

A push query is planned like a persistent one (``KsqlEngine.plan_transient_query``) but
registers nothing and writes no topic: its steps are built on the Kafka runtime, and a
``foreachBatch`` writer decodes each micro-batch's rows, sorts them in input order and
puts them on a queue the caller reads. Its Structured Streaming checkpoint lives in a
temporary directory that ``close`` removes, so every push query starts afresh, at the end
of its topics unless the properties say ``'auto.offset.reset'='earliest'`` (ksqlDB's
default is ``latest``). ``LIMIT n`` ends it after n rows. A table row's deletion arrives as
a row with ``tombstone=True``: the columns that select the key hold it, the others are
null (``skip_tombstones``, set for a scalable push query, leaves them out, as ksqlDB's
scalable push queries do). A stream record with a null value is not a row (ksqlDB skips it).
"""

from __future__ import annotations

import datetime as dt
import pickle
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as ST

from engine.data.values import format_date, format_time, format_timestamp
from engine.errors import AnalysisError, ExecutionError, StartTimeout
from engine.facade.engine import KsqlEngine
from engine.parser import ast, parse
from engine.plan import steps as S
from engine.plan import steps_native as N
from engine.plan import types as T
from engine.plan.plan import TransientQueryPlan
from engine.plan.schema import LogicalSchema
from engine.plan.steps import walk_steps
from engine.plan.types import SqlType
from engine.runtime import rows as R
from engine.serde.coerce import writer

AUTO_OFFSET_RESET = "auto.offset.reset"
TRIGGER = "200 milliseconds"  # an idle push query polls its topics five times a second
SOURCE_STEPS = (
    S.StreamSource, S.WindowedStreamSource, S.TableSource, S.WindowedTableSource,
    N.StreamSourceV2, N.TableSourceV2, N.StreamSourceV3, N.TableSourceV3, N.StreamSourceV4,
    N.StreamSourceV5, N.StreamSourceV6, N.TableSourceV4,
)


@dataclass(frozen=True, slots=True)
class PushRow:
    """One row of a push query: values in the header's column order (engine values)."""

    columns: tuple[Any, ...]
    tombstone: bool = False  # a table row's deletion: only the selected key columns are set


class PushQuery:
    """One push query over the sources of ``engine``'s metastore, on the Kafka cluster.

    ``properties`` are the query's own (a client's session properties): only they choose
    ``auto.offset.reset``, not a SET the application ran. The constructor plans the query
    and raises ``KsqlError`` for a bad statement; ``start`` starts it; ``rows`` yields its
    rows; ``close`` stops it and removes its checkpoint.
    """

    def __init__(
        self,
        engine: KsqlEngine,
        bootstrap_servers: str,
        text: str,
        *,
        properties: Mapping[str, Any] | None = None,
        spark_master: str = "local[2]",
        spark_conf: Mapping[str, str] | None = None,
        queue_size: int = 10_000,
        variables: Mapping[str, str] | None = None,
    ) -> None:
        statements = parse(text, variables=engine.variables if variables is None else variables)
        if len(statements) != 1 or not isinstance(statements[0].statement, ast.Query):
            raise AnalysisError(f"A push query is one SELECT ... EMIT CHANGES statement, got: {text.strip()}")
        self.engine = engine
        self.bootstrap_servers = bootstrap_servers
        self.properties = dict(properties or {})
        self.plan: TransientQueryPlan = engine.plan_transient_query(statements[0].statement, statements[0].text)
        offsets = str(self.properties.get(AUTO_OFFSET_RESET, "latest")).lower()
        if offsets not in ("earliest", "latest"):
            raise AnalysisError(f"'{AUTO_OFFSET_RESET}' must be 'earliest' or 'latest', got '{offsets}'.")
        self.starting_offsets = offsets
        self.spark_master = spark_master
        self.spark_conf = dict(spark_conf or {})
        self._rows: queue.Queue[PushRow] = queue.Queue(maxsize=queue_size)
        self._closed = threading.Event()
        self._delivered = 0
        self._handle: Any = None
        self._checkpoint: Path | None = None
        self.limit_reached = False
        # A scalable push query's rows (ksqlDB's ScalablePushConsumer) leave out a table's row
        # deletions: it skips every record of the sink topic whose value is null.
        self.skip_tombstones = False

    @classmethod
    def on_application(cls, app: Any, text: str, properties: Mapping[str, Any] | None = None,
                       *, variables: Mapping[str, str] | None = None) -> PushQuery:
        """A push query over an in-process ``StreamingApplication``'s sources and Spark session
        (``variables`` substituted in ``text``: the engine's by default)."""
        return cls(
            app.engine,
            app.bootstrap_servers,
            text,
            properties=properties,
            spark_master=app.spark_master,
            spark_conf=app.spark_conf,
            variables=variables,
        )

    @property
    def query_id(self) -> str:
        return self.plan.query_id

    @property
    def schema(self) -> LogicalSchema:
        """The result columns as ksqlDB's push-query header shows them (`` `ID` STRING, ...``)."""
        return self.plan.schema

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = 60.0) -> PushQuery:
        """Start the query; return once its starting offsets are fixed, at most ``timeout``
        seconds after the call (else :class:`StartTimeout`, the query stopped).

        With ``latest`` every record produced after ``start`` returns is read. A LIMIT of 0
        starts nothing.
        """
        deadline = time.monotonic() + timeout
        if self._handle is not None or self._closed.is_set():
            raise ExecutionError(f"Push query {self.query_id} was started already.")
        if self.plan.limit == 0:
            self.limit_reached = True
            self._closed.set()
            return self
        from engine.builders.context import BuildContext
        from engine.builders.walker import build
        from engine.hosting.application import SCHEMA_REGISTRY_URL
        from engine.kafka.admin import TopicAdmin
        from engine.runtime.kafka import KafkaRuntime
        from engine.runtime.session import get_spark, partitioned_session

        get_spark(self.spark_master, self.spark_conf, kafka=True, long_running=True)
        admin = TopicAdmin(self.bootstrap_servers)
        sources = [s for s in walk_steps(self.plan.root) if isinstance(s, SOURCE_STEPS)]
        partitions = []
        for source in sources:
            if not admin.topic_exists(source.topic):
                raise AnalysisError(f"Kafka topic does not exist: {source.topic}")
            partitions.append(admin.partition_count(source.topic))
        tasks = max(partitions, default=1)
        # A session of its own with the query's shuffle partition count: the start sets nothing
        # on the shared session, so it waits for no other query's start (they took one lock,
        # and at a hundred clients a push query waited a minute for the others' starts).
        spark = partitioned_session(tasks)
        config = {**self.engine.config, **self.properties}
        registry_url = config.get(SCHEMA_REGISTRY_URL) or None  # AVRO/JSON_SR in the wire format
        runtime = KafkaRuntime(
            spark, self.bootstrap_servers, tasks=tasks, starting_offsets=self.starting_offsets,
            query_id=self.query_id, registry_url=None if registry_url is None else str(registry_url),
        )
        built = build(self.plan.root, BuildContext(runtime=runtime, query_id=self.query_id, config=config))
        # The window metadata under names of its own: a result column may be named
        # WINDOWSTART or WINDOWEND (a windowed source's bounds, as the SELECT list computed
        # them), which the metadata under its own name would replace in the row function.
        windows = [F.col(meta).alias(copy) for meta, copy in _WINDOW_COPIES.items()]
        rows = R.map_rows(
            built.df.select("*", *windows),
            input_schema=built.schema,
            output_schema=None,
            output_spark_schema=_DELIVERED,
            fn=_deliverer(self.plan),
            name="PushQuery",
            input_fields=(R.SEQ, R.DELETED, *_WINDOW_COPIES.values()),
        )
        self._checkpoint = Path(tempfile.mkdtemp(prefix=f"kspark-{self.query_id}-"))
        writer = (
            rows.writeStream.foreachBatch(self._deliver)
            .option("checkpointLocation", str(self._checkpoint))
            .queryName(self.query_id)
            .trigger(processingTime=TRIGGER)
        )
        self._handle = writer.start()
        try:
            self._await_starting_offsets(len(sources), timeout, deadline)
        except BaseException:
            self.close()
            raise
        return self

    def _await_starting_offsets(self, sources: int, timeout: float, deadline: float) -> None:
        """Wait until every source has written its starting offsets into the checkpoint."""
        assert self._checkpoint is not None
        started = [self._checkpoint / "sources" / str(i) / "0" for i in range(sources)]
        while not all(path.is_file() for path in started):
            self._raise_if_failed()
            if time.monotonic() >= deadline:
                raise StartTimeout(
                    f"Push query {self.query_id} did not reach its topics within {timeout:g} s."
                )
            time.sleep(0.05)

    def close(self) -> None:
        """Stop the query (rows not read yet are dropped) and remove its checkpoint."""
        self._closed.set()
        handle, self._handle = self._handle, None
        if handle is not None:
            try:
                handle.stop()
            except Exception:  # noqa: BLE001 - a failed query is stopped already
                pass
        if self._checkpoint is not None:
            shutil.rmtree(self._checkpoint, ignore_errors=True)
            self._checkpoint = None

    def __enter__(self) -> PushQuery:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ rows

    def rows(self, *, stop: Callable[[], bool] | None = None, poll: float = 0.2,
             idle: bool = False) -> Iterator[PushRow | None]:
        """The rows as they arrive, until LIMIT (then the query closes), ``close`` or ``stop()``.

        ``stop`` is checked whenever no row came for ``poll`` seconds and after each row (a
        Ctrl-C handler sets it: interrupting Spark's calls themselves is not safe). With
        ``idle``, a poll without a row yields None, so a caller that reads one row at a time
        on a worker thread gets its thread back at least every ``poll`` seconds. A failure of
        the Spark query raises ``ExecutionError`` with its root cause.
        """
        limit = self.plan.limit
        yielded = 0
        while limit is None or yielded < limit:
            if stop is not None and stop():
                return
            try:
                row = self._rows.get(timeout=poll)
            except queue.Empty:
                self._raise_if_failed()
                if self._closed.is_set():
                    return
                if idle:
                    yield None
                continue
            yield row
            yielded += 1
        self.limit_reached = True
        self.close()

    def _deliver(self, batch: Any, batch_id: int) -> None:
        """foreachBatch: one micro-batch's rows, in input order, onto the queue."""
        if self._closed.is_set():
            return
        limit = self.plan.limit
        for record in sorted(batch.collect(), key=lambda r: list(r[0])):
            if limit is not None and self._delivered >= limit:
                return
            columns, tombstone = pickle.loads(record[1])
            if tombstone and self.skip_tombstones:
                continue
            row = PushRow(tuple(columns), tombstone)
            while not self._closed.is_set():
                try:
                    self._rows.put(row, timeout=0.1)  # a full queue holds the stream back
                    break
                except queue.Full:
                    continue
            self._delivered += 1

    def _raise_if_failed(self) -> None:
        handle = self._handle
        if handle is None or handle.isActive:
            return
        failure = handle.exception()
        if failure is not None:
            from engine.hosting.application import _root_cause

            self._handle = None
            self.close()
            raise ExecutionError(f"Push query {self.query_id} failed: {_root_cause(failure)}")


# What the foreachBatch writer collects: the input-order key and the pickled row.
_DELIVERED = ST.StructType(
    [
        ST.StructField(R.SEQ, ST.ArrayType(ST.LongType(), containsNull=False), nullable=False),
        ST.StructField("__row", ST.BinaryType()),
    ]
)


# The row's window bounds (metadata) -> the names the row function reads them by.
_WINDOW_COPIES = {R.WINDOWSTART: "__window_start", R.WINDOWEND: "__window_end"}


def _deliverer(plan: TransientQueryPlan) -> Any:
    """The row function turning a typed row into (seq, pickled (columns, tombstone))."""
    names = [c.name for c in plan.schema.columns]
    # A deletion's window bounds come from the row's metadata: its value columns are null.
    keys = [_WINDOW_COPIES.get(key, key) if key is not None else None for key in plan.tombstone_keys]
    is_table = plan.is_table

    def deliver(row: dict[str, Any]) -> list[dict[str, Any]]:
        if row[R.DELETED]:
            if not is_table:
                return []  # a stream record with a null value is no row
            columns = [None if key is None else row[key] for key in keys]
        else:
            columns = [row[name] for name in names]
        return [{R.SEQ: row[R.SEQ], "__row": pickle.dumps((columns, bool(row[R.DELETED])))}]

    return deliver


def json_value(value: Any, sql_type: SqlType) -> Any:
    """A row value in ksqlDB's REST JSON form (what ``json.dumps``/``json_text`` can write).

    Timestamps, dates and times as ksqlDB's ISO text (``2021-03-04T12:34:56.789``,
    ``2021-03-04``, ``12:34:56``), bytes as base64, decimals exact, structs as objects of
    their fields, maps as objects, doubles that are not finite as ``"NaN"``/``"Infinity"``.
    """
    if value is None:
        return None
    if sql_type.base is T.BaseType.TIMESTAMP and isinstance(value, dt.datetime):
        return format_timestamp(value)
    if sql_type.base is T.BaseType.DATE and isinstance(value, dt.date):
        return format_date(value)
    if sql_type.base is T.BaseType.TIME and isinstance(value, dt.time):
        return format_time(value)
    if isinstance(sql_type, T.Array):
        return [json_value(item, sql_type.item) for item in value]
    if isinstance(sql_type, T.Map):
        return {str(key): json_value(item, sql_type.value) for key, item in value.items()}
    if isinstance(sql_type, T.Struct):
        return {f.name: json_value(value.get(f.name), f.type) for f in sql_type.fields}
    return writer(sql_type)(value)
