"""Parity table ``steps``: everything a saved ksqlDB plan (``plan.json``) may hold, and whether
kspark's importer (``engine.ksqldb_import``) maps it.

One row per

- execution step type, the ``@JsonSubTypes`` of ksqlDB's ``ExecutionStep``, with the JSON
  fields of its ``@JsonProperty`` constructor parameters (``*`` marks required ones);
- DDL command type, the ``@JsonSubTypes`` of ``DdlCommand``;
- record format of ``FormatFactory``, format property a format supports, and ``SerdeFeature``;
- saved config value that changes what a query computes (``SEMANTIC_CONFIG_ROWS``), and
  saved step field whose value changes it (``pseudoColumnVersion``).

The generator checks kspark itself: a step or command is mapped when the importer has a
translator for its wire name; a format, property or feature when the importer's format
reading accepts it; a config value when the importer accepts it. The test is the committed
``steps_map.json`` (item -> the kspark test that imports and runs the mapping; or item ->
reason for a row kspark deliberately does not map; or item -> what is missing, for a value kspark
passes on without doing what ksqlDB does with it), and the generator checks that the test
exists and names the item (its wire name, format or value) in its own text or in the plan
helpers it calls (``tests/engine/ksqldb_import/conftest.py``). A row failing either check
stays missing, with the reason saying which.
"""

from __future__ import annotations

import ast
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from qtt.parity import Row, table

MAP_FILE = Path(__file__).with_name("steps_map.json")
ROOT = Path(__file__).resolve().parents[2]
EXECUTION = "ksqldb-execution/src/main/java/io/confluent/ksql/execution"
PLAN_DIR = f"{EXECUTION}/plan"
DDL_DIR = f"{EXECUTION}/ddl/commands"
SERDE_DIR = "ksqldb-serde/src/main/java/io/confluent/ksql/serde"
FEATURE_FILE = "ksqldb-common/src/main/java/io/confluent/ksql/serde/SerdeFeature.java"
CONFIG_FILE = "ksqldb-common/src/main/java/io/confluent/ksql/util/KsqlConfig.java"

_SUBTYPE = re.compile(r"@Type\(\s*value\s*=\s*(\w+)\.class\s*,\s*name\s*=\s*\"(\w+)\"\s*\)")
_PROPERTY = re.compile(r"@JsonProperty\(\s*(?:value\s*=\s*)?\"(\w+)\"([^)]*)\)")
_STRING_CONSTANT = re.compile(r"static final String (\w+)\s*=\s*\"([^\"]*)\"")
_SUPPORTED = re.compile(r"SUPPORTED_PROPERTIES\s*=\s*ImmutableSet\.of\(([^)]*)\)")

