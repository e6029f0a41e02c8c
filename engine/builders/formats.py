"""Serdes for a step's formats (shared by source and sink builders)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.plan.schema import Column, Namespace
from engine.plan.steps import Formats
from engine.serde import FormatInfo, RecordSerde, SerdeFeatures, key_serde, value_serde


def features_of(features: Sequence[str]) -> SerdeFeatures:
    """Serde features from their plan names (WRAP_SINGLES / UNWRAP_SINGLES)."""
    if "UNWRAP_SINGLES" in features:
        return SerdeFeatures(wrap_single_value=False)
    if "WRAP_SINGLES" in features:
        return SerdeFeatures(wrap_single_value=True)
    return SerdeFeatures()


def serdes_for(formats: Formats, columns: Sequence[Column]) -> tuple[RecordSerde, RecordSerde]:
    """The key serde and the value serde (header columns excluded) of a topic."""
    key_columns = [c for c in columns if c.namespace is Namespace.KEY]
    value_columns = [c for c in columns if c.namespace is Namespace.VALUE]
    key = key_serde(FormatInfo(formats.key_format, dict(formats.key_properties)), key_columns)
    value = value_serde(
        FormatInfo(formats.value_format, dict(formats.value_properties)),
        value_columns,
        features_of(formats.value_features),
    )
    return key, value
