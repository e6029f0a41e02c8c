"""ksqlDB's rules for the properties a request carries, in one place every endpoint uses.

    request_properties({"ksql.streams.auto.offset.reset": "earliest"})  # {"auto.offset.reset": "earliest"}

A request names properties as ksqlDB's ``KsqlConfigResolver`` reads them:

- ``request.ksql.*``: request configs (``KsqlRequestConfig``), kept as named; an unknown one
  is refused.
- ``ksql.*`` other than ``ksql.streams.*``: ksqlDB configs, kept as named.
- ``ksql.streams.X``: the Kafka Streams, consumer or producer config ``X``; the prefix goes.
- ``consumer.X`` and ``producer.X`` (also after ``ksql.streams.``): the client config ``X``
  of Kafka Streams' consumers or producers; a prefixed value wins over the plain one, as
  Kafka Streams applies them. The engine reads the plain name (``auto.offset.reset``).
- anything else: a Kafka Streams, consumer or producer config, kept as named.

Values are checked as ksqlDB's ``LocalPropertyValidator`` checks them: the immutable
properties cannot be overridden, ``auto.offset.reset`` is ``earliest`` or ``latest``. A
statement-level semantic config (``STATEMENT_SEMANTICS``: what a query computes) set to a value
kspark does not implement is refused, rather than taken and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.errors import AnalysisError
from engine.facade.properties import (
    REQUEST_PREFIX,
    STREAMS_PREFIX,
    check_override,
    is_known_name,
)
from engine.server.errors import ServiceError

CLIENT_PREFIXES = ("consumer.", "producer.")
AUTO_OFFSET_RESET = "auto.offset.reset"

# ksqlDB's configs that change what a statement computes, of which kspark implements one value
# (ksqlDB's current default): the import of a saved plan checks the same ones.
STATEMENT_SEMANTICS = ("ksql.cast.strings.preserve.nulls", "ksql.nested.error.set.null", "ksql.timestamp.throw.on.invalid")

# ksqlDB's ImmutableProperties (SSL configs included): a request may not override them.
IMMUTABLE = frozenset({
    "bootstrap.servers",
    "ksql.extension.dir",
    "ksql.query.persistent.active.limit",
    "ksql.pull.queries.enable",
    "ksql.hidden.topics",
    "ksql.readonly.topics",
    "ksql.source.table.materialization.enabled",
    "ksql.headers.columns.enabled",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.key.password", "ssl.truststore.type", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.cipher.suites",
    "ssl.provider", "ssl.engine.factory.class",
})


def canonical_name(name: str) -> tuple[str, int]:
    """The name the engine reads ``name`` under, and its precedence (higher wins a clash)."""
    if name.startswith(REQUEST_PREFIX) or (name.startswith("ksql.") and not name.startswith(STREAMS_PREFIX)):
        return name, 0
    key = name.removeprefix(STREAMS_PREFIX)
    for prefix in CLIENT_PREFIXES:
        if key.startswith(prefix):
            return key.removeprefix(prefix), 2
    return key, 1 if name.startswith(STREAMS_PREFIX) else 0


def check_property(name: str, value: Any) -> None:
    """Raise ``ServiceError`` (400) for a property a request may not set, as ksqlDB words it."""
    canonical, _ = canonical_name(name)
    if not is_known_name(name):  # ksqlDB's PropertiesUtil.coerceTypes, strictly resolved
        raise ServiceError(f"Not recognizable as ksql, streams, consumer, or producer property: '{name}'",
                           code=40000)
    if canonical in IMMUTABLE:
        raise ServiceError(f"Cannot override property '{canonical}'", code=40000)
    if canonical in STATEMENT_SEMANTICS:
        check_semantics(canonical, value)
    if canonical == AUTO_OFFSET_RESET:
        text = str(value)
        if text.lower() == "none":
            raise ServiceError("'none' is not valid for this property within KSQL", code=40000)
        if text.lower() not in ("earliest", "latest"):
            raise ServiceError(
                f"Invalid value {text} for configuration {AUTO_OFFSET_RESET}: "
                "String must be one of: latest, earliest, none",
                code=40000,
            )


def check_semantics(name: str, value: Any) -> None:
    """Raise ``ServiceError`` (400) unless ``value`` of the semantic config ``name`` is one kspark implements."""
    from engine.ksqldb_import.plan import SEMANTIC_CONFIGS

    supported, meaning = SEMANTIC_CONFIGS[name]
    if str(value).strip().lower() not in supported:
        raise ServiceError(
            f"kspark implements {name} only as {'/'.join(sorted(supported))} ({meaning}); "
            f"it cannot be set to '{value}'.",
            code=40000,
        )


def request_properties(*layers: Mapping[str, Any] | None,
                       server_config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The properties of a request, checked, under the names the engine reads.

    ``layers`` are merged in order (a later layer's value wins); within a layer a prefixed
    client config wins over ``ksql.streams.X``, which wins over the plain ``X``. With
    ``server_config``, each name is also checked against that server's override denylist or
    allowlist (``ksql.properties.overrides.*``), as ksqlDB's endpoints check a request's.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        ranked: dict[str, tuple[int, Any]] = {}
        for name, value in (layer or {}).items():
            check_property(name, value)
            if server_config is not None:
                try:
                    check_override(name, server_config)
                except AnalysisError as exc:
                    raise ServiceError(str(exc), code=40000) from None
            canonical, rank = canonical_name(name)
            if canonical not in ranked or rank >= ranked[canonical][0]:
                ranked[canonical] = (rank, value)
        merged.update({name: value for name, (_, value) in ranked.items()})
    return merged


def check_settable(name: str) -> None:
    """Raise ``ServiceError`` (400) unless a request may set ``name``, as ksqlDB's
    ``/is_valid_property`` judges it: a ``request.ksql.*`` name must be a request config and a
    ``ksql.*`` one (not ``ksql.streams.*``) a ksqlDB setting (``ksql.functions.*`` is free-form),
    and the immutable properties cannot be overridden (the value is not judged: the endpoint
    asks about a name). Other names (Kafka Streams,
    consumer and producer configs) are not resolved against Kafka's config definitions here:
    a name kspark does not know is taken as one it passes on."""
    unknown = ServiceError(
        f"Not recognizable as ksql, streams, consumer, or producer property: '{name}'", code=40000
    )
    if not is_known_name(name):
        raise unknown
    canonical, _ = canonical_name(name)
    if canonical in IMMUTABLE:
        raise ServiceError(f"Cannot override property '{canonical}'", code=40000)
