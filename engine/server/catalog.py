"""The informational statements about functions, types and query plans; no HTTP.

    LIST|SHOW FUNCTIONS      -> function_names
    DESCRIBE FUNCTION name   -> describe_function
    LIST|SHOW TYPES          -> type_list
    EXPLAIN query_id         -> queryDescription of a persistent query
    EXPLAIN statement        -> queryDescription of the statement's plan (planned, never run; a pull
                                query's is the plan of the same SELECT as a push query, as ksqlDB's)

The service calls these with its engine (under its metastore lock); they answer ksqlDB's
entities or raise ``ServiceError`` with ksqlDB's message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from engine.errors import UnknownFunctionError
from engine.parser import ast
from engine.server import entities as E
from engine.server.errors import ServiceError


def list_functions(text: str) -> dict[str, Any]:
    """``function_names``: every function the engine knows, by name."""
    from engine.functions import REGISTRY

    return E.function_names(text, {name: REGISTRY.signatures(name) for name in REGISTRY.names()})


def describe_function(text: str, name: str) -> dict[str, Any]:
    """``describe_function``: the overloads of one function (ksqlDB's error when unknown)."""
    from engine.functions import REGISTRY

    try:
        signatures = REGISTRY.signatures(name)
    except UnknownFunctionError:
        raise ServiceError(f"Can't find any functions with the name '{name.upper()}'") from None
    return E.describe_function(text, name, signatures)


def list_types(text: str, types: Mapping[str, Any]) -> dict[str, Any]:
    """``type_list``: the custom types registered with CREATE TYPE."""
    return E.type_list(text, types)


def explain_query(
    text: str,
    engine: Any,
    query_id: str,
    infos: Sequence[E.RunningQueryInfo],
    properties: Mapping[str, Any],
    host: str | None,
) -> dict[str, Any]:
    """``queryDescription`` of a persistent query by id (ksqlDB's error when there is none)."""
    query = engine.queries.get(query_id) or engine.queries.get(query_id.upper())
    if query is None:
        raise ServiceError(
            f"Query with id:{query_id} does not exist, use SHOW QUERIES to view the full set of queries."
        )
    return E.query_description(text, persistent_description(engine, query, infos, properties, host))


def persistent_description(
    engine: Any, query: Any, infos: Sequence[E.RunningQueryInfo], properties: Mapping[str, Any], host: str | None,
) -> E.QueryDescription:
    """What EXPLAIN and SHOW QUERIES EXTENDED tell of a persistent query."""
    info = next((i for i in infos if i.query_id == query.query_id), None)
    sink = engine.metastore.get(query.sink)
    window = sink.window_info.type if sink is not None and sink.window_info is not None else None
    return E.QueryDescription(
        query_id=query.query_id,
        statement_text=info.statement_text if info is not None else "",
        fields=sink.schema.columns if sink is not None else (),
        sources=query.sources,
        sinks=(query.sink,),
        sink_topics=(sink.topic,) if sink is not None else (),
        execution_plan=E.execution_plan_text(query.root),
        query_type="PERSISTENT",
        state=info.state if info is not None else None,
        window_type=window,
        overridden_properties=properties,
        host=host,
        errors=info.errors if info is not None else (),
    )


def transient_description(push: Any, host: str | None) -> E.QueryDescription:
    """What SHOW QUERIES EXTENDED tells of a push query being streamed (``PushQuery``)."""
    plan = push.plan
    return E.QueryDescription(
        query_id=plan.query_id, statement_text=plan.statement_text, fields=plan.schema.columns,
        sources=plan.sources, sinks=(), sink_topics=(), execution_plan=E.execution_plan_text(plan.root),
        query_type="PUSH", state="RUNNING", overridden_properties=push.properties, host=host,
    )


def explain_statement(text: str, engine: Any, stmt: ast.Informational) -> dict[str, Any]:
    """``queryDescription`` of a statement's plan: a push query, CREATE ... AS SELECT or INSERT INTO ... SELECT.

    ``engine`` is a snapshot: the statement is planned against it and nothing is kept.
    """
    target = stmt.statement
    # ksqlDB's ExplainExecutor takes the EXPLAIN's text after its first 8 characters
    # ("EXPLAIN "), so the statement keeps its semicolon: the description's statementText.
    body = text[len("EXPLAIN "):] if text[:len("EXPLAIN ")].upper() == "EXPLAIN " else str(stmt.target)
    planner = engine.planner()
    if isinstance(target, ast.Query):
        if target.emit is None:
            # ksqlDB explains a pull query as it plans any transient query: its PullQueryValidator
            # first, then the plan the same SELECT has as a push query (ExplainExecutor).
            from engine.server.pull import check_pull_clauses, check_pull_columns

            check_pull_clauses(target, engine.config)
            check_pull_columns(target)
            target = dataclasses.replace(target, emit="CHANGES")
        transient = engine.plan_transient_query(target, body)
        description = E.QueryDescription(
            query_id=transient.query_id, statement_text=body, fields=transient.schema.columns,
            sources=transient.sources, sinks=(), sink_topics=(),
            execution_plan=E.execution_plan_text(transient.root), query_type="PUSH", state=None,
        )
        return E.query_description(text, description)
    if isinstance(target, ast.CreateAsSelect):
        prefix = "CTAS" if target.kind == "TABLE" else "CSAS"
        plan = planner.plan_create_as_select(target, body, f"{prefix}_{target.name}_{engine._query_counter}")
        if plan is None or plan.query is None:
            raise ServiceError(f"Cannot add {target.kind.lower()} '{target.name}': it already exists.")
        command = plan.command
        description = E.QueryDescription(
            query_id=plan.query.query_id, statement_text=body, fields=command.schema.columns,
            sources=plan.query.sources, sinks=(plan.query.sink,), sink_topics=(command.topic,),
            execution_plan=E.execution_plan_text(plan.query.root), query_type="PERSISTENT", state=None,
            window_type=command.window_info.type if command.window_info is not None else None,
        )
        return E.query_description(text, description)
    if isinstance(target, ast.InsertInto):
        requested = target.properties.get("QUERY_ID")
        query_id = str(requested).upper() if requested is not None else f"INSERTQUERY_{engine._query_counter}"
        plan = planner.plan_insert_into(target, body, query_id)
        sink = engine.metastore.get(target.target)
        assert plan.query is not None and sink is not None  # the planner refused it otherwise
        description = E.QueryDescription(
            query_id=plan.query.query_id, statement_text=body, fields=sink.schema.columns,
            sources=plan.query.sources, sinks=(plan.query.sink,), sink_topics=(sink.topic,),
            execution_plan=E.execution_plan_text(plan.query.root), query_type="PERSISTENT", state=None,
        )
        return E.query_description(text, description)
    # ksqlDB's words: EXPLAIN takes a query id, a SELECT, a CREATE ... AS SELECT or an INSERT INTO ... SELECT
    raise ServiceError("The provided statement does not run a ksql query")
