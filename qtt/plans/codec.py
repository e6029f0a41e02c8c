"""JSON for planned-case files: deterministic text with exact decimals, QTT cases and records.

A saved case is written back in the QTT format (one expansion, no placeholders), so the
QTT loader reads it again (``case_from_json``); numbers with a fraction stay exact because
``Decimal`` values are written with their digits and read back by ``parse_qtt_json``.
"""

from __future__ import annotations

import base64
import decimal
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.data.records import TopicRecord
from qtt.loader import expand_case, parse_qtt_json
from qtt.model import FormatSpec, PostConditions, QttCase, QttFormatError, TopicSpec


def dumps(value: Any) -> str:
    """Deterministic JSON: sorted keys, 2-space indent, trailing newline, exact decimals."""
    return _dump(value, 0) + "\n"


def _dump(value: Any, depth: int) -> str:
    pad = "  " * (depth + 1)
    end = "  " * depth
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError(f"Cannot write the non-finite decimal {value} as JSON.")
        text = str(value)
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = [
            f"{pad}{json.dumps(str(k), ensure_ascii=False)}: {_dump(value[k], depth + 1)}"
            for k in sorted(value, key=str)
        ]
        return "{\n" + ",\n".join(items) + "\n" + end + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(pad + _dump(v, depth + 1) for v in value) + "\n" + end + "]"
    if isinstance(value, bytes):
        return json.dumps(base64.b64encode(value).decode("ascii"))
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def read_json(path: Path) -> Any:
    """Read a planned-case JSON file (decimals exact); a file that is not JSON text is a
    ``QttFormatError`` naming it, where and why."""
    try:
        return parse_qtt_json(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise QttFormatError(f"{path}: byte {exc.start} is not UTF-8 text.") from None
    except QttFormatError as exc:
        raise QttFormatError(f"{path}: {exc}") from None


def write_json(path: Path, value: Any) -> None:
    """Write ``value`` deterministically to ``path``, creating folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(value), encoding="utf-8")


# ---------------------------------------------------------------------------- records


def record_to_json(record: TopicRecord, *, headers: bool = True) -> dict[str, Any]:
    """A record in QTT form (``topic``, ``key``, ``value``, optional time, window, headers)."""
    out: dict[str, Any] = {"topic": record.topic, "key": record.key, "value": record.value}
    if record.timestamp is not None:
        out["timestamp"] = record.timestamp
    if record.window is not None:
        w = record.window
        out["window"] = {"start": w.start, "end": w.end, "type": w.type}
    if headers and record.headers:
        out["headers"] = [
            {"KEY": h.key, "VALUE": None if h.value is None else base64.b64encode(h.value).decode()}
            for h in record.headers
        ]
    return out


def records_from_json(raw: list[Any], where: str) -> tuple[TopicRecord, ...]:
    """Records written by ``record_to_json`` (read with the QTT loader's rules)."""
    probe = {"name": where, "statements": ["-"], "inputs": raw}
    return expand_case(probe, Path(where), 0)[0].inputs


# ---------------------------------------------------------------------------- cases


def case_to_json(case: QttCase) -> dict[str, Any]:
    """The case as one QTT case object, which ``case_from_json`` loads back."""
    raw: dict[str, Any] = {"name": case.name, "statements": list(case.statements)}
    if case.properties:
        raw["properties"] = dict(case.properties)
    if case.topics:
        raw["topics"] = [_topic_to_json(t) for t in case.topics]
    raw["inputs"] = [record_to_json(r) for r in case.inputs]
    raw["outputs"] = [
        record_to_json(r, headers=i in case.outputs_with_headers)
        for i, r in enumerate(case.outputs)
    ]
    for i in case.outputs_with_headers:
        raw["outputs"][i].setdefault("headers", [])
    post = _post_to_json(case.post)
    if post:
        raw["post"] = post
    return raw


def case_from_json(raw: Any, *, case_id: str, file: Path) -> QttCase:
    """Load a case saved by ``case_to_json``; keeps the id it had when it was recorded."""
    from dataclasses import replace

    (case,) = expand_case(_older_forms(raw), file, 0)
    return replace(case, id=case_id)


def _older_forms(raw: Any) -> Any:
    """A saved case in the forms the loader reads now: cases saved before the loader read
    ksqlDB's form wrote a source's expected value format as ``{"format": NAME, ...}``, where
    ksqlDB's model reads a name."""
    post = raw.get("post") if isinstance(raw, dict) else None
    sources = post.get("sources") if isinstance(post, dict) else None
    if not isinstance(post, dict) or not isinstance(sources, list) or not any(
        isinstance(s, dict) and isinstance(s.get("valueFormat"), dict) for s in sources
    ):
        return raw
    fixed = [
        {**s, "valueFormat": s["valueFormat"].get("format")}
        if isinstance(s, dict) and isinstance(s.get("valueFormat"), dict) else s
        for s in sources
    ]
    return {**raw, "post": {**post, "sources": fixed}}


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None and v != [] and v != {}}


def _topic_to_json(t: TopicSpec) -> dict[str, Any]:
    out = _drop_none(
        {
            "name": t.name,
            "keyFormat": t.key_format,
            "valueFormat": t.value_format,
            "keySchema": t.key_schema,
            "valueSchema": t.value_schema,
            "keySchemaId": t.key_schema_id,
            "valueSchemaId": t.value_schema_id,
            "replicas": t.replicas,
            "keySerdeFeatures": list(t.key_serde_features),
            "valueSerdeFeatures": list(t.value_serde_features),
            "keySchemaReferences": list(t.key_schema_references) if t.key_schema_references else None,
            "valueSchemaReferences": list(t.value_schema_references) if t.value_schema_references else None,
        }
    )
    out["partitions"] = t.partitions
    return out


def _format_to_json(spec: FormatSpec | None) -> Any:
    if spec is None:
        return None
    out: dict[str, Any] = {"format": spec.format} if spec.format is not None else {}
    if spec.properties:
        out["properties"] = dict(spec.properties)
    if spec.features is not None:
        out["features"] = list(spec.features)
    if spec.window_type is not None:
        out["windowType"] = spec.window_type
    if spec.window_size is not None:
        out["windowSize"] = spec.window_size
    return out


def _post_to_json(post: PostConditions) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if post.sources:
        sources = []
        for s in post.sources:
            item = _drop_none(
                {
                    "name": s.name,
                    "type": s.type,
                    "schema": s.schema,
                    "keyFormat": _format_to_json(s.key_format),
                    "valueFormat": s.value_format.format if s.value_format is not None else None,
                    "isSource": s.is_source,
                }
            )
            if s.key_features is not None:
                item["keyFeatures"] = list(s.key_features)
            if s.value_features is not None:
                item["valueFeatures"] = list(s.value_features)
            sources.append(item)
        out["sources"] = sources
    if post.topics or post.blacklist is not None:
        topics: dict[str, Any] = {
            "topics": [
                _drop_none(
                    {
                        "name": t.name,
                        "keyFormat": _format_to_json(t.key_format),
                        "valueFormat": _format_to_json(t.value_format),
                        "partitions": t.partitions,
                        "keySchema": t.key_schema,
                        "valueSchema": t.value_schema,
                        "keySchemaId": t.key_schema_id,
                        "valueSchemaId": t.value_schema_id,
                    }
                )
                for t in post.topics
            ]
        }
        if post.blacklist is not None:
            topics["blacklist"] = post.blacklist
        out["topics"] = topics
    return out
