"""The REST QTT case model: one frozen value per expanded case, as the loader builds it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.records import TopicRecord
from qtt.loader import LoadProblem
from qtt.model import TopicSpec

# The error entity classes ksqlDB's REST API answers with, by the @type of their JSON body.
# A KsqlStatementErrorMessage is a KsqlErrorMessage, so the latter matches either body.
ERROR_TYPES: Mapping[str, frozenset[str]] = {
    "io.confluent.ksql.rest.entity.KsqlStatementErrorMessage": frozenset({"statement_error"}),
    "io.confluent.ksql.rest.entity.KsqlErrorMessage": frozenset(
        {"statement_error", "generic_error"}
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedError:
    """The error response a case expects: the error entity class, a message fragment, a status.

    Each part is optional; what is given must match.
    """

    type: str | None = None
    message: str | None = None
    status: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedResponse:
    """One statement's expected response: an admin entity (``/ksql``) or a streamed query."""

    admin: Mapping[str, Any] | None = None
    query: tuple[Mapping[str, Any], ...] | None = None

    @property
    def kind(self) -> str:
        return "admin" if self.admin is not None else "query"


@dataclass(frozen=True, slots=True, kw_only=True)
class RestCase:
    """One expanded REST QTT case (one ``format`` of a case in a file)."""

    id: str
    name: str
    file: Path
    index: int
    statements: tuple[str, ...]
    properties: Mapping[str, Any] = field(default_factory=dict)
    topics: tuple[TopicSpec, ...] = ()
    inputs: tuple[TopicRecord, ...] = ()
    outputs: tuple[TopicRecord, ...] = ()
    outputs_with_headers: frozenset[int] = frozenset()
    responses: tuple[ExpectedResponse, ...] = ()
    expected_error: ExpectedError | None = None
    wait_for_active_push_query: bool = False
    format: str | None = None
    enabled: bool = True
    pull_protobuf: bool = False  # testPullWithProtoFormat: pull queries accept ksqlDB's protobuf form
    ignored_keys: tuple[str, ...] = ()  # case keys ksqlDB's model does not read either


@dataclass(frozen=True, slots=True)
class RestFile:
    """One loaded file: its runnable cases, its problems and its disabled cases."""

    path: Path
    display_name: str
    cases: tuple[RestCase, ...]
    problems: tuple[LoadProblem, ...] = ()
    disabled: tuple[str, ...] = ()