# Saved config values that change what a query computes: (config, value, ksqlDB's meaning).
# Configs that only steer planning (ksql.any.key.name.enabled, ksql.headers.columns.enabled,
# ksql.persistence.wrap.single.values, ksql.suppress.enabled, ksql.key.format.enabled, ...) are
# rows too: their outcome is in the saved steps, which is why they are reasoned.
SEMANTIC_CONFIG_ROWS: tuple[tuple[str, str, str], ...] = (
    ("ksql.nested.error.set.null", "true", "an error in a nested expression nulls that expression"),
    ("ksql.nested.error.set.null", "false", "an error in a nested expression nulls the whole select item"),
    ("ksql.timestamp.throw.on.invalid", "false", "a record with an invalid timestamp is logged and skipped"),
    ("ksql.timestamp.throw.on.invalid", "true", "a record with an invalid timestamp stops the query"),
    ("ksql.cast.strings.preserve.nulls", "true", "CAST of a null string stays null"),
    ("ksql.cast.strings.preserve.nulls", "false", "CAST of a null string gives the text 'null'"),
    ("ksql.streams.cache.max.bytes.buffering", "0", "every update is emitted"),
    ("ksql.streams.cache.max.bytes.buffering", "<n>", "updates are cached and flushed on commit"),
    ("ksql.query.persistent.max.bytes.buffering.total", "-1", "no shared cache limit"),
    ("ksql.query.persistent.max.bytes.buffering.total", "<n>", "a cache shared by persistent queries"),
    ("ksql.functions.collect_list.limit", "<n>", "COLLECT_LIST keeps at most n values"),
    ("ksql.functions.collect_set.limit", "<n>", "COLLECT_SET keeps at most n values"),
    ("ksql.json_sr.converter.deserializer.enabled", "true", "JSON_SR read through the Connect converter"),
    ("ksql.json_sr.converter.deserializer.enabled", "false", "JSON_SR read by the plain JSON deserializer"),
    ("ksql.suppress.buffer.size.bytes", "-1", "EMIT FINAL buffers without bound"),
    ("ksql.suppress.buffer.size.bytes", "<n>", "EMIT FINAL stops the query when its buffer is full"),
    ("ksql.any.key.name.enabled", "true|false", "key columns may be named other than ROWKEY (planning)"),
    ("ksql.rowpartition.rowoffset.enabled", "true|false", "ROWPARTITION/ROWOFFSET exist (planning; "
     "the saved sources carry pseudoColumnVersion)"),
    ("ksql.headers.columns.enabled", "true|false", "HEADERS columns may be declared (planning)"),
    ("ksql.persistence.wrap.single.values", "true|false", "default single-value wrapping (planning; "
     "the saved formats carry the features)"),
    ("ksql.suppress.enabled", "true|false", "EMIT FINAL may be planned (planning)"),
    ("ksql.key.format.enabled", "true|false", "KEY_FORMAT may be set (planning)"),
    ("ksql.streams.topology.optimization", "all|none", "Kafka Streams reuses source topics as changelogs"),
    ("ksql.streams.max.task.idle.ms", "<n>", "how long a task waits for an empty input before processing"),
)

# Saved step fields whose value changes the step's semantics (beyond its wire name).
STEP_FIELD_ROWS: tuple[tuple[str, str, str], ...] = (
    ("pseudoColumnVersion", "1", "ROWTIME, ROWPARTITION and ROWOFFSET are pseudo columns (7.1 and later)"),
    ("pseudoColumnVersion", "0", "only ROWTIME is a pseudo column: ROWPARTITION/ROWOFFSET may be value columns"),
    ("refinementInfo.outputRefinement", "FINAL", "tableSuppressV1 emits a window once it closes"),
    ("windowExpression.emitStrategy", "FINAL", "a windowed aggregate emits a window once it closes (7.3+)"),
    ("selectedKeys", "a subset of the keys", "a stream projection re-keys to the keys it selects (7.2+)"),
)


@cache
def _map() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads(MAP_FILE.read_text(encoding="utf-8"))
    return data


def _text(src: Path, relative: str) -> str:
    return (src / relative).read_text(encoding="utf-8")


def subtypes(src: Path, relative: str) -> list[tuple[str, str]]:
    """(class, wire name) of the ``@JsonSubTypes`` of one Java interface."""
    return _SUBTYPE.findall(_text(src, relative))


def json_fields(src: Path, relative: str) -> list[str]:
    """The ``@JsonProperty`` names of a class's constructors, in order, ``*`` for required."""
    path = src / relative
    if not path.is_file():
        return []
    fields: dict[str, bool] = {}
    for name, rest in _PROPERTY.findall(path.read_text(encoding="utf-8")):
        fields[name] = fields.get(name, False) or "required = true" in rest.replace(" ", " ")
    return [f"{n}*" if required else n for n, required in fields.items()]


