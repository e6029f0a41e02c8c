"""The QTT case model: one frozen value per expanded test case, as the loader builds it.

Records reuse the engine's ``TopicRecord`` (keys and values in QTT form); header values are
decoded from base64 to bytes by the loader.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.data.records import TopicInfo, TopicRecord

# The ksqlDB release whose behaviour the engine emulates; cases whose `versions` bounds
# exclude it are "not applicable" and left out of every total.
EMULATED_KSQL_VERSION = "7.4.0"


class QttFormatError(Exception):
    """A QTT file or case does not follow the QTT format; the message says where and why."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FormatSpec:
    """A key or value format as topics and post-conditions describe it."""

    format: str | None  # None: any format (a source's keyFormat may give only its window)
    properties: Mapping[str, Any] = field(default_factory=dict)
    features: tuple[str, ...] | None = None
    window_type: str | None = None
    window_size: int | None = None
    # True: an absent window type or size means the key is not windowed (ksqlDB's KeyFormatNode).
    exact_window: bool = False
    # True: the whole format is compared, as ksqlDB compares a post topic's KeyFormat or
    # ValueFormat: absent properties, features or window mean none.
    whole: bool = False

    def __str__(self) -> str:
        return self.format or "any format"


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicSpec:
    """A topic a case declares up front (``topics`` list)."""

    name: str
    key_format: str | None = None
    value_format: str | None = None
    key_schema: Any = None
    value_schema: Any = None
    key_schema_id: int | None = None
    value_schema_id: int | None = None
    partitions: int = 1
    replicas: int | None = None
    key_serde_features: tuple[str, ...] = ()
    value_serde_features: tuple[str, ...] = ()
    key_schema_references: Any = None
    value_schema_references: Any = None

    def to_topic_info(self) -> TopicInfo:
        """The engine's view of this topic."""
        props: dict[str, Any] = {}
        for name, value in (
            ("keySchemaId", self.key_schema_id),
            ("valueSchemaId", self.value_schema_id),
            ("replicas", self.replicas),
            ("keySchemaReferences", self.key_schema_references),
            ("valueSchemaReferences", self.value_schema_references),
        ):
            if value is not None:
                props[name] = value
        if self.key_serde_features:
            props["keySerdeFeatures"] = list(self.key_serde_features)
        if self.value_serde_features:
            props["valueSerdeFeatures"] = list(self.value_serde_features)
        return TopicInfo(
            name=self.name,
            partitions=self.partitions,
            key_format=self.key_format,
            value_format=self.value_format,
            key_schema=self.key_schema,
            value_schema=self.value_schema,
            properties=props,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpectedException:
    """The error a case expects: a Java class name and a message fragment."""

    type: str | None = None  # None: any error (a message must then be given)
    message: str | None = None
    cause: str | None = None
    cause_message: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PostSource:
    """A post-condition on one stream or table in the metastore."""

    name: str
    type: str | None = None
    schema: str | None = None
    key_format: FormatSpec | None = None
    value_format: FormatSpec | None = None
    key_features: tuple[str, ...] | None = None
    value_features: tuple[str, ...] | None = None
    is_source: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PostTopic:
    """A post-condition on one topic: its formats and partitions when given."""

    name: str
    key_format: FormatSpec | None = None
    value_format: FormatSpec | None = None
    partitions: int | None = None
    key_schema: Any = None
    value_schema: Any = None
    # Compared always, as ksqlDB's PostTopicNode does: None means the case declared no id.
    key_schema_id: int | None = None
    value_schema_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PostConditions:
    """What must hold after the case ran."""

    sources: tuple[PostSource, ...] = ()
    topics: tuple[PostTopic, ...] = ()
    blacklist: str | None = None

    def is_empty(self) -> bool:
        """True when there is nothing to check."""
        return not self.sources and not self.topics and self.blacklist is None


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionBounds:
    """Inclusive ksqlDB version bounds of a case."""

    min: str | None = None
    max: str | None = None

    def contains(self, version: str) -> bool:
        """True when ``version`` lies within the bounds."""
        v = version_tuple(version)
        if self.min is not None and version_tuple(self.min) > v:
            return False
        return not (self.max is not None and version_tuple(self.max) < v)


# ksqlDB's KsqlVersion format (the text its parse error quotes): MAJOR.MINOR[.PATCH] with
# optional -QUALIFIER parts, a build suffix and an -rc suffix.
KSQL_VERSION_PATTERN = r"(?<major>\d+)\.(?<minor>\d+)(?<patch>.\d+)?(?:-([A-Za-z0-9]+|\d+))*(\.\d+-\d+)?(-rc\d*)?"
_KSQL_VERSION = re.compile(KSQL_VERSION_PATTERN.replace("(?<", "(?P<"))


def parse_ksql_version(text: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a case's version bound, read as ksqlDB's KsqlVersion reads it."""
    match = _KSQL_VERSION.fullmatch(text)
    if match is None:
        raise QttFormatError(
            f"Failed to parse version: '{text}'. Version must be in format '{KSQL_VERSION_PATTERN}'. "
        )
    patch = match.group("patch")
    return int(match.group("major")), int(match.group("minor")), int(patch[1:]) if patch else 0


def version_tuple(text: str) -> tuple[int, ...]:
    """The numeric components of a version such as ``7.4.0`` or ``6.0.0-SNAPSHOT``."""
    match = re.match(r"\s*(\d+(?:\.\d+)*)", text)
    if match is None:
        raise QttFormatError(f"Version '{text}' is not of the form MAJOR.MINOR.PATCH.")
    parts = [int(p) for p in match.group(1).split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


@dataclass(frozen=True, slots=True, kw_only=True)
class QttCase:
    """One expanded QTT case (one format x config combination of a case in a file)."""

    id: str
    name: str
    file: Path
    index: int
    statements: tuple[str, ...]
    properties: Mapping[str, Any] = field(default_factory=dict)
    topics: tuple[TopicSpec, ...] = ()
    inputs: tuple[TopicRecord, ...] = ()
    outputs: tuple[TopicRecord, ...] = ()
    expected_exception: ExpectedException | None = None
    post: PostConditions = field(default_factory=PostConditions)
    versions: VersionBounds = field(default_factory=VersionBounds)
    enabled: bool = True
    format: str | None = None
    config: str | None = None
    # Indexes of expected outputs that list headers: only those compare headers.
    outputs_with_headers: frozenset[int] = frozenset()

    def topic_names(self) -> list[str]:
        """Every topic the case names: declared first, then inputs and outputs, in order."""
        names: list[str] = []
        for name in [t.name for t in self.topics] + [
            r.topic for r in (*self.inputs, *self.outputs)
        ]:
            if name not in names:
                names.append(name)
        return names

    def is_applicable(self, version: str = EMULATED_KSQL_VERSION) -> bool:
        """Whether the case's version bounds include ``version``."""
        return self.versions.contains(version)
