"""Small plans in ksqlDB's saved-plan format (``ksqlPlanV1``), written for kspark's tests.

Each helper returns one JSON node as ksqlDB writes it; ``plan(...)`` wraps entries.
"""

from __future__ import annotations

from typing import Any

Node = dict[str, Any]


def fmt(key: str = "KAFKA", value: str = "JSON", **extra: Any) -> Node:
    return {"keyFormat": {"format": key, "properties": {}}, "valueFormat": {"format": value, "properties": {}}, **extra}


def step(wire: str, ctx: str, **fields: Any) -> Node:
    return {"@type": wire, "properties": {"queryContext": ctx}, **fields}


def stream_source(schema: str, topic: str = "input", ctx: str = "KsqlTopic/Source", **extra: Any) -> Node:
    fields: Node = {"timestampColumn": None, "pseudoColumnVersion": 1, **extra}
    return step("streamSourceV1", ctx, topicName=topic, formats=fmt(), sourceSchema=schema, **fields)


def table_source(schema: str, topic: str = "input", ctx: str = "KsqlTopic/Source", version: int = 2) -> Node:
    extra: Node = {"stateStoreFormats": fmt(), "pseudoColumnVersion": 1} if version == 2 else {"forceChangelog": True}
    return step(f"tableSourceV{version}", ctx, topicName=topic, formats=fmt(), timestampColumn=None,
                sourceSchema=schema, **extra)


def select(source: Node, exprs: list[str], keys: list[str] | None, ctx: str = "Project", table: bool = False) -> Node:
    fields: Node = {"source": source, "selectExpressions": exprs}
    if keys is not None:
        fields["keyColumnNames"] = keys
    if table:
        fields["internalFormats"] = fmt()
    else:
        fields["selectedKeys"] = None
    return step("tableSelectV1" if table else "streamSelectV1", ctx, **fields)


def sink(source: Node, topic: str = "OUTPUT", table: bool = False) -> Node:
    return step("tableSinkV1" if table else "streamSinkV1", topic, source=source, formats=fmt(),
                topicName=topic, timestampColumn=None)


def create(name: str, schema: str, topic: str, table: bool = False, **extra: Any) -> Node:
    return {
        "@type": "createTableV1" if table else "createStreamV1",
        "sourceName": name, "schema": schema, "topicName": topic, "formats": fmt(),
        "timestampColumn": None, "windowInfo": None, "orReplace": False, "isSource": False, **extra,
    }


def entry(ddl: Node | None, physical: Node | None = None, query_id: str = "CSAS_OUTPUT_0",
          sources: tuple[str, ...] = ("INPUT",), sink_name: str = "OUTPUT") -> Node:
    query = None
    if physical is not None:
        query = {"sources": list(sources), "sink": sink_name, "physicalPlan": physical,
                 "queryId": query_id, "runtimeId": None}
    return {"@type": "ksqlPlanV1", "statementText": "-- written by kspark's tests", "ddlCommand": ddl,
            "queryPlan": query}


def plan(*entries: Node, configs: dict[str, Any] | None = None) -> Node:
    return {"plan": list(entries), "configs": {"ksql.streams.cache.max.bytes.buffering": "0", **(configs or {})}}


def query_plan(physical: Node, sink_ddl: Node, source_ddls: list[Node], **kwargs: Any) -> Node:
    """A plan creating the sources, then one query writing ``sink_ddl``'s source."""
    return plan(*[entry(d) for d in source_ddls], entry(sink_ddl, physical, **kwargs))


import sys  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def kp() -> Any:
    """The plan-writing helpers of this module (``kp.stream_source(...)``, ``kp.plan(...)``)."""
    return sys.modules[__name__]