def formats(src: Path) -> list[str]:
    """Format names of ``FormatFactory.fromName``."""
    text = _text(src, f"{SERDE_DIR}/FormatFactory.java")
    constants = _serde_constants(src)
    out = []
    for cls in re.findall(r"case (\w+)\.NAME:", text):
        file = next((src / SERDE_DIR).rglob(f"{cls}.java"))
        match = re.search(r"String NAME\s*=\s*\"(\w+)\"", file.read_text(encoding="utf-8"))
        if match:
            out.append(match.group(1))
    return out or sorted(set(constants.values()))


@cache
def _serde_constants(src: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for file in sorted((src / SERDE_DIR).rglob("*.java")):
        for name, value in _STRING_CONSTANT.findall(file.read_text(encoding="utf-8")):
            found.setdefault(name, value)
    return found


def format_properties(src: Path) -> dict[str, list[str]]:
    """Format property -> the files (formats) that support it (``SUPPORTED_PROPERTIES``)."""
    constants = _serde_constants(src)
    out: dict[str, list[str]] = {}
    for file in sorted((src / SERDE_DIR).rglob("*.java")):
        text = file.read_text(encoding="utf-8")
        for body in _SUPPORTED.findall(text):
            for ident in re.findall(r"\w+", body):
                value = constants.get(ident)
                if value is not None:
                    out.setdefault(value, []).append(file.stem.replace("Properties", "").replace("Format", ""))
    return out


def serde_features(src: Path) -> list[str]:
    return re.findall(r"^\s+([A-Z_]+)\(", _text(src, FEATURE_FILE), re.M)


# --------------------------------------------------------------------------- kspark's side


def _step_mapped(wire: str) -> bool:
    from engine.ksqldb_import.steps import TRANSLATORS

    return wire in TRANSLATORS


def _command_mapped(wire: str) -> bool:
    from engine.errors import UnsupportedFeatureError
    from engine.ksqldb_import.plan import import_entry

    try:
        import_entry({"@type": "ksqlPlanV1", "ddlCommand": {"@type": wire}}, 0, {})
    except UnsupportedFeatureError:
        return False
    except Exception:  # noqa: BLE001 - a known command failing on its missing fields is mapped
        return True
    return True


def _formats_accept(key: str = "KAFKA", value: str = "JSON", **extra: Any) -> bool:
    from engine.errors import UnsupportedFeatureError
    from engine.ksqldb_import.values import formats as read_formats

    node = {"keyFormat": {"format": key, "properties": extra.pop("key_properties", {})},
            "valueFormat": {"format": value, "properties": extra.pop("value_properties", {})}, **extra}
    try:
        read_formats(node, "the parity table")
    except UnsupportedFeatureError:
        return False
    return True


def _format_mapped(name: str) -> bool:
    from engine.plan.steps import FORMAT_NAMES

    return name in FORMAT_NAMES and _formats_accept(value=name)


def _property_mapped(name: str) -> bool:
    sample = {"unwrapPrimitives": "true"}.get(name, "1")
    return _formats_accept(value="PROTOBUF", value_properties={name: sample})


def _feature_mapped(name: str) -> bool:
    return _formats_accept(keyFeatures=[name]) and _formats_accept(valueFeatures=[name])


def _config_mapped(key: str, value: str) -> bool:
    from engine.ksqldb_import.plan import SEMANTIC_CONFIGS

    known = SEMANTIC_CONFIGS.get(key)
    if known is None:
        return True  # the importer passes it to the engine unchanged
    return all(v in known[0] for v in value.split("|"))


# --------------------------------------------------------------------------- tests


@cache
def _helper_texts() -> dict[str, str]:
    path = ROOT / "tests/engine/ksqldb_import/conftest.py"
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    return {
        node.name: ast.get_source_segment(text, node) or ""
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }


@cache
def _test_text(reference: str) -> str | None:
    """The source of the test ``path::name`` with the module's helpers it calls, or None."""
    path, _, name = reference.partition("::")
    name = name.split("[")[0]
    file = ROOT / path
    if not file.is_file():
        return None
    text = file.read_text(encoding="utf-8")
    tree = ast.parse(text)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if name not in functions:
        return None
    seen: set[str] = set()
    parts: list[str] = []
    module_text = "\n".join(ast.get_source_segment(text, n) or "" for n in tree.body if isinstance(n, ast.Assign))

    def collect(fn: str) -> None:
        if fn in seen or fn not in functions:
            return
        seen.add(fn)
        segment = ast.get_source_segment(text, functions[fn]) or ""
        parts.append(segment)
        for node in ast.walk(functions[fn]):
            if isinstance(node, ast.Call):
                if isinstance(node.func, ast.Name):
                    collect(node.func.id)
                elif isinstance(node.func, ast.Attribute) and node.func.attr in _helper_texts():
                    parts.append(_helper_texts()[node.func.attr])
        for decorator in functions[fn].decorator_list:
            parts.append(ast.get_source_segment(text, decorator) or "")

    collect(name)
    return "\n".join(parts) + "\n" + module_text


def judged(item: str, mapped: bool, token: str, source: str, detail: str) -> Row:
    """The row of ``item``: the map's test (checked) when kspark maps it, else missing."""
    entry = _map().get(item, {})
    if "reason" in entry:
        return Row(item=item, status="reasoned", source=source, reason=entry["reason"], detail=detail)
    if "missing" in entry:  # kspark passes it on, but does not do what ksqlDB does with it
        return Row(item=item, status="missing", source=source, reason=entry["missing"], detail=detail)
    if not mapped:
        return Row(item=item, status="missing", source=source,
                   reason="kspark's importer does not map it (the plan is reported unsupported)", detail=detail)
    test = entry.get("test")
    if not test:
        return Row(item=item, status="missing", source=source, reason="mapped, but no kspark test named", detail=detail)
    text = _test_text(test)
    if text is None:
        return Row(item=item, status="missing", source=source, reason=f"the named test {test} does not exist",
                   detail=detail)
    if token not in text:
        return Row(item=item, status="missing", source=source,
                   reason=f"the named test {test} does not exercise {token!r}", detail=detail)
    return Row(item=item, status="covered", source=source, test=test, detail=detail)


@table("steps")
def generate(src: Path) -> list[Row]:
    rows: list[Row] = []
    for cls, wire in subtypes(src, f"{PLAN_DIR}/ExecutionStep.java"):
        path = f"{PLAN_DIR}/{cls}.java"
        detail = "fields: " + ", ".join(json_fields(src, path))
        rows.append(judged(f"step: {wire}", _step_mapped(wire), f'"{wire}"', path, detail))
    for cls, wire in subtypes(src, f"{DDL_DIR}/DdlCommand.java"):
        path = f"{DDL_DIR}/{cls}.java"
        fields = json_fields(src, path) or json_fields(src, f"{DDL_DIR}/CreateSourceCommand.java")
        rows.append(judged(f"command: {wire}", _command_mapped(wire), f'"{wire}"', path,
                           "fields: " + ", ".join(fields)))
    for name in formats(src):
        rows.append(judged(f"format: {name}", _format_mapped(name), f'"{name}"', f"{SERDE_DIR}/FormatFactory.java", ""))
    for name, where in sorted(format_properties(src).items()):
        rows.append(judged(f"format property: {name}", _property_mapped(name), f'"{name}"', SERDE_DIR,
                           "formats: " + ", ".join(sorted(set(where)))))
    for name in serde_features(src):
        rows.append(judged(f"serde feature: {name}", _feature_mapped(name), f'"{name}"', FEATURE_FILE,
                           "keyFeatures and valueFeatures"))
    for key, value, meaning in SEMANTIC_CONFIG_ROWS:
        rows.append(judged(f"config: {key}={value}", _config_mapped(key, value), key, CONFIG_FILE, meaning))
    for name, value, meaning in STEP_FIELD_ROWS:
        rows.append(judged(f"step field: {name}={value}", True, name.split(".")[-1], PLAN_DIR, meaning))
    return rows
