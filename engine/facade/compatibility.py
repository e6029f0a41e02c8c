"""Compatibility-breaking configs: behaviour clients see that a service keeps until it opts in.

A release that changes what clients see for the same statement (a function's result, an error
text) puts the change behind a config with two defaults, as the execution-plans design text
describes for ksqlDB's compatibility-breaking configs:

- the *read default* (the old behaviour) holds for a service whose command log records no
  value: the service was created by an earlier release;
- the *write default* (the new behaviour) is recorded for a new service, with its first command.

Every command a server writes records the service's value (its ``originalProperties``, as
ksqlDB's commands keep their configs), so every server of the service replays the same value and
plans alike. A statement opts in by setting the
property (``SET 'ksql.functions.java.semantics.enabled'='true';`` before it, or the request's
properties); its command records the new value and the service keeps it from then on: an opt-in
is not taken back by replaying a command that recorded the old value.

The configs only choose what *new* plans record. A saved plan names its own step and function
versions and builds them whatever the config says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from engine.expressions.cast import cast_semantics
from engine.plan import expr as E


@dataclass(frozen=True, slots=True, kw_only=True)
class CompatibilityConfig:
    """One compatibility-breaking config: its property, its two defaults, what it changes."""

    name: str
    read_default: bool  # no value in the service's log: a service of an earlier release
    write_default: bool  # recorded for a new service
    since_release: str
    changes: str


FUNCTIONS_JAVA_SEMANTICS = CompatibilityConfig(
    name="ksql.functions.java.semantics.enabled",
    read_default=False,
    write_default=True,
    since_release="0.12.0",
    changes=(
        "New queries plan the function and CAST versions of 0.12.0 (results as ksqlDB's Java "
        "computes them: CAST of a DOUBLE to STRING with Double.toString's digits, ABS wrapping, "
        "TIMESTAMPTOSTRING/FORMAT_*, INITCAP, INSTR, ARRAY_JOIN and the others listed in "
        "RELEASE_0_11_FUNCTION_VERSIONS); false keeps those of 0.11.0."
    ),
)

CONFIGS: tuple[CompatibilityConfig, ...] = (FUNCTIONS_JAVA_SEMANTICS,)

# The versions new plans recorded in release 0.11.0 (commit 718a0d0), for the functions whose
# version this release raised; a function missing here plans its current version (unchanged,
# or new in this release). tests/engine/facade/test_compatibility.py checks it against 0.11.0.
RELEASE_0_11_FUNCTION_VERSIONS: Mapping[str, int] = {
    "ABS": 1, "ARRAY_JOIN": 1, "ATAN2": 1, "BAD_UDF": 1, "COLLECT_LIST": 1, "COLLECT_SET": 1,
    "CONCAT_WS": 1, "CORRELATION": 1, "COUNT_DISTINCT": 1, "CUBE_EXPLODE": 1, "DATEADD": 1,
    "DATESUB": 1, "DATETOSTRING": 1, "ENCODE": 1, "ENTRIES": 1, "EXTRACTJSONFIELD": 1,
    "FIVE_ARG": 1, "FORMAT_DATE": 1, "FORMAT_TIME": 1, "FORMAT_TIMESTAMP": 1, "FOUR_ARG": 1,
    "FROM_BYTES": 1, "GENERATE_SERIES": 1, "GEO_DISTANCE": 1, "INITCAP": 1, "INSTR": 1,
    "JSON_ARRAY_LENGTH": 1, "JSON_CONCAT": 1, "JSON_ITEMS": 1, "JSON_KEYS": 1, "JSON_RECORDS": 1,
    "LATEST_BY_OFFSET": 1, "LOG": 2, "MAP_KEYS": 1, "MAP_VALUES": 1, "MASK": 1,
    "MASK_KEEP_LEFT": 1, "MASK_KEEP_RIGHT": 1, "MASK_LEFT": 1, "MASK_RIGHT": 1, "MID_VAR_ARG": 1,
    "MULTI_ARG": 1, "NULLIF": 1, "PARSE_DATE": 1, "PARSE_TIME": 1, "POWER": 1, "REDUCE": 1,
    "REGEXP_EXTRACT": 1, "REGEXP_EXTRACT_ALL": 1, "REGEXP_REPLACE": 1,
    "REGEXP_SPLIT_TO_ARRAY": 1, "ROUND": 1, "STDDEV_SAMP": 1, "STDDEV_SAMPLE": 1,
    "TIMEADD": 1, "TIMESTAMPADD": 1, "TIMESTAMPSUB": 1, "TIMESTAMPTOSTRING": 1, "TIMESUB": 1,
    "TOPK": 1, "TO_BYTES": 1, "TO_JSON_STRING": 1, "TRUNC": 1,
}
RELEASE_0_11_CAST_VERSION = 2


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().strip("'\"").lower() == "true"


def enabled(config: CompatibilityConfig, properties: Mapping[str, Any]) -> bool:
    """The config's value in ``properties``; its write default where they hold none (an engine
    with no log behind it is a new service; a service with an older log has the read default
    set by ``settle_after_replay``)."""
    return _flag(properties[config.name]) if config.name in properties else config.write_default


def replay_values(service: MutableMapping[str, Any], command_properties: Mapping[str, Any]) -> None:
    """Take the values a replayed command recorded into the service's configuration. Once any
    command recorded the write default the service has opted in for good: a command that
    recorded the read default (written before the opt-in, or a request's own override) does
    not take it back, whatever order the metastore's tables replay in."""
    for config in CONFIGS:
        if config.name in command_properties:
            value = _flag(command_properties[config.name])
            if value == config.write_default or config.name not in service:
                service[config.name] = value


def settle_after_replay(service: MutableMapping[str, Any], *, commands_replayed: int) -> None:
    """Once a service's log is replayed: a config that no replayed command recorded takes its
    read default when the log held commands (an earlier release wrote them); an empty log is a
    new service, whose first command records the write default (``record_service_values``)."""
    if commands_replayed == 0:
        return
    for config in CONFIGS:
        service.setdefault(config.name, config.read_default)


def service_values(request: Mapping[str, Any], service: Mapping[str, Any]) -> dict[str, bool]:
    """Each config's value for a command about to be written (and recorded with it): the
    request's own value if it sets one (an opt-in), else the service's, else (no command
    recorded one yet: a new service) the write default."""
    return {
        config.name: _flag(request.get(config.name, service.get(config.name, config.write_default)))
        for config in CONFIGS
    }


def record_service_values(properties: MutableMapping[str, Any], service: Mapping[str, Any]) -> None:
    """``service_values`` written into ``properties`` (a saved statement's own record)."""
    properties.update(service_values(properties, service))


def plan_versions(statement: Any, properties: Mapping[str, Any]) -> Any:
    """``statement`` with the function and CAST versions new plans record under ``properties``:
    as parsed (the current ones) where ``ksql.functions.java.semantics.enabled`` is true, those of
    release 0.11.0 where it is false."""
    if enabled(FUNCTIONS_JAVA_SEMANTICS, properties):
        return statement
    return _pin(statement)


def _pinned(node: E.Expr) -> E.Expr:
    if isinstance(node, E.FunctionCall):
        old = RELEASE_0_11_FUNCTION_VERSIONS.get(node.name.upper())
        if old is not None and node.semantics > old:
            return dataclasses.replace(node, semantics=old)
    if isinstance(node, E.Cast) and node.semantics > RELEASE_0_11_CAST_VERSION:
        return dataclasses.replace(node, semantics=cast_semantics(node.type, RELEASE_0_11_CAST_VERSION))
    return node


def _pin(value: Any) -> Any:
    """Rebuild the frozen statement tree with every call and cast pinned; a part with nothing
    to pin is returned as it is (the same object)."""
    if isinstance(value, tuple | list):
        items = [_pin(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return type(value)(items) if type(value) in (tuple, list) else type(value)(*items)
    if isinstance(value, dict):
        pinned = {k: _pin(v) for k, v in value.items()}
        return value if all(pinned[k] is v for k, v in value.items()) else pinned
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            old = getattr(value, f.name)
            new = _pin(old)
            if new is not old:
                changes[f.name] = new
        rebuilt = dataclasses.replace(value, **changes) if changes else value
        return _pinned(rebuilt) if isinstance(rebuilt, E.Expr) else rebuilt
    return value
