"""Which property names a statement may set, as ksqlDB's ``KsqlConfigResolver`` resolves them.

    check_statement_property("ksql.nope")  # AnalysisError: Unknown property: ksql.nope
    check_override("ksql.service.id", server_config)  # AnalysisError: ... denylist ...

A ``request.ksql.*`` name is one of ``KsqlRequestConfig``'s; a ``ksql.*`` name (not
``ksql.streams.*``) one of ``KsqlConfig``'s settings (``ksql_config_names.json``), or any
``ksql.functions.*`` name (free-form function settings). Other names are Kafka Streams, consumer
or producer configs, whose definitions live in Kafka, not ksqlDB: kspark passes them on unjudged.

A ``SET`` is then checked against the server's override policy, as ksqlDB's
``ConfigOverrideValidatorFactory`` picks it: the denylist (by default) or the allowlist.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from engine.errors import AnalysisError

STREAMS_PREFIX = "ksql.streams."
REQUEST_PREFIX = "request.ksql."
FUNCTIONS_PREFIX = "ksql.functions."

# KsqlRequestConfig's request properties.
REQUEST_CONFIGS = frozenset({
    "request.ksql.query.pull.skip.forwarding",
    "request.ksql.internal.request",
    "request.ksql.debug.request",
    "request.ksql.query.pull.partition",
    "request.ksql.query.push.skip.forwarding",
    "request.ksql.query.push.continuation.token",
    "request.ksql.query.push.catchup.consumer.group",
})


@functools.cache
def ksql_config_names() -> frozenset[str]:
    """The names of ksqlDB's ``ksql.*`` settings (``ksql_config_names.json``)."""
    text = resources.files("engine.facade").joinpath("ksql_config_names.json").read_text(encoding="utf-8")
    return frozenset(json.loads(text)["names"])


def is_known_name(name: str) -> bool:
    """False for a ``request.ksql.*`` or ``ksql.*`` name that ksqlDB does not define."""
    if name.startswith(REQUEST_PREFIX):
        return name in REQUEST_CONFIGS
    if name.startswith("ksql.") and not name.startswith(STREAMS_PREFIX):
        return name in ksql_config_names() or name.startswith(FUNCTIONS_PREFIX)
    return True


def check_statement_property(name: str) -> None:
    """Raise ``AnalysisError`` in ksqlDB's words when a ``SET`` or ``UNSET`` names a property
    that ksqlDB does not define."""
    if not is_known_name(name):
        raise AnalysisError(f"Unknown property: {name}")  # ksqlDB's PropertyOverrider


VALIDATION_MODE = "ksql.properties.overrides.validation.mode"
DENYLIST = "ksql.properties.overrides.denylist"
ALLOWLIST = "ksql.properties.overrides.allowlist"
SERVICE_ID = "ksql.service.id"
# Server-owned settings an allowlist cannot open to overrides (ksqlDB's AllowListPropertyValidator).
ALWAYS_DENIED = frozenset({SERVICE_ID, DENYLIST, ALLOWLIST, VALIDATION_MODE, "ksql.properties.overrides.log"})


def _listed(value: Any) -> list[str]:
    """A Kafka LIST config: a list, or comma-separated text (blank entries dropped)."""
    items = value if isinstance(value, list | tuple) else str(value or "").split(",")
    return [str(item).strip() for item in items if str(item).strip()]


def _java_set(names: list[str]) -> str:
    return f"[{', '.join(names)}]"


def check_override(name: str, system_config: Mapping[str, Any]) -> None:
    """Raise ``AnalysisError`` in ksqlDB's words when the server's configuration forbids a
    statement to override ``name``: its denylist (``ksql.service.id`` always on it) or, when
    ``ksql.properties.overrides.validation.mode`` is ``allowlist``, a name missing from its
    allowlist. ``system_config`` is the server's, not the session's overrides."""
    mode = str(system_config.get(VALIDATION_MODE, "denylist")).strip()
    if mode == "allowlist":
        entries = _listed(system_config.get(ALLOWLIST))
        wildcards = [entry for entry in entries if "*" in entry or "?" in entry]
        if wildcards:
            raise AnalysisError(
                "Allowlist entries must be exact property names; wildcard or glob entries are not "
                f"permitted: {_java_set(wildcards)}"
            )
        if name not in entries or name in ALWAYS_DENIED:
            raise AnalysisError(
                "One or more property overrides set locally are not permitted by the KSQL server "
                f"allowlist (use UNSET to reset their default value): {_java_set([name])}"
            )
        return
    if name == SERVICE_ID or name in _listed(system_config.get(DENYLIST)):
        raise AnalysisError(
            "One or more properties overrides set locally are prohibited by the KSQL server "
            f"denylist (use UNSET to reset their default value): {_java_set([name])}"
        )
