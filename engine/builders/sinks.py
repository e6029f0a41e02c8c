"""Builders of sink steps: typed rows -> raw topic records (key and value in QTT form)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

from engine.builders.context import BuildContext, Built, log_processing_error
from engine.builders.formats import serdes_for
from engine.builders.sources import timestamp_extractor
from engine.builders.walker import builds
from engine.errors import KsqlError, SchemaRegistryUnavailableError
from engine.plan.schema import Namespace
from engine.plan.steps import StreamSink, TableSink
from engine.runtime import rows as R

# What a later sink version does to a record's serialised (key, value) before it is written.
Conform = Callable[[Any, Any], tuple[Any, Any]]


def build_python_sink(
    step: StreamSink | TableSink, source: Built, ctx: BuildContext, conform: Conform | None = None
) -> Built:
    """The V1 sink of ``step``: rows serialised in Python, key and value in QTT form. With
    ``conform``, each serialised ``(key, value)`` goes through it before it is written (a
    later sink version's extra work; V1 itself passes none)."""
    schema = source.schema
    key_serde, value_serde = serdes_for(step.formats, schema.columns)
    key_names = [c.name for c in schema.key]
    value_names = [c.name for c in schema.columns if c.namespace is Namespace.VALUE]
    extract_ts = timestamp_extractor(step.timestamp_column, schema)
    query_id, where = ctx.query_id, step.ctx

    def serialize(row: dict[str, Any]) -> list[dict[str, Any]]:
        try:
            key_row = {n: row[n] for n in key_names}
            # A key whose columns are all null is a null key (ksqlDB writes no key bytes).
            key = key_serde.serialize(key_row) if any(v is not None for v in key_row.values()) else None
            value = None if row[R.DELETED] else value_serde.serialize({n: row[n] for n in value_names})
        except SchemaRegistryUnavailableError:
            raise  # the query fails and restarts: no record is skipped
        except KsqlError as exc:
            log_processing_error(query_id, where, f"Failed to serialise the record: {exc}")
            return []
        if conform is not None:
            key, value = conform(key, value)
        ts = row[R.ROWTIME]
        if extract_ts is not None and not row[R.DELETED]:
            try:
                ts = extract_ts(row)
            except Exception as exc:  # noqa: BLE001
                log_processing_error(query_id, where, f"Failed to extract the timestamp: {exc}")
                return []
        return [
            {
                R.SEQ: row[R.SEQ],
                "__key": pickle.dumps(key),
                "__value": pickle.dumps(value),
                "__ts": ts,
                "__partition": row[R.ROWPARTITION],
                "__offset": None,
                R.HEADERS: row[R.HEADERS],
                "__wstart": row[R.WINDOWSTART],
                "__wend": row[R.WINDOWEND],
            }
        ]

    df = R.map_rows(
        source.df,
        input_schema=schema,
        output_schema=None,
        output_spark_schema=R.RAW_SCHEMA,
        fn=serialize,
        name=step.ctx,
    )
    return source.with_df(df)


@builds(StreamSink)
def build_stream_sink(step: StreamSink, *, source: Built, ctx: BuildContext) -> Built:
    return build_python_sink(step, source, ctx)


@builds(TableSink)
def build_table_sink(step: TableSink, *, source: Built, ctx: BuildContext) -> Built:
    return build_python_sink(step, source, ctx)
